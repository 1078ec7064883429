//! The fuzzing part of the campaign: every cargo-fuzz target of `fuzz/` for 10^7 executions
//! (10^5 with `--quick`), one at a time, through `fuzz/run_all.sh`, then a check that each
//! target exited cleanly and ran the executions asked for.
//!
//! Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). On the 2-core VM
//! this takes about two hours: config_json slows from 10k to under 2k executions per second as
//! its inputs grow towards 4 KiB and takes most of it (csv_row 10.8k/s, wire 94k/s). Each
//! target may run up to 4 hours before the time limit fails the part.

use std::{fs, process::Command};

use super::{run, workspace_root};

/// Every target, in `run_all.sh`'s order.
const TARGETS: [&str; 6] = [
    "config_json",
    "npy",
    "file_name",
    "csv_row",
    "wire",
    "cann_dump",
];

/// Runs the targets and checks their logs.
pub fn run_targets(quick: bool) -> Result<(), String> {
    match Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .output()
    {
        Ok(o) if o.status.success() => {}
        _ => {
            return Err(
                "cargo-fuzz on the nightly toolchain is needed (rustup toolchain install \
                 nightly; cargo install cargo-fuzz)"
                    .into(),
            );
        }
    }
    let runs: u64 = if quick { 100_000 } else { 10_000_000 };
    let dir = workspace_root().join("fuzz");
    let logs = dir.join("logs");
    // run_all.sh appends one line per target to the summary: start from an empty one.
    let _ = fs::remove_file(logs.join("summary.txt"));
    run(
        Command::new("sh")
            .arg(dir.join("run_all.sh"))
            .arg(runs.to_string())
            .arg("14400")
            .current_dir(&dir),
        false,
    )?;
    let summary = fs::read_to_string(logs.join("summary.txt"))
        .map_err(|e| format!("{}: {e}", logs.join("summary.txt").display()))?;
    let mut report = Vec::new();
    for t in TARGETS {
        if !summary.lines().any(|l| l == format!("{t} exit 0")) {
            return Err(format!(
                "fuzz target {t} failed or did not run (fuzz/logs/summary.txt: {summary:?}; \
                 see fuzz/logs/{t}.log and fuzz/artifacts/{t}/)"
            ));
        }
        let log_path = logs.join(format!("{t}.log"));
        let log =
            fs::read_to_string(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let done =
            executed(&log).ok_or_else(|| format!("{}: no final statistics", log_path.display()))?;
        if done < runs {
            return Err(format!(
                "fuzz target {t}: {done} executions, fewer than {runs} (the time limit ended it)"
            ));
        }
        report.push(format!("{t} {done}"));
    }
    println!("xtask hardening fuzz: executions {}", report.join(", "));
    Ok(())
}

/// `stat::number_of_executed_units` of a libFuzzer log (`-print_final_stats=1`).
fn executed(log: &str) -> Option<u64> {
    log.lines()
        .rev()
        .find_map(|l| l.strip_prefix("stat::number_of_executed_units:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_final_execution_count() {
        let log = "#100 DONE cov: 5\nstat::number_of_executed_units: 10000000\n\
                   stat::average_exec_per_sec:     4105\n";
        assert_eq!(executed(log), Some(10_000_000));
        assert_eq!(executed("#100 DONE cov: 5\n"), None);
    }
}
