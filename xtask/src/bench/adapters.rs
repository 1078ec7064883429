//! Runtime adapter benchmarks (issue 14): the step time of a tract model through dump-tract
//! without dump, with the adapter but dumping disabled, with a statistic-only dump (default
//! categories), with a tensor dump, and with a `kernels` filter that rejects every kernel; plus
//! the cost of one rejected kernel (`Step::kernel` on the plan's real kernel names). One more
//! mode runs the statistic dump through `dump_tract::TractRunner` as a
//! `dump_onnx::OnnxRuntime` (what `opdump run` drives): its ratio beside the `TractDump` one
//! is the cost of the runtime trait.
//!
//! Models: the fixture `tests/fixtures/onnx/cnn.onnx` and `large.onnx` (a conv stack whose
//! undumped step takes tens of ms). Prints a table and writes
//! `target/bench-stats/adapters.csv` (`model,mode,median_ms,ratio_vs_plain`).

use std::{collections::HashMap, fmt::Write as _, path::PathBuf, time::Instant};

use dump_host::{DumpOptions, Dumper};
use dump_tract::{
    TractDump, TractRunner,
    dump_onnx::{HostTensor, LoadOptions, OnnxRuntime},
    tract_onnx::{self, prelude::*},
};

use super::{Opts, Row};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/onnx")
        .join(name)
}

fn dumper(
    root: &std::path::Path,
    saved: &str,
    dump_mode: u32,
    kernels: &str,
) -> Result<Dumper, String> {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": {dump_mode}, "path": "{}", "net_name": "Bench",
        "iteration": "all", "saved_data": "{saved}", "input_output": 0, "kernels": {kernels},
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    let env: HashMap<String, String> = HashMap::new();
    Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .open_json(text.into_bytes())
        .map_err(|e| e.to_string())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Loads `file` as the CLI does (typed, one kernel per ONNX node) with zero-filled inputs.
fn load(file: &str) -> Result<(Arc<TypedSimplePlan>, TVec<TValue>), String> {
    let e = |e: TractError| format!("{file}: {e:#}");
    let model = tract_onnx::onnx()
        .model_for_path(fixture(file))
        .map_err(e)?;
    let mut inputs = TVec::new();
    for i in 0..model.input_outlets().map_err(e)?.len() {
        let fact = model.input_fact(i).map_err(e)?;
        let shape = fact
            .shape
            .as_concrete_finite()
            .map_err(e)?
            .ok_or_else(|| format!("{file}: input {i} has no fixed shape"))?;
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

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "opdump-bench-adapters-{}-{tag}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// How one mode runs a step.
enum Mode {
    Plain,
    Adapter(Box<(Dumper, TractDump, Option<PathBuf>)>),
    Runtime(Box<(Dumper, Box<dyn OnnxRuntime>, Option<PathBuf>)>),
}

impl Mode {
    /// The Dumper and dump root of a dumping mode.
    fn dumper(&mut self) -> Option<(&mut Dumper, &Option<PathBuf>)> {
        match self {
            Mode::Plain => None,
            Mode::Adapter(a) => Some((&mut a.0, &a.2)),
            Mode::Runtime(r) => Some((&mut r.0, &r.2)),
        }
    }
}

/// `file` as `opdump run` loads it (`TractRunner` behind the runtime trait) with `inputs`.
fn runtime(file: &str, inputs: &TVec<TValue>) -> Result<Box<dyn OnnxRuntime>, String> {
    let mut r: Box<dyn OnnxRuntime> = Box::new(
        TractRunner::load(&fixture(file), &LoadOptions::default()).map_err(|e| e.to_string())?,
    );
    let names: Vec<String> = r.inputs().into_iter().map(|d| d.name).collect();
    let feeds = inputs
        .iter()
        .zip(names)
        .map(|(t, name)| {
            let bytes = t
                .as_plain_ram()
                .ok_or_else(|| format!("{file}: input {name} is not in plain memory"))?;
            Ok(HostTensor {
                name,
                dtype: dump_core::DType::Float32,
                shape: t.shape().to_vec(),
                data: bytes.as_bytes().to_vec(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    r.set_inputs(feeds).map_err(|e| e.to_string())?;
    Ok(r)
}

/// One model's rows: (mode, median ms). The modes take turns step by step (each round in a
/// fresh seeded order), so a busy machine slows them alike.
fn model_rows(file: &str, steps: usize) -> Result<Vec<(String, f64)>, String> {
    let (plan, inputs) = load(file)?;
    let mut state = plan.spawn().map_err(|e| e.to_string())?;
    let mut modes: Vec<(String, Mode)> = vec![
        ("no dump (tract run)".into(), Mode::Plain),
        (
            "adapter, dump disabled".into(),
            Mode::Adapter(Box::new((
                Dumper::disabled(),
                TractDump::new(&plan, 0),
                None,
            ))),
        ),
    ];
    for (mode, saved, dump_mode, kernels) in [
        ("statistic dump (default categories)", "statistic", 0, "[]"),
        ("tensor dump", "tensor", 0, "[]"),
        ("full dump", "full", 0, "[]"),
        (
            "kernels filter rejects all",
            "full",
            1,
            r#"["no-such-kernel"]"#,
        ),
    ] {
        let root = scratch(&format!(
            "{}-{saved}-{dump_mode}",
            file.trim_end_matches(".onnx")
        ));
        let d = dumper(&root, saved, dump_mode, kernels)?;
        modes.push((
            mode.into(),
            Mode::Adapter(Box::new((d, TractDump::new(&plan, 0), Some(root)))),
        ));
    }
    let root = scratch(&format!("{}-runtime", file.trim_end_matches(".onnx")));
    let d = dumper(&root, "statistic", 0, "[]")?;
    modes.push((
        "OnnxRuntime::step, statistic dump".into(),
        Mode::Runtime(Box::new((d, runtime(file, &inputs)?, Some(root)))),
    ));
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut order: Vec<usize> = (0..modes.len()).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..=steps {
        // A fresh seeded order every round, so no mode always follows the same one: the
        // kernel's write-back of the files a tensor or full dump queued lands in whichever
        // mode runs next. With a fixed order that was always the filter mode, whose step does
        // no more work than the disabled one and measured 1.27-1.38x; without the dumping
        // modes in the run it measured 1.01x.
        for k in (1..order.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            order.swap(k, (seed % (k as u64 + 1)) as usize);
        }
        for &i in &order {
            let mode = &mut modes[i].1;
            let t = Instant::now();
            match mode {
                Mode::Plain => state.run(inputs.clone()).map(drop),
                Mode::Adapter(a) => {
                    a.1.run(&mut a.0, &mut state, inputs.clone())
                        .map(drop)
                        .map_err(|e| anyhow_like(&e))
                }
                Mode::Runtime(r) => {
                    r.1.step(&mut r.0)
                        .map(drop)
                        .map_err(|e| TractError::msg(e.to_string()))
                }
            }
            .map_err(|e| e.to_string())?;
            let elapsed = t.elapsed();
            // Untimed: the files this mode queued are written and synced to disk before the
            // next mode's step, so one mode's background writes (the writer's, then the
            // kernel's write-back) never slow another's (the step time is what the runtime
            // waits for; queued writes overlap its later steps).
            if let Some((d, root)) = mode.dumper() {
                d.flush().map_err(|e| e.to_string())?;
                if root.is_some() {
                    let _ = std::process::Command::new("sync").status();
                }
            }
            if round > 0 {
                times[i].push(elapsed.as_secs_f64() * 1e3); // round 0 warms up
            }
        }
    }
    let mut out = Vec::new();
    for ((name, mode), t) in modes.into_iter().zip(times) {
        let (d, root) = match mode {
            Mode::Plain => (None, None),
            Mode::Adapter(a) => (Some(a.0), a.2),
            Mode::Runtime(r) => (Some(r.0), r.2),
        };
        if let Some(mut d) = d {
            d.close().map_err(|e| e.to_string())?;
        }
        if let Some(r) = root {
            let _ = std::fs::remove_dir_all(r);
        }
        out.push((name, median(t)));
    }
    Ok(out)
}

fn anyhow_like(e: &dump_tract::Error) -> TractError {
    TractError::msg(e.to_string())
}

/// ns per rejected kernel: `Step::kernel` on the cnn plan's kernel names, none selected.
fn rejected_kernel_ns() -> Result<f64, String> {
    let (plan, _) = load("cnn.onnx")?;
    let td = TractDump::new(&plan, 0);
    let names: Vec<(String, String)> = td
        .graph()
        .nodes
        .iter()
        .map(|n| (n.op_type.clone(), n.name.clone()))
        .collect();
    let root = scratch("rejected");
    let mut d = dumper(&root, "full", 1, r#"["no-such-kernel"]"#)?;
    let step = d.begin_step();
    let reps = 200_000usize;
    let mut runs = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let mut hits = 0usize;
        for _ in 0..reps {
            for (op, name) in &names {
                hits += usize::from(step.kernel(std::hint::black_box(op), name).is_some());
            }
        }
        assert_eq!(hits, 0);
        runs.push(t.elapsed().as_secs_f64() * 1e9 / (reps * names.len()) as f64);
    }
    drop(step);
    d.close().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&root);
    Ok(median(runs))
}

/// Runs the adapter benchmarks.
pub fn run(opts: &Opts, _rows: &mut Vec<Row>) -> Result<(), String> {
    let steps = if opts.quick { 5 } else { opts.runs.max(61) };
    let mut csv = String::from("model,mode,median_ms,ratio_vs_plain\n");
    println!("\nruntime adapters (tract 0.23.9; median of {steps} steps, modes in turn)");
    println!(
        "{:<12} {:<38} {:>10} {:>8}",
        "model", "mode", "ms/step", "ratio"
    );
    for file in ["cnn.onnx", "large.onnx"] {
        let rows = model_rows(file, steps)?;
        let plain = rows[0].1.max(1e-9);
        for (mode, ms) in &rows {
            println!("{file:<12} {mode:<38} {ms:>10.3} {:>8.3}", ms / plain);
            let _ = writeln!(csv, "{file},{mode},{ms:.4},{:.4}", ms / plain);
        }
    }
    let ns = rejected_kernel_ns()?;
    println!("rejected kernel (Step::kernel, filter says no): {ns:.1} ns");
    let _ = writeln!(csv, "cnn.onnx,rejected kernel ns,{ns:.2},");
    let path = super::write_group_csv("adapters.csv", &csv)?;
    println!("wrote {}", path.display());
    Ok(())
}
