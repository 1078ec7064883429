//! Diagnostics: what the library has to tell its user, as typed [`Event`]s delivered to an
//! [`EventSink`] (set with [`DumperBuilder::events`](crate::DumperBuilder::events) or
//! [`DumperBuilder::on_event`](crate::DumperBuilder::on_event)).
//!
//! The library never prints. Every warning it used to write to stderr is an [`Event`] whose
//! [`Display`](std::fmt::Display) is that warning's exact text (one line, no newline), so a
//! runtime can route them to its own log, count them, or drop them. The default sink,
//! [`EventSink::stderr`], writes one line per event to file descriptor 2 from the thread that
//! raised it, ignoring write errors (a full or closed stderr never panics a writer thread).
//!
//! Events are always delivered with no opdump lock held, so a sink may call back into the
//! Dumper (say, [`Dumper::progress`](crate::Dumper::progress)) and a sink that blocks (a full
//! pipe) stalls only the thread that raised the event. Events raised by background writes are
//! delivered on the writer thread: a sink must be `Send + Sync`. A sink that panics is contained:
//! the panic is caught and the event dropped.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use dump_host::diag::{Event, EventSink};
//!
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let log = Arc::clone(&seen);
//! let sink = EventSink::new(move |e: &Event| log.lock().unwrap().push(e.to_string()));
//! sink.emit(&Event::UnusedKernel { entry: "Conv2D-op9".into() });
//! assert_eq!(seen.lock().unwrap()[0], "[DataDump] Unused Kernel in json: Conv2D-op9");
//! ```

use std::{
    fmt,
    io::Write,
    mem::ManuallyDrop,
    os::fd::FromRawFd,
    panic::{AssertUnwindSafe, catch_unwind},
    path::PathBuf,
    sync::Arc,
};

use crate::config::Diagnostic;

/// Something the library reports to its user instead of printing it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The config is accepted but probably does not do what its author expects.
    ConfigWarning(Diagnostic),
    /// This process's device is not in `support_device`: the Dumper dumps nothing.
    DeviceNotSelected {
        /// This process's device id.
        device_id: u32,
        /// The config's `support_device`.
        support_device: Vec<u32>,
    },
    /// A `kernels` entry never matched a kernel (reported when the Dumper closes, like
    /// MindSpore's `[DataDump] Unused Kernel in json: <k>`).
    UnusedKernel {
        /// The entry as written in the config.
        entry: String,
    },
    /// The Dumper closed without writing anything, and that is probably a mistake.
    NothingDumped(EmptyReason),
    /// The disk budget refused its first `.npy` file: it and every later one are not written
    /// (their `statistic.csv` rows still are). Raised once per Dumper.
    DiskBudgetReached {
        /// The budget in bytes.
        limit: u64,
        /// The file name refused first.
        file: String,
        /// Its size in bytes.
        file_bytes: u64,
    },
    /// At close: what the disk budget kept out.
    DiskBudgetSummary {
        /// `.npy` files not written.
        skipped_files: u64,
        /// Their bytes.
        skipped_bytes: u64,
        /// Bytes of `.npy` files that were written.
        written_bytes: u64,
    },
    /// A write failed. Raised once per directory and kind of error (later failures of that
    /// directory and kind are only counted, and returned by `flush`/`finish`/`close`).
    WriteFailed {
        /// The file (or directory) that could not be written.
        path: PathBuf,
        /// The kind of error.
        kind: std::io::ErrorKind,
        /// The OS error as text (`No space left on device (os error 28)`).
        error: String,
        /// Its number among all failures of this Dumper (1 for the first).
        number: u64,
    },
    /// The flight recorder's byte budget cannot hold every tensor of the steps it keeps: it
    /// keeps statistics for every kernel and tensors for as many kernels as fit, the latest
    /// first. Raised once per Dumper.
    FlightBudgetReached {
        /// The budget (`opdump.flight_recorder.budget_bytes`).
        budget_bytes: u64,
        /// Steps kept before the current one.
        steps: u32,
        /// The step being recorded when the first tensor was let go.
        step: u64,
    },
    /// A flight-recorder trigger fired and its files are on disk (`trigger.json` last).
    FlightRecorderWrote {
        /// The `trigger.json` written.
        trigger_file: PathBuf,
        /// What fired (`nonfinite`, `overflow`, `user`).
        kind: &'static str,
        /// The kernel whose output fired it, or the user's reason.
        what: String,
        /// The steps written, oldest first.
        steps: Vec<u64>,
        /// Tensors written (`.npy` files queued and flushed).
        tensors: u64,
        /// Tensors the byte budget had let go (their statistics were written).
        dropped_tensors: u64,
    },
    /// Watcher mode: a watched output changed while a kernel that is not its writer ran
    /// (memory corruption); its `watcher.csv` row is written.
    MemoryCorruption(Box<crate::watcher::Corruption>),
    /// Watcher mode: a watched output's handle could not be read (raised once per handle):
    /// that output is not checked.
    WatchedUnreadable {
        /// Which output, and why.
        what: String,
    },
    /// A trigger fired after `max_triggers` triggers had written: nothing is written. Raised
    /// once per Dumper.
    FlightTriggersExhausted {
        /// `opdump.flight_recorder.max_triggers`.
        max_triggers: u32,
        /// What fired.
        kind: &'static str,
        /// The step.
        step: u64,
    },
}

/// Why a Dumper wrote nothing ([`Event::NothingDumped`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmptyReason {
    /// `begin_step` was never called.
    NoStep,
    /// `iteration` matched none of the steps run.
    IterationMatchedNone {
        /// The config's `iteration`.
        iteration: String,
        /// Steps run.
        steps: u64,
        /// The first step number.
        first: u64,
        /// The last step number.
        last: u64,
    },
    /// Every write failed (a read-only or full file system, a missing permission): the kernel
    /// filter is not to blame.
    WritesFailed {
        /// Steps `iteration` selected.
        selected_steps: u64,
        /// Write failures counted.
        failures: u64,
        /// The first failure (`path: error`).
        first: String,
    },
    /// Steps were selected and every kernel was wanted, but no kernel reported a non-empty
    /// tensor.
    NoTensor {
        /// Steps `iteration` selected.
        selected_steps: u64,
    },
    /// Steps were selected but no kernel matched `kernels`.
    KernelsMatchedNone {
        /// Steps `iteration` selected.
        selected_steps: u64,
        /// The `kernels` entries.
        kernels: Vec<String>,
    },
}

impl fmt::Display for EmptyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmptyReason::NoStep => {
                f.write_str("no step was begun (call Dumper::begin_step for each step)")
            }
            EmptyReason::IterationMatchedNone {
                iteration,
                steps,
                first,
                last,
            } => write!(
                f,
                "iteration {iteration:?} matched none of the {steps} step(s) run (steps \
                 {first}..={last})"
            ),
            EmptyReason::WritesFailed {
                selected_steps,
                failures,
                first,
            } => write!(
                f,
                "{selected_steps} step(s) were selected but every write failed ({failures} \
                 failure(s); the first: {first})"
            ),
            EmptyReason::NoTensor { selected_steps } => write!(
                f,
                "{selected_steps} step(s) were selected but no kernel reported a non-empty tensor"
            ),
            EmptyReason::KernelsMatchedNone {
                selected_steps,
                kernels,
            } => write!(
                f,
                "{selected_steps} step(s) were selected but no kernel matched `kernels` \
                 {kernels:?}"
            ),
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::ConfigWarning(d) => write!(f, "[opdump] {d}"),
            Event::DeviceNotSelected {
                device_id,
                support_device,
            } => write!(
                f,
                "[opdump] Dump is not enabled. device_id:{device_id} not in support_device \
                 {support_device:?}"
            ),
            Event::UnusedKernel { entry } => write!(f, "[DataDump] Unused Kernel in json: {entry}"),
            Event::MemoryCorruption(c) => write!(f, "[opdump] watcher: {c}"),
            Event::WatchedUnreadable { what } => {
                write!(f, "[opdump] watcher: {what}; this output is not checked")
            }
            Event::NothingDumped(why) => write!(f, "[opdump] warning: nothing was dumped: {why}"),
            Event::DiskBudgetReached {
                limit,
                file,
                file_bytes,
            } => write!(
                f,
                "[opdump] disk budget of {limit} bytes reached: {file} ({file_bytes} bytes) and \
                 every later .npy file are not written; statistic.csv rows still are (raise \
                 OPDUMP_DISK_BUDGET_MB, or narrow `kernels` / `iteration`)"
            ),
            Event::DiskBudgetSummary {
                skipped_files,
                skipped_bytes,
                written_bytes,
            } => write!(
                f,
                "[opdump] disk budget: {skipped_files} .npy file(s), {skipped_bytes} bytes, were \
                 not written (their statistic.csv rows were); {written_bytes} bytes of .npy \
                 files were"
            ),
            Event::FlightBudgetReached {
                budget_bytes,
                steps,
                step,
            } => write!(
                f,
                "[opdump] flight recorder: {budget_bytes} bytes cannot hold the tensors of \
                 {steps} step(s) and the current one (step {step}): statistics are kept for \
                 every kernel, tensors for as many kernels as fit, the latest first (raise \
                 opdump.flight_recorder.budget_bytes, or narrow `kernels`)"
            ),
            Event::FlightRecorderWrote {
                trigger_file,
                kind,
                what,
                steps,
                tensors,
                dropped_tensors,
            } => {
                write!(
                    f,
                    "[opdump] flight recorder: {kind} trigger ({what}): wrote step(s) {steps:?}, \
                     {tensors} tensor file(s)"
                )?;
                if *dropped_tensors > 0 {
                    write!(f, " ({dropped_tensors} tensor(s) let go by the budget)")?;
                }
                write!(f, "; {}", trigger_file.display())
            }
            Event::FlightTriggersExhausted {
                max_triggers,
                kind,
                step,
            } => write!(
                f,
                "[opdump] flight recorder: a {kind} trigger at step {step} writes nothing: \
                 max_triggers ({max_triggers}) triggers have written (later ones are not \
                 reported)"
            ),
            Event::WriteFailed {
                path,
                error,
                number,
                ..
            } => write!(
                f,
                "[opdump] write failed: {}: {error} (failure #{number}; later failures in this \
                 directory are counted, not logged)",
                path.display()
            ),
        }
    }
}

/// Where [`Event`]s go: a shared callback, cheap to clone.
///
/// Its [`Default`] is [`EventSink::stderr`].
#[derive(Clone)]
pub struct EventSink(Arc<dyn Fn(&Event) + Send + Sync>);

impl fmt::Debug for EventSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EventSink(..)")
    }
}

impl Default for EventSink {
    fn default() -> Self {
        Self::stderr()
    }
}

impl EventSink {
    /// Delivers every event to `f`. It is called on whichever thread raised the event (the
    /// runtime's, or a writer thread), with no opdump lock held.
    pub fn new(f: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        EventSink(Arc::new(f))
    }

    /// Writes each event as one line to the process's stderr (file descriptor 2), from the
    /// thread that raised it, ignoring write errors. It writes to the descriptor directly,
    /// without Rust's `Stderr` lock, so a program that holds `std::io::stderr().lock()` while
    /// calling the Dumper does not deadlock with a writer thread's event.
    pub fn stderr() -> Self {
        Self::new(|e| write_line_to_stderr(&e.to_string()))
    }

    /// Drops every event.
    pub fn ignore() -> Self {
        Self::new(|_| {})
    }

    /// Delivers `event`. A panicking sink is contained here: the event is dropped and the
    /// caller (possibly a writer thread) carries on.
    pub fn emit(&self, event: &Event) {
        let _ = catch_unwind(AssertUnwindSafe(|| (self.0)(event)));
    }
}

/// One `write` of `line` plus a newline to file descriptor 2; errors (a full device, a closed
/// pipe) are ignored.
fn write_line_to_stderr(line: &str) {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    // SAFETY: descriptor 2 is the process's stderr, open for the life of the process (Rust's
    // runtime reopens it on /dev/null when a program starts without one). The File is wrapped in
    // ManuallyDrop, so it is never closed here: we only borrow the descriptor for one write.
    let mut fd2 = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(2) });
    let _ = fd2.write_all(&buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn texts_are_the_warnings_the_library_used_to_print() {
        let e = Event::UnusedKernel {
            entry: "Default/x".into(),
        };
        assert_eq!(e.to_string(), "[DataDump] Unused Kernel in json: Default/x");
        let e = Event::DeviceNotSelected {
            device_id: 3,
            support_device: vec![0, 1],
        };
        assert_eq!(
            e.to_string(),
            "[opdump] Dump is not enabled. device_id:3 not in support_device [0, 1]"
        );
        let e = Event::WriteFailed {
            path: "/d/x.npy".into(),
            kind: std::io::ErrorKind::Other,
            error: "No space left on device (os error 28)".into(),
            number: 7,
        };
        assert_eq!(
            e.to_string(),
            "[opdump] write failed: /d/x.npy: No space left on device (os error 28) (failure #7; \
             later failures in this directory are counted, not logged)"
        );
        let e = Event::NothingDumped(EmptyReason::NoStep);
        assert_eq!(
            e.to_string(),
            "[opdump] warning: nothing was dumped: no step was begun (call Dumper::begin_step \
             for each step)"
        );
        for e in [
            e,
            Event::DiskBudgetSummary {
                skipped_files: 1,
                skipped_bytes: 2,
                written_bytes: 3,
            },
        ] {
            assert!(!e.to_string().contains('\n'), "one line: {e}");
        }
    }

    #[test]
    fn a_panicking_sink_is_contained() {
        let hits = Arc::new(AtomicUsize::new(0));
        let h = Arc::clone(&hits);
        let sink = EventSink::new(move |_| {
            h.fetch_add(1, Ordering::SeqCst);
            panic!("sink bug");
        });
        sink.emit(&Event::NothingDumped(EmptyReason::NoStep));
        sink.emit(&Event::NothingDumped(EmptyReason::NoStep));
        assert_eq!(hits.load(Ordering::SeqCst), 2, "the sink is still called");
    }
}
