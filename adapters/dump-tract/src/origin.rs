//! Which ONNX node each tract node came from.
//!
//! tract's ONNX import rewrites some nodes into several typed nodes (Gemm → `EinSum` + `Add`,
//! Relu → `Max` with a constant, LSTM → `Scan` and helpers); every node it makes for ONNX node
//! `N` is named `N` or `N.suffix`. [`OnnxNodes`] holds the ONNX node names and output value
//! names of the model as loaded, and [`OnnxNodes::origin`] finds the ONNX node a typed node's
//! name came from (the longest ONNX node name that is the whole name or a `.`-separated
//! prefix of it; ONNX names may hold dots themselves, as torch's `/layer1/layer1.0/Conv`).

use std::collections::HashMap;

use tract_onnx::prelude::InferenceModel;

/// The ONNX nodes of a model: name → output value names, in the order tract numbers them
/// (the node's non-empty outputs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OnnxNodes {
    outputs: HashMap<String, Vec<String>>,
    rows: HashMap<String, String>,
    args: HashMap<String, Vec<(String, String)>>,
}

impl OnnxNodes {
    /// The ONNX nodes of `model` as tract loaded it (before `into_typed`): every node that has
    /// inputs (graph inputs and initializers have none), with its outputs' value names.
    pub fn of(model: &InferenceModel) -> Self {
        let mut outputs = HashMap::new();
        for node in model.nodes() {
            if node.inputs.is_empty() {
                continue;
            }
            let names = (0..node.outputs.len())
                .map(|slot| {
                    model
                        .outlet_label(tract_onnx::prelude::OutletId::new(node.id, slot))
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect();
            outputs.insert(node.name.clone(), names);
        }
        OnnxNodes {
            outputs,
            rows: HashMap::new(),
            args: HashMap::new(),
        }
    }

    /// Adds, per ONNX node name, the text its kernels' source rows carry after the ONNX node
    /// (`dump_onnx::node_rows`: the ONNX op type and the torch module scope the exporter
    /// recorded, which tract does not keep); names of no node are ignored.
    pub fn with_rows<I>(mut self, rows: I) -> Self
    where
        I: IntoIterator<Item = (String, String)>,
    {
        for (node, row) in rows {
            if self.outputs.contains_key(&node) {
                self.rows.insert(node, row);
            }
        }
        self
    }

    /// The text given by [`with_rows`](OnnxNodes::with_rows) for ONNX node `node` (empty
    /// without one).
    pub fn row(&self, node: &str) -> &str {
        self.rows.get(node).map_or("", String::as_str)
    }

    /// ONNX nodes given by hand: `(node name, output value names)`.
    pub fn from_names<I, S>(nodes: I) -> Self
    where
        I: IntoIterator<Item = (S, Vec<S>)>,
        S: Into<String>,
    {
        OnnxNodes {
            outputs: nodes
                .into_iter()
                .map(|(n, o)| (n.into(), o.into_iter().map(Into::into).collect()))
                .collect(),
            rows: HashMap::new(),
            args: HashMap::new(),
        }
    }

    /// Adds, per ONNX node name, its attributes as text (`dump_onnx::node_args`), written as
    /// the kernel arguments of every typed node made from it when the config asks
    /// (`save_kernel_args`); names of no node are ignored.
    pub fn with_args<I>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = (String, Vec<(String, String)>)>,
    {
        for (node, a) in args {
            if self.outputs.contains_key(&node) {
                self.args.insert(node, a);
            }
        }
        self
    }

    /// The attributes given by [`with_args`](OnnxNodes::with_args) for ONNX node `node`
    /// (empty without any).
    pub fn args(&self, node: &str) -> &[(String, String)] {
        self.args.get(node).map_or(&[], Vec::as_slice)
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.outputs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty()
    }

    /// The ONNX node that typed node `name` came from: the longest ONNX node name equal to
    /// `name` or followed in it by a `.`; `None` for a node tract made from nothing named.
    pub fn origin<'a>(&'a self, name: &str) -> Option<&'a str> {
        if let Some((k, _)) = self.outputs.get_key_value(name) {
            return Some(k);
        }
        let mut end = name.len();
        while let Some(dot) = name[..end].rfind('.') {
            if let Some((k, _)) = self.outputs.get_key_value(&name[..dot]) {
                return Some(k);
            }
            end = dot;
        }
        None
    }

    /// The position of value `value` among the outputs of ONNX node `node`.
    pub fn output_slot(&self, node: &str, value: &str) -> Option<usize> {
        self.outputs.get(node)?.iter().position(|v| v == value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> OnnxNodes {
        OnnxNodes::from_names([
            ("fc1", vec!["fc1_out"]),
            ("/layer1/layer1.0/conv1/Conv", vec!["a"]),
            ("/layer1/layer1.0", vec!["b"]),
            ("lstm", vec!["Y", "Y_h", "Y_c"]),
        ])
    }

    #[test]
    fn origin_is_the_longest_dotted_prefix() {
        let n = nodes();
        assert_eq!(n.origin("fc1"), Some("fc1"));
        assert_eq!(n.origin("fc1.ab"), Some("fc1"));
        assert_eq!(n.origin("fc1.ab.c"), Some("fc1"));
        assert_eq!(n.origin("fc10"), None, "a prefix must end at a dot");
        assert_eq!(
            n.origin("/layer1/layer1.0/conv1/Conv.bias_add"),
            Some("/layer1/layer1.0/conv1/Conv")
        );
        assert_eq!(n.origin("/layer1/layer1.0.x"), Some("/layer1/layer1.0"));
        assert_eq!(n.origin("/layer1/layer1"), None);
        assert_eq!(n.origin(""), None);
    }

    #[test]
    fn output_slots_by_value() {
        let n = nodes();
        assert_eq!(n.output_slot("lstm", "Y_h"), Some(1));
        assert_eq!(n.output_slot("lstm", "nope"), None);
        assert_eq!(n.output_slot("nope", "Y"), None);
        assert_eq!(n.len(), 4);
    }

    #[test]
    fn rows_only_for_known_nodes() {
        let n = nodes().with_rows([
            (
                "fc1".to_owned(),
                "; onnx op \"Gemm\"; scope \"fc\"".to_owned(),
            ),
            ("ghost".to_owned(), "; onnx op \"Relu\"".to_owned()),
        ]);
        assert_eq!(n.row("fc1"), "; onnx op \"Gemm\"; scope \"fc\"");
        assert_eq!(n.row("ghost"), "");
        assert_eq!(n.row("lstm"), "");
    }
}
