//! The `onnx` group: the step time of candle-onnx (dump-candle) and ONNX Runtime (dump-ort)
//! on the ONNX fixtures, each mode against the same process's plain run (issue 28 item 2: the
//! disabled Dumper and the rejecting filters). It builds and runs dump-candle's `bench_onnx`
//! example (candle-onnx and ONNX Runtime in release: minutes the first time), so it runs only
//! when named: `--only onnx`, with `ORT_DYLIB_PATH` naming libonnxruntime
//! (`adapters/dump-ort/ci/fetch-ort.sh`).
//!
//! One process of `bench_onnx STEPS MODELS quiet` interleaves every mode step by step and gives
//! each mode's median step and its ratio to that process's plain run; the group runs several
//! processes (the rounds) and reports, per runtime, model and mode, the median of the rounds'
//! ratios with their range. Variables: `OPDUMP_ONNX_BENCH_ROUNDS` (default 15, 3 with
//! `--quick`), `OPDUMP_ONNX_BENCH_STEPS` (default 3001, 301 with `--quick`),
//! `OPDUMP_ONNX_BENCH_MODELS` (default `cnn.onnx`), `OPDUMP_ONNX_BENCH_FULL=1` (every mode,
//! the dumping ones too, instead of `quiet`), and `OPDUMP_ONNX_BENCH_BEFORE`: another build's
//! `bench_onnx` binary, run in turn with this one in every round (before against after in the
//! same rounds). Writes `target/bench-stats/onnx.csv`
//! (`binary,runtime,model,mode,rounds,median_ratio,min_ratio,max_ratio,median_ms`).

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
};

use super::{Opts, dump::median, target_dir};

/// A row of the group's table: the binary's index, runtime, model and mode.
type Key = (usize, String, String, String);

/// One line of `bench_onnx`'s table.
#[derive(Debug, PartialEq)]
struct Line {
    runtime: String,
    model: String,
    mode: String,
    ms: f64,
    ratio: f64,
}

/// The table lines of `bench_onnx`'s output (`RUNTIME MODEL MODE... MS RATIO ALLOCS`); the
/// title and header lines, and the "rows skipped" line, are not rows.
fn parse(out: &str) -> Vec<Line> {
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.len() < 6 || !l.contains(".onnx") {
                return None;
            }
            let n = w.len();
            Some(Line {
                runtime: w[0].to_owned(),
                model: w[1].to_owned(),
                mode: w[2..n - 3].join(" "),
                ms: w[n - 3].parse().ok()?,
                ratio: w[n - 2].parse().ok()?,
            })
        })
        .collect()
}

fn var(name: &str, default: usize) -> Result<usize, String> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("{name}={v:?}: expected a whole number above 0")),
        Err(_) => Ok(default),
    }
}

/// Builds `bench_onnx` in release; its path.
fn build() -> Result<PathBuf, String> {
    let st = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "-p",
            "dump-candle",
            "--features",
            "onnx",
            "--example",
            "bench_onnx",
        ])
        .status()
        .map_err(|e| format!("onnx: cargo build: {e}"))?;
    if !st.success() {
        return Err(
            "onnx: cargo build -p dump-candle --features onnx --example bench_onnx failed".into(),
        );
    }
    Ok(target_dir().join("release/examples/bench_onnx"))
}

/// One process of `binary`: its table lines.
fn one(binary: &Path, steps: usize, models: &str, quiet: bool) -> Result<Vec<Line>, String> {
    let mut cmd = Command::new(binary);
    cmd.arg(steps.to_string()).arg(models);
    if quiet {
        cmd.arg("quiet");
    }
    let o = cmd
        .output()
        .map_err(|e| format!("onnx: {}: {e}", binary.display()))?;
    let text = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() {
        return Err(format!(
            "onnx: {} exited with {}: {}",
            binary.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    if text.contains("ort rows skipped") {
        return Err(format!(
            "onnx: {} could not load ONNX Runtime: {}",
            binary.display(),
            text.lines()
                .find(|l| l.contains("skipped"))
                .unwrap_or_default()
        ));
    }
    let lines = parse(&text);
    if lines.is_empty() {
        return Err(format!(
            "onnx: no rows in {}'s output:\n{text}",
            binary.display()
        ));
    }
    Ok(lines)
}

/// Runs the group: prints its table and writes `onnx.csv`.
pub fn run(opts: &Opts) -> Result<(), String> {
    if std::env::var_os("ORT_DYLIB_PATH").is_none() {
        return Err(
            "onnx: set ORT_DYLIB_PATH to libonnxruntime: \
             ORT_DYLIB_PATH=$(bash adapters/dump-ort/ci/fetch-ort.sh) cargo xtask bench-stats --only onnx"
                .into(),
        );
    }
    let rounds = var("OPDUMP_ONNX_BENCH_ROUNDS", if opts.quick { 3 } else { 15 })?;
    let steps = var(
        "OPDUMP_ONNX_BENCH_STEPS",
        if opts.quick { 301 } else { 3001 },
    )?;
    let models = std::env::var("OPDUMP_ONNX_BENCH_MODELS").unwrap_or_else(|_| "cnn.onnx".into());
    let quiet = std::env::var("OPDUMP_ONNX_BENCH_FULL").as_deref() != Ok("1");
    let after = build()?;
    // The binary is copied so that a later build cannot change it between rounds.
    let mut binaries = Vec::new();
    if let Some(before) = std::env::var_os("OPDUMP_ONNX_BENCH_BEFORE") {
        let before = PathBuf::from(before);
        if !before.is_file() {
            return Err(format!(
                "OPDUMP_ONNX_BENCH_BEFORE={}: no such file (a bench_onnx binary of another build)",
                before.display()
            ));
        }
        binaries.push(("before", before));
    }
    binaries.push(("this", after));
    println!(
        "onnx: {rounds} rounds of `bench_onnx {steps} {models}{}`, {} in turn",
        if quiet { " quiet" } else { "" },
        binaries
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(" and ")
    );
    // Every round's (ratio, ms) per row, rows in first-seen order.
    let mut order = Vec::new();
    let mut seen: BTreeMap<Key, Vec<(f64, f64)>> = BTreeMap::new();
    for round in 0..rounds {
        for (b, (_, path)) in binaries.iter().enumerate() {
            for l in one(path, steps, &models, quiet)? {
                let key = (b, l.runtime, l.model, l.mode);
                if !seen.contains_key(&key) {
                    order.push(key.clone());
                }
                seen.entry(key).or_default().push((l.ratio, l.ms));
            }
        }
        eprint!("\ronnx: round {}/{rounds}", round + 1);
    }
    eprintln!();
    let mut csv = String::from(
        "binary,runtime,model,mode,rounds,median_ratio,min_ratio,max_ratio,median_ms\n",
    );
    println!(
        "{:<7} {:<12} {:<11} {:<44} {:>8} {:>15} {:>10}",
        "binary", "runtime", "model", "mode", "ratio", "range", "ms/step"
    );
    for key in &order {
        let v = &seen[key];
        let ratios: Vec<f64> = v.iter().map(|r| r.0).collect();
        let (lo, hi) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &r| (a.min(r), b.max(r)));
        let (ratio, ms) = (median(ratios), median(v.iter().map(|r| r.1).collect()));
        let name = binaries[key.0].0;
        println!(
            "{name:<7} {:<12} {:<11} {:<44} {ratio:>8.3} {:>15} {ms:>10.4}",
            key.1,
            key.2,
            key.3,
            format!("{lo:.3}–{hi:.3}")
        );
        let _ = writeln!(
            csv,
            "{name},{},{},{},{},{ratio:.4},{lo:.4},{hi:.4},{ms:.5}",
            key.1,
            key.2,
            key.3,
            v.len()
        );
    }
    let path = super::write_group_csv("onnx.csv", &csv)?;
    println!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_rows_and_nothing_else() {
        let out = "runtime adapters, median of 3001 steps (ms/step, ratio vs the runtime alone, heap allocations per step)
runtime      model       mode                                            ms/step   ratio  allocs
candle-onnx  cnn.onnx    no dump (candle-onnx alone)                      0.0960   1.000   217.0
ort          cnn.onnx    kernels filter rejects all                       0.0039   1.023     4.0
ort          cnn.onnx    iteration filter rejects all (all exposed)       0.0044   1.140     4.0
";
        let rows = parse(out);
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(
            rows[0],
            Line {
                runtime: "candle-onnx".into(),
                model: "cnn.onnx".into(),
                mode: "no dump (candle-onnx alone)".into(),
                ms: 0.096,
                ratio: 1.0,
            }
        );
        assert_eq!(rows[2].mode, "iteration filter rejects all (all exposed)");
        assert_eq!((rows[1].ms, rows[1].ratio), (0.0039, 1.023));
        assert!(parse("ort rows skipped: no library\n").is_empty());
    }
}
