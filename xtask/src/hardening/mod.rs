//! `cargo xtask hardening`: the full hardening campaign of issue 13, on demand, in release
//! builds (CI runs the fast versions as ordinary `cargo test`s).
//!
//! - `--faults`: fault injection at every I/O call, the writer's defects, peak memory and
//!   descriptors ([`writer`]);
//! - `--schedules`: the seeded 8-producer schedules (200 seeds) and the kill -9 loop (100
//!   children killed at seeded points) of `tests/tests/schedules.rs`;
//! - `--soak`: 100 000 steps of `tests/tests/soak.rs` (RSS, open fds and threads flat);
//! - `--valgrind`: memcheck over the SIMD statistics tests of dump-core and the npy reader
//!   tests of dump-npy ([`valgrind`]);
//! - `--fuzz`: every cargo-fuzz target for 10^7 executions ([`fuzz`]; nightly and cargo-fuzz,
//!   about two hours).
//!
//! No part named runs them all. `--quick` scales the schedules, the soak, valgrind and the
//! fuzzing down (for a smoke run).

mod campaign;
mod fuzz;
mod valgrind;
mod writer;

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

/// One part of the campaign.
type Part<'a> = &'a dyn Fn() -> Result<(), String>;

const USAGE: &str = "usage: cargo xtask hardening [--faults] [--schedules] [--soak] [--valgrind] [--fuzz] [--quick]";

/// Runs `cargo xtask hardening ARGS`.
pub fn run_all(args: &[String]) -> Result<(), String> {
    let mut parts = [false; 5];
    let mut quick = false;
    for a in args {
        match a.as_str() {
            "--faults" => parts[0] = true,
            "--schedules" => parts[1] = true,
            "--soak" => parts[2] = true,
            "--valgrind" => parts[3] = true,
            "--fuzz" => parts[4] = true,
            "--quick" => quick = true,
            other => return Err(format!("hardening: unknown argument `{other}`\n{USAGE}")),
        }
    }
    if !parts.contains(&true) {
        parts = [true; 5];
    }
    let mut done = Vec::new();
    let steps: [(&str, Part<'_>); 5] = [
        ("faults", &writer::faults),
        ("schedules", &|| campaign::schedules(quick)),
        ("soak", &|| campaign::soak(quick)),
        ("valgrind", &|| valgrind::run(quick)),
        ("fuzz", &|| fuzz::run_targets(quick)),
    ];
    for ((part, f), wanted) in steps.into_iter().zip(parts) {
        if wanted {
            let t = Instant::now();
            f().map_err(|e| format!("hardening {part}: {e}"))?;
            done.push(format!("{part} {:.0} s", t.elapsed().as_secs_f64()));
        }
    }
    println!("xtask hardening: all passed ({})", done.join("; "));
    Ok(())
}

/// The workspace root: the parent of this crate's manifest directory.
fn workspace_root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
}

/// Runs `cmd`, printing it first; its output goes to ours, or is returned with `capture`.
fn run(cmd: &mut Command, capture: bool) -> Result<String, String> {
    eprintln!("xtask hardening: {cmd:?}");
    if capture {
        let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(format!(
                "{cmd:?} failed ({}): {text}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        return Ok(text);
    }
    let status = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !status.success() {
        return Err(format!("{cmd:?} failed ({status})"));
    }
    Ok(String::new())
}

/// `cargo` (the one running xtask) in the workspace root.
fn cargo() -> Command {
    let mut c = Command::new(env!("CARGO"));
    c.current_dir(workspace_root());
    c
}

/// `cargo test --release -p opdump-tests --test TEST -- --nocapture` with `env` set.
fn cargo_test(test: &str, env: &[(&str, &str)]) -> Result<(), String> {
    let mut c = cargo();
    c.args(["test", "--release", "-p", "opdump-tests", "--test", test])
        .args(["--", "--nocapture"]);
    for (k, v) in env {
        c.env(k, v);
    }
    run(&mut c, false).map(drop)
}
