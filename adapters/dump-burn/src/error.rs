//! The crate's error.

/// What a dumped step can fail with. A dump failure never fails the model's computation:
/// [`Tracer::step`](crate::Tracer::step) returns the first one after the step ran.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The Dumper failed (a file not written, a config rejected) or stopped the run on a
    /// non-finite tensor (`on_nonfinite` `stop`: [`dump_host::Error::NonFinite`] names it).
    Dump(dump_host::Error),
}

impl Error {
    /// Where a tensor went non-finite, when this is the `on_nonfinite` `stop` of the Dumper.
    pub fn non_finite(&self) -> Option<&dump_host::NonFiniteAt> {
        match self {
            Error::Dump(dump_host::Error::NonFinite(at)) => Some(at),
            Error::Dump(_) => None,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Dump(e) => write!(f, "dump failed: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Dump(e) => Some(e),
        }
    }
}

impl From<dump_host::Error> for Error {
    fn from(e: dump_host::Error) -> Self {
        Error::Dump(e)
    }
}
