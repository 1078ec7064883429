//! A CPU runtime that embeds dump-host with default features pulls in no command-line or
//! device backends: `cargo tree -p dump-host -e normal` lists no clap, cudarc, libloading or
//! CUDA crate (dump-device-ascend is there without its backend: the GE layout encodes CANN
//! dump files with it); with `--features cuda,ascend` the device crates are there (so the check can
//! see them). Runs the cargo that runs the tests, offline (the lock file and the downloaded
//! crates are all it reads).

use std::process::Command;

/// The crate names of `cargo tree -p dump-host -e normal` with `extra` arguments.
fn tree(extra: &[&str]) -> Vec<String> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--manifest-path", manifest])
        .args(["-p", "dump-host", "-e", "normal", "--prefix", "none"])
        .args(extra)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("cargo tree prints UTF-8")
        .lines()
        .filter_map(|l| l.split(' ').next())
        .map(str::to_owned)
        .collect()
}

// dump-device-ascend without its `acl` feature (no libloading, no backend) is in the default
// tree: the GE layout writes CANN dump files through its encoder. Its backend stays behind
// `ascend` (libloading is checked here).
const HEAVY: [&str; 4] = ["clap", "cudarc", "libloading", "dump-device-cuda"];

#[test]
fn default_features_pull_no_cli_or_device_crates() {
    let names = tree(&[]);
    assert!(names.iter().any(|n| n == "dump-stats"), "{names:?}");
    for heavy in HEAVY {
        assert!(
            !names.iter().any(|n| n == heavy),
            "{heavy} in dump-host's default dependency tree: {names:?}"
        );
    }
}

#[test]
fn device_features_bring_the_device_crates() {
    let names = tree(&["--features", "cuda,ascend"]);
    for device in ["cudarc", "dump-device-cuda", "dump-device-ascend"] {
        assert!(
            names.iter().any(|n| n == device),
            "{device} missing: {names:?}"
        );
    }
    assert!(!names.iter().any(|n| n == "clap"), "{names:?}");
}
