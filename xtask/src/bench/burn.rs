//! Training-step benchmark of the burn adapter (issue 26): the step time of a small CNN
//! trained on burn's CPU backend (ndarray) — forward, `backward()`, SGD — without dump, with
//! every layer wrapped in `dump_burn::layer` and `training_step` called under a `kernels`
//! filter that rejects everything, with a statistic-only dump of the layers' inputs and
//! outputs, the gradients and the parameters, and with a tensor dump of the same. A second
//! undumped copy runs as a mode of its own: its ratio is the noise of the run. Two more modes
//! train with AdamW: undumped (bare `ModuleOptimizer`), and through `dump_burn::DumpedOptimizer`
//! with a statistic dump of the layers, gradients, parameters, updates (Δw and ‖Δw‖/‖w‖),
//! AdamW's moments and the learning rate; its ratio is against the undumped AdamW step.
//!
//! Each mode trains its own copy of the model from the same weights; the modes take turns
//! step by step, in a fresh seeded order every round, and the files a dumping mode queued are
//! flushed and synced (untimed) before the next mode runs, as in the candle `train` group.
//! Then the cost of one kernel the filter rejects is timed alone (`tap` on a tensor, the name
//! formatted and the filter asked, the tensor never read). Prints a table and writes
//! `target/bench-stats/burn.csv` (`mode,median_ms,ratio_vs_plain`, the ratio against the
//! same optimizer's undumped mode).

use std::{collections::HashMap, fmt::Write as _, path::PathBuf, time::Instant};

use dump_burn::{DumpedOptimizer, burn::optim::AdamWConfig};
use dump_burn::{
    Tracer,
    burn::{
        module::{Module, Param},
        nn::{
            Linear, LinearConfig, Relu,
            conv::{Conv2d, Conv2dConfig},
            loss::CrossEntropyLossConfig,
            pool::{MaxPool2d, MaxPool2dConfig},
        },
        optim::{GradientsParams, ModuleOptimizer, SgdConfig},
        tensor::{Device, Int, Tensor, TensorData},
    },
    layer, tap, training_step,
};
use dump_host::{DumpOptions, Dumper};

use super::{Opts, Row};

/// 32 images 1x28x28 → conv 3x3 (8) → relu → pool → conv 3x3 (16) → relu → pool → linear 10.
#[derive(Module, Debug)]
struct Cnn {
    conv1: Conv2d,
    conv2: Conv2d,
    pool: MaxPool2d,
    fc: Linear,
}

impl Cnn {
    fn new(device: &Device) -> Self {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut m = Cnn {
            conv1: Conv2dConfig::new([1, 8], [3, 3]).init(device),
            conv2: Conv2dConfig::new([8, 16], [3, 3]).init(device),
            pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            fc: LinearConfig::new(16 * 5 * 5, 10).init(device),
        };
        m.conv1.weight = param([8, 1, 3, 3], &mut s, device);
        m.conv1.bias = Some(param([8], &mut s, device));
        m.conv2.weight = param([16, 8, 3, 3], &mut s, device);
        m.conv2.bias = Some(param([16], &mut s, device));
        m.fc.weight = param([400, 10], &mut s, device);
        m.fc.bias = Some(param([10], &mut s, device));
        m
    }

    /// The forward with every layer a dumped kernel (outside a step: the plain forward).
    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let h = layer("conv1", &self.conv1, x, |m, x| m.forward(x));
        let h = layer("act1", &Relu::new(), h, |m, x| m.forward(x));
        let h = layer("pool1", &self.pool, h, |m, x| m.forward(x));
        let h = layer("conv2", &self.conv2, h, |m, x| m.forward(x));
        let h = layer("act2", &Relu::new(), h, |m, x| m.forward(x));
        let h = layer("pool2", &self.pool, h, |m, x| m.forward(x));
        layer("fc", &self.fc, h.flatten(1, 3), |m, x| m.forward(x))
    }
}

/// A parameter of `shape` from the LCG state `s`, uniform in ±1/√k, k the elements per index
/// of the first dimension (a conv's fan-in; for the linear layer's `[in, out]` weight, `out`).
fn param<const D: usize>(shape: [usize; D], s: &mut u64, device: &Device) -> Param<Tensor<D>> {
    let n: usize = shape.iter().product();
    let fan_in = (n / shape[0].max(1)).max(1) as f32;
    let v: Vec<f32> = (0..n)
        .map(|_| {
            *s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (((*s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0) / fan_in.sqrt()
        })
        .collect();
    Param::from_data(TensorData::new(v, shape), device)
}

fn batch(device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let x: Vec<f32> = (0..32 * 28 * 28)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect();
    let y: Vec<i64> = (0..32).map(|i| i % 10).collect();
    (
        Tensor::from_data(TensorData::new(x, [32, 1, 28, 28]), device),
        Tensor::from_data(TensorData::new(y, [32]), device),
    )
}

fn dumper(root: &std::path::Path, saved: &str, kernels: &str) -> Result<Dumper, String> {
    let mode = if kernels.is_empty() { 0 } else { 1 };
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": {mode}, "path": "{}", "net_name": "Bench",
        "iteration": "all", "saved_data": "{saved}", "input_output": 0, "kernels": [{kernels}],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions::default())
        .open_json(text.into_bytes())
        .map_err(|e| e.to_string())
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-bench-burn-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The optimizer of a mode: burn's, with `training_step` before its step, or wrapped in
/// `DumpedOptimizer` (which dumps the gradients itself).
enum Opt {
    Bare(ModuleOptimizer),
    Dumped(DumpedOptimizer),
}

/// A mode to run: its name, its dump (`saved_data`, `kernels` entries), its optimizer and the
/// index of the mode its ratio is taken against.
type Spec = (
    &'static str,
    Option<(&'static str, &'static str)>,
    Opt,
    usize,
);

/// One mode: its model and optimizer, and for the dumped modes its Dumper, Tracer and root;
/// `base` is the mode its ratio is taken against.
struct ModeState {
    name: &'static str,
    model: Option<Cnn>,
    opt: Opt,
    dumped: Option<(Dumper, Tracer, Option<PathBuf>)>,
    base: usize,
}

const LR: f64 = 0.01;
/// A `kernels` entry no kernel of the model matches.
const NOTHING: &str = r#""Default/no/such/Kernel-op0""#;

/// One training step of `model`: forward, cross-entropy, backward, the training dump (a no-op
/// outside a step), the optimizer.
fn train_step(model: Cnn, opt: &mut Opt, x: &Tensor<4>, y: &Tensor<1, Int>) -> Cnn {
    let logits = model.forward(x.clone());
    let loss = CrossEntropyLossConfig::new()
        .init(&logits.device())
        .forward(logits, y.clone());
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    match opt {
        Opt::Bare(opt) => {
            training_step(&model, &grads);
            opt.step(LR, model, grads)
        }
        Opt::Dumped(opt) => opt.step(LR, model, grads),
    }
}

/// Runs the burn training benchmark.
pub fn run(opts: &Opts, _rows: &mut Vec<Row>) -> Result<(), String> {
    let steps = if opts.quick { 5 } else { opts.runs.max(101) };
    let device = Device::default().autodiff();
    let (x, y) = batch(&device);
    let mut modes = Vec::new();
    // (name, dump, AdamW through DumpedOptimizer / bare AdamW / bare SGD, baseline mode)
    let sgd = || Opt::Bare(SgdConfig::new().init());
    let adamw = || Opt::Bare(AdamWConfig::new().init());
    let dumped_adamw = || Opt::Dumped(DumpedOptimizer::new(AdamWConfig::new().init()));
    let specs: [Spec; 7] = [
        ("no dump (burn train step)", None, sgd(), 0),
        // The same work as the first row on a second copy: the spread of one run.
        ("no dump, second copy (noise floor)", None, sgd(), 0),
        (
            "filter rejects every kernel (layer + training_step)",
            Some(("statistic", NOTHING)),
            sgd(),
            0,
        ),
        (
            "statistic dump (layers + gradients + params)",
            Some(("statistic", "")),
            sgd(),
            0,
        ),
        (
            "tensor dump (layers + gradients + params)",
            Some(("tensor", "")),
            sgd(),
            0,
        ),
        ("no dump, AdamW (burn train step)", None, adamw(), 5),
        (
            "AdamW statistic dump (+ updates + AdamW state)",
            Some(("statistic", "")),
            dumped_adamw(),
            5,
        ),
    ];
    for (i, (name, saved, opt, base)) in specs.into_iter().enumerate() {
        let dumped = match saved {
            None => None,
            Some((saved, kernels)) => {
                let root = scratch(&format!("mode{i}-{saved}"));
                let d = dumper(&root, saved, kernels)?;
                Some((d, Tracer::new(0), Some(root)))
            }
        };
        modes.push(ModeState {
            name,
            model: Some(Cnn::new(&device)),
            opt,
            dumped,
            base,
        });
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut order: Vec<usize> = (0..modes.len()).collect();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for round in 0..=steps {
        for k in (1..order.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            order.swap(k, (seed % (k as u64 + 1)) as usize);
        }
        for &i in &order {
            let st = &mut modes[i];
            let model = st.model.take().ok_or("a mode lost its model")?;
            let t = Instant::now();
            let model = match &mut st.dumped {
                None => train_step(model, &mut st.opt, &x, &y),
                Some((d, tracer, _)) => {
                    let opt = &mut st.opt;
                    tracer
                        .step(d, || train_step(model, opt, &x, &y))
                        .map_err(|e| e.to_string())?
                }
            };
            let elapsed = t.elapsed();
            st.model = Some(model);
            if let Some((d, _, root)) = &st.dumped {
                d.flush().map_err(|e| e.to_string())?;
                if root.is_some() {
                    let _ = std::process::Command::new("sync").status();
                }
            }
            if round > 0 {
                times[i].push(elapsed.as_secs_f64() * 1e3);
            }
        }
    }
    let mut csv = String::from("mode,median_ms,ratio_vs_plain\n");
    println!(
        "\ntraining step (burn 0.22.1, ndarray CPU, CNN 32x1x28x28, SGD or AdamW; median of {steps} steps, modes in turn; ratio vs the same optimizer undumped)"
    );
    println!("{:<52} {:>10} {:>8}", "mode", "ms/step", "ratio");
    let medians: Vec<f64> = times.iter().map(|t| median(t.clone())).collect();
    for (st, ms) in modes.into_iter().zip(medians.iter().copied()) {
        let ratio = ms / medians[st.base].max(1e-9);
        println!("{:<52} {ms:>10.3} {ratio:>8.3}", st.name);
        let _ = writeln!(csv, "{},{ms:.4},{ratio:.4}", st.name);
        if let Some((mut d, _, root)) = st.dumped {
            d.close().map_err(|e| e.to_string())?;
            if let Some(r) = root {
                let _ = std::fs::remove_dir_all(r);
            }
        }
    }
    for (what, ms) in host_reads(&device) {
        println!("{what:<52} {ms:>10.3}");
        let _ = writeln!(csv, "{what},{ms:.4},");
    }
    let ns = rejected_kernel_ns(opts, &device)?;
    println!(
        "{:<52} {ns:>10.1} ns",
        "one kernel the filter rejects (tap)"
    );
    let _ = writeln!(csv, "rejected kernel (ns),{ns:.1},");
    let path = super::write_group_csv("burn.csv", &csv)?;
    println!("wrote {}", path.display());
    Ok(())
}

/// Median ms of `Tensor::try_to_data` (the adapter's one read of a dumped tensor) on the
/// first conv layer's output of the benchmark's batch, and on a fresh tensor of the same shape.
fn host_reads(device: &Device) -> Vec<(String, f64)> {
    let m = Cnn::new(device);
    let (x, _) = batch(device);
    let conv = m.conv1.forward(x);
    let fresh = Tensor::<4>::ones(conv.dims(), device) * 0.5;
    let mut out = Vec::new();
    for (what, t) in [
        ("to_data: conv1 output (ms)", &conv),
        ("to_data: same shape, fresh (ms)", &fresh),
    ] {
        let mut v = Vec::new();
        for _ in 0..11 {
            let start = Instant::now();
            let d = t.try_to_data();
            v.push(start.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(d.is_ok());
        }
        out.push((format!("{what} {:?}", conv.dims()), median(v)));
    }
    let mut v = Vec::new();
    for _ in 0..11 {
        let start = Instant::now();
        let d = (conv.clone().without_autodiff() * 1.0).try_into_data();
        v.push(start.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(d.is_ok());
    }
    out.push((
        "x1 copy then into_data: conv1 output (ms)".to_owned(),
        median(v),
    ));
    out
}

/// Median ns of one `tap` whose kernel the filter rejects, over rounds of 10,000 calls
/// inside one step.
fn rejected_kernel_ns(opts: &Opts, device: &Device) -> Result<f64, String> {
    let root = scratch("reject");
    let mut d = dumper(&root, "statistic", NOTHING)?;
    let t = Tensor::<2>::ones([64, 64], device);
    let mut tracer = Tracer::new(0);
    let rounds = if opts.quick { 3 } else { 31 };
    let mut per = Vec::new();
    for _ in 0..rounds {
        let ns = tracer
            .step(&mut d, || {
                let start = Instant::now();
                for _ in 0..10_000 {
                    tap("block.act", "Relu", std::hint::black_box(&t));
                }
                start.elapsed().as_secs_f64() * 1e9 / 10_000.0
            })
            .map_err(|e| e.to_string())?;
        per.push(ns);
    }
    let report = d.close().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&root);
    if report.rows != 0 {
        return Err(format!(
            "the rejecting filter let {} rows through",
            report.rows
        ));
    }
    Ok(median(per))
}
