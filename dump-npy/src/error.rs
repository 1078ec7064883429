//! The one error type of `dump-npy`.

use dump_core::DType;

/// Everything that can go wrong while encoding, writing or reading a `.npy` file.
///
/// Small and `Copy`: no allocation, no strings. Errors of the caller's sink (for example
/// `std::io::Error`) are the sink's own type; see [`crate::NpySink`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// A `dump-core` error (length mismatch, buffer too small, overflow, ...).
    Core(dump_core::Error),
    /// The dtype cannot be written with the chosen options (no `.npy` descr).
    NoDescr(DType),
    /// An `.npy` descr with characters that cannot stand inside the header's quoted string.
    InvalidDescr,
    /// The file does not start with the magic `\x93NUMPY`.
    BadMagic,
    /// A format version other than 1.0, 2.0 or 3.0.
    UnsupportedVersion {
        /// Major version byte.
        major: u8,
        /// Minor version byte.
        minor: u8,
    },
    /// The input ends before the part named by `what` is complete.
    Truncated {
        /// What was being read (`"magic"`, `"header"`, ...).
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The header length field is larger than [`crate::MAX_HEADER_LEN`].
    HeaderTooLong {
        /// The header length the file claims.
        len: usize,
        /// The largest accepted.
        max: usize,
    },
    /// The header dict text is not a valid npy header dict.
    Syntax {
        /// Byte offset inside the dict text (after the length field) of the problem.
        at: usize,
        /// What was expected there.
        expected: &'static str,
    },
    /// A key other than `descr`, `fortran_order` and `shape`, or one of them twice.
    BadKey {
        /// Byte offset of the key inside the dict text.
        at: usize,
    },
    /// One of `descr`, `fortran_order`, `shape` is missing.
    MissingKey(&'static str),
    /// A descr that names no dtype opdump handles (big-endian, strings, records, ...).
    UnsupportedDescr,
    /// A shape dimension does not fit in `usize`.
    DimTooLarge {
        /// Index of the dimension.
        index: usize,
    },
    /// The element count or byte size of the shape overflows `usize`.
    ShapeOverflow,
    /// More dimensions than [`crate::MAX_RANK`].
    RankTooHigh {
        /// The largest accepted rank.
        max: usize,
    },
    /// The data after the header is not the size the dtype and shape need.
    DataLength {
        /// Bytes the header's dtype and shape need.
        expected: usize,
        /// Bytes present after the header.
        actual: usize,
    },
}

impl From<dump_core::Error> for Error {
    fn from(e: dump_core::Error) -> Self {
        Error::Core(e)
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Core(e) => write!(f, "{e}"),
            Error::NoDescr(d) => write!(
                f,
                "dtype {d} has no .npy descr with these write options"
            ),
            Error::InvalidDescr => f.write_str(
                "npy descr must be 1..=16 printable ASCII characters without quotes or backslashes",
            ),
            Error::BadMagic => f.write_str("not an .npy file: missing magic \\x93NUMPY"),
            Error::UnsupportedVersion { major, minor } => write!(
                f,
                "unsupported .npy format version {major}.{minor} (supported: 1.0, 2.0, 3.0)"
            ),
            Error::Truncated {
                what,
                needed,
                available,
            } => write!(
                f,
                ".npy input truncated in {what}: need {needed} bytes, have {available}"
            ),
            Error::HeaderTooLong { len, max } => write!(
                f,
                ".npy header length {len} exceeds the accepted maximum {max}"
            ),
            Error::Syntax { at, expected } => write!(
                f,
                "invalid .npy header dict at byte {at}: expected {expected}"
            ),
            Error::BadKey { at } => write!(
                f,
                "invalid .npy header key at byte {at}: allowed keys are 'descr', 'fortran_order', 'shape', each once"
            ),
            Error::MissingKey(k) => write!(f, ".npy header has no '{k}' key"),
            Error::UnsupportedDescr => f.write_str(
                "unsupported .npy descr (supported: little-endian or native b1 i1 u1 i2 u2 i4 u4 i8 u8 f2 E2 f4 f8 c8 c16)",
            ),
            Error::DimTooLarge { index } => {
                write!(f, ".npy shape dimension {index} does not fit in usize")
            }
            Error::ShapeOverflow => {
                f.write_str("the shape's element count or byte size overflows usize")
            }
            Error::RankTooHigh { max } => {
                write!(f, ".npy shape has more than {max} dimensions")
            }
            Error::DataLength { expected, actual } => write!(
                f,
                ".npy data is {actual} bytes but the header's dtype and shape need {expected}"
            ),
        }
    }
}

impl core::error::Error for Error {}

#[cfg(feature = "std")]
impl From<Error> for std::io::Error {
    /// Reader errors become [`std::io::ErrorKind::InvalidData`], write-side validation errors
    /// [`std::io::ErrorKind::InvalidInput`]; the [`Error`] stays reachable via `get_ref`.
    fn from(e: Error) -> Self {
        let kind = match e {
            Error::Core(_) | Error::NoDescr(_) | Error::InvalidDescr => {
                std::io::ErrorKind::InvalidInput
            }
            _ => std::io::ErrorKind::InvalidData,
        };
        std::io::Error::new(kind, e)
    }
}
