//! `opdump inspect DIR [--json] [--html FILE] [--top N]`: what a dump holds, and the first
//! operator that produced a NaN or an infinity.
//!
//! Per rank and iteration: kernels, tensors and bytes. The **first non-finite operator**: in
//! run order (iteration, rank, then the tensors' timestamps), the first kernel with a NaN or
//! ±Inf in an output while all its dumped inputs are finite; when no such kernel exists (inputs
//! not dumped, e.g. `input_output: 2`), the first kernel with a non-finite output, and the
//! report says so. Then the kernels that grow max|x| or the l2 norm most from inputs to outputs,
//! and outputs that are all zeros or constant. Statistics come from `statistic.csv` rows and
//! are computed by streaming the `.npy` files where the rows lack them. The **first
//! non-finite tensor** in run order (kernel inputs before outputs, Parameters too) is reported
//! with where it comes from when it is not that operator's output: a NaN that enters through a
//! graph input or a weight is found even when every kernel output stays finite.
//!
//! On a training dump both name the kernel's role (`dump_read::train::Role`: a gradient and
//! its parameter, a parameter, an activation, the optimizer's update or state), and a table
//! gives per parameter its gradient norm and update ratio over the steps with a verdict
//! (exploding, frozen, vanishing, ok; thresholds in `dump_read::train`), in `--json`
//! (`parameters`, `parameter_thresholds`) and on the `--html` page (two log plots and a table).
//!
//! Exit code: 0 when every tensor is finite, 1 when any tensor holds a NaN or Inf, 2 when the
//! dump cannot be read or a tensor's data cannot be read (a truncated `.npy` without a
//! statistic row: it may hold the NaN looked for; the report is still printed and written, and
//! 2 outranks 1).

use std::{io::Write, path::PathBuf};

use dump_read::{Dump, inspect::inspect};

use super::{
    outcome::{Failure, Outcome, Verdict},
    report::{self, html, inspect_report::InspectReport, json, progress::Progress, text},
};

/// Arguments of `opdump inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The dump directory (the config's `path`, or one rank_N directory such as rank_0), an
    /// msprobe dump path (step{N}/rank{R}|proc{pid}/dump.json below it), CANN dump files, an
    /// .npz of reference arrays, a directory of NAME.npy, Polygraphy's --save-outputs JSON, or a
    /// device agent's saved frame stream (a file, or a directory of *.opstream files).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Print one JSON object instead of the report (key `first_nonfinite`).
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML page with plots to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// How many kernels to list by growth.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
    /// Worker threads (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

/// The threads to use.
pub fn threads(n: Option<usize>) -> usize {
    n.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

/// Runs `inspect`: builds its [`InspectReport`] and renders it, the report on `out` (or
/// `--json`; the page to `--html`), warnings and the summary on `err`; [`Verdict::Found`]
/// when any tensor holds a NaN or Inf.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Outcome {
    if args.html.is_some() {
        report::output::install_interrupt_handler();
    }
    let dump = Dump::open(&args.dir).map_err(|e| Failure::Invalid(e.to_string()))?;
    let bar = Progress::new("inspect", dump.tensors.len(), !args.json);
    let ins = inspect(&dump, threads(args.threads), &|d, _| bar.set(d));
    bar.finish();
    let r = InspectReport::new(&args.dir, &dump, ins, args.top);
    // Terminal output is best effort: a closed pipe does not change the verdict.
    let _ = text::inspect_warnings(&r, err);
    let _ = if args.json {
        json::inspect(&r, out)
    } else {
        text::inspect(&r, out)
    };
    if let Some(path) = &args.html
        && let Err(e) = report::output::write_atomic(path, html::inspect(&r).as_bytes())
    {
        return Err(Failure::Invalid(format!("cannot write the HTML page: {e}")));
    }
    let _ = text::inspect_summary(&r, err);
    // Trouble outranks a finding, as in `compare`: a tensor that could not be read may hold
    // the NaN the run is looking for.
    let n = r.ins.errors.len();
    if n > 0 {
        return Err(Failure::Invalid(format!(
            "{n} tensor{} could not be inspected: {} data could not be read (the warnings above \
             name {})",
            if n == 1 { "" } else { "s" },
            if n == 1 { "its" } else { "their" },
            if n == 1 { "it" } else { "each" },
        )));
    }
    Ok(if r.found() {
        Verdict::Found
    } else {
        Verdict::Clean
    })
}
