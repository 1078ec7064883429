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
    let mut r = dump_candle::CandleRunner::new(model_bytes(model), 0).unwrap();
    let ins = inputs(model)
        .into_iter()
        .map(|(n, f)| {
            let t = dump_candle::host_tensor(f.dtype, &f.shape, &f.data).unwrap();
            (n, t)
        })
        .collect();
    r.run(&mut d, ins).unwrap();
    d.close().unwrap();
    r.dump().graph().clone()
}

fn ort_run(model: &str, root: &Tmp) -> Graph {
    let mut d = dumper(&root.0, COMMON);
    let mut r = dump_ort::OrtRunner::new(model_bytes(model), 0).unwrap();
    let ins = inputs(model)
        .into_iter()
        .map(|(n, f)| {
            (
                n,
                dump_ort::host_tensor(f.dtype, &f.shape, &f.data).unwrap(),
            )
        })
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
    dump_ort::environment().expect("ONNX Runtime loads");
    for model in ["cnn", "nan_source"] {
        let (t, c, o) = (
            Tmp::new(&format!("{model}-tract")),
            Tmp::new(&format!("{model}-candle")),
            Tmp::new(&format!("{model}-ort")),
        );
        let graphs = [
            ("tract", tract_run(model, &t), &t),
            ("candle", candle_run(model, &c), &c),
            ("ort", ort_run(model, &o), &o),
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

/// The three runtimes as `opdump run` sees them: `dyn dump_onnx::OnnxRuntime`, each loaded by
/// its registered constructor. They declare the same input, take the same host input, dump a
/// step, and return the model's output `probs` equal to onnx.reference's (atol 1e-5); a file
/// that is not ONNX blames the caller, an input of a type the runtime lacks names the input,
/// and a step before the inputs are set is an error, not a panic.
#[test]
fn every_runtime_has_the_one_shape() {
    use dump_onnx::{Error, HostTensor, LoadOptions, OnnxRuntime, load_boxed};
    type Load = fn(&std::path::Path, &LoadOptions) -> Result<Box<dyn OnnxRuntime>, Error>;
    let mut runtimes: Vec<(&str, Load)> = vec![
        ("tract", load_boxed::<dump_tract::TractRunner>),
        ("candle", load_boxed::<dump_candle::CandleRunner>),
    ];
    if onnx_runtime_available() {
        runtimes.push(("ort", load_boxed::<dump_ort::OrtRunner>));
    }
    let model = fixtures().join("cnn.onnx");
    let (want_shape, want) = values(&fixtures().join("cnn/expected/probs.npy"));
    let x = inputs("cnn").remove(0).1;
    let feed = || HostTensor {
        name: "x".into(),
        dtype: x.dtype,
        shape: x.shape.clone(),
        data: x.data.clone(),
    };
    for (name, load) in runtimes {
        let tmp = Tmp::new(&format!("shape-{name}"));
        let mut r = load(&model, &LoadOptions::graph(3)).unwrap();
        assert_eq!(r.name(), name);
        let declared = r.inputs();
        assert_eq!(declared.len(), 1, "{name}");
        assert_eq!(declared[0].name, "x", "{name}");
        assert_eq!(declared[0].dtype, Some(x.dtype), "{name}");
        assert_eq!(declared[0].shape.as_deref(), Some(&x.shape[..]), "{name}");
        assert!(r.outputs().unwrap().is_empty(), "{name}: no step yet");

        // candle has no bool tensors: an input error naming the input, the caller's fault.
        if name == "candle" {
            let mut bad = load(&model, &LoadOptions::default()).unwrap();
            let bools = HostTensor {
                name: "x".into(),
                dtype: dump_core::DType::Bool,
                shape: x.shape.clone(),
                data: vec![1; x.shape.iter().product()],
            };
            let e = bad.set_inputs(vec![bools]).unwrap_err();
            assert!(
                matches!(e, Error::Input { ref name, .. } if name == "x"),
                "{e}"
            );
            assert!(e.blames_caller(), "{e}");
        }

        let mut d = dumper(&tmp.0, COMMON);
        r.set_inputs(vec![feed()]).unwrap();
        let kernels = r.step(&mut d).unwrap();
        d.close().unwrap();
        assert!(kernels >= 6, "{name}: {kernels} kernels");
        assert!(r.diagnostics().is_empty(), "{name}: {:?}", r.diagnostics());
        // Graph 3 as asked: its step directory holds the dump.
        assert!(!stat_rows(&tmp.rank().join("Net/3/0")).is_empty(), "{name}");
        let out = r.outputs().unwrap();
        assert_eq!(out.len(), 1, "{name}");
        assert_eq!(out[0].name, "probs", "{name}");
        assert_eq!(out[0].dtype, dump_core::DType::Float32);
        assert_eq!(out[0].shape, want_shape, "{name}");
        let got: Vec<f64> = out[0]
            .data
            .chunks(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
            .collect();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-5, "{name}: probs {g} vs {w}");
        }

        let garbage = tmp.0.join("garbage.onnx");
        std::fs::write(&garbage, b"\x0a\xff\xff\xff\xff\x0f not onnx").unwrap();
        let e = load(&garbage, &LoadOptions::default()).err().unwrap();
        assert!(e.blames_caller(), "{name}: {e}");
        assert!(
            e.to_string().contains("not a valid ONNX model"),
            "{name}: {e}"
        );
    }
    // tract plans for the inputs: a step before them is an error.
    let mut t = load_boxed::<dump_tract::TractRunner>(&model, &LoadOptions::default()).unwrap();
    let tmp = Tmp::new("shape-early");
    let mut d = dumper(&tmp.0, COMMON);
    let e = t.step(&mut d).unwrap_err();
    assert!(e.to_string().contains("not prepared"), "{e}");
    assert!(!e.blames_caller());
}
