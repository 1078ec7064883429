//! msprobe's `summary_mode: xor` written by opdump and read back as a user does: two dumps of
//! one kernel written through the Dumper with an msprobe xor config, then `opdump check`,
//! `opdump inspect` and `opdump compare` run as subprocesses; one changed element flips the
//! checksum and compare says so (exit 1). `opdump demo` with an xor config compares equal to
//! itself.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use dump_host::{DumpOptions, Dumper, TensorRef};
use serde_json::Value;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-msxor-{}-{name}", std::process::id()));
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

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn config(root: &Path) -> String {
    format!(
        r#"{{"task": "statistics", "dump_path": "{}", "level": "L1",
            "statistics": {{"summary_mode": "xor"}}}}"#,
        root.display()
    )
}

/// One step: a matmul-like kernel with an f32 input of 7 elements (28 bytes: not a multiple
/// of 8), a bf16 input and an f32 output.
fn dump(root: &Path, x: &[f32]) {
    let mut d = Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions::default())
        .open_json(config(root).into_bytes())
        .unwrap();
    let step = d.begin_step();
    let k = step.kernel("MatMul", "Default/net/MatMul-op0").unwrap();
    k.input(0, TensorRef::from_slice(&[7], x)).unwrap();
    let bf: Vec<half::bf16> = x.iter().map(|&v| half::bf16::from_f32(v)).collect();
    k.input(1, TensorRef::from_slice(&[7], &bf)).unwrap();
    let y: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
    k.output(0, TensorRef::from_slice(&[7], &y)).unwrap();
    k.finish().unwrap();
    step.finish().unwrap();
    d.close().unwrap();
}

fn xor_of(bytes: &[u8]) -> String {
    let mut acc = 0u64;
    for w in bytes.chunks(8) {
        let mut b = [0u8; 8];
        b[..w.len()].copy_from_slice(w);
        acc ^= u64::from_le_bytes(b);
    }
    format!("0x{acc:016x}")
}

#[test]
fn xor_dumps_read_back_and_a_changed_element_is_a_divergence() {
    let dir = tmpdir("two");
    let (a, b) = (dir.join("a"), dir.join("b"));
    let x = [1.0f32, -2.5, 3.0, 0.125, 5.0, -6.0, 7.75];
    dump(&a, &x);
    let mut x2 = x;
    x2[3] = 0.25;
    dump(&b, &x2);

    let cfg = dir.join("config.json");
    std::fs::write(&cfg, config(&a)).unwrap();
    let o = opdump(&["check", s(&cfg)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("msprobe"), "{}", text(&o));

    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("step0/rank0/dump.json")).unwrap())
            .unwrap();
    let e = &doc["data"]["Functional.MatMul.0.forward"];
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(e["input_args"][0]["md5"], xor_of(&bytes).as_str());
    assert!(e["input_args"][0].get("Max").is_none());

    // inspect reads the dump (3 tensors, all finite: exit 0).
    let o = opdump(&["inspect", s(&a), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(report.to_string().contains("\"tensors\":3"), "{}", report);

    // A dump compared with itself: digests equal, exit 0.
    let o = opdump(&["compare", s(&a), s(&a), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let pairs = r["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 3, "{r}");
    assert!(
        pairs.iter().all(|p| p["stats_a"]["xor64"].is_string()
            && p["stats_a"]["xor64"] == p["stats_b"]["xor64"]
            && p["outcome"]["kind"] == "digest"
            && p["outcome"]["equal"] == true),
        "{r}"
    );

    // One element changed: the three digests differ (the output is 2x), exit 1, and the first
    // divergent tensor is the kernel's first input, its reason the digests.
    let o = opdump(&["compare", s(&a), s(&b), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let first = &r["first_divergent"];
    assert_eq!(
        (&first["op_name"], &first["io"], &first["slot"]),
        (
            &Value::from("Functional.MatMul.0.forward"),
            &Value::from("input"),
            &Value::from(0)
        ),
        "{first}"
    );
    assert!(
        first.to_string().to_lowercase().contains("digest"),
        "{first}"
    );
    let pairs = r["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 3, "{r}");
    for p in pairs {
        assert_eq!(p["outcome"]["kind"], "digest", "{p}");
        assert_eq!(p["outcome"]["equal"], false, "{p}");
        assert_eq!(p["diverged"], true, "{p}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `opdump demo` with an msprobe xor config: every tensor object has an `md5` checksum (or a
/// 0-d value) and no statistics; the dump compares equal to itself.
#[test]
fn the_demo_dumps_in_xor_mode() {
    let dir = tmpdir("demo");
    let (out, cfg) = (dir.join("out"), dir.join("config.json"));
    std::fs::write(&cfg, config(&out)).unwrap();
    let o = opdump(&[
        "demo",
        "--config",
        s(&cfg),
        "--out",
        s(&out),
        "--steps",
        "1",
        "--no-baseline",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("step0/rank0/dump.json")).unwrap())
            .unwrap();
    let mut n = 0;
    for e in doc["data"].as_object().unwrap().values() {
        for side in ["input_args", "output"] {
            for t in e[side].as_array().unwrap().iter().filter(|t| !t.is_null()) {
                assert!(t.get("Max").is_none() && t.get("Norm").is_none(), "{t}");
                let ok = match &t["md5"] {
                    Value::String(h) => {
                        h.len() == 18
                            && h.starts_with("0x")
                            && h[2..]
                                .bytes()
                                .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
                    }
                    Value::Number(_) => t["shape"].as_array().unwrap().is_empty(),
                    _ => false,
                };
                assert!(ok, "{t}");
                n += 1;
            }
        }
    }
    assert!(n > 10, "{n} tensors");
    let o = opdump(&["compare", s(&out), s(&out)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}
