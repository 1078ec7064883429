//! The one error type of `dump-host`.

use core::fmt;
use std::path::PathBuf;

use crate::config::Diagnostics;

/// Everything that can go wrong in `dump-host`.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The config was rejected; holds every error (and warning) found.
    Config(Diagnostics),
    /// A file could not be read or written (the operating system's error is kept; where
    /// MindSpore has a wording for the failure, the error displays it).
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A file or directory is unusable for a reason of its own: not a regular file, too
    /// large, not UTF-8, owned by another user.
    Path {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong, and what is allowed.
        message: String,
    },
    /// A tensor handed to the Dumper is inconsistent (byte length vs dtype and shape, bad
    /// strides, a failed device copy).
    Tensor {
        /// The kernel (full scope name) or file it belongs to.
        kernel: String,
        /// `input`, `output` or what was being done.
        io: &'static str,
        /// The input/output slot.
        slot: u32,
        /// What is wrong.
        message: String,
    },
    /// Background writes failed (disk full, permissions, ...); nothing was left half-written.
    Write(crate::writer::WriteErrors),
    /// The resolved dump settings are unusable.
    Plan(String),
    /// A watched output holds NaN or ±Inf and the policy is `stop`
    /// ([`NonFinitePolicy::Stop`](crate::config::NonFinitePolicy::Stop)): the runtime should
    /// stop here. The tensor was dumped (or recorded) before this error was returned.
    NonFinite(crate::NonFiniteAt),
    /// Watcher mode with `on_corruption` `stop`: a watched output changed while a kernel that
    /// is not its writer ran ([`Step::kernel_ran`](crate::Step::kernel_ran)). It was reported
    /// (`watcher.csv`, an event) before this error was returned.
    MemoryCorruption(Box<crate::watcher::Corruption>),
    /// An environment variable has a value that cannot be used.
    Env {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
        /// What is wrong and what is allowed.
        message: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(d) => {
                let n = d.errors().count();
                write!(
                    f,
                    "invalid dump config ({n} error{}):\n{d}",
                    if n == 1 { "" } else { "s" }
                )
            }
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Path { path, message } => write!(f, "{}: {message}", path.display()),
            Error::Tensor {
                kernel,
                io,
                slot,
                message,
            } => write!(f, "{kernel} {io} {slot}: {message}"),
            Error::Write(e) => write!(f, "dump writes failed: {e}"),
            Error::Plan(m) => write!(f, "dump settings: {m}"),
            Error::NonFinite(at) => write!(f, "stopped at the first non-finite output: {at}"),
            Error::MemoryCorruption(c) => write!(f, "stopped: {c}"),
            Error::Env {
                var,
                value,
                message,
            } => write!(f, "environment variable {var}={value:?}: {message}"),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Write(e) => Some(e),
            _ => None,
        }
    }
}
