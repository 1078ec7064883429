//! The soak of the hardening campaign (`tests/soak.rs`, `cargo xtask hardening --soak`): many
//! steps of a tiny kernel list with statistic dump and a rotating iteration filter, with the
//! process's resident memory, open file descriptors and threads measured at start and end.

use std::{fmt, fs, path::Path};

use dump_core::DType;
use dump_host::{DumpOptions, DumpReport, Dumper, Error, TensorRef};
use serde_json::json;

use crate::{
    config::{config, no_env},
    tinynet::Tensor,
};

/// What a process holds: resident memory, open file descriptors, threads (from `/proc/self`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resources {
    /// `VmRSS` in KiB.
    pub rss_kib: u64,
    /// Entries of `/proc/self/fd`.
    pub fds: usize,
    /// `Threads`.
    pub threads: u64,
}

impl Resources {
    /// Measures this process now.
    pub fn now() -> Resources {
        let status = fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in /proc/self/status"))
        };
        Resources {
            rss_kib: field("VmRSS:"),
            fds: fs::read_dir("/proc/self/fd")
                .expect("/proc/self/fd")
                .count(),
            threads: field("Threads:"),
        }
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RSS {:.1} MiB, {} fds, {} threads",
            self.rss_kib as f64 / 1024.0,
            self.fds,
            self.threads
        )
    }
}

/// The soak's kernels: `(op_type, full_name, input, output)`, a LeNet-like tiny sequence.
fn kernels() -> Vec<(&'static str, &'static str, Tensor, Tensor)> {
    let t = |d, s: &[usize], seed| Tensor::synth(d, s, seed, 0);
    use DType::{Float16 as F16, Float32 as F32, Int32 as I32};
    vec![
        (
            "Conv2D",
            "Default/conv1-Conv2d/Conv2D-op0",
            t(F32, &[1, 1, 16, 16], 1),
            t(F32, &[1, 6, 12, 12], 2),
        ),
        (
            "ReLU",
            "Default/relu-ReLU/ReLU-op0",
            t(F32, &[1, 6, 12, 12], 2),
            t(F32, &[1, 6, 12, 12], 3),
        ),
        (
            "MaxPool",
            "Default/pool-MaxPool2d/MaxPool-op0",
            t(F32, &[1, 6, 12, 12], 3),
            t(F32, &[1, 6, 6, 6], 4),
        ),
        (
            "Flatten",
            "Default/flatten-Flatten/Flatten-op0",
            t(F32, &[1, 6, 6, 6], 4),
            t(F32, &[1, 216], 5),
        ),
        (
            "MatMul",
            "Default/fc-Dense/MatMul-op0",
            t(F32, &[1, 216], 5),
            t(F32, &[1, 10], 6),
        ),
        (
            "Cast",
            "Default/Cast-op0",
            t(F32, &[1, 10], 6),
            t(F16, &[1, 10], 7),
        ),
        (
            "ArgMax",
            "Default/ArgMax-op0",
            t(F16, &[1, 10], 7),
            t(I32, &[1], 8),
        ),
        (
            "Add",
            "Default/optimizer/AssignAdd-op0",
            t(I32, &[1], 8),
            t(I32, &[1], 9),
        ),
    ]
}

/// The iteration filter: `width` steps dumped out of every `period`, up to `steps`
/// (`"0-4|100-104|..."` for 5 of 100): the dumped iteration moves through the whole run.
pub fn rotating_filter(steps: u64, period: u64, width: u64) -> String {
    (0..steps.div_ceil(period))
        .map(|w| format!("{}-{}", w * period, w * period + width - 1))
        .collect::<Vec<_>>()
        .join("|")
}

/// What [`run`] measured.
#[derive(Clone, Debug)]
pub struct Soak {
    /// Steps run.
    pub steps: u64,
    /// Steps the filter dumped.
    pub dumped_steps: u64,
    /// Resources after the first `2 * period` steps (writer threads started, files of two
    /// windows made, so a small cache of open files is already full).
    pub start: Resources,
    /// Resources after the last step, before `close`.
    pub end: Resources,
    /// `close`'s report.
    pub report: DumpReport,
    /// Wall time of the steps in seconds.
    pub seconds: f64,
}

/// Runs `steps` steps of the tiny kernel list into `root` with saved_data statistic and
/// [`rotating_filter`]`(steps, period, width)`.
pub fn run(root: &Path, steps: u64, period: u64, width: u64) -> Result<Soak, Error> {
    let ks = kernels();
    let cfg = config(
        root,
        json!({"saved_data": "statistic", "input_output": 0, "iteration": rotating_filter(steps, period, width)}),
        json!({}),
    );
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)?;
    let order: Vec<&str> = ks.iter().map(|k| k.1).collect();
    d.begin_graph(0, &order)?;
    let mut start = None;
    let mut dumped_steps = 0;
    let t0 = std::time::Instant::now();
    for s in 0..steps {
        if s == (2 * period).min(steps - 1) {
            start = Some(Resources::now());
        }
        let step = d.begin_step();
        dumped_steps += u64::from(step.is_active());
        for (op, name, input, output) in &ks {
            if let Some(k) = step.kernel(op, name) {
                k.input(0, TensorRef::host(input.dtype, &input.shape, &input.bytes))?;
                k.output(
                    0,
                    TensorRef::host(output.dtype, &output.shape, &output.bytes),
                )?;
            }
        }
        step.finish()?;
    }
    let seconds = t0.elapsed().as_secs_f64();
    d.flush()?;
    let end = Resources::now();
    let report = d.close()?;
    Ok(Soak {
        steps,
        dumped_steps,
        start: start.unwrap_or(end),
        end,
        report,
        seconds,
    })
}

/// The soak's kernel count (rows per dumped step are twice this).
pub fn kernel_count() -> usize {
    kernels().len()
}
