//! `cargo xtask test-cross`: proves that `dump-core`, `dump-npy` and `dump-stats` are `no_std`
//! (without `alloc`) by building them for a Cortex-M4 and running their known answers there.
//!
//! Steps, each a plain cargo command printed before it runs:
//! 1. for each of `dump-core`, `dump-npy` and `dump-stats`, one crate per command (so that no
//!    crate's features hide another's missing ones):
//!    `cargo build -p CRATE --no-default-features --target thumbv7em-none-eabihf`, then
//!    `cargo check` of the same with `--features alloc` (no `std`, with an allocator),
//!    `--features defmt`, `--features serde` and both;
//! 2. `cargo test` in `firmware/`, whose `.cargo/config.toml` boots the known-answer tests of the
//!    three crates in `qemu-system-arm` (mps2-an386, semihosting); the firmware must print
//!    `N passed, 0 failed` with N at least [`MIN_FIRMWARE_CHECKS`];
//! 3. `cargo xtask agent-qemu` (see `agent.rs`): the device agent firmware streams a small
//!    network's statistics to `target/agent-stream.bin`, which is decoded and checked.
//!
//! Before anything runs it checks for the rustup target and for qemu and says how to install
//! whichever is missing.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The Cortex-M4F target the no_std proof builds for.
const TARGET: &str = "thumbv7em-none-eabihf";

/// The crates that must build for [`TARGET`] with default features off (no `std`, no
/// `alloc`); each also has `alloc`, `defmt` and `serde` features, checked alone (and the last
/// two together).
const NO_STD_CRATES: [&str; 3] = ["dump-core", "dump-npy", "dump-stats"];

/// Fewer passed checks than this means the firmware skipped some (126 exist).
const MIN_FIRMWARE_CHECKS: usize = 124;

/// The emulator that runs the firmware (`firmware/.cargo/config.toml` names it as the runner).
pub(crate) const QEMU: &str = "qemu-system-arm";

/// Runs `cargo xtask test-cross`.
pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!(
            "test-cross takes no arguments (got `{a}`); usage: cargo xtask test-cross"
        ));
    }
    let root = workspace_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    check_target_installed()?;
    check_qemu()?;

    let no_std_args = |krate: &str, verb: &str, features: Option<&str>| -> Vec<String> {
        let mut v: Vec<String> = [
            verb,
            "-p",
            krate,
            "--no-default-features",
            "--target",
            TARGET,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        if let Some(f) = features {
            v.extend(["--features".to_owned(), f.to_owned()]);
        }
        v
    };
    for krate in NO_STD_CRATES {
        run_step(&cargo, &root, &no_std_args(krate, "build", None))?;
        for features in ["alloc", "defmt", "serde", "defmt,serde"] {
            run_step(&cargo, &root, &no_std_args(krate, "check", Some(features)))?;
        }
    }

    let firmware = root.join("firmware");
    let out = run_capture(&cargo, &firmware, &["test".to_owned()])?;
    let summary = out
        .lines()
        .find(|l| l.contains(" passed, ") && l.ends_with(" failed"))
        .ok_or_else(|| {
            "the firmware did not print its `N passed, N failed` line (see the output above)"
                .to_owned()
        })?;
    if !summary.ends_with(" 0 failed") {
        return Err(format!("firmware known-answer tests failed: {summary}"));
    }
    let passed: usize = summary
        .split_whitespace()
        .rev()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    if passed < MIN_FIRMWARE_CHECKS {
        return Err(format!(
            "the firmware ran only {passed} known-answer checks ({summary}); at least \
             {MIN_FIRMWARE_CHECKS} exist, so some were not run"
        ));
    }
    crate::agent::run(&[])?;
    println!(
        "test-cross: ok ({} build no_std for {TARGET}; firmware {summary} in {QEMU}; agent \
         stream decoded and checked)",
        NO_STD_CRATES.join(", ")
    );
    Ok(())
}

/// The workspace root: the parent of this crate's manifest directory.
pub(crate) fn workspace_root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
}

/// The rustup target's standard library must be in the sysroot.
pub(crate) fn check_target_installed() -> Result<(), String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run rustc to find the sysroot: {e}"))?;
    if !out.status.success() {
        return Err(format!("`rustc --print sysroot` failed: {}", out.status));
    }
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let lib = Path::new(&sysroot)
        .join("lib")
        .join("rustlib")
        .join(TARGET)
        .join("lib");
    if lib.is_dir() {
        Ok(())
    } else {
        Err(format!(
            "the Rust target {TARGET} is not installed (no {}); install it with \
             `rustup target add {TARGET}`",
            lib.display()
        ))
    }
}

/// qemu-system-arm must be on PATH.
pub(crate) fn check_qemu() -> Result<(), String> {
    match Command::new(QEMU).arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("`{QEMU} --version` failed: {}", o.status)),
        Err(e) => Err(format!(
            "{QEMU} is needed to run the firmware tests but cannot be started ({e}); install it \
             with `sudo apt-get install --no-install-recommends qemu-system-arm` (Debian/Ubuntu), \
             `sudo dnf install qemu-system-arm` (Fedora) or `brew install qemu` (macOS)"
        )),
    }
}

fn show(cmd: &std::ffi::OsStr, dir: &Path, args: &[String]) {
    println!(
        "test-cross: ({}) {} {}",
        dir.display(),
        cmd.to_string_lossy(),
        args.join(" ")
    );
}

/// Runs a command with inherited output; an error names the command and its status.
pub(crate) fn run_step(cmd: &std::ffi::OsStr, dir: &Path, args: &[String]) -> Result<(), String> {
    show(cmd, dir, args);
    let status = Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", cmd.to_string_lossy()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{} {}` failed ({status})",
            cmd.to_string_lossy(),
            args.join(" ")
        ))
    }
}

/// Runs a command, echoes its output, and returns its stdout; fails if the command fails.
fn run_capture(cmd: &std::ffi::OsStr, dir: &Path, args: &[String]) -> Result<String, String> {
    show(cmd, dir, args);
    let out = Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", cmd.to_string_lossy()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "`{} {}` in {} failed ({}); the firmware's FAIL lines are above",
            cmd.to_string_lossy(),
            args.join(" "),
            dir.display(),
            out.status
        ))
    }
}
