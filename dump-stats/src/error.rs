//! The one error type of `dump-stats`.

use crate::category::{Category, VALID_NAMES};

/// A config value echoed back in an error, truncated to 32 bytes (on a UTF-8 boundary) so that
/// the error never allocates.
pub type EchoedName = heapless::String<32>;

/// Everything that can go wrong in `dump-stats`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// A `statistic_category` item that MindSpore 2.10 does not accept.
    UnknownCategory {
        /// The offending item (truncated to 32 bytes).
        name: EchoedName,
        /// Its position in the configured list.
        index: usize,
        /// The valid name closest to it (edit distance, ASCII case-insensitive).
        suggestion: &'static str,
    },
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

/// Copies `s` into an [`EchoedName`], cutting at a character boundary (with a trailing `…`
/// when it did not fit).
pub(crate) fn echo(s: &str) -> EchoedName {
    let mut out = EchoedName::new();
    if out.push_str(s).is_ok() {
        return out;
    }
    for c in s.chars() {
        if out.len() + c.len_utf8() + '…'.len_utf8() > out.capacity() {
            break;
        }
        // Cannot fail: the length was checked above.
        let _ = out.push(c);
    }
    let _ = out.push('…');
    out
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::UnknownCategory {
                name,
                index,
                suggestion,
            } => {
                // MindSpore's own wording first, then what it does not say.
                write!(
                    f,
                    "The following statistic_category is invalid:{name}, the valid \
                     statistic_category are as follows:["
                )?;
                for (i, n) in VALID_NAMES.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "'{n}'")?;
                }
                write!(
                    f,
                    "] (item {index} of statistic_category; did you mean '{suggestion}'?)"
                )
            }
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
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_truncates_on_char_boundary() {
        assert_eq!(echo("max").as_str(), "max");
        let long = "é".repeat(40);
        let e = echo(&long);
        assert!(e.ends_with('…'));
        assert!(e.len() <= 32);
        assert!(e.starts_with("éé"));
    }
}
