//! Rewrites a model so that chosen values become graph outputs: each is appended to
//! `GraphProto.output` as a `ValueInfoProto` holding only its name (the runtime infers the
//! type). Every other byte of the model is copied through unchanged.

use crate::{
    Error,
    wire::{Fields, Value, put_bytes},
};

/// `model` (an `.onnx` file's bytes) with `names` appended to the main graph's outputs.
pub fn with_outputs(model: &[u8], names: &[&str]) -> Result<Vec<u8>, Error> {
    rewrite_graph(model, |graph| {
        let mut g = Vec::with_capacity(graph.len() + names.len() * 32);
        g.extend_from_slice(graph);
        append_outputs(&mut g, names);
        Ok(g)
    })
}

/// `model` with its `GraphProto` replaced by `edit` of it; every other byte copied. A second
/// graph, or one that is not a message, is an error, as for [`Model::parse`](crate::Model::parse).
fn rewrite_graph(
    model: &[u8],
    edit: impl FnOnce(&[u8]) -> Result<Vec<u8>, Error>,
) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(model.len() + 256);
    let mut edit = Some(edit);
    let mut f = Fields::new(model, "ModelProto");
    while let Some((n, v, raw)) = f.next_field()? {
        match (n, v, edit.take()) {
            (7, Value::Bytes(graph), Some(e)) => put_bytes(&mut out, 7, &e(graph)?),
            (7, _, e) => {
                return Err(Error::Model(if e.is_none() {
                    crate::model::TWO_GRAPHS.into()
                } else {
                    "ModelProto.graph is not a message".into()
                }));
            }
            (_, _, e) => {
                edit = e;
                out.extend_from_slice(raw);
            }
        }
    }
    if edit.is_some() {
        return Err(Error::Model("the model has no graph".into()));
    }
    Ok(out)
}

/// Appends a `ValueInfoProto` holding only its name to `graph`'s outputs for each of `names`.
fn append_outputs(graph: &mut Vec<u8>, names: &[&str]) {
    let mut vi = Vec::new();
    for name in names {
        vi.clear();
        put_bytes(&mut vi, 1, name.as_bytes());
        put_bytes(graph, 12, &vi);
    }
}

/// `model` cut before whatever `names` do not need: its main graph's outputs are `names`, and
/// only the nodes those values depend on are kept (in their order). A runtime then evaluates
/// only them, even with graph optimisation off: the values a failing node was given can be
/// computed again without running it (exception dump). Nodes whose subgraphs read values of
/// the outer graph are kept only for the inputs they list.
pub fn only_outputs(model: &[u8], names: &[&str]) -> Result<Vec<u8>, Error> {
    rewrite_graph(model, |graph| cut_graph(graph, names))
}

/// The `GraphProto` bytes `graph` with outputs `names` and only the nodes they need.
fn cut_graph(graph: &[u8], names: &[&str]) -> Result<Vec<u8>, Error> {
    // One pass over the fields: the nodes parsed for their inputs and outputs, and every
    // field kept raw with the index of its node (`None`: not a node), so the second loop
    // below sees exactly the nodes this one parsed.
    let mut nodes: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    let mut fields: Vec<(u32, &[u8], Option<usize>)> = Vec::new();
    let mut gf = Fields::new(graph, "GraphProto");
    while let Some((gn, gv, graw)) = gf.next_field()? {
        let node = match (gn, gv) {
            (1, Value::Bytes(b)) => {
                let node = crate::model::parse_node(b)?;
                nodes.push((node.inputs, node.outputs));
                Some(nodes.len() - 1)
            }
            _ => None,
        };
        fields.push((gn, graw, node));
    }
    // Backwards from the wanted values (ONNX nodes are in topological order).
    let mut needed: std::collections::HashSet<String> =
        names.iter().map(|n| (*n).to_owned()).collect();
    let mut keep = vec![false; nodes.len()];
    for (i, (ins, outs)) in nodes.iter().enumerate().rev() {
        if outs.iter().any(|o| needed.contains(o)) {
            keep[i] = true;
            needed.extend(ins.iter().filter(|x| !x.is_empty()).cloned());
        }
    }
    let mut g = Vec::with_capacity(graph.len() + names.len() * 32);
    for (gn, graw, node) in fields {
        match (gn, node) {
            (_, Some(i)) if !keep[i] => {}
            (12, None) => {} // the old outputs
            _ => g.extend_from_slice(graw),
        }
    }
    append_outputs(&mut g, names);
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Model;

    /// A model `x -> A -> a -> B -> y`, built with the crate's own wire writer.
    fn two_nodes() -> Vec<u8> {
        two_nodes_after(&[])
    }

    /// [`two_nodes`] with the raw fields `first` at the start of its graph.
    fn two_nodes_after(first: &[u8]) -> Vec<u8> {
        let node = |op: &str, name: &str, i: &str, o: &str| {
            let mut n = Vec::new();
            put_bytes(&mut n, 1, i.as_bytes());
            put_bytes(&mut n, 2, o.as_bytes());
            put_bytes(&mut n, 3, name.as_bytes());
            put_bytes(&mut n, 4, op.as_bytes());
            n
        };
        let vi = |name: &str| {
            let mut v = Vec::new();
            put_bytes(&mut v, 1, name.as_bytes());
            v
        };
        let mut g = first.to_vec();
        put_bytes(&mut g, 1, &node("Relu", "A", "x", "a"));
        put_bytes(&mut g, 1, &node("Neg", "B", "a", "y"));
        put_bytes(&mut g, 11, &vi("x"));
        put_bytes(&mut g, 12, &vi("y"));
        let mut m = Vec::new();
        put_bytes(&mut m, 7, &g);
        m
    }

    #[test]
    fn only_outputs_cuts_the_graph_before_what_the_outputs_do_not_need() {
        let m = Model::parse(only_outputs(&two_nodes(), &["a"]).unwrap()).unwrap();
        let outs: Vec<&str> = m.graph.outputs.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(outs, ["a"]);
        let nodes: Vec<&str> = m.graph.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(nodes, ["A"], "B is not needed for a");
        assert_eq!(m.graph.inputs.len(), 1, "the graph's inputs stay");
        let all = Model::parse(only_outputs(&two_nodes(), &["y"]).unwrap()).unwrap();
        assert_eq!(all.graph.nodes.len(), 2, "y needs both");
        let w = Model::parse(with_outputs(&two_nodes(), &["a"]).unwrap()).unwrap();
        assert_eq!(w.graph.outputs.len(), 2, "with_outputs appends");
        assert!(only_outputs(b"", &["a"]).is_err(), "no graph");
    }

    /// A graph field 1 (`node`) that is not a message (a varint here) is not a node: the cut
    /// copies it through and keeps counting the real nodes (it once counted it as one and
    /// indexed past the nodes it had parsed: a panic the `onnx_cut` fuzz target found).
    #[test]
    fn a_node_field_of_another_wire_type_is_not_counted_as_a_node() {
        let model = two_nodes_after(&[0x08, 0x05]); // field 1, varint 5
        let cut = only_outputs(&model, &["a"]).unwrap();
        let mut f = Fields::new(&cut, "ModelProto");
        let (n, v, _) = f.next_field().unwrap().unwrap();
        let Value::Bytes(graph) = v else {
            panic!("field {n} is not the graph")
        };
        assert!(graph.starts_with(&[0x08, 0x05]), "the odd field is kept");
        let mut nodes = 0;
        let mut gf = Fields::new(graph, "GraphProto");
        while let Some((gn, gv, _)) = gf.next_field().unwrap() {
            nodes += usize::from(matches!((gn, gv), (1, Value::Bytes(_))));
        }
        assert_eq!(nodes, 1, "only A is needed for a");
        let all = only_outputs(&model, &["y"]).unwrap();
        assert!(all.len() > cut.len(), "y keeps both nodes");
    }
}
