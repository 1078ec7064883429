//! GPU tests: the kernels against their CPU model, bit for bit, and against the host's
//! statistics under the documented rules, for every dtype and for tensors over 1 GiB; the
//! copy paths.
//!
//! Without an NVIDIA driver or device they print SKIP and pass; `OPDUMP_REQUIRE_GPU=1` turns
//! a skip into a failure (set it on GPU machines so a broken driver is not silently
//! skipped). NVRTC is taken from `OPDUMP_NVRTC_LIB_DIR` when set.

mod real_gpu;
mod samples;

use real_gpu::gpu;

use dump_core::DType;
use dump_core::stats::summarize_reference;
use dump_device_cuda::{CudaTensor, DeviceSummary, DeviceTensor, Precision, model};
use dump_stats::{
    CategorySet, DeviceTensor as _,
    device::{DeviceStatistics, StatsKind, StatsRequest},
    precision::{DeviceStats, DeviceValue, device_statistics},
};
use std::sync::Arc;

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

    // A deferred copy (the flight recorder's): queued, then overwritten on the same stream
    // by a later copy into the tensor; the bytes waited for are those before it.
    let mut later = stream.clone_htod(&bytes).unwrap();
    let t2 = DeviceTensor::from_slice(&later, DType::Float32, 1_000_003).unwrap();
    let p = gpu
        .copy_to_host_deferred(&t2, &stream)
        .unwrap()
        .expect("room");
    let zeros = vec![0u8; bytes.len()];
    stream.memcpy_htod(&zeros, &mut later).unwrap();
    let mut host = vec![0u8; bytes.len()];
    dump_stats::PendingCopy::wait_into(Box::new(p), &mut host).unwrap();
    assert_eq!(
        host, bytes,
        "stream order: the copy saw the bytes as they were"
    );
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
    // The device-tensor contract: the shape must match; errors are the backend's, boxed.
    let f = DeviceTensor::from_slice(&dev, DType::Float32, 4).unwrap();
    assert!(CudaTensor::new(&gpu, f, &[3], &stream).is_err());
    let ct = CudaTensor::new(&gpu, f, &[2, 2], &stream).unwrap();
    let cats = CategorySet::parse(["max"]).unwrap();
    let req = StatsRequest {
        precision: Precision::High,
        categories: &cats,
        kind: StatsKind::Host,
    };
    let Some(DeviceStatistics::Host(s)) = ct.statistics(&req).unwrap() else {
        panic!("host semantics asked for")
    };
    assert_eq!((s.count, s.zero), (4, 4));
    let mut host = [1u8; 16];
    ct.copy_to_host(&mut host).unwrap();
    assert_eq!(host, [0u8; 16]);
    let u = CudaTensor::new(&gpu, t, &[4], &stream).unwrap();
    assert!(
        u.statistics(&req)
            .unwrap_err()
            .to_string()
            .contains("uint32")
    );
}

/// Moderate values of `dtype` in [-1000, 1000) (raw bits for integers): sums stay finite,
/// so `high` avg and l2norm can be held to the documented one-f32-ulp bound.
fn moderate(dtype: DType, n: usize, seed: u64) -> Vec<u8> {
    let size = dtype.size().unwrap();
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n * size);
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2000.0;
        match dtype {
            DType::Float16 => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            DType::BFloat16 => out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            DType::Float32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            DType::Float64 => out.extend_from_slice(&v.to_le_bytes()),
            DType::Bool => out.push((x & 1) as u8),
            _ => out.extend_from_slice(&x.to_le_bytes()[..size]),
        }
    }
    out
}

/// What the host computes from the same bytes: its summary and the device-statistics
/// policy's row (the reference the documented rules are stated against).
struct HostView {
    summary: dump_core::Summary,
    policy: DeviceStats,
}

impl HostView {
    fn of(dtype: DType, bytes: &[u8], n: usize, p: Precision) -> HostView {
        HostView {
            summary: summarize_reference(dtype, bytes, n).unwrap().unwrap(),
            policy: device_statistics(dtype, bytes, n, p).unwrap().unwrap(),
        }
    }
}

fn texts(s: &DeviceStats) -> [String; 4] {
    [s.max, s.min, s.avg, s.l2norm].map(|v| v.to_string())
}

/// The documented rules (dump-device-cuda's README, "What users see on a device"): counts,
/// max and min exactly the host's, every NaN-decided and integer cell exactly the policy's,
/// and in `high` a finite avg or l2norm within one f32 ulp of the policy's.
fn check_host_rules(dtype: DType, got: &DeviceSummary, host: &HostView, p: Precision, ctx: &str) {
    let (d, h) = (&got.summary, &host.summary);
    assert_eq!(
        (d.count, d.nan, d.pos_inf, d.neg_inf, d.zero, d.pos, d.neg),
        (h.count, h.nan, h.pos_inf, h.neg_inf, h.zero, h.pos, h.neg),
        "{ctx}: counts"
    );
    assert!(
        d.max == h.max || (d.max.is_nan() && h.max.is_nan()),
        "{ctx}: max {} vs {}",
        d.max,
        h.max
    );
    assert!(
        d.min == h.min || (d.min.is_nan() && h.min.is_nan()),
        "{ctx}: min {} vs {}",
        d.min,
        h.min
    );
    let (dv, pol) = (texts(&got.device_stats()), texts(&host.policy));
    assert_eq!(dv[..2], pol[..2], "{ctx}: max/min cells");
    if d.nan != 0 || !dtype.is_float() {
        assert_eq!(dv, pol, "{ctx}: NaN-decided or integer row");
        return;
    }
    if p == Precision::High {
        let got = got.device_stats();
        for (what, a, b) in [
            ("avg", got.avg, host.policy.avg),
            ("l2norm", got.l2norm, host.policy.l2norm),
        ] {
            if let (DeviceValue::Float(a), DeviceValue::Float(b)) = (a, b)
                && a.is_finite()
                && b.is_finite()
            {
                let ulps = ((a as f32).to_bits() as i64 - (b as f32).to_bits() as i64).abs();
                assert!(ulps <= 1, "{ctx}: {what} {a} vs host {b} ({ulps} f32 ulps)");
            }
        }
    }
}

#[test]
fn every_dtype_follows_the_host_rules_on_the_device() {
    let Some(gpu) = gpu() else { return };
    let stream = gpu.context().default_stream();
    for dtype in samples::DTYPES {
        for n in [1usize, 31, 4096, 1_000_001] {
            for (kind, bytes) in [
                ("specials", samples::bytes_for(dtype, n, n as u64 + 3)),
                ("moderate", moderate(dtype, n, n as u64 + 5)),
            ] {
                let dev = stream.clone_htod(&bytes).unwrap();
                let t = DeviceTensor::from_slice(&dev, dtype, n).unwrap();
                for p in [Precision::High, Precision::Low] {
                    let got = gpu.summarize(&t, p, &stream).unwrap().unwrap();
                    let host = HostView::of(dtype, &bytes, n, p);
                    check_host_rules(dtype, &got, &host, p, &format!("{dtype} n={n} {kind} {p}"));
                }
            }
        }
    }
}

/// One ≥ 1 GiB case: the bytes, the model's summary and the host's view, computed on a
/// host thread of its own.
struct Big {
    dtype: DType,
    precision: Precision,
    n: usize,
    padded: Vec<u8>,
    want: DeviceSummary,
    host: HostView,
}

#[test]
fn gibibyte_tensors_equal_the_model_and_follow_the_host_rules() {
    let Some(gpu) = gpu() else { return };
    let stream = gpu.context().default_stream();
    // Just over 1 GiB each, odd lengths, viewed from one element past a 16-byte boundary.
    let cases = [
        (DType::Float32, Precision::High, true),
        (DType::Float32, Precision::Low, false),
        (DType::Float16, Precision::High, false),
        (DType::BFloat16, Precision::Low, true),
        (DType::Int8, Precision::High, false),
    ];
    let make = |(dtype, p, specials): (DType, Precision, bool)| {
        move || {
            let size = dtype.size().unwrap();
            let n = (1usize << 30) / size + 3;
            let bytes = if specials {
                samples::bytes_for(dtype, n, 77)
            } else {
                moderate(dtype, n, 91)
            };
            let want = model::summarize(dtype, &bytes, n, p).unwrap().unwrap();
            let host = HostView::of(dtype, &bytes, n, p);
            let mut padded = vec![0u8; size];
            padded.extend_from_slice(&bytes);
            Big {
                dtype,
                precision: p,
                n,
                padded,
                want,
                host,
            }
        }
    };
    // Host sides on their own threads (a few GiB of host memory in all), GPU in order.
    let pending: Vec<_> = cases.iter().map(|&c| std::thread::spawn(make(c))).collect();
    for handle in pending {
        let big = handle.join().unwrap();
        let (dtype, p, n) = (big.dtype, big.precision, big.n);
        let size = dtype.size().unwrap();
        let dev = stream.clone_htod(&big.padded).unwrap();
        let whole = DeviceTensor::from_slice(&dev, dtype, n + 1).unwrap();
        // SAFETY: `dev` holds n + 1 elements and outlives the view; work runs on `stream`.
        let t = unsafe { DeviceTensor::from_raw(whole.ptr() + size as u64, dtype, n) }.unwrap();
        let started = std::time::Instant::now();
        let got = gpu.summarize(&t, p, &stream).unwrap().unwrap();
        let took = started.elapsed();
        let ctx = format!("{dtype} n={n} ({} bytes) {p}", n * size);
        eprintln!("{ctx}: summarized in {took:?}");
        assert_eq!(
            samples::bits(&got),
            samples::bits(&big.want),
            "{ctx}: against the model"
        );
        check_host_rules(dtype, &got, &big.host, p, &ctx);
    }
}

#[test]
fn deferred_summaries_equal_the_waited_ones_and_are_bounded() {
    let Some(gpu) = gpu() else { return };
    let stream = gpu.context().default_stream();
    let mut bufs = Vec::new();
    for (i, dtype) in samples::DTYPES.into_iter().enumerate() {
        let n = 1000 + 4097 * i;
        let bytes = samples::bytes_for(dtype, n, i as u64 + 9);
        bufs.push((dtype, n, stream.clone_htod(&bytes).unwrap()));
    }
    // Queue more than the pool allows; every one queued gives what `summarize` gives.
    let mut pending = Vec::new();
    let mut refused = 0;
    for round in 0..8 {
        for (dtype, n, dev) in &bufs {
            let t = DeviceTensor::from_slice(dev, *dtype, *n).unwrap();
            let p = if round % 2 == 0 {
                Precision::High
            } else {
                Precision::Low
            };
            match gpu.summarize_deferred(&t, p, &stream).unwrap() {
                Some(s) => pending.push((*dtype, *n, p, s)),
                None => refused += 1,
            }
        }
    }
    assert_eq!(
        pending.len(),
        dump_device_cuda::MAX_PENDING,
        "the pool's bound"
    );
    assert_eq!(refused, 80 - dump_device_cuda::MAX_PENDING);
    for (dtype, n, p, s) in pending {
        let (_, _, dev) = bufs.iter().find(|b| b.0 == dtype).unwrap();
        let t = DeviceTensor::from_slice(dev, dtype, n).unwrap();
        let want = gpu.summarize(&t, p, &stream).unwrap().unwrap();
        assert_eq!(
            samples::bits(&s.wait().unwrap()),
            samples::bits(&want),
            "{dtype} {p}"
        );
    }
    // Buffers come back to the pool: the next queue succeeds.
    let (dtype, n, dev) = &bufs[0];
    let t = DeviceTensor::from_slice(dev, *dtype, *n).unwrap();
    assert!(
        gpu.summarize_deferred(&t, Precision::High, &stream)
            .unwrap()
            .is_some()
    );
    let empty = DeviceTensor::from_slice(dev, *dtype, 0).unwrap();
    assert!(
        gpu.summarize_deferred(&empty, Precision::High, &stream)
            .unwrap()
            .is_none()
    );
}
