//! The one error type of `dump-candle`.

use core::fmt;

/// What can go wrong while dumping a candle model.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The Dumper failed (a bad tensor, write failures, an unusable config).
    Dump(dump_host::Error),
    /// candle failed while running the model (the ONNX evaluator).
    Candle(candle_core::Error),
    /// A tensor cannot be handed to the Dumper: its dtype or device has no dump mapping.
    Unsupported {
        /// The kernel (full scope name) the tensor belongs to.
        kernel: String,
        /// What is not supported and what is.
        message: String,
    },
    /// The model cannot be dumped as given (the ONNX evaluator: no graph, a node without
    /// outputs, a missing input).
    Model(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Dump(e) => write!(f, "dump: {e}"),
            Error::Candle(e) => write!(f, "candle: {e}"),
            Error::Unsupported { kernel, message } => write!(f, "{kernel}: {message}"),
            Error::Model(m) => write!(f, "model: {m}"),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Dump(e) => Some(e),
            Error::Candle(e) => Some(e),
            _ => None,
        }
    }
}

impl From<dump_host::Error> for Error {
    fn from(e: dump_host::Error) -> Self {
        Error::Dump(e)
    }
}

impl From<candle_core::Error> for Error {
    fn from(e: candle_core::Error) -> Self {
        Error::Candle(e)
    }
}
