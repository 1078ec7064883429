//! What the Dumper writes in the modes of issue 12 point 4 follows the config the way
//! `opdump check` describes it: dump_mode 2 dumps only kernels marked with set_dump,
//! save_kernel_args needs enable true, sampling applies with op_debug_mode 0 only, and exception
//! dump off Ascend dumps the failed kernel's inputs (as the config warning says).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use dump_core::DType;
use dump_host::config::Device;
use dump_host::{DumpOptions, Dumper, TensorRef};

fn root(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-cfgmodes-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn config(root: &Path, common: &str, e2e: &str) -> Vec<u8> {
    format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "input_output": 0, "kernels": [], "support_device": [0]{common}}},
        "e2e_dump_settings": {{"enable": true{e2e}}}}}"#,
        root.display()
    )
    .into_bytes()
}

fn open(cfg: Vec<u8>, device: Device, set_dump: &[&str]) -> Dumper {
    let env: HashMap<String, String> = HashMap::new();
    let opts = DumpOptions {
        device,
        set_dump: set_dump.iter().map(|s| (*s).to_owned()).collect(),
        ..DumpOptions::default()
    };
    Dumper::builder()
        .env(&env)
        .options(opts.clone())
        .open_json(cfg)
        .unwrap()
}

const CONV: &str = "Default/net/conv1-Conv2d/Conv2D-op0";
const RELU: &str = "Default/net/ReLU-op1";

/// Runs one step with a Conv2D and a ReLU kernel (each one input, one output of 8 floats;
/// `out` is the outputs' value) and returns the files of the iteration directory, sorted.
fn one_step(mut d: Dumper, dir: &Path, out: f32) -> Vec<String> {
    let x: Vec<u8> = (0..8).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let y: Vec<u8> = (0..8).flat_map(|_| out.to_le_bytes()).collect();
    let step = d.begin_step();
    for (t, name) in [("Conv2D", CONV), ("ReLU", RELU)] {
        if let Some(k) = step.kernel(t, name) {
            k.input(0, TensorRef::host(DType::Float32, &[8], &x))
                .unwrap();
            k.output(0, TensorRef::host(DType::Float32, &[8], &y))
                .unwrap();
            k.args(&[("transpose_a", "True")]);
            k.finish().unwrap();
        }
    }
    step.finish().unwrap();
    d.close().unwrap();
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn dump_mode_2_dumps_only_marked_kernels() {
    let r = root("setdump");
    let dir = r.join("rank_0/Net/0/0");
    let cfg = || config(&r, r#", "dump_mode": 2"#, "");
    // Nothing marked: nothing dumped (before the fix every kernel was).
    let files = one_step(open(cfg(), Device::Ascend, &[]), &dir, 1.0);
    assert!(files.iter().all(|f| !f.ends_with(".npy")), "{files:?}");
    // A cell scope marks the kernels inside it; an exact name marks that kernel.
    let _ = std::fs::remove_dir_all(&r);
    let files = one_step(
        open(cfg(), Device::Ascend, &["Default/net/conv1-Conv2d"]),
        &dir,
        1.0,
    );
    let npy: Vec<_> = files.iter().filter(|f| f.ends_with(".npy")).collect();
    assert_eq!(npy.len(), 2, "{files:?}");
    assert!(npy.iter().all(|f| f.starts_with("Conv2D.")), "{files:?}");
    let _ = std::fs::remove_dir_all(&r);
    let files = one_step(open(cfg(), Device::Ascend, &[RELU]), &dir, 1.0);
    let npy: Vec<_> = files.iter().filter(|f| f.ends_with(".npy")).collect();
    assert_eq!(npy.len(), 2, "{files:?}");
    assert!(npy.iter().all(|f| f.starts_with("ReLU.")), "{files:?}");
    // A scope is a whole path component: `Default/ne` marks nothing.
    let _ = std::fs::remove_dir_all(&r);
    let files = one_step(open(cfg(), Device::Ascend, &["Default/ne"]), &dir, 1.0);
    assert!(files.iter().all(|f| !f.ends_with(".npy")), "{files:?}");
    let _ = std::fs::remove_dir_all(&r);
}

#[test]
fn save_kernel_args_needs_enable_true() {
    for (enable, want) in [(true, 2), (false, 0)] {
        let r = root(&format!("args{enable}"));
        let dir = r.join("rank_0/Net/0/0");
        let cfg = format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "all", "input_output": 0, "kernels": [], "support_device": [0]}},
            "e2e_dump_settings": {{"enable": {enable}, "save_kernel_args": true}}}}"#,
            r.display()
        );
        let files = one_step(open(cfg.into_bytes(), Device::Cpu, &[]), &dir, 1.0);
        let args = files.iter().filter(|f| f.ends_with(".json")).count();
        assert_eq!(args, want, "enable {enable}: {files:?}");
        assert_eq!(
            files.iter().filter(|f| f.ends_with(".npy")).count(),
            4,
            "{files:?}"
        );
        let _ = std::fs::remove_dir_all(&r);
    }
}

#[test]
fn overflow_dump_writes_whole_tensors_even_with_sampling() {
    let r = root("ovsample");
    let dir = r.join("rank_0/Net/0/0");
    let sample = r#", "sample_mode": 1, "sample_num": 2"#;
    // op_debug_mode 0: sampled to 2 elements.
    let files = one_step(open(config(&r, "", sample), Device::Ascend, &[]), &dir, 1.0);
    let npy: Vec<_> = files.iter().filter(|f| f.ends_with(".npy")).collect();
    assert_eq!(npy.len(), 4);
    for f in &npy {
        let n = dump_npy::read_file(dir.join(f)).unwrap();
        assert_eq!(n.shape, [2], "{f}");
    }
    // op_debug_mode 3: an overflowing kernel is dumped whole (before the fix: sampled).
    let _ = std::fs::remove_dir_all(&r);
    let files = one_step(
        open(
            config(&r, r#", "op_debug_mode": 3"#, sample),
            Device::Ascend,
            &[],
        ),
        &dir,
        f32::INFINITY,
    );
    let npy: Vec<_> = files.iter().filter(|f| f.ends_with(".npy")).collect();
    assert_eq!(npy.len(), 4, "{files:?}");
    for f in &npy {
        let n = dump_npy::read_file(dir.join(f)).unwrap();
        assert_eq!(n.shape, [8], "{f}");
    }
    let _ = std::fs::remove_dir_all(&r);
}

#[test]
fn exception_dump_on_cpu_dumps_the_failed_kernels_inputs() {
    let r = root("exception");
    let mut d = open(config(&r, r#", "op_debug_mode": 4"#, ""), Device::Cpu, &[]);
    let x: Vec<u8> = (0..4).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let step = d.begin_step();
    assert!(step.kernel("Conv2D", CONV).is_none(), "no normal dump");
    step.kernel_failed("Conv2D", CONV, &[TensorRef::host(DType::Float32, &[4], &x)])
        .unwrap();
    step.finish().unwrap();
    d.close().unwrap();
    let files: Vec<String> = std::fs::read_dir(r.join("rank_0/Net/0/0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].contains(".input.0."), "{files:?}");
    let _ = std::fs::remove_dir_all(&r);
}
