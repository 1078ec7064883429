//! The flight recorder with an msprobe `config.json` (issue 24 items 1-2 in msprobe's layout):
//! the ring holds each step's msprobe calls (their `dump.json` entries) and tensors, nothing is
//! written while nothing is wrong, and a trigger writes the last N steps and the trigger step
//! as `step{N}/rank{R}/dump.json`, `construct.json`, `stack.json` and `dump_tensor_data/`,
//! byte for byte what a plain msprobe dump of those steps writes, then `trigger.json`.

use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
};

use dump_host::{DumpOptions, Dumper, TensorRef, config::FlightRecorder};
use serde_json::{Value, json};

fn root(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "opdump-flight-msprobe-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// msprobe's config.json: `task` at `level`, steps `steps` (`[]`: all), every data mode.
fn config(root: &Path, task: &str, level: &str, steps: &[u64]) -> String {
    let mut doc = json!({
        "task": task, "dump_path": root.display().to_string(), "rank": [], "step": steps,
        "level": level,
    });
    doc[task] = match task {
        "tensor" => json!({"scope": [], "list": [], "data_mode": ["all"], "file_format": "npy"}),
        _ => json!({"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}),
    };
    doc.to_string()
}

fn open(text: String, recorder: Option<FlightRecorder>) -> Dumper {
    let env: HashMap<String, String> = HashMap::new();
    let mut b = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .on_event(|_| {});
    if let Some(r) = recorder {
        b = b.flight_recorder(r);
    }
    b.open_json(text.into_bytes()).unwrap()
}

/// The kernels of one training step: two module calls (`Dumped`-style names), an API call
/// inside a module, one called twice, and the gradients of the modules' parameters.
const KERNELS: [(&str, &str); 5] = [
    ("Conv2d", "Default/features/conv1-Conv2d/Conv2d-op0"),
    ("ReLU", "Default/features/relu/ReLU-op1"),
    ("Linear", "Default/fc-Linear/Linear-op2"),
    ("ReLU", "Default/features/relu/ReLU-op3"),
    ("Add", "Default/Add-op4"),
];
const GRADS: [&str; 3] = [
    "Gradients/Default/features/conv1/weight/Gradient-op5",
    "Gradients/Default/fc/weight/Gradient-op6",
    "Gradients/Default/fc/bias/Gradient-op7",
];

/// Runs `steps` steps; kernel `nan_kernel` of step `nan_step` (if any) outputs a NaN.
fn run(d: &mut Dumper, steps: u64, nan_at: Option<(u64, usize)>) {
    for i in 0..steps {
        let step = d.begin_step();
        for (n, (ty, name)) in KERNELS.iter().enumerate() {
            let x: Vec<f32> = (0..24).map(|j| (i * 100 + j) as f32 * 0.5 - 3.0).collect();
            let mut y: Vec<f32> = x.iter().map(|v| v * (n as f32 + 1.0)).collect();
            if nan_at == Some((i, n)) {
                y[5] = f32::NAN;
            }
            if let Some(k) = step.kernel(ty, name) {
                k.input(0, TensorRef::from_slice(&[4, 6], &x)).unwrap();
                k.input(1, TensorRef::from_slice(&[6], &x[..6])).unwrap();
                k.output(0, TensorRef::from_slice(&[4, 6], &y)).unwrap();
            }
        }
        for (n, name) in GRADS.iter().enumerate() {
            let g: Vec<f32> = (0..6).map(|j| (i + n as u64) as f32 - j as f32).collect();
            if let Some(k) = step.kernel("Gradient", name) {
                k.output(0, TensorRef::from_slice(&[6], &g)).unwrap();
            }
        }
        step.finish().unwrap();
    }
}

/// Every file under `dir`, relative path → bytes, with `root` replaced by `ROOT` (dump.json
/// names its tensor directory by absolute path).
fn files(dir: &Path, root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let mut bytes = std::fs::read(&p).unwrap();
            if rel.ends_with(".json") {
                let text = String::from_utf8(bytes).unwrap();
                bytes = text
                    .replace(&root.display().to_string(), "ROOT")
                    .into_bytes();
            }
            out.insert(rel, bytes);
        }
    }
    out
}

fn step_dirs(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("step"))
        .collect();
    v.sort();
    v
}

fn recorder(steps: u32) -> FlightRecorder {
    FlightRecorder {
        steps,
        ..FlightRecorder::default()
    }
}

/// Recorded then triggered against plain, for one task and level.
fn recorded_equals_plain(task: &str, level: &str) {
    let tag = format!("{task}-{level}");
    let (rec_root, plain_root) = (root(&format!("rec-{tag}")), root(&format!("plain-{tag}")));
    // The NaN comes out of the Linear module of step 4 (a call at every level): steps 2, 3 and
    // 4 are written.
    let mut d = open(config(&rec_root, task, level, &[]), Some(recorder(2)));
    run(&mut d, 7, Some((4, 2)));
    d.close().unwrap();
    let mut d = open(config(&plain_root, task, level, &[2, 3, 4]), None);
    run(&mut d, 7, Some((4, 2)));
    d.close().unwrap();

    assert_eq!(step_dirs(&rec_root), ["step2", "step3", "step4"], "{tag}");
    assert_eq!(step_dirs(&plain_root), ["step2", "step3", "step4"], "{tag}");
    for s in ["step2", "step3", "step4"] {
        let (a, b) = (
            files(&rec_root.join(s), &rec_root),
            files(&plain_root.join(s), &plain_root),
        );
        let names: Vec<&String> = a.keys().collect();
        assert_eq!(
            names,
            b.keys().collect::<Vec<_>>(),
            "{tag} {s}: the same files"
        );
        for (name, bytes) in &a {
            assert!(
                bytes == &b[name],
                "{tag} {s}/{name} differs:\n{}\n---\n{}",
                String::from_utf8_lossy(bytes),
                String::from_utf8_lossy(&b[name])
            );
        }
        // Valid JSON, the calls a training step has at this level.
        let doc: Value = serde_json::from_slice(&a["rank0/dump.json"]).unwrap();
        let data = doc["data"].as_object().unwrap();
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        match level {
            "L1" => assert_eq!(data.len(), 5, "{tag}: {keys:?}"),
            _ => {
                assert!(
                    keys.contains(&"Module.fc.Linear.parameters_grad.0"),
                    "{keys:?}"
                );
                assert!(
                    keys.contains(&"Module.features.conv1.Conv2d.forward.0"),
                    "{keys:?}"
                );
            }
        }
        if task == "tensor" {
            assert!(
                a.keys()
                    .any(|k| k.starts_with("rank0/dump_tensor_data/") && k.ends_with(".npy")),
                "{tag}: {names:?}"
            );
        }
    }
    // trigger.json, beside the step directories, names the kernel and the steps written.
    let t: Value =
        serde_json::from_slice(&std::fs::read(rec_root.join("trigger.json")).unwrap()).unwrap();
    assert_eq!(t["trigger"]["kind"], "nonfinite");
    assert_eq!(t["trigger"]["step"], 4);
    // Named as dump.json names it: the call.
    let call = match level {
        "L1" => "Functional.Linear.0.forward",
        _ => "Module.fc.Linear.forward.0",
    };
    assert_eq!(t["trigger"]["kernel"], call, "{tag}");
    assert_eq!(t["trigger"]["op_type"], "Linear");
    let dirs: Vec<&str> = t["steps_written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["dir"].as_str().unwrap())
        .collect();
    assert_eq!(dirs, ["step2/rank0", "step3/rank0", "step4/rank0"]);
    if task == "tensor" {
        assert!(t["tensor_files"].as_u64().unwrap() > 0);
    }
    for r in [rec_root, plain_root] {
        std::fs::remove_dir_all(r).unwrap();
    }
}

#[test]
fn a_triggered_recording_is_the_plain_msprobe_dump_of_its_steps() {
    for (task, level) in [
        ("tensor", "L1"),
        ("tensor", "mix"),
        ("statistics", "L0"),
        ("statistics", "mix"),
    ] {
        recorded_equals_plain(task, level);
    }
}

#[test]
fn nothing_is_written_while_nothing_is_wrong() {
    let r = root("quiet");
    let mut d = open(config(&r, "tensor", "mix", &[]), Some(recorder(2)));
    run(&mut d, 5, None);
    assert!(d.flight_recorder_bytes() > 0, "tensors are held");
    d.close().unwrap();
    let left: Vec<String> = std::fs::read_dir(&r)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&r);
}

#[test]
fn a_user_trigger_writes_the_ring_in_msprobes_layout() {
    let r = root("user");
    let mut d = open(config(&r, "statistics", "L1", &[]), Some(recorder(1)));
    let h = d.trigger_handle();
    run(&mut d, 3, None);
    std::thread::spawn(move || h.trigger("loss spike"))
        .join()
        .unwrap();
    run(&mut d, 1, None); // step 3 ends with the trigger armed: steps 2 and 3 written
    d.close().unwrap();
    assert_eq!(step_dirs(&r), ["step2", "step3"]);
    let t: Value = serde_json::from_slice(&std::fs::read(r.join("trigger.json")).unwrap()).unwrap();
    assert_eq!(t["trigger"]["kind"], "user");
    assert_eq!(t["trigger"]["reason"], "loss spike");
    let doc: Value =
        serde_json::from_slice(&std::fs::read(r.join("step3/rank0/dump.json")).unwrap()).unwrap();
    assert_eq!(doc["task"], "statistics");
    assert_eq!(doc["dump_data_dir"], Value::Null);
    let data = doc["data"].as_object().unwrap();
    let relu = &data["Functional.ReLU.1.forward"]["output"][0];
    // run's first step again (i = 0): x = j / 2 - 3, the second ReLU's output 4 x.
    assert_eq!(relu["Max"], json!(34.0));
    let _ = std::fs::remove_dir_all(&r);
}

/// The recorder from the config's own `opdump` section (no builder call): the same ring and
/// trigger as from the builder.
#[test]
fn the_opdump_section_of_an_msprobe_config_turns_the_recorder_on() {
    let r = root("section");
    let mut doc: Value = serde_json::from_str(&config(&r, "tensor", "L1", &[])).unwrap();
    doc["opdump"] = json!({"flight_recorder": {"steps": 1}});
    let mut d = open(doc.to_string(), None);
    run(&mut d, 5, Some((3, 2)));
    d.close().unwrap();
    assert_eq!(step_dirs(&r), ["step2", "step3"]);
    let t: Value = serde_json::from_slice(&std::fs::read(r.join("trigger.json")).unwrap()).unwrap();
    assert_eq!(t["trigger"]["kernel"], "Functional.Linear.0.forward");
    assert_eq!(t["flight_recorder"]["steps"], 1);
    let _ = std::fs::remove_dir_all(&r);
}
