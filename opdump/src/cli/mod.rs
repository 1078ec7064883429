//! The `opdump` command line: argument parsing (clap derive) and dispatch. Every subcommand is
//! a module with an `Args` struct and a `run` function that writes its report to the given
//! writer and returns an [`outcome::Outcome`]; [`outcome::finish`] is the one place that prints
//! a failure and picks the exit code. Tests run commands in-process, and nothing here panics.
//!
//! Exit codes: 0 success, 1 a finding (`inspect`: a non-finite operator; `compare`: a
//! divergence) or a model that failed to load or evaluate (`run`), 2 invalid input (bad
//! config, unreadable file, bad arguments) or a report that could not be written to standard
//! output (a full disk; a reader that closed the pipe early is no error).

pub mod check;
pub mod compare;
pub mod convert;
pub mod demo;
pub mod events;
pub mod ingest;
pub mod inspect;
mod open_dump;
pub mod outcome;
pub mod report;
pub mod run;
pub mod stats;

use std::ffi::OsString;
use std::io::Write;

use clap::{Parser, Subcommand};

use dump_host::config::Env;

pub use outcome::{EXIT_FOUND, EXIT_INVALID, EXIT_OK};

/// opdump: MindSpore-compatible operator dump for Rust ML runtimes.
#[derive(Debug, Parser)]
#[command(name = "opdump", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a dump config (MindSpore's data_dump.json, msprobe's config.json, CANN's
    /// acl.json, torchair's dump_config) and print the effective config.
    ///
    /// The dialect is detected from the keys and named on the last line. A valid config is
    /// printed to stdout as JSON with every default filled in (MindSpore's coercions applied,
    /// or msprobe's ranges expanded); warnings go to stderr; exit code 0. An invalid config
    /// prints every error (with its JSON path, the value and what is allowed; msprobe's lines
    /// also name the file) to stderr and exits with 2.
    Check(check::Args),
    /// Run the demo: train a small LeNet-5 for a few steps with every kernel dumped, then print
    /// files, bytes, throughput and the step-time overhead against the same run without dump.
    ///
    /// With no flags it uses an embedded config (all kernels, saved_data "full", every
    /// statistic category, iteration "all") and writes ./opdump-demo/.
    Demo(demo::Args),
    /// Print statistic.csv rows (header + one row per file) for existing .npy files.
    ///
    /// Op Type, Op Name, Task ID, Stream ID, Timestamp, IO and Slot come from MindSpore-style
    /// file names; statistics are computed on the host, so this also works for tensor dumps
    /// MindSpore made on CPU, where it refuses to compute statistics. Exit code 2 if any file
    /// could not be read.
    Stats(stats::Args),
    /// Run an ONNX model with every operator dumped (tract by default), and print what was
    /// dumped.
    ///
    /// The model may keep its weights in external data files beside it (torch's exporter
    /// writes M.onnx + M.onnx.data): every runtime finds them from any current folder.
    /// --out and the other path flags take any path the OS accepts; MindSpore's path rules
    /// apply only to the `path` key of a --config file.
    ///
    /// Exit code 0 when the model ran and was dumped; 1 when the runtime could not load or
    /// evaluate the model (an unsupported operator, a runtime panic, which is caught and
    /// reported with the node and op where they are known) or the dump failed; 2 on bad
    /// input (an unreadable or non-ONNX model file, a bad --input, config or argument).
    Run(run::Args),
    /// Summarise a dump: per rank and iteration counts, the first operator that produced a
    /// NaN or Inf, the kernels that grow their values most, odd outputs.
    ///
    /// The first non-finite tensor in run order is named too, with where it comes from (a
    /// kernel output, a kernel input such as a NaN weight, a Parameter), even when every
    /// kernel output is finite. Both say what the kernel is in a training step: a forward
    /// activation, a gradient (and of which parameter), a parameter, or the optimizer's update.
    ///
    /// Training dumps (dump-candle's DumpedOptimizer: Gradient, Parameter and Update kernels)
    /// also get one row per parameter: its gradient l2 norm first, last and largest, growth
    /// per step, update ratio |dw|/|w|, the first step the exploding rule holds, the first
    /// step either is NaN/Inf, and a verdict:
    /// exploding (a non-finite norm or ratio, the norm grown to 100x its first value, or a
    /// ratio >= 1), frozen (every ratio <= 1e-10, or every norm 0), vanishing (the last norm
    /// <= 1e-7 or <= 1e-3 x the largest before it), else ok.
    ///
    /// Exit code 0 when every tensor is finite, 1 when any tensor holds a NaN or Inf, 2 when
    /// the dump cannot be read.
    Inspect(inspect::Args),
    /// Compare two dumps tensor by tensor and name the first divergent operator.
    ///
    /// Exit code 0 when every pair is within tolerance, 1 when a divergence was found, 2 on an
    /// error.
    Compare(compare::Args),
    /// Convert Ascend CANN dump files ({op_type}.{op_name}.{task}.{stream}.{timestamp}) to
    /// .npy, streamed and in parallel: msaccucmp's `convert` without the CANN toolkit.
    ///
    /// Directories are walked; device formats (NC1HWC0, FRACTAL_Z, FRACTAL_NZ, C1HWNCoC0, ...:
    /// see --format) are converted with --format; --layout mindspore writes MindSpore's tree and statistic.csv so that
    /// inspect and compare read the result. Exit code 2 if any file failed (each error names
    /// the file and the byte offset), 0 otherwise.
    Convert(convert::Args),
    /// Turn a device agent's frame stream (docs/wire.md) into the standard dump layout:
    /// statistic.csv per iteration, execution order, .dump_metadata (no .npy).
    ///
    /// SOURCE is a saved stream or a serial device (read as a file), `-` for stdin, or
    /// tcp://HOST:PORT (listen, accept one sender). Bad frames (torn, corrupt, duplicated,
    /// reordered, over-long) are reported on stderr with their byte offsets and skipped; a
    /// dropped connection keeps every row received before it. Exit code 0 when the stream was
    /// clean, 1 when problems were seen (what arrived intact is still written), 2 on invalid
    /// input (bad config, unreadable source).
    Ingest(ingest::Args),
}

/// Runs the command line `args` (program name first) with `env` as the environment, writing
/// to `out` and `err`; returns the process exit code.
pub fn run<I, T>(args: I, env: &dyn Env, out: &mut dyn Write, err: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    // Reports are written best effort (a closed pipe changes nothing); a report that did not
    // reach its file (a full disk) is an error once the command is done.
    let mut watched = outcome::OutputWatch::new(out);
    let out = &mut watched;
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            // --help and --version are "errors" for clap but succeed.
            let code = if e.use_stderr() {
                EXIT_INVALID
            } else {
                EXIT_OK
            };
            let text = e.render().to_string();
            let _ = if e.use_stderr() {
                err.write_all(text.as_bytes())
            } else {
                out.write_all(text.as_bytes())
            };
            return watched.finish(code, err);
        }
    };
    let outcome = match cli.command {
        Command::Check(a) => check::run(&a, env, out, err),
        Command::Demo(a) => demo::run(&a, env, out, err),
        Command::Stats(a) => stats::run(&a, out, err),
        Command::Run(a) => run::run(&a, env, out, err),
        Command::Inspect(a) => inspect::run(&a, out, err),
        Command::Compare(a) => compare::run(&a, out, err),
        Command::Convert(a) => convert::run(&a, out, err),
        Command::Ingest(a) => ingest::run(&a, env, out, err),
    };
    let code = outcome::finish(outcome, err);
    watched.finish(code, err)
}
