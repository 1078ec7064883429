//! The one error type of `dump-onnx`: a model that cannot be read, and what a runtime
//! behind [`OnnxRuntime`](crate::OnnxRuntime) reports (whose fault it is, its own error kept
//! as the cause).

use core::fmt;

/// A runtime adapter's own error, kept as the cause of an [`Error`].
pub type Cause = Box<dyn core::error::Error + Send + Sync + 'static>;

/// What can be wrong with an ONNX model, or with running it.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The bytes are not a valid protobuf message of the expected kind.
    Malformed {
        /// The message or field being read (`ModelProto`, `TensorProto.dims`).
        what: &'static str,
        /// Byte offset inside that message.
        offset: usize,
        /// What is wrong.
        message: String,
    },
    /// The model is valid protobuf but unusable: no graph, an initializer whose data cannot
    /// be read, a value used before it is produced, a graph input not given.
    Model(String),
    /// An input value cannot be given to the runtime (a type it has no tensors of, a byte
    /// count that does not fit the shape).
    Input {
        /// The graph input.
        name: String,
        /// The runtime adapter's error.
        cause: Cause,
    },
    /// The runtime refused the model as given (it cannot read it): the caller's to fix.
    Refused(Cause),
    /// The runtime itself could not start (ONNX Runtime's library not found or not loadable).
    Setup(Cause),
    /// The runtime could not load, plan or evaluate a model it read (an operator it lacks, a
    /// type it has no tensors of, a panic it caught).
    Failed(Cause),
    /// The Dumper failed; `dump_host::Error::NonFinite` when `on_nonfinite` `stop` ended the
    /// step at a non-finite output.
    Dump(dump_host::Error),
}

impl Error {
    /// Whether the fault lies with what the caller gave (the model file, an input, the
    /// environment) rather than with the runtime or the dump: `opdump run` exits 2 for these,
    /// 1 for the others.
    pub fn blames_caller(&self) -> bool {
        matches!(
            self,
            Error::Malformed { .. }
                | Error::Model(_)
                | Error::Input { .. }
                | Error::Refused(_)
                | Error::Setup(_)
        )
    }

    /// Where `on_nonfinite` `stop` ended the step, when that is what this error is.
    pub fn non_finite(&self) -> Option<&dump_host::NonFiniteAt> {
        match self {
            Error::Dump(dump_host::Error::NonFinite(at)) => Some(at),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Malformed {
                what,
                offset,
                message,
            } => write!(
                f,
                "not a valid ONNX model: {what} at byte {offset}: {message}"
            ),
            Error::Model(m) => write!(f, "{m}"),
            Error::Input { name, cause } => write!(f, "input {name:?}: {cause}"),
            Error::Refused(e) | Error::Setup(e) | Error::Failed(e) => write!(f, "{e}"),
            Error::Dump(e) => write!(f, "dump: {e}"),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Input { cause, .. } => Some(cause.as_ref()),
            Error::Refused(e) | Error::Setup(e) | Error::Failed(e) => Some(e.as_ref()),
            Error::Dump(e) => Some(e),
            _ => None,
        }
    }
}

impl From<dump_host::Error> for Error {
    fn from(e: dump_host::Error) -> Self {
        Error::Dump(e)
    }
}
