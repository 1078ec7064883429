//! `.npy` write throughput to the page cache, against `std::fs::write` of the same bytes.
//!
//! Cells (sizes 64 MiB and 512 MiB, `--quick`: 1 MiB):
//! - `fs_write` / `bytes`: `std::fs::write` of N bytes, the baseline;
//! - `npy_write` / `float32`: [`dump_npy::write_file`] of an N-byte f32 tensor (header + data);
//! - `npy_write_widen` / `bfloat16`: an N/2-byte bf16 tensor written widened to N bytes of `<f4`.
//!
//! For these rows `bytes` and GB/s count **file data bytes** (N), and the `vs_read` column holds
//! the ratio to the `fs_write` baseline of the same size in the same run (targets: >= 0.8 for
//! f32, >= 0.9 for widened bf16). Files live in `target/bench-stats/tmp` and are deleted before
//! every timed write (untimed) and at the end. The three variants are interleaved run by run so
//! that drift of the shared VM hits them alike; each cell is the median.

use std::{path::Path, time::Instant};

use dump_core::DType;
use dump_npy::{WriteOptions, write_file};

use super::{Opts, Row, target_dir};

/// A timed file write: the file it creates, and the write itself.
type Variant<'a> = (&'a Path, &'a mut dyn FnMut() -> Result<(), String>);

/// Median seconds per variant, run interleaved; each variant's file is removed (untimed)
/// before each of its writes.
fn interleaved(runs: usize, variants: &mut [Variant<'_>]) -> Result<Vec<f64>, String> {
    let mut secs = vec![Vec::with_capacity(runs); variants.len()];
    // One warm-up round, untimed.
    for (path, write) in variants.iter_mut() {
        remove(path)?;
        write()?;
    }
    for _ in 0..runs.max(1) {
        for (i, (path, write)) in variants.iter_mut().enumerate() {
            remove(path)?;
            let t = Instant::now();
            write()?;
            secs[i].push(t.elapsed().as_secs_f64());
        }
    }
    Ok(secs
        .into_iter()
        .map(|mut s| {
            s.sort_by(f64::total_cmp);
            s[s.len() / 2].max(1e-12)
        })
        .collect())
}

fn remove(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("removing {}: {e}", path.display())),
    }
}

/// Deterministic pseudo-random payload, like real tensor data (not a constant page).
fn payload(len: usize) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes()[..(len - v.len()).min(8)]);
    }
    v
}

/// Runs the npy write benchmarks and appends their rows.
pub fn run(opts: &Opts, rows: &mut Vec<Row>) -> Result<(), String> {
    let dir = target_dir().join("bench-stats").join("tmp");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let sizes: Vec<usize> = if opts.quick {
        vec![1 << 20]
    } else {
        vec![64 << 20, 512 << 20]
    };
    let plain_path = dir.join("plain.bin");
    let f32_path = dir.join("f32.npy");
    let bf16_path = dir.join("bf16.npy");
    for &n in &sizes {
        let f32_data = payload(n);
        let bf16_data = payload(n / 2);
        let mut plain = || -> Result<(), String> {
            std::fs::write(&plain_path, &f32_data)
                .map_err(|e| format!("writing {}: {e}", plain_path.display()))
        };
        let mut npy_f32 = || -> Result<(), String> {
            write_file(
                &f32_path,
                DType::Float32,
                &[n / 4],
                &f32_data,
                WriteOptions::default(),
            )
            .map(drop)
            .map_err(|e| format!("writing {}: {e}", f32_path.display()))
        };
        let mut npy_bf16 = || -> Result<(), String> {
            write_file(
                &bf16_path,
                DType::BFloat16,
                &[n / 4],
                &bf16_data,
                WriteOptions::default(),
            )
            .map(drop)
            .map_err(|e| format!("writing {}: {e}", bf16_path.display()))
        };
        let secs = interleaved(
            opts.runs,
            &mut [
                (&plain_path, &mut plain),
                (&f32_path, &mut npy_f32),
                (&bf16_path, &mut npy_bf16),
            ],
        )?;
        let gbps = |s: f64| n as f64 / s / 1e9;
        let base = gbps(secs[0]);
        for (kernel, dtype, s) in [
            ("fs_write", "bytes", secs[0]),
            ("npy_write", "float32", secs[1]),
            ("npy_write_widen", "bfloat16", secs[2]),
        ] {
            rows.push(Row {
                kernel: kernel.into(),
                dtype: dtype.into(),
                bytes: n,
                threads: 1,
                gbps: gbps(s),
                vs_read: Some(gbps(s) / base),
                vs_numpy: None,
            });
        }
    }
    for p in [&plain_path, &f32_path, &bf16_path] {
        remove(p)?;
    }
    Ok(())
}
