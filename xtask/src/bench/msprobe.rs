//! msprobe's layout written (issue 22 item 8), `--only msprobe`:
//!
//! 1. the demo's step time with a statistics-task msprobe dump (level L1) against no dump and
//!    against the MindSpore-layout statistic dump of the same kernels, the three taking turns
//!    within each round (medians over interleaved rounds, after a warm-up round);
//! 2. the cost per operator of keeping dump.json crash-safe: kernels with one 16-element
//!    tensor through the msprobe layout (one commit to dump.json each: a positioned write, a
//!    hard link and a rename) against the same kernels as MindSpore statistic.csv rows (one
//!    append each), interleaved the same way;
//!    both also with dump.json published at most every 50 ms (`msprobe_commit_interval`);
//! 3. a kernel between `Dumper::stop` and `start` (the session API's rejected kernel).
//!
//! Prints its table and writes `target/bench-stats/msprobe.csv`
//! (`metric,value,unit,baseline,ratio`).

use std::{collections::HashMap, path::Path, time::Instant};

use dump_host::{DumpOptions, Dumper, TensorRef};
use opdump::demo::{LeNet, NoTrace};

use super::{
    Opts, Row,
    dump::{StepTracer, median, print_metrics, scratch},
};

fn open(text: String) -> Result<Dumper, String> {
    open_with(text, DumpOptions::default())
}

fn open_with(text: String, opts: DumpOptions) -> Result<Dumper, String> {
    Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(opts)
        .on_event(|_| {})
        .open_json(text.into_bytes())
        .map_err(|e| e.to_string())
}

fn msprobe(root: &Path) -> Result<Dumper, String> {
    msprobe_every(root, std::time::Duration::ZERO)
}

/// The msprobe-layout Dumper publishing dump.json at most every `interval`.
fn msprobe_every(root: &Path, interval: std::time::Duration) -> Result<Dumper, String> {
    open_with(
        format!(
            r#"{{"task": "statistics", "dump_path": "{}", "level": "L1",
            "statistics": {{"summary_mode": "statistics"}}}}"#,
            root.display()
        ),
        DumpOptions {
            msprobe_commit_interval: interval,
            ..DumpOptions::default()
        },
    )
}

fn mindspore(root: &Path) -> Result<Dumper, String> {
    open(format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Bench",
            "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
            "support_device": [0], "statistic_category": ["max", "min", "avg", "l2norm"]}},
            "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    ))
}

/// The group-commit interval measured beside publishing every call.
const GROUP: std::time::Duration = std::time::Duration::from_millis(50);

struct Metric {
    name: &'static str,
    value: f64,
    unit: &'static str,
    baseline: Option<f64>,
}

/// Runs the msprobe-layout benchmarks.
pub fn run(opts: &Opts, _rows: &mut Vec<Row>) -> Result<(), String> {
    let mut m = Vec::new();
    let rounds = if opts.quick { 3 } else { 21 };

    // 1. Demo step time: no dump, MindSpore-layout statistics, msprobe-layout statistics.
    // A batch where the undumped step takes at least 20 ms (median of 3), as `--only dump`.
    let mut batch = 2;
    let base_step = |batch: usize| {
        let mut net = LeNet::new(batch);
        net.step(&mut NoTrace);
        median(
            (0..3)
                .map(|_| {
                    let t = Instant::now();
                    net.step(&mut NoTrace);
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        )
    };
    if !opts.quick {
        while base_step(batch) < 20.0 && batch < 512 {
            batch *= 2;
        }
    }
    let (ms_root, mp_root, mg_root) = (
        scratch("demo-ms")?,
        scratch("demo-mp")?,
        scratch("demo-mg")?,
    );
    let mut ms = mindspore(&ms_root)?;
    let mut mp = msprobe(&mp_root)?;
    let mut mg = msprobe_every(&mg_root, GROUP)?;
    let (mut n0, mut n1, mut n2, mut n3) = (
        LeNet::new(batch),
        LeNet::new(batch),
        LeNet::new(batch),
        LeNet::new(batch),
    );
    let (mut t0, mut t1, mut t2, mut t3) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds + 1 {
        let t = Instant::now();
        n0.step(&mut NoTrace);
        let base = t.elapsed().as_secs_f64() * 1e3;
        let dumped = |d: &mut Dumper, net: &mut LeNet| -> Result<f64, String> {
            let t = Instant::now();
            let step = d.begin_step();
            net.step(&mut StepTracer {
                step: &step,
                parameters: false,
            });
            step.finish().map_err(|e| e.to_string())?;
            Ok(t.elapsed().as_secs_f64() * 1e3)
        };
        let a = dumped(&mut ms, &mut n1)?;
        let b = dumped(&mut mp, &mut n2)?;
        let c = dumped(&mut mg, &mut n3)?;
        if round > 0 {
            t0.push(base);
            t1.push(a);
            t2.push(b);
            t3.push(c);
        }
    }
    mg.close().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&mg_root);
    let grouped = median(t3);
    let ms_report = ms.close().map_err(|e| e.to_string())?;
    let mp_report = mp.close().map_err(|e| e.to_string())?;
    if mp_report.rows == 0 || mp_report.rows != ms_report.rows {
        return Err(format!(
            "bench: msprobe wrote {} tensors, MindSpore {}: not the same dump",
            mp_report.rows, ms_report.rows
        ));
    }
    let (base, ms_ms, mp_ms) = (median(t0), median(t1), median(t2));
    m.push(Metric {
        name: "demo step, no dump (batch in 'baseline' col)",
        value: base,
        unit: "ms",
        baseline: Some(batch as f64),
    });
    m.push(Metric {
        name: "demo step, MindSpore-layout statistic dump",
        value: ms_ms,
        unit: "ms",
        baseline: Some(base),
    });
    m.push(Metric {
        name: "demo step, msprobe-layout statistics dump",
        value: mp_ms,
        unit: "ms",
        baseline: Some(base),
    });
    m.push(Metric {
        name: "demo step, msprobe-layout, dump.json every 50 ms",
        value: grouped,
        unit: "ms",
        baseline: Some(base),
    });
    m.push(Metric {
        name: "msprobe vs MindSpore layout, demo step",
        value: mp_ms,
        unit: "ms",
        baseline: Some(ms_ms),
    });
    let _ = std::fs::remove_dir_all(&ms_root);
    let _ = std::fs::remove_dir_all(&mp_root);

    // 2. Per operator: one small tensor per kernel, msprobe (crash-safe dump.json commit)
    // against MindSpore (statistic.csv append), interleaved in blocks.
    let per = if opts.quick { 200 } else { 2000 };
    let data: Vec<f32> = (0..16).map(|i| i as f32 * 0.5).collect();
    let names: Vec<String> = (0..per).map(|i| format!("Default/net/Add-op{i}")).collect();
    let (ms_root, mp_root) = (scratch("op-ms")?, scratch("op-mp")?);
    let mut ms = mindspore(&ms_root)?;
    let mut mp = msprobe(&mp_root)?;
    let mg_root = scratch("op-mg")?;
    let mut mg = msprobe_every(&mg_root, GROUP)?;
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds + 1 {
        let block = |d: &mut Dumper| -> Result<f64, String> {
            let step = d.begin_step();
            let t = Instant::now();
            for n in &names {
                if let Some(k) = step.kernel("Add", n) {
                    k.output(0, TensorRef::from_slice(&[16], &data))
                        .map_err(|e| e.to_string())?;
                }
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / per as f64;
            step.finish().map_err(|e| e.to_string())?;
            Ok(us)
        };
        let x = block(&mut ms)?;
        let y = block(&mut mp)?;
        let z = block(&mut mg)?;
        if round > 0 {
            a.push(x);
            b.push(y);
            c.push(z);
        }
    }
    mg.close().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&mg_root);
    ms.close().map_err(|e| e.to_string())?;
    mp.close().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&ms_root);
    let _ = std::fs::remove_dir_all(&mp_root);
    let (csv_us, json_us, group_us) = (median(a), median(b), median(c));
    m.push(Metric {
        name: "per operator, MindSpore statistic.csv row",
        value: csv_us,
        unit: "us",
        baseline: None,
    });
    m.push(Metric {
        name: "per operator, msprobe dump.json crash-safe commit",
        value: json_us,
        unit: "us",
        baseline: Some(csv_us),
    });
    m.push(Metric {
        name: "per operator, msprobe dump.json every 50 ms",
        value: group_us,
        unit: "us",
        baseline: Some(csv_us),
    });

    // 3. A kernel between stop and start.
    let root = scratch("stopped")?;
    let mut d = msprobe(&root)?;
    let calls = if opts.quick { 100_000 } else { 2_000_000 };
    d.stop();
    {
        let step = d.begin_step();
        let t = Instant::now();
        let mut hits = 0usize;
        for i in 0..calls {
            hits += step.kernel("MatMul", &names[i % names.len()]).is_some() as usize;
        }
        let ns = t.elapsed().as_secs_f64() * 1e9 / calls as f64;
        if hits != 0 {
            return Err("bench: a stopped Dumper accepted a kernel".into());
        }
        m.push(Metric {
            name: "rejected kernel (Dumper::stop)",
            value: ns,
            unit: "ns",
            baseline: None,
        });
        step.finish().map_err(|e| e.to_string())?;
    }
    let _ = d.close();
    let _ = std::fs::remove_dir_all(&root);

    print_metrics(
        "msprobe layout benchmarks",
        52,
        "msprobe.csv",
        m.iter().map(|x| {
            let ratio = x
                .baseline
                .filter(|_| !x.name.contains("no dump"))
                .map(|b| x.value / b);
            (x.name, x.value, x.unit, x.baseline, ratio)
        }),
    )
}
