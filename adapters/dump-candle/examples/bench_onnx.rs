//! Step time of candle-onnx (dump-candle) and ONNX Runtime (dump-ort) on the ONNX fixtures,
//! without dump and with each dump mode (the rows of BENCHMARKS.md's adapter table):
//!
//! ```sh
//! ORT_DYLIB_PATH=$(adapters/dump-ort/ci/fetch-ort.sh) \
//!     cargo run --release -p dump-candle --features onnx --example bench_onnx \
//!     [-- STEPS [MODELS [quiet]]]
//! ```
//!
//! MODELS is a comma-separated list of fixtures (default `cnn.onnx,large.onnx`); `quiet`
//! runs only the modes that dump nothing (the runtime alone, a disabled Dumper, the
//! rejecting filters), with no flush or sync after any step, so no dumping mode's files and
//! syncs run between their steps: the adapters' fixed cost per step on a small model (issue 28
//! item 2).
//!
//! Modes: the runtime alone; a second plain instance of it (another session or model of the
//! same file: the control, whose ratio shows what two plain instances differ by, the
//! resolution of every other ratio); the adapter with a disabled Dumper; statistic dump (default
//! categories); tensor dump; full dump; a `kernels` filter that rejects every kernel; an
//! `iteration` filter that rejects every step (every kernel may be dumped, so ONNX Runtime's
//! runner keeps every node output exposed: the cost of a rejecting filter before the runner
//! narrowed its exposure). The
//! modes take turns step by step in a fresh seeded order each round (see `rows`); each cell
//! is the median of STEPS (default 15) steps after one warm-up round. ONNX Runtime runs with
//! graph optimisation disabled in every mode (the adapter needs it; the plain run matches),
//! and every ONNX Runtime session (one per mode, and the plain one) on one intra-op thread
//! that sleeps when idle (`session.intra_op.allow_spinning` 0): with the default thread pools
//! the idle sessions' threads spin on the cores the measured one needs, so the rows measured
//! the neighbours as much as the mode.
//!
//! The plain runs are what a program without opdump writes: candle-onnx's `simple_eval`, or
//! ONNX Runtime's `session.run` with the input names borrowed; every mode, plain or not,
//! then reads each declared output by name. Each row also gives the heap allocations per
//! step on the measuring thread (a counting global allocator; the runtimes' own C++
//! allocations are not counted).

use std::{collections::HashMap, hint::black_box, path::PathBuf, time::Instant};

use dump_candle::{CandleRunner, candle_core::Tensor, candle_onnx, host_tensor};
use dump_core::DType;
use dump_host::{DumpOptions, Dumper};
use dump_onnx::Model;
use dump_ort::{OrtRunner, ort};

type Res<T> = Result<T, String>;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::allocations;

/// Every ONNX Runtime session of the bench: idle intra-op threads sleep instead of spinning.
const SPIN: (&str, &str) = ("session.intra_op.allow_spinning", "0");

/// One model input: name, shape, little-endian f32 bytes.
type Feed = (String, Vec<usize>, Vec<u8>);

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/onnx")
        .join(name)
}

/// (mode, saved_data, dump_mode, kernels, iteration)
const MODES: [(&str, &str, u32, &str, &str); 5] = [
    (
        "statistic dump (default categories)",
        "statistic",
        0,
        "[]",
        "all",
    ),
    ("tensor dump", "tensor", 0, "[]", "all"),
    ("full dump", "full", 0, "[]", "all"),
    (
        "kernels filter rejects all",
        "full",
        1,
        r#"["no-such-kernel"]"#,
        "all",
    ),
    // Every kernel may be dumped but no step is: ONNX Runtime's runner keeps every node
    // output exposed and dumps nothing (what a rejecting filter cost before the runner
    // narrowed its exposure to the Dumper's kernels).
    (
        "iteration filter rejects all (all exposed)",
        "full",
        0,
        "[]",
        "1000000000",
    ),
];

fn dumper(
    root: &std::path::Path,
    (saved, dump_mode, kernels, iteration): (&str, u32, &str, &str),
) -> Res<Dumper> {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": {dump_mode}, "path": "{}", "net_name": "Bench",
        "iteration": "{iteration}", "saved_data": "{saved}", "input_output": 0, "kernels": {kernels},
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
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

/// The model's inputs: f32 values `((k * 7919) % 2000) / 1000 - 1`.
fn inputs(model: &Model, file: &str) -> Res<Vec<Feed>> {
    model
        .graph
        .inputs
        .iter()
        .map(|i| {
            let shape = i
                .fixed_shape()
                .ok_or_else(|| format!("{file}: input {} has no fixed shape", i.name))?;
            let n: usize = shape.iter().product();
            let v: Vec<u8> = (0..n)
                .flat_map(|k| (((k * 7919) % 2000) as f32 / 1000.0 - 1.0).to_le_bytes())
                .collect();
            Ok((i.name.clone(), shape, v))
        })
        .collect()
}

/// The plain run, a second plain instance (`plain(1)`: another session or model of the same
/// file, the control row: what two plain instances differ by, the resolution of the ratios),
/// and every dumped mode through `step` (given the mode's index: each mode has
/// its own runner, as a program has one per model and Dumper; ONNX Runtime's runner prepares
/// its session for its Dumper's kernels), interleaved: each round runs every mode once, in a
/// fresh seeded order, after one warm-up round, so a busy machine slows them alike.
/// After a dumped step its files are flushed and synced to disk, untimed, so no mode's writes
/// (the writer's or the kernel's write-back) land in another mode's step.
fn rows(
    tag: &str,
    (steps, quiet): (usize, bool),
    mut plain: impl FnMut(usize) -> Res<()>,
    mut step: impl FnMut(usize, &mut Dumper) -> Res<()>,
) -> Res<Vec<Row>> {
    let mut names = vec![
        format!("no dump ({tag} alone)"),
        "no dump, a second instance (control)".to_owned(),
        "adapter, dump disabled".to_owned(),
    ];
    // Modes 0 and 1 are the plain runs; the others hold a Dumper and their dump directory.
    let mut dumpers: Vec<(Dumper, Option<PathBuf>)> = vec![(Dumper::disabled(), None)];
    for (mode, saved, dump_mode, kernels, iteration) in MODES {
        if quiet && !mode.contains("rejects") {
            continue;
        }
        let root = std::env::temp_dir().join(format!(
            "opdump-bench-onnx-{}-{tag}-{saved}-{dump_mode}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        dumpers.push((
            dumper(&root, (saved, dump_mode, kernels, iteration))?,
            Some(root),
        ));
        names.push(mode.to_owned());
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut allocs: Vec<u64> = vec![0; names.len()];
    let mut order: Vec<usize> = (0..names.len()).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..=steps {
        for k in (1..order.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            order.swap(k, (seed % (k as u64 + 1)) as usize);
        }
        for &m in &order {
            let a = allocations();
            let t = Instant::now();
            if m < 2 {
                plain(m)?;
            } else {
                step(m - 2, &mut dumpers[m - 2].0)?;
            }
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let a = allocations() - a;
            // The quiet modes write nothing: no flush or sync after any mode's step, so every
            // mode's step follows the same kind of untimed work.
            if m > 1 && !quiet {
                let (d, root) = &mut dumpers[m - 2];
                d.flush().map_err(|e| e.to_string())?;
                if root.is_some() {
                    let _ = std::process::Command::new("sync").status();
                }
            }
            if round > 0 {
                times[m].push(ms); // round 0 warms up
                allocs[m] += a;
            }
        }
    }
    let mut out = Vec::new();
    for (((name, mut t), a), (mut d, root)) in names.into_iter().zip(times).zip(allocs).zip(
        [(Dumper::disabled(), None), (Dumper::disabled(), None)]
            .into_iter()
            .chain(dumpers),
    ) {
        d.close().map_err(|e| e.to_string())?;
        if let Some(r) = root {
            let _ = std::fs::remove_dir_all(r);
        }
        t.sort_by(f64::total_cmp);
        out.push(Row {
            mode: name,
            ms: t[t.len() / 2],
            allocs: a as f64 / steps as f64,
        });
    }
    Ok(out)
}

/// One mode's median step and its allocations per step.
struct Row {
    mode: String,
    ms: f64,
    allocs: f64,
}

fn candle_rows(file: &str, steps: (usize, bool)) -> Res<Vec<Row>> {
    let bytes = std::fs::read(fixture(file)).map_err(|e| format!("{file}: {e}"))?;
    let model = Model::parse(bytes.clone()).map_err(|e| e.to_string())?;
    let mut feed: HashMap<String, Tensor> = HashMap::new();
    for (name, shape, data) in inputs(&model, file)? {
        let t = host_tensor(DType::Float32, &shape, &data).map_err(|e| e.to_string())?;
        feed.insert(name, t);
    }
    let plain = [
        candle_onnx::read_file(fixture(file)).map_err(|e| e.to_string())?,
        candle_onnx::read_file(fixture(file)).map_err(|e| e.to_string())?,
    ];
    let declared: Vec<String> = model.graph.outputs.iter().map(|o| o.name.clone()).collect();
    let mut runners = (0..=MODES.len())
        .map(|_| CandleRunner::new(bytes.clone(), 0).map_err(|e| e.to_string()))
        .collect::<Res<Vec<_>>>()?;
    rows(
        "candle-onnx",
        steps,
        |i| {
            let out =
                candle_onnx::simple_eval(&plain[i], feed.clone()).map_err(|e| e.to_string())?;
            read(&declared, |n| out.get(n))
        },
        |m, d| {
            let out = runners[m].run(d, feed.clone()).map_err(|e| e.to_string())?;
            read(&declared, |n| out.get(n))
        },
    )
}

fn ort_rows(
    env: &ort::environment::Environment,
    file: &str,
    steps: (usize, bool),
) -> Res<Vec<Row>> {
    use ort::session::{Session, SessionInputValue, builder::GraphOptimizationLevel};
    let bytes = std::fs::read(fixture(file)).map_err(|e| format!("{file}: {e}"))?;
    let model = Model::parse(bytes.clone()).map_err(|e| e.to_string())?;
    let mut feed = Vec::new();
    for (name, shape, data) in inputs(&model, file)? {
        let v = dump_ort::host_tensor(DType::Float32, &shape, &data).map_err(|e| e.to_string())?;
        feed.push((name, v));
    }
    let declared: Vec<String> = model.graph.outputs.iter().map(|o| o.name.clone()).collect();
    let session = || {
        Session::builder(env)
            .map_err(|e| e.to_string())?
            .with_optimization_level(GraphOptimizationLevel::Disable)
            .map_err(|e| e.to_string())?
            .with_intra_threads(1)
            .map_err(|e| e.to_string())?
            .with_config_entry(SPIN.0, SPIN.1)
            .map_err(|e| e.to_string())?
            .commit_from_memory(&bytes)
            .map_err(|e| e.to_string())
    };
    let mut plain = [session()?, session()?];
    let mut runners = (0..=MODES.len())
        .map(|_| {
            OrtRunner::builder()
                .intra_threads(1)
                .config_entry(SPIN.0, SPIN.1)
                .from_bytes(bytes.clone(), 0)
                .map_err(|e| e.to_string())
        })
        .collect::<Res<Vec<_>>>()?;
    rows(
        "ort",
        steps,
        |i| {
            let f: Vec<(&str, SessionInputValue<'_>)> =
                feed.iter().map(|(k, v)| (k.as_str(), v.into())).collect();
            let out = plain[i].run(f).map_err(|e| e.to_string())?;
            read(&declared, |n| out.get(n))
        },
        |m, d| {
            let out = runners[m].run(d, &feed).map_err(|e| e.to_string())?;
            read(&declared, |n| out.get(n))
        },
    )
}

/// Reads every declared output by name from a run's outputs (`get`), as a program does.
fn read<V>(declared: &[String], get: impl Fn(&str) -> Option<V>) -> Res<()> {
    for name in declared {
        black_box(get(name).ok_or_else(|| format!("output {name} missing"))?);
    }
    Ok(())
}

fn print(runtime: &str, file: &str, rows: &[Row]) {
    let plain = rows[0].ms.max(1e-9);
    for Row { mode, ms, allocs } in rows {
        println!(
            "{runtime:<12} {file:<11} {mode:<44} {ms:>10.4} {:>7.3} {allocs:>7.1}",
            ms / plain
        );
    }
}

fn main() -> Res<()> {
    let steps: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().map_err(|e| format!("STEPS {s:?}: {e}")))
        .transpose()?
        .unwrap_or(15);
    if steps == 0 {
        return Err("STEPS must be at least 1".into());
    }
    let models = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "cnn.onnx,large.onnx".to_owned());
    let quiet = match std::env::args().nth(3).as_deref() {
        None => false,
        Some("quiet") => true,
        Some(other) => return Err(format!("unknown option {other:?} (expected `quiet`)")),
    };
    println!(
        "runtime adapters, median of {steps} steps (ms/step, ratio vs the runtime alone, heap \
         allocations per step)"
    );
    println!(
        "{:<12} {:<11} {:<44} {:>10} {:>7} {:>7}",
        "runtime", "model", "mode", "ms/step", "ratio", "allocs"
    );
    let env = dump_ort::environment();
    for file in models.split(',') {
        print("candle-onnx", file, &candle_rows(file, (steps, quiet))?);
        match &env {
            Ok(env) => print("ort", file, &ort_rows(env, file, (steps, quiet))?),
            Err(e) => println!("ort rows skipped: {e}"),
        }
    }
    Ok(())
}
