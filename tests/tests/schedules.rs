//! Hardening campaign 3, schedules: 8 producer threads report kernels to one step in seeded,
//! reproducible interleavings (begin, inputs, outputs and ends of up to 3 open kernels per
//! thread, in every writer mode), and a loop of child processes that dump such schedules is
//! killed with SIGKILL at seeded random points. After each run the dump tree must hold only
//! whole `.npy` files with the bytes their names imply, `statistic.csv` files with a header and
//! whole rows, and no temporary file named like a final one; a closed run also has every
//! tensor, every row, counts equal to what is on disk and no temporary file.
//!
//! Scale: `OPDUMP_SCHEDULE_ROUNDS` (in-process schedules, default 6), `OPDUMP_KILL_ROUNDS`
//! (killed children, default 4), `OPDUMP_SCHEDULE_SEED` (first seed). `cargo xtask hardening`
//! runs the full version.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    os::unix::process::ExitStatusExt,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use dump_host::{DumpOptions, Dumper};
use opdump_test_support::KillOnDrop;
use opdump_tests::{
    config::{config, no_env},
    fsutil::TempDir,
    schedule::{Rng, check_tree, expected, run_step, writer_config},
};
use serde_json::json;

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?}: expected a whole number")),
        Err(_) => default,
    }
}

#[test]
fn eight_producers_in_seeded_interleavings_lose_nothing() {
    let rounds = env_u64("OPDUMP_SCHEDULE_ROUNDS", 6);
    let first = env_u64("OPDUMP_SCHEDULE_SEED", 0x5EED_0001);
    let mut tensors = 0;
    for seed in first..first + rounds {
        let mut rng = Rng::new(seed);
        let writer = writer_config(&mut rng);
        let why = format!("seed {seed} (OPDUMP_SCHEDULE_SEED={seed} replays it), {writer:?}");
        // Iteration 1 is left out one time in three: its kernels are never dumped.
        let iteration = if rng.below(3) == 0 { "0|2-5" } else { "all" };
        let tmp = TempDir::new("schedule");
        let cfg = config(
            tmp.path(),
            json!({"saved_data": "full", "statistic_category": ["max", "min"], "iteration": iteration}),
            json!({}),
        );
        let opts = DumpOptions {
            writer,
            ..DumpOptions::default()
        };
        let mut d = Dumper::builder()
            .env(&no_env())
            .options(opts.clone())
            .open_json(cfg)
            .unwrap();
        d.begin_graph(0, &[]).unwrap();
        let mut reported = BTreeMap::new();
        for s in 0..1 + rng.below(3) as usize {
            let step = d.begin_step();
            let (it, active) = (step.iteration(), step.is_active());
            let kernels = 3 + rng.below(10) as usize;
            let run = run_step(&step, rng.next_u64(), 8, kernels, s * 1000, true)
                .unwrap_or_else(|e| panic!("{why}: step {s}: {e}"));
            step.finish()
                .unwrap_or_else(|e| panic!("{why}: step {s}: {e}"));
            assert_eq!(run.executed, run.planned, "{why}: the seeded order ran");
            if active {
                assert!(!run.reported.is_empty(), "{why}: step {s} reported tensors");
                reported.insert(it, run.reported);
            } else {
                assert!(run.reported.is_empty(), "{why}: inactive step {s} dumped");
            }
        }
        let report = d.close().unwrap_or_else(|e| panic!("{why}: close: {e}"));
        let tree = check_tree(tmp.path(), true);
        let want = expected(&reported);
        assert_eq!(tree.npy, want, "{why}: every tensor under its final name");
        assert_eq!(tree.rows, want, "{why}: one whole row per tensor");
        assert_eq!(report.files, want.len() as u64, "{why}: files counted");
        assert_eq!(report.rows, want.len() as u64, "{why}: rows counted");
        tensors += want.len();
    }
    println!("schedules: {rounds} seeds, {tensors} tensors, nothing lost");
}

#[test]
fn the_same_seed_gives_the_same_interleaving_and_another_seed_another() {
    let tmp = TempDir::new("schedule-seed");
    let cfg = config(tmp.path(), json!({"saved_data": "statistic"}), json!({}));
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)
        .unwrap();
    d.begin_graph(0, &[]).unwrap();
    let mut orders = Vec::new();
    for (s, seed) in [7u64, 7, 8].into_iter().enumerate() {
        let step = d.begin_step();
        let run = run_step(&step, seed, 8, 6, s * 1000, true).unwrap();
        step.finish().unwrap();
        assert_eq!(run.executed, run.planned);
        let names: Vec<_> = run.reported.iter().map(|r| (r.1, r.2)).collect();
        orders.push((run.planned, names));
    }
    d.close().unwrap();
    assert_eq!(orders[0], orders[1], "seed 7 twice");
    assert_ne!(orders[0].0, orders[2].0, "seeds 7 and 8");
    // Every producer takes part.
    assert!((0..8).all(|t| orders[0].0.contains(&t)));
}

#[test]
fn sigkill_at_random_points_leaves_only_whole_files_and_rows() {
    let rounds = env_u64("OPDUMP_KILL_ROUNDS", 4);
    let first = env_u64("OPDUMP_SCHEDULE_SEED", 0x5EED_0001);
    let (mut npy, mut rows, mut temps) = (0, 0, 0);
    for seed in first..first + rounds {
        let mut rng = Rng::new(seed ^ 0x9_1111);
        let tmp = TempDir::new("kill9");
        let root = tmp.path().join("dump");
        let start = Instant::now();
        let mut child = KillOnDrop(
            Command::new(env!("CARGO_BIN_EXE_opdump-schedule-child"))
                .arg(&root)
                .arg(seed.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start opdump-schedule-child"),
        );
        // One time in four the kill comes early (config, metadata, first files); otherwise
        // up to 300 ms after the first step.
        let early = rng.below(4) == 0;
        if !early {
            let mut line = String::new();
            let out = child.0.stdout.take().expect("piped stdout");
            BufReader::new(out).read_line(&mut line).unwrap();
            assert_eq!(
                line.trim(),
                "ready",
                "seed {seed}: the child ended early: {:?}",
                child.0.try_wait()
            );
        }
        let delay = Duration::from_millis(rng.below(if early { 40 } else { 300 }));
        std::thread::sleep(delay);
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "seed {seed}: the child ended before it was killed"
        );
        child.0.kill().unwrap();
        let status = child.0.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "seed {seed}: killed by SIGKILL");
        let at = start.elapsed();
        let tree = check_tree(&root, false);
        println!(
            "seed {seed}: killed after {at:?}: {} npy, {} rows, {} temp files",
            tree.npy.len(),
            tree.rows.len(),
            tree.temps
        );
        npy += tree.npy.len();
        rows += tree.rows.len();
        temps += tree.temps;
    }
    println!("kill -9: {rounds} children, {npy} whole npy, {rows} whole rows, {temps} temp files");
    assert!(
        rounds < 2 || npy > 0,
        "the children dumped nothing before being killed"
    );
}
