//! The `compare` group: `opdump compare` and `opdump stats` as a user runs them (the release
//! binary as a subprocess, files in the page cache), against numpy computing the same in one
//! process and against reading the bytes (`cat` to `/dev/null`).
//!
//! - `compare`: two dumps of 16 x 64 MiB f32 (4 MiB x 16 with `--quick`); B is A with every
//!   1000th element scaled by 1.0001. GB/s counts the bytes of both dumps. `vs_read` is against
//!   `cat A B > /dev/null`, `vs_numpy` against `numpy_compare.py`-style code: per pair
//!   `np.load` both, cosine, max abs/rel error, the 0.001/0.005 ratios, the `allclose` count,
//!   max ULP distance and non-finite mismatches.
//! - `stats-cli` / `stats-cli+hash`: `opdump stats` on one 256 MiB f32 file (16 MiB with
//!   `--quick`) with its default columns (the 11 value columns) / `--all` (adding md5 and
//!   MindSpore's sha1), against numpy computing the same
//!   statistics (plus `hashlib` md5 and sha1 for the hashed row) after `np.load`.
//!
//! - `stats-dir+hash`: `opdump stats --all` on a directory of 256 x 4 MiB f32 files (64 with
//!   `--quick`), the files' MD5s hashed together in multi-buffer lanes, against numpy +
//!   `hashlib` (md5 and sha1) doing the same per file in one process.
//!
//! - `compare-pt`: an msprobe tensor dump whose tensors are PyTorch `.pt` files (16 x 64 MiB
//!   f32, 1 GiB; 16 x 4 MiB with `--quick`; written by `torch.save`) against the same dump in
//!   `.npy`, both with msprobe's `dump.json`. Baselines from the same interleaved rounds: `cat`
//!   of both dumps' tensor files, `opdump compare` of the `.npy` dump against itself (what the
//!   `.pt` reader costs), and `torch.load` + `np.load` + the numpy metrics above per pair.
//!   Needs torch (`tools/install-torch.sh`); without it the rows are left out with a note.
//!
//! Peak RSS of each opdump run (`getrusage` of the child, through python3) is printed.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use super::{Opts, Row, target_dir};

const PY_TIMED: &str = r#"
import resource, subprocess, sys, time
runs = int(sys.argv[1]); cmd = sys.argv[2:]
times = []
for _ in range(runs):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    times.append(time.perf_counter() - t)
    if r.returncode not in (0, 1):
        print("error", r.returncode); sys.exit(1)
times.sort()
print(times[len(times) // 2], resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"#;

/// The per-pair metrics `opdump compare` computes, in numpy, for arrays `a` and `b`: cosine,
/// max abs/rel error, the 0.001/0.005 ratios, the `allclose` count, max ULP distance and
/// non-finite mismatches. Shared by the compare scripts below.
const PY_METRICS: &str = r#"
def ordered(x):
    i = x.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7fffffff), i)
def metrics(a, b):
    fin = np.isfinite(a) & np.isfinite(b)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    mismatch = np.count_nonzero(~fin & ~same)
    x = a[fin].astype(np.float64); y = b[fin].astype(np.float64)
    cos = np.dot(x, y) / np.sqrt(np.dot(x, x) * np.dot(y, y))
    d = np.abs(x - y); ay = np.abs(y)
    max_abs = d.max()
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(d == 0, 0.0, d / ay)
    max_rel = rel.max()
    r1 = np.count_nonzero(d > 0.001 * ay); r5 = np.count_nonzero(d > 0.005 * ay)
    nc = np.count_nonzero(d > 1e-6 + 1e-4 * ay)
    ulp = np.abs(ordered(a[fin]) - ordered(b[fin])).max()
    return cos, max_abs, max_rel, r1, r5, nc, ulp, mismatch
"#;

/// numpy's compare of two directories of `.npy` files: per pair `np.load` both, then
/// [`PY_METRICS`].
const PY_COMPARE: &str = r#"
import sys, time, glob, os
import numpy as np
a_dir, b_dir = sys.argv[1], sys.argv[2]
t = time.perf_counter()
for fa in sorted(glob.glob(os.path.join(a_dir, "*.npy"))):
    metrics(np.load(fa), np.load(os.path.join(b_dir, os.path.basename(fa))))
print(time.perf_counter() - t)
"#;

const PY_STATS: &str = r#"
import sys, time, hashlib
import numpy as np
path, hashed = sys.argv[1], sys.argv[2] == "1"
times = []
for _ in range(3):
    t = time.perf_counter()
    x = np.load(path)
    r = (np.max(x), np.min(x), np.mean(x), x.size, np.count_nonzero(np.signbit(x) & (x == 0)),
         np.count_nonzero(~np.signbit(x) & (x == 0)), np.count_nonzero(np.isnan(x)),
         np.count_nonzero(x == -np.inf), np.count_nonzero(x == np.inf), np.count_nonzero(x == 0),
         np.linalg.norm(x.astype(np.float64)))
    if hashed:
        b = x.tobytes(); hashlib.md5(b).hexdigest(); hashlib.sha1(b).hexdigest()
    times.append(time.perf_counter() - t)
times.sort()
print(times[1])
"#;

const PY_STATS_DIR: &str = r#"
import sys, time, hashlib, glob, os
import numpy as np
files = sorted(glob.glob(os.path.join(sys.argv[1], "*.npy")))
times = []
for _ in range(3):
    t = time.perf_counter()
    for path in files:
        x = np.load(path)
        r = (np.max(x), np.min(x), np.mean(x), x.size, np.count_nonzero(np.signbit(x) & (x == 0)),
             np.count_nonzero(~np.signbit(x) & (x == 0)), np.count_nonzero(np.isnan(x)),
             np.count_nonzero(x == -np.inf), np.count_nonzero(x == np.inf),
             np.count_nonzero(x == 0), np.linalg.norm(x.astype(np.float64)))
        b = x.tobytes(); hashlib.md5(b).hexdigest(); hashlib.sha1(b).hexdigest()
    times.append(time.perf_counter() - t)
times.sort()
print(times[1])
"#;

/// Writes the `compare-pt` dumps: `{root}/pt` and `{root}/npy`, msprobe layout
/// (`step0/rank0/dump.json`, `dump_tensor_data/`), `files` outputs of `per` bytes of f32 each.
const PY_PT_DUMPS: &str = r#"
import json, os, sys
import numpy as np, torch
root, files, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
elems = per // 4
for fmt in ("pt", "npy"):
    d = os.path.join(root, fmt, "step0", "rank0")
    t = os.path.join(d, "dump_tensor_data")
    os.makedirs(t, exist_ok=True)
    data = {}
    for f in range(files):
        i = np.arange(elems, dtype=np.int64)
        x = ((((i * 2654435761 + f) % 20011).astype(np.float32)) - 10005.0) * 1e-3
        name = f"Functional.linear.{f}.forward"
        dn = f"{name}.output.0.{fmt}"
        if fmt == "pt":
            torch.save(torch.from_numpy(x), os.path.join(t, dn))
        else:
            np.save(os.path.join(t, dn), x)
        xd = x.astype(np.float64)
        data[name] = {"input_args": [], "input_kwargs": {}, "output": [{
            "type": "torch.Tensor", "dtype": "torch.float32", "shape": [elems],
            "Max": float(x.max()), "Min": float(x.min()), "Mean": float(xd.mean()),
            "Norm": float(np.sqrt(np.dot(xd, xd))), "requires_grad": False, "data_name": dn}]}
    doc = {"task": "tensor", "level": "L1", "framework": "pytorch", "dump_data_dir": t,
           "data": data}
    with open(os.path.join(d, "dump.json"), "w") as fh:
        json.dump(doc, fh)
"#;

/// numpy's compare of the `compare-pt` dumps: per output, `torch.load` of the `.pt`,
/// `np.load` of the `.npy`, then [`PY_METRICS`].
const PY_PT_COMPARE: &str = r#"
import sys, time, os, json
import numpy as np, torch
pt, npy = sys.argv[1], sys.argv[2]
t = time.perf_counter()
doc = json.load(open(os.path.join(pt, "dump.json")))
for name, entry in doc["data"].items():
    dn = entry["output"][0]["data_name"]
    a = torch.load(os.path.join(pt, "dump_tensor_data", dn), weights_only=True).numpy()
    metrics(a, np.load(os.path.join(npy, "dump_tensor_data", dn[:-3] + ".npy")))
print(time.perf_counter() - t)
"#;

/// `script` with [`PY_METRICS`] defined right after its `import numpy` line.
fn compare_script(script: &str) -> String {
    match script.find("\nimport numpy") {
        Some(i) => {
            let end = script[i + 1..]
                .find('\n')
                .map_or(script.len(), |j| i + 1 + j + 1);
            format!("{}{PY_METRICS}{}", &script[..end], &script[end..])
        }
        None => format!("import numpy as np\n{PY_METRICS}{script}"),
    }
}

fn f32_npy(path: &Path, values: impl Iterator<Item = f32>, elems: usize) -> Result<(), String> {
    let mut b = vec![0u8; 128];
    let n = dump_npy::encode_header("<f4", &[elems], &mut b).map_err(|e| e.to_string())?;
    b.truncate(n);
    b.reserve(elems * 4);
    for v in values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, b).map_err(|e| format!("{}: {e}", path.display()))
}

/// (median seconds, peak RSS KiB) of `cmd` run `runs` times.
pub(super) fn timed(runs: usize, cmd: &[&str]) -> Option<(f64, u64)> {
    let o = Command::new("python3")
        .args(["-c", PY_TIMED, &runs.to_string()])
        .args(cmd)
        .output()
        .ok()?;
    let s = String::from_utf8_lossy(&o.stdout);
    let mut it = s.split_whitespace();
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

pub(super) fn python(script: &str, args: &[&str]) -> Option<f64> {
    let o = Command::new("python3")
        .args(["-c", script])
        .args(args)
        .output()
        .ok()?;
    if !o.status.success() {
        println!(
            "note: numpy baseline failed: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return None;
    }
    String::from_utf8_lossy(&o.stdout).trim().parse().ok()
}

fn opdump_release() -> Result<PathBuf, String> {
    opdump_release_with(&[])
}

/// `cargo build --release -p opdump --bin opdump` with `extra` arguments (the ingest group
/// passes `--no-default-features`: it needs no runtime, and tract in release is long to build).
pub(super) fn opdump_release_with(extra: &[&str]) -> Result<PathBuf, String> {
    let st = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "-q",
            "-p",
            "opdump",
            "--bin",
            "opdump",
        ])
        .args(extra)
        .status()
        .map_err(|e| format!("cargo build: {e}"))?;
    if !st.success() {
        return Err("cargo build --release -p opdump failed".into());
    }
    Ok(target_dir().join("release/opdump"))
}

/// Runs the group.
pub fn run(opts: &Opts, rows: &mut Vec<Row>) -> Result<(), String> {
    let bin = opdump_release()?;
    let bin = bin.to_str().ok_or("non-UTF-8 target dir")?;
    let dir = target_dir().join("bench-compare");
    let _ = std::fs::remove_dir_all(&dir);
    let (files, per) = if opts.quick {
        (16, 4usize << 20)
    } else {
        (16, 64usize << 20)
    };
    let elems = per / 4;
    let mut dirs = Vec::new();
    for side in ["a", "b"] {
        let it = dir.join(side).join("rank_0/Net/0/0");
        std::fs::create_dir_all(&it).map_err(|e| format!("{}: {e}", it.display()))?;
        for f in 0..files {
            let name = format!(
                "MatMul.Default_MatMul-op{f}.0.0.{}.output.0.DefaultFormat.Float32.npy",
                100 + f
            );
            let scale = side == "b";
            let vals = (0..elems).map(move |i| {
                let v = (((i * 2654435761 + f) % 20011) as f32 - 10005.0) * 1e-3;
                if scale && i % 1000 == 0 {
                    v * 1.0001
                } else {
                    v
                }
            });
            f32_npy(&it.join(name), vals, elems)?;
        }
        dirs.push(it);
    }
    let total = 2 * files * per;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (a, b) = (dir.join("a"), dir.join("b"));
    let (a, b) = (a.to_str().unwrap_or(""), b.to_str().unwrap_or(""));
    let mut cat: Vec<String> = vec!["cat".into()];
    for d in &dirs {
        for e in std::fs::read_dir(d).map_err(|e| e.to_string())?.flatten() {
            cat.push(e.path().display().to_string());
        }
    }
    let cat_ref: Vec<&str> = cat.iter().map(String::as_str).collect();
    // Warm the page cache, then time.
    let _ = timed(1, &cat_ref);
    let read = timed(opts.runs.min(5), &cat_ref).map(|(s, _)| total as f64 / s / 1e9);
    let cmp = timed(opts.runs.min(5), &[bin, "compare", a, b, "--json"]);
    let np = python(
        &compare_script(PY_COMPARE),
        &[
            &dirs[0].display().to_string(),
            &dirs[1].display().to_string(),
        ],
    )
    .map(|s| total as f64 / s / 1e9);
    if let Some(g) = read {
        rows.push(Row {
            kernel: "compare:cat".into(),
            dtype: "bytes".into(),
            bytes: total,
            threads: 1,
            gbps: g,
            vs_read: None,
            vs_numpy: None,
        });
    }
    if let Some(g) = np {
        rows.push(Row {
            kernel: "compare:numpy".into(),
            dtype: "float32".into(),
            bytes: total,
            threads: 1,
            gbps: g,
            vs_read: read.map(|r| g / r),
            vs_numpy: None,
        });
    }
    if let Some((s, rss)) = cmp {
        let g = total as f64 / s / 1e9;
        println!(
            "opdump compare: {files} x {} MiB pairs in {s:.3} s, peak RSS {} MiB",
            per >> 20,
            rss / 1024
        );
        rows.push(Row {
            kernel: "compare".into(),
            dtype: "float32".into(),
            bytes: total,
            threads,
            gbps: g,
            vs_read: read.map(|r| g / r),
            vs_numpy: np.map(|n| g / n),
        });
    }
    // opdump stats on one big file.
    let size = if opts.quick { 16usize << 20 } else { 256 << 20 };
    let big = dir.join("Add.Default_Add-op0.0.0.1.output.0.DefaultFormat.Float32.npy");
    f32_npy(
        &big,
        (0..size / 4).map(|i| ((i % 4093) as f32 - 2046.0) * 0.5),
        size / 4,
    )?;
    let bigs = big.display().to_string();
    for (kernel, hashed) in [("stats-cli", false), ("stats-cli+hash", true)] {
        // The default columns are the 11 value columns; `--all` adds md5 and MindSpore's sha1.
        let mut cmd = vec![bin, "stats", &bigs];
        if hashed {
            cmd.push("--all");
        }
        let _ = timed(1, &["cat", &bigs]);
        let t = timed(opts.runs.min(5), &cmd);
        let np = python(PY_STATS, &[&bigs, if hashed { "1" } else { "0" }])
            .map(|s| size as f64 / s / 1e9);
        if let Some((s, rss)) = t {
            let g = size as f64 / s / 1e9;
            println!(
                "opdump {kernel}: {} MiB in {s:.3} s, peak RSS {} MiB",
                size >> 20,
                rss / 1024
            );
            rows.push(Row {
                kernel: kernel.into(),
                dtype: "float32".into(),
                bytes: size,
                threads: 1,
                gbps: g,
                vs_read: None,
                vs_numpy: np.map(|n| g / n),
            });
        }
        if let Some(n) = np {
            rows.push(Row {
                kernel: format!("{kernel}:numpy"),
                dtype: "float32".into(),
                bytes: size,
                threads: 1,
                gbps: n,
                vs_read: None,
                vs_numpy: None,
            });
        }
    }
    stats_dir(opts, bin, &dir, rows)?;
    compare_pt(opts, bin, &dir, rows)?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The median of `v` (sorted in place).
fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// `opdump compare` of an msprobe dump of `.pt` tensors against the same in `.npy`, against
/// `cat`, the all-`.npy` compare and torch + numpy, in interleaved rounds.
fn compare_pt(opts: &Opts, bin: &str, dir: &Path, rows: &mut Vec<Row>) -> Result<(), String> {
    let (files, per) = if opts.quick {
        (16, 4usize << 20)
    } else {
        (16, 64usize << 20)
    };
    let root = dir.join("msprobe-pt");
    let made = Command::new("python3")
        .args(["-c", PY_PT_DUMPS, &root.display().to_string()])
        .args([files.to_string(), per.to_string()])
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !made.status.success() {
        println!(
            "note: compare-pt left out: the .pt dump needs torch (bash tools/install-torch.sh): {}",
            String::from_utf8_lossy(&made.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return Ok(());
    }
    let (pt, npy) = (root.join("pt/step0/rank0"), root.join("npy/step0/rank0"));
    let (pts, npys) = (pt.display().to_string(), npy.display().to_string());
    let mut cat = vec!["cat".to_owned()];
    for d in [&pt, &npy] {
        let mut names: Vec<String> = std::fs::read_dir(d.join("dump_tensor_data"))
            .map_err(|e| format!("{}: {e}", d.display()))?
            .flatten()
            .map(|e| e.path().display().to_string())
            .collect();
        names.sort();
        cat.extend(names);
    }
    let cat: Vec<&str> = cat.iter().map(String::as_str).collect();
    let total = 2 * files * per;
    let _ = timed(1, &cat);
    let (mut read, mut ours, mut npy_only, mut theirs, mut rss) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), 0);
    for _ in 0..opts.runs.clamp(1, 5) {
        if let Some((s, _)) = timed(1, &cat) {
            read.push(s);
        }
        if let Some((s, r)) = timed(1, &[bin, "compare", &pts, &npys, "--json"]) {
            ours.push(s);
            rss = rss.max(r);
        }
        if let Some((s, _)) = timed(1, &[bin, "compare", &npys, &npys, "--json"]) {
            npy_only.push(s);
        }
        if let Some(s) = python(&compare_script(PY_PT_COMPARE), &[&pts, &npys]) {
            theirs.push(s);
        }
    }
    let gbps = |v: &mut Vec<f64>| median(v).map(|s| total as f64 / s / 1e9);
    let (read, ours, npy_only, theirs) = (
        gbps(&mut read),
        gbps(&mut ours),
        gbps(&mut npy_only),
        gbps(&mut theirs),
    );
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // cat and the Python code use one thread; opdump's compare all.
    let row = |kernel: &str, g: f64, vs_read: Option<f64>, vs_numpy: Option<f64>| Row {
        kernel: kernel.into(),
        dtype: "float32".into(),
        bytes: total,
        threads: if kernel.starts_with("compare-pt:") {
            1
        } else {
            threads
        },
        gbps: g,
        vs_read,
        vs_numpy,
    };
    if let Some(g) = read {
        rows.push(row("compare-pt:cat", g, None, None));
    }
    if let Some(g) = theirs {
        rows.push(row("compare-pt:torch+numpy", g, read.map(|r| g / r), None));
    }
    if let Some(g) = npy_only {
        rows.push(row(
            "compare-pt/npy-vs-npy",
            g,
            read.map(|r| g / r),
            theirs.map(|n| g / n),
        ));
    }
    if let Some(g) = ours {
        println!(
            "opdump compare .pt vs .npy: {files} x {} MiB pairs at {g:.2} GB/s ({:.2}x the .npy-only compare), peak RSS {} MiB",
            per >> 20,
            npy_only.map_or(f64::NAN, |n| g / n),
            rss / 1024
        );
        rows.push(row(
            "compare-pt",
            g,
            read.map(|r| g / r),
            theirs.map(|n| g / n),
        ));
    }
    Ok(())
}

/// `opdump stats --all` over a directory of many 4 MiB files (multi-buffer MD5 across files)
/// against numpy + hashlib per file.
fn stats_dir(opts: &Opts, bin: &str, dir: &Path, rows: &mut Vec<Row>) -> Result<(), String> {
    let (files, per) = if opts.quick {
        (64, 4usize << 20)
    } else {
        (256, 4usize << 20)
    };
    let sub = dir.join("many");
    std::fs::create_dir_all(&sub).map_err(|e| format!("{}: {e}", sub.display()))?;
    let mut paths = Vec::with_capacity(files);
    for f in 0..files {
        let p = sub.join(format!(
            "MatMul.Default_MatMul-op{f}.0.0.{}.output.0.DefaultFormat.Float32.npy",
            1000 + f
        ));
        let vals =
            (0..per / 4).map(move |i| (((i * 2654435761 + f) % 20011) as f32 - 10005.0) * 1e-3);
        f32_npy(&p, vals, per / 4)?;
        paths.push(p.display().to_string());
    }
    let total = files * per;
    let mut cat = vec!["cat"];
    cat.extend(paths.iter().map(String::as_str));
    let _ = timed(1, &cat);
    let mut cmd = vec![bin, "stats", "--all"];
    cmd.extend(paths.iter().map(String::as_str));
    // Interleaved: opdump, numpy, opdump, numpy, ...; medians of each.
    let (mut ours, mut theirs, mut rss) = (Vec::new(), Vec::new(), 0);
    for _ in 0..opts.runs.clamp(1, 5) {
        if let Some((s, r)) = timed(1, &cmd) {
            ours.push(s);
            rss = rss.max(r);
        }
        if let Some(s) = python(PY_STATS_DIR, &[&sub.display().to_string()]) {
            theirs.push(s);
        }
    }
    let np = median(&mut theirs).map(|s| total as f64 / s / 1e9);
    if let Some(s) = median(&mut ours) {
        let g = total as f64 / s / 1e9;
        println!(
            "opdump stats --all: {files} x {} MiB files in {s:.3} s, peak RSS {} MiB",
            per >> 20,
            rss / 1024
        );
        rows.push(Row {
            kernel: "stats-dir+hash".into(),
            dtype: "float32".into(),
            bytes: total,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            gbps: g,
            vs_read: None,
            vs_numpy: np.map(|n| g / n),
        });
    }
    if let Some(n) = np {
        rows.push(Row {
            kernel: "stats-dir+hash:numpy".into(),
            dtype: "float32".into(),
            bytes: total,
            threads: 1,
            gbps: n,
            vs_read: None,
            vs_numpy: None,
        });
    }
    Ok(())
}
