//! start / stop / save / step, in both layouts.

use std::{collections::HashMap, path::Path};

use serde_json::Value;

use crate::{DumpOptions, Dumper, TensorRef};

fn root(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-session-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn open(text: String) -> Dumper {
    Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(text.into_bytes())
        .unwrap()
}

fn msprobe(root: &Path) -> Dumper {
    open(format!(
        r#"{{"task": "tensor", "dump_path": "{}", "level": "L1"}}"#,
        root.display()
    ))
}

fn calls(p: &Path) -> Vec<String> {
    let doc: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    doc["data"].as_object().unwrap().keys().cloned().collect()
}

#[test]
fn stop_rejects_kernels_until_start() {
    let r = root("stop");
    let mut d = open(format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "all", "saved_data": "tensor", "input_output": 0, "kernels": [],
            "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        r.display()
    ));
    let x = [1.0f32; 4];
    let session = d.session();
    assert!(session.is_recording());
    let step = d.begin_step();
    d.stop();
    assert!(!session.is_recording());
    assert!(step.kernel("Add", "Default/Add-op0").is_none());
    step.parameter("w", TensorRef::from_slice(&[4], &x))
        .unwrap();
    // From another thread, while the step is live.
    std::thread::scope(|s| {
        s.spawn(|| session.start());
    });
    let k = step.kernel("Add", "Default/Add-op1").unwrap();
    k.output(0, TensorRef::from_slice(&[4], &x)).unwrap();
    k.finish().unwrap();
    step.finish().unwrap();
    assert_eq!(
        d.close().unwrap().files,
        1,
        "only the kernel dumped after start"
    );
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn a_program_that_only_saves_gets_one_step_per_step_call() {
    let r = root("saves");
    let mut d = msprobe(&r);
    for i in 0..3 {
        let v = [i as f32];
        d.save("loss", TensorRef::from_slice(&[1], &v)).unwrap();
        d.save("loss", TensorRef::from_slice(&[1], &v)).unwrap();
        d.step().unwrap();
    }
    // Between stop and start, a save is dropped like any kernel.
    d.stop();
    d.save("hidden", TensorRef::from_slice(&[1], &[9.0f32]))
        .unwrap();
    d.step().unwrap();
    d.start();
    d.close().unwrap();
    for i in 0..3 {
        let dir = r.join(format!("step{i}/rank0"));
        assert_eq!(
            calls(&dir.join("dump.json")),
            ["Functional.loss.0.forward", "Functional.loss.1.forward"]
        );
        let f = dump_npy::read_file(
            dir.join("dump_tensor_data/Functional.loss.1.forward.output.0.npy"),
        )
        .unwrap();
        assert_eq!(f.data, (i as f32).to_le_bytes());
        assert!(dir.join("construct.json").exists() && dir.join("stack.json").exists());
    }
    assert!(!r.join("step3").exists(), "the stopped save wrote nothing");
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn saves_join_the_adapters_step_even_after_it_finished() {
    let r = root("join");
    let mut d = msprobe(&r);
    let session = d.session();
    let x = [2.0f32];
    for _ in 0..2 {
        let step = d.begin_step();
        session
            .save("before", TensorRef::from_slice(&[1], &x))
            .unwrap();
        if let Some(k) = step.kernel("Relu", "Default/Relu-op0") {
            k.output(0, TensorRef::from_slice(&[1], &x)).unwrap();
        }
        step.finish().unwrap();
        d.save("after", TensorRef::from_slice(&[1], &x)).unwrap();
        d.step().unwrap();
    }
    d.close().unwrap();
    for i in 0..2 {
        assert_eq!(
            calls(&r.join(format!("step{i}/rank0/dump.json"))),
            [
                "Functional.before.0.forward",
                "Functional.Relu.0.forward",
                "Functional.after.0.forward"
            ],
            "step {i}"
        );
    }
    assert!(!r.join("step2").exists());
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn a_disabled_dumpers_session_does_nothing() {
    let mut d = Dumper::disabled();
    let s = d.session();
    s.stop();
    assert!(!s.is_recording());
    s.save("x", TensorRef::from_slice(&[1], &[1.0f32])).unwrap();
    d.save("x", TensorRef::from_slice(&[1], &[1.0f32])).unwrap();
    d.step().unwrap();
}
