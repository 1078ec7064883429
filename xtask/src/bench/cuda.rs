//! `cuda` rows (`cargo xtask bench-stats --device cuda`): dump-device-cuda's fused statistics
//! kernel on GPU 0, against device-to-device copy bandwidth measured in the same run.
//!
//! Rows: `cuda-d2d-copy` (a `cuMemcpyDtoD` of the tensor: bytes / time), `cuda-stats-high`
//! and `cuda-stats-low` (`CudaStats::summarize`: one kernel launch, the block partials back to
//! the host and their combination, i.e. everything a caller waits for; bytes / time). Their
//! `vs_read` column is the ratio to `cuda-d2d-copy` of the same size (target >= 0.8 on large
//! tensors). Timing is wall clock around synchronous calls, median of `runs`; the `threads`
//! column is 0 (no CPU threads are measured).
//!
//! Without an NVIDIA driver or device this prints why and adds no rows: no device number is
//! ever reported that was not measured. NVRTC is taken from `OPDUMP_NVRTC_LIB_DIR` if set
//! (the directory `dump-device-cuda/ci/fetch-nvrtc.sh` prints), else the loader path.

use super::{Opts, Row, median_gbps};
use dump_core::DType;
use dump_device_cuda::{CudaStats, DeviceTensor, Precision, driver_present, preload_nvrtc};

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

/// Pushes the cuda rows, or explains why there are none.
pub fn run(opts: &Opts, rows: &mut Vec<Row>) -> Result<(), String> {
    if let Some(dir) = std::env::var_os("OPDUMP_NVRTC_LIB_DIR")
        && let Err(e) = preload_nvrtc(std::path::Path::new(&dir))
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
    for dtype in [DType::Float32, DType::Float16, DType::BFloat16] {
        for &bytes in &opts.sizes() {
            let host = data(dtype, bytes);
            let src = stream.clone_htod(&host).map_err(|e| err("upload", &e))?;
            let mut dst = stream
                .alloc_zeros::<u8>(bytes)
                .map_err(|e| err("alloc", &e))?;
            let elems = bytes / dtype.size().unwrap_or(1);
            let t = DeviceTensor::from_slice(&src, dtype, elems).map_err(|e| err("view", &e))?;
            let mut failure = None;
            let copy = median_gbps(bytes, opts.runs, || {
                let r = stream
                    .memcpy_dtod(&src, &mut dst)
                    .and_then(|()| stream.synchronize());
                if let Err(e) = r {
                    failure.get_or_insert(err("copy", &e));
                }
            });
            if let Some(f) = failure.take() {
                return Err(f);
            }
            rows.push(row("cuda-d2d-copy", dtype, bytes, copy, None));
            for (label, p) in [
                ("cuda-stats-high", Precision::High),
                ("cuda-stats-low", Precision::Low),
            ] {
                let gbps = median_gbps(bytes, opts.runs, || {
                    if let Err(e) = gpu.summarize(&t, p, &stream) {
                        failure.get_or_insert(err("summarize", &e));
                    }
                });
                if let Some(f) = failure.take() {
                    return Err(f);
                }
                rows.push(row(label, dtype, bytes, gbps, Some(gbps / copy)));
            }
        }
    }
    Ok(())
}
