//! `opdump-schedule-child ROOT SEED`: dumps seeded 8-producer schedules into `ROOT` step after
//! step until it is killed (the kill -9 loop of `tests/schedules.rs` and `cargo xtask
//! hardening`). Prints `ready` once the first step is finished. Stops by itself after
//! 100 000 steps (closing the Dumper), so a lost parent never leaves it running for ever.

use std::{io::Write, path::PathBuf, process::ExitCode};

use dump_host::{DumpOptions, Dumper};
use opdump_tests::{
    config::{config, no_env},
    schedule::{Rng, run_step, writer_config},
};
use serde_json::json;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(root), Some(Ok(seed))) = (args.first(), args.get(1).map(|s| s.parse::<u64>())) else {
        eprintln!("usage: opdump-schedule-child ROOT SEED");
        return ExitCode::from(2);
    };
    let mut rng = Rng::new(seed);
    let opts = DumpOptions {
        writer: writer_config(&mut rng),
        ..DumpOptions::default()
    };
    let cfg = config(
        &PathBuf::from(root),
        json!({"saved_data": "full", "statistic_category": ["max", "min"]}),
        json!({}),
    );
    let mut d = match Dumper::builder()
        .env(&no_env())
        .options(opts.clone())
        .open_json(cfg)
    {
        Ok(d) => d,
        Err(e) => {
            eprintln!("opdump-schedule-child: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut status = d.begin_graph(0, &[]);
    for s in 0..100_000usize {
        if status.is_err() {
            break;
        }
        let step = d.begin_step();
        let ordered = s % 2 == 0;
        status = run_step(&step, seed ^ (s as u64) << 20, 8, 6, s * 100, ordered)
            .map(|_| ())
            .and(step.finish());
        if s == 0 {
            println!("ready");
            let _ = std::io::stdout().flush();
        }
    }
    match status.and(d.close().map(|_| ())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("opdump-schedule-child: {e}");
            ExitCode::FAILURE
        }
    }
}
