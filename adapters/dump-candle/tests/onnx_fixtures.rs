//! dump-candle's ONNX evaluator on the ONNX fixtures: the full-dump check shared by every
//! adapter (order, counts, constants, every node output against onnx.reference at 1e-5,
//! numpy), the NaN hunt, and clear errors for missing inputs and bad models.

#[path = "../../testsupport/onnx_fixtures.rs"]
mod support;

use std::collections::HashMap;

use candle_core::Tensor;
use dump_candle::{CandleRunner, host_tensor};
use support::*;

fn candle_inputs(model: &str) -> HashMap<String, Tensor> {
    inputs(model)
        .into_iter()
        .map(|(name, f)| (name, host_tensor(f.dtype, &f.shape, &f.data).unwrap()))
        .collect()
}

fn run(tmp: &Tmp, model: &str, common: &str, steps: usize) -> CandleRunner {
    let mut d = dumper(&tmp.0, common);
    let mut r = CandleRunner::new(model_bytes(model), 0).unwrap();
    for _ in 0..steps {
        r.run(&mut d, candle_inputs(model)).unwrap();
    }
    d.close().unwrap();
    r
}

#[test]
fn cnn_two_full_steps_pass_the_adapter_check() {
    let tmp = Tmp::new("cnn");
    let r = run(&tmp, "cnn", r#", "saved_data": "full""#, 2);
    let diags: Vec<&str> = r.dump().diagnostics().collect();
    assert!(diags.is_empty(), "{diags:?}");
    check_full_dump("cnn", &tmp.rank(), r.dump().graph(), 2);
}

#[test]
fn nan_hunt_dumps_the_log_kernel_and_what_follows_it_only() {
    let tmp = Tmp::new("nan");
    let r = run(
        &tmp,
        "nan_source",
        r#", "saved_data": "tensor", "op_debug_mode": 3"#,
        1,
    );
    check_nan_hunt(&tmp.rank(), r.dump().graph());
}

#[test]
fn f16_cast_pair_matches_the_reference() {
    let tmp = Tmp::new("f16");
    let common = r#", "saved_data": "tensor", "input_output": 2"#;
    let r = run(&tmp, "cast_f16", common, 1);
    let dir = tmp.rank().join("Net/0/0");
    for n in &r.dump().graph().nodes {
        let value = &n.outputs[0].value;
        let got = kernel_file(&dir, &n.name, "output", 0);
        let want = fixtures().join(format!("cast_f16/expected/{value}.npy"));
        assert_close(value, &got, &want, 0.0);
    }
}

#[test]
fn bf16_cast_is_refused_by_candle_onnx_with_its_error() {
    // candle-onnx 0.11.1 has no Cast to bfloat16: the run fails with candle's error, and the
    // Dumper is left usable (nothing half-dumped).
    let tmp = Tmp::new("bf16");
    let mut d = dumper(&tmp.0, r#", "saved_data": "tensor""#);
    let mut r = CandleRunner::new(model_bytes("cast_bf16"), 0).unwrap();
    let e = r.run(&mut d, candle_inputs("cast_bf16")).unwrap_err();
    assert!(e.to_string().contains("Bfloat16"), "{e}");
    d.close().unwrap();
    assert!(npy_in(&tmp.rank().join("Net/0/0")).is_empty());
}

#[test]
fn missing_inputs_and_bad_models_are_clear_errors() {
    let tmp = Tmp::new("errors");
    let mut d = dumper(&tmp.0, r#", "saved_data": "statistic""#);
    let mut r = CandleRunner::new(model_bytes("cnn"), 0).unwrap();
    let e = r.run(&mut d, HashMap::new()).unwrap_err().to_string();
    assert!(e.contains("missing input x"), "{e}");
    let e = CandleRunner::new(b"not a model".to_vec(), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a valid ONNX model"), "{e}");
}

#[test]
fn stop_at_the_first_nan_returns_the_log_kernel() {
    let tmp = Tmp::new("stop");
    let mut d = stopping_dumper(&tmp.0, 2);
    let mut r = CandleRunner::new(model_bytes("nan_source"), 0).unwrap();
    let (shape, v) = finite_nan_source_input();
    let finite: HashMap<String, Tensor> = [(
        "x".to_owned(),
        Tensor::from_vec(v, shape, &candle_core::Device::Cpu).unwrap(),
    )]
    .into();
    for _ in 0..3 {
        r.run(&mut d, finite.clone()).unwrap();
    }
    let e = r.run(&mut d, candle_inputs("nan_source")).unwrap_err();
    let dump_candle::Error::Dump(dump_host::Error::NonFinite(at)) = &e else {
        panic!("expected a non-finite stop, got {e}")
    };
    d.close().unwrap();
    check_stop_at_log(&tmp.rank(), at, 3);
}

#[test]
fn save_kernel_args_writes_the_onnx_attributes() {
    let tmp = Tmp::new("args");
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true, "save_kernel_args": true}}}}"#,
        tmp.0.display()
    );
    let env = HashMap::<String, String>::new();
    let mut d = dump_host::Dumper::builder()
        .env(&env)
        .options(dump_host::DumpOptions::default())
        .open_json(text.into_bytes())
        .unwrap();
    let mut r = CandleRunner::new(model_bytes("cnn"), 0).unwrap();
    r.run(&mut d, candle_inputs("cnn")).unwrap();
    d.close().unwrap();
    let dir = tmp.rank().join("Net/0/0");
    let json = |prefix: &str| -> String {
        let f = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with(prefix) && n.ends_with(".json"))
            .unwrap_or_else(|| panic!("no {prefix}*.json in {}", dir.display()));
        std::fs::read_to_string(dir.join(f)).unwrap()
    };
    // MindSpore's format: sorted keys, 4-space indent, values as strings.
    assert_eq!(json("Flatten."), "{\n    \"axis\": \"1\"\n}");
    let conv = json("Conv.");
    assert!(conv.contains("\"kernel_shape\": \"[3, 3]\""), "{conv}");
    assert_eq!(json("Relu."), "null", "no attributes");
}

/// Exception dump (`op_debug_mode` 4): the Gather candle-onnx fails on (index 7 of 4) has its
/// inputs dumped, the computed one evaluated again by the graph cut before it; nothing else.
#[test]
fn exception_dump_writes_the_inputs_of_the_node_candle_fails_on() {
    // gather_oob: x -> Add (doubled) -> Gather at index 7 of 4 (fails) -> Mul.
    let tmp = Tmp::new("candle-exception");
    let mut d = dumper(&tmp.0, r#", "saved_data": "tensor", "op_debug_mode": 4"#);
    let mut r = CandleRunner::new(model_bytes("gather_oob"), 0).unwrap();
    let e = r
        .run(&mut d, candle_inputs("gather_oob"))
        .expect_err("index 7 of 4");
    assert!(e.to_string().contains("\"gather1\" (Gather"), "{e}");
    d.close().unwrap();
    check_gather_oob_exception(
        &tmp.rank(),
        &e.to_string(),
        &dump_onnx::OnnxRuntime::diagnostics(&r),
    );
}

/// The outputs of a run as (shape, f32 values), by name.
fn host_outputs(
    out: &std::collections::HashMap<String, dump_candle::candle_core::Tensor>,
) -> std::collections::HashMap<String, (Vec<usize>, Vec<f32>)> {
    out.iter()
        .map(|(k, t)| {
            let v = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            (k.clone(), (t.dims().to_vec(), v))
        })
        .collect()
}

/// Issue 28 item 2: the steps that dump nothing (disabled Dumper, rejected iteration, a
/// `kernels` filter rejecting every node) look up no value and, once the runner knows
/// beforehand (from a Dumper's second step), evaluate the model for its declared outputs
/// only; the shared check proves they dump nothing while the others still dump in full, on
/// one runner whose Dumpers change mid-run. Every step returns the plain run's outputs,
/// values included, and nothing else.
#[test]
fn steps_that_dump_nothing_skip_the_values_and_the_others_dump_in_full() {
    let tmp = Tmp::new("quiet");
    let mut r = CandleRunner::new(model_bytes("cnn"), 0).unwrap();
    let mut off = dump_host::Dumper::disabled();
    let plain = host_outputs(&r.run(&mut off, candle_inputs("cnn")).unwrap());
    assert_eq!(plain.len(), 1, "cnn's one output");
    // The second step of the same Dumper is known to dump nothing before it runs.
    let again = host_outputs(&r.run(&mut off, candle_inputs("cnn")).unwrap());
    assert!(
        again == plain,
        "a step evaluated for the declared output only"
    );
    check_quiet_steps(&tmp.0, &mut |d| {
        let out = host_outputs(&r.run(d, candle_inputs("cnn")).unwrap());
        assert_same_outputs(&out, &plain);
        assert!(out == plain, "the values of the plain run's outputs");
    });
}
