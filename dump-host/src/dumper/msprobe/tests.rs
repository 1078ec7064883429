//! The msprobe layout written by the Dumper: names, entries, filters, side files.

use std::{collections::HashMap, path::Path};

use serde_json::Value;

use crate::{DumpOptions, Dumper, TensorRef};

fn root(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-msprobe-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn open(root: &Path, task: &str, level: &str, section: &str, env: &[(&str, &str)]) -> Dumper {
    let text = format!(
        r#"{{"task": "{task}", "dump_path": "{}", "rank": [], "step": [], "level": "{level}",
            "{task}": {section}}}"#,
        root.display()
    );
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(text.into_bytes())
        .unwrap()
}

fn json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", p.display()))
}

/// Runs two conv kernels (candle-style module names when `modules`) and a relu in one step.
fn run(d: &mut Dumper, modules: bool) {
    let x = [1.0f32, -2.0, 3.0, 4.0];
    let w = [0.5f32, 0.25];
    let step = d.begin_step();
    let names: [(&str, &str); 3] = if modules {
        [
            ("Conv2d", "Default/features/conv1-Conv2d/Conv2d-op0"),
            ("relu", "Default/features/relu-op1"),
            ("Seq", "Default/features-Seq/Seq-op2"),
        ]
    } else {
        [
            ("Conv2D", "Default/net/conv1-Conv2d/Conv2D-op0"),
            ("Conv2D", "Default/net/conv2-Conv2d/Conv2D-op1"),
            ("ReLU", "Default/net/ReLU-op2"),
        ]
    };
    for (op, name) in names {
        if let Some(k) = step.kernel(op, name) {
            k.input(0, TensorRef::from_slice(&[2, 2], &x)).unwrap();
            k.input(1, TensorRef::from_slice(&[2], &w)).unwrap();
            k.output(0, TensorRef::from_slice(&[2, 2], &x)).unwrap();
            k.finish().unwrap();
        }
    }
    step.finish().unwrap();
}

#[test]
fn statistics_l1_writes_msprobe_names_stats_and_side_files() {
    let r = root("stats");
    let mut d = open(
        &r,
        "statistics",
        "L1",
        r#"{"summary_mode": "statistics"}"#,
        &[],
    );
    run(&mut d, false);
    let report = d.close().unwrap();
    assert_eq!(report.rows, 9, "three calls of three tensors");
    assert_eq!(report.files, 0);
    let dir = r.join("step0/rank0");
    let doc = json(&dir.join("dump.json"));
    let top: Vec<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(top, ["task", "level", "framework", "dump_data_dir", "data"]);
    assert_eq!(doc["task"], "statistics");
    assert_eq!(doc["dump_data_dir"], Value::Null);
    let data = doc["data"].as_object().unwrap();
    let calls: Vec<&str> = data.keys().map(String::as_str).collect();
    assert_eq!(
        calls,
        [
            "Functional.Conv2D.0.forward",
            "Functional.Conv2D.1.forward",
            "Functional.ReLU.0.forward"
        ]
    );
    let x = &data["Functional.Conv2D.0.forward"]["input_args"][0];
    let keys: Vec<&str> = x.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "type",
            "dtype",
            "shape",
            "Max",
            "Min",
            "Mean",
            "Norm",
            "requires_grad"
        ]
    );
    assert_eq!(x["dtype"], "torch.float32");
    assert_eq!(x["shape"], serde_json::json!([2, 2]));
    assert_eq!(x["Max"], 4.0);
    assert_eq!(x["Min"], -2.0);
    assert_eq!(x["Mean"], 1.5);
    assert_eq!(x["Norm"], 30f64.sqrt());
    assert_eq!(
        data["Functional.ReLU.0.forward"]["output"][0]["shape"],
        serde_json::json!([2, 2])
    );
    assert_eq!(json(&dir.join("construct.json")), serde_json::json!({}));
    let stack = json(&dir.join("stack.json"));
    assert_eq!(stack["2"][0][0], "Functional.ReLU.0.forward");
    assert!(
        stack["2"][1][0]
            .as_str()
            .unwrap()
            .contains("Default/net/ReLU-op2")
    );
    // Finished: no twin left behind, no tensor directory for the statistics task.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["construct.json", "dump.json", "stack.json"],
        "{names:?}"
    );
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn tensor_task_writes_npy_files_named_in_dump_json() {
    let r = root("tensor");
    let mut d = open(&r, "tensor", "L1", r#"{"list": ["conv2"]}"#, &[]);
    run(&mut d, false);
    assert_eq!(d.close().unwrap().files, 3);
    let dir = r.join("step0/rank0");
    let doc = json(&dir.join("dump.json"));
    assert_eq!(
        doc["dump_data_dir"],
        dir.join("dump_tensor_data").to_string_lossy().as_ref()
    );
    let data = doc["data"].as_object().unwrap();
    // `list` matches the runtime's kernel name (conv2) as well as the call name.
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["Functional.Conv2D.1.forward"]
    );
    let w = &data["Functional.Conv2D.1.forward"]["input_args"][1];
    assert_eq!(w["data_name"], "Functional.Conv2D.1.forward.input.1.npy");
    let f =
        dump_npy::read_file(dir.join("dump_tensor_data/Functional.Conv2D.1.forward.input.1.npy"))
            .unwrap();
    assert_eq!(f.shape, [2]);
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn md5_mode_is_the_crc32_of_the_bytes() {
    let r = root("md5");
    let mut d = open(&r, "statistics", "L1", r#"{"summary_mode": "md5"}"#, &[]);
    run(&mut d, false);
    d.close().unwrap();
    let doc = json(&r.join("step0/rank0/dump.json"));
    let x = &doc["data"]["Functional.Conv2D.0.forward"]["input_args"][0];
    let bytes: Vec<u8> = [1.0f32, -2.0, 3.0, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let want = format!("{:08x}", dump_core::hash::crc32::crc32(&bytes));
    assert_eq!(x["md5"], want.as_str());
    let keys: Vec<&str> = x.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys.last(), Some(&"md5"));
    std::fs::remove_dir_all(&r).unwrap();
}

/// summary_mode xor: no Max/Min/Mean/Norm, `md5` is `0x%016x` of the bytes' XOR fold (an
/// odd byte count padded), a 0-d number is its value (float or integer), as msprobe 26.
#[test]
fn xor_mode_replaces_the_statistics_with_the_xor_checksum() {
    let r = root("xor");
    let mut d = open(&r, "statistics", "L1", r#"{"summary_mode": "xor"}"#, &[]);
    run(&mut d, false);
    let step = d.begin_step();
    let k = step.kernel("Odd", "Default/net/Odd-op3").unwrap();
    let odd = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
    k.input(0, TensorRef::from_slice(&[11], &odd)).unwrap();
    k.input(1, TensorRef::from_slice(&[], &[2.5f32])).unwrap();
    k.output(0, TensorRef::from_slice(&[], &[-7i32])).unwrap();
    k.output(1, TensorRef::from_slice(&[], &[f32::NAN]))
        .unwrap();
    k.output(2, TensorRef::from_slice(&[], &[f32::NEG_INFINITY]))
        .unwrap();
    k.finish().unwrap();
    step.finish().unwrap();
    d.close().unwrap();
    let doc = json(&r.join("step0/rank0/dump.json"));
    let x = &doc["data"]["Functional.Conv2D.0.forward"]["input_args"][0];
    let keys: Vec<&str> = x.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["type", "dtype", "shape", "requires_grad", "md5"]);
    // f32 [1, -2, 3, 4]: words 0xc0000000_3f800000 and 0x40800000_40400000.
    assert_eq!(
        x["md5"],
        format!(
            "0x{:016x}",
            0xc000_0000_3f80_0000u64 ^ 0x4080_0000_4040_0000
        )
    );
    let doc = json(&r.join("step1/rank0/dump.json"));
    let e = &doc["data"]["Functional.Odd.0.forward"];
    assert_eq!(
        e["input_args"][0]["md5"],
        format!("0x{:016x}", 0x0807_0605_0403_0201u64 ^ 0x0b_0a09)
    );
    assert_eq!(e["input_args"][1]["md5"], 2.5);
    assert_eq!(e["output"][0]["md5"], -7);
    assert_eq!(e["output"][1]["md5"], "NaN");
    assert_eq!(e["output"][2]["md5"], "-Infinity");
    assert!(e["output"][0].get("Max").is_none());
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn levels_pick_modules_and_apis_and_construct_maps_parents() {
    for (level, want) in [
        (
            "L0",
            vec![
                "Module.features.conv1.Conv2d.forward.0",
                "Module.features.Seq.forward.0",
            ],
        ),
        // At L1 a module-form kernel is its module's one operator.
        (
            "L1",
            vec![
                "Functional.Conv2d.0.forward",
                "Functional.relu.0.forward",
                "Functional.Seq.0.forward",
            ],
        ),
        (
            "mix",
            vec![
                "Module.features.conv1.Conv2d.forward.0",
                "Functional.relu.0.forward",
                "Module.features.Seq.forward.0",
            ],
        ),
    ] {
        let r = root(&format!("level-{level}"));
        let mut d = open(&r, "statistics", level, "{}", &[]);
        run(&mut d, true);
        d.close().unwrap();
        let dir = r.join("step0/rank0");
        let doc = json(&dir.join("dump.json"));
        assert_eq!(doc["level"], level);
        let calls: Vec<&str> = doc["data"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(calls, want, "{level}");
        let construct = json(&dir.join("construct.json"));
        if level == "mix" {
            assert_eq!(
                construct,
                serde_json::json!({
                    "Module.features.conv1.Conv2d.forward.0": "Module.features.Seq.forward.0",
                    "Functional.relu.0.forward": "Module.features.Seq.forward.0",
                    "Module.features.Seq.forward.0": null,
                })
            );
        }
        std::fs::remove_dir_all(&r).unwrap();
    }
}

#[test]
fn scope_data_mode_steps_and_ranks_filter() {
    let r = root("scope");
    let mut d = open(
        &r,
        "statistics",
        "L1",
        r#"{"scope": ["Functional.Conv2D.1.forward", "Functional.ReLU.0.forward"],
            "data_mode": ["output"]}"#,
        &[],
    );
    run(&mut d, false);
    d.close().unwrap();
    let doc = json(&r.join("step0/rank0/dump.json"));
    let data = doc["data"].as_object().unwrap();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["Functional.Conv2D.1.forward", "Functional.ReLU.0.forward"]
    );
    let e = &data["Functional.ReLU.0.forward"];
    assert_eq!(e["input_args"], serde_json::json!([]));
    assert_eq!(e["output"].as_array().unwrap().len(), 1);
    std::fs::remove_dir_all(&r).unwrap();

    // step [1]: step 0 writes nothing, not even a directory.
    let r = root("steps");
    let text = format!(r#"{{"dump_path": "{}", "step": [1]}}"#, r.display());
    let mut d = Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(text.into_bytes())
        .unwrap();
    run(&mut d, false);
    run(&mut d, false);
    d.close().unwrap();
    assert!(!r.join("step0").exists());
    assert!(r.join("step1/rank0/dump.json").exists());
    std::fs::remove_dir_all(&r).unwrap();

    // rank [3] on rank 0: disabled.
    let r = root("ranks");
    let text = format!(r#"{{"dump_path": "{}", "rank": [3]}}"#, r.display());
    let d = Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(text.clone().into_bytes())
        .unwrap();
    assert!(!d.is_enabled());
    let env: HashMap<String, String> = [("RANK_ID".to_string(), "3".to_string())].into();
    let mut d = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(text.into_bytes())
        .unwrap();
    run(&mut d, false);
    d.close().unwrap();
    assert!(r.join("step0/rank3/dump.json").exists());
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn an_empty_tensor_keeps_its_slot_as_null() {
    let r = root("null-slot");
    let mut d = open(&r, "statistics", "L1", "{}", &[]);
    let step = d.begin_step();
    if let Some(k) = step.kernel("Add", "Default/Add-op0") {
        k.input(0, TensorRef::from_slice(&[0], &[] as &[f32]))
            .unwrap();
        k.input(1, TensorRef::from_slice(&[1], &[2.0f32])).unwrap();
        k.finish().unwrap();
    }
    step.finish().unwrap();
    d.close().unwrap();
    let doc = json(&r.join("step0/rank0/dump.json"));
    let args = &doc["data"]["Functional.Add.0.forward"]["input_args"];
    assert_eq!(args[0], Value::Null);
    assert_eq!(args[1]["Max"], 2.0);
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn non_finite_statistics_stay_valid_json() {
    let r = root("nan");
    let mut d = open(&r, "statistics", "L1", "{}", &[]);
    let step = d.begin_step();
    if let Some(k) = step.kernel("Div", "Default/Div-op0") {
        k.output(0, TensorRef::from_slice(&[2], &[f32::NAN, 1.0]))
            .unwrap();
        k.output(1, TensorRef::from_slice(&[2], &[f32::INFINITY, 1.0]))
            .unwrap();
        k.output(2, TensorRef::from_slice(&[2], &[3i64, -4]))
            .unwrap();
        k.output(3, TensorRef::from_slice(&[2], &[true, false]))
            .unwrap();
        k.finish().unwrap();
    }
    step.finish().unwrap();
    d.close().unwrap();
    let doc = json(&r.join("step0/rank0/dump.json"));
    let out = &doc["data"]["Functional.Div.0.forward"]["output"];
    assert_eq!(out[0]["Max"], "NaN");
    assert_eq!(out[0]["Norm"], "NaN");
    assert_eq!(out[1]["Max"], "Infinity");
    assert_eq!(out[2]["Max"], 3);
    assert_eq!(out[2]["Min"], -4);
    assert!(out[2]["Max"].is_i64());
    assert_eq!(out[3]["Max"], true);
    assert_eq!(out[3]["Min"], false);
    assert_eq!(out[3]["Mean"], Value::Null);
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn asking_twice_names_one_call_and_a_rerun_is_a_new_call() {
    let r = root("ask-twice");
    let mut d = open(&r, "statistics", "L1", "{}", &[]);
    let step = d.begin_step();
    let x = [1.0f32];
    for _ in 0..2 {
        // A runtime that checks first, then reports (as `opdump demo` does).
        assert!(step.kernel("Add", "Default/Add-op0").is_some());
        let k = step.kernel("Add", "Default/Add-op0").unwrap();
        assert_eq!(
            k.call_name(),
            step.kernel("Add", "Default/Add-op0").unwrap().call_name()
        );
        k.output(0, TensorRef::from_slice(&[1], &x)).unwrap();
        k.finish().unwrap();
    }
    step.finish().unwrap();
    d.close().unwrap();
    let doc = json(&r.join("step0/rank0/dump.json"));
    let calls: Vec<&str> = doc["data"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        calls,
        ["Functional.Add.0.forward", "Functional.Add.1.forward"]
    );
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn a_commit_interval_groups_calls_and_the_step_end_publishes_the_rest() {
    let r = root("interval");
    let text = format!(
        r#"{{"task": "statistics", "dump_path": "{}", "level": "L1"}}"#,
        r.display()
    );
    let opts = DumpOptions {
        msprobe_commit_interval: std::time::Duration::from_secs(3600),
        ..DumpOptions::default()
    };
    let mut d = Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(opts)
        .on_event(|_| {})
        .open_json(text.into_bytes())
        .unwrap();
    let step = d.begin_step();
    let x = [1.0f32];
    let dump_json = r.join("step0/rank0/dump.json");
    for i in 0..5 {
        let name = format!("Default/Add-op{i}");
        let k = step.kernel("Add", &name).unwrap();
        k.output(0, TensorRef::from_slice(&[1], &x)).unwrap();
        k.finish().unwrap();
        // The first call is published at once (committed by the step's journal thread, a
        // moment later), the others wait for the interval.
        let start = std::time::Instant::now();
        while !dump_json.exists() || json(&dump_json)["data"].as_object().unwrap().is_empty() {
            assert!(start.elapsed() < std::time::Duration::from_secs(30));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(json(&dump_json)["data"].as_object().unwrap().len(), 1);
    }
    step.finish().unwrap();
    assert_eq!(json(&dump_json)["data"].as_object().unwrap().len(), 5);
    assert_eq!(d.close().unwrap().rows, 5);
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn overflow_check_keeps_only_the_calls_whose_outputs_overflowed() {
    let r = root("overflow");
    let mut d = open(&r, "overflow_check", "L1", r#"{"overflow_nums": -1}"#, &[]);
    let step = d.begin_step();
    for (i, v) in [[1.0f32, 2.0], [f32::INFINITY, 1.0], [3.0, 4.0]]
        .iter()
        .enumerate()
    {
        let name = format!("Default/Mul-op{i}");
        let k = step.kernel("Mul", &name).unwrap();
        k.input(0, TensorRef::from_slice(&[2], &[1.0f32, 1.0]))
            .unwrap();
        k.output(0, TensorRef::from_slice(&[2], v)).unwrap();
        k.finish().unwrap();
    }
    step.finish().unwrap();
    assert_eq!(
        d.close().unwrap().files,
        2,
        "the overflowing call's input and output"
    );
    let dir = r.join("step0/rank0");
    let doc = json(&dir.join("dump.json"));
    assert_eq!(doc["task"], "overflow_check");
    let data = doc["data"].as_object().unwrap();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["Functional.Mul.1.forward"]
    );
    assert_eq!(
        data["Functional.Mul.1.forward"]["output"][0]["Max"],
        "Infinity"
    );
    assert!(
        dir.join("dump_tensor_data/Functional.Mul.1.forward.output.0.npy")
            .exists()
    );
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn a_call_name_too_long_for_a_file_names_its_short_file() {
    let r = root("long");
    let mut d = open(&r, "tensor", "L1", "{}", &[]);
    let op = "X".repeat(300);
    let step = d.begin_step();
    let k = step.kernel(&op, "Default/long-op0").unwrap();
    k.output(0, TensorRef::from_slice(&[1], &[1.0f32])).unwrap();
    k.finish().unwrap();
    step.finish().unwrap();
    d.close().unwrap();
    let dir = r.join("step0/rank0");
    let doc = json(&dir.join("dump.json"));
    let (call, e) = doc["data"].as_object().unwrap().iter().next().unwrap();
    assert_eq!(call, &format!("Functional.{op}.0.forward"));
    let name = e["output"][0]["data_name"].as_str().unwrap();
    assert!(name.len() <= 255, "{name}");
    assert!(dir.join("dump_tensor_data").join(name).exists(), "{name}");
    std::fs::remove_dir_all(&r).unwrap();
}

/// A training step's gradient kernels (dump-candle's `Gradients/Default/{path}/{param}/
/// Gradient-op{n}`) become msprobe's `Module.{path}.{Class}.parameters_grad.{k}` entries at
/// mix and L0 (class from the module call of that path, else `Module`; `k` the backward pass),
/// `{param: [tensor]}` with files `{entry}.{param}.npy`; none at L1.
#[test]
fn gradients_are_parameters_grad_entries() {
    let w = [0.5f32, -0.25, 2.0, 1.0];
    let b = [0.125f32];
    for level in ["mix", "L0", "L1"] {
        let r = root(&format!("grad-{level}"));
        let mut d = open(&r, "tensor", level, "{}", &[]);
        let step = d.begin_step();
        let k = step
            .kernel("Linear", "Default/fc-Linear/Linear-op0")
            .unwrap();
        k.output(0, TensorRef::from_slice(&[2, 2], &w)).unwrap();
        k.finish().unwrap();
        for (name, t, shape) in [
            (
                "Gradients/Default/fc/weight/Gradient-op1",
                &w[..],
                &[2usize, 2][..],
            ),
            ("Gradients/Default/fc/bias/Gradient-op2", &b[..], &[1][..]),
            ("Gradients/Default/scale/Gradient-op3", &b[..], &[1][..]),
            // The same parameter again (a second backward in the step): a second tensor.
            (
                "Gradients/Default/fc/weight/Gradient-op4",
                &w[..],
                &[2, 2][..],
            ),
        ] {
            if let Some(k) = step.kernel("Gradient", name) {
                k.output(0, TensorRef::from_slice(shape, t)).unwrap();
                k.finish().unwrap();
            }
        }
        if let Some(k) = step.kernel("Update", "Optimizer/Default/fc/weight/Update-op5") {
            k.output(0, TensorRef::from_slice(&[2, 2], &w)).unwrap();
            k.finish().unwrap();
        }
        step.finish().unwrap();
        d.close().unwrap();
        let dir = r.join("step0/rank0");
        let doc = json(&dir.join("dump.json"));
        let data = doc["data"].as_object().unwrap();
        let names: Vec<&str> = data.keys().map(String::as_str).collect();
        if level == "L1" {
            assert!(
                names.iter().all(|n| !n.contains("parameters_grad")),
                "{names:?}"
            );
            std::fs::remove_dir_all(&r).unwrap();
            continue;
        }
        let fc = &data["Module.fc.Linear.parameters_grad.0"];
        let keys: Vec<&str> = fc.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["weight", "bias"], "{level}");
        assert_eq!(fc["weight"].as_array().unwrap().len(), 1);
        assert_eq!(fc["bias"][0]["Max"], 0.125);
        assert_eq!(fc["weight"][0]["Min"], -0.25);
        assert_eq!(
            fc["weight"][0]["data_name"],
            "Module.fc.Linear.parameters_grad.0.weight.npy"
        );
        // The second backward's gradient of `weight`: the next entry, holding only it.
        let fc1 = &data["Module.fc.Linear.parameters_grad.1"];
        let keys: Vec<&str> = fc1
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["weight"], "{level}");
        assert_eq!(
            fc1["weight"][0]["data_name"],
            "Module.fc.Linear.parameters_grad.1.weight.npy"
        );
        let top = &data["Module.Module.parameters_grad.0"];
        assert_eq!(
            top["scale"][0]["data_name"],
            "Module.Module.parameters_grad.0.scale.npy"
        );
        for n in [
            "Module.fc.Linear.parameters_grad.0.weight.npy",
            "Module.fc.Linear.parameters_grad.1.weight.npy",
            "Module.fc.Linear.parameters_grad.0.bias.npy",
            "Module.Module.parameters_grad.0.scale.npy",
        ] {
            let f = dump_npy::read_file(dir.join("dump_tensor_data").join(n)).unwrap();
            assert!(!f.shape.is_empty(), "{n}");
        }
        // The gradient entries come after the step's calls; construct.json leaves them out.
        assert!(
            names.last().unwrap().contains(".parameters_grad."),
            "{names:?}"
        );
        let construct = json(&dir.join("construct.json"));
        assert!(
            construct
                .as_object()
                .unwrap()
                .keys()
                .all(|k| !k.contains("parameters_grad")),
            "{construct}"
        );
        std::fs::remove_dir_all(&r).unwrap();
    }
}
