//! The one error type of `dump-read`.

use std::{fmt, io, path::PathBuf};

/// Everything that can stop reading a dump. Problems with single files of a dump that can
/// be read otherwise are not errors: they are collected in [`Dump::problems`](crate::Dump).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A file or directory could not be read (the operating system's error is kept).
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },
    /// An `.npy` file could not be opened or read.
    Npy(dump_npy::FileError),
    /// A zip archive (`.pt`, `.npz`) could not be read (the zip reader's error is kept).
    Zip {
        /// The archive.
        path: PathBuf,
        /// What was being read, and what it should be.
        what: String,
        /// What the zip reader said.
        source: zip::result::ZipError,
    },
    /// A file, row or directory is not what its dialect allows.
    Format {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong, and what was expected.
        message: String,
    },
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub(crate) fn io(path: &std::path::Path, source: io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The process (or the system) is out of file descriptors (`EMFILE`, `ENFILE`): the file
    /// may open once others are closed.
    pub(crate) fn out_of_descriptors(&self) -> bool {
        let source = match self {
            Error::Io { source, .. } => source,
            Error::Npy(dump_npy::FileError {
                kind: dump_npy::FileErrorKind::Io(source),
                ..
            }) => source,
            _ => return false,
        };
        matches!(source.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
    }

    /// An [`Error::Format`] for `path`.
    pub(crate) fn format(path: &std::path::Path, message: impl fmt::Display) -> Error {
        Error::Format {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }

    /// What went wrong, without the path (for a problem list that names the file already).
    pub fn reason(&self) -> String {
        match self {
            Error::Io { source, .. } => source.to_string(),
            Error::Npy(e) => {
                let full = e.to_string();
                let prefix = format!("{}: ", e.path.display());
                full.strip_prefix(&prefix)
                    .map(str::to_owned)
                    .unwrap_or(full)
            }
            Error::Zip { what, source, .. } => format!("{what}: {source}"),
            Error::Format { message, .. } => message.clone(),
        }
    }
}

impl From<dump_npy::FileError> for Error {
    fn from(e: dump_npy::FileError) -> Error {
        Error::Npy(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Npy(e) => write!(f, "{e}"),
            Error::Zip { path, what, source } => {
                write!(f, "{}: {what}: {source}", path.display())
            }
            Error::Format { path, message } => write!(f, "{}: {message}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Npy(e) => Some(e),
            Error::Zip { source, .. } => Some(source),
            Error::Format { .. } => None,
        }
    }
}
