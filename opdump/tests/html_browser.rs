//! The `--html` pages of `inspect` and `compare` loaded in a real browser (Debian's headless
//! Chromium): no console error, and a screenshot that shows the page (not blank) with the
//! red marker of the first divergent / non-finite operator, and the graph view's red node of a
//! dump with one perturbed kernel, counted in the screenshot's pixels.
//!
//! Needs `chromium` and `python3` (to decode the PNG) on PATH; with `CI=true` their absence
//! fails the test (CI installs them: `apt-get install -y --no-install-recommends chromium
//! python3`), otherwise the test prints why it skips.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

fn prerequisites() -> bool {
    use opdump_test_support::{Prereq, require};
    require(Prereq::Python3) && require(Prereq::Chromium)
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-html-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Loads `page` in headless Chromium; returns (console lines, screenshot path).
fn load(page: &Path, dir: &Path) -> (Vec<String>, PathBuf) {
    load_sized(page, dir, "1200,900")
}

/// [`load`] in a window of `size` (`W,H`).
fn load_sized(page: &Path, dir: &Path, size: &str) -> (Vec<String>, PathBuf) {
    let shot = dir.join(format!(
        "{}.png",
        page.file_stem().unwrap().to_string_lossy()
    ));
    let profile = dir.join(format!(
        "profile-{}",
        page.file_stem().unwrap().to_string_lossy()
    ));
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
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    let err = String::from_utf8_lossy(&o.stderr);
    let console = err
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .map(str::to_owned)
        .collect();
    assert!(shot.is_file(), "no screenshot; chromium said: {err}");
    (console, shot)
}

/// (share of non-white pixels, number of strongly red pixels, number of pixels of the graph
/// view's first-divergent red `#f00000`) of a PNG, decoded by python3's zlib (8-bit
/// RGB/RGBA, all five PNG filters).
fn pixels(png: &Path) -> (f64, u64, u64) {
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
nonwhite = red = graph_red = 0
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
    prev = line
print(nonwhite / (w * h), red, graph_red)
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
    )
}

fn opdump(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn inspect_and_compare_pages_render_in_chromium_without_console_errors() {
    if !prerequisites() {
        return;
    }
    let tmp = tmpdir("pages");
    let (clean, bad) = (tmp.join("clean"), tmp.join("bad"));
    for (dir, inject) in [(&clean, None), (&bad, Some("0"))] {
        let mut a = vec![
            "demo",
            "--out",
            dir.to_str().unwrap(),
            "--steps",
            "1",
            "--batch",
            "2",
            "--no-baseline",
            "--categories",
            "default",
        ];
        if let Some(s) = inject {
            a.extend(["--inject-nan", s]);
        }
        let o = opdump(&a);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let (ci, cc) = (tmp.join("inspect.html"), tmp.join("compare.html"));
    let o = opdump(&[
        "inspect",
        bad.to_str().unwrap(),
        "--html",
        ci.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let o = opdump(&[
        "compare",
        bad.to_str().unwrap(),
        clean.to_str().unwrap(),
        "--html",
        cc.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    for page in [&ci, &cc] {
        let (console, shot) = load(page, &tmp);
        assert!(
            console.is_empty(),
            "{}: console output {console:?}",
            page.display()
        );
        let (ink, red, _) = pixels(&shot);
        assert!(
            ink > 0.02,
            "{}: screenshot nearly blank ({ink})",
            page.display()
        );
        assert!(
            red > 50,
            "{}: the red marker is not visible ({red} red pixels)",
            page.display()
        );
    }
    // The console check is not vacuous: a page that throws is caught.
    let broken = tmp.join("broken.html");
    std::fs::write(
        &broken,
        "<!DOCTYPE html><html><body><p>x</p><script>undefinedFunction();</script></body></html>",
    )
    .unwrap();
    let (console, _) = load(&broken, &tmp);
    assert!(
        !console.is_empty(),
        "a thrown error must show on the console log"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// A statistic-only dump of 40 `Conv2D` kernels (input and output each) in scopes
/// `Default/layer{i/20}/block{i/10}`, a chain in its `graphs/*.ir`; kernel `perturbed`'s
/// output is 1.5 instead of 1.
fn scoped_dump(root: &Path, perturbed: Option<usize>) {
    let it = root.join("rank_0/Net/0/0");
    let graphs = root.join("rank_0/graphs");
    std::fs::create_dir_all(&it).unwrap();
    std::fs::create_dir_all(&graphs).unwrap();
    let mut csv = String::from(
        "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,L2Norm Value,NaN Count\n",
    );
    let mut ir = String::new();
    for i in 0..40 {
        let full = format!("Default/layer{}/block{}/Conv2D-op{i}", i / 20, i / 10);
        let name = full.replace('/', "_");
        let v = if perturbed == Some(i) { 1.5 } else { 1.0 };
        csv += &format!(
            "Conv2D,{name},0,0,{},input,1,4,float32,\"(1)\",100,100,100,0\n",
            10 + 2 * i
        );
        csv += &format!(
            "Conv2D,{name},0,0,{},output,0,4,float32,\"(1)\",{v},{v},{v},0\n",
            11 + 2 * i
        );
        let arg = if i == 0 {
            "%para1_x".to_owned()
        } else {
            format!("%{}", i - 1)
        };
        ir += &format!("  %{i}(v{i}) = Conv2D({arg})\n      # Fullname with scope: ({full})\n");
    }
    std::fs::write(it.join("statistic.csv"), csv).unwrap();
    std::fs::write(graphs.join("ms_output_trace_code_graph_0.ir"), ir).unwrap();
}

#[test]
fn the_graph_view_shows_the_perturbed_kernel_as_a_red_node() {
    if !prerequisites() {
        return;
    }
    let tmp = tmpdir("graph");
    let (clean, bad) = (tmp.join("clean"), tmp.join("bad"));
    scoped_dump(&clean, None);
    scoped_dump(&bad, Some(25));
    let mut counts = Vec::new();
    for (a, code, name) in [(&clean, 0, "same.html"), (&bad, 1, "perturbed.html")] {
        let page = tmp.join(name);
        let o = opdump(&[
            "compare",
            a.to_str().unwrap(),
            clean.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let html = std::fs::read_to_string(&page).unwrap();
        assert_eq!(
            html.matches(r#"<li id="g-"#).count(),
            40,
            "a node per kernel"
        );
        // Tall enough for the plots, the folded inputs and the graph view.
        let (console, shot) = load_sized(&page, &tmp, "1000,2400");
        assert!(console.is_empty(), "{name}: console output {console:?}");
        counts.push(pixels(&shot).2);
    }
    let (legend, perturbed) = (counts[0], counts[1]);
    // The legend's swatch is the only #f00000 on the page of equal dumps; the perturbed
    // kernel's page adds its node's bar and those of the four groups it sits in (model,
    // Default, layer1, block2: open, so the node shows), each as large as the legend's.
    assert!(legend >= 200, "legend swatch not drawn ({legend} pixels)");
    assert!(
        perturbed * 2 >= legend * 9,
        "the red node and its groups are not visible: {perturbed} red pixels against the legend's {legend}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
