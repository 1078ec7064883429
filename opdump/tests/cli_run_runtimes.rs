//! `opdump run --runtime candle|ort` as a process (cargo features `candle`, `ort`): both dump
//! every node of the cnn fixture under the same kernel names with the same statistics, and
//! an ORT run without the library is a clear error. ORT tests need `ORT_DYLIB_PATH`: they skip
//! with the reason without it, and fail when `CI=true`.
#![cfg(any(feature = "candle", feature = "ort"))]

#[path = "../../adapters/testsupport/onnx_fixtures.rs"]
mod support;

use std::process::{Command, Output};

use support::{Tmp, fixtures, npy_in, python_numpy_loads, stat_rows};

fn opdump(runtime: &str, out: &Tmp, extra: &[&str]) -> Output {
    let model = fixtures().join("cnn.onnx");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_opdump"));
    cmd.arg("run")
        .arg(&model)
        .args(["--runtime", runtime, "--steps", "2", "--out"])
        .arg(&out.0)
        .args(extra);
    for v in ["MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH"] {
        cmd.env_remove(v);
    }
    cmd.output().expect("run opdump")
}

/// Runs `runtime` on cnn.onnx and checks the dump; returns the step-0 directory.
fn dump_with(runtime: &str, out: &Tmp) -> std::path::PathBuf {
    let o = opdump(runtime, out, &[]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains(&format!("with {runtime}, 2 step(s)")),
        "{stdout}"
    );
    let step0 = out.0.join("rank_0/Net/0/0");
    let net = std::fs::read_dir(out.0.join("rank_0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("0/0").is_dir())
        .unwrap_or(step0);
    let dir = net.join("0/0");
    // 6 kernels: Conv 3 in + 1 out, Relu 2, MaxPool 2, Flatten 2, Gemm 4, Softmax 2; plus x.
    let files = npy_in(&dir);
    assert_eq!(files.len(), 17, "{files:?}");
    assert_eq!(npy_in(&net.join("0/1")).len(), 17);
    assert_eq!(npy_in(&net.join("0/constants")).len(), 4);
    python_numpy_loads(&files);
    dir
}

#[cfg(feature = "candle")]
#[test]
fn candle_runs_and_dumps_every_node() {
    let out = Tmp::new("candle");
    dump_with("candle", &out);
}

#[cfg(all(feature = "candle", feature = "ort"))]
#[test]
fn candle_and_ort_dump_the_same_kernels_with_the_same_statistics() {
    if !support::onnx_runtime_available() {
        return;
    }
    let (c, o) = (Tmp::new("same-candle"), Tmp::new("same-ort"));
    let (rc, ro) = (
        stat_rows(&dump_with("candle", &c)),
        stat_rows(&dump_with("ort", &o)),
    );
    let mut keys: Vec<_> = rc.keys().collect();
    keys.sort();
    let mut ort_keys: Vec<_> = ro.keys().collect();
    ort_keys.sort();
    assert_eq!(keys, ort_keys, "same kernel names, IOs and slots");
    for k in keys {
        for col in ["Data Type", "Shape", "Max Value", "Min Value"] {
            let (a, b) = (&rc[k][col], &ro[k][col]);
            let close = match (a.parse::<f64>(), b.parse::<f64>()) {
                (Ok(x), Ok(y)) => (x - y).abs() <= 1e-5 * x.abs().max(y.abs()) || x == y,
                _ => a == b,
            };
            assert!(close, "{k:?} {col}: candle {a} vs ort {b}");
        }
    }
}

#[cfg(feature = "ort")]
#[test]
fn ort_without_the_library_is_a_clear_error() {
    let out = Tmp::new("nolib");
    let model = fixtures().join("cnn.onnx");
    let o = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .arg("run")
        .arg(&model)
        .args(["--runtime", "ort", "--out"])
        .arg(&out.0)
        .env("ORT_DYLIB_PATH", "")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ORT_DYLIB_PATH is not set") && err.contains("fetch-ort.sh"),
        "{err}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .arg("run")
        .arg(&model)
        .args(["--runtime", "ort", "--out"])
        .arg(&out.0)
        .env("ORT_DYLIB_PATH", "/nonexistent/libonnxruntime.so")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/nonexistent/libonnxruntime.so") && err.contains("not a file"),
        "{err}"
    );
}

/// `opdump run MODEL --runtime RUNTIME ARGS..` in `cwd`.
fn run_in(cwd: &std::path::Path, model: &str, runtime: &str, extra: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_opdump"));
    cmd.current_dir(cwd)
        .arg("run")
        .arg(fixtures().join(model))
        .args(["--runtime", runtime])
        .args(extra);
    for v in ["MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH"] {
        cmd.env_remove(v);
    }
    cmd.output().expect("run opdump")
}

/// mlp_ext.onnx keeps w and b in mlp_ext.onnx.data and scale/shape in float_data/int64_data:
/// from a folder that is not the model's, under a dotted, spaced --out, the output equals the
/// reference evaluator's and every weight is dumped as a constant.
fn external_data_from_another_folder(runtime: &str) {
    let tmp = Tmp::new(&format!("ext-{runtime}"));
    let cwd = tmp.0.join("first.last dir");
    std::fs::create_dir_all(&cwd).unwrap();
    let x = format!(
        "x={}",
        fixtures().join("exported/mlp_ext/input_x.npy").display()
    );
    let o = run_in(
        &cwd,
        "exported/mlp_ext.onnx",
        runtime,
        &["--input", &x, "--out", "x y/.."],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("warning"), "{err}");
    let net = cwd.join("rank_0/mlp_ext/0");
    let files = npy_in(&net.join("0"));
    let y = files
        .iter()
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("Reshape.") && n.contains(".output.0.")
        })
        .unwrap();
    let want = fixtures().join("exported/mlp_ext/expected_y.npy");
    support::assert_close(runtime, y, &want, 1e-6);
    let consts: Vec<String> = npy_in(&net.join("constants"))
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for w in [
        "Parameter.w.",
        "Parameter.b.",
        "Parameter.scale.",
        "Parameter.shape.",
    ] {
        assert!(consts.iter().any(|c| c.starts_with(w)), "{w}: {consts:?}");
    }
}

#[cfg(feature = "candle")]
#[test]
fn candle_reads_external_data_and_typed_fields_from_any_folder() {
    external_data_from_another_folder("candle");
}

#[cfg(feature = "ort")]
#[test]
fn ort_resolves_external_data_beside_the_model_from_any_folder() {
    if !support::onnx_runtime_available() {
        return;
    }
    external_data_from_another_folder("ort");
}

#[cfg(feature = "candle")]
#[test]
fn a_candle_panic_is_a_clean_error_naming_the_node_and_op() {
    let tmp = Tmp::new("panic");
    std::fs::create_dir_all(&tmp.0).unwrap();
    let o = run_in(
        &tmp.0,
        "exported/gemm_nobias.onnx",
        "candle",
        &["--out", "d"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error: candle-onnx panicked (caught) at node \"head/Gemm\" (Gemm, #1): "),
        "{err}"
    );
    // No default panic report, no library advice, no "nothing was dumped" after the error.
    for bad in [
        "thread '",
        "RUST_BACKTRACE",
        "begin_step",
        "nothing was dumped",
    ] {
        assert!(!err.contains(bad), "{bad}: {err}");
    }
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// `model` with every external-data `location` replaced by `to` (a protobuf rewrite with
/// dump-onnx's wire helpers: ModelProto.graph -> initializer -> external_data entries).
#[cfg(feature = "ort")]
fn relocate(model: &[u8], to: &str) -> Vec<u8> {
    use dump_onnx::wire::{Fields, Value, put_bytes};
    fn rewrite(msg: &[u8], path: &[u32], to: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let mut f = Fields::new(msg, "message");
        let mut is_location = false;
        while let Some((n, v, raw)) = f.next_field().unwrap() {
            match (path, v) {
                ([first, rest @ ..], Value::Bytes(b)) if *first == n => {
                    put_bytes(&mut out, n, &rewrite(b, rest, to))
                }
                ([], Value::Bytes(b)) if n == 1 => {
                    is_location = b == b"location";
                    out.extend_from_slice(raw);
                }
                ([], Value::Bytes(_)) if n == 2 && is_location => {
                    put_bytes(&mut out, 2, to.as_bytes())
                }
                _ => out.extend_from_slice(raw),
            }
        }
        out
    }
    rewrite(model, &[7, 5, 13], to)
}

#[cfg(feature = "ort")]
#[test]
fn ort_and_candle_run_a_model_whose_external_data_location_is_absolute() {
    let tmp = Tmp::new("absext");
    std::fs::create_dir_all(&tmp.0).unwrap();
    let dir = fixtures().join("exported");
    let data = std::fs::canonicalize(dir.join("mlp_ext.onnx.data")).unwrap();
    let model = relocate(
        &std::fs::read(dir.join("mlp_ext.onnx")).unwrap(),
        data.to_str().unwrap(),
    );
    let m = tmp.0.join("abs.onnx");
    std::fs::write(&m, model).unwrap();
    let x = format!("x={}", dir.join("mlp_ext/input_x.npy").display());
    let mut runtimes = vec!["candle"];
    if support::onnx_runtime_available() {
        runtimes.push("ort");
    }
    for rt in runtimes {
        let out = tmp.0.join(rt);
        let o = Command::new(env!("CARGO_BIN_EXE_opdump"))
            .arg("run")
            .arg(&m)
            .args(["--runtime", rt, "--input", &x, "--out"])
            .arg(&out)
            .env_remove("MINDSPORE_DUMP_CONFIG")
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{rt}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let y = npy_in(&out.join("rank_0/abs/0/0"))
            .into_iter()
            .find(|p| {
                let n = p.file_name().unwrap().to_string_lossy();
                n.starts_with("Reshape.") && n.contains(".output.0.")
            })
            .unwrap();
        support::assert_close(rt, &y, &dir.join("mlp_ext/expected_y.npy"), 1e-6);
    }
}

/// `opdump run MODEL --runtime RUNTIME --out OUT` from the fixtures folder's parent.
#[cfg(feature = "ort")]
fn dump_model(model: &str, runtime: &str, out: &std::path::Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .arg("run")
        .arg(fixtures().join(model))
        .args(["--runtime", runtime, "--out"])
        .arg(out)
        .env_remove("MINDSPORE_DUMP_CONFIG")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{model} {runtime}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `opdump compare A B --json`: exit code and the JSON report.
#[cfg(feature = "ort")]
fn compare_json(a: &std::path::Path, b: &std::path::Path) -> (i32, serde_json::Value) {
    let o = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .arg("compare")
        .arg(a)
        .arg(b)
        .arg("--json")
        .output()
        .unwrap();
    let j = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code().unwrap(), j)
}

/// tract decomposes cnn.onnx's Gemm into EinSum + Add, its Relu into Max and its Flatten
/// into Reshape; against ONNX Runtime, only those nodes' outputs pair (rule `node`), the
/// helpers and inputs are inside the nodes, nothing is unpaired and nothing diverges, in
/// either direction. A x1.01 or NaN change of the Gemm's weight is named first: tract's Add,
/// paired with ONNX Runtime's Gemm.
#[cfg(feature = "ort")]
#[test]
fn tract_and_ort_pair_at_onnx_node_boundaries() {
    if !support::onnx_runtime_available() {
        return;
    }
    let tmp = Tmp::new("nodes");
    let (t, o) = (tmp.0.join("tract"), tmp.0.join("ort"));
    dump_model("cnn.onnx", "tract", &t);
    dump_model("cnn.onnx", "ort", &o);
    for (a, b) in [(&t, &o), (&o, &t)] {
        let (code, j) = compare_json(a, b);
        assert_eq!(code, 0, "{j:#}");
        assert_eq!(j["diverged"], 0);
        assert_eq!(j["only_in_a"].as_array().unwrap().len(), 0, "{j:#}");
        assert_eq!(j["only_in_b"].as_array().unwrap().len(), 0, "{j:#}");
        let node_pairs: Vec<&serde_json::Value> = j["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["rule"] == "node")
            .collect();
        // relu1, flatten1 and fc1: their outputs only.
        assert_eq!(node_pairs.len(), 3, "{j:#}");
        assert!(
            node_pairs
                .iter()
                .all(|p| p["a"]["io"] == "output" && p["b"]["io"] == "output"),
            "{j:#}"
        );
    }
    let (_, j) = compare_json(&t, &o);
    let inside = |side: &str, node: &str| {
        j[side]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["onnx_node"] == node)
            .count()
    };
    // tract: EinSum in 0, in 1, out 0 and Add in 0, in 1; ORT: Gemm's three inputs.
    assert_eq!(
        (inside("within_a", "fc1"), inside("within_b", "fc1")),
        (5, 3)
    );
    assert_eq!(
        (inside("within_a", "relu1"), inside("within_b", "relu1")),
        (2, 1)
    );
    // The text report says so, and lists no unpaired noise.
    let text = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .arg("compare")
        .arg(&t)
        .arg(&o)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("  fc1: 5 tensors in A, 3 in B\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("only in A ("), "{stdout}");

    for (model, why) in [
        ("exported/cnn_fc1w_x1.01.onnx", "NotClose"),
        ("exported/cnn_fc1w_nan.onnx", "NaN/Inf"),
    ] {
        let bad = tmp.0.join(why);
        dump_model(model, "tract", &bad);
        let (code, j) = compare_json(&bad, &o);
        assert_eq!(code, 1, "{model}: {j:#}");
        let first = &j["first_divergent"];
        assert_eq!(
            first["op_name"], "Default_fc1_Add-op0",
            "{model}: {first:#}"
        );
        assert_eq!(first["io"], "output");
        assert_eq!(first["b_op_name"], "Default_fc1_Gemm-op0");
        assert_eq!(first["rule"], "node");
        let reasons = first["reasons"].to_string();
        assert!(
            reasons.contains(if why == "NaN/Inf" {
                "NaN/Inf"
            } else {
                "outside"
            }),
            "{model}: {reasons}"
        );
        // Only the Gemm's output and what reads it diverge.
        for p in j["pairs"].as_array().unwrap() {
            if p["diverged"] == true {
                let name = p["a"]["op_name"].as_str().unwrap();
                assert!(
                    name == "Default_fc1_Add-op0" || name.contains("softmax1"),
                    "{model}: {p:#}"
                );
            }
        }
    }
}

/// `--stop-at-nonfinite` with `runtime` on nan_source (its Log goes NaN): exit 1, the Log
/// node named, the recorder's trigger.json written.
fn stops_at_the_log_node(runtime: &str) {
    let out = Tmp::new(&format!("stop-{runtime}"));
    let model = fixtures().join("nan_source.onnx");
    let input = format!("x={}", fixtures().join("nan_source/inputs/x.npy").display());
    let o = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .arg("run")
        .arg(&model)
        .args(["--runtime", runtime, "--input", &input, "--steps", "2"])
        .args(["--flight-recorder", "1", "--stop-at-nonfinite", "--out"])
        .arg(&out.0)
        .env_remove("MINDSPORE_DUMP_CONFIG")
        .output()
        .expect("run opdump");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("stopped at the first non-finite output: kernel Default/log1/")
            && stderr.contains("at step 0"),
        "{stderr}"
    );
    let t = std::fs::read_to_string(out.0.join("rank_0/trigger.json")).unwrap();
    assert!(t.contains("\"kernel\": \"Default/log1/"), "{t}");
}

#[cfg(feature = "candle")]
#[test]
fn candle_stops_at_the_first_nan() {
    stops_at_the_log_node("candle");
}

#[cfg(feature = "ort")]
#[test]
fn ort_stops_at_the_first_nan() {
    if !support::onnx_runtime_available() {
        return;
    }
    stops_at_the_log_node("ort");
}
