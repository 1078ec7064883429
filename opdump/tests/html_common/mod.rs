//! What the browser tests of the `--html` pages share: statistic-only dumps with scoped names
//! and a graph file, headless Chromium runs (a screenshot, timed), and a PNG's pixel counts.

#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

/// `chromium` and `python3` (the PNG decoder) are on PATH; otherwise a SKIP line (or, with
/// `CI=true`, a failure).
pub fn prerequisites() -> bool {
    use opdump_test_support::{Prereq, require};
    require(Prereq::Python3) && require(Prereq::Chromium)
}

/// A fresh folder for test `name`.
pub fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-html-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What one headless Chromium load gave: its console lines, the screenshot, and the wall time
/// of the whole process (start, load, layout, paint, exit).
pub struct Load {
    /// Console lines (`CONSOLE`, `Uncaught`) from Chromium's log.
    pub console: Vec<String>,
    /// The PNG written.
    pub shot: PathBuf,
    /// The process's wall time.
    pub took: Duration,
}

/// Loads `url` (a `file://` URL, a `#fragment` allowed) in headless Chromium with a window of
/// `size` (`W,H`), writing the screenshot `dir/{tag}.png`.
pub fn load_url(url: &str, dir: &Path, tag: &str, size: &str) -> Load {
    let shot = dir.join(format!("{tag}.png"));
    let _ = std::fs::remove_file(&shot);
    let profile = dir.join(format!("profile-{tag}"));
    let t = Instant::now();
    let o = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--window-size={size}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(url)
        .output()
        .expect("run chromium");
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    let console = err
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .map(str::to_owned)
        .collect();
    assert!(shot.is_file(), "no screenshot; chromium said: {err}");
    Load {
        console,
        shot,
        took,
    }
}

/// [`load_url`] of the file `page`, the screenshot named after it.
pub fn load_sized(page: &Path, dir: &Path, size: &str) -> Load {
    let stem = page.file_stem().unwrap().to_string_lossy().into_owned();
    load_url(&format!("file://{}", page.display()), dir, &stem, size)
}

/// (share of non-white pixels, number of strongly red pixels, number of pixels of the graph
/// view's first-divergent red `#f00000`, number of pixels of the `:target` row's highlight
/// `#ffe08a`) of a PNG, decoded by python3's zlib (8-bit RGB/RGBA, all five PNG filters).
pub fn pixels(png: &Path) -> (f64, u64, u64, u64) {
    let script = r#"
import sys, zlib, struct
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'\x89PNG\r\n\x1a\n'
i, idat = 8, b''
while i < len(d):
    n, t = struct.unpack('>I4s', d[i:i+8])
    c = d[i+8:i+8+n]
    if t == b'IHDR':
        w, h, depth, ctype = struct.unpack('>IIBB', c[:10])
    if t == b'IDAT':
        idat += c
    i += 12 + n
assert depth == 8 and ctype in (2, 6), (depth, ctype)
bpp = 3 if ctype == 2 else 4
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
nonwhite = red = graph_red = target = 0
p = 0
for y in range(h):
    f = raw[p]; line = bytearray(raw[p+1:p+1+stride]); p += 1 + stride
    for x in range(stride):
        a = line[x-bpp] if x >= bpp else 0
        b = prev[x]
        c = prev[x-bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
            pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            line[x] = (line[x] + pr) & 255
    for x in range(0, stride, bpp):
        r, g, bl = line[x], line[x+1], line[x+2]
        if r < 250 or g < 250 or bl < 250: nonwhite += 1
        if r > 180 and g < 60 and bl < 60: red += 1
        if abs(r - 240) <= 4 and g <= 4 and bl <= 4: graph_red += 1
        if abs(r - 255) <= 3 and abs(g - 224) <= 3 and abs(bl - 138) <= 3: target += 1
    prev = line
print(nonwhite / (w * h), red, graph_red, target)
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(png)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut it = out.split_whitespace();
    (
        it.next().unwrap().parse().unwrap(),
        it.next().unwrap().parse().unwrap(),
        it.next().unwrap().parse().unwrap(),
        it.next().unwrap().parse().unwrap(),
    )
}

/// Runs `bin` (an `opdump` binary) with `args`.
pub fn run(bin: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin).args(args).output().unwrap()
}

/// This build's `opdump`.
pub fn opdump_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_opdump"))
}

/// What kernel `i` of a [`scoped_dump`] holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kernel {
    /// Output 1.0.
    Plain,
    /// Output 1.5.
    Perturbed,
    /// Output NaN (one NaN counted).
    Nan,
}

/// A statistic-only dump of `n` `Conv2D` kernels (an input of 100 and an output each) in
/// scopes `Default/layer{i/(n/10)}/block{i/(n/100)}` (10 × 10 groups; at least one kernel a
/// group), a chain in its `graphs/*.ir` with a skip edge into every 7th kernel; `kind(i)` says
/// what kernel `i`'s output is.
pub fn scoped_dump(root: &Path, n: usize, kind: &dyn Fn(usize) -> Kernel) {
    let it = root.join("rank_0/Net/0/0");
    let graphs = root.join("rank_0/graphs");
    std::fs::create_dir_all(&it).unwrap();
    std::fs::create_dir_all(&graphs).unwrap();
    let mut csv = String::from(
        "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,L2Norm Value,NaN Count\n",
    );
    let mut ir = String::new();
    let (layer, block) = ((n / 10).max(1), (n / 100).max(1));
    for i in 0..n {
        let full = format!("Default/layer{}/block{}/Conv2D-op{i}", i / layer, i / block);
        let name = full.replace('/', "_");
        let (v, nan) = match kind(i) {
            Kernel::Plain => ("1".to_owned(), 0),
            Kernel::Perturbed => ("1.5".to_owned(), 0),
            Kernel::Nan => ("nan".to_owned(), 1),
        };
        csv += &format!(
            "Conv2D,{name},0,0,{},input,1,4,float32,\"(1)\",100,100,100,0\n",
            10 + 2 * i
        );
        csv += &format!(
            "Conv2D,{name},0,0,{},output,0,4,float32,\"(1)\",{v},{v},{v},{nan}\n",
            11 + 2 * i
        );
        let arg = match i {
            0 => "%para1_x".to_owned(),
            i if i % 7 == 0 && i >= 7 => format!("%{}, %{}", i - 1, i - 7),
            i => format!("%{}", i - 1),
        };
        ir += &format!("  %{i}(v{i}) = Conv2D({arg})\n      # Fullname with scope: ({full})\n");
    }
    std::fs::write(it.join("statistic.csv"), csv).unwrap();
    std::fs::write(graphs.join("ms_output_trace_code_graph_0.ir"), ir).unwrap();
}

/// The median of `v` (the lower middle of an even count).
pub fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[(v.len() - 1) / 2]
}
