//! The `--html` pages of `inspect` and `compare` loaded in a real browser (Debian's headless
//! Chromium): no console error, and a screenshot that shows the page (not blank) with the
//! red marker of the first divergent / non-finite operator.
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
            "--window-size=1200,900",
        ])
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

/// (share of non-white pixels, number of strongly red pixels) of a PNG, decoded by python3's
/// zlib (8-bit RGB/RGBA, all five PNG filters).
fn pixels(png: &Path) -> (f64, u64) {
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
nonwhite = red = 0
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
    prev = line
print(nonwhite / (w * h), red)
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
        let (ink, red) = pixels(&shot);
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
