//! `dump-device-cuda`: NVIDIA GPU support for opdump.
#![deny(missing_docs)]

pub mod arith;
pub mod combine;
pub mod compile;
pub mod error;
pub mod kernel_source;
pub mod model;
pub mod partial;
pub mod probe;

pub use combine::{DeviceSummary, combine};
pub use compile::{CompiledModule, arch_of, compile_for};
pub use dump_stats::Precision;
pub use error::Error;
pub use kernel_source::KernelId;
pub use partial::Partial;
pub use probe::{driver_present, nvrtc_present, preload_nvrtc};
