//! `cargo xtask`: project automation.
//!
//! - `cargo xtask bench-stats [--quick] [--device cuda]`: statistics, hashing, widening and npy
//!   benchmarks; prints a table and writes `target/bench-stats/summary.csv`.
//! - `cargo xtask test-cross`: builds dump-core, dump-npy and dump-stats without `std` for
//!   `thumbv7em-none-eabihf` and runs their firmware known-answer tests under `qemu-system-arm`.
//! - `cargo xtask hardening [--soak]`: the full fault-injection, schedule, memory and
//!   descriptor campaign of issue 13 in release builds (`--soak`: plus 10^5 soak steps).

mod bench;
mod cross;
mod hardening;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  bench-stats [--quick] [--device cuda]   benchmark statistics, hashes, widening, npy writing
  test-cross                              no_std build for thumbv7em + firmware tests in qemu
  hardening [--soak]                      full fault injection, schedules, memory, descriptors
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("bench-stats") => bench::run(&args[1..]),
        Some("test-cross") => cross::run(&args[1..]),
        Some("hardening") => hardening::run_all(&args[1..]),
        Some("-h" | "--help") | None => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => Err(format!("unknown command `{other}`\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
