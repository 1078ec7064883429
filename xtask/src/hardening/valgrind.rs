//! Valgrind memcheck over the SIMD statistics tests of dump-core (AVX2/FMA/F16C kernels and
//! the portable backend) and the npy reader tests of dump-npy (unit tests, fuzzed headers and
//! files, numpy-written files, the MindSpore reference files).
//!
//! The test binaries are built in release mode (the profile keeps line tables, so reports name
//! source lines) and each runs as `valgrind --error-exitcode=1 --leak-check=full
//! --errors-for-leak-kinds=definite,indirect`: "possibly lost" is not an error because every
//! test binary has one such block that is not ours (48 bytes: libtest's main-thread handle,
//! held in the thread-local context of its result channel at exit). Property tests run fewer
//! cases under valgrind (`PROPTEST_CASES`, `OPDUMP_FUZZ_CASES`: 256, or 16 with `--quick`).
//!
//! Measured on the 2-core VM with the binaries built: 90 s (52 s with `--quick`); the AVX2,
//! FMA and F16C kernels run under valgrind (the dispatch finds them), so the SIMD path is
//! checked, not only the portable one. The AVX-512 statistics kernels are not: valgrind does
//! not implement AVX-512 and hides it from CPUID, so under it `Backend::Avx512` is unavailable
//! and the tests run the other backends (`stats::tests::no_read_past_the_end` checks the
//! AVX-512 masked loads natively, against guard pages).

use std::process::Command;

use super::cargo;

/// `(package, cargo test target selection, test name filter)` of every binary checked.
const BINARIES: [(&str, &[&str], &str); 5] = [
    ("dump-core", &["--lib"], "stats"),
    ("dump-npy", &["--lib"], ""),
    ("dump-npy", &["--test", "fuzz_reader"], ""),
    ("dump-npy", &["--test", "numpy_written"], ""),
    ("dump-npy", &["--test", "reference"], ""),
];

/// Builds the test binaries and runs each under memcheck.
pub fn run(quick: bool) -> Result<(), String> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => {
            return Err("valgrind is not installed (Debian: apt-get install valgrind)".into());
        }
    }
    let cases = if quick { "16" } else { "256" };
    for (package, selection, filter) in BINARIES {
        let exe = build(package, selection)?;
        let mut cmd = Command::new("valgrind");
        cmd.args([
            "--error-exitcode=1",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect",
            "--quiet",
        ])
        .arg(&exe)
        .args(["--test-threads=1"])
        .env("PROPTEST_CASES", cases)
        .env("OPDUMP_FUZZ_CASES", cases)
        // valgrind hides AVX-512 (see above): a CI-style expectation of it would fail here.
        .env_remove("OPDUMP_EXPECT_STATS_BACKENDS")
        .env_remove("OPDUMP_EXPECT_MD5_BACKENDS")
        .current_dir(super::workspace_root().join(package));
        if !filter.is_empty() {
            cmd.arg(filter);
        }
        super::run(&mut cmd, false)?;
    }
    Ok(())
}

/// `cargo test --release --no-run` for one target; returns the test executable's path.
fn build(package: &str, selection: &[&str]) -> Result<String, String> {
    let out = cargo()
        .args([
            "test",
            "--release",
            "--no-run",
            "--message-format=json",
            "-p",
            package,
        ])
        .args(selection)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building the {package} {} tests failed:\n{}",
            selection.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let exes: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["profile"]["test"] == true)
        .filter_map(|v| v["executable"].as_str().map(str::to_owned))
        .collect();
    match &exes[..] {
        [one] => Ok(one.clone()),
        _ => Err(format!(
            "expected one test executable for {package} {}, cargo listed {exes:?}",
            selection.join(" ")
        )),
    }
}
