//! `dump-device-cuda`: NVIDIA GPU support for opdump.
#![deny(missing_docs)]

pub mod compile;
pub mod error;
pub mod kernel_source;
pub mod probe;

pub use compile::{CompiledModule, arch_of, compile_for};
pub use dump_stats::Precision;
pub use error::Error;
pub use kernel_source::KernelId;
pub use probe::{driver_present, nvrtc_present, preload_nvrtc};
