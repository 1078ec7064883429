//! One mode of `bench_onnx`'s quiet rows (issue 28 item 2) alone in a tight loop, for a
//! profiler: the runtime alone, or its adapter on cnn.onnx with a Dumper that dumps nothing.
//!
//! ```sh
//! ORT_DYLIB_PATH=$(adapters/dump-ort/ci/fetch-ort.sh) \
//!     cargo build --release -p dump-candle --features onnx --example prof_quiet
//! target/release/examples/prof_quiet MODE STEPS
//! # instructions per step: the difference of two runs, divided by 5 * (400 - 200) steps
//! valgrind --tool=callgrind --callgrind-out-file=cg.200 target/release/examples/prof_quiet ort-reject 200
//! valgrind --tool=callgrind --callgrind-out-file=cg.400 target/release/examples/prof_quiet ort-reject 400
//! ```
//!
//! MODE is `RUNTIME-WHAT`: RUNTIME `ort` or `candle`; WHAT `plain` (the runtime alone, as
//! `bench_onnx`'s plain row: input names borrowed, the declared output read by name),
//! `disabled` (a disabled Dumper), `reject` (a `kernels` filter that rejects every kernel)
//! or `iter` (an `iteration` filter that rejects every step). After 200 warm-up steps it runs
//! 5 batches of STEPS steps and prints the fastest batch's time per step and the heap
//! allocations per step on this thread (a counting global allocator; the runtimes' C++
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

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/onnx")
        .join(name)
}

/// A statistic Dumper (it never writes here) with `dump_mode`, `kernels` and `iteration`.
fn dumper(dump_mode: u32, kernels: &str, iteration: &str) -> Res<Dumper> {
    let root = std::env::temp_dir().join(format!("opdump-prof-quiet-{}", std::process::id()));
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": {dump_mode}, "path": "{}", "net_name": "Bench",
        "iteration": "{iteration}", "saved_data": "statistic", "input_output": 0,
        "kernels": {kernels}, "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(text.into_bytes())
        .map_err(|e| e.to_string())
}

/// 200 warm-up steps, then 5 batches of `steps`: the fastest batch's ns per step, and the
/// allocations per step.
fn time(steps: usize, mut step: impl FnMut() -> Res<()>) -> Res<()> {
    for _ in 0..200 {
        step()?;
    }
    let (mut best, mut allocs) = (f64::MAX, 0);
    for _ in 0..5 {
        let a = allocations();
        let t = Instant::now();
        for _ in 0..steps {
            step()?;
        }
        best = best.min(t.elapsed().as_nanos() as f64 / steps as f64);
        allocs = (allocations() - a) / steps as u64;
    }
    println!("{best:10.1} ns/step {allocs:5} allocations/step");
    Ok(())
}

fn main() -> Res<()> {
    let usage = "usage: prof_quiet ort|candle-plain|disabled|reject|iter STEPS";
    let mode = std::env::args().nth(1).ok_or(usage)?;
    let steps: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .ok_or(usage)?;
    let (runtime, what) = mode.split_once('-').ok_or(usage)?;
    let bytes = std::fs::read(fixture("cnn.onnx")).map_err(|e| e.to_string())?;
    let model = Model::parse(bytes.clone()).map_err(|e| e.to_string())?;
    let input = &model.graph.inputs[0];
    let shape = input
        .fixed_shape()
        .ok_or("cnn.onnx has a fixed input shape")?;
    let n: usize = shape.iter().product();
    let data: Vec<u8> = (0..n)
        .flat_map(|k| (((k * 7919) % 2000) as f32 / 1000.0 - 1.0).to_le_bytes())
        .collect();
    let declared = model.graph.outputs[0].name.clone();
    let mut d = match what {
        "plain" => None,
        "disabled" => Some(Dumper::disabled()),
        "reject" => Some(dumper(1, r#"["no-such-kernel"]"#, "all")?),
        "iter" => Some(dumper(0, "[]", "1000000000")?),
        _ => return Err(usage.into()),
    };
    print!("{mode:<16}");
    match runtime {
        "ort" => {
            use ort::session::{Session, SessionInputValue, builder::GraphOptimizationLevel};
            let env = dump_ort::environment().map_err(|e| e.to_string())?;
            let x =
                dump_ort::host_tensor(DType::Float32, &shape, &data).map_err(|e| e.to_string())?;
            let feed = vec![(input.name.clone(), x)];
            match d.as_mut() {
                None => {
                    let e = |e: ort::Error<ort::session::builder::SessionBuilder>| e.to_string();
                    let mut session = Session::builder(&env)
                        .map_err(|e| e.to_string())?
                        .with_optimization_level(GraphOptimizationLevel::Disable)
                        .map_err(e)?
                        .with_intra_threads(1)
                        .map_err(e)?
                        .with_config_entry("session.intra_op.allow_spinning", "0")
                        .map_err(e)?
                        .commit_from_memory(&bytes)
                        .map_err(|e| e.to_string())?;
                    time(steps, || {
                        let f: Vec<(&str, SessionInputValue<'_>)> =
                            feed.iter().map(|(k, v)| (k.as_str(), v.into())).collect();
                        let out = session.run(f).map_err(|e| e.to_string())?;
                        black_box(out.get(declared.as_str()));
                        Ok(())
                    })
                }
                Some(d) => {
                    let mut runner = OrtRunner::builder()
                        .intra_threads(1)
                        .config_entry("session.intra_op.allow_spinning", "0")
                        .from_bytes(bytes, 0)
                        .map_err(|e| e.to_string())?;
                    time(steps, || {
                        let out = runner.run(d, &feed).map_err(|e| e.to_string())?;
                        black_box(out.get(&declared));
                        Ok(())
                    })
                }
            }
        }
        "candle" => {
            let x = host_tensor(DType::Float32, &shape, &data).map_err(|e| e.to_string())?;
            let feed: HashMap<String, Tensor> = HashMap::from([(input.name.clone(), x)]);
            match d.as_mut() {
                None => {
                    let plain =
                        candle_onnx::read_file(fixture("cnn.onnx")).map_err(|e| e.to_string())?;
                    time(steps, || {
                        let out = candle_onnx::simple_eval(&plain, feed.clone())
                            .map_err(|e| e.to_string())?;
                        black_box(out.get(&declared));
                        Ok(())
                    })
                }
                Some(d) => {
                    let mut runner = CandleRunner::new(bytes, 0).map_err(|e| e.to_string())?;
                    time(steps, || {
                        let out = runner.run(d, feed.clone()).map_err(|e| e.to_string())?;
                        black_box(out.get(&declared));
                        Ok(())
                    })
                }
            }
        }
        _ => Err(usage.into()),
    }
}
