//! The writer's part of `cargo xtask hardening` (`--faults`): the full versions of issue 13's
//! fault injection and writer defects, in release builds (`cargo test` runs the fast versions).
//!
//! Steps, each a plain command printed before it runs:
//! 1. fault injection at every I/O call, every fault, sync and threaded, over the small dump
//!    and the TinyNet sequence (`tests/tests/fault_injection.rs` with
//!    `OPDUMP_HARDENING_FULL=1`);
//! 2. the writer defects as a user meets them (`tests/tests/writer_hardening.rs`);
//! 3. peak memory of the workload, 80 x 7 MiB then 16,000 x 64 KiB tensors with the
//!    default 256 MiB budget, in a child process (`hardening_child rss`); fails beyond the budget
//!    plus [`RSS_SLACK_MIB`];
//! 4. `opdump demo --steps 10000 --batch 1` under `ulimit -n 256` (one `statistic.csv` per step).
//!
//! Dumps go to `/dev/shm` when it exists (a busy disk makes 10^4 directories slow).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use super::{cargo_test, run};

/// What a tensor dump may hold beyond its memory budget (docs/compat.md, "Memory").
const RSS_SLACK_MIB: u64 = 16;

fn scratch(tag: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_owned()
    } else {
        std::env::temp_dir()
    };
    let p = base.join(format!("opdump-xtask-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

/// The release binary `name` of the workspace, built first.
fn binary(package: &str, name: &str) -> Result<PathBuf, String> {
    run(
        Command::new(env!("CARGO")).args(["build", "--release", "-p", package, "--bin", name]),
        false,
    )?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no workspace root")?;
    Ok(root.join("target/release").join(name))
}

fn memory() -> Result<(), String> {
    let child = binary("opdump-tests", "hardening_child")?;
    let dir = scratch("rss");
    let out = run(
        Command::new(&child).args(["rss", &dir.display().to_string(), "80", "16000", "256"]),
        true,
    );
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    let v: Vec<u64> = out
        .lines()
        .find_map(|l| l.strip_prefix("rss "))
        .ok_or_else(|| format!("no rss line in {out}"))?
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let [base, peak, held] = v[..] else {
        return Err(format!("bad rss line in {out}"));
    };
    let over = peak.saturating_sub(base) >> 10;
    println!(
        "memory: 80 x 7 MiB then 16,000 x 64 KiB, budget 256 MiB: peak RSS {} MiB = start {} MiB \
         + {over} MiB (the budget held at most {} MiB)",
        peak >> 10,
        base >> 10,
        held >> 10
    );
    if over > 256 + RSS_SLACK_MIB {
        return Err(format!(
            "peak RSS {over} MiB over the start passes the 256 MiB budget + {RSS_SLACK_MIB} MiB"
        ));
    }
    Ok(())
}

fn descriptors() -> Result<(), String> {
    let opdump = binary("opdump", "opdump")?;
    let dir = scratch("fds");
    let r = run(
        Command::new("sh").arg("-c").arg(format!(
            "ulimit -n 256; exec '{}' demo --steps 10000 --batch 1 --saved-data statistic \
             --categories default --out '{}'",
            opdump.display(),
            dir.display()
        )),
        true,
    );
    let _ = std::fs::remove_dir_all(&dir);
    let out = r?;
    println!("descriptors: opdump demo, 10^4 steps under ulimit -n 256: ok");
    if let Some(last) = out.lines().rev().find(|l| !l.trim().is_empty()) {
        println!("  {last}");
    }
    Ok(())
}

/// Fault injection, the writer's defects, peak memory and descriptors (`--faults`).
pub fn faults() -> Result<(), String> {
    // The fault runs make about 11,000 small dumps: on a memory file system when there is one.
    let tmp = scratch("faults");
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let tmp_text = tmp.display().to_string();
    let r = cargo_test(
        "fault_injection",
        &[("OPDUMP_HARDENING_FULL", "1"), ("TMPDIR", &tmp_text)],
    );
    let _ = std::fs::remove_dir_all(&tmp);
    r?;
    cargo_test("writer_hardening", &[])?;
    memory()?;
    descriptors()
}
