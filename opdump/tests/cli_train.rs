//! `opdump inspect` on training dumps, run as a user runs it: the binary as a subprocess on
//! dump-candle's train_cnn example dumps (tests/fixtures/train, made by its gen.sh): a
//! diverging run names the first non-finite kernel as the head weight's gradient at step 8,
//! with its role, in the terminal report, `--json` and `--html`; the per-parameter trends
//! flag every parameter of the diverging run as exploding and none of the healthy one.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/train")
        .join(name)
}

fn opdump(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .output()
        .expect("run opdump")
}

const PARAMS: [&str; 6] = [
    "conv1_bias",
    "conv1_weight",
    "conv2_bias",
    "conv2_weight",
    "head_bias",
    "head_weight",
];

#[test]
fn a_diverging_run_names_the_first_bad_gradient() {
    let dir = fixture("diverging");
    let o = opdump(&["inspect".as_ref(), dir.as_os_str()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains(
            "first non-finite operator: rank 0 iteration 8 graph 0: Gradient \
             Gradients_Default_head_weight_Gradient-op7 output.0\n  a gradient (of parameter head_weight)"
        ),
        "{out}"
    );
    assert!(out.contains("(6 of 6 flagged"), "{out}");
    for p in PARAMS {
        let line = out
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(p))
            .unwrap_or_else(|| panic!("{p}: {out}"));
        assert!(line.ends_with("exploding"), "{line}");
    }

    let o = opdump(&["inspect".as_ref(), "--json".as_ref(), dir.as_os_str()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &v["first_nonfinite"];
    assert_eq!(
        (&f["role"], &f["parameter"], &f["iteration"], &f["op_type"]),
        (
            &serde_json::json!("gradient"),
            &serde_json::json!("head_weight"),
            &serde_json::json!(8),
            &serde_json::json!("Gradient")
        )
    );
    let params = v["parameters"].as_array().unwrap();
    assert_eq!(params.len(), 6);
    let head = params
        .iter()
        .find(|p| p["parameter"] == "head_weight")
        .unwrap();
    assert_eq!(head["steps"].as_array().unwrap().len(), 10);
    assert_eq!(head["first_nonfinite_step"], 8);
    // Flagged long before the overflow: the first step's update already moves the weight by
    // more than its norm.
    assert_eq!(head["exploding_from"], 0);
    assert_eq!(head["verdict"], "exploding");
    // The gradient norm grows step after step before it overflows.
    let g: Vec<f64> = head["grad_norm"].as_array().unwrap()[..8]
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert!(g[7] > 1e6 * g[0], "{g:?}");
    assert_eq!(v["parameter_thresholds"]["exploding_growth"], 100.0);

    let tmp = std::env::temp_dir().join(format!("opdump-cli-train-{}.html", std::process::id()));
    let o = opdump(&[
        "inspect".as_ref(),
        "--html".as_ref(),
        tmp.as_os_str(),
        dir.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let page = std::fs::read_to_string(&tmp).unwrap();
    let _ = std::fs::remove_file(&tmp);
    assert!(
        page.contains("a gradient (of parameter head_weight)"),
        "summary"
    );
    assert!(page.contains("<h2>Parameters over the dumped steps</h2>"));
    assert!(page.contains("gradient l2norm per step"));
    assert_eq!(page.matches("<td>exploding</td>").count(), 6);
    assert!(page.contains("<th>role</th>") && page.contains("<td>gradient</td>"));
}

#[test]
fn a_healthy_run_is_finite_and_flags_no_parameter() {
    let dir = fixture("healthy");
    let o = opdump(&["inspect".as_ref(), dir.as_os_str()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("(0 of 6 flagged"), "{out}");
    let o = opdump(&["inspect".as_ref(), "--json".as_ref(), dir.as_os_str()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for p in v["parameters"].as_array().unwrap() {
        assert_eq!(p["verdict"], "ok", "{p}");
        let g = p["grad_norm"].as_array().unwrap();
        // Training converges: every gradient norm shrinks from the first step to the last.
        assert!(g[9].as_f64().unwrap() < g[0].as_f64().unwrap(), "{p}");
        let r: Vec<f64> = p["update_ratio"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert!(r.iter().all(|&x| x > 0.0 && x < 1.0), "{r:?}");
    }
}
