//! `dump-host`: opdump on a host with `std`: the MindSpore `data_dump.json` config
//! ([`config`]), and the `opdump` command-line tool's logic ([`cli`]).
#![deny(missing_docs)]

pub mod config;
pub mod diag;
mod dumper;
pub mod error;
pub mod layout;
pub mod writer;

pub use dumper::{
    DeviceTensor, DumpOptions, DumpPlan, DumpReport, Dumper, DumperBuilder, Element, Kernel,
    MS_VERSION, Step, TensorRef,
};
pub use error::Error;

/// Ascend tensors and device formats (feature `ascend`): `ascend::DeviceTensor` is a
/// [`DeviceTensor`]; [`TensorRef::device_format`] wraps host bytes in a device format.
#[cfg(feature = "ascend")]
pub use dump_device_ascend as ascend;
/// NVIDIA GPU tensors (feature `cuda`): `cuda::CudaTensor` is a [`DeviceTensor`].
#[cfg(feature = "cuda")]
pub use dump_device_cuda as cuda;
/// The device-tensor contract (from `dump-stats`): implement [`DeviceTensor`] on a runtime's
/// device tensor type to dump it; its statistics requests and layouts.
pub use dump_stats::device;
