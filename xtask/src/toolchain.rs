//! What the cross and agent checks share: the workspace root, the rustup target and qemu
//! they need (each checked with the line that installs it), and running a step's command.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The Cortex-M4F target the no_std proof builds for.
pub(crate) const TARGET: &str = "thumbv7em-none-eabihf";

/// The emulator that runs the firmware (`firmware/.cargo/config.toml` names it as the runner).
pub(crate) const QEMU: &str = "qemu-system-arm";

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
pub(crate) fn run_capture(
    cmd: &std::ffi::OsStr,
    dir: &Path,
    args: &[String],
) -> Result<String, String> {
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
