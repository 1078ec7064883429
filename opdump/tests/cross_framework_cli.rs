//! `opdump compare` across frameworks on committed data (no Python needed): a small CNN's
//! msprobe dumps (L0 and L1, statistics) and forward-hook `.npz` against `opdump run` of its
//! TorchScript export through tract (BatchNorm folded into the convolutions); and
//! `--mapping` files, good and bad. `tests/fixtures/msprobe/cnn/README.md` says how the data
//! was made.
#![cfg(feature = "tract")]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::OnceLock,
};

use serde_json::Value;

fn cnn() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/msprobe/cnn")
}

fn opdump(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .env_remove("MINDSPORE_DUMP_CONFIG")
        .env_remove("MS_DIAGNOSTIC_DATA_PATH")
        .output()
        .expect("run opdump")
}

/// The tract run of `ts.onnx` (once per test binary).
fn run() -> PathBuf {
    static RUN: OnceLock<PathBuf> = OnceLock::new();
    RUN.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("cross-cli-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let input = format!("x={}", cnn().join("input.npy").display());
        let o = opdump(&[
            "run".as_ref(),
            cnn().join("ts.onnx").as_os_str(),
            "--input".as_ref(),
            input.as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    })
    .clone()
}

/// `opdump compare A B --json [extra]`: exit code, report, stderr.
fn compare(a: &Path, b: &Path, extra: &[&str]) -> (i32, Value, String) {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "compare".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--json".as_ref(),
    ];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    let o = opdump(&args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let j = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o.status.code().unwrap_or(-1), j, err)
}

fn outputs(v: &Value) -> Vec<&Value> {
    v.as_array()
        .map(|l| {
            l.iter()
                .filter(|t| t.get("a").unwrap_or(t)["io"] == "output")
                .collect()
        })
        .unwrap_or_default()
}

fn rule_of<'a>(j: &'a Value, op_name: &str) -> Option<&'a str> {
    outputs(&j["pairs"])
        .into_iter()
        .find(|p| p["a"]["op_name"] == op_name)
        .and_then(|p| p["rule"].as_str())
}

#[test]
fn msprobe_l0_pairs_by_module_scope_with_folded_batchnorms() {
    let html = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("l0-fused-{}.html", std::process::id()));
    let (code, j, err) = compare(
        &cnn().join("L0_statistics"),
        &run(),
        &["--html", html.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    // The page shows each pair's kind and the fused convolutions with their node.
    let page = std::fs::read_to_string(&html).unwrap();
    let _ = std::fs::remove_file(&html);
    assert!(
        page.contains(r#"<details id="fused" open><summary>Fused (5)"#),
        "{page}"
    );
    assert_eq!(page.matches("<tr><td>fused</td><td>A</td><td>").count(), 5);
    assert!(page.contains("Module.block2.conv2.Conv2d.forward.0 output.0</td><td>"));
    assert!(
        page.contains("<td>fused</td><td>fused</td>")
            && page.contains("<td>mapped</td><td>scope</td>")
    );
    // `--json`'s pairing names the kind the rule gives, as the page's column does.
    let mut kinds = std::collections::BTreeSet::new();
    for p in j["pairs"].as_array().unwrap() {
        let want = match p["rule"].as_str().unwrap() {
            "name" => "exact",
            "fused" => "fused",
            _ => "mapped",
        };
        assert_eq!(p["pairing"], want, "{p}");
        kinds.insert(want);
    }
    assert!(
        kinds.contains("fused") && kinds.contains("mapped"),
        "{kinds:?}"
    );
    // 19 module calls: 14 paired, the 5 convolutions whose BatchNorm was folded are fused.
    assert_eq!(outputs(&j["pairs"]).len(), 14, "{:#}", j["only_in_a"]);
    let fused: Vec<&str> = j["fused_a"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["op_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        fused,
        [
            "Module.stem.Conv2d.forward.0",
            "Module.block1.conv1.Conv2d.forward.0",
            "Module.block1.conv2.Conv2d.forward.0",
            "Module.block2.conv1.Conv2d.forward.0",
            "Module.block2.conv2.Conv2d.forward.0"
        ]
    );
    assert!(outputs(&j["only_in_a"]).is_empty());
    assert_eq!(
        rule_of(&j, "Module.bn.BatchNorm2d.forward.0"),
        Some("fused")
    );
    assert_eq!(
        rule_of(&j, "Module.block1.relu.ReLU.forward.1"),
        Some("scope")
    );
    assert_eq!(rule_of(&j, "Module.block2.Block.forward.0"), Some("scope"));
    assert_eq!(rule_of(&j, "Module.fc2.Linear.forward.0"), Some("scope"));
    // The container's output is its last node's: the block's second ReLU.
    let block = outputs(&j["pairs"])
        .into_iter()
        .find(|p| p["a"]["op_name"] == "Module.block1.Block.forward.0")
        .unwrap();
    assert!(
        block["b"]["op_name"]
            .as_str()
            .unwrap()
            .contains("_block1_relu_1_Relu"),
        "{block:#}"
    );
    assert!(
        err.contains("5 fused into an ONNX node") && err.contains("all within tolerance"),
        "{err}"
    );
}

#[test]
fn msprobe_l1_pairs_by_op_kind_in_run_order() {
    let (code, j, err) = compare(&cnn().join("L1_statistics"), &run(), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(outputs(&j["pairs"]).len(), 18);
    assert_eq!(j["fused_a"].as_array().unwrap().len(), 5);
    assert!(outputs(&j["only_in_a"]).is_empty());
    assert_eq!(rule_of(&j, "Tensor.__iadd__.1.forward"), Some("order"));
    assert_eq!(
        rule_of(&j, "Functional.batch_norm.4.forward"),
        Some("fused")
    );
    assert_eq!(
        rule_of(&j, "Functional.adaptive_avg_pool2d.0.forward"),
        Some("order")
    );
}

#[test]
fn a_hook_npz_pairs_by_module_name() {
    let (code, j, err) = compare(&cnn().join("hooks.npz"), &run(), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(outputs(&j["pairs"]).len(), 10, "{:#}", j["only_in_a"]);
    assert_eq!(j["fused_a"].as_array().unwrap().len(), 5);
    assert_eq!(rule_of(&j, "block2.bn2"), Some("fused"));
}

#[test]
fn a_mapping_file_overrides_the_automatic_rules() {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mapping-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // fc2 deliberately mapped onto fc1's node: the mapping wins (and the shapes then differ).
    let yaml = dir.join("map.yaml");
    std::fs::write(
        &yaml,
        "exact:\n  Module.fc2.Linear.forward.0: /fc1/Gemm   # on purpose\n",
    )
    .unwrap();
    let (code, j, err) = compare(
        &cnn().join("L0_statistics"),
        &run(),
        &["--mapping", yaml.to_str().unwrap()],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(rule_of(&j, "Module.fc2.Linear.forward.0"), Some("mapping"));
    assert_eq!(
        j["first_divergent"]["op_name"],
        "Module.fc2.Linear.forward.0"
    );
    // Bad files: exit 2, naming the file, the section or entry and the value.
    for (name, text, want) in [
        (
            "bad.json",
            "{\"exakt\": {}}",
            "unknown section \"exakt\" (allowed: exact, prefix, regex)",
        ),
        (
            "bad2.json",
            "{\"regex\": {\"[\": \"x\"}}",
            "regex: entry \"[\" is not a valid regular expression",
        ),
        (
            "bad.yml",
            "exact:\n  a: [b]\n",
            "line 2: exact: entry \"a\"",
        ),
    ] {
        let f = dir.join(name);
        std::fs::write(&f, text).unwrap();
        let (code, _, err) = compare(
            &cnn().join("L0_statistics"),
            &run(),
            &["--mapping", f.to_str().unwrap()],
        );
        assert_eq!(code, 2, "{name}: {err}");
        assert!(
            err.contains("--mapping") && err.contains(name) && err.contains(want),
            "{name}: {err}"
        );
    }
    let (code, _, err) = compare(
        &cnn().join("L0_statistics"),
        &run(),
        &["--mapping", "/nonexistent/m.json"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/m.json"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unpaired_tensors_list_their_nearest_candidates() {
    // linear.1 mapped onto fc1's node: linear.0 finds no node and fc2's stays free.
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("nearest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let m = dir.join("m.json");
    std::fs::write(
        &m,
        r#"{"exact": {"Functional.linear.1.forward": "/fc1/Gemm"}}"#,
    )
    .unwrap();
    let l1 = cnn().join("L1_statistics");
    let (_, j, err) = compare(&l1, &run(), &["--mapping", m.to_str().unwrap()]);
    let near = j["nearest_a"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| {
            n["tensor"]["op_name"] == "Functional.linear.0.forward" && n["tensor"]["io"] == "output"
        })
        .unwrap_or_else(|| panic!("no candidates for linear.0: {:#} {err}", j["nearest_a"]));
    let first = near["candidates"][0]["op_name"].as_str().unwrap();
    assert!(first.contains("_fc2_Gemm"), "{near:#}");
    // The table says it too.
    let o = opdump(&[
        "compare".as_ref(),
        l1.as_os_str(),
        run().as_os_str(),
        "--mapping".as_ref(),
        m.as_os_str(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    let at = out.find("only in A").expect("an only-in-A list");
    assert!(
        out[at..].contains("Functional.linear.0.forward output.0\n      nearest: "),
        "{out}"
    );
    // So does the page: pairing `nearest`, and the candidates the text report names.
    let html = dir.join("nearest.html");
    let o = opdump(&[
        "compare".as_ref(),
        l1.as_os_str(),
        run().as_os_str(),
        "--mapping".as_ref(),
        m.as_os_str(),
        "--html".as_ref(),
        html.as_os_str(),
    ]);
    assert!(o.status.code().is_some_and(|c| c < 2));
    let page = std::fs::read_to_string(&html).unwrap();
    let cands = page
        .split("<tr><td>nearest</td><td>A</td><td>")
        .skip(1)
        .find_map(|row| {
            let (tensor, rest) = row.split_once("</td><td>")?;
            tensor
                .ends_with(" Functional.linear.0.forward output.0")
                .then(|| &rest[..rest.find("</td>").unwrap()])
        })
        .unwrap_or_else(|| panic!("no nearest row for linear.0: {page}"));
    assert!(
        cands.starts_with("rank 0 ") && cands.contains("_fc2_Gemm"),
        "{cands}"
    );
    assert!(
        page.contains(r##"<a href="#unpaired">"##) && page.contains(r#"<details id="unpaired""#)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `Tensor.flatten` call whose recorded output shape passes `usize` is paired or left
/// unpaired like any other, never a panic: the view check counted its elements with an
/// unchecked product (a debug build's overflow).
#[test]
fn a_view_whose_shape_passes_usize_is_no_panic() {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let (f, t) = (e.path(), to.join(e.file_name()));
            if f.is_dir() {
                copy(&f, &t);
            } else {
                std::fs::copy(&f, &t).unwrap();
            }
        }
    }
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("huge-view-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    copy(&cnn().join("L1_statistics"), &dir);
    let p = dir.join("step0/proc20094/dump.json");
    let text = std::fs::read_to_string(&p).unwrap();
    let flatten = r#""Tensor.flatten.0.forward": {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1, 16, 1, 1], "Max": 0.3872750401496887, "Min": 0.00855585653334856, "Mean": 0.07970672845840454, "Norm": 0.5139641165733337, "requires_grad": false}], "input_kwargs": {}, "output": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4294967296, 4294967296, 4], "Max": 0.3872750401496887, "Min": 0.00855585653334856, "Mean": 0.07970672845840454, "Norm": 0.5139641165733337, "requires_grad": false}]},
  "Functional.linear.0.forward""#;
    assert!(text.contains("\"Functional.linear.0.forward\""));
    std::fs::write(
        &p,
        text.replacen("\"Functional.linear.0.forward\"", flatten, 1),
    )
    .unwrap();
    let (code, j, err) = compare(&dir, &run(), &[]);
    assert!(!err.contains("panicked"), "{err}");
    assert!(matches!(code, 0 | 1), "exit {code}: {err}");
    // The flatten call is listed (paired or only in A) and the rest still pairs.
    let listed = |key: &str| {
        j[key]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t.get("a").unwrap_or(t)["op_name"] == "Tensor.flatten.0.forward")
    };
    assert!(listed("pairs") || listed("only_in_a"), "{j:#}");
    assert_eq!(
        rule_of(&j, "Functional.linear.1.forward"),
        Some("order"),
        "{j:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
