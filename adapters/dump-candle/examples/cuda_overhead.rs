//! The cost of a statistic-only dump with device statistics on a candle model on CUDA: the
//! transformer block of `tests/cuda_model.rs` (d_model 1024, 16 heads, 512 tokens, batch 8,
//! MLP 4x by default), one forward per step, undumped against dumped (`saved_data:
//! statistic`, `stat_calc_mode: device`, `high`: every module's input and output and three
//! taps, 19 tensors a step).
//!
//! Rounds interleave the two (the order alternating from round to round), each round timing
//! `--steps` steps of each; the device is synchronised at the end of each step only (a step's
//! time includes all of its GPU work). Prints the median per-step time of each and their ratio
//! (the issue's target: <= 1.1x).
//!
//! ```text
//! cargo run --release -p dump-candle --features cuda --example cuda_overhead -- \
//!     [--batch 8] [--seq 512] [--d-model 1024] [--heads 16] [--mlp 4] [--rounds 15] [--steps 10]
//! ```

#[path = "../tests/cuda_models/mod.rs"]
mod cuda_models;

use std::{collections::HashMap, time::Instant};

use candle_core::{Device, Module};
use cuda_models::{BLOCK_TENSORS, Block, BlockSize};
use dump_candle::Tracer;
use dump_host::{DumpOptions, Dumper, config::Device as DumpDevice};

struct Args {
    size: BlockSize,
    rounds: usize,
    steps: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        size: BlockSize::LARGE,
        rounds: 15,
        steps: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?
            .parse::<usize>()
            .map_err(|e| format!("{flag}: {e}"))?;
        if value == 0 {
            return Err(format!("{flag} must be at least 1"));
        }
        match flag.as_str() {
            "--batch" => a.size.batch = value,
            "--seq" => a.size.seq = value,
            "--d-model" => a.size.d_model = value,
            "--heads" => a.size.heads = value,
            "--mlp" => a.size.mlp = value,
            "--rounds" => a.rounds = value,
            "--steps" => a.steps = value,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(a)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args().map_err(|e| {
        format!(
            "{e}\nusage: cuda_overhead [--batch N] [--seq N] [--d-model N] [--heads N] [--mlp N] \
             [--rounds N] [--steps N]"
        )
    })?;
    let dev = Device::new_cuda(0).map_err(|e| format!("no CUDA device 0: {e}"))?;
    let size = args.size;
    let block = Block::new(size, &dev)?;
    let x = Block::input(size, &dev)?;

    let root =
        std::env::temp_dir().join(format!("dump-candle-cuda-overhead-{}", std::process::id()));
    let config = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
        "support_device": [0], "statistic_category": ["max", "min", "avg", "l2norm"]}},
        "e2e_dump_settings": {{"enable": true, "trans_flag": true, "stat_calc_mode": "device",
        "device_stat_precision_mode": "high"}}}}"#,
        root.display()
    );
    let opts = DumpOptions {
        device: DumpDevice::Gpu,
        ..DumpOptions::default()
    };
    let mut dumper = Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(opts)
        .open_json(config.into_bytes())?;
    let mut tracer = Tracer::new(0);

    // One timed batch of `steps` steps, synchronised at each step's end: ms per step.
    let undumped = || -> Result<f64, Box<dyn std::error::Error>> {
        let t = Instant::now();
        for _ in 0..args.steps {
            block.forward(&x)?;
            dev.synchronize()?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e3 / args.steps as f64)
    };
    let mut dumped = |dumper: &mut Dumper| -> Result<f64, Box<dyn std::error::Error>> {
        let t = Instant::now();
        for _ in 0..args.steps {
            tracer.step(dumper, || block.forward(&x))??;
            dev.synchronize()?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e3 / args.steps as f64)
    };

    // Warm-up: cuBLAS heuristics, candle's kernel modules, the statistics kernels (NVRTC).
    undumped()?;
    dumped(&mut dumper)?;

    let (mut plain, mut stats) = (Vec::new(), Vec::new());
    for round in 0..args.rounds {
        if round % 2 == 0 {
            plain.push(undumped()?);
            stats.push(dumped(&mut dumper)?);
        } else {
            stats.push(dumped(&mut dumper)?);
            plain.push(undumped()?);
        }
    }
    let diags: Vec<&str> = tracer.diagnostics().collect();
    let report = dumper.close()?;
    let steps_dumped = ((args.rounds + 1) * args.steps) as u64;
    let _ = std::fs::remove_dir_all(&root);

    let (p, s) = (median(&mut plain), median(&mut stats));
    println!(
        "candle transformer block on CUDA: batch {} seq {} d_model {} heads {} mlp {}x; \
         {} rounds x {} steps, median ms per step",
        size.batch, size.seq, size.d_model, size.heads, size.mlp, args.rounds, args.steps
    );
    println!("| run | ms/step | ratio |");
    println!("| --- | ---: | ---: |");
    println!("| undumped | {p:.3} | 1.000 |");
    println!(
        "| statistics on the device ({BLOCK_TENSORS} tensors/step) | {s:.3} | {:.3} |",
        s / p
    );
    println!(
        "rows written: {} (expected {}); min/max ms undumped {:.3}/{:.3}, dumped {:.3}/{:.3}",
        report.rows,
        steps_dumped * BLOCK_TENSORS,
        plain[0],
        plain[plain.len() - 1],
        stats[0],
        stats[stats.len() - 1]
    );
    if report.rows != steps_dumped * BLOCK_TENSORS || !diags.is_empty() {
        return Err(format!(
            "the dump is incomplete: {} rows, diagnostics {diags:?}",
            report.rows
        )
        .into());
    }
    if p < 5.0 {
        println!("note: the undumped step is under 5 ms; pass a larger --batch or --seq");
    }
    println!(
        "target <= 1.10x: {}",
        if s / p <= 1.10 { "met" } else { "NOT met" }
    );
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("cuda_overhead: {e}");
        std::process::exit(1);
    }
}
