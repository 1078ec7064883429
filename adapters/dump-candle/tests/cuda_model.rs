//! candle models on a GPU (feature `cuda`), dumped through dump-candle with device statistics
//! (`stat_calc_mode: device`, `high`): the CNN of `cnn_training.rs` trained 3 steps, and a
//! transformer block (d_model 1024, 16 heads, 512 tokens, batch 8, MLP 4x).
//!
//! Each model runs three times from the same weights and inputs: on CUDA with device
//! statistics, on CUDA with host statistics (the Dumper copies each device tensor and computes
//! the row on the host) and on the CPU. The two CUDA runs compute bit-identical tensors, so
//! their rows must agree within the documented bounds (dump-device-cuda's README, "What users
//! see on a device"): everything but avg and l2norm equal, avg and l2norm within one f32 ulp.
//! The CPU run computes the same model with other kernels (gemm vs cuBLAS), so its rows are
//! compared within a relative 1e-3, to show the model ran right on the GPU.
//!
//! Without a usable GPU the tests print SKIP and pass; `OPDUMP_REQUIRE_GPU=1` turns a skip into
//! a failure. The files are self-contained (no fixture of the source tree), so the test binary
//! runs on a GPU machine without the workspace.

#[path = "../../testsupport/onnx_fixtures.rs"]
mod support;

mod cuda_models;

use std::{collections::HashMap, path::Path, time::Instant};

use candle_core::{Device, Module, Storage, Tensor};
use candle_nn::{Optimizer, SGD, loss};
use cuda_models::{BLOCK_TENSORS, Block, BlockSize, CNN_ORDER, cnn_batch, cnn_on, lcg_tensor};
use dump_candle::{Tracer, tap, with_tensor_ref};
use dump_host::{DumpOptions, Dumper, config::Device as DumpDevice};
use opdump_test_support::{Prereq, check};
use support::{Tmp, stat_rows};

type Rows = HashMap<(String, String, String), HashMap<String, String>>;

/// CUDA device 0, or `None` after reporting the skip (a failure with `OPDUMP_REQUIRE_GPU=1`).
fn gpu() -> Option<Device> {
    match Device::new_cuda(0) {
        Ok(d) => Some(d),
        Err(e) => {
            check(
                Prereq::Gpu,
                Err(format!("candle cannot open CUDA device 0: {e}")),
            );
            None
        }
    }
}

/// The categories of every run: all that the device kernel computes.
const CATEGORIES: &str = r#"["max", "min", "avg", "l2norm", "nan count", "negative inf count",
    "positive inf count", "zero count"]"#;

/// A statistic-only Dumper on a GPU backend (`DumpOptions::device` GPU: MindSpore's GPU
/// spelling and host row semantics) with `stat_calc_mode` `mode` (`device` or `host`).
fn gpu_dumper(root: &Path, mode: &str) -> Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
        "support_device": [0], "statistic_category": {CATEGORIES}}},
        "e2e_dump_settings": {{"enable": true, "trans_flag": true, "stat_calc_mode": "{mode}",
        "device_stat_precision_mode": "high"}}}}"#,
        root.display()
    );
    let opts = DumpOptions {
        device: DumpDevice::Gpu,
        ..DumpOptions::default()
    };
    Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(opts)
        .open_json(text.into_bytes())
        .unwrap()
}

/// The rows of step `step` under `tmp`.
fn rows(tmp: &Tmp, step: u64) -> Rows {
    stat_rows(&tmp.rank().join("Net/0").join(step.to_string()))
}

fn num(row: &HashMap<String, String>, col: &str) -> f64 {
    let v = row
        .get(col)
        .unwrap_or_else(|| panic!("no column {col} in {row:?}"));
    v.parse()
        .unwrap_or_else(|e| panic!("{col} = {v:?} is no number: {e}"))
}

/// Whether two `%g` fields (6 significant digits) are equal or one unit of the 6th digit
/// apart: what one f32 ulp between the device's and the host's value can show as once
/// printed (the text rounds away most ulps, but one can carry over a rounding boundary).
fn g6_adjacent(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (x, y): (f64, f64) = match (a.parse(), b.parse()) {
        (Ok(x), Ok(y)) => (x, y),
        _ => return false,
    };
    if x.is_sign_negative() != y.is_sign_negative() || !x.is_finite() || !y.is_finite() {
        return false;
    }
    let mag = x.abs().max(y.abs());
    let unit = 10f64.powi(mag.log10().floor() as i32 - 5);
    (x - y).abs() <= unit * 1.000_001
}

/// Device rows against host rows of the same device tensors: every column equal except the
/// timestamp, avg and l2norm; avg and l2norm within one f32 ulp (as printed: [`g6_adjacent`]).
fn assert_within_device_bounds(what: &str, device: &Rows, host: &Rows) {
    assert!(!device.is_empty(), "{what}: no rows");
    let mut keys: Vec<_> = device.keys().collect();
    keys.sort();
    let mut host_keys: Vec<_> = host.keys().collect();
    host_keys.sort();
    assert_eq!(keys, host_keys, "{what}: the same kernels and slots");
    for k in keys {
        let (d, h) = (&device[k], &host[k]);
        let mut cols: Vec<_> = d.keys().collect();
        cols.sort();
        for c in cols {
            match c.as_str() {
                "Timestamp" => {}
                "Avg Value" | "L2Norm Value" => assert!(
                    g6_adjacent(&d[c], &h[c]),
                    "{what} {k:?} {c}: device {} host {}",
                    d[c],
                    h[c]
                ),
                _ => assert_eq!(d[c], h[c], "{what} {k:?} {c}"),
            }
        }
    }
}

/// CUDA rows against CPU rows of the same model: shapes and dtypes equal, NaN and inf counts
/// equal, max/min/l2norm within a relative 1e-3, avg within 1e-3 of the value range, zero
/// counts within 0.1% of the elements.
fn assert_close_to_cpu(what: &str, cuda: &Rows, cpu: &Rows) {
    let mut keys: Vec<_> = cuda.keys().collect();
    keys.sort();
    let mut cpu_keys: Vec<_> = cpu.keys().collect();
    cpu_keys.sort();
    assert_eq!(keys, cpu_keys, "{what}: the same kernels and slots");
    for k in keys {
        let (g, c) = (&cuda[k], &cpu[k]);
        for col in [
            "Data Type",
            "Shape",
            "NaN Count",
            "Negative Inf Count",
            "Positive Inf Count",
        ] {
            assert_eq!(g[col], c[col], "{what} {k:?} {col}");
        }
        let range = num(c, "Max Value").abs().max(num(c, "Min Value").abs());
        for col in ["Max Value", "Min Value", "L2Norm Value"] {
            let (a, b) = (num(g, col), num(c, col));
            assert!(
                (a - b).abs() <= 1e-3 * a.abs().max(b.abs()) + 1e-6,
                "{what} {k:?} {col}: cuda {a} cpu {b}"
            );
        }
        let (a, b) = (num(g, "Avg Value"), num(c, "Avg Value"));
        assert!(
            (a - b).abs() <= 1e-3 * range + 1e-6,
            "{what} {k:?} avg: cuda {a} cpu {b} (range {range})"
        );
        let elems: f64 = c["Shape"]
            .trim_matches(|ch| ch == '(' || ch == ')')
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().parse::<f64>().unwrap())
            .product();
        let (a, b) = (num(g, "Zero Count"), num(c, "Zero Count"));
        assert!(
            (a - b).abs() <= 1.0 + elems * 1e-3,
            "{what} {k:?} zero count: cuda {a} cpu {b} of {elems}"
        );
    }
}

/// The CNN trained 3 steps on `dev`, dumped by `d`: the losses.
fn train_cnn(dev: &Device, d: &mut Dumper) -> Vec<f32> {
    let (model, varmap) = cnn_on(dev).unwrap();
    let mut sgd = SGD::new(varmap.all_vars(), 0.02).unwrap();
    let (x, y) = cnn_batch(dev).unwrap();
    let mut tracer = Tracer::new(0);
    let mut losses = Vec::new();
    for _ in 0..3 {
        let l = tracer
            .step(d, || -> candle_core::Result<f32> {
                let logits = model.forward(&x)?;
                let l = loss::cross_entropy(&logits, &y)?;
                sgd.backward_step(&l)?;
                l.to_scalar::<f32>()
            })
            .unwrap()
            .unwrap();
        losses.push(l);
    }
    assert_eq!(tracer.execution_order(), CNN_ORDER);
    let diags: Vec<&str> = tracer.diagnostics().collect();
    assert!(diags.is_empty(), "{diags:?}");
    losses
}

#[test]
fn cnn_training_on_cuda_dumps_device_statistics_equal_to_the_host() {
    let Some(dev) = gpu() else { return };
    let runs = [
        ("cuda-device", dev.clone(), "device"),
        ("cuda-host", dev.clone(), "host"),
        ("cpu", Device::Cpu, "host"),
    ];
    let mut out = Vec::new();
    for (tag, dev, mode) in runs {
        let tmp = Tmp::new(&format!("cnn-{tag}"));
        let mut d = gpu_dumper(&tmp.0, mode);
        let losses = train_cnn(&dev, &mut d);
        let report = d.close().unwrap();
        // 3 modules x (input + output) + the pool tap, per step.
        assert_eq!(report.rows, 3 * 7, "{tag}");
        let steps: Vec<Rows> = (0..3).map(|s| rows(&tmp, s)).collect();
        out.push((tag, losses, steps));
    }
    let [(_, dl, dev_rows), (_, hl, host_rows), (_, cl, cpu_rows)] = &out[..] else {
        unreachable!()
    };
    assert_eq!(dl, hl, "the two CUDA runs compute the same losses");
    assert!(dl[2] < dl[0], "training lowers the loss on CUDA: {dl:?}");
    for (a, b) in dl.iter().zip(cl) {
        assert!(
            (a - b).abs() <= 1e-4 * b.abs().max(1.0),
            "cuda {dl:?} cpu {cl:?}"
        );
    }
    for s in 0..3 {
        assert_eq!(dev_rows[s].len(), 7, "step {s}");
        assert_within_device_bounds(&format!("cnn step {s}"), &dev_rows[s], &host_rows[s]);
        assert_close_to_cpu(&format!("cnn step {s}"), &host_rows[s], &cpu_rows[s]);
    }
}

/// One dumped forward of `block` on `x` into a fresh dump of `mode`: the output and the rows.
fn block_step(tag: &str, block: &Block, x: &Tensor, mode: &str) -> (Vec<f32>, Rows) {
    let tmp = Tmp::new(&format!("block-{tag}"));
    let mut d = gpu_dumper(&tmp.0, mode);
    let mut tracer = Tracer::new(0);
    let y = tracer.step(&mut d, || block.forward(x)).unwrap().unwrap();
    let diags: Vec<&str> = tracer.diagnostics().collect();
    assert!(diags.is_empty(), "{tag}: {diags:?}");
    let report = d.close().unwrap();
    assert_eq!(report.rows, BLOCK_TENSORS, "{tag}");
    let y = y.flatten_all().unwrap().to_vec1().unwrap();
    (y, rows(&tmp, 0))
}

#[test]
fn transformer_block_on_cuda_dumps_device_statistics_equal_to_the_host() {
    let Some(dev) = gpu() else { return };
    let size = BlockSize::LARGE;
    let block = Block::new(size, &dev).unwrap();
    let x = Block::input(size, &dev).unwrap();

    // The undumped step's time (for the record: the issue asks for >= 5 ms on an H200).
    for _ in 0..2 {
        block.forward(&x).unwrap();
    }
    dev.synchronize().unwrap();
    let t = Instant::now();
    for _ in 0..5 {
        block.forward(&x).unwrap();
    }
    dev.synchronize().unwrap();
    println!(
        "transformer block {size:?}: {:.3} ms per undumped forward on CUDA",
        t.elapsed().as_secs_f64() * 1e3 / 5.0
    );

    let (y_dev, dev_rows) = block_step("cuda-device", &block, &x, "device");
    let (y_host, host_rows) = block_step("cuda-host", &block, &x, "host");
    assert!(
        y_dev
            .iter()
            .zip(&y_host)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "the two CUDA runs compute the same tensors"
    );
    assert_within_device_bounds("block", &dev_rows, &host_rows);

    let cpu_block = Block::new(size, &Device::Cpu).unwrap();
    let cpu_x = Block::input(size, &Device::Cpu).unwrap();
    let (y_cpu, cpu_rows) = block_step("cpu", &cpu_block, &cpu_x, "host");
    assert_close_to_cpu("block", &host_rows, &cpu_rows);
    let worst = y_dev
        .iter()
        .zip(&y_cpu)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst <= 1e-2, "block output: CUDA vs CPU differ by {worst}");
}

#[test]
fn the_statistics_kernel_on_candle_storage_equals_its_host_model_bit_for_bit() {
    use dump_core::DType;
    use dump_device_cuda::{CudaStats, DeviceTensor, Precision, model};
    let Some(dev) = gpu() else { return };
    let size = BlockSize {
        batch: 2,
        seq: 64,
        d_model: 256,
        heads: 4,
        mlp: 4,
    };
    let y = Block::new(size, &dev)
        .unwrap()
        .forward(&Block::input(size, &dev).unwrap())
        .unwrap();
    let host: Vec<f32> = y.flatten_all().unwrap().to_vec1().unwrap();
    let bytes: Vec<u8> = host.iter().flat_map(|v| v.to_le_bytes()).collect();
    let stats = CudaStats::new(0).unwrap();
    let (storage, layout) = y.storage_and_layout();
    assert!(layout.is_contiguous());
    let Storage::Cuda(cs) = &*storage else {
        panic!("a CUDA tensor")
    };
    let slice = cs.as_cuda_slice::<f32>().unwrap();
    let stream = cs.device.cuda_stream();
    let t = DeviceTensor::from_slice(slice, DType::Float32, host.len()).unwrap();
    for p in [Precision::High, Precision::Low] {
        let got = stats.summarize(&t, p, &stream).unwrap().unwrap();
        let want = model::summarize(DType::Float32, &bytes, host.len(), p)
            .unwrap()
            .unwrap();
        assert_eq!(format!("{:?}", got), format!("{:?}", want), "{p}");
        assert!(got.summary.max > 0.0 && got.summary.min < 0.0, "{got:?}");
    }
}

/// Dumps `t` (tapped as `x`) with `mode` and returns its row.
fn tap_row(tag: &str, t: &Tensor, mode: &str) -> HashMap<String, String> {
    let tmp = Tmp::new(&format!("tap-{tag}"));
    let mut d = gpu_dumper(&tmp.0, mode);
    let mut tracer = Tracer::new(0);
    tracer.step(&mut d, || tap("x", "Transpose", t)).unwrap();
    let diags: Vec<&str> = tracer.diagnostics().collect();
    assert!(diags.is_empty(), "{tag}: a skipped tensor: {diags:?}");
    assert_eq!(d.close().unwrap().rows, 1, "{tag}");
    let mut r = rows(&tmp, 0);
    assert_eq!(r.len(), 1);
    r.drain().next().unwrap().1
}

#[test]
fn non_contiguous_and_offset_cuda_tensors_are_dumped_from_the_device() {
    let Some(dev) = gpu() else { return };
    let x = lcg_tensor(5, &[96, 160], 3.0, &dev).unwrap();
    let views = [
        ("transposed", x.t().unwrap(), false),
        ("narrowed-columns", x.narrow(1, 7, 50).unwrap(), false),
        ("narrowed-rows", x.narrow(0, 3, 41).unwrap(), true),
    ];
    for (tag, v, contiguous) in views {
        assert_eq!(v.is_contiguous(), contiguous, "{tag}");
        // Handed over as a device tensor (a device copy for the non-contiguous ones), of
        // the view's shape.
        let kind = with_tensor_ref(&v, |r| format!("{r:?}")).unwrap();
        assert!(kind.contains("device"), "{tag}: {kind}");
        assert!(kind.contains(&format!("{:?}", v.dims())), "{tag}: {kind}");
        let on_device = tap_row(&format!("{tag}-device"), &v, "device");
        let copied = tap_row(&format!("{tag}-host"), &v, "host");
        // The same values on the CPU, as a strided host view: the same row.
        let cpu = tap_row(
            &format!("{tag}-cpu"),
            &v.to_device(&Device::Cpu).unwrap(),
            "host",
        );
        let key = |r: &HashMap<String, String>| {
            let mut m = Rows::new();
            m.insert(("x".into(), "output".into(), "0".into()), r.clone());
            m
        };
        assert_within_device_bounds(tag, &key(&on_device), &key(&copied));
        assert_within_device_bounds(tag, &key(&on_device), &key(&cpu));
        let want_shape = format!(
            "({})",
            v.dims()
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        assert_eq!(
            on_device["Shape"].replace(' ', ""),
            want_shape.replace(' ', ""),
            "{tag}"
        );
    }
}

#[test]
fn printed_values_one_digit_apart_are_adjacent() {
    // Runs without a GPU: the bound the device rows are held to.
    assert!(g6_adjacent("1.23457", "1.23457"));
    assert!(g6_adjacent("1.23457", "1.23458"));
    assert!(g6_adjacent("-0.000123457", "-0.000123456"));
    assert!(g6_adjacent("1.5e+12", "1.50001e+12"));
    assert!(!g6_adjacent("1.23457", "1.23459"));
    assert!(!g6_adjacent("1.23457", "-1.23457"));
    assert!(!g6_adjacent("nan", "nan "));
    assert!(!g6_adjacent("1", "x"));
}
