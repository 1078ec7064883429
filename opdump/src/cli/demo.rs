//! `opdump demo`: the main job. Trains a small LeNet-5 for a few steps, dumping every kernel
//! through the Dumper, and reports files, bytes, throughput and the step-time overhead against
//! the same run without dump.

use std::{
    io::Write,
    path::{Path, PathBuf},
    time::Instant,
};

use dump_host::{
    DumpOptions, Step, TensorRef,
    config::{Env, FlightRecorder, NonFinitePolicy, SavedData},
    writer::WriterConfig,
};

use crate::demo::{LeNet, NoTrace, Tracer, View};

use super::{
    events::EventQueue,
    outcome::{Failure, Outcome, Verdict},
};

/// Arguments of `opdump demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A MindSpore data_dump.json or an msprobe config.json (written in msprobe's layout) to
    /// use instead of the embedded one (which dumps every kernel with saved_data "full", all
    /// statistic categories, iteration "all").
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Training steps to run.
    #[arg(long, default_value_t = 3)]
    pub steps: u32,
    /// Where to write the dump (replaces the config's `path`). Default `./opdump-demo` for the
    /// embedded config.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Images per batch (bigger batches make longer steps; the dump cost per tensor grows with
    /// the tensor size).
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    /// saved_data of the embedded config: tensor, statistic or full.
    #[arg(long, value_parser = parse_saved)]
    pub saved_data: Option<SavedData>,
    /// statistic_category of the embedded config: `all` (default: every column, md5 and sha1
    /// included, which makes hashing the bottleneck), `default` (MindSpore's max, min, l2norm),
    /// or a comma-separated list of category names.
    #[arg(long, default_value = "all")]
    pub categories: String,
    /// Write synchronously (no background writer threads).
    #[arg(long)]
    pub sync: bool,
    /// Write at most this many MiB of .npy files; later files are skipped (their statistic
    /// rows are still written). Same as OPDUMP_DISK_BUDGET_MB. Default: no limit.
    #[arg(long, value_name = "MIB")]
    pub disk_budget_mb: Option<u64>,
    /// Only dump: skip the undumped baseline run (no overhead figure).
    #[arg(long)]
    pub no_baseline: bool,
    /// At step STEP, put a NaN into the dumped output of one kernel (the first ReLU, or the
    /// kernel --inject-nan-at names; printed), so that `opdump inspect` and the flight recorder
    /// have something to find. The network's own values are untouched.
    #[arg(long, value_name = "STEP")]
    pub inject_nan: Option<u64>,
    /// Which kernel --inject-nan puts the NaN into: the first float32 kernel whose op type is
    /// KERNEL or whose full name contains it (`Conv2D`, `fc2`, `MatMul-op1`). Default: ReLU.
    #[arg(
        long,
        value_name = "KERNEL",
        requires = "inject_nan",
        default_value = "ReLU"
    )]
    pub inject_nan_at: String,
    /// Run a flight recorder holding the last N steps (statistics, and tensors within
    /// --flight-budget-mb) in memory: nothing is written until a NaN or ±Inf shows in an
    /// output (try --inject-nan), then those N steps, the step that went wrong and
    /// rank_0/trigger.json (which names the kernel) are written. Overrides the config's
    /// opdump.flight_recorder.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub flight_recorder: Option<u32>,
    /// The flight recorder's memory budget for tensor copies, in MiB (default 1024).
    #[arg(long, value_name = "MIB", requires = "flight_recorder")]
    pub flight_budget_mb: Option<u64>,
    /// Stop at the first NaN or ±Inf output: the step ends there, the kernel is printed, what
    /// the flight recorder holds is written, and the demo exits 1.
    #[arg(long)]
    pub stop_at_nonfinite: bool,
}

fn parse_saved(s: &str) -> Result<SavedData, String> {
    match s {
        "tensor" => Ok(SavedData::Tensor),
        "statistic" => Ok(SavedData::Statistic),
        "full" => Ok(SavedData::Full),
        _ => Err(format!("{s:?}: allowed tensor, statistic, full")),
    }
}

/// The `statistic_category` JSON for `--categories`.
pub(crate) fn categories_json(arg: &str) -> String {
    match arg {
        "all" => serde_json::Value::from(
            dump_stats::CategorySet::all()
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>(),
        )
        .to_string(),
        "default" => r#"["max", "min", "l2norm"]"#.to_owned(),
        list => serde_json::Value::from(
            list.split(',')
                .map(|c| c.trim().to_owned())
                .collect::<Vec<_>>(),
        )
        .to_string(),
    }
}

/// The embedded demo config for dump root `path`, with `statistic_category` `categories` (JSON).
pub fn default_config(path: &str, saved: SavedData, categories: &str) -> String {
    format!(
        r#"{{
  "common_dump_settings": {{
    "dump_mode": 0,
    "path": "{path}",
    "net_name": "LeNet5",
    "iteration": "all",
    "saved_data": "{}",
    "input_output": 0,
    "kernels": [],
    "support_device": [0, 1, 2, 3, 4, 5, 6, 7],
    "statistic_category": {categories}
  }},
  "e2e_dump_settings": {{
    "enable": true,
    "trans_flag": true
  }}
}}
"#,
        saved.as_str()
    )
}

/// Reports the network's kernels to a step of the Dumper.
struct DumpTracer<'a> {
    step: &'a Step,
    first_error: Option<dump_host::Error>,
    /// Put a NaN into a dumped output at this step.
    inject_nan: Option<u64>,
    /// The kernel: an op type, or a part of the full name.
    inject_at: &'a str,
    /// The kernel that got the NaN.
    injected: Option<String>,
}

impl DumpTracer<'_> {
    /// `v` with its first element made NaN, when this is the kernel to inject into.
    fn injected_copy(&mut self, op_type: &str, full_name: &str, v: &View<'_>) -> Option<Vec<u8>> {
        let wanted = self.inject_nan == Some(self.step.iteration())
            && self.injected.is_none()
            && (op_type == self.inject_at || full_name.contains(self.inject_at))
            && v.dtype == dump_core::DType::Float32
            && v.data.len() >= 4;
        if !wanted {
            return None;
        }
        self.injected = Some(format!("{op_type} {full_name} output.0"));
        let mut data = v.data.to_vec();
        data[..4].copy_from_slice(&f32::NAN.to_le_bytes());
        Some(data)
    }
}

impl Tracer for DumpTracer<'_> {
    fn wants(&mut self, op_type: &str, full_name: &str) -> bool {
        self.step.kernel(op_type, full_name).is_some()
    }

    fn kernel(
        &mut self,
        op_type: &str,
        full_name: &str,
        inputs: &[View<'_>],
        outputs: &[View<'_>],
    ) {
        let Some(k) = self.step.kernel(op_type, full_name) else {
            return;
        };
        let r = (|| {
            for (i, v) in inputs.iter().enumerate() {
                k.input(i as u32, TensorRef::host(v.dtype, v.shape, v.data))?;
            }
            for (i, v) in outputs.iter().enumerate() {
                let nan = if i == 0 {
                    self.injected_copy(op_type, full_name, v)
                } else {
                    None
                };
                let data = nan.as_deref().unwrap_or(v.data);
                k.output(i as u32, TensorRef::host(v.dtype, v.shape, data))?;
            }
            Ok(())
        })();
        if let Err(e) = r {
            self.first_error.get_or_insert(e);
        }
    }

    fn parameter(&mut self, name: &str, value: View<'_>) {
        if let Err(e) = self
            .step
            .parameter(name, TensorRef::host(value.dtype, value.shape, value.data))
        {
            self.first_error.get_or_insert(e);
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Runs `demo`: progress and the summary on `out`, the library's warnings on `err`.
pub fn run(args: &Args, env: &dyn Env, out: &mut dyn Write, err: &mut dyn Write) -> Outcome {
    if args.batch == 0 || args.steps == 0 {
        return Err(Failure::Invalid(
            "--batch and --steps must be at least 1".into(),
        ));
    }
    // The config: embedded (root = --out) or the user's file (root replaced by --out if given).
    let text = match &args.config {
        None => default_config(
            super::open_dump::STAND_IN,
            args.saved_data.unwrap_or(SavedData::Full),
            &categories_json(&args.categories),
        ),
        // Read as the Dumper and `opdump check` read configs (regular file, bounded size).
        Some(p) => match dump_host::config::read_config_file(p).and_then(|b| {
            String::from_utf8(b).map_err(|e| dump_host::Error::Path {
                path: p.clone(),
                message: format!(
                    "the dump config is not UTF-8 text (invalid byte at offset {})",
                    e.utf8_error().valid_up_to()
                ),
            })
        }) {
            Ok(t) => t,
            Err(e) => {
                return Err(Failure::Invalid(e.to_string()));
            }
        },
    };
    let root = match (&args.config, &args.out) {
        (_, Some(o)) => Some(o.as_path()),
        (None, None) => Some(Path::new("opdump-demo")),
        (Some(_), None) => None,
    };
    let mut opts = match DumpOptions::from_env(env) {
        Ok(o) => o,
        Err(e) => {
            return Err(Failure::Invalid(e.to_string()));
        }
    };
    if args.sync {
        opts.writer = WriterConfig::sync();
    }
    if let Some(mb) = args.disk_budget_mb {
        opts.disk_budget_bytes = Some(mb.saturating_mul(1 << 20));
    }
    if let Some(steps) = args.flight_recorder {
        let mut f = FlightRecorder {
            steps,
            ..FlightRecorder::default()
        };
        if let Some(mb) = args.flight_budget_mb {
            f.budget_bytes = mb.saturating_mul(1 << 20);
        }
        opts.flight_recorder = Some(f);
    }
    if args.stop_at_nonfinite {
        opts.on_nonfinite = Some(NonFinitePolicy::Stop);
    }
    // The library's warnings are queued and printed here, between library calls.
    let events = EventQueue::new();

    // Baseline: the same steps without dump.
    let mut base_ms = Vec::new();
    if !args.no_baseline {
        let mut net = LeNet::new(args.batch);
        for _ in 0..args.steps {
            let t = Instant::now();
            net.step(&mut NoTrace);
            base_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }

    let target = super::open_dump::Target {
        text: &text,
        root,
        embedded: args.config.is_none(),
    };
    let opened = super::open_dump::open(&target, env, &opts, events.sink());
    events.print_to(err);
    let mut dumper = match opened {
        Ok(d) => d,
        Err(e) => {
            return Err(Failure::Invalid(match &args.config {
                Some(p) => format!("{}: {e}", p.display()),
                None => e.to_string(),
            }));
        }
    };
    let root = dumper
        .plan()
        .map(|p| p.root.display().to_string())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "opdump demo: LeNet-5, batch {}, {} steps, dumping to {root}",
        args.batch, args.steps
    );
    let mut net = LeNet::new(args.batch);
    let order = net.execution_order();
    let order: Vec<&str> = order.iter().map(String::as_str).collect();
    let wall = Instant::now();
    if let Err(e) = dumper.begin_graph(0, &order) {
        events.print_to(err);
        return Err(Failure::Failed(e.to_string()));
    }
    let mut dump_ms = Vec::new();
    let mut failed = None;
    let mut stopped = None;
    for _ in 0..args.steps {
        let t = Instant::now();
        let step = dumper.begin_step();
        let n = step.iteration();
        let mut tracer = DumpTracer {
            step: &step,
            first_error: None,
            inject_nan: args.inject_nan,
            inject_at: &args.inject_nan_at,
            injected: None,
        };
        let loss = net.step(&mut tracer);
        if let Some(k) = &tracer.injected {
            let _ = writeln!(out, "  step {n}: injected a NaN into the dumped {k}");
        }
        match tracer.first_error.take() {
            Some(dump_host::Error::NonFinite(at)) => stopped = Some(at),
            Some(e) => {
                failed.get_or_insert(e);
            }
            None => {}
        }
        if let Err(e) = step.finish() {
            failed.get_or_insert(e);
        }
        let ms = t.elapsed().as_secs_f64() * 1e3;
        dump_ms.push(ms);
        events.print_to(err);
        let p = dumper.progress();
        let _ = writeln!(
            out,
            "  step {n}: loss {loss:.6}, {ms:.1} ms, {} files, {} rows so far",
            p.files, p.rows
        );
        if let Some(at) = &stopped {
            let _ = writeln!(out, "stopped at the first non-finite output: {at}");
            break;
        }
    }
    let report = dumper.close();
    let secs = wall.elapsed().as_secs_f64();
    events.print_to(err);
    let report = match (report, failed) {
        (Ok(r), None) => r,
        (Err(e), _) | (Ok(_), Some(e)) => {
            return Err(Failure::Failed(e.to_string()));
        }
    };
    let mb = report.bytes as f64 / 1e6;
    let _ = writeln!(
        out,
        "wrote {} .npy files ({mb:.1} MB) and {} statistic rows in {secs:.3} s ({:.1} MB/s incl. flush)",
        report.files,
        report.rows,
        mb / secs.max(1e-9)
    );
    if report.skipped_files > 0 {
        let _ = writeln!(
            out,
            "disk budget reached: {} .npy files ({:.1} MB) skipped, their statistic rows kept",
            report.skipped_files,
            report.skipped_bytes as f64 / 1e6
        );
    }
    if args.flight_recorder.is_some() {
        // MindSpore's layout puts it in the rank directory, msprobe's beside the steps.
        let trigger = [Path::new(&root).join("rank_0"), Path::new(&root).to_owned()]
            .map(|d| d.join("trigger.json"))
            .into_iter()
            .find(|p| p.exists());
        let _ = match trigger {
            Some(trigger) => writeln!(
                out,
                "flight recorder: {} (then: opdump inspect {root})",
                trigger.display()
            ),
            None => writeln!(out, "flight recorder: no trigger fired, nothing written"),
        };
    }
    if stopped.is_some() {
        return Ok(Verdict::Found);
    }
    if !base_ms.is_empty() {
        let (b, d) = (median(&mut base_ms), median(&mut dump_ms));
        let _ = writeln!(
            out,
            "median step time: {d:.2} ms with dump vs {b:.2} ms without ({:.2}x)",
            d / b.max(1e-9)
        );
    }
    Ok(Verdict::Clean)
}
