//! GPU tests: the kernels against their CPU model, bit for bit, and the copy paths.
//!
//! Without an NVIDIA driver or device they print SKIP and pass; `OPDUMP_REQUIRE_GPU=1` turns
//! a skip into a failure (set it on GPU machines so a broken driver is not silently
//! skipped). NVRTC is taken from `OPDUMP_NVRTC_LIB_DIR` when set.

use dump_core::DType;
use dump_device_cuda::{
    CudaStats, CudaTensor, DeviceSummary, DeviceTensor, Precision, driver_present, model,
    preload_nvrtc,
};
use std::sync::Arc;

fn gpu() -> Option<CudaStats> {
    if let Some(dir) = std::env::var_os("OPDUMP_NVRTC_LIB_DIR") {
        // A failure shows up below as Error::NoNvrtc with the reason.
        let _ = preload_nvrtc(std::path::Path::new(&dir));
    }
    let reason = if !driver_present() {
        "no NVIDIA driver (libcuda.so not loadable)".to_string()
    } else {
        match CudaStats::new(0) {
            Ok(s) => return Some(s),
            Err(e) => e.to_string(),
        }
    };
    if std::env::var("OPDUMP_REQUIRE_GPU").as_deref() == Ok("1") {
        panic!("OPDUMP_REQUIRE_GPU=1 but the GPU is unusable: {reason}");
    }
    eprintln!("SKIP GPU test: {reason}");
    None
}

fn bits(s: &DeviceSummary) -> Vec<u64> {
    let m = &s.summary;
    vec![
        m.count,
        m.max.to_bits(),
        m.min.to_bits(),
        m.sum.to_bits(),
        m.sum_sq.to_bits(),
        m.nan,
        m.pos_inf,
        m.neg_inf,
        m.zero,
        m.pos,
        m.neg,
        m.first_nan.to_bits(),
        m.last_nan.to_bits(),
        s.int_sum.map_or(0, |v| v as u64),
        s.int_max.map_or(0, |v| v as u64),
    ]
}

fn test_bytes(dtype: DType, n: usize, seed: u64) -> Vec<u8> {
    let size = dtype.size().unwrap();
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n * size);
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut b = x.to_le_bytes();
        if dtype.is_float() && i % 5 != 0 {
            // Mostly moderate finite values; every fifth element raw bits (NaN, inf, ...).
            let v = (x >> 11) as f64 / (1u64 << 53) as f64 * 200.0 - 100.0;
            b = match dtype {
                DType::Float16 => {
                    let h = half::f16::from_f64(v).to_le_bytes();
                    [h[0], h[1], 0, 0, 0, 0, 0, 0]
                }
                DType::BFloat16 => {
                    let h = half::bf16::from_f64(v).to_le_bytes();
                    [h[0], h[1], 0, 0, 0, 0, 0, 0]
                }
                DType::Float32 => {
                    let f = (v as f32).to_le_bytes();
                    [f[0], f[1], f[2], f[3], 0, 0, 0, 0]
                }
                _ => v.to_le_bytes(),
            };
        }
        if dtype == DType::Bool {
            b[0] &= 1;
        }
        out.extend_from_slice(&b[..size]);
    }
    out
}

#[test]
fn kernels_equal_the_model_bit_for_bit() {
    let Some(gpu) = gpu() else { return };
    let stream: Arc<_> = gpu.context().default_stream();
    let dtypes = [
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::Bool,
    ];
    for dtype in dtypes {
        for n in [1usize, 3, 17, 1000, 4097, 262_147, 5_000_003] {
            let bytes = test_bytes(dtype, n, n as u64 * 31 + dtype.bits() as u64);
            let size = dtype.size().unwrap();
            // One extra element in front, to test a misaligned (non-16-byte) start too.
            let mut padded = vec![0u8; size];
            padded.extend_from_slice(&bytes);
            let dev = stream.clone_htod(&padded).unwrap();
            let whole = DeviceTensor::from_slice(&dev, dtype, n + 1).unwrap();
            // SAFETY: `dev` holds n + 1 elements and lives to the end of this iteration;
            // all work runs on `stream`, the slice's stream.
            let shifted =
                unsafe { DeviceTensor::from_raw(whole.ptr() + size as u64, dtype, n) }.unwrap();
            let aligned_copy = stream.clone_htod(&bytes).unwrap();
            let aligned = DeviceTensor::from_slice(&aligned_copy, dtype, n).unwrap();
            for p in [Precision::High, Precision::Low] {
                let want = model::summarize(dtype, &bytes, n, p).unwrap().unwrap();
                for t in [&aligned, &shifted] {
                    let got = gpu.summarize(t, p, &stream).unwrap().unwrap();
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "{dtype} n={n} {p} ptr={:#x}",
                        t.ptr()
                    );
                    let again = gpu.summarize(t, p, &stream).unwrap().unwrap();
                    assert_eq!(
                        bits(&got),
                        bits(&again),
                        "{dtype} n={n} {p}: not reproducible"
                    );
                }
            }
        }
    }
}

#[test]
fn copies_return_the_tensor_bytes() {
    let Some(gpu) = gpu() else { return };
    let stream = gpu.context().default_stream();
    let bytes = test_bytes(DType::Float32, 1_000_003, 5);
    let dev = stream.clone_htod(&bytes).unwrap();
    let t = DeviceTensor::from_slice(&dev, DType::Float32, 1_000_003).unwrap();
    let mut host = vec![0u8; bytes.len()];
    gpu.copy_to_host(&t, &mut host, &stream).unwrap();
    assert_eq!(host, bytes);
    let mut short = vec![0u8; 3];
    assert!(gpu.copy_to_host(&t, &mut short, &stream).is_err());

    let mut pipe = gpu.pipeline(1 << 20).unwrap();
    let mut got = Vec::new();
    let mut calls = 0;
    pipe.copy_chunks(&t, &stream, |c| {
        calls += 1;
        got.extend_from_slice(c);
        Ok::<(), std::io::Error>(())
    })
    .unwrap();
    assert_eq!(got, bytes);
    assert_eq!(calls, bytes.len().div_ceil(1 << 20));
    // A consumer error stops the copy and is returned as such.
    let r = pipe.copy_chunks(&t, &stream, |_| Err(std::io::Error::other("disk full")));
    assert!(matches!(
        r,
        Err(dump_device_cuda::PipelineError::Consumer(_))
    ));
}

#[test]
fn unsupported_dtypes_and_empty_tensors() {
    let Some(gpu) = gpu() else { return };
    let stream = gpu.context().default_stream();
    let dev = stream.clone_htod(&[0u8; 16]).unwrap();
    let t = DeviceTensor::from_slice(&dev, DType::UInt32, 4).unwrap();
    assert!(gpu.summarize(&t, Precision::High, &stream).is_err());
    let e = DeviceTensor::from_slice(&dev, DType::Float32, 0).unwrap();
    assert_eq!(gpu.summarize(&e, Precision::High, &stream).unwrap(), None);
    // The Dumper adapter: the shape must match, and it reports through strings.
    let f = DeviceTensor::from_slice(&dev, DType::Float32, 4).unwrap();
    assert!(CudaTensor::new(&gpu, f, &[3], &stream, Precision::High).is_err());
    let ct = CudaTensor::new(&gpu, f, &[2, 2], &stream, Precision::High).unwrap();
    let s = ct.device_summary().unwrap().unwrap();
    assert_eq!((s.count, s.zero), (4, 4));
    let mut host = [1u8; 16];
    ct.copy_to_host(&mut host).unwrap();
    assert_eq!(host, [0u8; 16]);
    let u = CudaTensor::new(&gpu, t, &[4], &stream, Precision::High).unwrap();
    assert!(u.device_summary().unwrap_err().contains("uint32"));
}
