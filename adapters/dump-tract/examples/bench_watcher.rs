//! The cost of watcher mode on tract (docs/watcher.md, BENCHMARKS.md "Watcher mode").
//!
//! `cargo run --release -p dump-tract --example bench_watcher [ROUNDS_CNN] [ROUNDS_LARGE]`
//!
//! Per model (the fixtures cnn.onnx and large.onnx), every round runs each mode for one step,
//! in a freshly shuffled order, and the table shows the medians:
//! - `plain`: `SimpleState::run`, no adapter;
//! - `statistic`: dump-tract with a statistic dump (default categories);
//! - `statistic + watch 1`: the same, watching the first kernel's output (checked after
//!   every kernel);
//! - `watch 1 only`: a `kernels` filter that selects nothing, watching that output;
//! - `watch all only`: the same, watching every kernel's outputs (the worst case).
//!
//! A dumping step's files are flushed outside the timed step. Prints the watched bytes and
//! the reads per step (from `Dumper::watcher_counts`).

use std::{collections::HashMap, path::PathBuf, time::Instant};

use dump_host::{DumpOptions, Dumper, config::WatcherConfig};
use dump_tract::{
    TractDump,
    tract_onnx::prelude::*,
    tract_onnx::tract_core::{
        ops::OpState,
        plan::{EvalContext, eval},
    },
};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/onnx")
        .join(name)
}

fn load(file: &str) -> (Arc<TypedSimplePlan>, TVec<TValue>) {
    let model = tract_onnx::onnx().model_for_path(fixture(file)).unwrap();
    let mut inputs = TVec::new();
    for i in 0..model.input_outlets().unwrap().len() {
        let fact = model.input_fact(i).unwrap();
        let shape = fact.shape.as_concrete_finite().unwrap().unwrap();
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|k| ((k * 7919) % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        inputs.push(Tensor::from_shape(&shape, &v).unwrap().into_tvalue());
    }
    let plan = model.into_typed().unwrap().into_runnable().unwrap();
    (plan, inputs)
}

fn dumper(root: &std::path::Path, kernels: &str, watcher: Option<WatcherConfig>) -> Dumper {
    let mode = if kernels == "[]" { 0 } else { 1 };
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": {mode}, "path": "{}", "net_name": "Bench",
        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": {kernels},
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    let env: HashMap<String, String> = HashMap::new();
    let mut b = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .on_event(|_| {});
    if let Some(w) = watcher {
        b = b.watcher(w);
    }
    b.open_json(text.into_bytes()).unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Mode {
    name: &'static str,
    run: Option<(Dumper, TractDump)>,
    state: TypedSimpleState,
    times: Vec<f64>,
}

fn bench(file: &str, rounds: usize, seed: &mut u64) {
    let (plan, inputs) = load(file);
    let probe = TractDump::new(&plan, 0);
    let names: Vec<String> = probe.graph().nodes.iter().map(|n| n.name.clone()).collect();
    let root = std::env::temp_dir().join(format!("opdump-bench-watcher-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let first = WatcherConfig::new([names[0].clone()], Vec::<String>::new());
    let all = WatcherConfig::new(names.clone(), Vec::new());
    let none = r#"["NoSuchKernel"]"#;
    let mk = |name: &'static str, d: Option<Dumper>| Mode {
        name,
        run: d.map(|d| (d, TractDump::new(&plan, 0))),
        state: plan.spawn().unwrap(),
        times: Vec::new(),
    };
    let mut modes = vec![
        mk("plain", None),
        mk("statistic", Some(dumper(&root.join("s"), "[]", None))),
        mk(
            "statistic + watch 1",
            Some(dumper(&root.join("sw"), "[]", Some(first.clone()))),
        ),
        mk(
            "watch 1 only",
            Some(dumper(&root.join("w1"), none, Some(first))),
        ),
        mk(
            "watch all only",
            Some(dumper(&root.join("wa"), none, Some(all))),
        ),
    ];
    let mut order: Vec<usize> = (0..modes.len()).collect();
    for round in 0..rounds + 2 {
        // Fisher-Yates with a xorshift: a new order every round.
        for i in (1..order.len()).rev() {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            order.swap(i, (*seed % (i as u64 + 1)) as usize);
        }
        for &m in &order {
            let mode = &mut modes[m];
            let t = Instant::now();
            match &mut mode.run {
                None => {
                    mode.state.run(inputs.clone()).unwrap();
                }
                Some((d, td)) => {
                    td.run(d, &mut mode.state, inputs.clone()).unwrap();
                }
            }
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if let Some((d, _)) = &mode.run {
                d.flush().unwrap();
            }
            if round >= 2 {
                mode.times.push(ms);
            }
        }
    }
    let plain = median(modes[0].times.clone());
    println!("\n{file}: {} kernels, {rounds} rounds", names.len());
    println!("| mode | ms / step | vs plain | watched outputs read / step |");
    println!("|---|---|---|---|");
    for m in &mut modes {
        let med = median(std::mem::take(&mut m.times));
        let reads = m.run.as_ref().map_or(0, |(d, _)| d.watcher_counts().0);
        let steps = (rounds + 2) as u64;
        println!(
            "| {} | {med:.3} | {:.2}x | {} |",
            m.name,
            med / plain,
            reads / steps
        );
        if let Some((d, _)) = &mut m.run {
            assert_eq!(d.watcher_counts().1, 0, "no corruption in a correct model");
            d.close().unwrap();
        }
    }
    // The bytes watched: the first kernel's outputs, and every kernel's.
    let mut state = plan.spawn().unwrap();
    let mut sizes = Vec::new();
    state
        .run_plan_with_eval(
            inputs.clone(),
            |ctx: &EvalContext<'_>,
             op_state: Option<&mut (dyn OpState + 'static)>,
             node: &TypedNode,
             ins: TVec<TValue>|
             -> TractResult<TVec<TValue>> {
                let outs = eval(ctx, op_state, node, ins)?;
                let b: usize = outs
                    .iter()
                    .map(|t| t.len() * t.datum_type().size_of())
                    .sum();
                sizes.push((node.name.clone(), b));
                Ok(outs)
            },
        )
        .unwrap();
    let scopes: Vec<String> = probe
        .graph()
        .nodes
        .iter()
        .map(|n| n.scope.clone())
        .collect();
    let kernel_bytes: Vec<usize> = scopes
        .iter()
        .map(|n| {
            let short = n.strip_prefix("Default/").unwrap_or(n);
            sizes
                .iter()
                .find(|(s, _)| s == short)
                .map_or(0, |(_, b)| *b)
        })
        .collect();
    println!(
        "watched bytes: first kernel's output {} B; every kernel's {} B",
        kernel_bytes[0],
        kernel_bytes.iter().sum::<usize>()
    );
    let _ = std::fs::remove_dir_all(&root);
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    bench("cnn.onnx", args.first().copied().unwrap_or(301), &mut seed);
    bench("large.onnx", args.get(1).copied().unwrap_or(31), &mut seed);
}
