//! A child process for the hardening tests (`tests/tests/writer_hardening.rs`, `cargo xtask
//! hardening`), run so that the parent can give it its own limits and read its peak memory:
//!
//! - `hardening_child fds ROOT STEPS`: dumps STEPS steps of one small kernel (plus one whose
//!   file name needs `mapping.csv`); prints `fds START END` (open descriptors after the Dumper
//!   started and before it closes) and `report FILES BYTES ROWS`.
//! - `hardening_child rss ROOT BIG SMALL BUDGET_MB`: dumps BIG tensors of 7 MiB, then SMALL of
//!   64 KiB, with the default writer and a BUDGET_MB memory budget; prints `rss BASE_KIB
//!   PEAK_KIB HELD_KIB` (resident memory before dumping, with the source tensors touched, the
//!   peak, and the most the writer's budget held).
//!
//! Exits 1 with the error when the dump fails.

use std::process::ExitCode;

use dump_core::DType;
use dump_host::{DumpOptions, Dumper, TensorRef, writer::WriterConfig};
use opdump_tests::config::{config, no_env};
use serde_json::json;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// A field of `/proc/self/status` in KiB.
fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn fds(root: &str, steps: u64) -> Result<(), String> {
    let cfg = config(root.as_ref(), json!({"saved_data": "full"}), json!({}));
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)
        .map_err(|e| e.to_string())?;
    let long = format!("Default/{}/Add-op1", "x".repeat(300));
    d.begin_graph(0, &["Default/Add-op0", &long])
        .map_err(|e| e.to_string())?;
    let v: Vec<u8> = [1.0f32, 2.0, -3.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let start = open_fds();
    for _ in 0..steps {
        let step = d.begin_step();
        for name in ["Default/Add-op0", long.as_str()] {
            if let Some(k) = step.kernel("Add", name) {
                k.output(0, TensorRef::host(DType::Float32, &[3], &v))
                    .map_err(|e| e.to_string())?;
            }
        }
        step.finish().map_err(|e| e.to_string())?;
    }
    d.flush().map_err(|e| e.to_string())?;
    let end = open_fds();
    let r = d.close().map_err(|e| e.to_string())?;
    println!("fds {start} {end}");
    println!("report {} {} {}", r.files, r.bytes, r.rows);
    Ok(())
}

fn rss(root: &str, big: usize, small: usize, budget_mb: usize) -> Result<(), String> {
    let cfg = config(root.as_ref(), json!({"saved_data": "tensor"}), json!({}));
    let opts = DumpOptions {
        writer: WriterConfig {
            budget_bytes: budget_mb << 20,
            ..WriterConfig::default()
        },
        ..DumpOptions::default()
    };
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(opts.clone())
        .open_json(cfg)
        .map_err(|e| e.to_string())?;
    let seven: Vec<u8> = (0..7usize << 20).map(|i| (i % 251) as u8).collect();
    let sixty_four: Vec<u8> = (0..64usize << 10).map(|i| (i % 241) as u8).collect();
    let base = status_kib("VmRSS:");
    let step = d.begin_step();
    for (count, bytes) in [(big, &seven), (small, &sixty_four)] {
        for i in 0..count {
            let name = format!("Default/Big-op{}-{i}", bytes.len());
            if let Some(k) = step.kernel("Big", &name) {
                k.output(0, TensorRef::host(DType::UInt8, &[bytes.len()], bytes))
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    step.finish().map_err(|e| e.to_string())?;
    d.flush().map_err(|e| e.to_string())?;
    let peak = status_kib("VmHWM:");
    let held = d.writer().map_or(0, |w| w.budget().peak()) >> 10;
    d.close().map_err(|e| e.to_string())?;
    println!("rss {base} {peak} {held}");
    Ok(())
}

fn main() -> ExitCode {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize| a.get(i).and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
    let r = match (a.first().map(String::as_str), a.get(1)) {
        (Some("fds"), Some(root)) => fds(root, num(2) as u64),
        (Some("rss"), Some(root)) => rss(root, num(2), num(3), num(4)),
        _ => Err("usage: hardening_child fds ROOT STEPS | rss ROOT BIG SMALL BUDGET_MB".into()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hardening_child: {e}");
            ExitCode::FAILURE
        }
    }
}
