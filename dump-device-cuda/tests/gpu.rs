//! GPU tests: the kernels against their CPU model, bit for bit, and the copy paths.
//!
//! Without an NVIDIA driver or device they print SKIP and pass; `OPDUMP_REQUIRE_GPU=1` turns
//! a skip into a failure (set it on GPU machines so a broken driver is not silently
//! skipped). NVRTC is taken from `OPDUMP_NVRTC_LIB_DIR` when set.

mod samples;

use dump_core::DType;
use dump_device_cuda::{
    CudaStats, CudaTensor, DeviceTensor, Precision, driver_present, model, preload_nvrtc,
};
use opdump_test_support::{Prereq, check};
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
    check(Prereq::Gpu, Err(reason));
    None
}

#[test]
fn kernels_equal_the_model_bit_for_bit() {
    let Some(gpu) = gpu() else { return };
    let stream: Arc<_> = gpu.context().default_stream();
    for dtype in samples::DTYPES {
        for n in [1usize, 3, 17, 1000, 4097, 262_147, 5_000_003] {
            let bytes = samples::bytes_for(dtype, n, n as u64 * 31 + dtype.bits() as u64);
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
                        samples::bits(&got),
                        samples::bits(&want),
                        "{dtype} n={n} {p} ptr={:#x}",
                        t.ptr()
                    );
                    let again = gpu.summarize(t, p, &stream).unwrap().unwrap();
                    assert_eq!(
                        samples::bits(&got),
                        samples::bits(&again),
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
    let bytes = samples::bytes_for(DType::Float32, 1_000_003, 5);
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
