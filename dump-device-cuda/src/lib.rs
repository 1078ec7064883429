//! `dump-device-cuda`: opdump's statistics on NVIDIA GPUs, through cudarc and NVRTC.
//!
//! One fused kernel launch per tensor reads it once and produces everything a
//! `statistic.csv` row needs: max, min, sum, sum of squares and the NaN / ±inf / zero /
//! positive / negative counts, plus the first and last NaN (they decide `nan` vs `-nan`).
//! Only 144 bytes per thread block cross the bus; the host adds the block partials in block
//! order. Results are bitwise reproducible (no atomics, a grid that depends only on the
//! tensor size), and [`model`] replays the kernels on the CPU bit for bit.
//!
//! - [`CudaStats`]: one GPU: [`summarize`](CudaStats::summarize),
//!   [`copy_to_host`](CudaStats::copy_to_host), [`pipeline`](CudaStats::pipeline)
//!   (double-buffered pinned D2H copies overlapped with file writing),
//!   [`copy_to_host_deferred`](CudaStats::copy_to_host_deferred) (a copy queued into pinned
//!   memory and waited for later, for the flight recorder's ring).
//! - [`DeviceTensor`]: borrowed device memory (a runtime's buffer, e.g. a candle
//!   `CudaStorage` slice), never freed by opdump; [`CudaTensor`] binds it to a backend,
//!   stream, shape and precision for the Dumper.
//! - [`DeviceSummary`]: host-semantics [`dump_core::Summary`] plus MindSpore's device row
//!   values under the `high`/`low` [`Precision`] policy of `dump-stats`.
//! - [`compile_for`]: the kernels (header-free CUDA C++, [`kernel_source`]) compiled by NVRTC
//!   to a CUBIN for the GPU's `sm_XY` (no driver JIT, so older drivers of the same CUDA major
//!   version load it) or to PTX for `compute_XY` (the fallback), cached per process
//!   ([`cache_key`] and [`seed_cache`] let a caller keep the images on disk). Needs no GPU: CI
//!   compiles every kernel for compute_80/compute_90 (PTX) and sm_80/sm_90 (CUBIN) with the
//!   PyPI NVRTC wheel (`ci/fetch-nvrtc.sh`).
//! - [`probe`]: cudarc panics when `libcuda`/`libnvrtc` are missing; every entry point here
//!   checks first and returns [`Error::NoDriver`] / [`Error::NoNvrtc`] instead.
//!
//! Statistics kernels: float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8,
//! bool. Others give [`Error::Unsupported`] (the Dumper falls back to host statistics). Every
//! dtype copies and streams, packed int4 and uint1 included (byte-addressed views).
//!
//! `high` accumulates in f64 (exact for every f16/bf16/f32 element and square; GPUs without
//! fast f64 pay in arithmetic, but the kernel stays memory-bound on data-centre parts);
//! `low` accumulates in the source dtype, rounding after every step, as the policy says.
//!
//! ```no_run
//! use dump_core::DType;
//! use dump_device_cuda::{CudaStats, DeviceTensor, Precision};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Fails with an error value (not a panic) on a machine without a GPU.
//! let gpu = CudaStats::new(0)?;
//! let stream = gpu.context().default_stream();
//! let data: Vec<f32> = (0..1_000_000).map(|i| i as f32 - 5e5).collect();
//! let on_device = stream.clone_htod(&data)?;
//! let t = DeviceTensor::from_slice(&on_device, DType::Float32, data.len())?;
//!
//! let s = gpu.summarize(&t, Precision::High, &stream)?.expect("non-empty");
//! assert_eq!(s.summary.max, 499_999.0);
//! println!("avg {}", s.device_stats().avg); // MindSpore's device row value
//!
//! // Copy the tensor out in 8 MiB chunks while writing the previous chunk.
//! let mut pipe = gpu.pipeline(8 << 20)?;
//! let mut file = std::fs::File::create("t.bin")?;
//! pipe.copy_chunks(&t, &stream, |chunk| std::io::Write::write_all(&mut file, chunk))?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod arith;
pub mod combine;
pub mod compile;
pub mod cuda_stats;
pub mod cuda_tensor;
pub mod deferred;
pub mod deferred_copy;
pub mod error;
pub mod kernel_source;
pub mod model;
pub mod partial;
pub mod pipeline;
pub mod probe;
pub mod tensor;

pub use combine::{DeviceSummary, combine};
pub use compile::{CompiledModule, arch_of, cache_key, compile_for, seed_cache, sm_of};
pub use cuda_stats::{CudaStats, STREAM_CHUNK};
pub use cuda_tensor::CudaTensor;
pub use deferred::{MAX_PENDING, PendingSummary};
pub use deferred_copy::{MAX_DEFERRED_COPY_BYTES, PendingHostCopy};
pub use dump_stats::Precision;
pub use error::Error;
pub use kernel_source::KernelId;
pub use partial::Partial;
pub use pipeline::{HostPipeline, PipelineError};
pub use probe::{driver_present, nvrtc_present, preload_nvrtc};
pub use tensor::DeviceTensor;
