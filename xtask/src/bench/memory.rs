//! The `memory` group: what the writer's memory budget holds (issue 28 item 6).
//!
//! `opdump demo --batch 256 --steps 2` (the release binary, built without runtimes) under
//! `OPDUMP_MEMORY_BUDGET_MB=16`, as a statistic-only dump and as a tensor dump of the same
//! categories (max, min, avg, l2norm: no digests, so the statistic-only dump copies nothing),
//! in interleaved rounds; each run's peak RSS comes from `wait4`. The tensor dump's peak minus
//! the statistic dump's is what the copies and everything else the tensor files need cost:
//! the target is at most the budget plus 4 MiB.
//!
//! Environment: `OPDUMP_BENCH_DIR` puts the dumps there (default: the target directory);
//! `OPDUMP_BENCH_MEMORY_BASELINE=/path/to/opdump` measures a second binary (an older build)
//! in the same rounds.

use std::{
    os::unix::process::ExitStatusExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use super::{Opts, target_dir};

/// The budget the group runs under, in MiB.
const BUDGET_MB: u64 = 16;

/// Peak RSS in KiB of `cmd` (stdout and stderr discarded), from `wait4`; an error if it fails.
fn peak_rss(cmd: &mut Command) -> Result<u64, String> {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `pid` is our child, not yet waited for (`child` is never waited on through std);
    // `status` and `ru` are valid, writable locations wait4 fills.
    let r = unsafe { libc::wait4(pid, &mut status, 0, ru.as_mut_ptr()) };
    if r != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    let st = std::process::ExitStatus::from_raw(status);
    if !st.success() {
        return Err(format!("{cmd:?} exited with {st}"));
    }
    // SAFETY: wait4 returned the child, so it filled `ru` (zeroed before).
    let ru = unsafe { ru.assume_init() };
    Ok(ru.ru_maxrss as u64)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the group.
pub fn run(opts: &Opts) -> Result<(), String> {
    let bin = super::compare::opdump_release_with(&["--no-default-features"])?;
    let dir = std::env::var_os("OPDUMP_BENCH_DIR")
        .map_or_else(target_dir, PathBuf::from)
        .join("bench-memory");
    let baseline = std::env::var_os("OPDUMP_BENCH_MEMORY_BASELINE").map(PathBuf::from);
    let run = |bin: &Path, saved: &str| -> Result<f64, String> {
        let _ = std::fs::remove_dir_all(&dir);
        let kib = peak_rss(
            Command::new(bin)
                .args([
                    "demo",
                    "--batch",
                    "256",
                    "--steps",
                    "2",
                    "--saved-data",
                    saved,
                ])
                .args(["--categories", "max,min,avg,l2norm", "--out"])
                .arg(&dir)
                .env("OPDUMP_MEMORY_BUDGET_MB", BUDGET_MB.to_string()),
        )?;
        let _ = std::fs::remove_dir_all(&dir);
        Ok(kib as f64 / 1024.0)
    };
    let rounds = if opts.quick { 3 } else { 7 };
    let mut bins = vec![("this build", bin)];
    if let Some(b) = baseline {
        bins.push(("baseline", b));
    }
    // Rounds outer, binaries inner: both binaries see the same minutes of the machine.
    let mut m: Vec<[Vec<f64>; 3]> = bins.iter().map(|_| Default::default()).collect();
    for _ in 0..rounds {
        for ((_, b), [stat, tensor, excess]) in bins.iter().zip(m.iter_mut()) {
            let s = run(b, "statistic")?;
            let t = run(b, "tensor")?;
            stat.push(s);
            tensor.push(t);
            excess.push(t - s);
        }
    }
    for ((what, _), [stat, tensor, excess]) in bins.iter().zip(m.iter_mut()) {
        let (lo, hi) = excess
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
        let (s, t, e) = (median(stat), median(tensor), median(excess));
        let target = BUDGET_MB as f64 + 4.0;
        println!(
            "memory ({what}): budget {BUDGET_MB} MiB, peak RSS statistic-only {s:.1} MiB, tensor dump {t:.1} MiB: \
             excess {e:.1} MiB (range {lo:.1}-{hi:.1}, {rounds} rounds; target <= {target:.0} MiB: {})",
            if e <= target { "met" } else { "missed" }
        );
    }
    Ok(())
}
