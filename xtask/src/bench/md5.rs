//! `md5` rows (`--only md5`): multi-buffer MD5 against one MD5 stream per tensor, on the set
//! of tensors one dump step hashes.
//!
//! The sets: 200 tensors (50 with `--quick`) whose sizes are drawn log-uniformly from 4 KiB to
//! 4 MiB (256 KiB with `--quick`) by a fixed-seed generator, so every run hashes the same set;
//! then 2000 small tensors (200 with `--quick`), 64 B to 16 KiB, where the per-message work
//! (padding, lane refills) weighs most; then the worst case for lanes, one 64 MiB tensor
//! (4 MiB with `--quick`) and 15 of 4 KiB: the large one runs alone most of the time.
//! Kernels (the `kernel` column; `bytes` is the whole set):
//! - `md5-1stream`: [`dump_core::hash::md5`] on each tensor in turn (the baseline);
//! - `md5mb-portable`, `md5mb-avx2`, `md5mb-avx512`: [`md5_many_with`] on the whole set with
//!   that backend (backends this CPU lacks are skipped);
//! - `ms_sha1-1stream`: MindSpore's `hash:sha1` of each tensor as bytes (sha1 0.11; for
//!   tensors above 20480 bytes it is the hash of the slices' hashes, 0.2% more work);
//! - `sha1-1stream`: plain SHA-1 of each tensor (sha1 0.11, SHA-NI where the CPU has it), the
//!   baseline of
//! - `sha1mb-portable`, `sha1mb-avx2`, `sha1mb-avx512`: [`sha1_many_with`] on the whole set;
//! - `crc32-1stream`: zlib's CRC-32 of each tensor (msprobe's `summary_mode: md5`);
//! - `xor64-1stream`: msprobe's `summary_mode: xor` checksum of each tensor
//!   ([`dump_core::hash::xor64`]), also reported against `read`;
//! - `read`: the memory-read baseline (a wrapping sum of each tensor's `u64`s in 8 lanes).
//!
//! Timing: one thread; a round hashes the whole set once with every kernel in turn, and each
//! kernel's figure is the median over the rounds of the calling thread's CPU time (so load
//! from other jobs on the shared machine does not count), which makes the ratios to
//! `md5-1stream` come from the same rounds. Every multi-buffer digest is checked against the
//! baseline's.

use super::{
    Opts, Row,
    stats::{cpu_now, read_u64},
};
use dump_core::{
    DType,
    hash::{MultiBackend, crc32::crc32, md5, md5_many_with, ms_sha1, sha1_many_with, xor64::xor64},
};
use std::hint::black_box;

/// Sizes (bytes) of a benchmark set: `n` draws, log-uniform in `[min, max]`.
fn sizes(n: usize, min: usize, max: usize) -> Vec<usize> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let (lo, hi) = ((min as f64).ln(), (max as f64).ln());
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            ((lo + u * (hi - lo)).exp() as usize).clamp(min, max)
        })
        .collect()
}

/// Pushes the `md5` rows (see the module docs) and prints the speed-up tables.
pub fn run(opts: &Opts, rows: &mut Vec<Row>) {
    let (big, mid, small) = if opts.quick {
        (4 << 20, (50, 256 << 10), 200)
    } else {
        (64 << 20, (200, 4 << 20), 2000)
    };
    let set = |n, min, max| {
        (
            sizes(n, min, max),
            format!("{min} B..{} KiB, log-uniform, fixed seed", max >> 10),
        )
    };
    for (sizes, what) in [
        set(mid.0, 4 << 10, mid.1),
        set(small, 64, 16 << 10),
        (
            [big].into_iter().chain([4096; 15]).collect(),
            format!("one of {} MiB and 15 of 4 KiB", big >> 20),
        ),
    ] {
        run_set(opts, rows, &sizes, &what);
    }
}

/// One set of tensors of the given sizes.
fn run_set(opts: &Opts, rows: &mut Vec<Row>, sizes: &[usize], what: &str) {
    let rounds = opts.runs.max(5);
    let n = sizes.len();
    let total: usize = sizes.iter().sum();
    // Deterministic bytes for every tensor (one buffer, tensors are disjoint slices of it).
    let mut buf = vec![0u8; total];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for b in buf.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let mut msgs: Vec<&[u8]> = Vec::with_capacity(n);
    let mut at = 0;
    for &s in sizes {
        msgs.push(&buf[at..at + s]);
        at += s;
    }
    let backends: Vec<MultiBackend> = [
        MultiBackend::Portable,
        MultiBackend::Avx2,
        MultiBackend::Avx512,
    ]
    .into_iter()
    .filter(|b| b.available())
    .collect();
    println!(
        "bench-stats md5: {n} tensors, {total} bytes ({what}), {rounds} interleaved rounds, backends {:?}",
        backends.iter().map(|b| b.name()).collect::<Vec<_>>()
    );
    let want: Vec<[u8; 16]> = msgs.iter().map(|m| md5(m)).collect();
    // Kernel name and its closure; all see the same rounds.
    let mut kernels: Vec<(String, Box<dyn FnMut() + '_>)> = Vec::new();
    let msgs = &msgs;
    kernels.push((
        "md5-1stream".into(),
        Box::new(move || {
            for m in msgs {
                black_box(md5(black_box(m)));
            }
        }),
    ));
    for &b in &backends {
        let want = &want;
        let mut out = vec![[0u8; 16]; n];
        md5_many_with(b, msgs, &mut out).expect("output sized");
        assert!(out == *want, "md5_many {} differs", b.name());
        kernels.push((
            format!("md5mb-{}", b.name()),
            Box::new(move || {
                md5_many_with(b, black_box(msgs), &mut out).expect("output sized");
                black_box(&out);
            }),
        ));
    }
    let sha1_want: Vec<[u8; 20]> = msgs
        .iter()
        .map(|m| {
            use sha1::Digest as _;
            sha1::Sha1::digest(m).into()
        })
        .collect();
    kernels.push((
        "sha1-1stream".into(),
        Box::new(move || {
            use sha1::Digest as _;
            for m in msgs {
                black_box(sha1::Sha1::digest(black_box(m)));
            }
        }),
    ));
    for &b in &backends {
        let want = &sha1_want;
        let mut out = vec![[0u8; 20]; n];
        sha1_many_with(b, msgs, &mut out).expect("output sized");
        assert!(out == *want, "sha1_many {} differs", b.name());
        kernels.push((
            format!("sha1mb-{}", b.name()),
            Box::new(move || {
                sha1_many_with(b, black_box(msgs), &mut out).expect("output sized");
                black_box(&out);
            }),
        ));
    }
    kernels.push((
        "ms_sha1-1stream".into(),
        Box::new(move || {
            for m in msgs {
                black_box(ms_sha1(DType::UInt8, black_box(m), m.len()));
            }
        }),
    ));
    for (name, f) in [
        (
            "crc32-1stream",
            (|m| u64::from(crc32(m))) as fn(&[u8]) -> u64,
        ),
        ("xor64-1stream", xor64),
        ("read", read_u64),
    ] {
        kernels.push((
            name.into(),
            Box::new(move || {
                for m in msgs {
                    black_box(f(black_box(m)));
                }
            }),
        ));
    }
    // Warm-up round, then the timed interleaved rounds.
    for (_, f) in kernels.iter_mut() {
        f();
    }
    let mut secs = vec![Vec::with_capacity(rounds); kernels.len()];
    for _ in 0..rounds {
        for (k, (_, f)) in kernels.iter_mut().enumerate() {
            let t = cpu_now();
            f();
            secs[k].push(cpu_now() - t);
        }
    }
    let gbps: Vec<f64> = secs
        .iter_mut()
        .map(|s| {
            s.sort_by(f64::total_cmp);
            total as f64 / s[s.len() / 2].max(1e-12) / 1e9
        })
        .collect();
    let read = kernels
        .iter()
        .position(|(name, _)| name == "read")
        .map(|i| gbps[i]);
    println!(
        "{:<18} {:>9} {:>12} {:>9}",
        "kernel", "GB/s", "vs 1-stream", "vs read"
    );
    for ((name, _), g) in kernels.iter().zip(&gbps) {
        let vs_read = read.map(|r| g / r.max(1e-12));
        println!(
            "{name:<18} {g:>9.3} {:>11.2}x {:>8.2}x",
            g / gbps[0],
            vs_read.unwrap_or(f64::NAN)
        );
        rows.push(Row {
            kernel: name.clone(),
            dtype: "bytes".into(),
            bytes: total,
            threads: 1,
            gbps: *g,
            vs_read,
            vs_numpy: None,
        });
    }
}
