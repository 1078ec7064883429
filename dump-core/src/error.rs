//! The one error type of `dump-core`.

use crate::DType;

/// Everything that can go wrong in `dump-core`. Small and `Copy`: no allocation, no strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// A dtype name that is neither MindSpore spelling (`float32` / `Float32`).
    UnknownDType,
    /// A byte buffer is not the storage of the stated element count.
    LengthMismatch {
        /// Bytes the element count needs.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
    /// An output buffer is too small.
    BufferTooSmall {
        /// Bytes (or elements, as documented by the call) needed.
        needed: usize,
        /// Bytes (or elements) available.
        available: usize,
    },
    /// A byte buffer whose length is not a whole number of elements (for example an odd
    /// number of bytes of 16-bit data).
    Misaligned {
        /// Bytes given.
        len: usize,
        /// Bytes per element: the length must be a multiple of this.
        multiple: usize,
    },
    /// A postcard wire record (feature `serde`) could not be built, encoded or decoded.
    Wire {
        /// What was wrong, in words (for example "record is truncated").
        reason: &'static str,
    },
    /// The operation is not defined for this dtype (for example statistics of complex data).
    Unsupported(DType),
    /// A size computation overflowed `usize`.
    Overflow,
    /// An `iteration` string with a character other than digits, `-` and `|` (and not `all`).
    InvalidIteration {
        /// Byte offset of the first offending character.
        at: usize,
    },
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::UnknownDType => f.write_str(
                "unknown dtype name (expected a MindSpore spelling such as `float32` or `Float32`)",
            ),
            Error::LengthMismatch { expected, actual } => write!(
                f,
                "tensor data is {actual} bytes but its dtype and shape need {expected}"
            ),
            Error::BufferTooSmall { needed, available } => {
                write!(
                    f,
                    "output buffer too small: need {needed}, have {available}"
                )
            }
            Error::Misaligned { len, multiple } => write!(
                f,
                "buffer of {len} bytes is not a whole number of {multiple}-byte elements"
            ),
            Error::Wire { reason } => write!(f, "wire record: {reason}"),
            Error::Unsupported(d) => write!(f, "operation not supported for dtype {d}"),
            Error::Overflow => f.write_str("tensor size overflows usize"),
            Error::InvalidIteration { at } => write!(
                f,
                "iteration only supports digits, {{'-', '|'}}, or just \"all\" (bad character at byte {at})"
            ),
        }
    }
}

impl core::error::Error for Error {}
