//! `stats` rows: dump-core's one-pass statistics kernels against their baselines, for f32, f16,
//! bf16 and int32 at every benchmark size, one thread.
//!
//! Kernels (the `kernel` column):
//! - `read`: a plain memory-read baseline (wrapping sum of `u64`s) over the same buffer; every
//!   row's `vs_read` is relative to the `read` row of its size;
//! - `stats`: [`dump_core::stats::summarize`] (runtime-dispatched backend);
//! - `stats+md5`: statistics and MD5 fused per 256 KiB chunk ([`summarize_fused`]);
//! - `md5`: MD5 alone over the same bytes;
//! - `widen`: bf16→f32 / f16→f32 into a caller buffer ([`dump_core::widen`]);
//! - `naive`: the scalar reference ([`summarize_reference`]): one element at a time in `f64`,
//!   with branches;
//! - `numpy`: numpy's all-stats (np.max, np.min, np.mean, np.linalg.norm and the
//!   isnan/isinf/==0/<0/>0 counts), timed inside one `python3` process on data of the same
//!   dtype and sizes; `vs_numpy` of every row is relative to it.
//!
//! One 512 MiB buffer per dtype (deterministic pseudo-random data, no NaN) is allocated once
//! and sliced for the smaller sizes.

use super::{Opts, Row, median_gbps, median_gbps_batched};
use dump_core::{
    DType,
    hash::Md5Stream,
    stats::{self, summarize, summarize_fused, summarize_reference},
    widen,
};
use std::{collections::HashMap, hint::black_box, process::Command};

/// A widening kernel of `dump_core::widen`.
type Widen = fn(&[u8], &mut [u8]) -> Result<usize, dump_core::Error>;

const DTYPES: [DType; 4] = [
    DType::Float32,
    DType::Float16,
    DType::BFloat16,
    DType::Int32,
];
/// Runs of the slow baselines (naive loop, numpy): the minimum the bench promises.
const SLOW_RUNS: usize = 5;

/// Deterministic data of `dtype` (an LCG; floats in [-1000, 1000), ints in ±2^20, no NaN).
fn fill(dtype: DType, bytes: usize) -> Vec<u8> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2000.0
    };
    let mut out = Vec::with_capacity(bytes);
    while out.len() < bytes {
        let v = next();
        match dtype {
            DType::Float32 => out.extend_from_slice(&v.to_le_bytes()),
            // f16: sign, a normal exponent (values 2^-14..2^10) and 10 mantissa bits.
            DType::Float16 => {
                let b = v.to_bits();
                let h = (b >> 16 & 0x8000) | ((b >> 10) % 25 + 1) << 10 | (b & 0x3ff);
                out.extend_from_slice(&(h as u16).to_le_bytes());
            }
            // bf16: the top half of a finite f32 (never NaN).
            DType::BFloat16 => out.extend_from_slice(&((v.to_bits() >> 16) as u16).to_le_bytes()),
            _ => out.extend_from_slice(&((v * 1024.0) as i32).to_le_bytes()),
        }
    }
    out.truncate(bytes);
    out
}

/// The memory-read baseline: a wrapping sum of the buffer's `u64`s in 8 independent lanes.
fn read_u64(data: &[u8]) -> u64 {
    let mut lanes = [0u64; 8];
    for c in data.chunks_exact(64) {
        for (i, l) in lanes.iter_mut().enumerate() {
            let w: [u8; 8] = std::array::from_fn(|j| c[i * 8 + j]);
            *l = l.wrapping_add(u64::from_le_bytes(w));
        }
    }
    lanes.iter().fold(0, |a, &b| a.wrapping_add(b))
}

/// Median GB/s, batching tiny inputs so that one timed run is long enough to measure.
fn gbps(bytes: usize, runs: usize, f: impl FnMut()) -> f64 {
    if bytes < 1 << 20 {
        median_gbps_batched(bytes, runs, f)
    } else {
        median_gbps(bytes, runs, f)
    }
}

/// [`gbps`] for the slow baselines: no warm-up run from 64 MiB on (a run takes seconds there,
/// and the buffer is already warm from the kernels measured before).
fn slow_gbps(bytes: usize, mut f: impl FnMut()) -> f64 {
    if bytes < 64 << 20 {
        return gbps(bytes, SLOW_RUNS, f);
    }
    let mut secs: Vec<f64> = (0..SLOW_RUNS)
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    secs.sort_by(f64::total_cmp);
    bytes as f64 / secs[secs.len() / 2].max(1e-12) / 1e9
}

const NUMPY: &str = r#"
import sys, time
import numpy as np
dt, runs, sizes = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")]
if dt == "bfloat16":
    try:
        import ml_dtypes
    except ImportError:
        print("note: ml_dtypes is not importable; no numpy bfloat16 baseline")
        sys.exit(0)
    npdt = ml_dtypes.bfloat16
else:
    npdt = {"float32": np.float32, "float16": np.float16, "int32": np.int32}[dt]
item = np.dtype(npdt).itemsize
n = max(sizes) // item
rng = np.random.default_rng(1)
if dt == "int32":
    a = rng.integers(-(1 << 20), 1 << 20, n, dtype=np.int32)
else:
    a = ((rng.random(n, dtype=np.float32) - 0.5) * 2000).astype(npdt)
def stats(x):
    return (np.max(x), np.min(x), np.mean(x), np.linalg.norm(x),
            np.count_nonzero(np.isnan(x)), np.count_nonzero(np.isinf(x)),
            np.count_nonzero(x == 0), np.count_nonzero(x < 0), np.count_nonzero(x > 0))
for size in sizes:
    x = a[: size // item]
    reps = 1
    if size < (64 << 20):  # calibrate (and warm up) only where a call is cheap
        t = time.perf_counter(); stats(x); one = time.perf_counter() - t
        reps = max(1, min(10000, int(2e-3 / max(one, 1e-9))))
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(reps):
            stats(x)
        times.append((time.perf_counter() - t) / reps)
    times.sort()
    print(size, size / times[len(times) // 2] / 1e9)
"#;

/// numpy's all-stats GB/s per size for `dtype`, or `None` with a printed note.
fn numpy(dtype: DType, sizes: &[usize]) -> Option<HashMap<usize, f64>> {
    let list: Vec<String> = sizes.iter().map(usize::to_string).collect();
    let out = Command::new("python3")
        .args(["-c", NUMPY, dtype.name(), &SLOW_RUNS.to_string()])
        .arg(list.join(","))
        // The machine may tune OpenBLAS for other jobs; numpy gets its defaults.
        .env_remove("OPENBLAS_CORETYPE")
        .env_remove("OPENBLAS_L2_SIZE")
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let last = err.lines().last().unwrap_or("no error output");
            println!("note: numpy baseline for {dtype} unavailable (python3: {last})");
            return None;
        }
        Err(e) => {
            println!("note: numpy baseline unavailable (cannot run python3: {e})");
            return None;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut map = HashMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        match (
            it.next().and_then(|s| s.parse().ok()),
            it.next().and_then(|s| s.parse().ok()),
        ) {
            (Some(size), Some(g)) => {
                map.insert(size, g);
            }
            _ => println!("{line}"),
        }
    }
    (!map.is_empty()).then_some(map)
}

/// Pushes the `stats` rows (see the module docs).
pub fn run(opts: &Opts, rows: &mut Vec<Row>) {
    let sizes = opts.sizes();
    let max = *sizes.iter().max().unwrap_or(&0);
    println!(
        "bench-stats: statistics backend {}, sizes {:?}, {} runs per cell",
        stats::Backend::detect().name(),
        sizes,
        opts.runs
    );
    let mut read = HashMap::new();
    let mut widened = vec![0u8; max * 2];
    for (k, dtype) in DTYPES.into_iter().enumerate() {
        let buf = fill(dtype, max);
        let np = numpy(dtype, &sizes);
        let esize = dtype.size().unwrap_or(1);
        for &bytes in &sizes {
            let data = &buf[..bytes];
            let elems = bytes / esize;
            if k == 0 {
                let g = gbps(bytes, opts.runs, || {
                    black_box(read_u64(black_box(data)));
                });
                read.insert(bytes, g);
                rows.push(row("read", "bytes", bytes, g, &read, None));
            }
            let np_g = np.as_ref().and_then(|m| m.get(&bytes).copied());
            let push = |rows: &mut Vec<Row>, kernel: &str, g: f64| {
                rows.push(row(kernel, dtype.name(), bytes, g, &read, np_g));
            };
            let g = gbps(bytes, opts.runs, || {
                black_box(summarize(dtype, black_box(data), elems).expect("valid tensor"));
            });
            push(rows, "stats", g);
            let g = gbps(bytes, opts.runs, || {
                let mut md5 = Md5Stream::new();
                let s = summarize_fused(dtype, black_box(data), elems, |c| md5.update(c));
                black_box((s.expect("valid tensor"), md5.finish()));
            });
            push(rows, "stats+md5", g);
            let g = gbps(bytes, opts.runs, || {
                let mut md5 = Md5Stream::new();
                md5.update(black_box(data));
                black_box(md5.finish());
            });
            push(rows, "md5", g);
            let widen_fn: Option<Widen> = match dtype {
                DType::BFloat16 => Some(widen::bf16_to_f32),
                DType::Float16 => Some(widen::f16_to_f32),
                _ => None,
            };
            if let Some(w) = widen_fn {
                let dst = &mut widened[..bytes * 2];
                let g = gbps(bytes, opts.runs, || {
                    black_box(w(black_box(data), dst).expect("buffer sized"));
                });
                push(rows, "widen", g);
            }
            let g = slow_gbps(bytes, || {
                black_box(summarize_reference(dtype, black_box(data), elems).expect("valid"));
            });
            push(rows, "naive", g);
            if let Some(g) = np_g {
                push(rows, "numpy", g);
            }
        }
    }
}

fn row(
    kernel: &str,
    dtype: &str,
    bytes: usize,
    gbps: f64,
    read: &HashMap<usize, f64>,
    numpy: Option<f64>,
) -> Row {
    Row {
        kernel: kernel.into(),
        dtype: dtype.into(),
        bytes,
        threads: 1,
        gbps,
        vs_read: read.get(&bytes).map(|r| gbps / r),
        vs_numpy: numpy.filter(|_| kernel != "numpy").map(|n| gbps / n),
    }
}
