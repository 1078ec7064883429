//! The torch module scope of an ONNX node, as torch's dynamo exporter records it in the node's
//! `metadata_props`: `pkg.torch.onnx.name_scopes` (`['', 'layer2', 'layer2.0',
//! 'layer2.0.conv1', 'conv2d_5']`: the module path, then the FX node's name with its
//! counter) and `pkg.torch.onnx.class_hierarchy` (the module classes, then the aten op).
//! onnxscript's rewriter names the rule that made a node (`FuseBatchNormIntoConv`).
//!
//! [`TorchScope::row`] writes it into the kernel's source row of `graphs/*.ir`, after the
//! ONNX node, so that a dump pairs with a torch dump (msprobe's names) without the ONNX file
//! beside it: `; scope "layer2.0.bn1" (BatchNorm2d); call "conv2d_5"; fused`. dump-read
//! parses it back (`dump_read::graph::OnnxOrigin`).

use crate::{Error, Model, Node, wire::Fields};

/// Where a node came from in the torch model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TorchScope {
    /// The module's qualified name (`layer2.0.conv1`; empty for the top-level module).
    pub scope: String,
    /// The module's class, without its package (`Conv2d`), when recorded.
    pub class: Option<String>,
    /// The FX node's name (`conv2d_5`): the aten op and its counter in the exported program.
    pub call: Option<String>,
    /// The node is a fusion of several torch calls (onnxscript's `FuseBatchNormIntoConv`: a
    /// Conv whose output is the BatchNorm's).
    pub fused: bool,
}

/// The metadata key of the module path.
pub const NAME_SCOPES: &str = "pkg.torch.onnx.name_scopes";
/// The metadata key of the module classes.
pub const CLASS_HIERARCHY: &str = "pkg.torch.onnx.class_hierarchy";
/// The metadata key of the rewrite rule that made a node.
pub const REWRITE_RULE: &str = "pkg.onnxscript.rewriter.rule_name";

impl TorchScope {
    /// The scope recorded in `node`'s metadata; `None` without a readable `name_scopes`.
    pub fn of(node: &Node) -> Option<TorchScope> {
        let get = |k: &str| {
            node.metadata
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        let names = python_str_list(get(NAME_SCOPES)?)?;
        let classes = get(CLASS_HIERARCHY)
            .and_then(python_str_list)
            .unwrap_or_default();
        let n = names.len();
        if n == 0 {
            return None;
        }
        // The last entry is the FX node; the one before it the innermost module.
        let scope = if n >= 2 {
            names[n - 2].clone()
        } else {
            String::new()
        };
        let class = (classes.len() == n && n >= 2)
            .then(|| classes[n - 2].rsplit('.').next().unwrap_or("").to_owned())
            .filter(|c| !c.is_empty());
        let fused = get(REWRITE_RULE).is_some_and(|r| r.starts_with("Fuse"));
        Some(TorchScope {
            scope,
            class,
            call: Some(names[n - 1].clone()).filter(|c| !c.is_empty()),
            fused,
        })
    }

    /// The source-row text: `; scope "S" (Class); call "C"; fused` (the parts recorded).
    pub fn row(&self) -> String {
        let mut s = format!("; scope {:?}", self.scope);
        if let Some(c) = &self.class {
            s += &format!(" ({c})");
        }
        if let Some(c) = &self.call {
            s += &format!("; call {c:?}");
        }
        if self.fused {
            s += "; fused";
        }
        s
    }
}

/// A Python `repr` of a list of strings (`['', 'a', "b'c"]`); `None` for anything else.
pub fn python_str_list(s: &str) -> Option<Vec<String>> {
    let mut rest = s.trim().strip_prefix('[')?.trim_start();
    let mut out = Vec::new();
    if let Some(r) = rest.strip_prefix(']') {
        return r.trim().is_empty().then_some(out);
    }
    loop {
        let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
        let mut item = String::new();
        let mut chars = rest[1..].char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => item.push(chars.next()?.1),
                c if c == quote => break i + 2,
                c => item.push(c),
            }
        };
        out.push(item);
        rest = rest[end..].trim_start();
        if let Some(r) = rest.strip_prefix(']') {
            return r.trim().is_empty().then_some(out);
        }
        rest = rest.strip_prefix(',')?.trim_start();
    }
}

/// For every node of the main graph of the model in `bytes`: its name and the source-row
/// text a runtime that loads the model itself (tract) appends after the ONNX node:
/// `; onnx op "Conv"` and the [`TorchScope::row`] when the node records one. Only the nodes
/// are read (initializers are skipped, not copied); unnamed nodes are named as
/// [`Model::parse`] names them.
pub fn node_rows(bytes: &[u8]) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::new();
    for_each_node(bytes, |node| {
        let mut row = format!("; onnx op {:?}", node.op_type);
        if let Some(s) = TorchScope::of(&node) {
            row += &s.row();
        }
        out.push((node.name, row));
    })?;
    Ok(out)
}

/// One node's name and its attributes as `(name, text)` pairs.
pub type NodeArgs = (String, Vec<(String, String)>);

/// The attributes of every node of the main graph of the `.onnx` file `bytes`, as text (the
/// kernel arguments `save_kernel_args` writes), by node name; nodes without attributes are
/// left out. Read as [`node_rows`] reads: nodes only, unnamed ones named as
/// [`Model::parse`] names them.
pub fn node_args(bytes: &[u8]) -> Result<Vec<NodeArgs>, Error> {
    let mut out = Vec::new();
    for_each_node(bytes, |node| {
        if !node.attributes.is_empty() {
            out.push((node.name, node.attributes));
        }
    })?;
    Ok(out)
}

/// Calls `f` with every node of the main graph, in file order, unnamed ones named
/// `{op_type}_{index}`.
fn for_each_node(bytes: &[u8], mut f: impl FnMut(crate::model::Node)) -> Result<(), Error> {
    let mut index = 0usize;
    let mut m = Fields::new(bytes, "ModelProto");
    while let Some((n, v, _)) = m.next_field()? {
        let (7, crate::wire::Value::Bytes(g)) = (n, v) else {
            continue;
        };
        let mut gf = Fields::new(g, "GraphProto");
        while let Some((n, v, _)) = gf.next_field()? {
            if let (1, crate::wire::Value::Bytes(b)) = (n, v) {
                let mut node = crate::model::parse_node(b)?;
                if node.name.is_empty() {
                    node.name = format!("{}_{}", node.op_type, index);
                }
                index += 1;
                f(node);
            }
        }
    }
    Ok(())
}

impl Model {
    /// The [`TorchScope`] of every node of the main graph that records one, by node name.
    pub fn torch_scopes(&self) -> impl Iterator<Item = (&str, TorchScope)> {
        self.graph
            .nodes
            .iter()
            .filter_map(|n| TorchScope::of(n).map(|s| (n.name.as_str(), s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(meta: &[(&str, &str)]) -> Node {
        Node {
            name: "node_Conv_27".into(),
            op_type: "Conv".into(),
            metadata: meta
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Node::default()
        }
    }

    #[test]
    fn python_lists() {
        assert_eq!(
            python_str_list("['', 'layer1', \"a'b\", 'c\\'d']"),
            Some(vec!["".into(), "layer1".into(), "a'b".into(), "c'd".into()])
        );
        assert_eq!(python_str_list("[]"), Some(vec![]));
        for bad in [
            "",
            "[",
            "['a'",
            "['a' 'b']",
            "['a',]x",
            "[1]",
            "['a'] x",
            "['a\\",
        ] {
            assert_eq!(python_str_list(bad), None, "{bad}");
        }
    }

    #[test]
    fn dynamo_metadata_gives_scope_class_call_and_fusion() {
        let n = node(&[
            (
                NAME_SCOPES,
                "['', 'layer1', 'layer1.0', 'layer1.0.bn1', '_native_batch_norm_legit_no_training_1']",
            ),
            (
                CLASS_HIERARCHY,
                "['__main__.Net', 'torch.nn.modules.container.Sequential', '__main__.Block', 'torch.nn.modules.batchnorm.BatchNorm2d', 'aten._native_batch_norm_legit_no_training.default']",
            ),
            (REWRITE_RULE, "FuseBatchNormIntoConv"),
        ]);
        let s = TorchScope::of(&n).unwrap();
        assert_eq!(s.scope, "layer1.0.bn1");
        assert_eq!(s.class.as_deref(), Some("BatchNorm2d"));
        assert_eq!(
            s.call.as_deref(),
            Some("_native_batch_norm_legit_no_training_1")
        );
        assert!(s.fused);
        assert_eq!(
            s.row(),
            "; scope \"layer1.0.bn1\" (BatchNorm2d); call \"_native_batch_norm_legit_no_training_1\"; fused"
        );
    }

    #[test]
    fn top_level_and_missing_parts() {
        let s = TorchScope::of(&node(&[(NAME_SCOPES, "['', 'relu']")])).unwrap();
        assert_eq!(
            (s.scope.as_str(), s.class.clone(), s.fused),
            ("", None, false)
        );
        assert_eq!(s.row(), "; scope \"\"; call \"relu\"");
        assert_eq!(TorchScope::of(&node(&[])), None);
        assert_eq!(TorchScope::of(&node(&[(NAME_SCOPES, "not a list")])), None);
        assert_eq!(TorchScope::of(&node(&[(NAME_SCOPES, "[]")])), None);
        // a class list of another length than the scopes is not trusted
        let s = TorchScope::of(&node(&[
            (NAME_SCOPES, "['', 'fc', 'linear']"),
            (CLASS_HIERARCHY, "['x.Net']"),
        ]))
        .unwrap();
        assert_eq!((s.scope.as_str(), s.class), ("fc", None));
    }
}
