//! dump-ort on the ONNX fixtures: the full-dump check shared by every adapter (order, counts,
//! constants, every node output against onnx.reference at 1e-5, numpy), the NaN hunt, the
//! f16/bf16 cast pairs, and clear errors.
//!
//! Needs libonnxruntime (`ORT_DYLIB_PATH`, see ci/fetch-ort.sh): without it each test prints
//! why it skips, and fails when `CI=true`.

#[path = "../../testsupport/onnx_fixtures.rs"]
mod support;

use dump_ort::{OrtRunner, environment, host_tensor};
use support::*;

/// Whether ONNX Runtime loads; `false` (the reason printed) when the library is not
/// available outside CI; on CI a missing library fails the test.
fn available() -> bool {
    onnx_runtime_available()
        && environment()
            .map(drop)
            .map_or_else(|e| panic!("{e}"), |()| true)
}

fn ort_inputs(model: &str) -> Vec<(String, dump_ort::ort::value::DynValue)> {
    inputs(model)
        .into_iter()
        .map(|(name, f)| (name, host_tensor(f.dtype, &f.shape, &f.data).unwrap()))
        .collect()
}

fn run(tmp: &Tmp, model: &str, common: &str, steps: usize) -> OrtRunner {
    let mut d = dumper(&tmp.0, common);
    let mut r = OrtRunner::new(model_bytes(model), 0).unwrap();
    let ins = ort_inputs(model);
    for _ in 0..steps {
        r.run(&mut d, &ins).unwrap();
    }
    d.close().unwrap();
    r
}

#[test]
fn cnn_two_full_steps_pass_the_adapter_check() {
    if !available() {
        return;
    }
    let tmp = Tmp::new("cnn");
    let r = run(&tmp, "cnn", r#", "saved_data": "full""#, 2);
    let diags: Vec<&str> = r.dump().diagnostics().collect();
    assert!(diags.is_empty(), "{diags:?}");
    check_full_dump("cnn", &tmp.rank(), r.dump().graph(), 2);
}

#[test]
fn nan_hunt_dumps_the_log_kernel_and_what_follows_it_only() {
    if !available() {
        return;
    }
    let tmp = Tmp::new("nan");
    let common = r#", "saved_data": "tensor", "op_debug_mode": 3"#;
    let r = run(&tmp, "nan_source", common, 1);
    check_nan_hunt(&tmp.rank(), r.dump().graph());
}

#[test]
fn f16_and_bf16_cast_pairs_match_the_reference() {
    if !available() {
        return;
    }
    for model in ["cast_f16", "cast_bf16"] {
        let tmp = Tmp::new(model);
        let common = r#", "saved_data": "tensor", "input_output": 2"#;
        let r = run(&tmp, model, common, 1);
        let dir = tmp.rank().join("Net/0/0");
        for n in &r.dump().graph().nodes {
            let value = &n.outputs[0].value;
            let got = kernel_file(&dir, &n.name, "output", 0);
            let want = fixtures().join(format!("{model}/expected/{value}.npy"));
            assert_close(value, &got, &want, 0.0);
        }
    }
}

#[test]
fn missing_inputs_and_bad_models_are_clear_errors() {
    if !available() {
        return;
    }
    let tmp = Tmp::new("errors");
    let mut d = dumper(&tmp.0, r#", "saved_data": "statistic""#);
    let mut r = OrtRunner::new(model_bytes("cnn"), 0).unwrap();
    let e = r.run(&mut d, &[]).unwrap_err().to_string();
    assert!(e.contains("missing input x"), "{e}");
    let e = OrtRunner::new(b"not a model".to_vec(), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a valid ONNX model"), "{e}");
    // A wrong shape is ONNX Runtime's error, naming the input.
    let x = host_tensor(dump_core::DType::Float32, &[1, 1, 2, 2], &[0; 16]).unwrap();
    let e = r.run(&mut d, &[("x".into(), x)]).unwrap_err().to_string();
    assert!(e.contains("x"), "{e}");
}

#[test]
fn stop_at_the_first_nan_returns_the_log_kernel() {
    if !available() {
        return;
    }
    let tmp = Tmp::new("stop");
    let mut d = stopping_dumper(&tmp.0, 2);
    let mut r = OrtRunner::new(model_bytes("nan_source"), 0).unwrap();
    let (shape, v) = finite_nan_source_input();
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let finite = vec![(
        "x".to_owned(),
        host_tensor(dump_core::DType::Float32, &shape, &bytes).unwrap(),
    )];
    for _ in 0..3 {
        r.run(&mut d, &finite).unwrap();
    }
    let e = r.run(&mut d, &ort_inputs("nan_source")).unwrap_err();
    let dump_ort::Error::Dump(dump_host::Error::NonFinite(at)) = &e else {
        panic!("expected a non-finite stop, got {e}")
    };
    d.close().unwrap();
    check_stop_at_log(&tmp.rank(), at, 3);
}

#[test]
fn exception_dump_writes_the_inputs_of_the_node_onnx_runtime_fails_on() {
    if !available() {
        return;
    }
    // gather_oob: x -> Add (doubled) -> Gather at index 7 of 4 (fails) -> Mul.
    let tmp = Tmp::new("ort-exception");
    let mut d = dumper(&tmp.0, r#", "saved_data": "tensor", "op_debug_mode": 4"#);
    let mut r = OrtRunner::new(model_bytes("gather_oob"), 0).unwrap();
    let e = r.run(&mut d, &ort_inputs("gather_oob")).unwrap_err();
    assert!(e.to_string().contains("gather1"), "{e}");
    d.close().unwrap();
    check_gather_oob_exception(
        &tmp.rank(),
        &e.to_string(),
        &dump_onnx::OnnxRuntime::diagnostics(&r),
    );
}

/// A `kernels` filter narrows what ONNX Runtime returns (issue 28: a filter that rejects
/// everything must cost nothing measurable, and exposed outputs are kept alive by ONNX
/// Runtime): with `name-regex(.*pool1.*)` the session returns only pool1's input and output
/// beside the model's own output, and pool1's files equal, byte for byte, those of an
/// unfiltered run; a filter that matches nothing (or a disabled Dumper) runs the model as
/// it is, with the same outputs.
#[test]
fn a_kernels_filter_narrows_what_onnx_runtime_returns() {
    if !available() {
        return;
    }
    let all = Tmp::new("filter-all");
    let full = run(&all, "cnn", r#", "saved_data": "full""#, 1);
    let every = full.exposed_outputs().len();
    assert!(every >= 5, "{:?}", full.exposed_outputs());
    let filtered = |tag: &str, kernels: &str| {
        let tmp = Tmp::new(tag);
        let text = format!(
            r#"{{"common_dump_settings": {{"dump_mode": 1, "path": "{}", "net_name": "Net",
            "iteration": "all", "input_output": 0, "kernels": [{kernels}],
            "support_device": [0], "saved_data": "full"}},
            "e2e_dump_settings": {{"enable": true}}}}"#,
            tmp.0.display()
        );
        let mut d = dump_host::Dumper::builder()
            .open_json(text.into_bytes())
            .unwrap();
        let mut r = OrtRunner::new(model_bytes("cnn"), 0).unwrap();
        assert_eq!(r.exposed_outputs().len(), every, "before the first step");
        let out = r.run(&mut d, &ort_inputs("cnn")).unwrap().into_map();
        d.close().unwrap();
        (tmp, r, out)
    };
    let (tmp, r, out) = filtered("filter-pool", r#""name-regex(.*pool1.*)""#);
    assert_eq!(r.exposed_outputs().len(), 2, "{:?}", r.exposed_outputs());
    assert_eq!(out.len(), 1, "the model's own output");
    let dir = tmp.rank().join("Net/0/0");
    let kernels = kernels_in(&dir);
    assert_eq!(kernels.len(), 1, "{kernels:?}");
    assert!(kernels[0].contains("pool1"), "{kernels:?}");
    let files = npy_in(&dir);
    assert_eq!(files.len(), 2, "pool1's input and output: {files:?}");
    for io in ["input", "output"] {
        let got = kernel_file(&dir, &kernels[0], io, 0);
        let want = kernel_file(&all.rank().join("Net/0/0"), &kernels[0], io, 0);
        let (a, b) = (std::fs::read(&got).unwrap(), std::fs::read(&want).unwrap());
        assert!(
            a == b,
            "{} differs from the unfiltered run's",
            file_name(&got)
        );
    }
    // Nothing selected: the model as it is, nothing dumped, the same output values.
    let (tmp, r, out) = filtered("filter-none", r#""name-regex(no_such_node)""#);
    assert!(r.exposed_outputs().is_empty(), "{:?}", r.exposed_outputs());
    assert!(npy_in(&tmp.rank().join("Net/0/0")).is_empty());
    let host = |o: &std::collections::HashMap<String, dump_ort::ort::value::DynValue>| {
        let v = o.values().next().unwrap();
        dump_ort::with_tensor_ref(v, |t| t.host_bytes().unwrap().to_vec()).unwrap()
    };
    let mut again = OrtRunner::new(model_bytes("cnn"), 0).unwrap();
    let plain = again
        .run(&mut dump_host::Dumper::disabled(), &ort_inputs("cnn"))
        .unwrap()
        .into_map();
    assert!(
        again.exposed_outputs().is_empty(),
        "a disabled Dumper exposes nothing"
    );
    assert_eq!(host(&out), host(&plain));
}

/// Session options (one intra-op thread that sleeps when idle) change how ONNX Runtime runs,
/// not what is dumped: the full-dump check passes; a thread count out of ONNX Runtime's range
/// is an error value naming it.
#[test]
fn session_options_run_the_same_dump() {
    if !available() {
        return;
    }
    let tmp = Tmp::new("options");
    let mut d = dumper(&tmp.0, r#", "saved_data": "full""#);
    let mut r = OrtRunner::builder()
        .intra_threads(1)
        .config_entry("session.intra_op.allow_spinning", "0")
        .from_bytes(model_bytes("cnn"), 0)
        .unwrap();
    let ins = ort_inputs("cnn");
    for _ in 0..2 {
        r.run(&mut d, &ins).unwrap();
    }
    d.close().unwrap();
    check_full_dump("cnn", &tmp.rank(), r.dump().graph(), 2);
    // A thread count ONNX Runtime's `int` cannot hold (it would wrap to -1).
    let e = OrtRunner::builder()
        .intra_threads(usize::MAX)
        .from_bytes(model_bytes("cnn"), 0)
        .expect_err("refused");
    assert!(
        matches!(e, dump_ort::Error::Options(_)) && e.to_string().contains("intra_threads"),
        "{e}"
    );
}

/// The declared outputs of a run as host bytes, by name.
fn host_outputs(
    out: &dump_ort::OrtOutputs<'_>,
) -> std::collections::HashMap<String, (Vec<usize>, Vec<u8>)> {
    out.iter()
        .map(|(name, v)| {
            let t = dump_ort::with_tensor_ref(v, |t| {
                (t.shape().to_vec(), t.host_bytes().unwrap().to_vec())
            });
            (name.to_owned(), t.unwrap())
        })
        .collect()
}

/// Issue 28 item 2: the steps that dump nothing (disabled Dumper, rejected iteration, a
/// `kernels` filter rejecting every node) skip collecting values; the shared check proves
/// they dump nothing while the others still dump in full, on one runner whose Dumpers
/// change mid-run. Every step returns the plain run's outputs, values included (a step that
/// asks ONNX Runtime for the declared outputs only among them).
#[test]
fn steps_that_dump_nothing_skip_the_values_and_the_others_dump_in_full() {
    if !available() {
        return;
    }
    let tmp = Tmp::new("quiet");
    let mut r = OrtRunner::new(model_bytes("cnn"), 0).unwrap();
    let ins = ort_inputs("cnn");
    let plain = host_outputs(&r.run(&mut dump_host::Dumper::disabled(), &ins).unwrap());
    assert_eq!(plain.len(), 1, "cnn's one output");
    check_quiet_steps(&tmp.0, &mut |d| {
        let out = host_outputs(&r.run(d, &ins).unwrap());
        assert_same_outputs(&out, &plain);
        assert!(out == plain, "the values of the plain run's outputs");
    });
}

/// A disabled Dumper's steps, from its second on, run the session alone (nothing exposed,
/// nothing announced): the plain run's output, nothing else returned, a missing input the same
/// clear error as on the dumping path; an enabled Dumper on the same runner then exposes the
/// node outputs again, which `get` never hands out.
#[test]
fn a_disabled_dumper_runs_the_session_alone_with_the_same_errors() {
    if !available() {
        return;
    }
    let tmp = Tmp::new("disabled-alone");
    let mut r = OrtRunner::new(model_bytes("cnn"), 0).unwrap();
    let ins = ort_inputs("cnn");
    let node_output = r.exposed_outputs()[0].clone();
    let mut off = dump_host::Dumper::disabled();
    let plain = host_outputs(&r.run(&mut off, &ins).unwrap());
    assert!(r.exposed_outputs().is_empty(), "{:?}", r.exposed_outputs());
    for _ in 0..3 {
        let out = r.run(&mut off, &ins).unwrap();
        assert_eq!(out.returned(), 1, "the declared output only");
        assert!(host_outputs(&out) == plain, "the plain run's output");
        assert!(
            out.get(&node_output).is_none(),
            "{node_output} is no output"
        );
    }
    let e = r.run(&mut off, &[]).unwrap_err().to_string();
    assert!(e.contains("missing input x"), "{e}");
    let mut d = dumper(&tmp.0, r#", "saved_data": "statistic""#);
    for _ in 0..2 {
        let out = r.run(&mut d, &ins).unwrap();
        assert!(out.returned() > 1, "node outputs exposed again");
        assert!(out.get(&node_output).is_none(), "exposed, never handed out");
        assert!(host_outputs(&out) == plain);
    }
    d.close().unwrap();
    assert_eq!(dumped_steps(&tmp.0), [0, 1], "the enabled Dumper's steps");
}

/// A step the `iteration` filter rejects, on a runner whose every node output stays exposed
/// (the filter rejects no kernel), asks ONNX Runtime for the model's declared output only,
/// once the runner knows beforehand (from the Dumper's second step on); the steps it selects
/// get every exposed value back and are dumped in full. The declared output is the plain
/// run's, and the exposed values never show among the outputs.
#[test]
fn an_iteration_rejected_step_gets_only_the_declared_outputs_from_onnx_runtime() {
    if !available() {
        return;
    }
    let tmp = Tmp::new("declared-only");
    let mut d = filtered_dumper(&tmp.0, 0, "[]", "1|3");
    let mut r = OrtRunner::new(model_bytes("cnn"), 0).unwrap();
    let ins = ort_inputs("cnn");
    let plain = {
        let mut again = OrtRunner::new(model_bytes("cnn"), 0).unwrap();
        host_outputs(&again.run(&mut dump_host::Dumper::disabled(), &ins).unwrap())
    };
    let exposed = r.exposed_outputs().len();
    assert!(exposed >= 5, "{:?}", r.exposed_outputs());
    let mut returned = Vec::new();
    for _ in 0..5 {
        let out = r.run(&mut d, &ins).unwrap();
        returned.push(out.returned());
        assert_eq!(out.len(), 1, "only the declared output shows");
        assert!(host_outputs(&out) == plain, "the plain run's output");
        drop(out); // the outputs borrow the runner
        assert_eq!(
            r.exposed_outputs().len(),
            exposed,
            "every output stays exposed"
        );
    }
    let all = 1 + exposed;
    // Step 0: the Dumper did not hold the description yet, so the step ran as one that
    // may dump; steps 2 and 4 are known to dump nothing before they run.
    assert_eq!(returned, [all, all, 1, all, 1]);
    d.close().unwrap();
    let graph = r.dump().graph();
    let rows = graph
        .nodes
        .iter()
        .map(|n| n.inputs.len() + n.outputs.len())
        .sum::<usize>()
        + graph.parameters.iter().filter(|p| !p.is_weight).count();
    assert_eq!(dumped_steps(&tmp.0), [1, 3], "iteration 1|3");
    for s in [1, 3] {
        assert_eq!(rows_of_step(&tmp.0, s).len(), rows, "step {s} in full");
    }
}
