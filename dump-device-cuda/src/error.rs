//! The one error type of `dump-device-cuda`.

use dump_core::DType;

/// Everything that can go wrong on the device path. A missing driver, library or GPU is an
/// error value (never a panic), so callers fall back to host statistics.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// `libcuda.so` (the NVIDIA driver) could not be loaded.
    NoDriver,
    /// `libnvrtc.so` could not be loaded (needed to compile the kernels).
    NoNvrtc {
        /// Where it was looked for.
        searched: String,
    },
    /// A driver API call failed (including "no CUDA-capable device").
    Driver {
        /// What was being done.
        during: &'static str,
        /// The driver's error.
        message: String,
    },
    /// NVRTC rejected the kernel source.
    Compile {
        /// The virtual architecture (`compute_80`).
        arch: String,
        /// NVRTC's log.
        log: String,
    },
    /// The device path has no kernel for this dtype (use host statistics).
    Unsupported(DType),
    /// A device pointer not aligned to its element size.
    Misaligned {
        /// The address.
        ptr: u64,
        /// The required alignment in bytes.
        align: usize,
    },
    /// A buffer length or element count that does not fit the tensor.
    Length {
        /// What was checked.
        what: &'static str,
        /// Bytes or elements needed.
        expected: usize,
        /// Bytes or elements given.
        actual: usize,
    },
    /// A size computation overflowed.
    Overflow,
    /// An error from `dump-core` (dtype sizes).
    Core(dump_core::Error),
    /// Statistics with an MD5 or SHA-1 column were asked of the GPU, which computes no digests
    /// (the Dumper computes them on the host).
    Digests,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::NoDriver => f.write_str(
                "the CUDA driver library (libcuda.so) is not loadable: no NVIDIA driver on this \
                 machine; use host statistics",
            ),
            Error::NoNvrtc { searched } => write!(
                f,
                "NVRTC (libnvrtc.so.12) is not loadable (searched {searched}); install the \
                 CUDA toolkit or the PyPI wheel nvidia-cuda-nvrtc-cu12 (dump-device-cuda/ci/\
                 fetch-nvrtc.sh) and pass its lib directory to preload_nvrtc"
            ),
            Error::Driver { during, message } => {
                write!(f, "CUDA driver error while {during}: {message}")
            }
            Error::Compile { arch, log } => {
                write!(
                    f,
                    "NVRTC failed to compile the statistics kernels for {arch}:\n{log}"
                )
            }
            Error::Unsupported(d) => write!(
                f,
                "device statistics do not support dtype {d} (supported: float16, bfloat16, \
                 float32, float64, int8, int16, int32, int64, uint8, bool)"
            ),
            Error::Misaligned { ptr, align } => write!(
                f,
                "device pointer {ptr:#x} is not aligned to its {align}-byte elements"
            ),
            Error::Length {
                what,
                expected,
                actual,
            } => write!(f, "{what}: expected {expected}, got {actual}"),
            Error::Overflow => f.write_str("tensor size overflows usize"),
            Error::Core(e) => write!(f, "{e}"),
            Error::Digests => f.write_str(
                "the GPU computes no md5 or hash:sha1 digests; they are computed on the host",
            ),
        }
    }
}

impl core::error::Error for Error {}

impl From<dump_core::Error> for Error {
    fn from(e: dump_core::Error) -> Self {
        Error::Core(e)
    }
}

impl Error {
    /// Wraps a cudarc driver error with what was being done.
    pub(crate) fn driver(during: &'static str, e: cudarc::driver::DriverError) -> Error {
        Error::Driver {
            during,
            message: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_value_and_what_is_allowed() {
        let e = Error::Unsupported(DType::UInt32);
        assert!(e.to_string().contains("uint32") && e.to_string().contains("bfloat16"));
        let e = Error::Misaligned {
            ptr: 0x1001,
            align: 4,
        };
        assert_eq!(
            e.to_string(),
            "device pointer 0x1001 is not aligned to its 4-byte elements"
        );
        let e = Error::Length {
            what: "host buffer bytes",
            expected: 8,
            actual: 3,
        };
        assert_eq!(e.to_string(), "host buffer bytes: expected 8, got 3");
        assert!(Error::NoDriver.to_string().contains("libcuda.so"));
    }
}
