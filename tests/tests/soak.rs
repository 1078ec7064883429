//! Hardening campaign 4, soak: `OPDUMP_SOAK_STEPS` steps (default 2000; `cargo xtask hardening
//! --soak` runs 100 000) of a tiny LeNet-like kernel list with statistic dump and a rotating
//! iteration filter (5 steps of every 100 dumped). Resident memory, open file descriptors and
//! threads are measured after the first 200 steps (two dumped windows) and after the last: they must stay flat, and
//! every dumped step must have its whole statistic.csv.
//!
//! Alone in its test binary so no other test's threads or files change the counts.

use std::fs;

use opdump_tests::{
    csv::parse_statistic_csv,
    fsutil::{TempDir, file_name, walk},
    soak::{kernel_count, run},
};

#[test]
fn resources_stay_flat_over_a_long_rotating_dump() {
    let steps: u64 = std::env::var("OPDUMP_SOAK_STEPS")
        .map(|v| v.parse().expect("OPDUMP_SOAK_STEPS: a whole number"))
        .unwrap_or(2000);
    let (period, width) = (100, 5);
    let tmp = TempDir::new("soak");
    let soak = run(tmp.path(), steps, period, width).unwrap();
    println!(
        "soak: {} steps ({} dumped, {} rows) in {:.1} s; start {}; end {}",
        soak.steps, soak.dumped_steps, soak.report.rows, soak.seconds, soak.start, soak.end
    );
    let windows = steps.div_ceil(period);
    assert_eq!(
        soak.dumped_steps,
        windows * width,
        "the filter dumped its windows"
    );
    let rows_per_step = 2 * kernel_count() as u64;
    assert_eq!(soak.report.rows, soak.dumped_steps * rows_per_step);

    // Flat: no descriptor or thread more than at the start; memory within 8 MiB.
    let (s, e) = (soak.start, soak.end);
    assert!(e.fds <= s.fds, "open fds grew: {} -> {}", s.fds, e.fds);
    assert_eq!(e.threads, s.threads, "threads changed");
    assert!(
        e.rss_kib <= s.rss_kib + 8 * 1024,
        "RSS grew {} KiB over {} steps",
        e.rss_kib.saturating_sub(s.rss_kib),
        steps
    );

    // On disk: one statistic.csv per dumped step, each whole with every row.
    let mut csvs = 0;
    for e in walk(tmp.path()) {
        if file_name(&e.path) == "statistic.csv" {
            let csv = parse_statistic_csv(&fs::read_to_string(&e.path).unwrap());
            assert_eq!(csv.rows.len() as u64, rows_per_step, "{}", e.path.display());
            csvs += 1;
        }
    }
    assert_eq!(csvs, soak.dumped_steps, "one statistic.csv per dumped step");
}
