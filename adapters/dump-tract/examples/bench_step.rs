//! The adapter's fixed cost per step on a small model (issue 28 item 2): the step time of
//! tract alone against dump-tract's step in the modes that dump nothing.
//!
//! `cargo run --release -p dump-tract --example bench_step [-- ROUNDS [MODEL]]`
//! (default 61 rounds of the fixture `cnn.onnx`; MODEL is a file name in
//! `tests/fixtures/onnx/` or a path).
//!
//! Every round runs each mode for one step, in a freshly shuffled order, after one warm-up
//! round; the table shows each mode's median and its ratio to the same run's plain step:
//! - `plain`: `SimpleState::run`, no adapter;
//! - `disabled`: `TractDump::run` with `Dumper::disabled()`;
//! - `kernels filter rejects all`: a `kernels` filter (`dump_mode` 1) naming no kernel;
//! - `iteration filter rejects all`: `iteration` selects a step never reached;
//! - `statistic dump`: every kernel, statistics with the default categories (for scale).
//!
//! A dumping step's rows are flushed outside the timed step.

use std::{collections::HashMap, path::PathBuf, time::Instant};

use dump_host::{DumpOptions, Dumper};
use dump_tract::{TractDump, tract_onnx::prelude::*};

type Res<T> = Result<T, String>;

fn model_path(name: &str) -> PathBuf {
    let p = PathBuf::from(name);
    if p.components().count() > 1 {
        return p;
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/onnx")
        .join(name)
}

/// The plan as `opdump run` builds it (typed, one kernel per ONNX node) and fixed inputs.
fn load(path: &std::path::Path) -> Res<(Arc<TypedSimplePlan>, TVec<TValue>)> {
    let e = |e: TractError| format!("{}: {e:#}", path.display());
    let model = tract_onnx::onnx().model_for_path(path).map_err(e)?;
    let mut inputs = TVec::new();
    for i in 0..model.input_outlets().map_err(e)?.len() {
        let fact = model.input_fact(i).map_err(e)?;
        let shape = fact
            .shape
            .as_concrete_finite()
            .map_err(e)?
            .ok_or_else(|| format!("{}: input {i} has no fixed shape", path.display()))?;
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|k| ((k * 7919) % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        inputs.push(Tensor::from_shape(&shape, &v).map_err(e)?.into_tvalue());
    }
    let plan = model
        .into_typed()
        .and_then(|m| m.into_runnable())
        .map_err(e)?;
    Ok((plan, inputs))
}

fn dumper(root: &std::path::Path, dump_mode: u32, kernels: &str, iteration: &str) -> Res<Dumper> {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": {dump_mode}, "path": "{}", "net_name": "Bench",
        "iteration": "{iteration}", "saved_data": "statistic", "input_output": 0,
        "kernels": {kernels}, "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    let env: HashMap<String, String> = HashMap::new();
    Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(text.into_bytes())
        .map_err(|e| e.to_string())
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args
        .next()
        .map(|s| s.parse().map_err(|e| format!("ROUNDS {s:?}: {e}")))
        .transpose()?
        .unwrap_or(61);
    if rounds == 0 {
        return Err("ROUNDS must be at least 1".into());
    }
    let file = args.next().unwrap_or_else(|| "cnn.onnx".into());
    let (plan, inputs) = load(&model_path(&file))?;
    let mut state = plan.spawn().map_err(|e| e.to_string())?;
    let root = std::env::temp_dir().join(format!("opdump-bench-step-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    // (name, Dumper and adapter; None: tract alone)
    let mut modes: Vec<(&str, Option<(Dumper, TractDump)>)> = vec![
        ("plain (tract alone)", None),
        (
            "disabled",
            Some((Dumper::disabled(), TractDump::new(&plan, 0))),
        ),
    ];
    for (name, dump_mode, kernels, iteration) in [
        (
            "kernels filter rejects all",
            1,
            r#"["no-such-kernel"]"#,
            "all",
        ),
        ("iteration filter rejects all", 0, "[]", "1000000000"),
        ("statistic dump", 0, "[]", "all"),
    ] {
        let d = dumper(
            &root.join(name.replace(' ', "-")),
            dump_mode,
            kernels,
            iteration,
        )?;
        modes.push((name, Some((d, TractDump::new(&plan, 0)))));
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut order: Vec<usize> = (0..modes.len()).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..=rounds {
        for k in (1..order.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            order.swap(k, (seed % (k as u64 + 1)) as usize);
        }
        for &i in &order {
            let t = Instant::now();
            match &mut modes[i].1 {
                None => drop(state.run(inputs.clone()).map_err(|e| e.to_string())?),
                Some((d, td)) => {
                    drop(
                        td.run(d, &mut state, inputs.clone())
                            .map_err(|e| e.to_string())?,
                    );
                }
            }
            let us = t.elapsed().as_secs_f64() * 1e6;
            if let Some((d, _)) = &modes[i].1 {
                d.flush().map_err(|e| e.to_string())?; // untimed
            }
            if round > 0 {
                times[i].push(us); // round 0 warms up
            }
        }
    }
    println!("dump-tract fixed cost per step: {file}, median of {rounds} rounds, modes in turn");
    println!("{:<30} {:>10} {:>8}", "mode", "us/step", "ratio");
    let mut plain = 0.0;
    for ((name, mode), mut t) in modes.into_iter().zip(times) {
        t.sort_by(f64::total_cmp);
        let median = t[t.len() / 2];
        if mode.is_none() {
            plain = median.max(1e-9);
        }
        println!("{name:<30} {median:>10.2} {:>8.3}", median / plain);
        if let Some((mut d, _)) = mode {
            d.close().map_err(|e| e.to_string())?;
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}
