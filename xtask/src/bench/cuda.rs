//! `cuda` rows (`cargo xtask bench-stats --device cuda`): dump-device-cuda's fused statistics
//! kernel on GPU 0, against device-to-device copy bandwidth measured in the same run.
//!
//! Rows, for every dtype the kernels support and sizes up to 1 GiB:
//! - `cuda-d2d-copy`: a `cuMemcpyDtoD` of the tensor, as memory bandwidth is usually quoted:
//!   bytes read plus bytes written, over time. This is the device's own memcpy bandwidth.
//! - `cuda-stats-high` and `cuda-stats-low` (`CudaStats::summarize`: one kernel launch, the
//!   block partials back to the host and their combination, i.e. everything a caller waits
//!   for): tensor bytes (each read once) over time. Their `vs_read` column is the ratio to
//!   `cuda-d2d-copy` of the same size (target >= 0.8 on large tensors).
//!
//! and for float32 tensors of 64 MiB and 1 GiB, the tensor dump to a file:
//! - `cuda-dtoh+write`: a plain whole-tensor copy to pageable host memory, then `fs::write`;
//! - `cuda-dump-pinned`: `CudaStats::copy_chunks` (8 MiB pinned double buffers) written chunk
//!   by chunk into the file, as the Dumper does on its calling thread; `vs_read` = its
//!   throughput over `cuda-dtoh+write`'s;
//! - `host-fs-write`: `fs::write` of the same bytes already on the host (the disk's share).
//!
//! Files go to `OPDUMP_BENCH_DIR`, else `/dev/shm` when it exists (so the disk does not
//! decide), else the temporary directory. Each size runs its rows in interleaved rounds
//! (copy, high, low, copy, ...), median of `runs`; the clock is the wall clock around
//! synchronous calls; the `threads` column is 0 (no CPU threads are measured).
//!
//! Without an NVIDIA driver or device this prints why and adds no rows: no device number is
//! ever reported that was not measured. NVRTC is taken from `OPDUMP_NVRTC_LIB_DIR` if set
//! (the directory `dump-device-cuda/ci/fetch-nvrtc.sh` prints), else the loader path.

use super::{Opts, Row};
use dump_core::DType;
use dump_device_cuda::{
    CudaStats, DeviceTensor, KernelId, Precision, driver_present, preload_nvrtc,
};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn row(kernel: &str, dtype: DType, bytes: usize, gbps: f64, vs_copy: Option<f64>) -> Row {
    Row {
        kernel: kernel.into(),
        dtype: dtype.name().into(),
        bytes,
        threads: 0,
        gbps,
        vs_read: vs_copy,
        vs_numpy: None,
    }
}

/// Host bytes of `bytes / size` finite values of `dtype` in [-1000, 1000).
fn data(dtype: DType, bytes: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut out = Vec::with_capacity(bytes);
    while out.len() < bytes {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let v = ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2000.0;
        match dtype {
            DType::Float16 => out.extend_from_slice(&half_bits(v, false).to_le_bytes()),
            DType::BFloat16 => out.extend_from_slice(&half_bits(v, true).to_le_bytes()),
            DType::Float64 => out.extend_from_slice(&f64::from(v).to_le_bytes()),
            DType::Bool => out.push(u8::from(v > 0.0)),
            _ => out.extend_from_slice(&v.to_le_bytes()),
        }
    }
    out.truncate(bytes);
    out
}

/// bf16 by truncation, f16 for |v| < 1000 by rebasing the exponent (benchmark data only
/// needs to be finite and varied, not correctly rounded).
fn half_bits(v: f32, bf16: bool) -> u16 {
    let b = v.to_bits();
    if bf16 {
        return (b >> 16) as u16;
    }
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    if exp <= 0 {
        return sign;
    }
    sign | ((exp as u16) << 10) | ((b >> 13) & 0x3ff) as u16
}

/// Sizes for the device rows: launch-bound small tensors up to 1 GiB.
fn sizes(opts: &Opts) -> Vec<usize> {
    if opts.quick {
        vec![4 << 10, 1 << 20, 64 << 20]
    } else {
        vec![4 << 10, 1 << 20, 64 << 20, 1 << 30]
    }
}

/// Medians over interleaved rounds: each round runs every timed closure once, in order.
fn interleaved(runs: usize, fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    for f in fs.iter_mut() {
        f(); // warm-up
    }
    let mut secs = vec![Vec::new(); fs.len()];
    for _ in 0..runs.max(1) {
        for (f, s) in fs.iter_mut().zip(&mut secs) {
            let t = Instant::now();
            f();
            s.push(t.elapsed().as_secs_f64());
        }
    }
    secs.into_iter()
        .map(|mut s| {
            s.sort_by(f64::total_cmp);
            s[s.len() / 2].max(1e-12)
        })
        .collect()
}

/// Where the dump rows write their files.
fn bench_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("OPDUMP_BENCH_DIR") {
        return PathBuf::from(d);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Pushes the cuda rows, or explains why there are none.
pub fn run(opts: &Opts, rows: &mut Vec<Row>) -> Result<(), String> {
    if let Some(dir) = std::env::var_os("OPDUMP_NVRTC_LIB_DIR")
        && let Err(e) = preload_nvrtc(Path::new(&dir))
    {
        println!("bench-stats --device cuda: {e}");
    }
    if !driver_present() {
        println!(
            "bench-stats --device cuda: this machine has no NVIDIA driver (libcuda.so is not \
             loadable), so no GPU: no cuda rows measured"
        );
        return Ok(());
    }
    let gpu = match CudaStats::new(0) {
        Ok(g) => g,
        Err(e) => {
            println!("bench-stats --device cuda: no usable GPU ({e}): no cuda rows measured");
            return Ok(());
        }
    };
    let stream = gpu.context().default_stream();
    let name = gpu.context().name().unwrap_or_else(|_| "?".into());
    println!("bench-stats --device cuda: GPU 0 = {name} ({})", gpu.arch());
    let err = |what: &str, e: &dyn std::fmt::Display| format!("cuda bench: {what}: {e}");
    let mut failure: Option<String> = None;
    for dtype in kernel_dtypes() {
        let size = dtype.size().unwrap_or(1);
        for &bytes in &sizes(opts) {
            let bytes = bytes / size * size;
            let host = data(dtype, bytes);
            let src = stream.clone_htod(&host).map_err(|e| err("upload", &e))?;
            drop(host);
            let mut dst = stream
                .alloc_zeros::<u8>(bytes)
                .map_err(|e| err("alloc", &e))?;
            let t =
                DeviceTensor::from_slice(&src, dtype, bytes / size).map_err(|e| err("view", &e))?;
            let mut copy = || {
                let r = stream
                    .memcpy_dtod(&src, &mut dst)
                    .and_then(|()| stream.synchronize());
                if let Err(e) = r {
                    failure.get_or_insert(err("copy", &e));
                }
            };
            let mut fail2 = None;
            let mut high = || {
                if let Err(e) = gpu.summarize(&t, Precision::High, &stream) {
                    fail2.get_or_insert(err("summarize", &e));
                }
            };
            let mut fail3 = None;
            let mut low = || {
                if let Err(e) = gpu.summarize(&t, Precision::Low, &stream) {
                    fail3.get_or_insert(err("summarize", &e));
                }
            };
            let secs = interleaved(opts.runs, &mut [&mut copy, &mut high, &mut low]);
            if let Some(f) = failure.take().or(fail2).or(fail3) {
                return Err(f);
            }
            let gbps = |b: usize, s: f64| b as f64 / s / 1e9;
            let copy = gbps(2 * bytes, secs[0]);
            rows.push(row("cuda-d2d-copy", dtype, bytes, copy, None));
            for (label, s) in [("cuda-stats-high", secs[1]), ("cuda-stats-low", secs[2])] {
                let g = gbps(bytes, s);
                rows.push(row(label, dtype, bytes, g, Some(g / copy)));
            }
        }
    }
    dump_rows(opts, &gpu, rows)
}

/// The tensor-dump rows: pinned streaming against a whole copy and `fs::write`.
fn dump_rows(opts: &Opts, gpu: &CudaStats, rows: &mut Vec<Row>) -> Result<(), String> {
    let dir = bench_dir().join(format!("opdump-cuda-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let result = dump_rows_in(opts, gpu, rows, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn dump_rows_in(
    opts: &Opts,
    gpu: &CudaStats,
    rows: &mut Vec<Row>,
    dir: &Path,
) -> Result<(), String> {
    let stream = &gpu.context().default_stream();
    let err = |what: &str, e: &dyn std::fmt::Display| format!("cuda bench: {what}: {e}");
    let dtype = DType::Float32;
    let sizes: &[usize] = if opts.quick {
        &[64 << 20]
    } else {
        &[64 << 20, 1 << 30]
    };
    println!(
        "bench-stats --device cuda: dump rows write into {}",
        dir.display()
    );
    for &bytes in sizes {
        let host = data(dtype, bytes);
        let src = stream.clone_htod(&host).map_err(|e| err("upload", &e))?;
        let t = DeviceTensor::from_slice(&src, dtype, bytes / 4).map_err(|e| err("view", &e))?;
        let (plain, pinned, disk) = (
            dir.join("plain.bin"),
            dir.join("pinned.bin"),
            dir.join("host.bin"),
        );
        let mut failure: Option<String> = None;
        let mut whole = || {
            let r = stream
                .clone_dtoh(&src)
                .map_err(|e| err("dtoh", &e))
                .and_then(|v| std::fs::write(&plain, v).map_err(|e| err("write", &e)));
            if let Err(e) = r {
                failure.get_or_insert(e);
            }
        };
        let mut fail2: Option<String> = None;
        let mut streamed = || {
            let r = std::fs::File::create(&pinned)
                .map_err(|e| err("create", &e))
                .and_then(|mut f| {
                    gpu.copy_chunks(&t, stream, |c| f.write_all(c))
                        .map_err(|e| err("copy_chunks", &e))
                });
            if let Err(e) = r {
                fail2.get_or_insert(e);
            }
        };
        let mut fail3: Option<String> = None;
        let mut host_write = || {
            if let Err(e) = std::fs::write(&disk, &host) {
                fail3.get_or_insert(err("write", &e));
            }
        };
        let secs = interleaved(opts.runs, &mut [&mut whole, &mut streamed, &mut host_write]);
        if let Some(f) = failure.or(fail2).or(fail3) {
            return Err(f);
        }
        for p in [&plain, &pinned] {
            let len = std::fs::metadata(p).map_err(|e| err("stat", &e))?.len();
            if len != bytes as u64 {
                return Err(format!(
                    "cuda bench: {} holds {len} bytes, not {bytes}",
                    p.display()
                ));
            }
        }
        let g = |s: f64| bytes as f64 / s / 1e9;
        let base = g(secs[0]);
        rows.push(row("cuda-dtoh+write", dtype, bytes, base, None));
        rows.push(row(
            "cuda-dump-pinned",
            dtype,
            bytes,
            g(secs[1]),
            Some(g(secs[1]) / base),
        ));
        rows.push(row(
            "host-fs-write",
            dtype,
            bytes,
            g(secs[2]),
            Some(g(secs[2]) / base),
        ));
        for p in [&plain, &pinned, &disk] {
            let _ = std::fs::remove_file(p);
        }
    }
    Ok(())
}

/// Every dtype the statistics kernels support, once each, in `KernelId::ALL`'s order.
fn kernel_dtypes() -> Vec<DType> {
    let mut out: Vec<DType> = Vec::new();
    for k in KernelId::ALL {
        if !out.contains(&k.dtype) {
            out.push(k.dtype);
        }
    }
    out
}
