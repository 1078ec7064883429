//! The same ONNX models through tract, candle-onnx and ONNX Runtime: the statistic rows of
//! every ONNX value (paired through each adapter's graph description) agree within 1e-5
//! relative, with the same dtype and shape.
//!
//! Needs libonnxruntime (`ORT_DYLIB_PATH`): without it the test prints why it skips, and
//! fails when `CI=true`.

#[path = "../../adapters/testsupport/onnx_fixtures.rs"]
mod support;

use std::collections::HashMap;

use dump_host::{graph::Graph, layout::sanitize};
use dump_tract::{
    TractDump,
    tract_onnx::{self, prelude::*},
};
use support::*;

const COMMON: &str =
    r#", "saved_data": "statistic", "statistic_category": ["max", "min", "avg", "l2norm"]"#;

fn tract_run(model: &str, root: &Tmp) -> Graph {
    let plan = tract_onnx::onnx()
        .model_for_path(fixtures().join(format!("{model}.onnx")))
        .unwrap()
        .into_typed()
        .unwrap()
        .into_runnable()
        .unwrap();
    let mut state = plan.spawn().unwrap();
    let mut d = dumper(&root.0, COMMON);
    let mut td = TractDump::new(&plan, 0);
    let ins: TVec<TValue> = inputs(model)
        .into_iter()
        .map(|(_, f)| {
            let v: Vec<f32> = f
                .data
                .chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            Tensor::from_shape(&f.shape, &v).unwrap().into_tvalue()
        })
        .collect();
    td.run(&mut d, &mut state, ins).unwrap();
    d.close().unwrap();
    td.graph().clone()
}

fn candle_run(model: &str, root: &Tmp) -> Graph {
    let mut d = dumper(&root.0, COMMON);
    let mut r = dump_candle::onnx::OnnxRunner::new(model_bytes(model), 0).unwrap();
    let ins = inputs(model)
        .into_iter()
        .map(|(n, f)| {
            let t = dump_candle::convert::host_tensor(f.dtype, &f.shape, &f.data).unwrap();
            (n, t)
        })
        .collect();
    r.run(&mut d, ins).unwrap();
    d.close().unwrap();
    r.dump().graph().clone()
}

fn ort_run(env: &dump_ort::ort::environment::Environment, model: &str, root: &Tmp) -> Graph {
    let mut d = dumper(&root.0, COMMON);
    let mut r = dump_ort::OrtRunner::new(env, model_bytes(model), 0).unwrap();
    let ins = inputs(model)
        .into_iter()
        .map(|(n, f)| (n, dump_ort::host_value(f.dtype, &f.shape, &f.data).unwrap()))
        .collect::<Vec<_>>();
    r.run(&mut d, &ins).unwrap();
    d.close().unwrap();
    r.dump().graph().clone()
}

/// The statistic row of ONNX value `value` in a dump described by `g`.
fn row_of<'a>(
    rows: &'a HashMap<(String, String, String), HashMap<String, String>>,
    g: &Graph,
    value: &str,
) -> Option<&'a HashMap<String, String>> {
    let (node, slot) = g.producer(value)?;
    let key = (
        sanitize(&g.nodes[node].name),
        "output".to_owned(),
        slot.to_string(),
    );
    rows.get(&key)
}

fn agree(a: &str, b: &str) -> bool {
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) if x.is_finite() && y.is_finite() => {
            (x - y).abs() <= 1e-5 * x.abs().max(y.abs()) || x == y
        }
        // NaN: runtimes differ in the sign of the NaN their Log returns (candle `-nan`, tract
        // `nan`), which the csv prints; any NaN agrees with any NaN. inf: the same text.
        _ => a.trim_start_matches('-') == "nan" && b.trim_start_matches('-') == "nan" || a == b,
    }
}

#[test]
fn tract_candle_and_ort_agree_on_every_onnx_value() {
    if !onnx_runtime_available() {
        return;
    }
    let env = dump_ort::environment().expect("ONNX Runtime loads");
    for model in ["cnn", "nan_source"] {
        let (t, c, o) = (
            Tmp::new(&format!("{model}-tract")),
            Tmp::new(&format!("{model}-candle")),
            Tmp::new(&format!("{model}-ort")),
        );
        let graphs = [
            ("tract", tract_run(model, &t), &t),
            ("candle", candle_run(model, &c), &c),
            ("ort", ort_run(&env, model, &o), &o),
        ];
        let rows: Vec<_> = graphs
            .iter()
            .map(|(_, _, tmp)| stat_rows(&tmp.rank().join("Net/0/0")))
            .collect();
        let values: Vec<String> = graphs[2]
            .1
            .nodes
            .iter()
            .flat_map(|n| n.outputs.iter().map(|o| o.value.clone()))
            .collect();
        assert!(!values.is_empty());
        for value in &values {
            let found: Vec<_> = graphs
                .iter()
                .zip(&rows)
                .map(|((name, g, _), r)| {
                    let row = row_of(r, g, value)
                        .unwrap_or_else(|| panic!("{model}: {name} has no row for {value}"));
                    (*name, row)
                })
                .collect();
            let (first, base) = found[0];
            for (name, row) in &found[1..] {
                for col in ["Data Type", "Shape"] {
                    assert_eq!(
                        row[col], base[col],
                        "{model} {value} {col}: {name} vs {first}"
                    );
                }
                for col in ["Max Value", "Min Value", "Avg Value", "L2Norm Value"] {
                    assert!(
                        agree(&row[col], &base[col]),
                        "{model} {value} {col}: {name} {} vs {first} {}",
                        row[col],
                        base[col]
                    );
                }
            }
        }
    }
}
