//! The GPU code paths against a mock driver (`mock_driver`): every cudarc call opdump makes,
//! on a machine without a GPU.
//!
//! What this proves: `CudaStats` opens a device, loads the NVRTC-compiled module, launches
//! each kernel with the argument order, grid and block the kernel expects, and combines the
//! partials into exactly what the CPU model gives; `HostPipeline` overlaps chunk copies and
//! never reads a pinned buffer before its copy completed (the mock runs copies lazily, so an
//! early read sees stale bytes); device errors at any call come back as error values, with no
//! copy left in flight and no device memory leaked. What it does not prove: how a real GPU
//! executes the kernel (`kernel_on_host.rs` checks the source on the CPU, `gpu.rs` on a GPU).
//!
//! NVRTC comes from `OPDUMP_NVRTC_LIB_DIR` (CI) or the loader path; without it the module is
//! seeded with PTX text naming the kernels, and the test says so. Without g++ it prints SKIP.

mod host_cxx;
mod mock_driver;
mod samples;

use dump_core::DType;
use dump_device_cuda::compile::seed_cache;
use dump_device_cuda::{
    CudaStats, CudaTensor, DeviceTensor, Error, KernelId, PipelineError, Precision, model,
    nvrtc_present, preload_nvrtc,
};
use dump_stats::{
    CategorySet, DeviceTensor as _,
    device::{DeviceStatistics, StatsKind, StatsRequest},
};
use mock_driver::MockDriver;
use std::sync::{Arc, Mutex, MutexGuard};

/// The mock's state (log, injected failures) is process-wide: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

struct Gpu {
    mock: &'static MockDriver,
    stats: CudaStats,
    _serial: MutexGuard<'static, ()>,
}

fn gpu() -> Option<Gpu> {
    let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mock = mock_driver::load()?;
    if let Some(dir) = std::env::var_os("OPDUMP_NVRTC_LIB_DIR") {
        let _ = preload_nvrtc(std::path::Path::new(&dir));
    }
    if !nvrtc_present() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            eprintln!(
                "note: no NVRTC; the mock loads seeded PTX text instead of a compiled module"
            );
            let mut ptx = String::from(".version 8.7\n.target sm_90\n");
            for k in KernelId::ALL {
                ptx.push_str(&format!(".entry {}(\n", k.name()));
            }
            seed_cache("compute_90", ptx.into_bytes()).unwrap();
        });
    }
    let stats = CudaStats::new(0).unwrap_or_else(|e| panic!("mock GPU: {e}"));
    mock.log(true);
    Some(Gpu {
        mock,
        stats,
        _serial: serial,
    })
}

#[test]
fn the_mock_device_is_found_and_the_compiled_module_loads() {
    let Some(g) = gpu() else { return };
    // A compute capability 9.0 device: the CUBIN for sm_90 is tried first and accepted.
    assert!(g.stats.arch() == "sm_90" || g.stats.arch() == "compute_90");
    if nvrtc_present() {
        assert_eq!(g.stats.arch(), "sm_90", "NVRTC's CUBIN should load");
    }
    // No such device: an error value naming the step.
    let e = CudaStats::new(1).unwrap_err();
    assert!(matches!(e, Error::Driver { .. }), "{e:?}");
    assert!(e.to_string().contains("opening the device"), "{e}");
}

#[test]
fn device_statistics_equal_the_model_bit_for_bit() {
    let Some(g) = gpu() else { return };
    let stream = g.stats.context().default_stream();
    for k in KernelId::ALL {
        let precision = if k.low {
            Precision::Low
        } else {
            Precision::High
        };
        let size = k.dtype.size().unwrap();
        for n in [1usize, 7, 1000, 4099, 70_001] {
            let bytes = samples::bytes_for(k.dtype, n, n as u64 ^ 0xc0ffee);
            let dev = stream.clone_htod(&bytes).unwrap();
            let t = DeviceTensor::from_slice(&dev, k.dtype, n).unwrap();
            let got = g.stats.summarize(&t, precision, &stream).unwrap().unwrap();
            let want = model::summarize(k.dtype, &bytes, n, precision)
                .unwrap()
                .unwrap();
            assert_eq!(
                samples::bits(&got),
                samples::bits(&want),
                "{} n={n}",
                k.name()
            );
            // The launch the mock saw: the kernel for this dtype and precision, the grid of
            // grid_for, 256 threads.
            let log = g.mock.log(true);
            let grid = dump_device_cuda::kernel_source::grid_for(size, n as u64);
            let launch = format!("cuLaunchKernel {} grid {grid} block 256", k.name());
            assert!(log.contains(&launch), "{launch} not in:\n{log}");
        }
    }
}

#[test]
fn a_tensor_at_an_offset_uses_the_unaligned_path() {
    let Some(g) = gpu() else { return };
    let stream = g.stats.context().default_stream();
    let n = 5000;
    let bytes = samples::bytes_for(DType::Float32, n + 1, 7);
    let dev = stream.clone_htod(&bytes).unwrap();
    let whole = DeviceTensor::from_slice(&dev, DType::Float32, n + 1).unwrap();
    // SAFETY: elements 1..=n of a live allocation of n + 1 f32, read on its stream.
    let t = unsafe { DeviceTensor::from_raw(whole.ptr() + 4, DType::Float32, n) }.unwrap();
    assert!(!t.vector_aligned());
    let got = g
        .stats
        .summarize(&t, Precision::High, &stream)
        .unwrap()
        .unwrap();
    let want = model::summarize(DType::Float32, &bytes[4..], n, Precision::High)
        .unwrap()
        .unwrap();
    assert_eq!(samples::bits(&got), samples::bits(&want));
}

#[test]
fn empty_and_unsupported_tensors_launch_nothing() {
    let Some(g) = gpu() else { return };
    let stream = g.stats.context().default_stream();
    let dev = stream.alloc_zeros::<u32>(4).unwrap();
    let empty = DeviceTensor::from_slice(&dev, DType::Float32, 0).unwrap();
    assert_eq!(
        g.stats.summarize(&empty, Precision::High, &stream).unwrap(),
        None
    );
    let u32s = DeviceTensor::from_slice(&dev, DType::UInt32, 4).unwrap();
    assert_eq!(
        g.stats
            .summarize(&u32s, Precision::High, &stream)
            .unwrap_err(),
        Error::Unsupported(DType::UInt32)
    );
    let log = g.mock.log(true);
    assert!(!log.contains("cuLaunchKernel"), "{log}");
}

#[test]
fn the_pipeline_overlaps_copies_and_returns_every_byte() {
    let Some(g) = gpu() else { return };
    let stream = g.stats.context().default_stream();
    let n = 100_003;
    let bytes = samples::bytes_for(DType::Float32, n, 3);
    let dev = stream.clone_htod(&bytes).unwrap();
    let t = DeviceTensor::from_slice(&dev, DType::Float32, n).unwrap();
    for chunk in [4096usize, 65_536, 400_012, 1 << 20] {
        let mut pipe = g.stats.pipeline(chunk).unwrap();
        g.mock.log(true);
        let mut out = Vec::new();
        pipe.copy_chunks(&t, &stream, |c| {
            out.extend_from_slice(c);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(out.len(), bytes.len(), "chunk {chunk}");
        assert!(out == bytes, "chunk {chunk}: bytes differ");
        // The schedule: when the wait for copy j actually runs copies, copy j + 1 has been
        // issued already (double buffering), and every copy lands in pinned memory.
        let log = g.mock.log(true);
        let chunks = bytes.len().div_ceil(chunk);
        let (mut issued, mut waits) = (0, 0);
        for line in log.lines() {
            if line.starts_with("cuMemcpyDtoHAsync") {
                assert!(line.ends_with(" pinned"), "{line}");
                issued += 1;
            } else if line.starts_with("cuEventSynchronize ran ") && !line.ends_with(" 0") {
                assert_eq!(issued, (waits + 2).min(chunks), "chunk {chunk}:\n{log}");
                waits += 1;
            }
        }
        assert_eq!((issued, waits), (chunks, chunks), "chunk {chunk}:\n{log}");
    }
    // The plain copy path and the Dumper adapter.
    let mut host = vec![0u8; bytes.len()];
    g.stats.copy_to_host(&t, &mut host, &stream).unwrap();
    assert!(host == bytes);
    let shape = [n];
    let ct = CudaTensor::new(&g.stats, t, &shape, &stream).unwrap();
    let mut host = vec![0u8; bytes.len()];
    ct.copy_to_host(&mut host).unwrap();
    assert!(host == bytes);
    let cats = CategorySet::parse(["max", "min", "l2norm"]).unwrap();
    let req = |precision, kind| StatsRequest {
        precision,
        categories: &cats,
        kind,
    };
    let Some(DeviceStatistics::Host(s)) = ct
        .statistics(&req(Precision::High, StatsKind::Host))
        .unwrap()
    else {
        panic!("host semantics asked for")
    };
    let want = model::summarize(DType::Float32, &bytes, n, Precision::High)
        .unwrap()
        .unwrap();
    assert_eq!(s.max.to_bits(), want.summary.max.to_bits());
    assert_eq!(s.sum_sq.to_bits(), want.summary.sum_sq.to_bits());
    // The precision comes from the request: low gives the low model's device row.
    let low = model::summarize(DType::Float32, &bytes, n, Precision::Low)
        .unwrap()
        .unwrap();
    let Some(DeviceStatistics::Device(d)) = ct
        .statistics(&req(Precision::Low, StatsKind::Device))
        .unwrap()
    else {
        panic!("device semantics asked for")
    };
    let texts = |d: dump_stats::DeviceStats| [d.max, d.min, d.avg, d.l2norm].map(|v| v.to_string());
    assert_eq!(texts(d), texts(low.device_stats()));
    let md5 = CategorySet::parse(["max", "md5"]).unwrap();
    let e = ct
        .statistics(&StatsRequest {
            categories: &md5,
            ..req(Precision::High, StatsKind::Host)
        })
        .unwrap_err();
    assert!(e.to_string().contains("no md5"), "{e}");
    assert!(
        CudaTensor::new(&g.stats, t, &[n + 1], &stream).is_err(),
        "a shape that does not match the tensor is an error"
    );
}

#[test]
fn copy_chunks_reuses_its_pinned_pipeline() {
    let Some(g) = gpu() else { return };
    let stream = g.stats.context().default_stream();
    // Two and a bit STREAM_CHUNKs of f32.
    let n = (2 * dump_device_cuda::STREAM_CHUNK + 4096) / 4;
    let bytes = samples::bytes_for(DType::Float32, n, 21);
    let dev = stream.clone_htod(&bytes).unwrap();
    let t = DeviceTensor::from_slice(&dev, DType::Float32, n).unwrap();
    g.mock.log(true);
    for _ in 0..3 {
        let mut out = Vec::with_capacity(bytes.len());
        let mut sizes = Vec::new();
        g.stats
            .copy_chunks(&t, &stream, |c| {
                sizes.push(c.len());
                out.extend_from_slice(c);
                Ok::<(), ()>(())
            })
            .unwrap();
        let chunk = dump_device_cuda::STREAM_CHUNK;
        assert_eq!(sizes, [chunk, chunk, 4096]);
        assert!(out == bytes);
    }
    let log = g.mock.log(true);
    let allocs = log
        .lines()
        .filter(|l| l.starts_with("cuMemHostAlloc"))
        .count();
    assert_eq!(
        allocs, 2,
        "one pipeline (two pinned buffers) for three tensors:\n{log}"
    );
}

#[test]
fn device_errors_are_values_and_leave_nothing_in_flight() {
    let Some(g) = gpu() else { return };
    let stream = g.stats.context().default_stream();
    let n = 50_000;
    let bytes = samples::bytes_for(DType::Float16, n, 11);
    let dev = stream.clone_htod(&bytes).unwrap();
    let t = DeviceTensor::from_slice(&dev, DType::Float16, n).unwrap();
    let before = g.mock.device_bytes();

    // A failed launch: the error names the step; the partials buffer is freed.
    g.mock.fail("cuLaunchKernel", 719, 0);
    let e = g.stats.summarize(&t, Precision::High, &stream).unwrap_err();
    assert!(
        e.to_string().contains("launching the statistics kernel"),
        "{e}"
    );
    assert_eq!(g.mock.device_bytes(), before, "partials leaked");
    // A failed allocation and a failed read-back, likewise.
    g.mock.fail("cuMemAlloc_v2", 2, 0);
    let e = g.stats.summarize(&t, Precision::Low, &stream).unwrap_err();
    assert!(e.to_string().contains("allocating block partials"), "{e}");
    g.mock.fail("cuMemcpyDtoHAsync_v2", 1, 0);
    let e = g.stats.summarize(&t, Precision::Low, &stream).unwrap_err();
    assert!(e.to_string().contains("block partials to the host"), "{e}");
    assert_eq!(g.mock.device_bytes(), before);
    // The device still works afterwards.
    let ok = g.stats.summarize(&t, Precision::High, &stream).unwrap();
    assert!(ok.is_some());

    // A copy failing in the middle of a pipeline: the consumer saw only the chunks before
    // it, and no copy into a pinned buffer is pending when the pipeline is dropped.
    let mut pipe = g.stats.pipeline(8192).unwrap();
    g.mock.fail("cuMemcpyDtoHAsync_v2", 1, 3);
    let mut seen = 0;
    let r = pipe.copy_chunks(&t, &stream, |c| {
        seen += c.len();
        Ok::<(), ()>(())
    });
    assert!(matches!(r, Err(PipelineError::Device(_))), "{r:?}");
    assert_eq!(seen, 2 * 8192, "chunks before the failed copy");
    // A consumer error (disk full) stops the copies the same way.
    let r = pipe.copy_chunks(&t, &stream, |_| Err("disk full"));
    assert!(matches!(r, Err(PipelineError::Consumer("disk full"))));
    drop(pipe);
    let log = g.mock.log(true);
    assert!(!log.contains("HAZARD"), "{log}");
}

#[test]
fn writer_threads_share_one_device() {
    let Some(g) = gpu() else { return };
    let stats = Arc::new(g.stats);
    let stream = stats.context().default_stream();
    let n = 30_000;
    let bytes = samples::bytes_for(DType::BFloat16, n, 5);
    let dev = stream.clone_htod(&bytes).unwrap();
    let want = model::summarize(DType::BFloat16, &bytes, n, Precision::High)
        .unwrap()
        .unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let stream = stats.context().default_stream();
                let t = DeviceTensor::from_slice(&dev, DType::BFloat16, n).unwrap();
                for _ in 0..3 {
                    let got = stats.summarize(&t, Precision::High, &stream).unwrap();
                    assert_eq!(samples::bits(&got.unwrap()), samples::bits(&want));
                }
                let mut pipe = stats.pipeline(16_384).unwrap();
                let mut out = Vec::new();
                pipe.copy_chunks(&t, &stream, |c| {
                    out.extend_from_slice(c);
                    Ok::<(), ()>(())
                })
                .unwrap();
                assert!(out == bytes);
            });
        }
    });
}

#[test]
fn deferred_copies_land_in_pinned_memory_and_their_buffers_are_reused() {
    use dump_stats::PendingCopy;
    let Some(g) = gpu() else { return };
    let stream = g.stats.context().default_stream();
    let n = 100_003;
    let bytes = samples::bytes_for(DType::Float32, n, 5);
    let dev = stream.clone_htod(&bytes).unwrap();
    let t = DeviceTensor::from_slice(&dev, DType::Float32, n).unwrap();
    g.mock.log(true);
    for _ in 0..3 {
        let p = g.stats.copy_to_host_deferred(&t, &stream).unwrap();
        let p: Box<dyn PendingCopy> = Box::new(p.expect("room for a 400 KB copy"));
        assert_eq!(p.len(), bytes.len());
        let mut out = vec![0u8; bytes.len()];
        // The mock runs copies lazily: a read before the copy's event would see zeros.
        p.wait_into(&mut out).unwrap();
        assert!(out == bytes, "the deferred copy's bytes differ");
    }
    let log = g.mock.log(true);
    let allocs = log
        .lines()
        .filter(|l| l.starts_with("cuMemHostAlloc"))
        .count();
    assert_eq!(allocs, 1, "one staging buffer for three copies:\n{log}");
    let copies: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("cuMemcpyDtoHAsync"))
        .collect();
    assert_eq!(copies.len(), 3, "{log}");
    assert!(copies.iter().all(|l| l.ends_with(" pinned")), "{log}");
    assert!(!log.contains("HAZARD"), "{log}");
    // Its size class: 400,012 bytes -> 512 KiB, kept for reuse.
    assert_eq!(g.stats.deferred_copy_bytes(), 512 << 10);
    // Two in flight at once take two buffers; dropped unread, both wait for their copies and
    // are kept.
    let a = g.stats.copy_to_host_deferred(&t, &stream).unwrap().unwrap();
    let b = g.stats.copy_to_host_deferred(&t, &stream).unwrap().unwrap();
    drop((a, b));
    assert_eq!(g.stats.deferred_copy_bytes(), 1 << 20);
    assert!(!g.mock.log(true).contains("HAZARD"));
    // A copy the driver refuses is an error value naming what failed; the buffer is kept.
    g.mock.fail("cuMemcpyDtoHAsync_v2", 1, 0);
    let e = g.stats.copy_to_host_deferred(&t, &stream).unwrap_err();
    assert!(e.to_string().contains("device-to-host copy"), "{e}");
    assert_eq!(g.stats.deferred_copy_bytes(), 1 << 20);
    // Through the Dumper's contract.
    let shape = [n];
    let ct = CudaTensor::new(&g.stats, t, &shape, &stream).unwrap();
    let p = ct.copy_to_host_deferred().unwrap().expect("deferred");
    let mut out = vec![0u8; bytes.len()];
    p.wait_into(&mut out).unwrap();
    assert!(out == bytes);
    // An empty tensor is never deferred.
    let empty = DeviceTensor::from_slice(&dev, DType::Float32, 0).unwrap();
    assert!(
        g.stats
            .copy_to_host_deferred(&empty, &stream)
            .unwrap()
            .is_none()
    );
}

#[test]
fn deferred_copies_stop_at_their_pinned_cap() {
    let Some(g) = gpu() else { return };
    let stream = g.stats.context().default_stream();
    // 100 MiB of f32: the 128 MiB class; two fit in the 256 MiB cap.
    assert_eq!(dump_device_cuda::MAX_DEFERRED_COPY_BYTES, 256 << 20);
    let n = (100 << 20) / 4;
    let dev = stream.alloc_zeros::<f32>(n).unwrap();
    let t = DeviceTensor::from_slice(&dev, DType::Float32, n).unwrap();
    let a = g.stats.copy_to_host_deferred(&t, &stream).unwrap();
    let b = g.stats.copy_to_host_deferred(&t, &stream).unwrap();
    assert!(a.is_some() && b.is_some());
    assert!(
        g.stats
            .copy_to_host_deferred(&t, &stream)
            .unwrap()
            .is_none(),
        "a third 128 MiB buffer would pass the cap: the caller copies at once"
    );
    drop(a);
    let c = g.stats.copy_to_host_deferred(&t, &stream).unwrap();
    assert!(c.is_some(), "a buffer given back is lent again");
    drop((b, c));
    // A smaller class frees idle buffers of other classes to make room.
    let small = DeviceTensor::from_slice(&dev, DType::Float32, 1000).unwrap();
    let p = g.stats.copy_to_host_deferred(&small, &stream).unwrap();
    assert!(p.is_some());
    assert!(g.stats.deferred_copy_bytes() <= dump_device_cuda::MAX_DEFERRED_COPY_BYTES);
}
