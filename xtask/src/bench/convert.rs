//! The `convert` group: `opdump convert --format NCHW` on a generated set of CANN dump files
//! (FLOAT16 NC1HWC0 activations and FRACTAL_Z weights, v2 containers), as a user runs it (the
//! release binary as a subprocess, files in the page cache), against
//! `cann_convert_numpy.py` (msaccucmp's approach in one process: whole files in memory, numpy
//! reshape/transpose/slice, `np.save`) and against reading the bytes (`cat` to `/dev/null`).
//! Two copy floors are timed in the same rounds: `cat` of each file into a file (one process),
//! and the same copy in as many processes as opdump has threads, the ceiling of reading and
//! writing the bytes on this machine with no conversion at all. A third: writing the outputs'
//! bytes alone into as many new files, in as many threads, from one buffer (`cargo xtask
//! write-files`; nothing read, nothing converted), what every converter pays at the least for
//! its outputs' new page-cache pages. GB/s counts the input bytes.
//! Peak RSS of the opdump run is printed.
//!
//! Sizes: the 4 GiB: 41 NC1HWC0 files of 64 MiB and 41 FRACTAL_Z files of 36 MiB
//! (4100 MiB), fewer when the disk cannot hold the inputs and two outputs with 4 GiB to spare
//! (said so); `OPDUMP_BENCH_CONVERT_PAIRS=k` sets the number of pairs; 4 small files with
//! `--quick`. The previous round's outputs are deleted before each round (so at most the
//! inputs and two outputs are on disk), and the share of the inputs in the page cache is
//! measured before every opdump run (`fincore`) and printed.
//!
//! `OPDUMP_BENCH_CONVERT_COLD=1` drops the page cache (after a `sync`; root only) before every
//! timed command, so that each reads its inputs from the disk, as when converting a dump that
//! is no longer in memory.
//!
//! `OPDUMP_BENCH_CONVERT_OUT=DIR` puts the three outputs (the copy's, opdump's and numpy's)
//! under `DIR` instead of beside the inputs, e.g. on tmpfs (`/dev/shm/...`) to time the
//! converters without the disk's writeback.

use std::{io::Write, path::Path};

use std::process::Command;

use super::{
    Opts, Row,
    compare::{python, timed},
    target_dir,
};

/// The release `opdump` without runtimes (convert needs none; tract and CUDA stay out of the
/// build).
fn opdump_release_lean() -> Result<std::path::PathBuf, String> {
    let st = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "-q",
            "-p",
            "opdump",
            "--bin",
            "opdump",
            "--no-default-features",
        ])
        .status()
        .map_err(|e| format!("cargo build: {e}"))?;
    if !st.success() {
        return Err("cargo build --release -p opdump --no-default-features failed".into());
    }
    Ok(target_dir().join("release/opdump"))
}

const PY_CONVERT: &str = include_str!("cann_convert_numpy.py");

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn ld(out: &mut Vec<u8>, field: u32, body: &[u8]) {
    varint(out, u64::from(field << 3 | 2));
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

fn shape(dims: &[u64]) -> Vec<u8> {
    let mut packed = Vec::new();
    for &d in dims {
        varint(&mut packed, d);
    }
    let mut s = Vec::new();
    ld(&mut s, 1, &packed);
    s
}

/// One v2 CANN file with a single FLOAT16 output of `format` (3 NC1HWC0, 4 FRACTAL_Z).
fn cann_file(path: &Path, format: u64, dev: &[u64], orig: &[u64]) -> Result<u64, String> {
    let size = dev.iter().product::<u64>() * 2;
    let mut t = vec![0x08, 2, 0x10];
    varint(&mut t, format);
    ld(&mut t, 3, &shape(dev));
    t.push(0x30);
    varint(&mut t, size);
    ld(&mut t, 7, &shape(orig));
    let mut msg = Vec::new();
    ld(&mut msg, 1, b"2.0");
    ld(&mut msg, 3, &t);
    ld(&mut msg, 6, b"Default/network/op");
    let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let io = |e: std::io::Error| format!("{}: {e}", path.display());
    w.write_all(&(msg.len() as u64).to_le_bytes()).map_err(io)?;
    w.write_all(&msg).map_err(io)?;
    // Finite f16 values 1.0 .. 2.0 (0x3C00 + k), a different phase per file.
    let phase = format as u16 * 7 + dev[0] as u16;
    let block: Vec<u8> = (0..(1u32 << 19))
        .flat_map(|i| {
            (0x3C00u16 + ((i as u16).wrapping_mul(31).wrapping_add(phase) & 0x3FF)).to_le_bytes()
        })
        .collect();
    let mut left = size;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        w.write_all(&block[..n]).map_err(io)?;
        left -= n as u64;
    }
    w.flush().map_err(io)?;
    Ok(8 + msg.len() as u64 + size)
}

/// Free bytes for an unprivileged user on the filesystem holding `dir` (`df`'s Avail).
fn free_bytes(dir: &Path) -> Option<u64> {
    let o = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .ok()?;
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()
}

/// The share of `files`' bytes in the page cache (util-linux `fincore`), if it runs.
fn resident(files: &[String]) -> Option<f64> {
    let o = Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES,SIZE"])
        .args(files)
        .output()
        .ok()?;
    let (mut res, mut size) = (0u64, 0u64);
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        let mut it = l.split_whitespace().map(|x| x.parse::<u64>().ok());
        res += it.next()??;
        size += it.next()??;
    }
    (size > 0).then(|| res as f64 / size as f64)
}

/// Runs the group.
pub fn run(opts: &Opts, rows: &mut Vec<Row>) -> Result<(), String> {
    let bin = opdump_release_lean()?;
    let bin = bin.to_str().ok_or("non-UTF-8 target dir")?;
    let dir = target_dir().join("bench-convert");
    let _ = std::fs::remove_dir_all(&dir);
    let src = dir.join("20260101120000/0/Net/0/0");
    std::fs::create_dir_all(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    let (mut pairs, n5hd, nfz) = if opts.quick {
        (2, 8, 256)
    } else {
        (41, 128, 4096)
    };
    if let Some(k) = std::env::var("OPDUMP_BENCH_CONVERT_PAIRS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        pairs = k.max(1);
    }
    let outs_dir = std::env::var_os("OPDUMP_BENCH_CONVERT_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.clone());
    let apart = outs_dir != dir;
    if apart {
        std::fs::create_dir_all(&outs_dir).map_err(|e| format!("{}: {e}", outs_dir.display()))?;
        println!("convert: outputs under {}", outs_dir.display());
    }
    // One pair: 64 MiB + 36 MiB of input. The inputs and two outputs (opdump's and numpy's;
    // the copy's is deleted before they run) must fit with 4 GiB to spare.
    let pair = 100u64 << 20;
    let fits = |d: &Path, copies: u64| {
        free_bytes(d).map(|avail| avail.saturating_sub(4 << 30) / copies / pair)
    };
    let fit = if apart {
        match (fits(&dir, 1), fits(&outs_dir, 2)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    } else {
        fits(&dir, 3)
    };
    if let Some(fit) = fit
        && fit < pairs
    {
        println!(
            "convert: the free space on {} and {} holds {fit} pairs ({} MiB) instead of {pairs}",
            dir.display(),
            outs_dir.display(),
            fit * 100
        );
        pairs = fit.max(1);
    }
    let mut total = 0u64;
    let mut files = Vec::new();
    for k in 0..pairs {
        // NC1HWC0 (N, 4, 64, 64, 16) of NCHW (N, 60, 64, 64): 4 padding channels per block set.
        let a = src.join(format!("Conv2D.conv{k}.{k}.0.17000000000{k:05}"));
        total += cann_file(&a, 3, &[n5hd, 4, 64, 64, 16], &[n5hd, 60, 64, 64])?;
        // FRACTAL_Z (32·3·3, N/16, 16, 16) of weights (N, 500, 3, 3).
        let w = src.join(format!("Conv2D.weight{k}.{k}.1.17000000001{k:05}"));
        total += cann_file(&w, 4, &[32 * 9, nfz / 16, 16, 16], &[nfz, 500, 3, 3])?;
        files.push(a.display().to_string());
        files.push(w.display().to_string());
    }
    let total = total as usize;
    let out_rs = outs_dir.join("out-opdump");
    let out_py = outs_dir.join("out-numpy");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cat: Vec<&str> = vec!["cat"];
    cat.extend(files.iter().map(String::as_str));
    let srcs = dir.join("20260101120000").display().to_string();
    let outs = out_rs.display().to_string();
    let conv = [bin, "convert", &srcs, "--out", &outs, "--format", "NCHW"];
    let runs = opts.runs.min(5);
    // Warm the page cache; then interleave the three, one run each per round, medians.
    let _ = timed(1, &cat);
    // A second floor: the same bytes read and written to files beside the outputs (`cat` into
    // a file per input), so the write into the page cache, which every converter pays and
    // `cat` to /dev/null does not, is measured too.
    let out_cp = outs_dir.join("out-copy");
    let copy_script = format!(
        "rm -rf '{0}' && mkdir -p '{0}' && for f in \"$@\"; do cat \"$f\" > '{0}'/\"${{f##*/}}\"; done",
        out_cp.display()
    );
    let mut copy: Vec<&str> = vec!["bash", "-c", &copy_script, "bash"];
    copy.extend(files.iter().map(String::as_str));
    // The copy's ceiling on this machine: the same copy in as many processes as opdump has
    // threads, files dealt round-robin (the most any converter can reach here, with a bare
    // copy standing in for the conversion).
    let out_cpn = outs_dir.join("out-copy-all-cores");
    let copy_all_script = {
        let mut s = format!("rm -rf '{0}' && mkdir -p '{0}' && {{ ", out_cpn.display());
        for t in 0..threads.max(1) {
            s.push_str("for f in");
            for f in files.iter().skip(t).step_by(threads.max(1)) {
                s.push_str(&format!(" '{f}'"));
            }
            s.push_str(&format!(
                "; do cat \"$f\" > '{}'/\"${{f##*/}}\"; done & ",
                out_cpn.display()
            ));
        }
        s.push_str("wait; }");
        s
    };
    let copy_all: Vec<&str> = vec!["bash", "-c", &copy_all_script];
    // The outputs' bytes (npy data; the headers are noise) written alone, in `threads` threads.
    let out_bytes = pairs * (n5hd * 60 * 64 * 64 + nfz * 500 * 9) * 2;
    let out_wr = outs_dir.join("out-write-only");
    let xtask = std::env::current_exe().map_err(|e| format!("xtask's own path: {e}"))?;
    let write_args = [
        xtask.display().to_string(),
        "write-files".into(),
        out_wr.display().to_string(),
        out_bytes.to_string(),
        files.len().to_string(),
        threads.to_string(),
    ];
    let write_only: Vec<&str> = write_args.iter().map(String::as_str).collect();
    let mut t_mem = Vec::new();
    let mut t_cp = Vec::new();
    let mut t_cpn = Vec::new();
    let (mut t_cat, mut t_rs, mut t_py, mut rss) = (Vec::new(), Vec::new(), Vec::new(), 0u64);
    let mut py_args = vec![out_py.display().to_string()];
    py_args.extend(files.iter().cloned());
    let py_ref: Vec<&str> = py_args.iter().map(String::as_str).collect();
    let mut cached = Vec::new();
    // OPDUMP_BENCH_CONVERT_COLD=1: every timed command starts with the inputs out of the page
    // cache (synced, then dropped: root only), as when converting a dump on disk.
    let cold = std::env::var_os("OPDUMP_BENCH_CONVERT_COLD").is_some_and(|v| v != "0");
    let uncache = || -> Result<(), String> {
        if cold {
            let _ = Command::new("sync").status();
            std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
                format!("OPDUMP_BENCH_CONVERT_COLD needs root: /proc/sys/vm/drop_caches: {e}")
            })?;
        }
        Ok(())
    };
    if cold {
        println!("convert: cold inputs (the page cache dropped before every timed command)");
    }
    for _ in 0..runs {
        uncache()?;
        if let Some((s, _)) = timed(1, &cat) {
            t_cat.push(s);
        }
        // The previous round's outputs go first: at most the inputs and two outputs at once.
        let _ = std::fs::remove_dir_all(&out_rs);
        let _ = std::fs::remove_dir_all(&out_py);
        uncache()?;
        if let Some((s, _)) = timed(1, &copy) {
            t_cp.push(s);
        }
        let _ = std::fs::remove_dir_all(&out_cp);
        uncache()?;
        if let Some((s, _)) = timed(1, &copy_all) {
            t_cpn.push(s);
        }
        let _ = std::fs::remove_dir_all(&out_cpn);
        if let Some((s, _)) = timed(1, &write_only) {
            t_mem.push(s);
        }
        let _ = std::fs::remove_dir_all(&out_wr);
        uncache()?;
        if let Some(c) = resident(&files) {
            cached.push(c);
        }
        if let Some((s, r)) = timed(1, &conv) {
            t_rs.push(s);
            rss = rss.max(r);
        }
        uncache()?;
        if let Some(s) = python(PY_CONVERT, &py_ref) {
            t_py.push(s);
        }
    }
    if !cached.is_empty() {
        let lo = cached.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "convert: inputs in the page cache before each opdump run: {:.1}% at the least ({} rounds)",
            lo * 100.0,
            cached.len()
        );
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| total as f64 / v[v.len() / 2] / 1e9)
    };
    let (read, ours, np, cp) = (median(t_cat), median(t_rs), median(t_py), median(t_cp));
    let (cpn, mem) = (median(t_cpn), median(t_mem));
    // Same arrays from both converters (one file of each format).
    for f in files.iter().take(2) {
        let name = Path::new(f)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        let hit = |d: &Path| {
            std::fs::read_dir(d)
                .ok()
                .into_iter()
                .flatten()
                .flatten()
                .find(|e| e.file_name().to_string_lossy().starts_with(name))
                .map(|e| e.path())
        };
        if let (Some(a), Some(b)) = (hit(&out_rs), hit(&out_py)) {
            // The data after each header (opdump writes MindSpore's header spacing, numpy its
            // own; both v1.0: 10 bytes + the u16 header length).
            let data = |p: &Path| {
                std::fs::read(p).ok().map(|b| {
                    let h = 10 + usize::from(u16::from_le_bytes([b[8], b[9]]));
                    b[h.min(b.len())..].to_vec()
                })
            };
            let same = data(&a) == data(&b);
            println!("convert: {} same data as numpy's: {same}", a.display());
            if !same {
                return Err(format!("{} differs from {}", a.display(), b.display()));
            }
        }
    }
    println!(
        "opdump convert: {} files, {} MiB, peak RSS {} MiB",
        files.len(),
        total >> 20,
        rss / 1024
    );
    if let (Some(o), Some(g)) = (ours, cp) {
        println!("opdump convert: {:.2}x the copy (cat into files)", o / g);
    }
    if let (Some(o), Some(g)) = (ours, cpn) {
        println!(
            "opdump convert: {:.2}x the copy in {threads} processes (this machine's ceiling \
             for reading and writing the bytes: {:.2}x numpy, {:.2}x cat)",
            o / g,
            np.map_or(f64::NAN, |n| g / n),
            read.map_or(f64::NAN, |r| g / r)
        );
    }
    if let (Some(o), Some(m)) = (ours, mem) {
        println!(
            "opdump convert: {:.2}x writing its outputs' {} MiB alone into new files in \
             {threads} threads (nothing read or converted: {:.2}x numpy, {:.2}x cat)",
            o / m,
            out_bytes >> 20,
            np.map_or(f64::NAN, |n| m / n),
            read.map_or(f64::NAN, |r| m / r)
        );
    }
    // (what, dtype, threads, GB/s, whether the numpy ratio is given)
    let table = [
        ("convert:cat", "bytes", 1, read, false),
        ("convert:copy", "bytes", 1, cp, false),
        ("convert:copy-all-cores", "bytes", threads, cpn, true),
        ("convert:write-all-cores", "bytes", threads, mem, true),
        ("convert:numpy", "float16", 1, np, false),
        ("convert", "float16", threads, ours, true),
    ];
    for (kernel, dtype, threads, gbps, vs_np) in table {
        if let Some(g) = gbps {
            rows.push(Row {
                kernel: kernel.into(),
                dtype: dtype.into(),
                bytes: total,
                threads,
                gbps: g,
                vs_read: read.filter(|_| kernel != "convert:cat").map(|r| g / r),
                vs_numpy: np.filter(|_| vs_np).map(|n| g / n),
            });
        }
    }
    // OPDUMP_BENCH_KEEP=1 keeps the generated files (to profile `opdump convert` on them).
    if std::env::var_os("OPDUMP_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if apart {
        for d in [&out_rs, &out_py, &out_cp, &out_cpn, &out_wr] {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    Ok(())
}

/// `cargo xtask write-files DIR BYTES FILES THREADS`: writes BYTES into FILES new files under
/// a new DIR (removed first), files dealt round-robin over THREADS threads, each written from
/// one reused 2 MiB buffer: the writes a converter makes, with nothing read or converted.
pub fn write_files(args: &[String]) -> Result<(), String> {
    let usage = "write-files DIR BYTES FILES THREADS";
    let dir = std::path::PathBuf::from(args.first().ok_or(format!("{usage}: no DIR"))?);
    let num = |i: usize, what: &str| {
        args.get(i)
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|&v| v > 0)
            .ok_or_else(|| format!("{usage}: {what} must be a positive integer"))
    };
    let (bytes, files, threads) = (num(1, "BYTES")?, num(2, "FILES")?, num(3, "THREADS")?);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let per = bytes.div_ceil(files);
    let dir = &dir;
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<(), String> {
                    let buf = vec![1u8; 2 << 20];
                    for k in (t..files).step_by(threads) {
                        let path = dir.join(format!("out{k}"));
                        let io = |e: std::io::Error| format!("{}: {e}", path.display());
                        let mut f = std::fs::File::create(&path).map_err(io)?;
                        let mut left = per;
                        while left > 0 {
                            let n = left.min(buf.len());
                            f.write_all(&buf[..n]).map_err(io)?;
                            left -= n;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().map_err(|_| "a writer panicked".to_string())?)
    })
}
