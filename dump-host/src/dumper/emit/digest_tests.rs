//! Digests computed on the writer threads (multi-buffer MD5, SHA-1) give the rows, in the
//! order and with the bytes, that one MD5 stream per tensor on the caller's thread gives.

use std::{collections::HashMap, path::Path};

use dump_core::DType;

use crate::{DumpOptions, Dumper, TensorRef, writer::WriterConfig};

use super::tests::{root, shared};

/// A dumper with every statistic column, `saved_data` `saved`.
fn every_column(root: &Path, saved: &str, writer: WriterConfig) -> Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "{saved}", "input_output": 0, "kernels": [],
        "support_device": [0], "statistic_category": ["max", "min", "avg", "count",
        "negative zero count", "positive zero count", "nan count", "negative inf count",
        "positive inf count", "zero count", "md5", "l2norm", "hash:sha1"]}},
        "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    let opts = DumpOptions {
        writer,
        ..DumpOptions::default()
    };
    Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(opts)
        .open_json(text.into_bytes())
        .unwrap()
}

/// The tensors of one step: mixed dtypes and sizes (1 byte to 1.5 MiB, a sampled-size tail of
/// odd lengths), distinct per step; `(dtype, elems, bytes)`.
fn tensors(step: u32) -> Vec<(DType, usize, Vec<u8>)> {
    let mut x = 0x9e37_79b9_u32 ^ step.wrapping_mul(0x85eb_ca6b);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let dtypes = [
        DType::Float32,
        DType::Float16,
        DType::BFloat16,
        DType::Int8,
        DType::Int64,
        DType::Bool,
        DType::Float64,
    ];
    (0..70)
        .map(|i| {
            let dtype = dtypes[i % dtypes.len()];
            let size = dtype.storage_bytes(1).unwrap();
            let elems = match i {
                // Over the direct-write line below: written (and hashed) on the caller's thread.
                7 => (1536 << 10) / size,
                // Larger than one SHA-1 slice (20480 elements): MindSpore's hash of hashes.
                13 | 27 => 20480 + 333,
                _ => 1 + (next() as usize % (96 << 10)) / size,
            };
            let bytes = (0..elems * size)
                .map(|_| match dtype {
                    DType::Bool => (next() & 1) as u8,
                    _ => next() as u8,
                })
                .collect();
            (dtype, elems, bytes)
        })
        .collect()
}

/// Dumps 3 steps of [`tensors`] and returns each step's `statistic.csv` and the writer's
/// (queued, inline) job counts.
fn dump(r: &Path, saved: &str, writer: WriterConfig) -> (Vec<String>, (u64, u64)) {
    let mut d = every_column(r, saved, writer);
    let s = shared(&d);
    for step_no in 0..3 {
        let ts = tensors(step_no);
        let step = d.begin_step();
        for (i, (dtype, elems, bytes)) in ts.iter().enumerate() {
            let name = format!("Default/Op{i}-op{i}");
            let k = step.kernel("Op", &name).unwrap();
            k.output(0, TensorRef::host(*dtype, &[*elems], bytes))
                .unwrap();
        }
        step.finish().unwrap();
    }
    let counts = (
        s.out.files.writer().queued_jobs(),
        s.out.files.writer().inline_jobs(),
    );
    d.close().unwrap();
    let tables = (0..3)
        .map(|i| {
            std::fs::read_to_string(r.join(format!("rank_0/Net/0/{i}/statistic.csv"))).unwrap()
        })
        .collect();
    (tables, counts)
}

/// The table without its timestamp column (runs differ in it).
fn untimed(table: &str) -> Vec<String> {
    table
        .lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split(',').collect();
            f.remove(4);
            f.join(",")
        })
        .collect()
}

fn threads() -> WriterConfig {
    WriterConfig {
        threads: 2,
        budget_bytes: 4 << 20,
        direct_write_bytes: 1 << 20,
        ..WriterConfig::default()
    }
}

/// Checks `table` against the one-stream digests of step `step`'s tensors, row by row.
fn check_digests(table: &str, step: u32) {
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let md5_col = header.iter().position(|h| *h == "MD5").expect("MD5 column");
    let sha1_col = header
        .iter()
        .position(|h| *h == "SHA1" || h.contains("sha1") || h.contains("SHA1"))
        .expect("SHA-1 column");
    let ts = tensors(step);
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), ts.len(), "one row per tensor");
    for (i, (row, (dtype, elems, bytes))) in rows.iter().zip(&ts).enumerate() {
        let f: Vec<&str> = row.split(',').collect();
        assert!(
            f[1].contains(&format!("Op{i}-op{i}")),
            "row {i} in order: {row}"
        );
        let md5 = dump_core::hash::md5(bytes);
        assert_eq!(
            f[md5_col],
            dump_core::hash::hex(&md5).as_str(),
            "md5 of {i}"
        );
        let sha1 = dump_core::hash::ms_sha1(*dtype, bytes, *elems);
        assert_eq!(
            f[sha1_col],
            dump_core::hash::hex(&sha1).as_str(),
            "sha1 of {i}"
        );
    }
}

#[test]
fn digests_on_the_writer_give_the_one_stream_rows_in_order() {
    for saved in ["full", "statistic"] {
        let (a, b) = (
            root(&format!("mb-sync-{saved}")),
            root(&format!("mb-thr-{saved}")),
        );
        // The old path: a synchronous writer hashes every tensor on the caller's thread, one
        // MD5 stream each.
        let (one_stream, _) = dump(&a, saved, WriterConfig::sync());
        let (writer, (queued, inline)) = dump(&b, saved, threads());
        if saved == "full" {
            // 69 of 70 files per step queued in batches (one written directly).
            assert_eq!(
                inline, 3,
                "the 1.5 MiB tensor of each step written directly"
            );
            assert!(
                (3..=30).contains(&queued),
                "{queued} hashing jobs for 207 files"
            );
        } else if super::STAT_ONLY_DIGESTS_ON_WRITER {
            assert_eq!(inline, 0);
            assert!(
                (3..=30).contains(&queued),
                "{queued} hashing jobs for 210 rows"
            );
        } else {
            assert_eq!((queued, inline), (0, 0), "hashed on the caller's thread");
        }
        for (step, (x, y)) in one_stream.iter().zip(&writer).enumerate() {
            assert_eq!(
                untimed(x),
                untimed(y),
                "{saved} step {step}: same rows, same bytes"
            );
            check_digests(y, step as u32);
        }
        std::fs::remove_dir_all(&a).unwrap();
        std::fs::remove_dir_all(&b).unwrap();
    }
}

#[test]
fn rows_waiting_for_their_digests_are_written_by_the_flush() {
    let r = root("mb-flush");
    let mut d = every_column(&r, "full", threads());
    let ts = tensors(0);
    let step = d.begin_step();
    for (i, (dtype, elems, bytes)) in ts.iter().enumerate().take(5) {
        let name = format!("Default/Op{i}-op{i}");
        let k = step.kernel("Op", &name).unwrap();
        k.output(0, TensorRef::host(*dtype, &[*elems], bytes))
            .unwrap();
    }
    step.finish().unwrap();
    // The step's end does not wait for the writer: the rows are written once their digests
    // are in, at the latest by the flush.
    d.flush().unwrap();
    let table = std::fs::read_to_string(r.join("rank_0/Net/0/0/statistic.csv")).unwrap();
    assert_eq!(table.lines().count(), 6, "header and 5 rows:\n{table}");
    assert_eq!(d.close().unwrap().rows, 5);
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn a_step_whose_rows_pass_the_batch_threshold_while_tensors_are_gathered_does_not_hang() {
    // More than `BATCH_BYTES` of rows in one step, half formatted at once (tensors of 64 bytes
    // are written, and hashed, on the caller's thread here), half waiting for digests: the
    // rows' own flush comes while the last tensors still wait to be queued for hashing, so it
    // must leave them pending, not wait for them.
    let r = root("mb-threshold");
    let n = 6000;
    let (tx, rx) = std::sync::mpsc::channel();
    let dir = r.clone();
    std::thread::spawn(move || {
        let cfg = WriterConfig {
            direct_write_bytes: 64,
            ..threads()
        };
        let mut d = every_column(&dir, "full", cfg);
        let step = d.begin_step();
        for i in 0..n {
            let name =
                format!("Default/network-WithLossCell/_backbone-LeNet5/conv1-Conv2d/Op{i}-op{i}");
            let v: Vec<u8> = (0..1 + 15 * (i % 2))
                .flat_map(|j| ((i + j) as f32).to_le_bytes())
                .collect();
            let k = step.kernel("Conv2D", &name).unwrap();
            k.output(0, TensorRef::host(DType::Float32, &[v.len() / 4], &v))
                .unwrap();
        }
        step.finish().unwrap();
        let _ = tx.send(d.close().unwrap().rows);
    });
    let rows = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the dump finishes (a flush waiting for tensors not yet queued hangs)");
    assert_eq!(rows, n as u64);
    let table = std::fs::read_to_string(r.join("rank_0/Net/0/0/statistic.csv")).unwrap();
    assert!(table.len() > crate::writer::BATCH_BYTES);
    for (i, row) in table.lines().skip(1).enumerate() {
        assert!(
            row.contains(&format!("_Op{i}-op{i},")),
            "row {i} in its place: {row}"
        );
    }
    std::fs::remove_dir_all(&r).unwrap();
}
