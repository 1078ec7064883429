//! The disk budget (`DumpOptions::disk_budget_bytes`, `OPDUMP_DISK_BUDGET_MB`): files stop at
//! the cap, rows go on, the report says what was skipped, and skipped device tensors are not
//! even copied.

use std::{
    fs,
    sync::atomic::{AtomicUsize, Ordering},
};

use dump_core::DType;
use dump_host::{
    DeviceTensor, DumpOptions, Dumper, TensorRef,
    device::{DeviceError, DeviceStatistics, StatsRequest},
    writer::WriterConfig,
};
use opdump::cli;
use opdump_tests::{
    config::{config, f32_bytes, no_env},
    csv::parse_statistic_csv,
    fsutil::{TempDir, file_name, npy_files},
};
use serde_json::json;

/// One f32 `[256]` file: 128 header bytes + 1024 data bytes.
const FILE: u64 = 128 + 1024;

fn dumper(tmp: &TempDir, saved_data: &str, budget: u64) -> Dumper {
    let cfg = config(tmp.path(), json!({"saved_data": saved_data}), json!({}));
    let opts = DumpOptions {
        disk_budget_bytes: Some(budget),
        ..DumpOptions::default()
    };
    Dumper::builder()
        .env(&no_env())
        .options(opts.clone())
        .open_json(cfg)
        .unwrap()
}

#[test]
fn files_stop_at_the_budget_and_rows_go_on() {
    let tmp = TempDir::new("disk-budget");
    let mut d = dumper(&tmp, "full", 3 * FILE + 100);
    d.begin_graph(0, &[]).unwrap();
    let step = d.begin_step();
    for i in 0..10 {
        let name = format!("Default/Add-op{i}");
        let k = step.kernel("Add", &name).unwrap();
        let data = f32_bytes(&[i as f32; 256]);
        k.output(0, TensorRef::host(DType::Float32, &[256], &data))
            .unwrap();
    }
    step.finish().unwrap();
    let report = d.close().unwrap();
    assert_eq!((report.files, report.bytes), (3, 3 * FILE));
    assert_eq!((report.skipped_files, report.skipped_bytes), (7, 7 * FILE));
    assert_eq!(report.rows, 10, "every row is still written");

    // The files kept are the first three kernels', complete.
    let mut names: Vec<String> = npy_files(tmp.path()).iter().map(|p| file_name(p)).collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    for (i, n) in names.iter().enumerate() {
        assert!(n.starts_with(&format!("Add.Default_Add-op{i}.")), "{n}");
    }
    for p in npy_files(tmp.path()) {
        assert_eq!(fs::metadata(&p).unwrap().len(), FILE);
    }
    let dir = tmp.path().join("rank_0/Net/0/0");
    let csv = parse_statistic_csv(&fs::read_to_string(dir.join("statistic.csv")).unwrap());
    let max = csv.col("Max Value");
    let maxes: Vec<&str> = csv.rows.iter().map(|r| r[max].as_str()).collect();
    assert_eq!(maxes, ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]);
}

/// A device tensor that counts how often it is copied to the host.
struct Counting {
    bytes: Vec<u8>,
    copies: AtomicUsize,
}

impl DeviceTensor for Counting {
    fn dtype(&self) -> DType {
        DType::Float32
    }
    fn shape(&self) -> &[usize] {
        &[256]
    }
    fn statistics(&self, _: &StatsRequest<'_>) -> Result<Option<DeviceStatistics>, DeviceError> {
        Err("host statistics, please".into())
    }
    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), DeviceError> {
        self.copies.fetch_add(1, Ordering::Relaxed);
        dst.copy_from_slice(&self.bytes);
        Ok(())
    }
}

/// Dumps the same device tensor as the output of six kernels, tensor-only, with a budget of
/// two files and `writer`; returns the report and how often the tensor was copied.
fn six_device_outputs(tag: &str, writer: WriterConfig) -> (dump_host::DumpReport, usize) {
    let tmp = TempDir::new(tag);
    let cfg = config(tmp.path(), json!({"saved_data": "tensor"}), json!({}));
    let opts = DumpOptions {
        disk_budget_bytes: Some(2 * FILE),
        writer,
        ..DumpOptions::default()
    };
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(opts.clone())
        .open_json(cfg)
        .unwrap();
    d.begin_graph(0, &[]).unwrap();
    let t = Counting {
        bytes: f32_bytes(&[1.5; 256]),
        copies: AtomicUsize::new(0),
    };
    let step = d.begin_step();
    for i in 0..6 {
        let name = format!("Default/Mul-op{i}");
        let k = step.kernel("Mul", &name).unwrap();
        k.output(0, TensorRef::device(&t)).unwrap();
    }
    step.finish().unwrap();
    let report = d.close().unwrap();
    let files = npy_files(tmp.path());
    assert_eq!(files.len(), 2);
    for p in files {
        assert!(dump_npy::read_file(&p).unwrap().data == t.bytes);
    }
    (report, t.copies.load(Ordering::Relaxed))
}

#[test]
fn a_tensor_only_dump_stops_copying_device_tensors_at_the_budget() {
    let (report, copies) = six_device_outputs("disk-budget-device", WriterConfig::default());
    assert_eq!((report.files, report.skipped_files), (2, 4));
    assert_eq!(report.skipped_bytes, 4 * FILE);
    // Two files written, the third refused after its copy; the last three never copied.
    assert_eq!(copies, 3);
}

#[test]
fn a_synchronous_tensor_only_dump_copies_no_refused_device_tensor() {
    // Written on the calling thread, device tensors are streamed: the budget is asked before
    // any copy, so the refused ones are never copied.
    let (report, copies) = six_device_outputs("disk-budget-device-sync", WriterConfig::sync());
    assert_eq!((report.files, report.skipped_files), (2, 4));
    assert_eq!(copies, 2);
}

#[test]
fn no_budget_means_no_limit() {
    let tmp = TempDir::new("disk-budget-none");
    let cfg = config(tmp.path(), json!({"saved_data": "tensor"}), json!({}));
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)
        .unwrap();
    d.begin_graph(0, &[]).unwrap();
    let step = d.begin_step();
    let data = f32_bytes(&[2.0; 256]);
    for i in 0..5 {
        let name = format!("Default/Add-op{i}");
        let k = step.kernel("Add", &name).unwrap();
        k.output(0, TensorRef::host(DType::Float32, &[256], &data))
            .unwrap();
    }
    step.finish().unwrap();
    let report = d.close().unwrap();
    assert_eq!((report.files, report.skipped_files), (5, 0));
}

#[test]
fn the_demo_takes_a_disk_budget_and_says_what_it_skipped() {
    let tmp = TempDir::new("disk-budget-demo");
    let out_dir = tmp.path().join("demo");
    let argv = [
        "opdump",
        "demo",
        "--steps",
        "1",
        "--no-baseline",
        "--categories",
        "default",
        "--disk-budget-mb",
        "1",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli::run(argv, &no_env(), &mut out, &mut err);
    let (out, err) = (
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("disk budget reached: "), "{out}");
    let written: u64 = npy_files(&out_dir)
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .sum();
    assert!(
        written > 0 && written <= 1 << 20,
        "{written} bytes of .npy files"
    );
    let bad = ["opdump", "demo", "--disk-budget-mb", "lots"];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_ne!(cli::run(bad, &no_env(), &mut out, &mut err), 0);
    let err = String::from_utf8(err).unwrap();
    assert!(
        err.contains("--disk-budget-mb") && err.contains("lots"),
        "{err}"
    );
}
