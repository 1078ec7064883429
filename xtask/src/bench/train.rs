//! Training-step benchmark (issue 26, candle): the step time of a small CNN trained on candle's
//! CPU backend — forward, `loss.backward()`, SGD — without dump, with the training dump
//! enabled but dumping disabled, with a statistic-only dump of forward activations, gradients,
//! parameters and updates (default categories), and with a tensor dump of the same. A second
//! undumped copy of the model runs as a mode of its own: its ratio is the noise of the run.
//!
//! Each mode trains its own copy of the model from the same weights; the modes take turns step
//! by step, in a fresh seeded order every round, and the files a dumping mode queued are
//! flushed and synced (untimed) before the next mode runs, as in the adapters group. Prints a
//! table and writes `target/bench-stats/train.csv` (`mode,median_ms,ratio_vs_plain`).

use std::{collections::HashMap, fmt::Write as _, path::PathBuf, time::Instant};

use dump_candle::{
    Dumped, DumpedOptimizer, Tracer,
    candle_core::{DType, Device, Module, Result, Tensor},
    candle_nn::{
        Activation, Conv2d, Linear, Optimizer, SGD, VarBuilder, VarMap, conv2d, linear, loss,
    },
};
use dump_host::{DumpOptions, Dumper};

use super::{Opts, Row};

/// 32 images 1x28x28 → conv 3x3 (8) → relu → pool → conv 3x3 (16) → relu → pool → linear 10.
struct Cnn {
    conv1: Dumped<Conv2d>,
    act1: Dumped<Activation>,
    conv2: Dumped<Conv2d>,
    act2: Dumped<Activation>,
    fc: Dumped<Linear>,
}

impl Cnn {
    fn new(vb: VarBuilder<'_>) -> Result<Self> {
        Ok(Cnn {
            conv1: Dumped::new(
                conv2d(1, 8, 3, Default::default(), vb.pp("conv1"))?,
                "conv1",
            ),
            act1: Dumped::new(Activation::Relu, "act1"),
            conv2: Dumped::new(
                conv2d(8, 16, 3, Default::default(), vb.pp("conv2"))?,
                "conv2",
            ),
            act2: Dumped::new(Activation::Relu, "act2"),
            fc: Dumped::new(linear(16 * 5 * 5, 10, vb.pp("fc"))?, "fc"),
        })
    }
}

impl Module for Cnn {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.act1.forward(&self.conv1.forward(x)?)?.max_pool2d(2)?;
        let h = self.act2.forward(&self.conv2.forward(&h)?)?.max_pool2d(2)?;
        self.fc.forward(&h.flatten_from(1)?)
    }
}

/// A model and its variables, with the weights copied from `from` when given.
fn model(from: Option<&VarMap>) -> std::result::Result<(VarMap, Cnn), String> {
    let e = |e: dump_candle::candle_core::Error| e.to_string();
    let mut varmap = VarMap::new();
    let m = Cnn::new(VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu)).map_err(e)?;
    if let Some(src) = from {
        let src = src.data().lock().map_err(|e| e.to_string())?.clone();
        for (k, v) in src {
            varmap
                .set_one(k, v.as_tensor().copy().map_err(e)?)
                .map_err(e)?;
        }
    }
    Ok((varmap, m))
}

fn batch() -> std::result::Result<(Tensor, Tensor), String> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let x: Vec<f32> = (0..32 * 28 * 28)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect();
    let y: Vec<u32> = (0..32).map(|i| i % 10).collect();
    let e = |e: dump_candle::candle_core::Error| e.to_string();
    Ok((
        Tensor::from_vec(x, (32, 1, 28, 28), &Device::Cpu).map_err(e)?,
        Tensor::from_vec(y, 32, &Device::Cpu).map_err(e)?,
    ))
}

fn dumper(root: &std::path::Path, saved: &str) -> std::result::Result<Dumper, String> {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Bench",
        "iteration": "all", "saved_data": "{saved}", "input_output": 0, "kernels": [],
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
    let d = std::env::temp_dir().join(format!("opdump-bench-train-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One mode: its model, optimizer and (for the dumped modes) Dumper, Tracer and dump root.
struct ModeState {
    name: &'static str,
    model: Cnn,
    plain: Option<SGD>,
    dumped: Option<(DumpedOptimizer<SGD>, Dumper, Tracer, Option<PathBuf>)>,
}

const LR: f64 = 0.01;

/// Runs the training benchmark.
pub fn run(opts: &Opts, _rows: &mut Vec<Row>) -> std::result::Result<(), String> {
    let steps = if opts.quick { 5 } else { opts.runs.max(151) };
    let e = |e: dump_candle::candle_core::Error| e.to_string();
    let (x, y) = batch()?;
    let (first, _) = model(None)?;
    let mut modes = Vec::new();
    for (name, saved) in [
        ("no dump (candle train step)", None),
        // The same work as the first row on a second copy: the spread of one run.
        ("no dump, second copy (noise floor)", None),
        ("dump disabled (Tracer + DumpedOptimizer)", Some("")),
        ("statistic dump (fwd + bwd + params)", Some("statistic")),
        ("tensor dump (fwd + bwd + params)", Some("tensor")),
    ] {
        let (vm, m) = model(Some(&first))?;
        let st = match saved {
            None => ModeState {
                name,
                model: m,
                plain: Some(SGD::new(vm.all_vars(), LR).map_err(e)?),
                dumped: None,
            },
            Some(saved) => {
                let (d, root) = if saved.is_empty() {
                    (Dumper::disabled(), None)
                } else {
                    let root = scratch(saved);
                    (dumper(&root, saved)?, Some(root))
                };
                let opt = DumpedOptimizer::new(SGD::new(vm.all_vars(), LR).map_err(e)?, &vm);
                ModeState {
                    name,
                    model: m,
                    plain: None,
                    dumped: Some((opt, d, Tracer::new(0), root)),
                }
            }
        };
        modes.push(st);
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
            let t = Instant::now();
            match (&mut st.plain, &mut st.dumped) {
                (Some(sgd), _) => {
                    let l =
                        loss::cross_entropy(&st.model.forward(&x).map_err(e)?, &y).map_err(e)?;
                    sgd.backward_step(&l).map_err(e)?;
                }
                (None, Some((opt, d, tracer, _))) => {
                    let model = &st.model;
                    tracer
                        .step(d, || -> Result<()> {
                            let l = loss::cross_entropy(&model.forward(&x)?, &y)?;
                            opt.backward_step(&l)
                        })
                        .map_err(|e| e.to_string())?
                        .map_err(e)?;
                }
                (None, None) => unreachable!("every mode has an optimizer"),
            }
            let elapsed = t.elapsed();
            if let Some((_, d, _, root)) = &st.dumped {
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
        "\ntraining step (candle 0.11.1 CPU, CNN 32x1x28x28, SGD; median of {steps} steps, modes in turn)"
    );
    println!("{:<44} {:>10} {:>8}", "mode", "ms/step", "ratio");
    let plain = median(times[0].clone()).max(1e-9);
    for (st, t) in modes.into_iter().zip(times) {
        let ms = median(t);
        println!("{:<44} {ms:>10.3} {:>8.3}", st.name, ms / plain);
        let _ = writeln!(csv, "{},{ms:.4},{:.4}", st.name, ms / plain);
        if let Some((_, mut d, _, root)) = st.dumped {
            d.close().map_err(|e| e.to_string())?;
            if let Some(r) = root {
                let _ = std::fs::remove_dir_all(r);
            }
        }
    }
    let path = super::write_group_csv("train.csv", &csv)?;
    println!("wrote {}", path.display());
    Ok(())
}
