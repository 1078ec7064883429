//! Every committed ONNX fixture parses to the nodes its `nodes.txt` lists (written by the
//! generator from the `onnx` package's own reading of the model), and the output rewrite
//! keeps the model otherwise byte-identical.

use std::path::PathBuf;

use dump_onnx::{Model, with_outputs};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/onnx")
}

fn load(name: &str) -> Model {
    let p = fixtures().join(format!("{name}.onnx"));
    Model::parse(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

#[test]
fn nodes_match_the_generator_listing() {
    for name in ["cnn", "nan_source", "cast_f16", "cast_bf16"] {
        let m = load(name);
        let listing = std::fs::read_to_string(fixtures().join(name).join("nodes.txt")).unwrap();
        let ours: Vec<String> = m
            .graph
            .nodes
            .iter()
            .map(|n| {
                format!(
                    "{} {} {} -> {}",
                    n.name,
                    n.op_type,
                    n.inputs.join(","),
                    n.outputs.join(",")
                )
            })
            .collect();
        let theirs: Vec<&str> = listing.lines().collect();
        assert_eq!(ours, theirs, "{name}");
    }
}

#[test]
fn initializers_and_inputs_are_read() {
    let m = load("cnn");
    let w = m.initializer("conv1.weight").unwrap();
    assert_eq!(w.dims, [4, 1, 3, 3]);
    assert_eq!(w.data.as_ref().unwrap().len(), 36 * 4);
    assert_eq!(m.graph.inputs.len(), 1);
    assert_eq!(m.graph.inputs[0].name, "x");
    assert!(m.graph.inputs[0].fixed_shape().is_some());
    assert_eq!(m.graph.outputs[0].name, "probs");
}

#[test]
fn exposing_outputs_appends_them_and_keeps_the_rest() {
    let m = load("cnn");
    let names: Vec<&str> = m
        .graph
        .nodes
        .iter()
        .map(|n| n.outputs[0].as_str())
        .collect();
    let bytes = with_outputs(m.bytes(), &names).unwrap();
    let again = Model::parse(bytes.clone()).unwrap();
    let outs: Vec<&str> = again
        .graph
        .outputs
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(outs[0], "probs");
    assert_eq!(&outs[1..], &names[..]);
    assert_eq!(again.graph.nodes, m.graph.nodes);
    assert_eq!(again.graph.initializers, m.graph.initializers);
    // Exposing nothing gives the same bytes back.
    assert_eq!(with_outputs(m.bytes(), &[]).unwrap(), m.bytes());
}

#[test]
fn garbage_is_a_clear_error() {
    let e = Model::parse(b"\x0a\xff\xff\xff\xff\x0f".to_vec()).unwrap_err();
    assert!(e.to_string().contains("not a valid ONNX model"), "{e}");
    let e = Model::parse(Vec::new()).unwrap_err();
    assert!(e.to_string().contains("no graph"), "{e}");
}
