//! The one error type of `dump-device-ascend`.

use crate::Format;
use dump_core::DType;

/// Everything that can go wrong in `dump-device-ascend`.
///
/// Without the `acl` feature it never allocates; the `acl` variants carry the paths that were
/// tried when a library could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(all(feature = "defmt", not(feature = "acl")), derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// A format name that is not one of [`Format::ALL`]'s names.
    UnknownFormat,
    /// Packed dtypes (`int4`, `uint1`) have no whole-byte element, so they cannot be
    /// re-laid-out element by element.
    PackedDType(DType),
    /// An element size other than 1, 2, 4, 8 or 16 bytes.
    ElementSize(usize),
    /// A shape has a rank its format does not allow.
    Rank {
        /// The format whose shape is wrong.
        format: Format,
        /// Which shape: `"host"` or `"device"`.
        shape: &'static str,
        /// The rank required (the minimum when `at_least`).
        expected: usize,
        /// `true` when `expected` is a minimum.
        at_least: bool,
        /// The rank given.
        actual: usize,
    },
    /// A device-shape dimension differs from what the host shape and block sizes imply.
    Dim {
        /// The device format.
        format: Format,
        /// Axis of the device shape.
        axis: usize,
        /// The size the host shape implies.
        expected: usize,
        /// The size given.
        actual: usize,
    },
    /// A `C1HWNCoC0` device shape whose Co axis (4) differs from its C0 axis (5): the layout
    /// puts each channel on the diagonal of a square `C0 × C0` block.
    DiagonalBlock {
        /// The device format (`C1HWNCoC0`).
        format: Format,
        /// Co, device shape axis 4.
        co: usize,
        /// C0, device shape axis 5.
        c0: usize,
    },
    /// A block size (C0, N0 or M0) of zero.
    ZeroBlock {
        /// `"C0"`, `"N0"` or `"M0"`.
        block: &'static str,
    },
    /// A source buffer is not the storage of its shape.
    LengthMismatch {
        /// Bytes the shape and dtype need.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
    /// The destination buffer is too small.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// A size computation overflowed `usize`.
    Overflow,
    /// A conversion from this device format to the host layout is not implemented (every
    /// [`Format`] has one today; the variant stays for formats added later).
    UnsupportedFormat(Format),
    /// The statistics layer (`dump-stats`) rejected the tensor.
    Stats(dump_stats::Error),
    /// A conversion that needs the whole tensor (FRACTAL_Z_3D, C1HWNCoC0 with N > 1) was
    /// asked for a tensor larger than the caller's block limit
    /// ([`crate::blocked::HostBlocks::new`]).
    BlockTooLarge {
        /// The device format.
        format: Format,
        /// Bytes the one block needs.
        bytes: usize,
        /// The caller's limit.
        limit: usize,
    },
    /// A CANN library could not be loaded from any candidate path.
    #[cfg(feature = "acl")]
    LibraryNotFound {
        /// The library file name (`libascendcl.so`, ...).
        library: &'static str,
        /// Every path tried and the loader's message for it, `; `-separated.
        tried: String,
    },
    /// A loaded library lacks a symbol the backend needs.
    #[cfg(feature = "acl")]
    SymbolMissing {
        /// The library file name.
        library: &'static str,
        /// The C symbol.
        symbol: &'static str,
    },
    /// An ACL / aclnn call returned a non-zero status.
    #[cfg(feature = "acl")]
    AclStatus {
        /// The C function that failed.
        call: &'static str,
        /// Its status code (see [`AclStatusKind`](crate::acl::AclStatusKind)).
        status: i32,
    },
    /// An ACL constructor (`aclCreateTensor`, ...) returned a null handle.
    #[cfg(feature = "acl")]
    AclNull {
        /// The C function that returned null.
        call: &'static str,
    },
}

impl From<dump_stats::Error> for Error {
    fn from(e: dump_stats::Error) -> Self {
        Error::Stats(e)
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::UnknownFormat => {
                f.write_str("unknown device format (expected one of")?;
                for (i, format) in Format::ALL.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ", " };
                    write!(f, "{sep}{format}")?;
                }
                f.write_str(", or FracZ)")
            }
            Error::PackedDType(d) => write!(
                f,
                "dtype {d} is packed (sub-byte); device-format conversion needs whole-byte elements"
            ),
            Error::ElementSize(n) => {
                write!(
                    f,
                    "element size {n} bytes is not supported (1, 2, 4, 8 or 16 bytes)"
                )
            }
            Error::Rank {
                format,
                shape,
                expected,
                at_least,
                actual,
            } => write!(
                f,
                "{format}: {shape} shape has rank {actual}, expected {}{expected}",
                if *at_least { "at least " } else { "" }
            ),
            Error::Dim {
                format,
                axis,
                expected,
                actual,
            } => write!(
                f,
                "{format}: device shape axis {axis} is {actual}, but the host shape implies {expected}"
            ),
            Error::DiagonalBlock { format, co, c0 } => write!(
                f,
                "{format}: device shape axis 4 (Co) is {co} but axis 5 (C0) is {c0}; Co must \
                 equal C0 (each channel sits on the diagonal of a C0 x C0 block)"
            ),
            Error::ZeroBlock { block } => write!(f, "block size {block} must be at least 1"),
            Error::LengthMismatch { expected, actual } => write!(
                f,
                "device data is {actual} bytes but its shape and dtype need {expected}"
            ),
            Error::BufferTooSmall { needed, available } => write!(
                f,
                "destination buffer too small: need {needed} bytes, have {available}"
            ),
            Error::Overflow => f.write_str("tensor size overflows usize"),
            Error::UnsupportedFormat(x) => {
                write!(f, "no conversion from device format {x} to the host layout")
            }
            Error::Stats(e) => write!(f, "statistics: {e}"),
            Error::BlockTooLarge {
                format,
                bytes,
                limit,
            } => write!(
                f,
                "{format}: converting this tensor needs all of its {bytes} bytes in memory at \
                 once, over the limit of {limit} bytes"
            ),
            #[cfg(feature = "acl")]
            Error::LibraryNotFound { library, tried } => write!(
                f,
                "could not load {library} (set ASCEND_TOOLKIT_HOME or ASCEND_HOME_PATH to the \
                 CANN install, or add its lib64 to the loader path); tried: {tried}"
            ),
            #[cfg(feature = "acl")]
            Error::SymbolMissing { library, symbol } => {
                write!(f, "{library} does not export the symbol `{symbol}`")
            }
            #[cfg(feature = "acl")]
            Error::AclStatus { call, status } => write!(
                f,
                "{call} failed with status {status} ({})",
                crate::acl::AclStatusKind::of(*status)
            ),
            #[cfg(feature = "acl")]
            Error::AclNull { call } => write!(f, "{call} returned a null handle"),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Stats(e) => Some(e),
            _ => None,
        }
    }
}
