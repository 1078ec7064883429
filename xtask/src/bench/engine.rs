//! `engine` rows: dump-stats' host engine on f32 tensors, with 1 and 2 threads, statistics only
//! (`engine`), statistics + MD5 of one tensor (`engine+md5`) and a batch of 16 tensors with MD5
//! through `summarize_many` (`engine-many+md5`, where the two cores hash different tensors).
//!
//! `read` rows are the plain memory-read baseline with the same thread count (scoped threads,
//! each summing its half as u64s, spawn cost included); `vs_read` of an `engine` row is relative
//! to the `read` row of the same size and thread count, which shows the memory ceiling.
//!
//! The 2-thread single-tensor rows force the split (threshold 0), so the small sizes show where
//! splitting starts to pay; that is how `DEFAULT_SPLIT_THRESHOLD` was chosen.

use super::{Opts, Row, median_gbps};
use dump_core::DType;
use dump_stats::{
    Hashes,
    engine::{Engine, TensorRef},
};
use std::hint::black_box;

/// Deterministic f32 data (an LCG mapped to [-1000, 1000)): cheap to make at 512 MiB.
fn f32_data(bytes: usize) -> Vec<u8> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut out = Vec::with_capacity(bytes);
    for _ in 0..bytes / 4 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let v = ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2000.0;
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Sum of `data` as u64 words, split over `threads` scoped threads.
fn read(data: &[u8], threads: usize) -> u64 {
    let part = data.len().div_ceil(threads).next_multiple_of(8);
    let sum = |c: &[u8]| -> u64 {
        c.chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
            .fold(0u64, u64::wrapping_add)
    };
    if threads == 1 {
        return sum(data);
    }
    std::thread::scope(|s| {
        let hs: Vec<_> = data.chunks(part).map(|c| s.spawn(move || sum(c))).collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or(0))
            .fold(0u64, u64::wrapping_add)
    })
}

fn row(kernel: &str, bytes: usize, threads: usize, gbps: f64) -> Row {
    Row {
        kernel: kernel.into(),
        dtype: "float32".into(),
        bytes,
        threads,
        gbps,
        vs_read: None,
        vs_numpy: None,
    }
}

/// Pushes the engine rows.
pub fn run(opts: &Opts, rows: &mut Vec<Row>) {
    let sizes: &[usize] = if opts.quick {
        &[1 << 20]
    } else {
        &[1 << 20, 2 << 20, 4 << 20, 64 << 20, 512 << 20]
    };
    let md5 = Hashes {
        md5: true,
        sha1: false,
    };
    for &bytes in sizes {
        let data = f32_data(bytes);
        let t = TensorRef::new(DType::Float32, &data, bytes / 4);
        let mut read_gbps = [0.0; 3];
        for threads in [1, 2] {
            let gbps = median_gbps(bytes, opts.runs, || {
                black_box(read(black_box(&data), threads));
            });
            read_gbps[threads] = gbps;
            rows.push(row("read", bytes, threads, gbps));
        }
        for (kernel, hashes) in [("engine", Hashes::NONE), ("engine+md5", md5)] {
            // MD5 rows only at the headline sizes: they are slow (about 0.75 GB/s) and their
            // 2-thread row cannot scale (one digest is serial).
            if hashes.md5 && !opts.quick && bytes < 64 << 20 {
                continue;
            }
            for threads in [1, 2] {
                let e = Engine::new(threads).with_split_threshold(0);
                let gbps = median_gbps(bytes, opts.runs, || {
                    black_box(e.summarize(black_box(t), hashes).expect("valid tensor"));
                });
                let mut r = row(kernel, bytes, threads, gbps);
                r.vs_read = Some(gbps / read_gbps[threads]);
                rows.push(r);
            }
        }
    }
    // Many tensors in flight: 16 tensors of 4 MiB (1 MiB with --quick), each with MD5.
    let each = if opts.quick { 1 << 20 } else { 4 << 20 };
    let data = f32_data(each);
    let jobs: Vec<_> = (0..16)
        .map(|_| (TensorRef::new(DType::Float32, &data, each / 4), md5))
        .collect();
    for threads in [1, 2] {
        let e = Engine::new(threads);
        let gbps = median_gbps(each * jobs.len(), opts.runs, || {
            black_box(e.summarize_many(black_box(&jobs)));
        });
        rows.push(row("engine-many+md5", each * jobs.len(), threads, gbps));
    }
}
