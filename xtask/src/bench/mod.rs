//! `cargo xtask bench-stats`: throughput benchmarks, always in release.
//!
//! Each benchmark module pushes [`Row`]s; this module prints them as a table and writes
//! `target/bench-stats/summary.csv` with columns
//! `kernel,dtype,bytes,threads,gbps,vs_read,vs_numpy`.
//!
//! Timing: every cell is the median of at least [`Opts::runs`] runs (the machine is a noisy
//! 2-core VM, so medians, never means or bests).

#[cfg(feature = "adapters")]
mod adapters;
mod anchor;
#[cfg(feature = "burn")]
mod burn;
mod compare;
mod convert;
pub use convert::write_files;
mod cuda;
mod dump;
mod engine;
mod flight;
mod ingest;
mod md5;
mod memory;
mod msprobe;
mod npy;
mod onnx;
mod stats;
#[cfg(feature = "train")]
mod train;

use std::{fmt::Write as _, path::PathBuf, time::Instant};

/// Options shared by all benchmark modules.
#[derive(Clone, Debug)]
pub struct Opts {
    /// `--quick`: small sizes and few runs, for CI smoke runs (no thresholds).
    pub quick: bool,
    /// `--device NAME`: also benchmark a device backend (`cuda`).
    pub device: Option<String>,
    /// Runs per cell (the median is reported).
    pub runs: usize,
    /// `--only a,b`: run only these benchmark groups (`stats`, `engine`, `md5`, `npy`, `dump`, `flight`, `msprobe`, `compare`, `convert`, `ingest`, `memory`, `adapters`, `train`, `burn`, `cuda`, `anchor`, `html`, `onnx`; `anchor`, `html` and `onnx` run only when named).
    pub only: Option<Vec<String>>,
}

impl Opts {
    /// Whether benchmark group `name` runs.
    pub fn wants(&self, name: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|x| x == name))
    }
}

impl Opts {
    /// Tensor sizes in bytes for this run.
    pub fn sizes(&self) -> Vec<usize> {
        if self.quick {
            vec![4 << 10, 1 << 20]
        } else {
            vec![4 << 10, 1 << 20, 64 << 20, 512 << 20]
        }
    }
}

/// One result cell.
#[derive(Clone, Debug)]
pub struct Row {
    /// What was measured (`stats`, `stats+md5`, `md5`, `widen`, `naive`, `read`, `numpy`, ...).
    pub kernel: String,
    /// Input dtype name (`float32`, ...), or `bytes` for dtype-free kernels.
    pub dtype: String,
    /// Input size in bytes.
    pub bytes: usize,
    /// Threads used.
    pub threads: usize,
    /// Median GB/s of input bytes (10^9 bytes per second).
    pub gbps: f64,
    /// Ratio to the plain memory-read baseline of the same size in the same run.
    pub vs_read: Option<f64>,
    /// Ratio to numpy's equivalent of the same size and dtype in the same run.
    pub vs_numpy: Option<f64>,
}

/// Median GB/s of `bytes` processed by `f`, over `runs` runs after one warm-up run.
pub fn median_gbps(bytes: usize, runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut secs: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    secs.sort_by(f64::total_cmp);
    let median = secs[secs.len() / 2].max(1e-12);
    bytes as f64 / median / 1e9
}

/// Runs `f` enough times to take at least ~`min_secs` (for tiny inputs) and returns GB/s.
#[allow(
    dead_code,
    reason = "wall-clock helper for benchmark modules; `stats` times CPU time"
)]
pub fn median_gbps_batched(bytes: usize, runs: usize, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    f();
    let one = t.elapsed().as_secs_f64().max(1e-9);
    let reps = ((2e-3 / one) as usize).clamp(1, 1_000_000);
    median_gbps(bytes * reps, runs, || {
        for _ in 0..reps {
            f();
        }
    })
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        quick: false,
        device: None,
        runs: 7,
        only: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--device" => {
                o.device = Some(it.next().ok_or("--device needs a value (cuda)")?.clone())
            }
            "--only" => {
                let v = it.next().ok_or(
                    "--only needs a list: stats,engine,md5,npy,dump,flight,msprobe,compare,convert,ingest,memory,adapters,train,burn,cuda,anchor,html,onnx",
                )?;
                o.only = Some(v.split(',').map(str::to_owned).collect());
            }
            "-h" | "--help" => {
                return Err(
                    "usage: cargo xtask bench-stats [--quick] [--device cuda] [--only stats,engine,md5,npy,dump,flight,msprobe,compare,convert,ingest,memory,adapters,train,burn,cuda,anchor,html,onnx]"
                        .into(),
                );
            }
            other => return Err(format!("bench-stats: unknown argument `{other}`")),
        }
    }
    if o.quick {
        o.runs = 5;
    }
    Ok(o)
}

/// Entry point of `cargo xtask bench-stats`.
pub fn run(args: &[String]) -> Result<(), String> {
    let opts = parse(args)?;
    let mut rows = Vec::new();
    // Benchmark modules register here, each pushing its rows.
    if opts.wants("stats") {
        stats::run(&opts, &mut rows);
    }
    if opts.wants("engine") {
        engine::run(&opts, &mut rows);
    }
    if opts.wants("md5") {
        md5::run(&opts, &mut rows);
    }
    if opts.wants("npy") {
        npy::run(&opts, &mut rows)?;
    }
    if opts.wants("dump") {
        dump::run(&opts, &mut rows)?;
    }
    if opts.wants("flight") {
        flight::run(&opts, &mut rows)?;
    }
    if opts.wants("msprobe") {
        msprobe::run(&opts, &mut rows)?;
    }
    if opts.wants("compare") {
        compare::run(&opts, &mut rows)?;
    }
    if opts.wants("convert") {
        convert::run(&opts, &mut rows)?;
    }
    if opts.wants("ingest") {
        ingest::run(&opts, &mut rows)?;
    }
    if opts.wants("memory") {
        memory::run(&opts)?;
    }
    if opts.wants("adapters") {
        #[cfg(feature = "adapters")]
        adapters::run(&opts, &mut rows)?;
        #[cfg(not(feature = "adapters"))]
        {
            const HOW: &str =
                "cargo run --release -p xtask --features adapters -- bench-stats --only adapters";
            if opts.only.is_some() {
                return Err(format!("the adapters group needs tract: run `{HOW}`"));
            }
            println!("adapters group skipped (builds tract in release): run `{HOW}`");
        }
    }
    if opts.wants("train") {
        #[cfg(feature = "train")]
        train::run(&opts, &mut rows)?;
        #[cfg(not(feature = "train"))]
        {
            const HOW: &str =
                "cargo run --release -p xtask --features train -- bench-stats --only train";
            if opts.only.is_some() {
                return Err(format!("the train group needs candle: run `{HOW}`"));
            }
            println!("train group skipped (builds candle in release): run `{HOW}`");
        }
    }
    if opts.wants("burn") {
        #[cfg(feature = "burn")]
        burn::run(&opts, &mut rows)?;
        #[cfg(not(feature = "burn"))]
        {
            const HOW: &str =
                "cargo run --release -p xtask --features burn -- bench-stats --only burn";
            if opts.only.is_some() {
                return Err(format!("the burn group needs burn: run `{HOW}`"));
            }
            println!("burn group skipped (builds burn in release): run `{HOW}`");
        }
    }
    // Polygraphy, onnxruntime and torch from PyPI: only when asked for by name.
    if opts
        .only
        .as_ref()
        .is_some_and(|o| o.iter().any(|g| g == "anchor"))
    {
        anchor::run(&opts, &mut rows)?;
    }
    // Headless Chromium opening the --html pages at 5,000 kernels (minutes): only when named.
    if opts
        .only
        .as_ref()
        .is_some_and(|o| o.iter().any(|g| g == "html"))
    {
        html_pages(&opts)?;
    }
    // candle-onnx and ONNX Runtime steps through dump-candle's bench_onnx example (builds
    // candle-onnx in release, needs ORT_DYLIB_PATH): only when named.
    if opts
        .only
        .as_ref()
        .is_some_and(|o| o.iter().any(|g| g == "onnx"))
    {
        onnx::run(&opts)?;
    }
    if opts.device.as_deref() == Some("cuda") && opts.wants("cuda") {
        cuda::run(&opts, &mut rows)?;
    }
    print_table(&rows);
    write_csv(&mut rows)?;
    Ok(())
}

/// The `html` group: opdump's `html_speed` harness (`opdump/tests/html_speed.rs`) with
/// `OPDUMP_HTML_BENCH=1`, which times the 5,000-kernel compare and inspect pages against a
/// 40-kernel page in the same interleaved rounds (3, or 1 with `--quick`; more, the page size
/// and a "before" binary through its `OPDUMP_HTML_BENCH_*` variables) and prints its table.
fn html_pages(opts: &Opts) -> Result<(), String> {
    let mut cmd = std::process::Command::new(env!("CARGO"));
    cmd.args(["test", "-q", "-p", "opdump", "--test", "html_speed", "--"])
        .args([
            "--exact",
            "five_thousand_kernel_pages_load_time",
            "--nocapture",
        ])
        .env("OPDUMP_HTML_BENCH", "1");
    if opts.quick && std::env::var_os("OPDUMP_HTML_BENCH_ROUNDS").is_none() {
        cmd.env("OPDUMP_HTML_BENCH_ROUNDS", "1");
    }
    let st = cmd
        .status()
        .map_err(|e| format!("cargo test html_speed: {e}"))?;
    if !st.success() {
        return Err("the html group (cargo test -p opdump --test html_speed) failed".into());
    }
    Ok(())
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{r:.2}"))
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<22} {:<9} {:>10} {:>3} {:>9} {:>8} {:>9}",
        "kernel", "dtype", "bytes", "thr", "GB/s", "vs_read", "vs_numpy"
    );
    for r in rows {
        println!(
            "{:<22} {:<9} {:>10} {:>3} {:>9.3} {:>8} {:>9}",
            r.kernel,
            r.dtype,
            r.bytes,
            r.threads,
            r.gbps,
            fmt_ratio(r.vs_read),
            fmt_ratio(r.vs_numpy)
        );
    }
}

/// Writes a benchmark group's table `text` to `target/bench-stats/{file}`; its path.
pub fn write_group_csv(file: &str, text: &str) -> Result<PathBuf, String> {
    let dir = target_dir().join("bench-stats");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(file);
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

fn write_csv(rows: &mut [Row]) -> Result<(), String> {
    let dir = target_dir().join("bench-stats");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut out = String::from("kernel,dtype,bytes,threads,gbps,vs_read,vs_numpy\n");
    for r in rows.iter() {
        let opt = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.4}"));
        let _ = writeln!(
            out,
            "{},{},{},{},{:.4},{},{}",
            r.kernel,
            r.dtype,
            r.bytes,
            r.threads,
            r.gbps,
            opt(r.vs_read),
            opt(r.vs_numpy)
        );
    }
    let path = dir.join("summary.csv");
    std::fs::write(&path, out).map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

/// The workspace's target directory (honours `CARGO_TARGET_DIR`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}
