//! Flight-recorder benchmarks (issue 24): the LeNet demo's step time with the recorder on
//! and no trigger (tensors and statistics held, and statistics only), against no dump and
//! against a statistic-only dump of every step, in interleaved rounds (one step of each
//! variant per round, medians over the rounds); the cost per MiB of tensors held; and the
//! time from a trigger to its files on disk (`trigger.json` written last).
//!
//! Prints its own table and writes `target/bench-stats/flight.csv` (`metric,value,unit,
//! baseline,ratio`).

use std::{collections::HashMap, path::PathBuf, time::Instant};

use dump_host::{DumpOptions, Dumper, TensorRef, config::FlightRecorder};
use opdump::demo::{LeNet, NoTrace};

use super::{
    Opts, Row,
    dump::{StepTracer, median, print_metrics, scratch},
};

fn config(root: &str, saved: &str) -> Vec<u8> {
    format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{root}", "net_name": "Bench",
        "iteration": "all", "saved_data": "{saved}", "input_output": 0, "kernels": [],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#
    )
    .into_bytes()
}

fn open(
    root: &std::path::Path,
    saved: &str,
    flight: Option<FlightRecorder>,
) -> Result<Dumper, String> {
    let env: HashMap<String, String> = HashMap::new();
    let mut b = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .events(dump_host::diag::EventSink::ignore());
    if let Some(f) = flight {
        b = b.flight_recorder(f);
    }
    b.open_json(config(&root.to_string_lossy(), saved))
        .map_err(|e| e.to_string())
}

struct Metric {
    name: String,
    value: f64,
    unit: &'static str,
    baseline: Option<f64>,
}

/// One demo variant: its network, and its Dumper (`None`: no dump).
struct Variant {
    net: LeNet,
    dumper: Option<Dumper>,
    ms: Vec<f64>,
}

impl Variant {
    fn step(&mut self) -> Result<(), String> {
        let t = Instant::now();
        match &mut self.dumper {
            None => {
                self.net.step(&mut NoTrace);
            }
            Some(d) => {
                let step = d.begin_step();
                self.net.step(&mut StepTracer {
                    step: &step,
                    parameters: true,
                });
                step.finish().map_err(|e| e.to_string())?;
            }
        }
        self.ms.push(t.elapsed().as_secs_f64() * 1e3);
        Ok(())
    }
}

/// Runs the flight-recorder benchmarks.
pub fn run(opts: &Opts, _rows: &mut Vec<Row>) -> Result<(), String> {
    let rounds = if opts.quick { 5 } else { 21 };
    let mut m = Vec::new();

    // The batch: a step of at least 20 ms undumped (the demo's small tensors, a real step).
    let mut batch = 2;
    if !opts.quick {
        loop {
            let mut net = LeNet::new(batch);
            net.step(&mut NoTrace);
            let t = Instant::now();
            net.step(&mut NoTrace);
            if t.elapsed().as_secs_f64() * 1e3 >= 20.0 || batch >= 512 {
                break;
            }
            batch *= 2;
        }
    }
    let recorder = FlightRecorder {
        steps: 2,
        ..FlightRecorder::default()
    };
    let roots: Vec<PathBuf> = (0..4)
        .map(|i| scratch(&format!("flight{i}")))
        .collect::<Result<_, _>>()?;
    let mut variants = [
        Variant {
            net: LeNet::new(batch),
            dumper: None,
            ms: Vec::new(),
        },
        Variant {
            net: LeNet::new(batch),
            dumper: Some(open(&roots[1], "statistic", None)?),
            ms: Vec::new(),
        },
        Variant {
            net: LeNet::new(batch),
            dumper: Some(open(&roots[2], "full", Some(recorder))?),
            ms: Vec::new(),
        },
        Variant {
            net: LeNet::new(batch),
            dumper: Some(open(&roots[3], "statistic", Some(recorder))?),
            ms: Vec::new(),
        },
    ];
    // Warm-up: fills the ring (2 steps and the current one) so the timed rounds see the
    // steady state (buffers recycled from the step leaving the ring).
    for _ in 0..3 {
        for v in variants.iter_mut() {
            v.step()?;
        }
    }
    for v in variants.iter_mut() {
        v.ms.clear();
    }
    for r in 0..rounds {
        // Interleaved, the order rotating each round.
        for i in 0..variants.len() {
            variants[(i + r) % variants.len()].step()?;
        }
    }
    let held = variants[2]
        .dumper
        .as_ref()
        .map_or(0, Dumper::flight_recorder_bytes);
    let written: u64 = variants[2..]
        .iter()
        .map(|v| {
            v.dumper
                .as_ref()
                .map_or(0, |d| d.progress().files + d.progress().rows)
        })
        .sum();
    if written != 0 || roots[2..].iter().any(|r| r.join("rank_0").exists()) {
        return Err("the flight recorder wrote without a trigger".into());
    }
    let [base, stat, full, stat_held] = variants.map(|v| median(v.ms));
    m.push(Metric {
        name: format!("demo step, no dump (LeNet-5, batch {batch})"),
        value: base,
        unit: "ms",
        baseline: None,
    });
    m.push(Metric {
        name: "demo step, statistic dump of every step".into(),
        value: stat,
        unit: "ms",
        baseline: Some(base),
    });
    m.push(Metric {
        name: "demo step, recorder (2 steps): statistics held".into(),
        value: stat_held,
        unit: "ms",
        baseline: Some(base),
    });
    m.push(Metric {
        name: "demo step, recorder (2 steps): statistics + tensors held".into(),
        value: full,
        unit: "ms",
        baseline: Some(base),
    });
    let per_step = held as f64 / 3.0 / (1 << 20) as f64;
    m.push(Metric {
        name: "tensors held per step (ring of 2 + current)".into(),
        value: per_step,
        unit: "MiB",
        baseline: None,
    });
    m.push(Metric {
        name: "tensor copy cost per MiB held (tensors - statistics)".into(),
        value: (full - stat_held) / per_step.max(1e-9),
        unit: "ms",
        baseline: None,
    });

    // A bare copy into the ring, steady state: 64 tensors of 256 KiB per step, each round
    // followed by the baseline: the same bytes copied into as many distinct buffers as the
    // ring holds (3 steps of 64, touched before), so both copy into memory of the same size
    // rather than one cache-resident buffer.
    {
        let root = scratch("flight-copy")?;
        let mut d = open(&root, "tensor", Some(recorder))?;
        let x: Vec<f32> = (0..1 << 16).map(|i| i as f32).collect();
        let mib = 64.0 * (x.len() * 4) as f64 / (1 << 20) as f64;
        let mut ring: Vec<Vec<f32>> = (0..3 * 64).map(|_| vec![1f32; x.len()]).collect();
        let (mut held, mut plain) = (Vec::new(), Vec::new());
        for s in 0..rounds + 3 {
            let t = Instant::now();
            let step = d.begin_step();
            for k in 0..64 {
                let name = format!("Default/net/MatMul-op{k}");
                if let Some(kernel) = step.kernel("MatMul", &name) {
                    // An input: held, never summarized (only outputs are watched).
                    kernel
                        .input(0, TensorRef::from_slice(&[x.len()], &x))
                        .map_err(|e| e.to_string())?;
                }
            }
            step.finish().map_err(|e| e.to_string())?;
            let hold = t.elapsed().as_secs_f64() * 1e3 / mib;
            let t = Instant::now();
            for (k, dst) in ring[(s % 3) * 64..][..64].iter_mut().enumerate() {
                let name = format!("Default/net/MatMul-op{k}");
                std::hint::black_box(&name);
                dst.copy_from_slice(&x);
                std::hint::black_box(&mut *dst);
            }
            let copy = t.elapsed().as_secs_f64() * 1e3 / mib;
            if s >= 3 {
                held.push(hold);
                plain.push(copy);
            }
        }
        m.push(Metric {
            name: "recorder hold, 64 x 256 KiB per step (per MiB; baseline memcpy)".into(),
            value: median(held),
            unit: "ms",
            baseline: Some(median(plain)),
        });
        d.close().map_err(|e| e.to_string())?;
        let _ = std::fs::remove_dir_all(&root);
    }

    // Trigger to files on disk: the ring (2 steps) and the current step, each time fresh.
    {
        let root = scratch("flight-trigger")?;
        let mut d = open(
            &root,
            "full",
            Some(FlightRecorder {
                max_triggers: 0,
                ..recorder
            }),
        )?;
        let mut net = LeNet::new(batch);
        let mut ms = Vec::new();
        let mut blocked = Vec::new();
        let mut micros = Vec::new();
        let tries = if opts.quick { 2 } else { 7 };
        for n in 1..=tries {
            for _ in 0..2 {
                let step = d.begin_step();
                net.step(&mut StepTracer {
                    step: &step,
                    parameters: true,
                });
                step.finish().map_err(|e| e.to_string())?;
            }
            let step = d.begin_step();
            net.step(&mut StepTracer {
                step: &step,
                parameters: true,
            });
            d.trigger("bench");
            let t = Instant::now();
            step.finish().map_err(|e| e.to_string())?;
            // The producer goes on here; the write runs on its own thread until `flush`.
            blocked.push(t.elapsed().as_secs_f64() * 1e3);
            d.flush().map_err(|e| e.to_string())?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            let name = if n == 1 {
                "trigger.json".to_owned()
            } else {
                format!("trigger_{n}.json")
            };
            let text = std::fs::read_to_string(root.join("rank_0").join(&name))
                .map_err(|e| format!("{name}: {e}"))?;
            let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            micros.push(v["write_micros"].as_f64().unwrap_or(0.0));
        }
        let files = d.progress().files as f64 / tries as f64;
        let mb = d.progress().bytes as f64 / tries as f64 / 1e6;
        d.close().map_err(|e| e.to_string())?;
        let _ = std::fs::remove_dir_all(&root);
        m.push(Metric {
            name: format!("trigger to files on disk (3 steps, {files:.0} files, {mb:.1} MB)"),
            value: median(ms),
            unit: "ms",
            baseline: None,
        });
        m.push(Metric {
            name: "  of which the producer waited (the step's finish)".into(),
            value: median(blocked),
            unit: "ms",
            baseline: None,
        });
        m.push(Metric {
            name: "  of which the write itself (trigger.json write_micros)".into(),
            value: median(micros) / 1e3,
            unit: "ms",
            baseline: None,
        });
    }
    for r in &roots {
        let _ = std::fs::remove_dir_all(r);
    }

    print_metrics(
        &format!("Flight recorder benchmarks ({rounds} interleaved rounds, medians)"),
        62,
        "flight.csv",
        m.iter().map(|x| {
            let ratio = x.baseline.map(|b| x.value / b);
            (x.name.as_str(), x.value, x.unit, x.baseline, ratio)
        }),
    )
}
