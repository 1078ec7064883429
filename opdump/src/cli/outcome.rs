//! What a subcommand returns, and the one place that turns it into a message and an exit code.
//!
//! A subcommand writes its report (to `out`, or to files) and returns an [`Outcome`]: a
//! [`Verdict`] when it did its job, a [`Failure`] when it could not. [`finish`] is the only
//! code that prints a failure and picks the exit code, so every command words its errors and
//! numbers its exits the same way.

use std::io::Write;

/// Exit code for success.
pub const EXIT_OK: i32 = 0;
/// Exit code for a finding (`inspect`: a non-finite tensor; `compare`: a divergence;
/// `ingest`: stream problems) or work that failed (a model that did not evaluate, a dump that
/// could not be written).
pub const EXIT_FOUND: i32 = 1;
/// Exit code for invalid input: a rejected config, an unreadable file, bad arguments; and for
/// a report that could not be written to standard output (a full disk, an I/O error).
pub const EXIT_INVALID: i32 = 2;

/// What a subcommand that did its job found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to report: every tensor finite, every pair within tolerance, a clean stream.
    Clean,
    /// The command found what it looks for (a non-finite tensor, a divergence, a bad frame);
    /// its report says what.
    Found,
}

/// Why a subcommand could not do its job. The message is a complete sentence for a
/// command-line user; [`finish`] prints each of its lines after `error: ` (a command that
/// found several independent errors joins them with newlines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The input is unusable: a config, a file, a model file or an argument (exit 2).
    Invalid(String),
    /// The work failed: the runtime could not load or evaluate the model (an unsupported op,
    /// a caught panic), or the dump could not be written (exit 1).
    Failed(String),
    /// The run stopped where it was asked to (`--stop-at-nonfinite`: a kernel's output went
    /// non-finite): a finding, printed as it is, without `error: ` (exit 1).
    Stopped(String),
}

impl Failure {
    /// The process exit code for this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Invalid(_) => EXIT_INVALID,
            Failure::Failed(_) | Failure::Stopped(_) => EXIT_FOUND,
        }
    }

    /// The message, without the `error: ` prefix.
    pub fn message(&self) -> &str {
        match self {
            Failure::Invalid(m) | Failure::Failed(m) | Failure::Stopped(m) => m,
        }
    }
}

/// What every subcommand's `run` returns.
pub type Outcome = Result<Verdict, Failure>;

/// Prints a failure's message to `err` and returns the exit code for `outcome`: 0 clean, 1 a
/// finding or failed work, 2 invalid input.
pub fn finish(outcome: Outcome, err: &mut dyn Write) -> i32 {
    match outcome {
        Ok(Verdict::Clean) => EXIT_OK,
        Ok(Verdict::Found) => EXIT_FOUND,
        Err(f) => {
            // A closed or full stderr must not turn a failure into a panic or a success.
            let prefix = if matches!(f, Failure::Stopped(_)) {
                ""
            } else {
                "error: "
            };
            for line in f.message().lines() {
                // A line that names its own severity (a config's diagnostics) keeps it alone.
                let own = line.starts_with("error: ") || line.starts_with("warning: ");
                let _ = writeln!(err, "{}{line}", if own { "" } else { prefix });
            }
            f.exit_code()
        }
    }
}

/// Standard output as the subcommands write it: the first write error is kept, so that
/// [`OutputWatch::finish`] can report a report that did not reach its file. A closed pipe
/// (`opdump stats --all DIR | head`) is no error: the reader wanted no more.
pub struct OutputWatch<'a> {
    inner: &'a mut dyn Write,
    failed: Option<std::io::Error>,
}

impl<'a> OutputWatch<'a> {
    /// Watches `inner`.
    pub fn new(inner: &'a mut dyn Write) -> OutputWatch<'a> {
        OutputWatch {
            inner,
            failed: None,
        }
    }

    fn keep<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r
            && self.failed.is_none()
        {
            self.failed = Some(std::io::Error::new(e.kind(), e.to_string()));
        }
        r
    }

    /// Flushes the output and turns `code` into the exit code: a write error other than a
    /// closed pipe is printed on `err` and gives at least [`EXIT_INVALID`].
    pub fn finish(mut self, code: i32, err: &mut dyn Write) -> i32 {
        let flushed = self.inner.flush();
        let _ = self.keep(flushed);
        match self.failed {
            Some(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                let _ = writeln!(
                    err,
                    "error: cannot write the report to standard output: {e}"
                );
                code.max(EXIT_INVALID)
            }
            _ => code,
        }
    }
}

impl Write for OutputWatch<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.keep(r)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let r = self.inner.write_all(buf);
        self.keep(r)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.keep(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device that takes `room` bytes, then fails with `kind`.
    struct Device {
        room: usize,
        kind: std::io::ErrorKind,
    }

    impl Write for Device {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(self.kind.into());
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_output_is_an_error_and_a_closed_pipe_is_not() {
        for (kind, code, said) in [
            (std::io::ErrorKind::StorageFull, 2, true),
            (std::io::ErrorKind::BrokenPipe, 0, false),
        ] {
            let mut dev = Device { room: 10, kind };
            let mut out = OutputWatch::new(&mut dev);
            let _ = out.write_all(b"a report longer than ten bytes\n");
            let _ = out.write_all(b"more\n");
            let mut err = Vec::new();
            assert_eq!(out.finish(0, &mut err), code, "{kind:?}");
            let err = String::from_utf8(err).unwrap();
            assert_eq!(err.contains("cannot write the report"), said, "{err}");
        }
        // A finding keeps its code unless the failure is worse; nothing failed: nothing said.
        let mut dev = Device {
            room: 10,
            kind: std::io::ErrorKind::Other,
        };
        let mut out = OutputWatch::new(&mut dev);
        let _ = out.write_all(b"twelve bytes");
        assert_eq!(out.finish(1, &mut Vec::new()), 2);
        let mut sink = Vec::new();
        let mut out = OutputWatch::new(&mut sink);
        out.write_all(b"fine").unwrap();
        let mut err = Vec::new();
        assert_eq!(out.finish(1, &mut err), 1);
        assert!(err.is_empty());
    }

    #[test]
    fn exit_codes_and_the_printed_message() {
        let mut err = Vec::new();
        assert_eq!(finish(Ok(Verdict::Clean), &mut err), 0);
        assert_eq!(finish(Ok(Verdict::Found), &mut err), 1);
        assert!(err.is_empty(), "a verdict prints nothing");
        assert_eq!(finish(Err(Failure::Failed("model".into())), &mut err), 1);
        assert_eq!(
            finish(Err(Failure::Invalid("bad --input".into())), &mut err),
            2
        );
        assert_eq!(
            finish(Err(Failure::Invalid("A: gone\nB: gone".into())), &mut err),
            2
        );
        assert_eq!(
            finish(Err(Failure::Stopped("stopped at relu".into())), &mut err),
            1
        );
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "error: model\nerror: bad --input\nerror: A: gone\nerror: B: gone\nstopped at relu\n"
        );
    }

    #[test]
    fn diagnostics_keep_their_own_severity() {
        let mut err = Vec::new();
        let m =
            "c.json: invalid dump config (1 error):\nwarning: e2e: defaults\nerror: path: missing";
        assert_eq!(finish(Err(Failure::Invalid(m.into())), &mut err), 2);
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "error: c.json: invalid dump config (1 error):\nwarning: e2e: defaults\nerror: path: missing\n"
        );
    }

    #[test]
    fn a_closed_stderr_keeps_the_exit_code() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        assert_eq!(finish(Err(Failure::Invalid("x".into())), &mut Closed), 2);
    }
}
