//! The Dumper under stress: concurrent producers, hostile kernel names, a small memory
//! budget, and write errors (a file where a directory must go; a full file system).

use std::{collections::HashSet, fs};

use dump_core::DType;
use dump_host::{DumpOptions, Dumper, Error, TensorRef, writer::WriterConfig};
use opdump_test_support::Tmpfs;
use opdump_tests::{
    config::{ALL_CATEGORIES, config, f32_bytes, no_env},
    csv::parse_statistic_csv,
    fsutil::{TempDir, file_name, npy_files, walk},
};
use serde_json::json;

#[test]
fn eight_threads_on_one_step_lose_no_row_and_interleave_none() {
    const THREADS: usize = 8;
    const KERNELS: usize = 150;
    let tmp = TempDir::new("threads");
    let cfg = config(
        tmp.path(),
        json!({"saved_data": "full", "statistic_category": ALL_CATEGORIES}),
        json!({}),
    );
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)
        .unwrap();
    d.begin_graph(0, &[]).unwrap();
    let step = d.begin_step();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let step = &step;
            s.spawn(move || {
                for i in 0..KERNELS {
                    let name = format!("Default/thread{t}/Add-op{i}");
                    let k = step.kernel("Add", &name).expect("all kernels wanted");
                    // Values encode (thread, kernel, io) so a mixed-up row is detected.
                    let base = (t * 10_000 + i * 10) as f32;
                    let input = f32_bytes(&[base, base + 1.0, base + 2.0]);
                    let output = f32_bytes(&[base + 5.0; 40]);
                    k.input(0, TensorRef::host(DType::Float32, &[3], &input))
                        .unwrap();
                    k.output(0, TensorRef::host(DType::Float32, &[4, 10], &output))
                        .unwrap();
                }
            });
        }
    });
    step.finish().unwrap();
    let report = d.close().unwrap();
    let total = THREADS * KERNELS * 2;
    assert_eq!(report.rows as usize, total);
    assert_eq!(report.files as usize, total);

    let dir = tmp.path().join("rank_0/Net/0/0");
    let csv = parse_statistic_csv(&fs::read_to_string(dir.join("statistic.csv")).unwrap());
    assert_eq!(csv.rows.len(), total, "no row lost");
    let (name, io, max, ts, shape) = (
        csv.col("Op Name"),
        csv.col("IO"),
        csv.col("Max Value"),
        csv.col("Timestamp"),
        csv.col("Shape"),
    );
    let files: HashSet<String> = npy_files(&dir).iter().map(|p| file_name(p)).collect();
    assert_eq!(files.len(), total, "every npy present");
    let mut seen = HashSet::new();
    for r in &csv.rows {
        let (t, i) = r[name]
            .strip_prefix("Default_thread")
            .and_then(|s| s.split_once("_Add-op"))
            .map(|(t, i)| (t.parse::<usize>().unwrap(), i.parse::<usize>().unwrap()))
            .unwrap_or_else(|| panic!("op name {:?}", r[name]));
        let base = (t * 10_000 + i * 10) as f64;
        let (want_max, want_shape) = if r[io] == "input" {
            (base + 2.0, "(3)")
        } else {
            (base + 5.0, "(4,10)")
        };
        assert_eq!(r[max].parse::<f64>().unwrap(), want_max, "row {r:?}");
        assert_eq!(r[shape], want_shape);
        assert!(seen.insert((t, i, r[io].clone())), "duplicate row {r:?}");
        let npy = format!(
            "Add.{}.0.0.{}.{}.0.DefaultFormat.Float32.npy",
            r[name], r[ts], r[io]
        );
        assert!(files.contains(&npy), "row pairs with {npy}");
    }
}

#[test]
fn hostile_kernel_names_stay_inside_the_dump_dir() {
    let tmp = TempDir::new("hostile");
    let root = tmp.path().join("a/b/dump");
    let cfg = config(&root, json!({"saved_data": "full"}), json!({}));
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)
        .unwrap();
    d.begin_graph(0, &[]).unwrap();
    let long = format!("Default/{}/MatMul-op0", "very-long-scope/".repeat(20));
    assert!(long.len() > 255);
    let names: Vec<(&str, String)> = vec![
        ("Add", "../../x".into()),
        ("Add", "a/b".into()),
        ("Add", "x\0y".into()),
        ("Add", "..".into()),
        ("Add", "/etc/passwd".into()),
        ("Add", "with space\\and\\backslash".into()),
        ("Add", "new\nline".into()),
        ("Add", "comma,in,name".into()),
        ("../T", "Default/Sub-op0".into()),
        ("MatMul", long.clone()),
    ];
    let data = f32_bytes(&[1.0, -2.0]);
    let step = d.begin_step();
    for (op, n) in &names {
        let k = step.kernel(op, n).expect("wanted");
        k.output(0, TensorRef::host(DType::Float32, &[2], &data))
            .unwrap();
    }
    step.finish().unwrap();
    let report = d.close().unwrap();
    assert_eq!(report.files as usize, names.len(), "every tensor written");

    // Nothing outside the dump root: the temp dir holds only a/b/dump/...
    for e in walk(tmp.path()) {
        assert!(
            e.path.starts_with(&root) || root.starts_with(&e.path),
            "{} is outside the dump root",
            e.path.display()
        );
    }
    let iter_dir = root.join("rank_0/Net/0/0");
    let npys = npy_files(&root);
    assert_eq!(npys.len(), names.len());
    for p in &npys {
        assert_eq!(p.parent(), Some(iter_dir.as_path()), "{}", p.display());
        let f = file_name(p);
        assert!(f.len() <= 255, "{f}");
        assert!(
            !f.contains('/') && !f.contains('\0') && !f.contains(".."),
            "{f:?}"
        );
        assert!(!f.contains('\n'), "{f:?}");
    }
    // The long name got a short, deterministic name and a mapping.csv line.
    let mapping = fs::read_to_string(iter_dir.join("mapping.csv")).unwrap();
    let lines: Vec<&str> = mapping.lines().collect();
    assert_eq!(lines.len(), 1, "{mapping}");
    let (short, full) = lines[0].split_once(',').unwrap();
    assert!(iter_dir.join(short).is_file(), "{short} exists");
    assert!(short.starts_with("opdump-") && short.ends_with(".npy"));
    assert!(full.starts_with("MatMul.Default_very-long-scope_") && full.len() > 255);
    assert!(!full.contains('/'));
    // Rows: one per tensor, whole, Op Name sanitised.
    let csv = parse_statistic_csv(&fs::read_to_string(iter_dir.join("statistic.csv")).unwrap());
    assert_eq!(csv.rows.len(), names.len());
    let on = csv.col("Op Name");
    for r in &csv.rows {
        assert!(!r[on].contains('/') && !r[on].contains('\0') && !r[on].contains(".."));
    }
    // A comma in a name must not split the row (parse_statistic_csv checked the field count).
    assert!(csv.rows.iter().any(|r| r[on] == "comma_in_name"));
    assert!(
        csv.rows.iter().any(|r| r[csv.col("Op Type")] == "___T"),
        "op type sanitised as in the file name"
    );
}

#[test]
fn memory_budget_bounds_bytes_in_flight_and_loses_nothing() {
    const TENSORS: usize = 48;
    const ELEMS: usize = 64 << 10; // 256 KiB per tensor
    const BUDGET: usize = 600 << 10; // room for two tensors, not three
    let tmp = TempDir::new("budget");
    let opts = DumpOptions {
        writer: WriterConfig {
            threads: 1,
            budget_bytes: BUDGET,
            ..WriterConfig::default()
        },
        ..DumpOptions::default()
    };
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(opts.clone())
        .open_json(config(tmp.path(), json!({"input_output": 2}), json!({})))
        .unwrap();
    d.begin_graph(0, &[]).unwrap();
    // Tensors made up front, so the producer submits faster than one writer thread can
    // create, write and rename files: the budget, not the producer, sets the pace.
    let expected: Vec<(String, Vec<u8>)> = (0..TENSORS)
        .map(|i| {
            let v: Vec<f32> = (0..ELEMS).map(|j| (i * ELEMS + j) as f32).collect();
            (format!("Big.Default_Big-op{i}"), f32_bytes(&v))
        })
        .collect();
    let names: Vec<String> = (0..TENSORS).map(|i| format!("Default/Big-op{i}")).collect();
    let step = d.begin_step();
    for (name, (_, bytes)) in names.iter().zip(&expected) {
        let k = step.kernel("Big", name).unwrap();
        k.output(0, TensorRef::host(DType::Float32, &[ELEMS], bytes))
            .unwrap();
    }
    step.finish().unwrap();
    let peak = d.writer().unwrap().budget().peak();
    let one_job = ELEMS * 4 + 256;
    assert!(peak <= BUDGET, "peak {peak} within the budget {BUDGET}");
    assert!(
        peak >= one_job,
        "jobs were admitted through the budget ({peak})"
    );
    eprintln!("budget {BUDGET} B, job {one_job} B, peak in flight {peak} B");
    let report = d.close().unwrap();
    assert_eq!(report.files as usize, TENSORS, "nothing dropped");
    let dir = tmp.path().join("rank_0/Net/0/0");
    let files = npy_files(&dir);
    assert_eq!(files.len(), TENSORS);
    for (prefix, v) in expected {
        let p = files
            .iter()
            .find(|p| file_name(p).starts_with(&format!("{prefix}.")))
            .unwrap_or_else(|| panic!("{prefix} written"));
        let npy = dump_npy::read_file(p).unwrap();
        assert_eq!(npy.data, v, "{prefix} content");
    }
}

/// The text of a write error (panics on any other error).
fn write_error_text(e: &Error) -> String {
    assert!(matches!(e, Error::Write(_)), "a write error, got {e}");
    e.to_string()
}

#[test]
fn write_error_when_a_file_blocks_a_directory_is_reported_not_raised() {
    // Works as root too: no permission bit stops root, but a file where a directory must be
    // created stops everyone.
    let tmp = TempDir::new("blocked");
    let rank = tmp.path().join("rank_0");
    fs::create_dir_all(&rank).unwrap();
    fs::write(rank.join("Net"), b"not a directory").unwrap();
    let cfg = config(tmp.path(), json!({"saved_data": "full"}), json!({}));
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)
        .unwrap();
    d.begin_graph(0, &["Default/Add-op0"]).unwrap();
    let data = f32_bytes(&[1.0, 2.0]);
    let mut errors = Vec::new();
    for _ in 0..3 {
        let step = d.begin_step();
        let k = step.kernel("Add", "Default/Add-op0").unwrap();
        // The tensor calls themselves succeed: I/O failures never reach the hot path.
        k.input(0, TensorRef::host(DType::Float32, &[2], &data))
            .unwrap();
        k.output(0, TensorRef::host(DType::Float32, &[2], &data))
            .unwrap();
        drop(k);
        if let Err(e) = step.finish() {
            errors.push(write_error_text(&e));
        }
    }
    if let Err(e) = d.close() {
        errors.push(write_error_text(&e));
    }
    assert_eq!(
        errors.len(),
        3,
        "every step reports its failure: {errors:?}"
    );
    for e in &errors {
        assert!(e.contains(&rank.join("Net").display().to_string()), "{e}");
    }
    // Metadata and execution order (not blocked) were still written.
    assert!(rank.join(".dump_metadata/config.json").is_file());
    assert!(
        rank.join("execution_order/ms_execution_order_graph_0.csv")
            .is_file()
    );
}

#[test]
fn write_error_on_a_full_file_system_is_returned_by_close() {
    let tmp = TempDir::new("enospc");
    let Some(mnt) = Tmpfs::mount(&tmp.path().join("mnt"), "256k") else {
        return;
    };
    let root = mnt.path().join("dump");
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(config(&root, json!({"saved_data": "full"}), json!({})))
        .unwrap();
    d.begin_graph(0, &[]).unwrap();
    let big = f32_bytes(&vec![0.5f32; 32 << 10]); // 128 KiB per file: the third cannot fit
    let mut errors = Vec::new();
    let step = d.begin_step();
    for i in 0..6 {
        let name = format!("Default/Fill-op{i}");
        let k = step.kernel("Fill", &name).unwrap();
        k.output(0, TensorRef::host(DType::Float32, &[32 << 10], &big))
            .unwrap();
    }
    if let Err(e) = step.finish() {
        errors.push(write_error_text(&e));
    }
    match d.close() {
        Err(e) => errors.push(write_error_text(&e)),
        Ok(r) => assert!(!errors.is_empty(), "a full disk must be reported ({r:?})"),
    }
    let all = errors.join("\n");
    assert!(all.contains(&root.display().to_string()), "{all}");
    assert!(
        all.contains("No space left")
            || all.contains("storage full")
            || all.contains("short write"),
        "{all}"
    );
    // Whatever made it to a final name is whole.
    for p in npy_files(&root) {
        let npy = dump_npy::read_file(&p).expect("no truncated file under a final name");
        assert_eq!(npy.data.len(), 128 << 10);
    }
}
