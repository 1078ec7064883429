//! The one error type of `dump-onnx`.

use core::fmt;

/// What can be wrong with an ONNX model.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// be read, a value used before it is produced.
    Model(String),
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
        }
    }
}

impl core::error::Error for Error {}
