//! MindSpore names against ONNX nodes, end to end (issue 22, item 3): a real MindSpore 2.10.0
//! e2e dump of a small CNN (`tests/fixtures/mindspore_e2e`, made by
//! `tools/mindspore_e2e.py`: Conv2d and Dense with a bias, ReLU, MaxPool, a SequentialCell
//! block, Flatten) against `opdump run` of the same network built in torch with the same
//! weights and exported with both exporters, through tract (and candle and ONNX Runtime when
//! built with those features; ONNX Runtime needs `ORT_DYLIB_PATH`, or the test fails under
//! `CI=true`). `opdump compare`
//! - pairs >= 90% of MindSpore's forward kernel outputs automatically (a Conv2D or MatMul
//!   whose BiasAdd pairs with the ONNX Conv or Gemm computing both counted as fused), by
//!   module scope, and finds them within the default tolerances (exit 0);
//! - with one conv weight x1.01 in the ONNX copy, exits 1 naming that conv's node first.
//!
//! Runs on committed data: no Python, no MindSpore.
#![cfg(feature = "tract")]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::Mutex,
};

use serde_json::Value;

/// The exports of the torch model (`dynamo=False`, and the default dynamo exporter).
const MODELS: [&str; 2] = ["ts", "dynamo"];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/mindspore_e2e")
}

fn expected() -> Value {
    serde_json::from_slice(&std::fs::read(fixture().join("expected.json")).unwrap()).unwrap()
}

fn opdump(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .env_remove("MINDSPORE_DUMP_CONFIG")
        .env_remove("MS_DIAGNOSTIC_DATA_PATH")
        .output()
        .expect("run opdump")
}

/// The runtimes this binary was built with (ONNX Runtime when its library is there).
fn runtimes() -> Vec<&'static str> {
    let mut v = vec!["tract"];
    if cfg!(feature = "candle") {
        v.push("candle");
    }
    if cfg!(feature = "ort")
        && opdump_test_support::require(opdump_test_support::Prereq::OnnxRuntime)
    {
        v.push("ort");
    }
    v
}

/// `opdump run MODEL.onnx --runtime RUNTIME` into the test's temp folder (once per binary).
fn run(model: &str, runtime: &str) -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mindspore-e2e-{}", std::process::id()))
        .join(runtime)
        .join(model);
    if !out.join("done").is_file() {
        let _ = std::fs::remove_dir_all(&out);
        let input = format!("x={}", fixture().join("input.npy").display());
        let o = opdump(&[
            "run".as_ref(),
            fixture().join(format!("{model}.onnx")).as_os_str(),
            "--runtime".as_ref(),
            runtime.as_ref(),
            "--input".as_ref(),
            input.as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "run {model}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::write(out.join("done"), "").expect("mark the run done");
    }
    out
}

/// `opdump compare ms_dump RUN --json`: exit code, report, stderr.
fn compare(b: &Path) -> (i32, Value, String) {
    let a = fixture().join("ms_dump");
    let o = opdump(&[
        "compare".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--json".as_ref(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let j: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    (o.status.code().unwrap_or(-1), j, err)
}

/// MindSpore's kernel outputs in a list of the report (Parameters are not kernels).
fn kernel_outputs(v: &Value) -> Vec<&Value> {
    v.as_array()
        .map(|l| {
            l.iter()
                .map(|t| t.get("a").unwrap_or(t))
                .filter(|t| t["io"] == "output" && t["op_type"] != "Parameter")
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn mindspore_kernels_pair_with_onnx_nodes_within_tolerance() {
    let total = expected()["mindspore_forward_outputs"].as_u64().unwrap() as usize;
    assert_eq!(total, 11, "the fixture's forward kernel outputs");
    for (runtime, model) in runtimes().into_iter().flat_map(|r| MODELS.map(|m| (r, m))) {
        let b = run(model, runtime);
        let (code, j, err) = compare(&b);
        let what = format!("ms_dump vs {model} ({runtime})");
        assert_eq!(code, 0, "{what}: {err}\n{:#}", j["first_divergent"]);
        let paired = kernel_outputs(&j["pairs"]);
        let fused = kernel_outputs(&j["fused_a"]);
        let unpaired = kernel_outputs(&j["only_in_a"]);
        assert_eq!(
            paired.len() + fused.len() + unpaired.len(),
            total,
            "{what}: every forward output is accounted for once"
        );
        assert!(
            (paired.len() + fused.len()) * 10 >= total * 9,
            "{what}: {} paired + {} fused of {total}: {unpaired:#?}",
            paired.len(),
            fused.len()
        );
        // The bias-free Conv2D and MatMul outputs are inside the Conv and Gemm nodes.
        let mut fused_types: Vec<&str> = fused
            .iter()
            .map(|t| t["op_type"].as_str().unwrap())
            .collect();
        fused_types.sort_unstable();
        assert_eq!(fused_types, ["Conv2D", "Conv2D", "MatMul"], "{what}");
        // Every kernel output pairs by its cell path (the module scope), compared element by
        // element; Flatten's output, dumped with its input's shape, by value.
        for p in j["pairs"].as_array().unwrap() {
            if p["a"]["io"] != "output" || p["a"]["op_type"] == "Parameter" {
                continue;
            }
            assert_eq!(p["rule"], "scope", "{what}: {p:#}");
            assert_eq!(p["outcome"]["kind"], "elements", "{what}: {p:#}");
            assert_eq!(p["diverged"], false, "{what}: {p:#}");
        }
        let flatten = j["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["a"]["op_type"] == "Flatten" && p["a"]["io"] == "output")
            .unwrap_or_else(|| panic!("{what}: Flatten paired"));
        assert_eq!(flatten["a"]["shape"], serde_json::json!([1, 8, 4, 4]));
        assert_eq!(flatten["b"]["shape"], serde_json::json!([1, 128]));
        let bias = j["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| {
                p["a"]["op_name"] == "Default_fc-Dense_BiasAdd-op0" && p["a"]["io"] == "output"
            })
            .unwrap_or_else(|| panic!("{what}: the Dense's BiasAdd paired"));
        assert_eq!(bias["b"]["shape"], serde_json::json!([1, 10]), "{bias:#}");
    }
}

#[test]
fn a_perturbed_conv_weight_is_named_first() {
    let expected = expected();
    for (runtime, model) in runtimes().into_iter().flat_map(|r| MODELS.map(|m| (r, m))) {
        let node = expected["perturbed_nodes"][model].as_str().unwrap();
        let b = run(&format!("{model}_perturbed"), runtime);
        let (code, j, err) = compare(&b);
        let what = format!("ms_dump vs {model}_perturbed ({runtime})");
        assert_eq!(code, 1, "{what}: {err}");
        let first = &j["first_divergent"];
        assert_eq!(first["onnx_node"], node, "{what}: {first:#}");
        // The conv's output with its bias: the BiasAdd of `features.0`.
        assert_eq!(
            first["op_name"], "Default_features-SequentialCell_0-Conv2d_BiasAdd-op0",
            "{what}: {first:#}"
        );
        assert_eq!(first["rule"], "scope", "{what}: {first:#}");
    }
}
