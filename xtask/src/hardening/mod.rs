//! `cargo xtask hardening`: the full hardening campaign, on demand (CI runs the fast versions
//! as ordinary `cargo test`s).
//!
//! - `--schedules`: the seeded 8-producer schedules (200 seeds) and the kill -9 loop (100
//!   children killed at seeded points) of `tests/tests/schedules.rs`;
//! - `--soak`: 100 000 steps of `tests/tests/soak.rs` (RSS, open fds and threads flat);
//! - `--valgrind`: memcheck over the SIMD statistics tests of dump-core and the npy reader
//!   tests of dump-npy ([`valgrind`]).
//!
//! No part named runs them all. `--quick` scales each part down (for a smoke run).

mod campaign;
mod valgrind;

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

const USAGE: &str = "usage: cargo xtask hardening [--schedules] [--soak] [--valgrind] [--quick]";

/// Runs `cargo xtask hardening ARGS`.
pub fn run(args: &[String]) -> Result<(), String> {
    let (mut schedules, mut soak, mut memcheck, mut quick) = (false, false, false, false);
    for a in args {
        match a.as_str() {
            "--schedules" => schedules = true,
            "--soak" => soak = true,
            "--valgrind" => memcheck = true,
            "--quick" => quick = true,
            other => return Err(format!("hardening: unknown argument `{other}`\n{USAGE}")),
        }
    }
    if !(schedules || soak || memcheck) {
        (schedules, soak, memcheck) = (true, true, true);
    }
    let mut done = Vec::new();
    if schedules {
        done.push(timed("schedules", || campaign::schedules(quick))?);
    }
    if soak {
        done.push(timed("soak", || campaign::soak(quick))?);
    }
    if memcheck {
        done.push(timed("valgrind", || valgrind::run(quick))?);
    }
    println!("hardening: ok ({})", done.join("; "));
    Ok(())
}

fn timed(part: &str, f: impl FnOnce() -> Result<(), String>) -> Result<String, String> {
    let t = Instant::now();
    f().map_err(|e| format!("hardening {part}: {e}"))?;
    Ok(format!("{part} {:.0} s", t.elapsed().as_secs_f64()))
}

/// The workspace root: the parent of this crate's manifest directory.
fn workspace_root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
}

/// `cargo` (the one running xtask) in the workspace root.
fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(workspace_root());
    c
}

/// Shows `cmd` (with the variables it sets), runs it with inherited output, and fails naming
/// it and its status unless it succeeds.
fn run_checked(cmd: &mut Command) -> Result<(), String> {
    let shown = describe(cmd);
    println!("hardening: {shown}");
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{shown}` failed ({status})"))
    }
}

fn describe(cmd: &Command) -> String {
    let env = cmd
        .get_envs()
        .filter_map(|(k, v)| v.map(|v| format!("{}={}", k.to_string_lossy(), v.to_string_lossy())));
    let words = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(OsStr::to_string_lossy)
        .map(|s| s.into_owned());
    env.chain(words).collect::<Vec<_>>().join(" ")
}
