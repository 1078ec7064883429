//! The fuzzed entry point of dump-onnx's initializer rewrite (`dump_onnx::inline_data`) and
//! its invariants, shared by the cargo-fuzz target `fuzz_targets/onnx_inline.rs` and the replay
//! test `adapters/dump-onnx/tests/fuzz_corpus_onnx.rs`, which runs every file of
//! `fuzz/corpus/onnx_inline/` and `fuzz/seeds/onnx_inline/` through it in a normal `cargo test`.
//! (Kept apart from `checks.rs` so that the replay builds with `-p dump-onnx` alone.)
#![allow(dead_code)]

use std::path::PathBuf;

use dump_onnx::{Model, inline_data, node_args, node_rows, only_outputs};

/// One fuzzed entry point: takes arbitrary bytes, panics when an invariant breaks.
pub type Check = fn(&[u8]);

/// Every target of this file by name, for the replay test.
pub const TARGETS: [(&str, Check); 2] = [("onnx_inline", onnx_inline), ("onnx_cut", onnx_cut)];

/// The folder external data is looked up in: the exported-model fixtures (so the seed
/// `mlp_ext.onnx` finds `mlp_ext.onnx.data`).
fn base() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for up in ["..", "../.."] {
        let d = here.join(up).join("tests/fixtures/onnx/exported");
        if d.is_dir() {
            return d;
        }
    }
    here
}

/// A model's bytes: the rewrite never panics; under a small budget it never returns more; an
/// accepted model that parsed before parses after (the rewrite copies every field but the
/// main graph's initializers as it is, so a malformed node stays malformed: the fuzzer's first
/// finding was this invariant stated without "that parsed before"), the initializers keep
/// their names, types and dimensions, those that held data before hold the same data (an
/// initializer without any data, not even an external file, stays without: the second finding
/// was "every initializer now holds data", which such a tensor breaks; inlining external files
/// is tested in `inline.rs` and by the `mlp_ext.onnx` seed reaching this code), and the
/// rewrite is a fixed point (rewriting its output gives the same bytes).
pub fn onnx_inline(data: &[u8]) {
    let base = base();
    if let Ok(small) = inline_data(data, &base, 4096) {
        assert!(
            small.len() <= 4096,
            "over the budget: {} bytes",
            small.len()
        );
    }
    let Ok(out) = inline_data(data, &base, 1 << 26) else {
        return;
    };
    let again = inline_data(&out, &base, 1 << 26).expect("the rewrite accepts its output");
    assert_eq!(again, out, "not a fixed point");
    let Ok(before) = Model::parse(data.to_vec()) else {
        return;
    };
    let after = Model::parse(out.clone()).expect("an inlined model parses");
    assert_eq!(
        before.graph.initializers.len(),
        after.graph.initializers.len()
    );
    for (b, a) in before
        .graph
        .initializers
        .iter()
        .zip(&after.graph.initializers)
    {
        assert_eq!(
            (&b.name, b.data_type, &b.dims),
            (&a.name, a.data_type, &a.dims)
        );
        if b.data.is_some() {
            assert_eq!(b.data, a.data, "initializer {:?} changed", b.name);
        }
    }
}

/// A model's bytes through the readers of node facts and the cut exception dump makes:
/// `node_rows`, `node_args` and `only_outputs` never panic; when the model parses, cutting it
/// before one of its node outputs gives a model that parses, whose outputs are exactly that
/// value, whose nodes are some of the model's in the same order (the one producing the value
/// among them; compared by op type, inputs and outputs, since an unnamed node is named by its
/// position, which the cut changes), and cutting the result again changes nothing.
pub fn onnx_cut(data: &[u8]) {
    let _ = node_rows(data);
    let _ = node_args(data);
    let _ = only_outputs(data, &["x"]);
    let Ok(model) = Model::parse(data.to_vec()) else {
        return;
    };
    let Some(value) = model
        .graph
        .nodes
        .iter()
        .rev()
        .flat_map(|n| n.outputs.iter())
        .find(|o| !o.is_empty())
        .cloned()
    else {
        return;
    };
    let cut = only_outputs(data, &[&value]).expect("a model that parses can be cut");
    let after = Model::parse(cut.clone()).expect("a cut model parses");
    let outs: Vec<&str> = after
        .graph
        .outputs
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(outs, [value.as_str()]);
    assert!(
        after.graph.nodes.iter().any(|n| n.outputs.contains(&value)),
        "the producer of {value:?} was cut"
    );
    let mut rest = model.graph.nodes.iter();
    for kept in &after.graph.nodes {
        assert!(
            rest.any(|n| (&n.op_type, &n.inputs, &n.outputs)
                == (&kept.op_type, &kept.inputs, &kept.outputs)),
            "node {:?} is not one of the model's, in order",
            kept.name
        );
    }
    let again = only_outputs(&cut, &[&value]).expect("a cut model can be cut");
    assert_eq!(again, cut, "not a fixed point");
}
