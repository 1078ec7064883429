//! msprobe's config and layout written by opdump, run as a user runs it: `opdump check` on
//! msprobe configs, `opdump demo` with the shared msprobe 26.2.0 configs
//! (tests/fixtures/msprobe/*.config.json) compared key by key with msprobe's own dump.json,
//! read back by `opdump inspect` / `compare` against the MindSpore-layout dump of the same run,
//! and killed with SIGKILL mid-dump.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use opdump_test_support::KillOnDrop;
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/msprobe")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-mspw-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn opdump(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .env_remove("RANK_ID")
        .env_remove("RANK")
        .env_remove("MINDSPORE_DUMP_CONFIG")
        .output()
        .expect("run opdump")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Runs `opdump demo` (2 steps) with `config` into `out`.
fn demo(config: &Path, out: &Path, extra: &[&str]) {
    let mut args = vec![
        "demo",
        "--config",
        s(config),
        "--out",
        s(out),
        "--steps",
        "2",
        "--no-baseline",
    ];
    args.extend_from_slice(extra);
    let o = opdump(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn check_names_the_dialect_of_every_shared_config() {
    for name in [
        "torch_statistics",
        "torch_md5",
        "torch_tensor",
        "mindspore_cpu_statistics",
    ] {
        let cfg = fixtures().join(format!("{name}.config.json"));
        let o = opdump(&["check", s(&cfg)]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{name}: {err}");
        assert!(err.contains("(msprobe config.json)"), "{name}: {err}");
        let eff: Value = serde_json::from_slice(&o.stdout).unwrap();
        let want = json(&cfg);
        for k in ["task", "dump_path", "level", "async_dump"] {
            assert_eq!(eff[k], want[k], "{name}: {k}");
        }
    }
    // A MindSpore config is named as such.
    let dir = tmpdir("check-ms");
    let ms = dir.join("data_dump.json");
    std::fs::write(
        &ms,
        r#"{"common_dump_settings": {"dump_mode": 0, "path": "/tmp/x", "net_name": "Net",
            "iteration": "all", "input_output": 0, "kernels": [], "support_device": [0]},
            "e2e_dump_settings": {"enable": true}}"#,
    )
    .unwrap();
    let o = opdump(&["check", s(&ms)]);
    assert!(
        stderr(&o).contains("(MindSpore data_dump.json)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn check_reports_every_msprobe_error_with_file_key_value_and_what_is_allowed() {
    let dir = tmpdir("check-bad");
    let cfg = dir.join("config.json");
    std::fs::write(
        &cfg,
        r#"{"task": "tensors", "dump_path": "./dump", "step": ["4-2"], "level": "L5",
            "statistics": {"summary_mode": "crc"}}"#,
    )
    .unwrap();
    let o = opdump(&["check", s(&cfg)]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    // Each key's line names the file first; the summary line after them does not.
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(": error: ")).collect();
    assert_eq!(lines.len(), 3, "task, step, level at once: {err}");
    for (l, key, value) in [
        (lines[0], "task", "\"tensors\""),
        (lines[1], "step[0]", "\"4-2\""),
        (lines[2], "level", "\"L5\""),
    ] {
        assert!(
            l.starts_with(&format!("{}: error: {key}: ", cfg.display())),
            "{l}"
        );
        assert!(l.contains(value) && l.contains("allowed"), "{l}");
    }
    assert!(err.contains("has 3 errors (msprobe config.json"), "{err}");
    // Hostile files: not JSON, not an object, binary, a directory.
    for (name, bytes) in [
        ("trunc.json", &b"{\"task\": \"tensor\", \"dump_path\": "[..]),
        ("bin.json", &b"\xff\xfe{\"task\"}"[..]),
        ("list.json", &b"[\"task\", \"dump_path\"]"[..]),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        let o = opdump(&["check", s(&p)]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains("error"), "{name}: {}", stderr(&o));
    }
    let o = opdump(&["check", s(&dir)]);
    assert_eq!(o.status.code(), Some(2));
}

/// The (key, JSON type) sequence of every tensor object under `v`, and of the top level.
fn skeletons(v: &Value, out: &mut BTreeSet<Vec<(String, &'static str)>>) {
    let ty = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    match v {
        Value::Object(m) if m.contains_key("dtype") && m.contains_key("shape") => {
            out.insert(m.iter().map(|(k, v)| (k.clone(), ty(v))).collect());
        }
        Value::Object(m) => m.values().for_each(|x| skeletons(x, out)),
        Value::Array(a) => a.iter().for_each(|x| skeletons(x, out)),
        _ => {}
    }
}

fn top_keys(doc: &Value) -> Vec<(String, &'static str)> {
    doc.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let t = match v {
                Value::Null => "null",
                Value::String(_) => "string",
                Value::Object(_) => "object",
                _ => "other",
            };
            (k.clone(), t)
        })
        .collect()
}

#[test]
fn the_same_task_level_and_summary_mode_give_msprobes_key_order_and_value_types() {
    for (case, proc_dir) in [
        ("torch_statistics", "proc8348"),
        ("torch_md5", "proc8360"),
        ("torch_tensor", "proc8377"),
    ] {
        let out = tmpdir(&format!("keys-{case}"));
        demo(&fixtures().join(format!("{case}.config.json")), &out, &[]);
        let ours = json(&out.join("step0/rank0/dump.json"));
        let theirs = json(&fixtures().join(format!("{case}/step0/{proc_dir}/dump.json")));
        assert_eq!(
            top_keys(&ours),
            top_keys(&theirs),
            "{case}: top-level keys and types"
        );
        assert_eq!(ours["task"], theirs["task"]);
        assert_eq!(ours["level"], theirs["level"]);
        let (mut a, mut b) = (BTreeSet::new(), BTreeSet::new());
        skeletons(&ours["data"], &mut a);
        skeletons(&theirs["data"], &mut b);
        assert!(!a.is_empty());
        for sk in &a {
            assert!(
                b.contains(sk),
                "{case}: opdump writes tensor objects {sk:?}, msprobe's are {b:?}"
            );
        }
        // Every call entry has msprobe's keys in msprobe's order.
        for (name, e) in ours["data"].as_object().unwrap() {
            let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                ["input_args", "input_kwargs", "output"],
                "{case}: {name}"
            );
        }
        if case == "torch_tensor" {
            let dir = out.join("step0/rank0/dump_tensor_data");
            let n = std::fs::read_dir(&dir).unwrap().count();
            assert!(n > 100, "{n} tensor files");
        }
        std::fs::remove_dir_all(&out).unwrap();
    }
}

#[test]
fn an_msprobe_layout_dump_reads_back_identical_to_the_mindspore_layout_dump_of_the_same_run() {
    let dir = tmpdir("roundtrip");
    let (ms, mp) = (dir.join("mindspore"), dir.join("msprobe"));
    let cfg = dir.join("config.json");
    std::fs::write(
        &cfg,
        r#"{"task": "tensor", "dump_path": "/tmp/unused", "level": "L1",
            "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}"#,
    )
    .unwrap();
    demo(&cfg, &mp, &[]);
    let o = opdump(&[
        "demo",
        "--out",
        s(&ms),
        "--steps",
        "2",
        "--no-baseline",
        "--saved-data",
        "full",
        "--categories",
        "max,min,avg,l2norm",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let o = opdump(&["inspect", s(&mp)]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{text}{}", stderr(&o));
    assert!(text.contains("(msprobe layout)"), "{text}");

    let o = opdump(&["compare", s(&ms), s(&mp), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let pairs = r["pairs"].as_array().unwrap();
    assert!(pairs.len() > 300, "{} pairs", pairs.len());
    assert_eq!(
        r["only_in_b"],
        serde_json::json!([]),
        "every msprobe tensor pairs"
    );
    assert_eq!(r["first_divergent"], Value::Null);
    for p in pairs {
        assert_eq!(p["a"]["op_type"], p["b"]["op_type"]);
        assert_eq!(p["a"]["shape"], p["b"]["shape"]);
        assert_eq!(
            p["outcome"]["metrics"]["max_abs_error"], 0.0,
            "identical tensors: {p}"
        );
        // statistic.csv rounds to 6 significant digits (%g); dump.json keeps every digit.
        for k in ["max", "min", "l2norm"] {
            let (a, b) = (p["stats_a"][k].as_f64(), p["stats_b"][k].as_f64());
            let (a, b) = (a.unwrap(), b.unwrap());
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1e-30),
                "{k}: {a} vs {b}"
            );
        }
    }
    // What only the MindSpore layout has: the parameters (msprobe has no place for a tensor
    // outside a call).
    for t in r["only_in_a"].as_array().unwrap() {
        assert_eq!(t["op_type"], "Parameter", "{t}");
    }

    // Statistics alone compare too: the statistics task against the MindSpore statistic rows.
    let (ms2, mp2) = (dir.join("ms-stats"), dir.join("mp-stats"));
    demo(&fixtures().join("torch_statistics.config.json"), &mp2, &[]);
    let o = opdump(&[
        "demo",
        "--out",
        s(&ms2),
        "--steps",
        "2",
        "--no-baseline",
        "--saved-data",
        "statistic",
        "--categories",
        "max,min,avg,l2norm",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // statistic.csv rounds to 6 digits (%g) where dump.json keeps all: the int32 labels'
    // l2norm (12.9615 vs 12.96148...) needs a tolerance that integers do not get by default.
    let o = opdump(&[
        "compare",
        s(&ms2),
        s(&mp2),
        "--json",
        "--tol",
        "int32=1e-5,0",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["only_in_b"], serde_json::json!([]));
    assert!(r["pairs"].as_array().unwrap().len() > 300);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn dump_jsons(root: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for step in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let p = step.path().join("rank0/dump.json");
        if p.exists() {
            v.push(p);
        }
    }
    v
}

#[test]
fn sigkill_mid_step_leaves_every_dump_json_valid() {
    let dir = tmpdir("kill9");
    let cfg = dir.join("config.json");
    std::fs::write(
        &cfg,
        r#"{"task": "statistics", "dump_path": "/tmp/unused", "level": "L1",
            "statistics": {"summary_mode": "md5"}}"#,
    )
    .unwrap();
    let (mut entries, mut mid_step) = (0, 0);
    // Kills at several points: early in the run and after a few steps.
    for (round, wait_steps) in [0usize, 1, 3, 6].into_iter().enumerate() {
        let out = dir.join(format!("out{round}"));
        let child = Command::new(env!("CARGO_BIN_EXE_opdump"))
            .args(["demo", "--config", s(&cfg), "--out", s(&out)])
            .args(["--steps", "100000", "--batch", "4", "--no-baseline"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start opdump demo");
        let mut child = KillOnDrop(child);
        let start = Instant::now();
        while dump_jsons(&out).len() <= wait_steps {
            if let Ok(Some(status)) = child.0.try_wait() {
                panic!("opdump demo ended before it was killed: {status}");
            }
            assert!(start.elapsed() < Duration::from_secs(120), "no dump.json");
            std::thread::sleep(Duration::from_millis(3 + 7 * round as u64));
        }
        child.0.kill().expect("SIGKILL");
        assert!(!child.0.wait().unwrap().success());
        let files = dump_jsons(&out);
        assert!(files.len() > wait_steps);
        for p in &files {
            let doc = json(p);
            let data = doc["data"]
                .as_object()
                .unwrap_or_else(|| panic!("{}", p.display()));
            entries += data.len();
            // The step being written when the kill came still has its twins.
            if p.with_file_name(".dump.json.next").exists()
                || p.with_file_name(".dump.json.0").exists()
            {
                mid_step += 1;
            }
            for (name, e) in data {
                assert!(e["output"].is_array(), "{}: {name}", p.display());
            }
        }
        // The reader takes the killed dump as it is.
        let o = opdump(&["inspect", s(&out)]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    assert!(entries > 100, "{entries} entries checked");
    assert!(mid_step > 0, "at least one kill landed inside a step");
    // Python's json agrees, when there is a python3.
    if let Ok(o) = Command::new("python3")
        .args([
            "-c",
            "import json,glob,sys\nfor p in glob.glob(sys.argv[1]+'/out*/step*/rank0/dump.json'): json.load(open(p))",
        ])
        .arg(&dir)
        .output()
    {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
