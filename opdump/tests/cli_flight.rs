//! The flight recorder and stop-at-first-NaN from the command line (issue 24), run as
//! processes: `opdump demo --flight-recorder N --inject-nan STEP` leaves exactly the last N
//! steps and the trigger step on disk with trigger.json naming the kernel, and `opdump
//! inspect` agrees; a quiet run writes nothing; `--stop-at-nonfinite` prints the kernel and
//! exits 1, from the demo and from `opdump run` on a model whose Log goes NaN. And the rest of
//! the API the adapters now use through `opdump run`: `--set-dump` marks for `dump_mode` 2,
//! exception dump (`op_debug_mode` 4) of a node that fails in tract.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

struct Tmp(PathBuf);
impl Tmp {
    fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!("opdump-flight-{}-{name}", std::process::id()));
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
    opdump_env(args, &[])
}

fn opdump_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_opdump"));
    cmd.args(args).envs(env.iter().copied());
    for v in ["MINDSPORE_DUMP_CONFIG", "MS_DIAGNOSTIC_DATA_PATH"] {
        cmd.env_remove(v);
    }
    cmd.output().expect("run opdump")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The step directories of graph 0 of `net`, sorted.
fn steps(root: &Path, net: &str) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(root.join("rank_0").join(net).join("0"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn trigger(root: &Path) -> serde_json::Value {
    let t = std::fs::read_to_string(root.join("rank_0/trigger.json")).expect("trigger.json");
    serde_json::from_str(&t).unwrap()
}

#[cfg(feature = "tract")]
fn fixture(p: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/onnx")
        .join(p)
        .to_string_lossy()
        .into_owned()
}

const DEMO: [&str; 6] = [
    "demo",
    "--no-baseline",
    "--batch",
    "2",
    "--categories",
    "default",
];

#[test]
fn demo_with_a_nan_at_step_4_leaves_steps_2_3_4_and_inspect_agrees() {
    let tmp = Tmp::new("demo-nan");
    let mut args = DEMO.to_vec();
    args.extend([
        "--steps",
        "7",
        "--flight-recorder",
        "2",
        "--inject-nan",
        "4",
        "--out",
    ]);
    let out = tmp.s();
    args.push(&out);
    let o = opdump(&args);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    assert_eq!(steps(&tmp.0, "LeNet5"), [2, 3, 4]);
    let t = trigger(&tmp.0);
    let kernel = t["trigger"]["kernel"].as_str().unwrap().to_owned();
    assert!(kernel.ends_with("relu-ReLU/ReLU-op0"), "{t}");
    assert_eq!(t["trigger"]["step"], 4);
    assert_eq!(t["first_nonfinite"]["kernel"], kernel.as_str());
    assert!(
        stderr.contains("flight recorder: nonfinite trigger") && stderr.contains("[2, 3, 4]"),
        "{stderr}"
    );
    assert!(stdout.contains("rank_0/trigger.json"), "{stdout}");
    // inspect finds the same first non-finite kernel in what was written.
    let o = opdump(&["inspect", &out]);
    let (istdout, istderr) = text(&o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "1: a non-finite tensor found\n{istdout}{istderr}"
    );
    let named = dump_host::layout::sanitize(&kernel);
    assert!(
        istdout.contains(&format!(
            "first non-finite operator: rank 0 iteration 4 graph 0: ReLU {named} output.0"
        )),
        "{istdout}"
    );
}

#[test]
fn a_quiet_demo_writes_nothing() {
    let tmp = Tmp::new("demo-quiet");
    let mut args = DEMO.to_vec();
    let out = tmp.s();
    args.extend(["--steps", "3", "--flight-recorder", "2", "--out", &out]);
    let o = opdump(&args);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("no trigger fired, nothing written"),
        "{stdout}"
    );
    assert!(!tmp.0.exists(), "nothing written at all");
}

#[test]
fn demo_stop_at_nonfinite_prints_the_kernel_and_exits_1() {
    let tmp = Tmp::new("demo-stop");
    let mut args = DEMO.to_vec();
    let out = tmp.s();
    args.extend([
        "--steps",
        "5",
        "--flight-recorder",
        "1",
        "--inject-nan",
        "2",
        "--stop-at-nonfinite",
        "--out",
        &out,
    ]);
    let o = opdump(&args);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("stopped at the first non-finite output: kernel ")
            && stdout.contains("relu-ReLU/ReLU-op0 (ReLU) at step 2"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("step 3:"),
        "the demo stops after step 2: {stdout}"
    );
    assert_eq!(steps(&tmp.0, "LeNet5"), [1, 2]);
}

#[test]
#[cfg(feature = "tract")] // `opdump run` with its default runtime
fn run_stop_at_nonfinite_names_the_log_node() {
    let tmp = Tmp::new("run-stop");
    let out = tmp.s();
    let input = format!("x={}", fixture("nan_source/inputs/x.npy"));
    let o = opdump(&[
        "run",
        &fixture("nan_source.onnx"),
        "--input",
        &input,
        "--steps",
        "3",
        "--flight-recorder",
        "2",
        "--stop-at-nonfinite",
        "--out",
        &out,
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("stopped at the first non-finite output: kernel Default/log1/")
            && stderr.contains("at step 0"),
        "{stderr}"
    );
    assert!(!stdout.contains("step 1:"), "{stdout}");
    assert_eq!(steps(&tmp.0, "nan_source"), [0]);
    let t = trigger(&tmp.0);
    assert!(
        t["trigger"]["kernel"]
            .as_str()
            .unwrap()
            .starts_with("Default/log1/"),
        "{t}"
    );
}

#[test]
#[cfg(feature = "tract")] // `opdump run` with its default runtime
fn run_with_a_recorder_and_no_nan_writes_nothing() {
    let tmp = Tmp::new("run-quiet");
    let out = tmp.s();
    let o = opdump(&[
        "run",
        &fixture("cnn.onnx"),
        "--steps",
        "3",
        "--flight-recorder",
        "1",
        "--out",
        &out,
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("no trigger fired, nothing written"),
        "{stdout}"
    );
    assert!(!tmp.0.exists());
}

#[test]
fn bad_recorder_arguments_are_usage_errors() {
    for (args, want) in [
        (
            vec!["demo", "--flight-recorder", "0"],
            "0 is not in 1..=1000",
        ),
        (vec!["demo", "--flight-budget-mb", "8"], "--flight-recorder"),
        (
            vec!["run", "m.onnx", "--flight-recorder", "x"],
            "invalid value 'x'",
        ),
    ] {
        let o = opdump(&args);
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

#[test]
fn the_nan_goes_into_the_chosen_kernel_and_the_trigger_names_it() {
    let tmp = Tmp::new("demo-at");
    let mut args = DEMO.to_vec();
    let out = tmp.s();
    args.extend([
        "--steps",
        "4",
        "--flight-recorder",
        "1",
        "--inject-nan",
        "3",
        "--inject-nan-at",
        "fc2",
        "--out",
        &out,
    ]);
    let o = opdump(&args);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("step 3: injected a NaN into the dumped"),
        "{stdout}"
    );
    assert_eq!(steps(&tmp.0, "LeNet5"), [2, 3]);
    let t = trigger(&tmp.0);
    let kernel = t["trigger"]["kernel"].as_str().unwrap();
    assert!(kernel.contains("/fc2-"), "{t}");
    assert!(
        stdout.contains(kernel),
        "the printed kernel is the trigger's: {stdout}"
    );
}

#[test]
#[cfg(feature = "tract")] // `opdump run` with its default runtime
fn run_set_dump_marks_kernels_for_dump_mode_2() {
    let tmp = Tmp::new("set-dump");
    std::fs::create_dir_all(&tmp.0).unwrap();
    let cfg = tmp.0.join("cfg.json");
    std::fs::write(
        &cfg,
        r#"{"common_dump_settings": {"dump_mode": 2, "path": "/tmp/unused", "net_name": "N",
        "iteration": "all", "saved_data": "tensor", "input_output": 0, "kernels": [],
        "support_device": [0]}, "e2e_dump_settings": {"enable": true}}"#,
    )
    .unwrap();
    let out = tmp.0.join("dump");
    let input = format!("x={}", fixture("nan_source/inputs/x.npy"));
    let run = |marks: &[&str]| {
        let mut a = vec![
            "run".to_owned(),
            fixture("nan_source.onnx"),
            "--input".into(),
            input.clone(),
            "--config".into(),
            cfg.to_string_lossy().into_owned(),
            "--out".into(),
            out.to_string_lossy().into_owned(),
        ];
        for m in marks {
            a.extend(["--set-dump".to_owned(), (*m).to_owned()]);
        }
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        // dump_mode 2 is Ascend's set_dump: the config is checked for Ascend.
        opdump_env(&a, &[("OPDUMP_DEVICE", "ascend")])
    };
    // A scope marks the kernel inside it; a full name marks that kernel.
    let o = run(&["Default/log1", "Default/add1/Add-op0"]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    let mut kernels: Vec<String> = std::fs::read_dir(out.join("rank_0/N/0/0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".npy"))
        .map(|n| n.split('.').nth(1).unwrap().to_owned())
        .collect();
    kernels.sort();
    kernels.dedup();
    assert_eq!(
        kernels,
        ["Default_add1_Add-op0", "Default_log1_Ln-op0"],
        "{stdout}"
    );
    // Nothing marked: nothing dumped, and the warning says why.
    let _ = std::fs::remove_dir_all(&out);
    let o = run(&[]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("dump_mode 2 dumps only the kernels marked"),
        "{stderr}"
    );
}

#[test]
#[cfg(feature = "tract")] // `opdump run` with its default runtime
fn run_exception_dump_writes_the_inputs_of_the_node_that_fails() {
    let tmp = Tmp::new("exception");
    std::fs::create_dir_all(&tmp.0).unwrap();
    let cfg = tmp.0.join("cfg.json");
    std::fs::write(
        &cfg,
        r#"{"common_dump_settings": {"dump_mode": 0, "path": "/tmp/unused", "net_name": "N",
        "iteration": "all", "saved_data": "tensor", "input_output": 0, "kernels": [],
        "support_device": [0], "op_debug_mode": 4}, "e2e_dump_settings": {"enable": true}}"#,
    )
    .unwrap();
    let out = tmp.0.join("dump");
    let x = format!("x={}", fixture("gather_oob/inputs/x.npy"));
    let idx = format!("idx={}", fixture("gather_oob/inputs/idx.npy"));
    let o = opdump(&[
        "run",
        &fixture("gather_oob.onnx"),
        "--input",
        &x,
        "--input",
        &idx,
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    // The Gather indexes 7 of 4: tract fails there (exit 1), naming the node.
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("gather1"), "{stderr}");
    let mut files: Vec<String> = std::fs::read_dir(out.join("rank_0/N/0/0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".npy"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(
        files[0].starts_with("Gather.Default_gather1_Gather-op0.")
            && files[0].contains(".input.0."),
        "{files:?}"
    );
    assert!(files[1].contains(".input.1."), "{files:?}");
    let idx = dump_npy::read_file(out.join("rank_0/N/0/0").join(&files[1])).unwrap();
    assert_eq!(idx.data, 7i64.to_le_bytes(), "the index that failed");
}
