//! `cargo xtask test [--install]`: the whole test suite, with what could not run listed at
//! the end.
//!
//! 1. `cargo test --workspace`: builds with nothing but a Rust toolchain. A test whose
//!    prerequisite is missing (numpy, g++, chromium, ONNX Runtime, a tmpfs mount, ...) skips,
//!    and `opdump-test-support` appends the skip to `target/opdump-skips.log`.
//! 2. The suites that need `protoc` to build (candle-onnx compiles `onnx.proto`):
//!    `cargo test -p dump-candle --features onnx` and
//!    `cargo test -p opdump --features candle,ort` (every runtime of `opdump run`, and the
//!    tract / candle-onnx / ONNX Runtime cross-runtime test). Without `protoc` they are listed
//!    as skipped instead. With `protoc`, step 1 leaves these two packages out
//!    (`--exclude`): their feature suites hold every test they have without the features too
//!    (features only add), so each of their tests is built and run once, not twice (the
//!    opdump suite is the largest; the 2-core CI saves its second build and run). Their
//!    build without the features is still compiled and linted by CI's clippy.
//! 3. Every skip, grouped by what was missing, with the line that installs it.
//!
//! With `CI=true` a missing prerequisite fails the test that needed it (and a missing
//! `protoc` fails this command), so CI never passes a suite that only skipped.
//!
//! `--install` first installs every prerequisite it can (Debian's packages as root, numpy
//! from PyPI, libonnxruntime and NVRTC from their pinned PyPI wheels) and exports the
//! variables that point the tests at them: the same steps `.ci/run` takes.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

/// Runs `cargo xtask test`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut install = false;
    for a in args {
        match a.as_str() {
            "--install" => install = true,
            other => {
                return Err(format!(
                    "unknown argument `{other}`; usage: cargo xtask test [--install]"
                ));
            }
        }
    }
    let root = crate::toolchain::workspace_root();
    let mut env: Vec<(String, String)> = Vec::new();
    if install {
        install_prerequisites(&root, &mut env)?;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    std::fs::create_dir_all(&target).map_err(|e| format!("{}: {e}", target.display()))?;
    let log = target.join("opdump-skips.log");
    let _ = std::fs::remove_file(&log);
    let ci = opdump_ci();

    let mut failed: Vec<String> = Vec::new();
    let protoc = has_protoc();
    let mut suites: Vec<Vec<&str>> = Vec::new();
    if protoc {
        suites.push(vec![
            "test",
            "--workspace",
            "--exclude",
            "dump-candle",
            "--exclude",
            "opdump",
        ]);
        suites.push(vec!["test", "-p", "dump-candle", "--features", "onnx"]);
        suites.push(vec!["test", "-p", "opdump", "--features", "candle,ort"]);
    } else {
        suites.push(vec!["test", "--workspace"]);
    }
    for suite in &suites {
        let shown = format!("cargo {}", suite.join(" "));
        println!("\n=== {shown}");
        let mut cmd = Command::new(cargo());
        cmd.args(suite).current_dir(&root).env(SKIP_LOG_VAR, &log);
        for (k, v) in &env {
            cmd.env(k, v);
        }
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => failed.push(format!("{shown} ({s})")),
            Err(e) => failed.push(format!("{shown}: cannot run cargo: {e}")),
        }
    }

    let mut skips: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
    if !protoc {
        skips
            .entry((
                "protoc (the protobuf compiler; candle-onnx needs it to build)".into(),
                "apt-get install protobuf-compiler".into(),
            ))
            .or_default()
            .push((
                "cargo test -p dump-candle --features onnx; cargo test -p opdump --features candle,ort".into(),
                "protoc is not on PATH (and PROTOC is not set)".into(),
            ));
    }
    for line in std::fs::read_to_string(&log).unwrap_or_default().lines() {
        let f: Vec<&str> = line.splitn(4, '\t').collect();
        if let [test, what, why, hint] = f[..] {
            skips
                .entry((what.to_owned(), hint.to_owned()))
                .or_default()
                .push((test.to_owned(), why.to_owned()));
        }
    }
    println!("\n=== what could not run here");
    if skips.is_empty() {
        println!("nothing: every test ran");
    }
    for ((what, hint), tests) in &skips {
        println!(
            "{} skipped: needs {what}\n    install: {hint}",
            plural(tests.len(), "test")
        );
        for (test, why) in tests.iter().take(8) {
            println!("    - {test}: {why}");
        }
        if tests.len() > 8 {
            println!("    - ... and {} more", tests.len() - 8);
        }
    }
    if !skips.is_empty() {
        println!(
            "`cargo xtask test --install` installs every prerequisite (as root) and runs everything."
        );
    }
    if !protoc && ci {
        failed.push("protoc is missing, and CI=true: the candle-onnx suites must run in CI".into());
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("failed:\n  {}", failed.join("\n  ")))
    }
}

use opdump_test_support::SKIP_LOG_VAR;

fn cargo() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// `CI` is `true`, `1` or `yes`.
fn opdump_ci() -> bool {
    std::env::var("CI")
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

/// `protoc` is runnable (from `PROTOC`, else `PATH`).
fn has_protoc() -> bool {
    let protoc = std::env::var_os("PROTOC").unwrap_or_else(|| "protoc".into());
    Command::new(protoc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn sh(cmd: &str, root: &Path) -> Result<String, String> {
    println!("+ {cmd}");
    let out = Command::new("bash")
        .args(["-c", cmd])
        .current_dir(root)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    if !out.status.success() {
        return Err(format!("`{cmd}` failed ({})", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Installs what the suite needs and records the variables that point the tests at it.
fn install_prerequisites(root: &Path, env: &mut Vec<(String, String)>) -> Result<(), String> {
    let apt = "export DEBIAN_FRONTEND=noninteractive; \
               (apt-get update -qq && apt-get install -y -qq --no-install-recommends \
               protobuf-compiler g++ chromium gzip python3-pip) >&2";
    let have_all = sh(
        "command -v protoc >/dev/null && command -v g++ >/dev/null && command -v chromium >/dev/null && echo yes || true",
        root,
    )?;
    if have_all != "yes" {
        sh(apt, root)?;
    }
    sh(
        "python3 -c 'import numpy' 2>/dev/null || python3 -m pip install --quiet numpy >&2 || \
         (apt-get install -y -qq --no-install-recommends python3-numpy >&2)",
        root,
    )?;
    sh("bash tools/install-torch.sh", root)?;
    sh("bash tools/install-msprobe.sh", root)?;
    let ort = sh("bash adapters/dump-ort/ci/fetch-ort.sh", root)?;
    env.push(("ORT_DYLIB_PATH".into(), ort));
    let nvrtc = sh("bash dump-device-cuda/ci/fetch-nvrtc.sh", root)?;
    env.push(("OPDUMP_NVRTC_LIB_DIR".into(), nvrtc));
    env.push(("OPDUMP_REQUIRE_NVRTC".into(), "1".into()));
    Ok(())
}
