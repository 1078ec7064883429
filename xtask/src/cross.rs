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

use crate::toolchain::{
    QEMU, TARGET, check_qemu, check_target_installed, run_capture, run_step, workspace_root,
};

/// The crates that must build for [`TARGET`] with default features off (no `std`, no
/// `alloc`); each also has `alloc`, `defmt` and `serde` features, checked alone (and the last
/// two together).
const NO_STD_CRATES: [&str; 3] = ["dump-core", "dump-npy", "dump-stats"];

/// Fewer passed checks than this means the firmware skipped some (126 exist).
const MIN_FIRMWARE_CHECKS: usize = 124;

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
