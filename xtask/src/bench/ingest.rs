//! The `ingest` group: `opdump ingest` as a user runs it (the release binary, built without the
//! runtimes it does not use, as a subprocess,
//! the stream file in the page cache) on a generated agent stream of 10^6 stat records (10^5
//! with `--quick`), against `cat` of the same file to `/dev/null` (the baseline: reading the
//! bytes), in interleaved rounds (cat, ingest, cat, ingest, ...), medians reported.
//!
//! The stream is what an agent sends for a network of 100 kernels (one input and one output
//! each, f32 tensors of 64 to 4096 elements, MD5 on), 5000 steps; the config writes every
//! record as a `statistic.csv` row (max, min, avg, l2norm, count, md5). Printed: records/s,
//! CPU seconds (user + system) of `opdump ingest` per 10^6 records, bytes on the wire per
//! tensor against the tensors' own bytes.
//!
//! Environment: `OPDUMP_BENCH_DIR` puts the stream and the dump there (e.g. `/dev/shm`, so a
//! busy disk stays out of the figure; default: the target directory);
//! `OPDUMP_BENCH_INGEST_BASELINE=/path/to/opdump` times a second binary (an older build) in the
//! same interleaved rounds (cat, ingest, baseline, ...), on the same stream.

use std::{path::Path, process::Command, time::Instant};

use dump_core::{
    DType, Summary,
    wire::{
        BeginGraph, BeginStep, DTypeSet, EndStep, Frame, Hello, Io, KernelEntry, MAX_FRAME_LEN,
        MAX_WIRE_LEN, StatRecord, frame,
    },
};

use super::{Opts, Row, target_dir};

const KERNELS: u32 = 100;

/// Writes the stream to `path`; returns (records, stream bytes, tensor bytes).
fn generate(path: &Path, records: u64) -> Result<(u64, u64, u64), String> {
    let mut out = Vec::with_capacity(records as usize * 140);
    let mut seq = 0u32;
    let mut push = |f: Frame, out: &mut Vec<u8>| -> Result<(), String> {
        let mut raw = [0u8; MAX_FRAME_LEN];
        let n = f.build(seq, &mut raw).map_err(|e| e.to_string())?;
        let mut w = [0u8; MAX_WIRE_LEN];
        let m = frame::encode_wire(&raw[..n], &mut w).ok_or("frame too long")?;
        out.extend_from_slice(&w[..m]);
        seq = seq.wrapping_add(1);
        Ok(())
    };
    let name = |k: u32| format!("Default/network-Net/layer{k}-Dense/MatMul-op{k}");
    push(
        Frame::Hello(Hello {
            session: 1,
            agent: "bench".try_into().map_err(|_| "name")?,
            device: "generated".try_into().map_err(|_| "name")?,
            dtypes: DTypeSet::of(&[DType::Float32]),
            md5: true,
            sample_cap: 0,
        }),
        &mut out,
    )?;
    push(
        Frame::BeginGraph(BeginGraph {
            graph_id: 0,
            kernels: KERNELS,
        }),
        &mut out,
    )?;
    for k in 0..KERNELS {
        push(
            Frame::Kernel(KernelEntry {
                graph_id: 0,
                index: k,
                op_type: "MatMul".try_into().map_err(|_| "type")?,
                op: name(k).as_str().try_into().map_err(|_| "name")?,
            }),
            &mut out,
        )?;
    }
    let per_step = u64::from(KERNELS) * 2;
    let (mut sent, mut tensor_bytes, mut it) = (0u64, 0u64, 0u32);
    while sent < records {
        push(
            Frame::BeginStep(BeginStep {
                graph_id: 0,
                iteration: it,
            }),
            &mut out,
        )?;
        let n = per_step.min(records - sent);
        for i in 0..n {
            let k = (i / 2) as u32;
            let elems = 64u32 << (k % 7);
            let mut s = Summary::EMPTY;
            // A summary of the values (i, i+1, ...) without touching a tensor.
            s.count = u64::from(elems);
            s.max = f64::from(elems) + i as f64;
            s.min = -(i as f64) - 0.5;
            s.sum = 1.25 * f64::from(elems);
            s.sum_sq = 3.5 * f64::from(elems);
            s.pos = u64::from(elems) / 2;
            s.neg = u64::from(elems) - s.pos;
            let io = if i % 2 == 0 { Io::Input } else { Io::Output };
            let mut r = StatRecord::new(&name(k), io, 0, DType::Float32, &[elems], s)
                .map_err(|e| e.to_string())?
                .with_op_type("MatMul")
                .map_err(|e| e.to_string())?;
            r.iteration = it;
            r.md5 = Some(dump_core::hash::md5(&sent.to_le_bytes()));
            push(Frame::Stat(r), &mut out)?;
            tensor_bytes += u64::from(elems) * 4;
        }
        push(
            Frame::EndStep(EndStep {
                graph_id: 0,
                iteration: it,
                records: n as u32,
                dropped: 0,
            }),
            &mut out,
        )?;
        sent += n;
        it += 1;
    }
    std::fs::write(path, &out).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((sent, out.len() as u64, tensor_bytes))
}

/// CPU seconds (user + system) of the waited-for children of this process so far.
fn children_cpu() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a valid, writable `rusage`; getrusage only writes into it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, ru.as_mut_ptr()) };
    if rc != 0 {
        return f64::NAN;
    }
    // SAFETY: getrusage returned 0, so it filled the struct (and it was zeroed before).
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Wall seconds and CPU seconds (user + system) `cmd` takes (stdout and stderr discarded); an
/// error if it fails.
fn time(cmd: &mut Command) -> Result<(f64, f64), String> {
    let cpu = children_cpu();
    let t = Instant::now();
    let st = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| e.to_string())?;
    let s = t.elapsed().as_secs_f64();
    if !st.success() {
        return Err(format!("{cmd:?} exited with {st}"));
    }
    Ok((s, children_cpu() - cpu))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the group.
pub fn run(opts: &Opts, rows: &mut Vec<Row>) -> Result<(), String> {
    let bin = super::compare::opdump_release_with(&["--no-default-features"])?;
    let dir = std::env::var_os("OPDUMP_BENCH_DIR")
        .map_or_else(target_dir, std::path::PathBuf::from)
        .join("bench-ingest");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // A config's path may not hold "..": the canonical directory.
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let records = if opts.quick { 100_000 } else { 1_000_000 };
    let stream = dir.join("bench.opstream");
    let (records, bytes, tensor_bytes) = generate(&stream, records)?;
    let out = dir.join("out");
    let cfg = dir.join("data_dump.json");
    std::fs::write(
        &cfg,
        format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
            "support_device": [0], "statistic_category": ["max", "min", "avg", "l2norm",
            "count", "md5"]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
            out.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let baseline = std::env::var_os("OPDUMP_BENCH_INGEST_BASELINE").map(std::path::PathBuf::from);
    let ingest = |bin: &Path| {
        let _ = std::fs::remove_dir_all(&out);
        time(
            Command::new(bin)
                .arg("ingest")
                .arg(&stream)
                .arg("--config")
                .arg(&cfg),
        )
    };
    let (mut cat, mut ing, mut base) = (Vec::new(), Vec::new(), Vec::new());
    let _ = time(Command::new("cat").arg(&stream)); // warm the page cache
    for _ in 0..opts.runs.clamp(3, 15) {
        cat.push(time(Command::new("cat").arg(&stream))?.0);
        if let Some(b) = &baseline {
            base.push(ingest(b)?);
        }
        ing.push(ingest(&bin)?);
    }
    let rows_written = std::fs::read_dir(out.join("rank_0/Net/0"))
        .map_err(|e| e.to_string())?
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("statistic.csv")).ok())
        .map(|t| t.lines().count() as u64 - 1)
        .sum::<u64>();
    if rows_written != records {
        return Err(format!(
            "opdump ingest wrote {rows_written} rows for {records} records"
        ));
    }
    let per_m = 1e6 / records as f64;
    let report = |what: &str, runs: &[(f64, f64)]| {
        let mut wall: Vec<f64> = runs.iter().map(|r| r.0).collect();
        let mut cpu: Vec<f64> = runs.iter().map(|r| r.1).collect();
        let (w, c) = (median(&mut wall), median(&mut cpu));
        println!(
            "ingest: {what}: {w:.3} s = {:.2} M records/s ({:.1} MB/s), {:.2} CPU s per 10^6 \
             records (median of {})",
            records as f64 / w / 1e6,
            bytes as f64 / w / 1e6,
            c * per_m,
            runs.len()
        );
        w
    };
    let c = median(&mut cat);
    println!(
        "ingest: {records} stat records, {bytes} bytes in {} ({:.1} bytes per tensor on the \
         wire for {:.0} bytes of tensor on average, {:.4}x); cat {c:.4} s",
        dir.display(),
        bytes as f64 / records as f64,
        tensor_bytes as f64 / records as f64,
        bytes as f64 / tensor_bytes as f64,
    );
    if let Some(b) = &baseline {
        report(&format!("baseline {}", b.display()), &base);
    }
    let i = report("opdump ingest", &ing);
    for (kernel, s) in [("ingest-cat", c), ("ingest", i)] {
        rows.push(Row {
            kernel: kernel.into(),
            dtype: "bytes".into(),
            bytes: bytes as usize,
            threads: 1,
            gbps: bytes as f64 / s / 1e9,
            vs_read: Some(c / s),
            vs_numpy: None,
        });
    }
    Ok(())
}
