//! `opdump inspect` and `opdump compare` on CANN dump trees, run as subprocesses: GE's layout
//! built from the generated fixtures (`dump-device-ascend/tests/gen_cann.py`), compared with a
//! MindSpore tree holding the same tensors in the host layout.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use dump_core::DType;
use dump_device_ascend::{DeviceTensor, Format, to_host};
use dump_npy::NpyReader;
use serde_json::Value;

const CONV: &str = "Default_network_conv1-Conv2d_Conv2D-op12";
const CONV_FILE: &str = "Conv2D.Default_network_conv1-Conv2d_Conv2D-op12.12.3.1700000000000044";
const RELU_FILE: &str = "Relu.Relu-op9.9.0.1700000000000048";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dump-device-ascend/tests/fixtures/cann")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-cann-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn opdump(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .output()
        .expect("run opdump")
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn npy(p: &Path) -> (Vec<usize>, Vec<u8>) {
    let mut r = NpyReader::open(p).unwrap();
    let mut b = vec![0u8; r.data_len as usize];
    r.read_chunk(&mut b).unwrap();
    (r.shape.clone(), b)
}

/// GE's layout with the Conv2D and Relu files: `{time}/{device}/{model}/{model_id}/{index}/`.
fn ge_tree(top: &Path) -> PathBuf {
    let root = top.join("cann");
    let step = root.join("20260101120000/0/Net/0/0");
    std::fs::create_dir_all(&step).unwrap();
    for f in [CONV_FILE, RELU_FILE] {
        std::fs::copy(fixtures().join(f), step.join(f)).unwrap();
    }
    root
}

/// Conv2D's NC1HWC0 input.0 / output.0 in NCHW (converted here by dump-device-ascend's
/// whole-tensor `to_host`, not the streaming path under test).
fn conv_host(slot: &str, host_shape: &[usize]) -> Vec<u8> {
    let (dev_shape, raw) = npy(&fixtures().join(format!("npy/{CONV_FILE}.{slot}.npy")));
    let t = DeviceTensor {
        format: Format::Nc1hwc0,
        dtype: DType::Float16,
        device_shape: &dev_shape,
        host_shape,
        data: &raw,
    };
    let mut out = vec![0u8; t.host_bytes().unwrap()];
    to_host(&t, &mut out).unwrap().data.to_vec()
}

#[test]
fn inspect_reads_a_ge_tree_and_finds_the_nan() {
    let top = tmpdir("inspect");
    let root = ge_tree(&top);
    let o = opdump(&["inspect", root.to_str().unwrap(), "--json"]);
    let v = json_of(&o);
    assert_eq!(v["layout"], "cann", "{v:#}");
    // Conv2D: 3 inputs and 7 outputs minus FP8/unsupported (none here); Relu: 1 output.
    assert_eq!(v["tensors"], 11, "{v:#}");
    let f = &v["first_nonfinite"];
    assert_eq!(f["op_name"], CONV, "{v:#}");
    let problems = v["problems"].to_string();
    assert!(
        problems.contains("output.6: format C1HWNCoC0 without an original_shape: read as stored"),
        "{problems}"
    );
    // The text report names the dialect's problems and the kernel too.
    let o = opdump(&["inspect", root.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(CONV), "{text}");
    let _ = std::fs::remove_dir_all(&top);
}

#[test]
fn compare_pairs_cann_with_mindspore_in_the_host_layout() {
    let top = tmpdir("compare");
    let cann = ge_tree(&top);
    let ms = top.join("ms");
    let it = ms.join("rank_0/Net/0/0");
    std::fs::create_dir_all(&it).unwrap();
    let write = |name: String, dtype: DType, shape: &[usize], data: &[u8]| {
        dump_npy::write_file(it.join(name), dtype, shape, data, Default::default()).unwrap();
    };
    let (rshape, relu) = npy(&fixtures().join(format!("npy/{RELU_FILE}.output.0.npy")));
    write(
        format!("{RELU_FILE}.output.0.DefaultFormat.Float32.npy"),
        DType::Float32,
        &rshape,
        &relu,
    );
    let x = conv_host("input.0", &[1, 3, 2, 2]);
    write(
        format!("{CONV_FILE}.input.0.DefaultFormat.Float16.npy"),
        DType::Float16,
        &[1, 3, 2, 2],
        &x,
    );
    // output.0 with one finite element moved far: the first divergence.
    let mut y = conv_host("output.0", &[1, 8, 2, 2]);
    let k = y
        .chunks_exact(2)
        .position(|c| half::f16::from_le_bytes([c[0], c[1]]).is_finite())
        .unwrap();
    let v = half::f16::from_le_bytes([y[2 * k], y[2 * k + 1]]).to_f32() + 100.0;
    y[2 * k..2 * k + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
    write(
        format!("{CONV_FILE}.output.0.DefaultFormat.Float16.npy"),
        DType::Float16,
        &[1, 8, 2, 2],
        &y,
    );
    let o = opdump(&[
        "compare",
        cann.to_str().unwrap(),
        ms.to_str().unwrap(),
        "--json",
    ]);
    let v = json_of(&o);
    assert_eq!(v["matched"], 3, "{v:#}");
    assert_eq!(
        v["diverged"], 1,
        "input.0 and Relu pair element by element: {v:#}"
    );
    let f = &v["first_divergent"];
    assert_eq!(
        (&f["op_name"], &f["io"], &f["slot"]),
        (&Value::from(CONV), &Value::from("output"), &Value::from(0)),
        "{v:#}"
    );
    assert_eq!(f["metrics"]["not_close"], 1, "{v:#}");
    let _ = std::fs::remove_dir_all(&top);
}
