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
    /// A file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What happened (includes MindSpore's wording where it has one).
        message: String,
    },
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
            Error::Io { path, message } => write!(f, "{}: {message}", path.display()),
            Error::Env {
                var,
                value,
                message,
            } => write!(f, "environment variable {var}={value:?}: {message}"),
        }
    }
}

impl core::error::Error for Error {}
