//! How long headless Chromium takes to open the `--html` pages of `compare` and `inspect` at
//! 5,000 kernels: the benchmark behind docs/html-report.md's "Size and speed" and
//! BENCHMARKS.md.
//!
//! ```text
//! cargo xtask bench-stats --only html
//! ```
//!
//! (which runs this file's `five_thousand_kernel_pages_load_time` with `OPDUMP_HTML_BENCH=1`;
//! without that variable the benchmark says how to run it and returns: it takes minutes, the
//! suite runs the small harness test below instead)
//!
//! writes, from synthetic statistic-only dumps of `OPDUMP_HTML_BENCH_N` (default 5,000)
//! `Conv2D` kernels (an input and an output each, so twice as many compare pairs and inspect
//! rows) in 10 × 10 scope groups with a chain and skip edges, the compare page (one kernel
//! perturbed) and the inspect page (one kernel's output NaN), plus a 40-kernel compare page as
//! the baseline of the same run (the machine is shared: compare against it, not against
//! another day's numbers). Each page is loaded by `chromium --headless --screenshot` (window
//! 1200×900, process start to exit) in `OPDUMP_HTML_BENCH_ROUNDS` (default 3) interleaved
//! rounds; the medians are printed, with the page's own time (navigation start to the first
//! frame after its load event, which a copy of the page with one line of script appended
//! logs), which leaves out the browser's start. With `OPDUMP_HTML_BENCH_BEFORE=/path/to/an/older/opdump`
//! the same dumps' pages written by that binary are loaded in the same rounds (before/after
//! in one run).
//!
//! Needs `chromium` and `python3`; with `CI=true` their absence fails the tests.

mod html_common;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use html_common::{
    Kernel, load_sized, median, opdump_bin, prerequisites, run, scoped_dump, tmpdir,
};

/// One timed page: its label, file and size, its load times (the process's wall time) and
/// the page's own times (navigation start to the first frame after its load event).
struct Timed {
    label: String,
    page: PathBuf,
    bytes: u64,
    times: Vec<Duration>,
    in_page: Vec<Duration>,
}

/// What the timed copy of a page logs once its load event has fired and a frame was drawn:
/// `TIMING <ms since navigation start>`.
const TIMING_JS: &str = r#"<script>addEventListener('load', function () { requestAnimationFrame(function () { setTimeout(function () { console.log('TIMING ' + Math.round(performance.now())); }, 0); }); });</script>"#;

/// A copy of `page` beside it (`*.timed.html`) with [`TIMING_JS`] before `</body>`.
fn timed_copy(page: &Path) -> PathBuf {
    let html = std::fs::read_to_string(page).unwrap();
    let at = html.rfind("</body>").expect("a page ends its body");
    let copy = page.with_extension("timed.html");
    std::fs::write(&copy, format!("{}{TIMING_JS}{}", &html[..at], &html[at..])).unwrap();
    copy
}

/// Writes `bin`'s compare page of `bad` against `clean` and inspect page of `nan` into `dir`
/// (file names prefixed with `tag`); both exit 1 (a divergence, a NaN).
fn write_pages(bin: &Path, dir: &Path, tag: &str, dumps: [&Path; 3]) -> [PathBuf; 2] {
    let [clean, bad, nan] = dumps.map(|d| d.to_str().unwrap().to_owned());
    let cmp = dir.join(format!("{tag}-compare.html"));
    let ins = dir.join(format!("{tag}-inspect.html"));
    let o = run(
        bin,
        &["compare", &bad, &clean, "--html", cmp.to_str().unwrap()],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "compare: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run(bin, &["inspect", &nan, "--html", ins.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "inspect: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    [cmp, ins]
}

/// The kernel a dump of `n` perturbs or poisons: about two thirds in (3,210 of 5,000).
fn special(n: usize) -> usize {
    n * 321 / 500
}

/// Writes the pages of `n`-kernel dumps (and the 40-kernel baseline) with this build and,
/// when given, `before`; loads each in `rounds` interleaved rounds; returns every page's times.
fn bench(dir: &Path, n: usize, rounds: usize, before: Option<&Path>) -> Vec<Timed> {
    let mut bins = vec![("after".to_owned(), opdump_bin())];
    if let Some(b) = before {
        bins.insert(0, ("before".to_owned(), b.to_path_buf()));
    }
    let mut pages: Vec<(String, PathBuf)> = Vec::new();
    for (size, label) in [(40, "40 kernels".to_owned()), (n, format!("{n} kernels"))] {
        let k = special(size);
        let at = |name: &str| dir.join(format!("{name}-{size}"));
        let (clean, bad, nan) = (at("clean"), at("bad"), at("nan"));
        scoped_dump(&clean, size, &|_| Kernel::Plain);
        scoped_dump(&bad, size, &|i| {
            if i == k {
                Kernel::Perturbed
            } else {
                Kernel::Plain
            }
        });
        scoped_dump(&nan, size, &|i| {
            if i == k { Kernel::Nan } else { Kernel::Plain }
        });
        for (who, bin) in &bins {
            let tag = format!("{who}-{size}");
            let [cmp, ins] = write_pages(bin, dir, &tag, [&clean, &bad, &nan]);
            pages.push((format!("{who}: compare, {label}"), cmp));
            if size == n {
                pages.push((format!("{who}: inspect, {label}"), ins));
            }
        }
    }
    let mut timed: Vec<Timed> = pages
        .into_iter()
        .map(|(label, page)| Timed {
            label,
            bytes: std::fs::metadata(&page).unwrap().len(),
            page,
            times: Vec::new(),
            in_page: Vec::new(),
        })
        .collect();
    let copies: Vec<PathBuf> = timed.iter().map(|t| timed_copy(&t.page)).collect();
    for _ in 0..rounds {
        for (t, copy) in timed.iter_mut().zip(&copies) {
            let l = load_sized(copy, dir, "1200,900");
            let (timing, other): (Vec<&String>, Vec<&String>) =
                l.console.iter().partition(|c| c.contains("TIMING "));
            assert!(other.is_empty(), "{}: console output {other:?}", t.label);
            let ms: u64 = timing
                .first()
                .and_then(|c| c.split("TIMING ").nth(1))
                .and_then(|v| v.split(|ch: char| !ch.is_ascii_digit()).next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{}: no TIMING line in {:?}", t.label, l.console));
            t.times.push(l.took);
            t.in_page.push(Duration::from_millis(ms));
        }
    }
    timed
}

fn report(timed: &mut [Timed]) {
    println!(
        "| page | size | median load, process start to exit | every round | median in the page, to the first frame after load | every round |"
    );
    println!("|---|---|---|---|---|---|");
    let secs = |v: &[Duration]| -> String {
        v.iter()
            .map(|d| format!("{:.2}", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for t in timed {
        println!(
            "| {} | {:.2} MB | {:.2} s | {} | {:.2} s | {} |",
            t.label,
            t.bytes as f64 / 1e6,
            median(&mut t.times.clone()).as_secs_f64(),
            secs(&t.times),
            median(&mut t.in_page.clone()).as_secs_f64(),
            secs(&t.in_page),
        );
    }
}

fn env_usize(var: &str, default: usize) -> usize {
    match std::env::var(var) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{var}={v}: not a whole number")),
        Err(_) => default,
    }
}

/// The benchmark (minutes): see the module's comment. Runs when `OPDUMP_HTML_BENCH` is set
/// (`cargo xtask bench-stats --only html` sets it).
#[test]
fn five_thousand_kernel_pages_load_time() {
    if std::env::var_os("OPDUMP_HTML_BENCH").is_none() {
        println!(
            "html_speed: the 5,000-kernel benchmark (minutes) runs with `cargo xtask bench-stats \
             --only html`; the harness is checked by the_timing_harness_times_every_page_in_every_round"
        );
        return;
    }
    if !prerequisites() {
        return;
    }
    let n = env_usize("OPDUMP_HTML_BENCH_N", 5000);
    let rounds = env_usize("OPDUMP_HTML_BENCH_ROUNDS", 3).max(1);
    let before = std::env::var_os("OPDUMP_HTML_BENCH_BEFORE").map(PathBuf::from);
    if let Some(b) = &before {
        assert!(
            b.is_file(),
            "OPDUMP_HTML_BENCH_BEFORE={}: no such file",
            b.display()
        );
    }
    let dir = tmpdir("speed");
    let mut timed = bench(&dir, n, rounds, before.as_deref());
    report(&mut timed);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The harness itself, small: every page is written, loaded once per round and timed.
#[test]
fn the_timing_harness_times_every_page_in_every_round() {
    if !prerequisites() {
        return;
    }
    let dir = tmpdir("speed-small");
    // This build stands in for the "before" binary: both sets of pages are timed.
    let mut timed = bench(&dir, 120, 2, Some(&opdump_bin()));
    let labels: Vec<&str> = timed.iter().map(|t| t.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "before: compare, 40 kernels",
            "after: compare, 40 kernels",
            "before: compare, 120 kernels",
            "before: inspect, 120 kernels",
            "after: compare, 120 kernels",
            "after: inspect, 120 kernels",
        ]
    );
    for t in &timed {
        assert_eq!(t.times.len(), 2, "{}", t.label);
        assert_eq!(t.in_page.len(), 2, "{}", t.label);
        assert!(t.times.iter().all(|d| !d.is_zero()), "{}", t.label);
        // The page's own time is part of the process's.
        for (page, all) in t.in_page.iter().zip(&t.times) {
            assert!(
                page < all,
                "{}: {page:?} in the page, {all:?} in all",
                t.label
            );
        }
        let html = std::fs::read_to_string(&t.page).unwrap();
        assert_eq!(html.len() as u64, t.bytes);
        let kernels = if t.label.contains("40 kernels") {
            40
        } else {
            120
        };
        assert_eq!(
            html.matches(r#"<li id="g-"#).count(),
            kernels,
            "{}: a graph node per kernel",
            t.label
        );
    }
    // The larger page is larger.
    assert!(timed[2].bytes > timed[0].bytes);
    report(&mut timed);
    let _ = std::fs::remove_dir_all(&dir);
}
