//! The msprobe end-to-end test (issue 22, item 7), as a user runs it: `tools/msprobe_e2e.py`
//! dumps a small CNN (BatchNorm, residual blocks, Linear; not one the pairing rules were tuned
//! on) with real msprobe 26.2.0 at L0, L1 and mix (statistics and tensor), exports it with
//! torch's two exporters (defaults: BatchNorm folded into the convolutions; and with
//! BatchNorm kept) plus copies with one conv weight x1.01, and saves a forward-hook `.npz`.
//! `opdump run` dumps every export with tract and ONNX Runtime; `opdump compare` then
//! - pairs >= 90% of msprobe's forward outputs automatically (fused convolutions counted as
//!   accounted for) and finds them within the default tolerances (exit 0);
//! - names the perturbed module's ONNX node first (exit 1);
//! - does the same against the hook `.npz`;
//! - warns about a `.pt` that dump.json lists but that is missing, naming it, and still
//!   compares its statistics.
//!
//! The fixtures (a few MB) are generated into `$OPDUMP_MSPROBE_E2E` (default: cargo's test
//! temp directory) when python3 with torch, onnx, onnxscript and msprobe is there, and skip
//! with the reason otherwise (fail with `CI=true`). The ONNX Runtime half needs
//! `ORT_DYLIB_PATH`.
#![cfg(feature = "ort")]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::{Mutex, OnceLock},
};

use opdump_test_support::{Prereq, require};
use serde_json::Value;

const LEVELS: [&str; 3] = ["L0", "L1", "mix"];
const TASKS: [&str; 2] = ["tensor", "statistics"];
/// The exports: defaults (BatchNorm folded) and BatchNorm kept, with both exporters.
const MODELS: [(&str, bool); 4] = [
    ("dynamo", true),
    ("ts", true),
    ("dynamo_bn", false),
    ("ts_bn", false),
];

/// The fixture folder (generated once per test binary), or `None`: a recorded skip.
fn fixtures() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::var_os("OPDUMP_MSPROBE_E2E")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("msprobe-e2e"));
        if dir.join("expected.json").is_file() {
            return Some(dir);
        }
        if !require(Prereq::Msprobe) {
            return None;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/msprobe_e2e.py");
        let o = Command::new("python3")
            .arg(&script)
            .arg(&dir)
            .output()
            .expect("run python3");
        assert!(
            o.status.success(),
            "{}: {}",
            script.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        Some(dir)
    })
    .clone()
}

/// The runtimes this machine has: tract always, ORT with `ORT_DYLIB_PATH`.
fn runtimes() -> Vec<&'static str> {
    let mut r = vec!["tract"];
    if require(Prereq::OnnxRuntime) {
        r.push("ort");
    }
    r
}

fn opdump(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .current_dir(cwd)
        .args(args)
        .env_remove("MINDSPORE_DUMP_CONFIG")
        .env_remove("MS_DIAGNOSTIC_DATA_PATH")
        .output()
        .expect("run opdump")
}

/// `opdump run MODEL.onnx --runtime RT` into `runs/MODEL_RT` (once per binary).
fn run(dir: &Path, model: &str, rt: &str) -> String {
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let out = format!("runs/{model}_{rt}");
    if !dir.join(&out).join("done").is_file() {
        let _ = std::fs::remove_dir_all(dir.join(&out));
        let o = opdump(
            dir,
            &[
                "run",
                &format!("{model}.onnx"),
                "--runtime",
                rt,
                "--input",
                "x=input.npy",
                "--out",
                &out,
            ],
        );
        assert_eq!(
            o.status.code(),
            Some(0),
            "run {model} {rt}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::write(dir.join(&out).join("done"), "").expect("mark the run done");
    }
    out
}

/// `opdump compare A B --json` in `dir`: exit code, report, stderr.
fn compare(dir: &Path, a: &str, b: &str) -> (i32, Value, String) {
    let o = opdump(dir, &["compare", a, b, "--json"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let j: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    (o.status.code().unwrap_or(-1), j, err)
}

/// A's output tensors (msprobe's forward outputs, or the hook arrays), paired and fused.
fn accounted(j: &Value) -> (usize, usize, usize) {
    let outputs = |v: &Value| {
        v.as_array()
            .map(|l| {
                l.iter()
                    .filter(|t| {
                        let t = t.get("a").unwrap_or(t);
                        t["io"] == "output"
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    let paired = outputs(&j["pairs"]);
    let fused = outputs(&j["fused_a"]);
    let unpaired = outputs(&j["only_in_a"]);
    (paired, fused, paired + fused + unpaired)
}

fn rules(j: &Value) -> Vec<String> {
    let mut r: Vec<String> = j["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rule"].as_str().unwrap().to_owned())
        .collect();
    r.sort();
    r.dedup();
    r
}

#[test]
fn msprobe_dumps_pair_across_frameworks_within_tolerance() {
    let Some(dir) = fixtures() else { return };
    for rt in runtimes() {
        for (model, folded) in MODELS {
            let b = run(&dir, model, rt);
            for level in LEVELS {
                for task in TASKS {
                    let a = format!("msprobe/{level}_{task}");
                    let what = format!("{a} vs {b}");
                    let (code, j, err) = compare(&dir, &a, &b);
                    assert_eq!(code, 0, "{what}: {err}\n{:#}", j["first_divergent"]);
                    let (paired, fused, total) = accounted(&j);
                    assert!(total >= 14, "{what}: {total} forward outputs");
                    assert!(
                        (paired + fused) * 10 >= total * 9,
                        "{what}: {paired} paired + {fused} fused of {total}: {:#}",
                        j["only_in_a"]
                    );
                    assert_eq!(
                        fused > 0,
                        folded,
                        "{what}: fused convolutions only where BatchNorm was folded"
                    );
                    let r = rules(&j);
                    assert_eq!(r.contains(&"fused".to_owned()), folded, "{what}: {r:?}");
                    // L0 pairs by module scope; L1 alone has no scopes (counters with the
                    // dynamo exporter's FX names, run order by op kind with TorchScript's).
                    match level {
                        "L0" => assert!(r.contains(&"scope".to_owned()), "{what}: {r:?}"),
                        "L1" if model.starts_with("dynamo") => {
                            assert!(r.contains(&"counter".to_owned()), "{what}: {r:?}")
                        }
                        "L1" => assert!(r.contains(&"order".to_owned()), "{what}: {r:?}"),
                        _ => {}
                    }
                    if task == "tensor" {
                        let kinds: Vec<&str> = j["pairs"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|p| p["outcome"]["kind"].as_str().unwrap())
                            .collect();
                        assert!(kinds.iter().all(|k| *k == "elements"), "{what}: {kinds:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_perturbed_weight_is_named_first() {
    let Some(dir) = fixtures() else { return };
    let expected: Value =
        serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    for rt in runtimes() {
        for model in ["dynamo", "ts"] {
            let node = expected["perturbed_nodes"][model].as_str().unwrap();
            let b = run(&dir, &format!("{model}_perturbed"), rt);
            for level in LEVELS {
                for task in TASKS {
                    let a = format!("msprobe/{level}_{task}");
                    let what = format!("{a} vs {b}");
                    let (code, j, err) = compare(&dir, &a, &b);
                    assert_eq!(code, 1, "{what}: {err}");
                    let first = &j["first_divergent"];
                    assert_eq!(first["onnx_node"], node, "{what}: {first:#}");
                    // The perturbed conv's output is folded with its BatchNorm's: the group's
                    // last call (bn2, or its batch_norm API call) is the one compared.
                    let name = first["op_name"].as_str().unwrap();
                    if level == "L0" {
                        assert_eq!(name, "Module.block2.bn2.BatchNorm2d.forward.0", "{what}");
                        assert_eq!(first["rule"], "fused", "{what}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_forward_hook_npz_pairs_by_module_name() {
    let Some(dir) = fixtures() else { return };
    let expected: Value =
        serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    for rt in runtimes() {
        let b = run(&dir, "dynamo", rt);
        let (code, j, err) = compare(&dir, "hooks.npz", &b);
        assert_eq!(code, 0, "hooks.npz vs {b}: {err}");
        let (paired, fused, total) = accounted(&j);
        assert_eq!(total, 15, "every leaf module: {j:#}");
        assert!(
            (paired + fused) * 10 >= total * 9,
            "{paired} + {fused} of {total}"
        );
        assert_eq!(
            fused, 5,
            "the five convolutions folded with their BatchNorm"
        );
        let b = run(&dir, "dynamo_perturbed", rt);
        let (code, j, _) = compare(&dir, "hooks.npz", &b);
        assert_eq!(code, 1);
        let first = &j["first_divergent"];
        assert_eq!(first["op_name"], "block2.bn2", "{first:#}");
        assert_eq!(first["onnx_node"], expected["perturbed_nodes"]["dynamo"]);
    }
}

#[test]
fn a_missing_pt_is_a_warning_and_its_statistics_compare() {
    let Some(dir) = fixtures() else { return };
    let b = run(&dir, "dynamo", "tract");
    let copy = dir.join("missing_pt");
    let _ = std::fs::remove_dir_all(&copy);
    let o = Command::new("cp")
        .arg("-r")
        .arg(dir.join("msprobe/L0_tensor"))
        .arg(&copy)
        .status()
        .expect("cp");
    assert!(o.success());
    let gone = "Module.fc1.Linear.forward.0.output.0.pt";
    let mut removed = 0;
    for step in std::fs::read_dir(copy.join("step0")).unwrap() {
        let f = step.unwrap().path().join("dump_tensor_data").join(gone);
        if f.is_file() {
            std::fs::remove_file(&f).unwrap();
            removed += 1;
        }
    }
    assert_eq!(removed, 1, "the .pt to remove");
    let (code, j, err) = compare(&dir, "missing_pt", &b);
    assert_eq!(code, 0, "{err}");
    let warning = err
        .lines()
        .find(|l| l.contains(gone))
        .unwrap_or_else(|| panic!("no warning naming {gone}: {err}"));
    assert!(
        warning.starts_with("warning: A: ") && warning.contains("missing"),
        "{warning}"
    );
    let pair = j["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["a"]["op_name"] == "Module.fc1.Linear.forward.0" && p["a"]["io"] == "output")
        .expect("fc1's output still paired");
    assert_eq!(pair["outcome"]["kind"], "statistics", "{pair:#}");
    assert_eq!(pair["diverged"], false);
    let _ = std::fs::remove_dir_all(&copy);
}

/// candle-onnx 0.11.1 runs none of the four exports (docs/runtimes.md: a Reshape after the
/// dynamo exporter's ReduceMean, `Shape` with `start`/`end`, no `GlobalAveragePool`); where it
/// cannot, `opdump run --runtime candle` must still end cleanly: exit 1, one error line naming
/// the node and op, no panic and no candle backtrace even with `RUST_BACKTRACE=1`. Where it
/// runs (a later candle), the compare against every msprobe dump must hold as for the others.
#[cfg(feature = "candle")]
#[test]
fn candle_runs_each_export_or_names_the_node_it_cannot_run() {
    let Some(dir) = fixtures() else { return };
    for (model, _) in MODELS {
        let out = format!("runs/{model}_candle");
        let _ = std::fs::remove_dir_all(dir.join(&out));
        let o = Command::new(env!("CARGO_BIN_EXE_opdump"))
            .current_dir(&dir)
            .args(["run", &format!("{model}.onnx"), "--runtime", "candle"])
            .args(["--input", "x=input.npy", "--out", &out])
            .env("RUST_BACKTRACE", "1")
            .env_remove("MINDSPORE_DUMP_CONFIG")
            .output()
            .expect("run opdump");
        let err = String::from_utf8_lossy(&o.stderr);
        if o.status.code() == Some(0) {
            for level in LEVELS {
                let a = format!("msprobe/{level}_statistics");
                let (code, j, e) = compare(&dir, &a, &out);
                assert_eq!(code, 0, "{a} vs {out}: {e}\n{:#}", j["first_divergent"]);
            }
            continue;
        }
        assert_eq!(o.status.code(), Some(1), "{model}: {err}");
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(
            errors.len(),
            1,
            "{model}: one error line, no backtrace: {err}"
        );
        assert!(
            errors[0].contains("candle-onnx failed at node \""),
            "{model}: {err}"
        );
        assert!(
            !err.contains("panicked") && !err.contains("candle_core::"),
            "{model}: {err}"
        );
    }
}
