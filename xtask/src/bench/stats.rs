//! `stats` rows: dump-core's one-pass statistics kernels against their baselines, for f32, f16,
//! bf16 and int32 at every benchmark size, one thread.
//!
//! Kernels (the `kernel` column):
//! - `read`: a plain memory-read baseline (wrapping sum of `u64`s) over the same buffer, timed
//!   in the same interleaved rounds as the `stats` rows of its dtype (the `dtype` column names
//!   the buffer); every row's `vs_read` is relative to the `read` row of its dtype and size;
//! - `stats`: [`dump_core::stats::summarize`] (runtime-dispatched backend, named in the
//!   header line);
//! - `stats-portable`, `stats-avx2`, `stats-avx512`: [`summarize_with`] each backend this CPU
//!   has ([`Backend::available`]), in the same rounds as `read` and `stats`: one round calls
//!   every kernel in turn, so that every median sees the same load on this shared machine;
//! - `stats+md5`: statistics and MD5 fused per 256 KiB chunk ([`summarize_fused`]);
//! - `md5`: MD5 alone over the same bytes;
//! - `widen`: bf16→f32 / f16→f32 into a caller buffer ([`dump_core::widen`]);
//! - `naive`: the scalar reference ([`summarize_reference`]): one element at a time in `f64`,
//!   with branches;
//! - `numpy`: numpy's all-stats (np.max, np.min, np.mean, np.linalg.norm and the
//!   isnan/isinf/==0/<0/>0 counts), timed inside one `python3` process on data of the same
//!   dtype and sizes; `vs_numpy` of every row is relative to it.
//!
//! Every cell is the median of at least 5 timed runs of the calling thread's CPU time (see
//! [`cpu_now`]; numpy uses `time.process_time()`), so the shared machine's other jobs do not
//! distort it. `stats+md5` and `md5` are timed alternately so their ratio is fair. The header
//! and footer lines give the UTC time, the load average and the CPU (model, family/model,
//! AVX-512 flags), to be quoted next to the figures.
//!
//! One 512 MiB buffer per dtype (deterministic pseudo-random data, no NaN) is allocated once
//! and sliced for the smaller sizes.

use super::{Opts, Row};
use dump_core::{
    DType,
    hash::Md5Stream,
    stats::{Backend, summarize, summarize_fused, summarize_reference, summarize_with},
    widen,
};
use std::{collections::HashMap, hint::black_box, process::Command, time::Instant};

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
pub(super) fn read_u64(data: &[u8]) -> u64 {
    let mut lanes = [0u64; 8];
    for c in data.chunks_exact(64) {
        for (i, l) in lanes.iter_mut().enumerate() {
            let w: [u8; 8] = std::array::from_fn(|j| c[i * 8 + j]);
            *l = l.wrapping_add(u64::from_le_bytes(w));
        }
    }
    lanes.iter().fold(0, |a, &b| a.wrapping_add(b))
}

/// Seconds of CPU time of the calling thread (Linux `CLOCK_THREAD_CPUTIME_ID`).
///
/// The bench machine is a 2-core VM shared with builds and other jobs: wall-clock medians of
/// a single-threaded kernel then measure the scheduler, not the kernel. Thread CPU time does
/// not count the time the thread waits for a core, so cells stay comparable under load (on a
/// quiet machine both clocks agree). Other platforms fall back to wall time.
#[cfg(target_os = "linux")]
pub(super) fn cpu_now() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec (two 64-bit fields on 64-bit Linux, the only
    // layout this xtask targets), and clock_gettime writes nothing else.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return wall_now();
    }
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}

#[cfg(not(target_os = "linux"))]
pub(super) fn cpu_now() -> f64 {
    wall_now()
}

/// Seconds since the first call (the fallback clock).
fn wall_now() -> f64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// Calls `f` once (the warm-up) and returns how many calls make a timed run of about 2 ms.
fn calibrate(f: &mut dyn FnMut()) -> usize {
    let t = cpu_now();
    f();
    let one = (cpu_now() - t).max(1e-9);
    ((2e-3 / one) as usize).clamp(1, 100_000)
}

/// CPU seconds per call of `f`, averaged over `reps` calls.
fn per_call(reps: usize, f: &mut dyn FnMut()) -> f64 {
    let t = cpu_now();
    for _ in 0..reps {
        f();
    }
    (cpu_now() - t) / reps as f64
}

fn to_gbps(bytes: usize, mut secs: Vec<f64>) -> f64 {
    secs.sort_by(f64::total_cmp);
    bytes as f64 / secs[secs.len() / 2].max(1e-12) / 1e9
}

/// Median GB/s of `f` over `runs` timed runs after a warm-up (tiny inputs batched).
fn gbps(bytes: usize, runs: usize, mut f: impl FnMut()) -> f64 {
    let reps = calibrate(&mut f);
    to_gbps(
        bytes,
        (0..runs.max(1)).map(|_| per_call(reps, &mut f)).collect(),
    )
}

/// [`gbps`] for the slow baselines: no warm-up run from 64 MiB on (a run takes seconds there,
/// and the buffer is already warm from the kernels measured before).
fn slow_gbps(bytes: usize, mut f: impl FnMut()) -> f64 {
    if bytes < 64 << 20 {
        return gbps(bytes, SLOW_RUNS, f);
    }
    to_gbps(bytes, (0..SLOW_RUNS).map(|_| per_call(1, &mut f)).collect())
}

/// Median GB/s of `f` and of `g`, timed alternately run by run.
fn paired_gbps(bytes: usize, runs: usize, mut f: impl FnMut(), mut g: impl FnMut()) -> (f64, f64) {
    let reps = calibrate(&mut f);
    calibrate(&mut g);
    let (mut tf, mut tg) = (Vec::new(), Vec::new());
    for _ in 0..runs.max(1) {
        tf.push(per_call(reps, &mut f));
        tg.push(per_call(reps, &mut g));
    }
    (to_gbps(bytes, tf), to_gbps(bytes, tg))
}

/// Median GB/s of each of `kernels`, timed in `runs` interleaved rounds: each round times
/// every kernel in turn (each call repeated to about 2 ms), so that all of them see the same
/// load.
fn rounds_gbps(bytes: usize, runs: usize, kernels: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    let reps: Vec<usize> = kernels.iter_mut().map(|f| calibrate(*f)).collect();
    let mut times = vec![Vec::new(); kernels.len()];
    for _ in 0..runs.max(1) {
        for ((f, &r), t) in kernels.iter_mut().zip(&reps).zip(&mut times) {
            t.push(per_call(r, *f));
        }
    }
    times.into_iter().map(|t| to_gbps(bytes, t)).collect()
}

/// One line for the report: UTC time, load average and the CPU (Linux; `?` elsewhere).
fn machine_line() -> String {
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M:%S UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "?".into());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into());
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
            .and_then(|l| l.split_once(':'))
            .map_or("?", |(_, v)| v.trim())
    };
    let avx512: Vec<&str> = field("flags")
        .split_whitespace()
        .filter(|f| f.starts_with("avx512"))
        .collect();
    format!(
        "{date}, load average {load}, CPU {} (family {} model {}), {}",
        field("model name"),
        field("cpu family"),
        field("model"),
        if avx512.is_empty() {
            "no AVX-512".to_owned()
        } else {
            avx512.join(" ")
        }
    )
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
        t = time.process_time(); stats(x); one = time.process_time() - t
        reps = max(1, min(10000, int(2e-3 / max(one, 1e-9))))
    times = []
    for _ in range(runs):
        t = time.process_time()
        for _ in range(reps):
            stats(x)
        times.append((time.process_time() - t) / reps)
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
    let backends: Vec<Backend> = Backend::ALL.into_iter().filter(|b| b.available()).collect();
    println!(
        "bench-stats: statistics backend {} (available: {}), sizes {:?}, {} runs per cell",
        Backend::detect().name(),
        backends
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(", "),
        sizes,
        opts.runs
    );
    println!("bench-stats: start {}", machine_line());
    let mut widened = vec![0u8; max * 2];
    for dtype in DTYPES {
        let buf = fill(dtype, max);
        let np = numpy(dtype, &sizes);
        let esize = dtype.size().unwrap_or(1);
        let mut read = HashMap::new();
        for &bytes in &sizes {
            let data = &buf[..bytes];
            let elems = bytes / esize;
            // The memory read, the dispatched statistics and every backend's, in the same
            // interleaved rounds.
            let mut read_fn = || {
                black_box(read_u64(black_box(data)));
            };
            let mut stats_fn = || {
                black_box(summarize(dtype, black_box(data), elems).expect("valid tensor"));
            };
            let mut each: Vec<Box<dyn FnMut()>> = backends
                .iter()
                .map(|&b| {
                    Box::new(move || {
                        let s = summarize_with(b, dtype, black_box(data), elems);
                        black_box(s.expect("valid tensor"));
                    }) as Box<dyn FnMut()>
                })
                .collect();
            let mut kernels: Vec<&mut dyn FnMut()> = vec![&mut read_fn, &mut stats_fn];
            kernels.extend(each.iter_mut().map(|f| &mut **f as &mut dyn FnMut()));
            let g = rounds_gbps(bytes, opts.runs, &mut kernels);
            read.insert(bytes, g[0]);
            let np_g = np.as_ref().and_then(|m| m.get(&bytes).copied());
            let push = |rows: &mut Vec<Row>, kernel: &str, g: f64| {
                rows.push(row(kernel, dtype.name(), bytes, g, &read, np_g));
            };
            push(rows, "read", g[0]);
            push(rows, "stats", g[1]);
            for (b, &g) in backends.iter().zip(&g[2..]) {
                push(rows, &format!("stats-{}", b.name()), g);
            }
            // Fused and alone alternate run by run, so that both medians see the same load
            // on this shared machine and their ratio is meaningful.
            let (fused, alone) = paired_gbps(
                bytes,
                opts.runs,
                || {
                    let mut md5 = Md5Stream::new();
                    let s = summarize_fused(dtype, black_box(data), elems, |c| md5.update(c));
                    black_box((s.expect("valid tensor"), md5.finish()));
                },
                || {
                    let mut md5 = Md5Stream::new();
                    md5.update(black_box(data));
                    black_box(md5.finish());
                },
            );
            push(rows, "stats+md5", fused);
            push(rows, "md5", alone);
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
    println!("bench-stats: end {}", machine_line());
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
