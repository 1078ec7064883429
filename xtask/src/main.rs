//! `cargo xtask`: project automation.
//!
//! - `cargo xtask bench-stats [--quick] [--device cuda]`: statistics, hashing, widening and npy
//!   benchmarks; prints a table and writes `target/bench-stats/summary.csv`.
//! - `cargo xtask test [--install]`: `cargo test --workspace`, the suites that need `protoc`
//!   when it is there, then every skipped test with what it needed and how to install it.
//! - `cargo xtask test-cross`: builds dump-core, dump-npy and dump-stats without `std` for
//!   `thumbv7em-none-eabihf` and runs their firmware known-answer tests under `qemu-system-arm`.
//! - `cargo xtask agent-qemu`: the device agent firmware in qemu streams a network's statistics
//!   to `target/agent-stream.bin`; the stream is decoded and checked, footprint and instruction
//!   counts printed. `cargo xtask wire-fuzz [N]`: the frame decoder's mutation campaign, release.
//! - `cargo xtask hardening [--faults] [--schedules] [--soak] [--valgrind] [--quick]`: the
//!   hardening campaign of issue 13 at full scale, in release builds (see `hardening`).
//! - `cargo xtask node-suite --dir DIR`: the ONNX backend node tests (made by
//!   `tools/node_suite.py DIR` from the pinned onnx wheel) through every runtime of
//!   `opdump run`, compared with the expected outputs (see `node_suite`).

mod agent;
mod bench;
mod cross;
mod hardening;
mod node_suite;
mod test;
mod toolchain;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  test [--install]                        the whole test suite; lists what could not run (and
                                          how to install it) at the end; --install first
                                          installs every prerequisite, as CI does
  bench-stats [--quick] [--device cuda]   benchmark statistics, hashes, widening, npy writing
  test-cross                              no_std build for thumbv7em + firmware tests in qemu
                                          (+ agent-qemu)
  agent-qemu                              device agent in qemu: stream, check, footprint, cost
  wire-fuzz [N]                           frame decoder mutation campaign, N mutated frames
                                          (default 1000000), release build
  hardening [--faults] [--schedules] [--soak] [--valgrind] [--quick]
                                          full fault injection, memory, descriptors, schedules +
                                          kill -9 loop, 10^5-step soak, memcheck (none: all)
  node-suite --dir DIR [--opdump PATH] [--runtimes tract,ort,candle] [--timeout S] [--jobs N]
             [--filter SUBSTRING]         the ONNX backend node tests (tools/node_suite.py DIR)
                                          through every runtime: ok / clean error / wrong /
                                          unchecked / panic / hang per runtime
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("bench-stats") => bench::run(&args[1..]),
        Some("test") => test::run(&args[1..]),
        Some("test-cross") => cross::run(&args[1..]),
        Some("agent-qemu") => agent::run(&args[1..]),
        Some("wire-fuzz") => agent::fuzz(&args[1..]),
        Some("hardening") => hardening::run_all(&args[1..]),
        Some("node-suite") => node_suite::run(&args[1..]),
        // Internal: timed by `bench-stats --only convert` (the outputs' writes alone).
        Some("write-files") => bench::write_files(&args[1..]),
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
