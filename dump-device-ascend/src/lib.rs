//! `dump-device-ascend`: Ascend NPU support for opdump.
//!
//! - [`convert`] and [`to_host`](mod@to_host): device-format conversion for `trans_flag` (spec §4.2):
//!   `NC1HWC0` (and `_C04`), `NDC1HWC0`, `FRACTAL_Z`, `FRACTAL_Z_3D`, `C1HWNCoC0`, `NHWC` and
//!   `FRACTAL_NZ` to the host layout, allocation-free into caller buffers, `no_std`.
//!   [`dump_view`] is what the Dumper calls per tensor; [`blocked`] does the same block by
//!   block for readers that stream a tensor.
//! - [`device_stats`]: MindSpore's device-statistic semantics (spec §7) on the host (the
//!   "simulated backend"), built on `dump-stats`' precision model, so users without an NPU can
//!   predict what `stat_calc_mode: "device"` will write.
//! - [`tensor`](mod@tensor) (feature `std`): an Ascend [`DeviceTensor`] is a
//!   `dump_stats::DeviceTensor`, the one device-tensor contract the Dumper takes: layout (device
//!   format and host shape), conversion for `trans_flag`, statistics under the requested
//!   precision.
//! - [`dumpfile`] (feature `std`): CANN's operator dump files (the `u64` length, the
//!   `DumpData` protobuf message, the appended tensor bytes; the old inline variant; overflow
//!   blocks), decoded from bytes or streamed from any `Read` in bounded memory.
//! - `acl` (feature `acl`, on by default): the same statistics computed on an Ascend device
//!   through aclnn, with `libascendcl.so`, `libnnopbase.so` and `libopapi.so` loaded at run
//!   time (no toolkit needed to build).
//!
//! ```
//! use dump_core::DType;
//! use dump_device_ascend::{Blocks, convert::nc1hwc0};
//!
//! // An int8 NCHW (1, 3, 2, 1) tensor, to NC1HWC0 (C0 = 32 for 1-byte types) and back.
//! let host = [1u8, 2, 3, 4, 5, 6];
//! let c0 = Blocks::default_for(DType::Int8)?.c0;
//! let shape = nc1hwc0::nc1hwc0_shape([1, 3, 2, 1], c0)?;
//! assert_eq!(shape, [1, 1, 2, 1, 32]);
//! let mut device = [0u8; 64];
//! nc1hwc0::nchw_to_nc1hwc0(&host, 1, [1, 3, 2, 1], c0, &mut device)?;
//! assert_eq!(&device[..4], &[1, 3, 5, 0]); // (h=0, w=0): channels 0, 1, 2, then padding
//! let mut back = [0u8; 6];
//! nc1hwc0::nc1hwc0_to_nchw(&device, 1, [1, 3, 2, 1], c0, &mut back)?;
//! assert_eq!(back, host);
//! # Ok::<(), dump_device_ascend::Error>(())
//! ```
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(missing_docs)]

#[cfg(feature = "acl")]
pub mod acl;
pub mod blocked;
pub mod blocks;
pub mod convert;
pub mod device_stats;
#[cfg(feature = "std")]
pub mod dumpfile;
pub mod error;
pub mod format;
#[cfg(feature = "std")]
pub mod tensor;
pub mod to_host;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use blocks::Blocks;
pub use error::Error;
pub use format::Format;
pub use to_host::{DeviceTensor, DumpView, dump_view, keep_device, to_host};
