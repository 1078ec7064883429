//! Real torch exports through every runtime, as a user runs them (cargo feature `ort`):
//! `tools/export_models.py` exports an LSTM, a transformer encoder, ResNet-18 and
//! MobileNetV3-small with torch's default exporter (opset 18, weights in `M.onnx.data`), plus
//! copies with one weight x1.01 and one with a NaN. From a folder that is not the model's,
//! `opdump run` dumps each with tract and ONNX Runtime (and candle, which runs the LSTM and
//! fails cleanly on the others); `opdump compare` tract vs ORT exits 0 on the healthy model
//! and names the perturbed weight's consumer first (for MobileNet, a conv whose activations
//! are around 1e-7).
//!
//! The LSTM and the encoder are committed (tests/fixtures/onnx/torch/); ResNet-18 (45 MB) and
//! MobileNet (10 MB) are exported into `$OPDUMP_TORCH_MODELS` (default: cargo's test temp
//! directory) when torch is installed, and skip with the reason otherwise (fail with
//! `CI=true`). Every test needs `ORT_DYLIB_PATH`.
#![cfg(feature = "ort")]

#[path = "../../adapters/testsupport/onnx_fixtures.rs"]
mod support;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use opdump_test_support::{Prereq, require};
use serde_json::Value;
use support::{Tmp, fixtures};

/// Where model `name`'s files are: the committed fixtures, or the cache the export script
/// writes (run here when the model is missing); `None` (a recorded skip) without torch.
fn model_dir(name: &str) -> Option<PathBuf> {
    let committed = fixtures().join("torch");
    if committed.join(format!("{name}.json")).is_file() {
        return Some(committed);
    }
    let cache = std::env::var_os("OPDUMP_TORCH_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("torch-models"));
    if cache.join(format!("{name}.json")).is_file() {
        return Some(cache);
    }
    if !require(Prereq::Torch) {
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/export_models.py");
    let o = Command::new("python3")
        .arg(&script)
        .arg(&cache)
        .args(["--models", name])
        .output()
        .expect("run python3");
    assert!(
        o.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    Some(cache)
}

/// `opdump ARGS..` in `cwd` without a dump config in the environment.
fn opdump(cwd: &Path, args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .current_dir(cwd)
        .args(args)
        .env_remove("MINDSPORE_DUMP_CONFIG")
        .env_remove("MS_DIAGNOSTIC_DATA_PATH")
        .output()
        .expect("run opdump")
}

/// `opdump run DIR/FILE --runtime RT --input x=DIR/NAME_input.npy --out OUT` in `cwd`.
fn run(cwd: &Path, dir: &Path, file: &str, name: &str, rt: &str, out: &str) -> Output {
    let input = format!("x={}", dir.join(format!("{name}_input.npy")).display());
    let model = dir.join(file);
    opdump(
        cwd,
        &[
            "run".as_ref(),
            model.as_os_str(),
            "--runtime".as_ref(),
            rt.as_ref(),
            "--input".as_ref(),
            input.as_ref(),
            "--out".as_ref(),
            out.as_ref(),
        ],
    )
}

fn ok(o: &Output, what: &str) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `opdump compare A B --json` in `cwd`: exit code and report.
fn compare(cwd: &Path, a: &str, b: &str) -> (i32, Value) {
    let o = opdump(
        cwd,
        &[
            "compare".as_ref(),
            a.as_ref(),
            b.as_ref(),
            "--json".as_ref(),
        ],
    );
    let j: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&o.stderr));
    });
    (o.status.code().unwrap_or(-1), j)
}

/// What candle does with a model: runs it, or fails with one clean error line.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Candle {
    Runs,
    FailsCleanly,
}

/// The whole user story for model `name` (see the module docs); `tiny`: the perturbed
/// weight's consumer outputs values below this magnitude, and it is still flagged.
fn check(name: &str, candle: Candle, tiny: Option<f64>) {
    if !support::onnx_runtime_available() {
        return;
    }
    let Some(dir) = model_dir(name) else { return };
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap()).unwrap();
    let consumers: Vec<&str> = meta["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let tmp = Tmp::new(&format!("torch-{name}"));
    let cwd = tmp.0.join("elsewhere");
    std::fs::create_dir_all(&cwd).unwrap();
    let onnx = format!("{name}.onnx");
    ok(&run(&cwd, &dir, &onnx, name, "tract", "tract"), "tract");
    ok(&run(&cwd, &dir, &onnx, name, "ort", "ort"), "ort");
    let c = run(&cwd, &dir, &onnx, name, "candle", "candle");
    let err = String::from_utf8_lossy(&c.stderr);
    match candle {
        Candle::Runs => ok(&c, "candle"),
        Candle::FailsCleanly => {
            assert_eq!(c.status.code(), Some(1), "candle: {err}");
            assert!(err.contains("error: candle-onnx "), "{err}");
            assert!(!err.contains("thread '"), "no panic report: {err}");
        }
    }

    // Healthy: tract and ORT agree, nothing is unpaired noise.
    let (code, j) = compare(&cwd, "tract", "ort");
    assert_eq!(code, 0, "{name}: tract vs ort: {:#}", j["first_divergent"]);
    assert_eq!(j["diverged"], 0);
    assert_eq!(j["only_in_a"].as_array().unwrap().len(), 0, "{name}");
    assert_eq!(j["only_in_b"].as_array().unwrap().len(), 0, "{name}");
    assert!(
        j["matched"].as_u64().unwrap() > 5,
        "{name}: {}",
        j["matched"]
    );

    // One weight x1.01, or one element of it NaN: its consumer is named first.
    for tag in ["w1.01", "nan"] {
        let out = format!("tract-{tag}");
        ok(
            &run(
                &cwd,
                &dir,
                &format!("{name}_{tag}.onnx"),
                name,
                "tract",
                &out,
            ),
            &out,
        );
        let (code, j) = compare(&cwd, &out, "ort");
        assert_eq!(code, 1, "{name} {tag}");
        let first = &j["first_divergent"];
        let node = first["onnx_node"].as_str().unwrap_or_default();
        assert!(
            consumers.contains(&node),
            "{name} {tag}: first divergent {first:#} is not in {consumers:?}"
        );
        if let Some(limit) = tiny {
            // The consumer's output is tiny, and a 1% change of it diverges.
            let out = j["pairs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["a"]["op_name"] == first["op_name"] && p["a"]["io"] == "output")
                .unwrap_or_else(|| panic!("{name}: no output pair of {first:#}"));
            assert_eq!(out["diverged"], true, "{name} {tag}: {out:#}");
            let m = out["stats_b"]["max"]
                .as_f64()
                .unwrap()
                .abs()
                .max(out["stats_b"]["min"].as_f64().unwrap().abs());
            assert!(m < limit, "{name}: the consumer's output reaches {m}");
        }
    }
}

#[test]
fn lstm_from_torch() {
    check("lstm", Candle::Runs, None);
}

#[test]
fn transformer_encoder_from_torch() {
    check("encoder", Candle::FailsCleanly, None);
}

#[test]
fn resnet18_from_torch() {
    check("resnet18", Candle::FailsCleanly, None);
}

#[test]
fn mobilenet_v3_small_from_torch() {
    check("mobilenet_v3_small", Candle::FailsCleanly, Some(1e-5));
}

/// candle-onnx 0.11.1 computes the torch LSTM's output wrong from the second time step on
/// (its inputs equal ONNX Runtime's; ONNX Runtime and tract agree within 1e-6): compare
/// names candle's LSTM first. docs/runtimes.md has the reproduction.
#[test]
fn candle_lstm_is_named_first_against_ort() {
    if !support::onnx_runtime_available() {
        return;
    }
    let dir = fixtures().join("torch");
    let tmp = Tmp::new("torch-candle-lstm");
    std::fs::create_dir_all(&tmp.0).unwrap();
    ok(
        &run(&tmp.0, &dir, "lstm.onnx", "lstm", "candle", "candle"),
        "candle",
    );
    ok(&run(&tmp.0, &dir, "lstm.onnx", "lstm", "ort", "ort"), "ort");
    let (code, j) = compare(&tmp.0, "candle", "ort");
    assert_eq!(code, 1);
    let first = &j["first_divergent"];
    assert_eq!(first["op_type"], "LSTM", "{first:#}");
    assert_eq!(first["io"], "output");
    // Every input of the LSTM agrees: the difference is candle's own.
    for p in j["pairs"].as_array().unwrap() {
        if p["a"]["op_type"] == "LSTM" && p["a"]["io"] == "input" {
            assert_eq!(p["diverged"], false, "{p:#}");
        }
    }
}
