//! `opdump run MODEL.onnx` run as a process on the ONNX fixtures (tests/fixtures/onnx).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

fn fixture(p: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/onnx")
        .join(p)
        .to_string_lossy()
        .into_owned()
}

struct Tmp(PathBuf);
impl Tmp {
    fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!("opdump-run-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Tmp(d)
    }
    fn s(&self) -> String {
        self.0.to_string_lossy().into_owned()
    }
}
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn opdump(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_opdump"));
    cmd.arg("run").args(args);
    for v in [
        "MINDSPORE_DUMP_CONFIG",
        "MS_DIAGNOSTIC_DATA_PATH",
        "MINDSPORE_DUMP_IGNORE_USELESS_OUTPUT",
    ] {
        cmd.env_remove(v);
    }
    cmd.output().expect("run opdump")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn npy(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "npy"))
        .collect();
    v.sort();
    v
}

fn f32s(p: &Path) -> Vec<f32> {
    let f = dump_npy::read_file(p).unwrap();
    f.data
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn one(dir: &Path, prefix: &str, io: &str) -> PathBuf {
    let v: Vec<PathBuf> = npy(dir)
        .into_iter()
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with(prefix) && n.contains(io)
        })
        .collect();
    assert_eq!(v.len(), 1, "{prefix} {io} in {}", dir.display());
    v[0].clone()
}

#[test]
fn cnn_with_an_input_file_dumps_two_steps_graphs_and_reference_values() {
    let tmp = Tmp::new("cnn");
    let x = format!("x={}", fixture("cnn/inputs/x.npy"));
    let o = opdump(&[
        &fixture("cnn.onnx"),
        "--input",
        &x,
        "--out",
        &tmp.s(),
        "--steps",
        "2",
    ]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("with tract, 2 step(s)")
            && out.contains("inputs (from --input): x float32 [2, 1, 8, 8]"),
        "{out}"
    );
    assert!(
        out.contains("  step 0: 7 kernels") && out.contains("  step 1: 7 kernels"),
        "{out}"
    );
    let rank = tmp.0.join("rank_0");
    for ext in ["ir", "pb"] {
        let p = rank.join(format!("graphs/ms_output_trace_code_graph_0.{ext}"));
        assert!(
            std::fs::metadata(&p).unwrap().len() > 100,
            "{}",
            p.display()
        );
    }
    let order =
        std::fs::read_to_string(rank.join("execution_order/ms_execution_order_graph_0.csv"))
            .unwrap();
    assert_eq!(order.lines().count(), 8, "{order}");
    assert!(
        order
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("Default/conv1/Conv-op0"),
        "{order}"
    );
    // net_name is the model's file stem; 19 kernel tensors + the input per step
    for step in ["0", "1"] {
        let dir = rank.join("cnn/0").join(step);
        assert_eq!(npy(&dir).len(), 20, "step {step}");
        let rows = std::fs::read_to_string(dir.join("statistic.csv")).unwrap();
        assert_eq!(rows.lines().count(), 21);
        let got = f32s(&one(&dir, "Softmax.", ".output.0."));
        let want = f32s(Path::new(&fixture("cnn/expected/probs.npy")));
        assert_eq!(got.len(), 10);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }
    assert_eq!(npy(&rank.join("cnn/0/constants")).len(), 7);
}

#[test]
fn random_inputs_are_deterministic_per_seed_and_the_seed_is_printed() {
    let run = |seed: &str, tag: &str| {
        let tmp = Tmp::new(tag);
        let o = opdump(&[&fixture("add2.onnx"), "--out", &tmp.s(), "--seed", seed]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let out = text(&o.stdout);
        assert!(
            out.contains(&format!(
                "inputs (random, seed {seed}): a float32 [2, 3], b float32 [2, 3]"
            )),
            "{out}"
        );
        let dir = tmp.0.join("rank_0/add2/0/0");
        (
            f32s(&one(&dir, "Parameter.a.", "output")),
            f32s(&one(&dir, "Parameter.b.", "output")),
        )
    };
    let (a1, b1) = run("7", "s7a");
    let (a2, b2) = run("7", "s7b");
    let (a3, _) = run("8", "s8");
    assert_eq!((&a1, &b1), (&a2, &b2));
    assert_ne!(a1, a3);
    assert_ne!(a1, b1);
    assert!(a1.iter().all(|v| (-1.0..1.0).contains(v)), "{a1:?}");
}

#[test]
fn bad_model_missing_input_unknown_input_and_shape_mismatch_are_clear_errors() {
    let tmp = Tmp::new("errors");
    let bad = opdump(&[&fixture("gen.py"), "--out", &tmp.s()]);
    assert_eq!(bad.status.code(), Some(2));
    let e = text(&bad.stderr);
    assert!(e.contains("gen.py: not a valid ONNX model"), "{e}");

    let a = format!("a={}", fixture("add2/inputs/a.npy"));
    let missing = opdump(&[&fixture("add2.onnx"), "--input", &a, "--out", &tmp.s()]);
    assert_eq!(missing.status.code(), Some(2));
    let e = text(&missing.stderr);
    assert!(
        e.contains("missing input \"b\" (float32 [2, 3]): pass --input b=FILE.npy"),
        "{e}"
    );

    let z = format!("z={}", fixture("add2/inputs/a.npy"));
    let unknown = opdump(&[&fixture("add2.onnx"), "--input", &z, "--out", &tmp.s()]);
    assert_eq!(unknown.status.code(), Some(2));
    let e = text(&unknown.stderr);
    assert!(
        e.contains("the model has no input \"z\" (its inputs: [\"a\", \"b\"])"),
        "{e}"
    );

    let x = format!("x={}", fixture("add2/inputs/a.npy"));
    let shape = opdump(&[&fixture("cnn.onnx"), "--input", &x, "--out", &tmp.s()]);
    assert_eq!(shape.status.code(), Some(2));
    let e = text(&shape.stderr);
    assert!(
        e.contains("--input x:")
            && e.contains("has shape [2, 3] but the model declares float32 [2, 1, 8, 8]"),
        "{e}"
    );

    let unreadable = opdump(&[
        &fixture("cnn.onnx"),
        "--input",
        "x=/nonexistent.npy",
        "--out",
        &tmp.s(),
    ]);
    assert_eq!(unreadable.status.code(), Some(2));
    assert!(text(&unreadable.stderr).contains("--input x: /nonexistent.npy:"));
    assert!(
        !tmp.0.join("rank_0/add2").exists(),
        "nothing dumped for rejected runs"
    );
}

#[test]
fn closed_stdout_and_stderr_do_not_stop_the_dump() {
    let tmp = Tmp::new("closed");
    // the shell closes fds 1 and 2 before exec: every print fails with EBADF
    let st = Command::new("sh")
        .arg("-c")
        .arg("exec 1>&- 2>&-; exec \"$0\" run \"$1\" --out \"$2\"")
        .arg(env!("CARGO_BIN_EXE_opdump"))
        .arg(fixture("add2.onnx"))
        .arg(tmp.s())
        .env_remove("MINDSPORE_DUMP_CONFIG")
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0));
    // add1: 2 inputs + 1 output, mul1: 2 + 1, Parameters a and b
    assert_eq!(npy(&tmp.0.join("rank_0/add2/0/0")).len(), 2 * 3 + 2);
}

#[test]
fn an_unknown_ignore_useless_output_value_is_warned_about_and_means_1() {
    let tmp = Tmp::new("useless");
    let o = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(["run", &fixture("add2.onnx"), "--out", &tmp.s()])
        .env_remove("MINDSPORE_DUMP_CONFIG")
        .env("MINDSPORE_DUMP_IGNORE_USELESS_OUTPUT", "yes")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let e = text(&o.stderr);
    assert!(
        e.contains("warning: MINDSPORE_DUMP_IGNORE_USELESS_OUTPUT=\"yes\" is not 0 or 1: using 1"),
        "{e}"
    );
    let ok = opdump(&[&fixture("add2.onnx"), "--out", &tmp.s()]);
    assert!(!text(&ok.stderr).contains("IGNORE_USELESS"));
}

#[test]
fn a_tensor_type_without_a_mindspore_dtype_is_skipped_with_one_warning() {
    let tmp = Tmp::new("tdim");
    let o = opdump(&[&fixture("shape_of.onnx"), "--out", &tmp.s(), "--steps", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let e = text(&o.stderr);
    let warned: Vec<&str> = e
        .lines()
        .filter(|l| l.contains("tract type TDim"))
        .collect();
    assert_eq!(
        warned.len(),
        1,
        "one warning for the type, not one per step: {e}"
    );
    assert!(warned[0].starts_with("warning: constant shape1"), "{e}");
    assert!(
        !tmp.0
            .join("rank_0/shape_of/0/constants")
            .read_dir()
            .unwrap()
            .any(|f| { f.unwrap().file_name().to_string_lossy().contains("shape1") })
    );
}

/// `opdump run` in `cwd` (the environment cleared of dump variables).
fn opdump_in(cwd: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_opdump"));
    cmd.current_dir(cwd).arg("run").args(args);
    for v in ["MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH"] {
        cmd.env_remove(v);
    }
    cmd.output().expect("run opdump")
}

#[test]
fn out_takes_dots_spaces_and_dot_dot_but_the_config_path_keeps_mindspore_rules() {
    let tmp = Tmp::new("paths");
    let cwd = tmp.0.join("first.last dir");
    std::fs::create_dir_all(&cwd).unwrap();
    let model = fixture("add2.onnx");
    // `x y/..` is the current folder itself.
    let o = opdump_in(&cwd, &[&model, "--out", "x y/.."]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert_eq!(npy(&cwd.join("rank_0/add2/0/0")).len(), 2 * 3 + 2, "{out}");
    // No warning about opdump's own embedded config (saved_data full on CPU).
    assert!(!err.contains("MindSpore 2.10 rejects"), "{err}");
    assert!(!err.contains("warning"), "{err}");
    // The default folder under a dotted current folder, too.
    let o = opdump_in(&cwd, &[&model]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(npy(&cwd.join("opdump-run/rank_0/add2/0/0")).len(), 8);
    // The copy of the config names the real root.
    let saved =
        std::fs::read_to_string(cwd.join("opdump-run/rank_0/.dump_metadata/data_dump.json"))
            .unwrap();
    let v: serde_json::Value = serde_json::from_str(&saved).unwrap();
    assert_eq!(
        v["common_dump_settings"]["path"].as_str().unwrap(),
        cwd.join("opdump-run").to_str().unwrap()
    );

    // A config file's `path` is still held to MindSpore's whitelist...
    let cfg = tmp.0.join("cfg.json");
    let bad_root = cwd.join("d");
    let config = |root: &str| {
        format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{root}", "net_name": "N",
            "iteration": "all", "saved_data": "tensor", "input_output": 0, "kernels": [],
            "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#
        )
    };
    std::fs::write(&cfg, config(bad_root.to_str().unwrap())).unwrap();
    let o = opdump_in(&cwd, &[&model, "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(
        e.contains("cfg.json") && e.contains("Dump path only support alphabets"),
        "{e}"
    );
    // ...and `--out` replaces it with any path.
    let o = opdump_in(
        &cwd,
        &[&model, "--config", cfg.to_str().unwrap(), "--out", "a.b c"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(npy(&cwd.join("a.b c/rank_0/N/0/0")).len(), 8);
}

#[test]
fn a_model_with_external_data_runs_from_another_folder() {
    let tmp = Tmp::new("extdata");
    std::fs::create_dir_all(&tmp.0).unwrap();
    let x = format!("x={}", fixture("exported/mlp_ext/input_x.npy"));
    let o = opdump_in(
        &tmp.0,
        &[
            &fixture("exported/mlp_ext.onnx"),
            "--input",
            &x,
            "--out",
            "d",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let dir = tmp.0.join("d/rank_0/mlp_ext/0/0");
    let y = npy(&dir)
        .into_iter()
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("Reshape.") && n.contains(".output.0.")
        })
        .unwrap();
    let want = f32s(Path::new(&fixture("exported/mlp_ext/expected_y.npy")));
    let got = f32s(&y);
    assert_eq!(got.len(), 12);
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-6 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

#[test]
fn run_help_documents_the_exit_codes_and_inspect_help_keeps_rank_n() {
    let o = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    let h = text(&o.stdout);
    assert!(
        h.contains("Exit code 0 when the model ran")
            && h.contains("1 when the runtime could")
            && h.contains("2 on bad")
            && h.contains("external data"),
        "{h}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(["inspect", "--help"])
        .output()
        .unwrap();
    let h = text(&o.stdout);
    assert!(h.contains("rank_N directory such as rank_0"), "{h}");
}

/// `model` with every external-data `location` replaced by `to` (a protobuf rewrite with
/// dump-onnx's wire helpers: ModelProto.graph -> initializer -> external_data entries).
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

#[test]
fn an_absolute_external_data_location_is_inlined_for_tract() {
    let tmp = Tmp::new("absext");
    std::fs::create_dir_all(&tmp.0).unwrap();
    let data = std::fs::canonicalize(fixture("exported/mlp_ext.onnx.data")).unwrap();
    let model = relocate(
        &std::fs::read(fixture("exported/mlp_ext.onnx")).unwrap(),
        data.to_str().unwrap(),
    );
    let m = tmp.0.join("abs.onnx");
    std::fs::write(&m, model).unwrap();
    let x = format!("x={}", fixture("exported/mlp_ext/input_x.npy"));
    let o = opdump_in(&tmp.0, &[m.to_str().unwrap(), "--input", &x, "--out", "d"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let y = npy(&tmp.0.join("d/rank_0/abs/0/0"))
        .into_iter()
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("Reshape.") && n.contains(".output.0.")
        })
        .unwrap();
    let want = f32s(Path::new(&fixture("exported/mlp_ext/expected_y.npy")));
    assert_eq!(f32s(&y), want);
}

/// A one-node model (`y = Relu(x)`, float32) whose input and output declare `dims`, encoded
/// here (ModelProto → GraphProto → NodeProto / ValueInfoProto).
fn relu_model(dims: &[u64]) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn ld(out: &mut Vec<u8>, field: u64, body: &[u8]) {
        varint(out, field << 3 | 2);
        varint(out, body.len() as u64);
        out.extend_from_slice(body);
    }
    let value = |name: &str| {
        let mut shape = Vec::new();
        for &d in dims {
            let mut dim = vec![0x08];
            varint(&mut dim, d);
            ld(&mut shape, 1, &dim);
        }
        let mut tensor = vec![0x08, 1]; // elem_type FLOAT
        ld(&mut tensor, 2, &shape);
        let mut ty = Vec::new();
        ld(&mut ty, 1, &tensor);
        let mut vi = Vec::new();
        ld(&mut vi, 1, name.as_bytes());
        ld(&mut vi, 2, &ty);
        vi
    };
    let mut node = Vec::new();
    ld(&mut node, 1, b"x");
    ld(&mut node, 2, b"y");
    ld(&mut node, 3, b"relu");
    ld(&mut node, 4, b"Relu");
    let mut graph = Vec::new();
    ld(&mut graph, 1, &node);
    ld(&mut graph, 2, b"g");
    ld(&mut graph, 11, &value("x"));
    ld(&mut graph, 12, &value("y"));
    let mut model = vec![0x08, 7]; // ir_version 7
    ld(&mut model, 8, &[0x10, 13]); // opset 13
    ld(&mut model, 7, &graph);
    model
}

/// A model may declare any input shape. Random values for one whose element count passes
/// `usize` panicked (a debug build's overflow), and for one larger than memory the process
/// aborted ("memory allocation of ... bytes failed", SIGABRT); both are now clear errors
/// naming the input, its shape and the way out, and the model still describes itself.
#[test]
fn random_inputs_past_usize_or_memory_are_clear_errors() {
    let tmp = Tmp::new("huge-input");
    std::fs::create_dir_all(&tmp.0).unwrap();
    for (dims, why) in [
        (&[1u64 << 32, 1 << 32, 4][..], "passes the address space"),
        (&[1 << 20, 1 << 20, 1 << 10][..], "bytes ("),
    ] {
        let model = tmp.0.join("huge.onnx");
        std::fs::write(&model, relu_model(dims)).unwrap();
        let o = opdump(&[
            &model.to_string_lossy(),
            "--out",
            &tmp.0.join("d").to_string_lossy(),
        ]);
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{dims:?}: {e}");
        let shape = dims
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        assert!(
            e.contains(&format!("input \"x\" (float32 [{shape}]): "))
                && e.contains(why)
                && e.contains("pass --input x=FILE.npy")
                && !e.contains("panicked"),
            "{dims:?}: {e}"
        );
    }
}
