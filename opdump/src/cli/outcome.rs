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
/// Exit code for invalid input: a rejected config, an unreadable file, bad arguments.
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

#[cfg(test)]
mod tests {
    use super::*;

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
