//! The shared driver (`ExposedModel`) with a stand-in runtime whose values are the
//! onnx.reference intermediates of the cnn fixture: it exposes exactly the node outputs the
//! graph does not return, dumps every node's outputs with the runtime's values, names what a
//! runtime failed to return or cannot show, and hands back only the model's own outputs.

#[path = "../../testsupport/onnx_fixtures.rs"]
mod support;

use std::collections::HashMap;

use dump_core::DType;
use dump_host::TensorRef;
use dump_onnx::{Error, ExposedModel, Hand, Lookup, Model};
use support::*;

/// A stand-in runtime value: f32 data, or one that cannot be shown (a device tensor).
enum Value {
    Host(Vec<usize>, Vec<u8>),
    Elsewhere,
}

fn view(v: &Value, hand: &mut Hand<'_>) -> Lookup {
    match v {
        Value::Host(shape, bytes) => {
            Lookup::Done(hand(TensorRef::host(DType::Float32, shape, bytes)))
        }
        Value::Elsewhere => Lookup::Unsupported("values on the stand-in device are skipped".into()),
    }
}

/// Every value of one cnn evaluation: the input and the reference intermediates.
fn evaluation() -> HashMap<String, Value> {
    let mut values = HashMap::new();
    for (name, f) in inputs("cnn") {
        values.insert(name, Value::Host(f.shape, f.data));
    }
    let dir = fixtures().join("cnn/expected");
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let f = dump_npy::read_file(&p).unwrap();
        let name = file_name(&p).trim_end_matches(".npy").to_owned();
        values.insert(name, Value::Host(f.shape, f.data));
    }
    values
}

#[test]
fn exposes_the_node_outputs_the_graph_does_not_return() {
    let m = ExposedModel::new(Model::parse(model_bytes("cnn")).unwrap(), 0);
    let exposed: Vec<&str> = m.exposed().iter().map(String::as_str).collect();
    assert_eq!(
        exposed,
        ["conv1_out", "relu1_out", "pool1_out", "flat_out", "fc1_out"]
    );
    let again = Model::parse(m.exposed_bytes().unwrap()).unwrap();
    let outs: Vec<&str> = again
        .graph
        .outputs
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(outs[0], "probs");
    assert_eq!(&outs[1..], &exposed[..]);
    assert_eq!(again.graph.nodes, m.model().graph.nodes);
}

#[test]
fn collects_one_evaluation_into_one_step_and_returns_the_declared_outputs() {
    let tmp = Tmp::new("driver");
    let mut d = dumper(&tmp.0, r#", "saved_data": "full""#);
    let mut m = ExposedModel::new(Model::parse(model_bytes("cnn")).unwrap(), 0);
    let mut values = evaluation();
    m.check_inputs(|n| values.contains_key(n)).unwrap();
    m.dump_values(&mut d, &values, view).unwrap();
    d.close().unwrap();
    assert!(m.dump().diagnostics().next().is_none());
    // The shared adapter check: order, counts, constants, every node output against
    // onnx.reference, numpy loading every file.
    check_full_dump("cnn", &tmp.rank(), m.dump().graph(), 1);
    let out = m.take_outputs(|n| values.remove(n));
    assert_eq!(out.keys().collect::<Vec<_>>(), ["probs"]);
    assert!(
        values.contains_key("fc1_out"),
        "exposed values stay with the caller"
    );
}

#[test]
fn a_value_not_returned_or_not_shown_is_a_diagnostic_and_a_missing_input_an_error() {
    let tmp = Tmp::new("driver-gaps");
    let mut d = dumper(&tmp.0, r#", "saved_data": "statistic""#);
    let mut m = ExposedModel::new(Model::parse(model_bytes("cnn")).unwrap(), 0);
    let mut values = evaluation();
    values.remove("relu1_out");
    values.insert("pool1_out".into(), Value::Elsewhere);
    m.dump_values(&mut d, &values, view).unwrap();
    d.close().unwrap();
    let diags: Vec<&str> = m.dump().diagnostics().collect();
    assert_eq!(
        diags,
        [
            "value \"relu1_out\" was not produced by the runtime",
            "values on the stand-in device are skipped"
        ]
    );
    let rows = stat_rows(&tmp.rank().join("Net/0/0"));
    let has = |kernel: &str, io: &str| rows.keys().any(|(k, i, _)| k.contains(kernel) && i == io);
    assert!(has("conv1", "output") && has("fc1", "output"));
    assert!(!has("relu1", "output") && !has("pool1", "output"));
    // The missing input is named, with what the model expects.
    let e = m.check_inputs(|_| false).unwrap_err();
    assert!(matches!(e, Error::Model(_)), "{e:?}");
    assert!(e.blames_caller());
    assert_eq!(e.to_string(), "missing input x (the model's inputs: x)");
    assert!(m.take_outputs(|_| None::<Value>).is_empty());
}

/// A Dumper of every iteration with `dump_mode` 1 and these `kernels` entries.
fn filtered(root: &std::path::Path, kernels: &str) -> dump_host::Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 1, "path": "{}", "net_name": "Net",
        "iteration": "all", "input_output": 0, "kernels": [{kernels}], "support_device": [0],
        "saved_data": "statistic"}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    dump_host::Dumper::builder()
        .open_json(text.into_bytes())
        .unwrap()
}

/// `expose_for` narrows the exposure to the kernels a Dumper may dump (their outputs and the
/// node outputs they read), to nothing for a disabled Dumper or a filter that matches
/// nothing; after the first call it only widens (a second Dumper's kernels are added, its
/// absence removes nothing), and it reports a change only when the list changed.
#[test]
fn expose_for_narrows_once_then_only_widens() {
    let tmp = Tmp::new("expose-for");
    let m = ExposedModel::new(Model::parse(model_bytes("cnn")).unwrap(), 0);
    let all = m.exposed().to_vec();
    let names: Vec<String> = m
        .dump()
        .graph()
        .nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();
    let pool = names.iter().position(|n| n.contains("pool1")).unwrap();
    let nodes = &m.model().graph.nodes;
    let pool_values: Vec<String> = all
        .iter()
        .filter(|v| nodes[pool].inputs.contains(v) || nodes[pool].outputs.contains(v))
        .cloned()
        .collect();
    assert_eq!(pool_values.len(), 2, "{pool_values:?}");

    let mut m = m;
    let pool_only = filtered(&tmp.0, r#""name-regex(.*pool1.*)""#);
    assert!(m.expose_for(&pool_only));
    assert_eq!(m.exposed(), pool_values);
    assert!(!m.expose_for(&pool_only), "the same kernels: no change");
    // Nothing selected: nothing removed any more (it only widens now).
    assert!(!m.expose_for(&dump_host::Dumper::disabled()));
    assert_eq!(m.exposed(), pool_values);
    // Every kernel: back to all, in graph order.
    let every = filtered(&tmp.0.join("b"), "");
    assert!(m.expose_for(&every));
    assert_eq!(m.exposed(), all);
    m.expose_all();
    assert_eq!(m.exposed(), all);

    let mut fresh = ExposedModel::new(Model::parse(model_bytes("cnn")).unwrap(), 0);
    assert!(fresh.expose_for(&dump_host::Dumper::disabled()));
    assert!(fresh.exposed().is_empty());
    assert!(fresh.exposed_bytes().unwrap().len() < m.exposed_bytes().unwrap().len());
}
