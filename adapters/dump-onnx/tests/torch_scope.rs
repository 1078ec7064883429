//! The torch module scope of a real dynamo export (the committed transformer encoder):
//! read from each node's `metadata_props`, written into the kernel's source row by
//! `describe`, and the same text `node_rows` gives dump-tract; hostile metadata is an error.

use dump_onnx::{Model, TorchScope, describe, node_rows};

fn encoder() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/onnx/torch/encoder.onnx"
    ))
    .expect("the committed encoder export")
}

#[test]
fn dynamo_scopes_reach_the_source_rows() {
    let bytes = encoder();
    let model = Model::parse(bytes.clone()).unwrap();
    let scopes: Vec<(&str, TorchScope)> = model.torch_scopes().collect();
    assert_eq!(
        scopes.len(),
        model.graph.nodes.len(),
        "every node records a scope"
    );
    let (_, s) = scopes.iter().find(|(n, _)| *n == "node_MatMul_1").unwrap();
    assert_eq!(s.scope, "encoder.layers.0.self_attn");
    assert_eq!(s.call.as_deref(), Some("linear"));
    assert!(s.class.is_some());
    let g = describe(&model);
    let rows = node_rows(&bytes).unwrap();
    assert_eq!(rows.len(), model.graph.nodes.len());
    for ((node, kernel), (name, row)) in model.graph.nodes.iter().zip(&g.nodes).zip(&rows) {
        assert_eq!(&node.name, name);
        let source = kernel.source.as_deref().unwrap();
        let scope = TorchScope::of(node).unwrap().row();
        assert!(source.ends_with(&scope), "{source}");
        assert_eq!(row, &format!("; onnx op {:?}{scope}", node.op_type));
    }
}

#[test]
fn hostile_metadata_is_an_error_not_a_panic() {
    // ModelProto.graph { node { metadata_props: <bytes> } }
    let wrap = |field: u8, body: &[u8]| {
        let mut v = vec![(field << 3) | 2, body.len() as u8];
        v.extend_from_slice(body);
        v
    };
    for entry in [
        vec![0x0a, 0x02, 0xff, 0xfe], // key: not UTF-8
        vec![0x12, 0x05, b'a'],       // value: truncated
        vec![0x0a],                   // a tag without its length
    ] {
        let bytes = wrap(7, &wrap(1, &wrap(9, &entry)));
        assert!(Model::parse(bytes.clone()).is_err(), "{entry:?}");
        assert!(node_rows(&bytes).is_err(), "{entry:?}");
    }
    // A well-formed entry of unknown meaning is kept and ignored.
    let ok = wrap(7, &wrap(1, &wrap(9, &[0x0a, 0x01, b'k', 0x12, 0x01, b'v'])));
    let m = Model::parse(ok.clone()).unwrap();
    assert_eq!(
        m.graph.nodes[0].metadata,
        vec![("k".to_owned(), "v".to_owned())]
    );
    assert_eq!(TorchScope::of(&m.graph.nodes[0]), None);
    assert_eq!(node_rows(&ok).unwrap()[0].1, "; onnx op \"\"");
}
