//! Which path a tensor's file takes: copied and queued, handed over, or written directly.

use std::{collections::HashMap, path::PathBuf, sync::Arc};

use dump_core::DType;
use dump_stats::device::{DeviceError, DeviceStatistics, StatsRequest};

use crate::{
    DumpOptions, Dumper, TensorRef,
    dumper::{DeviceTensor, shared::Shared},
    writer::{DEFAULT_DIRECT_WRITE_BYTES, WriterConfig},
};

pub(super) fn root(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-emit-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn dumper(root: &std::path::Path, saved: &str, writer: WriterConfig) -> Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "{saved}", "input_output": 0, "kernels": [],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    let opts = DumpOptions {
        writer,
        ..DumpOptions::default()
    };
    Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(opts.clone())
        .open_json(text.into_bytes())
        .unwrap()
}

/// `elems` f32 values, distinct per tensor.
fn f32_bytes(elems: usize, seed: u32) -> Vec<u8> {
    (0..elems)
        .flat_map(|i| ((i as u32 ^ seed) as f32).to_le_bytes())
        .collect()
}

/// The `.npy` file of kernel `op` in `dir` (final name only), if it exists.
fn npy_of(dir: &std::path::Path, op: &str) -> Option<dump_npy::NpyFile> {
    let e = std::fs::read_dir(dir).ok()?.find_map(|e| {
        let e = e.ok()?;
        let n = e.file_name().to_string_lossy().into_owned();
        (n.starts_with(&format!("{op}.")) && n.ends_with(".npy")).then_some(e.path())
    })?;
    Some(dump_npy::read_file(e).unwrap())
}

/// The Dumper's internals (kept across `begin_step`, which borrows the Dumper).
pub(super) fn shared(d: &Dumper) -> Arc<Shared> {
    Arc::clone(d.shared.as_ref().unwrap())
}

/// (jobs queued to the writer threads, writes run on the caller's thread).
fn counts(s: &Shared) -> (u64, u64) {
    (
        s.out.files.writer().queued_jobs(),
        s.out.files.writer().inline_jobs(),
    )
}

const SMALL: usize = 4 << 10; // 16 KiB of f32
const LARGE: usize = 32 << 10; // 128 KiB of f32

fn two_threads(direct_write_bytes: usize) -> WriterConfig {
    WriterConfig {
        threads: 2,
        budget_bytes: 1 << 20,
        direct_write_bytes,
        ..WriterConfig::default()
    }
}

#[test]
fn large_host_tensors_are_written_directly_small_ones_copied_and_queued() {
    let r = root("paths");
    let mut d = dumper(&r, "tensor", two_threads(64 << 10));
    let s = shared(&d);
    let dir = r.join("rank_0/Net/0/0");
    let small = f32_bytes(SMALL, 1);
    let large = f32_bytes(LARGE, 2);
    let bf16: Vec<u8> = (0..LARGE * 2)
        .flat_map(|i| (i as u16).to_le_bytes())
        .collect();
    let step = d.begin_step();
    let k = step.kernel("Small", "Default/Small-op0").unwrap();
    k.output(0, TensorRef::host(DType::Float32, &[SMALL], &small))
        .unwrap();
    drop(k);
    assert_eq!(counts(&s), (1, 0), "small tensor queued");
    let k = step.kernel("Large", "Default/Large-op1").unwrap();
    k.output(0, TensorRef::host(DType::Float32, &[LARGE], &large))
        .unwrap();
    drop(k);
    assert_eq!(
        counts(&s),
        (1, 1),
        "large tensor written on the caller's thread"
    );
    // Written directly: complete under its final name before the call returned.
    assert_eq!(npy_of(&dir, "Large").expect("Large written").data, large);
    let k = step.kernel("Half", "Default/Half-op2").unwrap();
    k.output(0, TensorRef::host(DType::BFloat16, &[LARGE * 2], &bf16))
        .unwrap();
    drop(k);
    assert_eq!(
        counts(&s),
        (1, 2),
        "bf16 of 128 KiB (256 KiB widened) directly"
    );
    let half = npy_of(&dir, "Half").expect("Half written");
    assert_eq!((half.descr.as_str(), half.data.len()), ("<f4", LARGE * 8));
    step.finish().unwrap();
    // The queued copy's buffer returns to the pool when its write job ends: wait for it.
    s.out.files.writer().flush().unwrap();
    let budget_peak = s.out.files.writer().budget().peak();
    assert!(
        (SMALL * 4..LARGE * 4).contains(&budget_peak),
        "only the small copy went through the budget ({budget_peak})"
    );
    assert!(
        (SMALL * 4..LARGE * 4).contains(&s.out.files.pool().idle_bytes()),
        "only the small copy buffer was pooled ({})",
        s.out.files.pool().idle_bytes()
    );
    let report = d.close().unwrap();
    assert_eq!(
        (report.files, report.bytes),
        (3, (SMALL * 4 + LARGE * 12 + 384) as u64)
    );
    assert_eq!(npy_of(&dir, "Small").expect("Small written").data, small);
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn the_default_threshold_is_8_mib() {
    let r = root("default");
    let cfg = WriterConfig {
        threads: 2,
        ..WriterConfig::default()
    };
    assert_eq!(cfg.direct_write_bytes, DEFAULT_DIRECT_WRITE_BYTES);
    assert_eq!(DEFAULT_DIRECT_WRITE_BYTES, 8 << 20);
    let mut d = dumper(&r, "tensor", cfg);
    let s = shared(&d);
    let at = f32_bytes(DEFAULT_DIRECT_WRITE_BYTES / 4, 3);
    let step = d.begin_step();
    let k = step.kernel("Below", "Default/Below-op0").unwrap();
    k.output(
        0,
        TensorRef::host(DType::Float32, &[at.len() / 4 - 1], &at[4..]),
    )
    .unwrap();
    drop(k);
    assert_eq!(counts(&s), (1, 0), "8 MiB - 4 bytes: copied and queued");
    let k = step.kernel("At", "Default/At-op1").unwrap();
    k.output(0, TensorRef::host(DType::Float32, &[at.len() / 4], &at))
        .unwrap();
    drop(k);
    assert_eq!(counts(&s), (1, 1), "8 MiB: written directly");
    step.finish().unwrap();
    assert_eq!(d.close().unwrap().files, 2);
    let dir = r.join("rank_0/Net/0/0");
    assert_eq!(npy_of(&dir, "At").unwrap().data, at);
    assert_eq!(npy_of(&dir, "Below").unwrap().data, &at[4..]);
    std::fs::remove_dir_all(&r).unwrap();
}

/// A device tensor whose "device memory" is a host vector.
struct FakeDevice {
    shape: [usize; 1],
    data: Vec<u8>,
}

impl DeviceTensor for FakeDevice {
    fn dtype(&self) -> DType {
        DType::Float32
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn statistics(&self, _: &StatsRequest<'_>) -> Result<Option<DeviceStatistics>, DeviceError> {
        Err("no device statistics".into())
    }
    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), DeviceError> {
        dst.copy_from_slice(&self.data);
        Ok(())
    }
}

#[test]
fn a_device_copy_is_handed_to_the_writer_without_another_copy() {
    let r = root("device");
    // Budget 1 MiB, direct from 64 KiB: a 128 KiB device tensor is still queued (its host
    // copy is ours already), one of 1 MiB is written directly (the budget cannot hold it).
    let mut d = dumper(&r, "full", two_threads(64 << 10));
    let s = shared(&d);
    let mid = FakeDevice {
        shape: [LARGE],
        data: f32_bytes(LARGE, 4),
    };
    let huge = FakeDevice {
        shape: [1 << 18],
        data: f32_bytes(1 << 18, 5),
    };
    let step = d.begin_step();
    let k = step.kernel("Mid", "Default/Mid-op0").unwrap();
    k.output(0, TensorRef::device(&mid)).unwrap();
    drop(k);
    assert_eq!(counts(&s), (1, 0), "device copy queued");
    let k = step.kernel("Huge", "Default/Huge-op1").unwrap();
    k.output(0, TensorRef::device(&huge)).unwrap();
    drop(k);
    assert_eq!(
        counts(&s),
        (1, 1),
        "device copy beyond the budget written directly"
    );
    step.finish().unwrap();
    assert_eq!(
        s.out.files.pool().idle_bytes(),
        0,
        "no pooled copy buffer was used"
    );
    assert!(
        s.out.files.writer().budget().peak() >= LARGE * 4,
        "the queued copy held budget"
    );
    let report = d.close().unwrap();
    assert_eq!((report.files, report.rows), (2, 2));
    let dir = r.join("rank_0/Net/0/0");
    assert_eq!(npy_of(&dir, "Mid").unwrap().data, mid.data);
    assert_eq!(npy_of(&dir, "Huge").unwrap().data, huge.data);
    std::fs::remove_dir_all(&r).unwrap();
}

/// A device tensor that hands its bytes over in `chunk`-byte pieces (failing at piece
/// `fail_at`, if set) and must never be copied whole.
struct Chunked {
    dtype: DType,
    shape: [usize; 1],
    data: Vec<u8>,
    chunk: usize,
    fail_at: Option<usize>,
    pieces: std::sync::atomic::AtomicUsize,
}

impl DeviceTensor for Chunked {
    fn dtype(&self) -> DType {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn statistics(&self, _: &StatsRequest<'_>) -> Result<Option<DeviceStatistics>, DeviceError> {
        Err("no device statistics".into())
    }
    fn copy_to_host(&self, _: &mut [u8]) -> Result<(), DeviceError> {
        panic!("a streamed tensor must not be copied whole")
    }
    fn copy_chunks(
        &self,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), DeviceError>,
    ) -> Result<(), DeviceError> {
        for (i, c) in self.data.chunks(self.chunk).enumerate() {
            if self.fail_at == Some(i) {
                return Err("link lost".into());
            }
            self.pieces
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            sink(c)?;
        }
        Ok(())
    }
}

/// A dumper writing synchronously with every statistic column.
fn sync_full(root: &std::path::Path) -> Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "full", "input_output": 0, "kernels": [],
        "support_device": [0], "statistic_category": ["max", "min", "avg", "count",
        "negative zero count", "positive zero count", "nan count", "negative inf count",
        "positive inf count", "zero count", "md5", "l2norm", "hash:sha1"]}},
        "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    let opts = DumpOptions {
        writer: WriterConfig::sync(),
        ..DumpOptions::default()
    };
    Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(opts.clone())
        .open_json(text.into_bytes())
        .unwrap()
}

/// The statistic.csv rows of `dir` without the timestamp column.
fn rows(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("statistic.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let mut f: Vec<&str> = l.split(',').collect();
            f.remove(4);
            f.join(",")
        })
        .collect()
}

#[test]
fn large_device_tensors_stream_into_the_file_and_the_row() {
    // 1 MiB + 12 bytes of f32 and of bf16 (values with NaN, inf, zeros of both signs), and
    // int4 / uint1 tensors of as many elements (the last byte partly used), handed over in
    // 37-byte pieces, which split f32 and bf16 elements and straddle every FUSE_CHUNK boundary.
    let n = (1 << 18) + 3;
    let mut f32s: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.37 - 150.0).collect();
    f32s[5] = f32::NAN;
    f32s[77] = f32::INFINITY;
    f32s[n - 1] = -0.0;
    let f32_data: Vec<u8> = f32s.iter().flat_map(|v| v.to_le_bytes()).collect();
    let bf16_data: Vec<u8> = f32s
        .iter()
        .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
        .collect();
    let int4_data: Vec<u8> = (0..n.div_ceil(2)).map(|i| (i * 37 % 251) as u8).collect();
    let uint1_data: Vec<u8> = (0..n.div_ceil(8)).map(|i| (i * 91 % 253) as u8).collect();
    for (dtype, data) in [
        (DType::Float32, f32_data),
        (DType::BFloat16, bf16_data),
        (DType::Int4, int4_data),
        (DType::UInt1, uint1_data),
    ] {
        let streamed = root("stream");
        let mut d = sync_full(&streamed);
        let dev = Chunked {
            dtype,
            shape: [n],
            data: data.clone(),
            chunk: 37,
            fail_at: None,
            pieces: Default::default(),
        };
        let step = d.begin_step();
        let k = step.kernel("Dev", "Default/Dev-op0").unwrap();
        k.output(0, TensorRef::device(&dev)).unwrap();
        drop(k);
        step.finish().unwrap();
        d.close().unwrap();
        assert_eq!(
            dev.pieces.load(std::sync::atomic::Ordering::Relaxed),
            data.len().div_ceil(37)
        );

        let copied = root("stream-host");
        let mut d = sync_full(&copied);
        let step = d.begin_step();
        let k = step.kernel("Dev", "Default/Dev-op0").unwrap();
        k.output(0, TensorRef::host(dtype, &[n], &data)).unwrap();
        drop(k);
        step.finish().unwrap();
        d.close().unwrap();

        let (a, b) = (
            streamed.join("rank_0/Net/0/0"),
            copied.join("rank_0/Net/0/0"),
        );
        assert_eq!(rows(&a), rows(&b), "{dtype}: streamed row = host row");
        let (fa, fb) = (npy_of(&a, "Dev").unwrap(), npy_of(&b, "Dev").unwrap());
        assert_eq!(fa.descr, fb.descr, "{dtype}");
        assert!(fa.data == fb.data, "{dtype}: streamed file = host file");
        std::fs::remove_dir_all(&streamed).unwrap();
        std::fs::remove_dir_all(&copied).unwrap();
    }
}

#[test]
fn a_device_failure_while_streaming_is_the_tensors_error_and_leaves_no_file() {
    let r = root("stream-fail");
    let mut d = sync_full(&r);
    let dev = Chunked {
        dtype: DType::Float32,
        shape: [4096],
        data: f32_bytes(4096, 9),
        chunk: 1024,
        fail_at: Some(3),
        pieces: Default::default(),
    };
    let step = d.begin_step();
    let k = step.kernel("Dev", "Default/Dev-op0").unwrap();
    let e = k.output(0, TensorRef::device(&dev)).unwrap_err();
    assert!(
        e.to_string().contains("device copy failed: link lost"),
        "{e}"
    );
    drop(k);
    step.finish().expect("not a write failure");
    let report = d.close().unwrap();
    assert_eq!((report.files, report.bytes, report.rows), (0, 0, 0));
    let dir = r.join("rank_0/Net/0/0");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| !n.ends_with(".npy") && !n.starts_with(".opdump-tmp")),
        "{names:?}"
    );
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn a_sampled_device_copy_holds_only_the_sample() {
    // Sampling is Ascend-only; the sample of a device tensor's host copy is queued, and the
    // budget must see (and the job hold) the sample, not the whole copy.
    let r = root("sample");
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "tensor", "input_output": 0, "kernels": [],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true, "sample_mode": 1,
        "sample_num": 16}}}}"#,
        r.display()
    );
    let opts = DumpOptions {
        device: crate::config::Device::Ascend,
        writer: two_threads(64 << 10),
        ..DumpOptions::default()
    };
    let mut d = Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(opts.clone())
        .open_json(text.into_bytes())
        .unwrap();
    let s = shared(&d);
    let dev = FakeDevice {
        shape: [LARGE],
        data: f32_bytes(LARGE, 7),
    };
    let step = d.begin_step();
    let k = step.kernel("Dev", "Default/Dev-op0").unwrap();
    k.output(0, TensorRef::device(&dev)).unwrap();
    drop(k);
    assert_eq!(counts(&s), (1, 0), "the sample is queued");
    step.finish().unwrap();
    let peak = s.out.files.writer().budget().peak();
    assert!(
        peak < 1024,
        "budget charged for the 64-byte sample, not the copy ({peak})"
    );
    d.close().unwrap();
    let npy = npy_of(&r.join("rank_0/Net/0/0"), "Dev").unwrap();
    assert_eq!(npy.data, &dev.data[..64]);
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn a_handed_over_buffer_is_charged_for_its_allocation() {
    let mut v = vec![7u8; 1 << 16];
    v.truncate(64);
    let (v, cost) = crate::dumper::tensor_files::hand_over(v);
    assert_eq!(v, [7u8; 64]);
    assert!(v.capacity() < 1 << 16, "the rest of the copy is freed");
    assert_eq!(
        cost,
        v.capacity() + crate::dumper::tensor_files::JOB_OVERHEAD
    );
}

#[test]
fn a_synchronous_writer_queues_nothing() {
    let r = root("sync");
    let mut d = dumper(&r, "tensor", WriterConfig::sync());
    let s = shared(&d);
    let small = f32_bytes(SMALL, 6);
    let step = d.begin_step();
    for i in 0..3 {
        let name = format!("Default/S-op{i}");
        let k = step.kernel("S", &name).unwrap();
        k.output(0, TensorRef::host(DType::Float32, &[SMALL], &small))
            .unwrap();
    }
    step.finish().unwrap();
    assert_eq!(counts(&s), (0, 3));
    assert_eq!(d.close().unwrap().files, 3);
    std::fs::remove_dir_all(&r).unwrap();
}

/// Dumps `t` as output 0 of one kernel with a synchronous full dumper under `r`; returns the
/// rows (without timestamps) and the `.npy` file.
fn dump_one(r: &std::path::Path, t: TensorRef<'_>) -> (Vec<String>, dump_npy::NpyFile) {
    let mut d = sync_full(r);
    let step = d.begin_step();
    let k = step.kernel("Dev", "Default/Dev-op0").unwrap();
    k.output(0, t).unwrap();
    drop(k);
    step.finish().unwrap();
    d.close().unwrap();
    let dir = r.join("rank_0/Net/0/0");
    let out = (rows(&dir), npy_of(&dir, "Dev").expect("file written"));
    std::fs::remove_dir_all(r).unwrap();
    out
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Any chunking of a device tensor, packed int4/uint1 included, gives the host copy's row
    /// (statistics, md5, sha1) and file bytes.
    #[test]
    fn any_device_chunking_gives_the_host_dump(
        dtype in proptest::sample::select(vec![
            DType::Float32, DType::BFloat16, DType::Float16, DType::Int4, DType::UInt1, DType::Int8,
        ]),
        elems in 1usize..3000,
        chunk in 1usize..200,
        seed in proptest::prelude::any::<u8>(),
    ) {
        let len = dtype.storage_bytes(elems).unwrap();
        let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
        let dev = Chunked {
            dtype,
            shape: [elems],
            data: data.clone(),
            chunk,
            fail_at: None,
            pieces: Default::default(),
        };
        let streamed = dump_one(&root("prop-stream"), TensorRef::device(&dev));
        let shape = [elems];
        let host = dump_one(&root("prop-host"), TensorRef::host(dtype, &shape, &data));
        proptest::prop_assert_eq!(&streamed.0, &host.0);
        proptest::prop_assert_eq!(&streamed.1.descr, &host.1.descr);
        proptest::prop_assert!(streamed.1.data == host.1.data, "{} file bytes differ", dtype);
        proptest::prop_assert_eq!(dev.pieces.load(std::sync::atomic::Ordering::Relaxed), len.div_ceil(chunk));
    }
}

/// With the flight recorder a device tensor that would be streamed to its file (synchronous
/// writer: every tensor "direct") is copied to the host and held instead; a NaN in it fires
/// the recorder, and the file written then holds the device's bytes.
#[test]
fn the_flight_recorder_holds_a_device_tensor_instead_of_streaming_it() {
    let r = root("flight-device");
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "full", "input_output": 0, "kernels": [],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}},
        "opdump": {{"flight_recorder": {{"steps": 1}}}}}}"#,
        r.display()
    );
    let mut d = Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions {
            writer: WriterConfig::sync(),
            ..DumpOptions::default()
        })
        .events(crate::diag::EventSink::ignore())
        .open_json(text.into_bytes())
        .unwrap();
    let mut data = f32_bytes(LARGE, 7);
    let quiet = FakeDevice {
        shape: [LARGE],
        data: data.clone(),
    };
    data[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
    let bad = FakeDevice {
        shape: [LARGE],
        data,
    };
    for t in [&quiet, &bad] {
        let step = d.begin_step();
        let k = step.kernel("Dev", "Default/Dev-op0").unwrap();
        k.output(0, TensorRef::device(t)).unwrap();
        drop(k);
        if std::ptr::eq(t, &quiet) {
            assert!(!r.exists(), "held, not streamed");
            assert!(d.flight_recorder_bytes() >= (LARGE * 4) as u64);
        }
        step.finish().unwrap();
    }
    d.close().unwrap();
    for (step, t) in [(0, &quiet), (1, &bad)] {
        let dir = r.join(format!("rank_0/Net/0/{step}"));
        assert_eq!(npy_of(&dir, "Dev").unwrap().data, t.data, "step {step}");
    }
    let trigger = std::fs::read_to_string(r.join("rank_0/trigger.json")).unwrap();
    assert!(trigger.contains("\"nan\": 1"), "{trigger}");
    std::fs::remove_dir_all(&r).unwrap();
}
