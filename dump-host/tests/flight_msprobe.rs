//! The flight recorder with msprobe's layout (an msprobe `config.json` opened through the same
//! builder): nothing on disk while recording; on a NaN the held steps and the trigger step come
//! out as msprobe's `step{N}/rank0/dump.json` (valid JSON, every call of the step), their
//! `dump_tensor_data/*.npy`, and `trigger.json` naming the kernel.

use std::{collections::HashMap, path::Path};

use dump_host::{DumpOptions, Dumper, TensorRef, config::FlightRecorder};
use serde_json::Value;

const KERNELS: [(&str, &str); 3] = [
    ("MatMul", "Default/net/fc1-Dense/MatMul-op0"),
    ("ReLU", "Default/net/relu-ReLU/ReLU-op1"),
    ("Add", "Default/net/fc2-Dense/Add-op2"),
];

fn open(root: &Path, steps: u32) -> Dumper {
    let text = format!(
        r#"{{"task": "tensor", "dump_path": "{}", "rank": [], "step": [], "level": "L1",
            "tensor": {{"file_format": "npy"}}}}"#,
        root.display()
    );
    let env: HashMap<String, String> = HashMap::new();
    Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .on_event(|_| {})
        .flight_recorder(FlightRecorder {
            steps,
            ..FlightRecorder::default()
        })
        .open_json(text.into_bytes())
        .unwrap()
}

/// One step of three kernels over 16 f32 values; `nan` puts a NaN into the ReLU's output.
fn run_step(d: &mut Dumper, i: u64, nan: bool) {
    d.set_step(i);
    let step = d.begin_step();
    for (n, (ty, name)) in KERNELS.iter().enumerate() {
        let x: Vec<f32> = (0..16).map(|j| (i * 100 + j) as f32).collect();
        let mut y = x.clone();
        if nan && n == 1 {
            y[5] = f32::NAN;
        }
        if let Some(k) = step.kernel(ty, name) {
            k.input(0, TensorRef::from_slice(&[4, 4], &x)).unwrap();
            k.output(0, TensorRef::from_slice(&[4, 4], &y)).unwrap();
            k.finish().unwrap();
        }
    }
    step.finish().unwrap();
}

fn json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", p.display()))
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_nan_writes_the_held_steps_in_msprobe_layout() {
    let root = std::env::temp_dir().join(format!("opdump-flight-msprobe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut d = open(&root, 2);
    for i in 0..4 {
        run_step(&mut d, i, false);
    }
    for e in walk(&root) {
        eprintln!("{} {}", e.display(), std::fs::metadata(&e).unwrap().len());
    }
    assert!(
        listing(&root).iter().all(|n| !n.starts_with("step")),
        "nothing is written while recording: {:?}",
        listing(&root)
    );
    run_step(&mut d, 4, true);
    run_step(&mut d, 5, false);
    d.close().unwrap();

    // Steps 2 and 3 (held) and 4 (the trigger); not 0, 1 or 5.
    let steps: Vec<String> = listing(&root)
        .into_iter()
        .filter(|n| n.starts_with("step"))
        .collect();
    assert_eq!(steps, ["step2", "step3", "step4"], "{:?}", listing(&root));
    for s in &steps {
        let dir = root.join(s).join("rank0");
        let doc = json(&dir.join("dump.json"));
        assert_eq!(doc["task"], "tensor");
        let calls: Vec<&str> = doc["data"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            calls,
            [
                "Functional.MatMul.0.forward",
                "Functional.ReLU.0.forward",
                "Functional.Add.0.forward"
            ],
            "{s}"
        );
        // Every tensor the document names is on disk, whole.
        for call in doc["data"].as_object().unwrap().values() {
            for side in ["input_args", "output"] {
                for t in call[side].as_array().unwrap() {
                    let name = t["data_name"].as_str().expect("tensor task names its file");
                    let npy = std::fs::read(dir.join("dump_tensor_data").join(name)).unwrap();
                    assert!(npy.starts_with(b"\x93NUMPY"), "{s}/{name}");
                    assert_eq!(npy.len() % 16, (128 + 64) % 16, "{s}/{name}");
                }
            }
        }
    }
    // The trigger step's ReLU output holds the NaN.
    let relu = &json(&root.join("step4/rank0/dump.json"))["data"]["Functional.ReLU.0.forward"];
    let out = &relu["output"][0];
    let npy = std::fs::read(
        root.join("step4/rank0/dump_tensor_data")
            .join(out["data_name"].as_str().unwrap()),
    )
    .unwrap();
    let body = &npy[npy.len() - 64..];
    let v5 = f32::from_le_bytes(body[20..24].try_into().unwrap());
    assert!(v5.is_nan());
    // trigger.json names the kernel, wherever the layout puts it.
    let trigger = walk(&root)
        .into_iter()
        .find(|p| p.ends_with("trigger.json"))
        .unwrap_or_else(|| panic!("no trigger.json under {}", root.display()));
    let t = json(&trigger);
    let text = t.to_string();
    assert!(text.contains("ReLU-op1"), "{text}");
    assert!(text.contains("nonfinite") || text.contains("non-finite"), "{text}");
    let _ = std::fs::remove_dir_all(&root);
}

fn walk(d: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
