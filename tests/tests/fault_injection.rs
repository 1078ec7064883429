//! Fault injection at every I/O point of the writer (issue 13, campaign 1).
//!
//! A small demo-like dump (execution order, two steps of kernels with f32, bf16 and int32
//! tensors, one kernel whose file name passes NAME_MAX so `mapping.csv` is used, kernel
//! arguments, a parameter, tensors both queued and written directly) is run once to count the
//! filesystem calls it makes, then again for every call number `n` and every fault (`ENOSPC`,
//! `EIO`, `EACCES`, `EROFS`, `EMFILE`, a short write), with the writer synchronous and with two
//! threads. After each run:
//! - the run finished and the fault came back as an error (from `Step::finish` or `close`);
//! - every `.npy` under a final name is complete, every csv has its header and whole rows, no
//!   temporary file is left (`opdump_tests::invariants::check_tree`);
//! - the files, bytes and rows the Dumper reports equal what is on disk;
//! - the memory budget's peak stayed within its limit.
//!
//! `cargo test` runs it over the small dump; `cargo xtask hardening` sets
//! `OPDUMP_HARDENING_FULL=1`, which adds the TinyNet sequence (about 40 tensors per step).

use dump_core::DType;
use dump_host::{
    DumpOptions, Dumper, TensorRef,
    writer::{
        WriterConfig,
        faults::{self, Fault},
    },
};
use opdump_tests::{
    config::{config, f32_bytes, no_env},
    fsutil::TempDir,
    invariants::check_tree,
    tinynet,
};
use serde_json::json;

/// Which workload a run dumps.
#[derive(Clone, Copy, Debug)]
enum Workload {
    Small,
    TinyNet,
}

const BUDGET: usize = 64 << 10;

fn options(threads: usize) -> DumpOptions {
    DumpOptions {
        writer: WriterConfig {
            threads,
            budget_bytes: BUDGET,
            // 8 KiB and up: written on the caller's thread; smaller ones queued.
            direct_write_bytes: 8 << 10,
            ..WriterConfig::default()
        },
        ..DumpOptions::default()
    }
}

/// One dump into `root`; returns the errors it reported and the Dumper's final counts.
fn run(root: &std::path::Path, threads: usize, w: Workload) -> (Vec<String>, [u64; 3], usize) {
    let cfg = config(
        root,
        json!({"saved_data": "full", "statistic_category": ["max", "min", "l2norm", "md5"]}),
        json!({"save_kernel_args": true}),
    );
    let mut errors = Vec::new();
    let mut d = match Dumper::builder()
        .env(&no_env())
        .options(options(threads).clone())
        .open_json(cfg)
    {
        Ok(d) => d,
        Err(e) => return (vec![e.to_string()], [0; 3], 0),
    };
    let long = format!("Default/network/{}/MatMul-op7", "deep".repeat(70));
    let order: Vec<&str> = match w {
        Workload::Small => vec!["Default/Add-op0", "Default/Cast-op1", &long],
        Workload::TinyNet => tinynet::execution_order(),
    };
    if let Err(e) = d.begin_graph(0, &order) {
        errors.push(e.to_string());
    }
    let a = f32_bytes(&[1.0, -2.0, 3.5, 0.0, 7.0, -0.0]);
    let big = f32_bytes(&(0..3000).map(|i| i as f32 * 0.5).collect::<Vec<_>>());
    let bf16: Vec<u8> = (0..40u16).flat_map(|i| (i * 97).to_le_bytes()).collect();
    let ints: Vec<u8> = (0..16i32).flat_map(|i| (i - 8).to_le_bytes()).collect();
    for _ in 0..2 {
        let step = d.begin_step();
        let r = match w {
            Workload::TinyNet => tinynet::run_step(&step),
            Workload::Small => (|| {
                if let Some(k) = step.kernel("Add", "Default/Add-op0") {
                    k.input(0, TensorRef::host(DType::Float32, &[2, 3], &a))?;
                    k.input(1, TensorRef::host(DType::Float32, &[3000], &big))?;
                    k.output(0, TensorRef::host(DType::Float32, &[6], &a))?;
                    k.args(&[("transpose_a", "False")]);
                }
                if let Some(k) = step.kernel("Cast", "Default/Cast-op1") {
                    k.input(0, TensorRef::host(DType::BFloat16, &[40], &bf16))?;
                    k.output(0, TensorRef::host(DType::Int32, &[4, 4], &ints))?;
                }
                if let Some(k) = step.kernel("MatMul", &long) {
                    k.output(0, TensorRef::host(DType::Float32, &[3, 2], &a))?;
                }
                step.parameter("fc1.weight", TensorRef::host(DType::Int32, &[16], &ints))
            })(),
        };
        if let Err(e) = r {
            errors.push(e.to_string());
        }
        if let Err(e) = step.finish() {
            errors.push(e.to_string());
        }
    }
    let peak = d.writer().map_or(0, |w| w.budget().peak());
    if let Err(e) = d.close() {
        errors.push(e.to_string());
    }
    let p = d.progress();
    (errors, [p.files, p.bytes, p.rows], peak)
}

/// Runs `w` once per call number and fault in both writer modes (`full`: every fault at every
/// call; otherwise each call gets two of the six faults in turn, so every fault still meets
/// every third call); returns (runs, faults injected). Panics at the first run that breaks an
/// invariant.
fn campaign(w: Workload, full: bool) -> (u64, u64) {
    let (mut runs, mut injected) = (0, 0);
    for threads in [0, 2] {
        let clean = TempDir::new("faults-count");
        faults::arm(clean.path(), 0, Fault::ShortWrite);
        let (errors, counts, _) = run(clean.path(), threads, w);
        let (calls, none) = faults::disarm();
        assert!(
            errors.is_empty() && none == 0,
            "clean run failed: {errors:?}"
        );
        let disk = check_tree(clean.path()).unwrap();
        assert_eq!(counts, [disk.files, disk.bytes, disk.rows]);
        assert!(calls > 20, "only {calls} I/O calls seen");
        for (i, fault) in Fault::ALL.into_iter().enumerate() {
            for n in (1..=calls + 2).filter(|n| full || n % 3 == i as u64 % 3) {
                let tmp = TempDir::new("faults");
                faults::arm(tmp.path(), n, fault);
                let (errors, counts, peak) = run(tmp.path(), threads, w);
                let (_, hit) = faults::disarm();
                let what = format!("{w:?}, {threads} thread(s), call {n} of {calls}: {fault:?}");
                runs += 1;
                injected += hit;
                assert!(
                    hit == 0 || !errors.is_empty(),
                    "{what}: the fault was not reported"
                );
                let disk = check_tree(tmp.path()).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(
                    counts,
                    [disk.files, disk.bytes, disk.rows],
                    "{what}: reported files/bytes/rows differ from the disk ({errors:?})"
                );
                assert!(peak <= BUDGET, "{what}: memory peak {peak} > {BUDGET}");
            }
        }
    }
    (runs, injected)
}

#[test]
fn every_io_call_fails_once_and_nothing_is_corrupted_or_miscounted() {
    let full = std::env::var_os("OPDUMP_HARDENING_FULL").is_some();
    let (runs, injected) = campaign(Workload::Small, full);
    println!("fault injection (small dump): {runs} runs, {injected} faults injected and survived");
    if full {
        let (runs, injected) = campaign(Workload::TinyNet, true);
        println!(
            "fault injection (TinyNet, 2 steps): {runs} runs, {injected} faults injected and \
             survived"
        );
    }
}
