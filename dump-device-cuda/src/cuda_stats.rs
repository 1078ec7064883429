//! [`CudaStats`]: the device statistics backend for one GPU.

use crate::combine::{DeviceSummary, combine};
use crate::deferred::{PendingSummary, PinnedPool};
use crate::kernel_source::{BLOCK, grid_for};
use crate::pipeline::{HostPipeline, PipelineError};
use crate::{DeviceTensor, Error, KernelId, Partial, Precision, compile, probe};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg, result,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes per chunk of the pinned pipelines [`CudaStats::copy_chunks`] keeps: large enough for
/// full PCIe bandwidth and few file writes, small enough that two of them per writing thread
/// are cheap to keep pinned. A multiple of 8, so chunks hold whole elements of every dtype.
pub const STREAM_CHUNK: usize = 8 << 20;

/// Idle pipelines kept for reuse (pinned allocation is slow); more concurrent writers than
/// this allocate and free their own.
const KEPT_PIPELINES: usize = 4;

/// A statistics kernel queued by [`CudaStats::launch`].
struct Launched {
    kernel: KernelId,
    n: u64,
    grid: u32,
    out: CudaSlice<u64>,
}

/// Device statistics and device-to-host copies on one GPU.
///
/// [`new`](CudaStats::new) checks for the driver and NVRTC (errors, never panics), opens the
/// device's primary context (the one runtimes such as candle use, so their pointers are
/// valid here), compiles the kernels for the device's architecture (cached per process) and
/// loads them. Cheap to share: `&self` methods only.
#[derive(Debug)]
pub struct CudaStats {
    ctx: Arc<CudaContext>,
    arch: String,
    functions: HashMap<KernelId, CudaFunction>,
    pipelines: Mutex<Vec<HostPipeline>>,
    pinned: Arc<PinnedPool>,
    copies: Arc<crate::deferred_copy::CopyPool>,
}

impl CudaStats {
    /// Opens GPU `ordinal`.
    ///
    /// Errors: [`Error::NoDriver`] without an NVIDIA driver, [`Error::NoNvrtc`] without
    /// NVRTC (see [`crate::preload_nvrtc`]; not needed when the PTX for the device's
    /// architecture was given to [`crate::compile::seed_cache`]), [`Error::Driver`] when there is no such device
    /// or the driver can load neither the CUBIN nor the PTX compiled for the device,
    /// [`Error::Compile`] if NVRTC rejects the kernels.
    pub fn new(ordinal: usize) -> Result<CudaStats, Error> {
        probe::require_driver()?;
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::driver("opening the device", e))?;
        Self::with_context(ctx)
    }

    /// Uses an existing context (for example the one of a runtime's device).
    pub fn with_context(ctx: Arc<CudaContext>) -> Result<CudaStats, Error> {
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| Error::driver("reading the compute capability", e))?;
        // Machine code for this GPU first (loads on older drivers of the same CUDA major
        // version); PTX for the same architecture if NVRTC cannot target it or the driver
        // rejects the CUBIN.
        let mut tried = Vec::new();
        let mut loaded = None;
        for arch in [compile::sm_of(major, minor), compile::arch_of(major, minor)] {
            let attempt = compile::compile_for(&arch).and_then(|m| {
                ctx.load_module(m.to_ptx())
                    .map_err(|e| Error::driver("loading the statistics module", e))
            });
            match attempt {
                Ok(module) => {
                    loaded = Some((arch, module));
                    break;
                }
                Err(e) => tried.push(e),
            }
        }
        let Some((arch, loaded)) = loaded else {
            // Both failed: report the PTX attempt (the more portable one); the CUBIN error
            // is usually the same root cause.
            return Err(tried.pop().unwrap_or(Error::NoDriver));
        };
        let mut functions = HashMap::new();
        for k in KernelId::ALL {
            let f = loaded
                .load_function(k.name())
                .map_err(|e| Error::driver("loading a statistics kernel", e))?;
            functions.insert(k, f);
        }
        Ok(CudaStats {
            ctx,
            arch,
            functions,
            pipelines: Mutex::new(Vec::new()),
            pinned: Arc::default(),
            copies: Arc::default(),
        })
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The architecture the loaded kernels were compiled for (`sm_90`, or `compute_90` when
    /// the PTX fallback was used).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// The statistics of `t` under `precision`, computed on `stream` (the producer's stream,
    /// so that they run after the kernel that wrote `t`). Blocks until they are on the host.
    ///
    /// One kernel launch reads the tensor once; the host adds the block partials in block
    /// order. Results are bitwise reproducible and equal [`crate::model::summarize`] of the
    /// same bytes. `Ok(None)` for an empty tensor; [`Error::Unsupported`] for dtypes
    /// without a kernel (use host statistics).
    pub fn summarize(
        &self,
        t: &DeviceTensor<'_>,
        precision: Precision,
        stream: &Arc<CudaStream>,
    ) -> Result<Option<DeviceSummary>, Error> {
        let Some(l) = self.launch(t, precision, stream)? else {
            return Ok(None);
        };
        let words = stream
            .clone_dtoh(&l.out)
            .map_err(|e| Error::driver("copying block partials to the host", e))?;
        // The driver documents device-to-pageable copies as "might be synchronous" (older
        // versions: "returns once the copy has completed"); wait explicitly before reading,
        // so that correctness does not rest on that. The stream is idle by now on drivers
        // that do complete the copy, so this costs one call. The mock driver test copies
        // lazily and catches a read before this wait.
        stream
            .synchronize()
            .map_err(|e| Error::driver("waiting for the block partials", e))?;
        let partials = Partial::all_from_words(&words);

        combine(l.kernel, precision, l.n, &partials)
    }

    /// [`summarize`](CudaStats::summarize) without waiting: the kernel and the copy of its
    /// block partials into pinned host memory are queued on `stream`, and the returned
    /// [`PendingSummary`] is [waited for](PendingSummary::wait) later (before anything on the
    /// stream may overwrite `t`, the tensor is read in stream order, so later is safe on the
    /// producer's stream). `Ok(None)` for an empty tensor, or when [`MAX_PENDING`] summaries
    /// are pending already (then call `summarize`).
    ///
    /// [`MAX_PENDING`]: crate::deferred::MAX_PENDING
    pub fn summarize_deferred(
        &self,
        t: &DeviceTensor<'_>,
        precision: Precision,
        stream: &Arc<CudaStream>,
    ) -> Result<Option<PendingSummary>, Error> {
        if t.elems() == 0 {
            return Ok(None);
        }
        KernelId::for_dtype(t.dtype(), precision).ok_or(Error::Unsupported(t.dtype()))?;
        let Some(host) = self.pinned.take(&self.ctx)? else {
            return Ok(None);
        };
        let Some(l) = self.launch(t, precision, stream)? else {
            return Ok(None);
        };
        PendingSummary::queue((l.kernel, precision, l.n, l.grid), l.out, host, stream).map(Some)
    }

    /// Queues the statistics kernel of `t` on `stream`; `None` for an empty tensor.
    fn launch(
        &self,
        t: &DeviceTensor<'_>,
        precision: Precision,
        stream: &Arc<CudaStream>,
    ) -> Result<Option<Launched>, Error> {
        let kernel =
            KernelId::for_dtype(t.dtype(), precision).ok_or(Error::Unsupported(t.dtype()))?;
        if t.elems() == 0 {
            return Ok(None);
        }
        let size = t.dtype().size().ok_or(Error::Unsupported(t.dtype()))?;
        let n = t.elems() as u64;
        let grid = grid_for(size, n);
        let f = self
            .functions
            .get(&kernel)
            .ok_or(Error::Unsupported(t.dtype()))?;
        let mut out = stream
            .alloc_zeros::<u64>(grid as usize * Partial::WORDS)
            .map_err(|e| Error::driver("allocating block partials", e))?;
        let ptr = t.ptr();
        let aligned = i32::from(t.vector_aligned());
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = stream.launch_builder(f);
        launch.arg(&ptr).arg(&n).arg(&aligned).arg(&mut out);
        // SAFETY: the kernel takes (const raw_t* data, u64 n, int aligned, Partial* out):
        // `ptr` is a device address of `n` elements of the kernel's dtype (DeviceTensor's
        // contract, alignment checked there), `aligned` is 1 only for 16-byte aligned
        // addresses, and `out` holds `grid` partials of WORDS u64 each; the kernel writes
        // exactly partial `blockIdx.x < grid`.
        unsafe { launch.launch(cfg) }
            .map_err(|e| Error::driver("launching the statistics kernel", e))?;
        Ok(Some(Launched {
            kernel,
            n,
            grid,
            out,
        }))
    }

    /// Copies all of `t` into `dst` (pageable memory; for big tensors prefer a
    /// [`pipeline`](CudaStats::pipeline)). `dst` must be exactly `t.bytes()` long.
    pub fn copy_to_host(
        &self,
        t: &DeviceTensor<'_>,
        dst: &mut [u8],
        stream: &Arc<CudaStream>,
    ) -> Result<(), Error> {
        if dst.len() != t.bytes() {
            return Err(Error::Length {
                what: "host buffer bytes",
                expected: t.bytes(),
                actual: dst.len(),
            });
        }
        if dst.is_empty() {
            return Ok(());
        }
        self.ctx
            .bind_to_thread()
            .map_err(|e| Error::driver("binding the context", e))?;
        // SAFETY: `dst` is a live, exclusively borrowed host buffer of exactly t.bytes()
        // bytes, and the stream is synchronised before it is released; the source is valid
        // per DeviceTensor's contract.
        unsafe { result::memcpy_dtoh_async(dst, t.ptr(), stream.cu_stream()) }
            .map_err(|e| Error::driver("copying device memory to the host", e))?;
        stream
            .synchronize()
            .map_err(|e| Error::driver("waiting for a device-to-host copy", e))
    }

    /// Queues the copy of all of `t` into pinned host memory on `stream` and returns at once;
    /// the [`PendingHostCopy`](crate::PendingHostCopy) waits when its bytes are asked for
    /// (the tensor is read in stream order, so later is safe on the producer's stream, as for
    /// [`summarize_deferred`](CudaStats::summarize_deferred)). `Ok(None)` for an empty tensor,
    /// or when the staging memory (at most
    /// [`MAX_DEFERRED_COPY_BYTES`](crate::MAX_DEFERRED_COPY_BYTES) pinned) has no room: copy
    /// with [`copy_to_host`](CudaStats::copy_to_host) then.
    pub fn copy_to_host_deferred(
        &self,
        t: &DeviceTensor<'_>,
        stream: &Arc<CudaStream>,
    ) -> Result<Option<crate::PendingHostCopy>, Error> {
        crate::PendingHostCopy::queue(&self.copies, &self.ctx, t, stream)
    }

    /// Pinned bytes the deferred copies hold now (lent and kept for reuse).
    pub fn deferred_copy_bytes(&self) -> usize {
        self.copies.held()
    }

    /// A double-buffered pinned pipeline with chunks of `chunk_bytes` (for example 8 MiB),
    /// to copy tensors while writing them out.
    pub fn pipeline(&self, chunk_bytes: usize) -> Result<HostPipeline, Error> {
        HostPipeline::new(&self.ctx, chunk_bytes)
    }

    /// Hands `t` to `consume` in [`STREAM_CHUNK`]-byte chunks, in order, through a pinned
    /// pipeline kept by this backend (one per concurrent caller, reused): chunk *i + 1* copies
    /// while `consume` handles chunk *i*. No host copy of the whole tensor is made.
    pub fn copy_chunks<E>(
        &self,
        t: &DeviceTensor<'_>,
        stream: &Arc<CudaStream>,
        consume: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), PipelineError<E>> {
        let kept = self
            .pipelines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut pipe = match kept {
            Some(p) => p,
            None => self.pipeline(STREAM_CHUNK).map_err(PipelineError::Device)?,
        };
        let result = pipe.copy_chunks(t, stream, consume);
        // copy_chunks leaves no copy in flight, even on error: the pipeline can be reused.
        let mut kept = self
            .pipelines
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if kept.len() < KEPT_PIPELINES {
            kept.push(pipe);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_without_a_gpu_is_an_error_value() {
        if probe::driver_present() {
            eprintln!("SKIP new_without_a_gpu_is_an_error_value: this machine has a CUDA driver");
            return;
        }
        let e = CudaStats::new(0).unwrap_err();
        assert_eq!(e, Error::NoDriver);
    }
}
