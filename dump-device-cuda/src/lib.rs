//! `dump-device-cuda`: NVIDIA GPU support for opdump.
#![deny(missing_docs)]

pub mod arith;
pub mod combine;
pub mod compile;
pub mod cuda_stats;
pub mod error;
pub mod kernel_source;
pub mod model;
pub mod partial;
pub mod pipeline;
pub mod probe;
pub mod tensor;

pub use combine::{DeviceSummary, combine};
pub use compile::{CompiledModule, arch_of, compile_for};
pub use cuda_stats::CudaStats;
pub use dump_stats::Precision;
pub use error::Error;
pub use kernel_source::KernelId;
pub use partial::Partial;
pub use pipeline::{HostPipeline, PipelineError};
pub use probe::{driver_present, nvrtc_present, preload_nvrtc};
pub use tensor::DeviceTensor;
