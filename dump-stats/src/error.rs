//! The one error type of `dump-stats`.

pub use crate::category::EchoedName;
use crate::category::{Category, UnknownCategory};

/// Everything that can go wrong in `dump-stats`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// A `statistic_category` item that MindSpore 2.10 does not accept.
    UnknownCategory(UnknownCategory),
    /// A `device_stat_precision_mode` other than `high` or `low`.
    UnknownPrecision {
        /// The offending value (truncated to 32 bytes).
        name: EchoedName,
    },
    /// A category that device statistics cannot compute (only max, min, avg and l2norm can).
    NotADeviceCategory(Category),
    /// A row asks for a hash column but the statistics carry no such digest.
    MissingHash(Category),
    /// A device row got a different number of values than it has categories.
    ValueCount {
        /// Number of categories (columns).
        expected: usize,
        /// Number of values given.
        actual: usize,
    },
    /// A statistics kernel of `dump-core` rejected the tensor (length, dtype, overflow).
    Core(dump_core::Error),
    /// An output buffer is too small for the row.
    BufferTooSmall {
        /// Bytes the row needs.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The `core::fmt::Write` sink reported an error.
    Write,
}

impl From<UnknownCategory> for Error {
    fn from(e: UnknownCategory) -> Self {
        Error::UnknownCategory(e)
    }
}

impl From<dump_core::Error> for Error {
    fn from(e: dump_core::Error) -> Self {
        Error::Core(e)
    }
}

impl From<core::fmt::Error> for Error {
    fn from(_: core::fmt::Error) -> Self {
        Error::Write
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::UnknownCategory(e) => write!(f, "{e}"),
            Error::UnknownPrecision { name } => write!(
                f,
                "'device_stat_precision_mode' only supports 'high' or 'low', but got: {name}"
            ),
            Error::NotADeviceCategory(c) => write!(
                f,
                "statistic_category '{}' is not computed by device statistics (only 'max', \
                 'min', 'avg' and 'l2norm' are)",
                c.name()
            ),
            Error::MissingHash(c) => write!(
                f,
                "statistic.csv column '{}' needs a digest that the statistics do not carry \
                 (request it from the engine)",
                c.title()
            ),
            Error::ValueCount { expected, actual } => write!(
                f,
                "device statistics row has {actual} values for {expected} categories"
            ),
            Error::Core(e) => write!(f, "statistics: {e}"),
            Error::BufferTooSmall { needed, available } => write!(
                f,
                "statistic.csv row needs {needed} bytes but the buffer holds {available}"
            ),
            Error::Write => f.write_str("the statistic.csv output sink failed"),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Core(e) => Some(e),
            Error::UnknownCategory(e) => Some(e),
            _ => None,
        }
    }
}
