//! The one error type of `dump-ort`.

use core::fmt;

/// What can go wrong running a dumped ONNX Runtime model.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// `libonnxruntime` could not be found or loaded.
    Library(String),
    /// ONNX Runtime failed (a run, a value it could not make).
    Ort(ort::Error),
    /// ONNX Runtime cannot load the model (session creation failed: an operator it lacks,
    /// an IR version it does not read).
    Load(ort::Error),
    /// The Dumper failed (a write error, a config problem).
    Dump(dump_host::Error),
    /// The model or its inputs cannot be used: a missing input, a value ONNX Runtime does
    /// not return as a CPU tensor, an input of a type it has no tensors of.
    Model(String),
    /// The model cannot be read (not ONNX, external data that cannot be read).
    Onnx(dump_onnx::Error),
    /// A [`SessionOptions`](crate::SessionOptions) value ONNX Runtime cannot take.
    Options(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Library(m) => write!(f, "ONNX Runtime library: {m}"),
            Error::Ort(e) => write!(f, "ONNX Runtime: {e}"),
            Error::Load(e) => write!(f, "ONNX Runtime cannot load this model: {e}"),
            Error::Dump(e) => write!(f, "dump: {e}"),
            Error::Model(m) => write!(f, "model: {m}"),
            Error::Onnx(e) => write!(f, "model: {e}"),
            Error::Options(m) => write!(f, "session options: {m}"),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Ort(e) | Error::Load(e) => Some(e),
            Error::Dump(e) => Some(e),
            Error::Onnx(e) => Some(e),
            _ => None,
        }
    }
}

impl From<dump_host::Error> for Error {
    fn from(e: dump_host::Error) -> Self {
        Error::Dump(e)
    }
}

impl From<ort::Error> for Error {
    fn from(e: ort::Error) -> Self {
        Error::Ort(e)
    }
}

impl From<ort::Error<ort::session::builder::SessionBuilder>> for Error {
    fn from(e: ort::Error<ort::session::builder::SessionBuilder>) -> Self {
        Error::Ort(e.into())
    }
}

impl From<dump_onnx::Error> for Error {
    fn from(e: dump_onnx::Error) -> Self {
        Error::Onnx(e)
    }
}
