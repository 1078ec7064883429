//! Statistics started now and read later: [`CudaStats::summarize_deferred`](crate::CudaStats::summarize_deferred) queues the kernel
//! and the copy of its block partials into pinned host memory on the producer's stream and
//! returns at once; [`PendingSummary::wait`] blocks until the partials are on the host and
//! combines them. A runtime that dumps many tensors per step then waits once per step instead
//! of once per tensor, and its queue of kernels is never drained by the dump.

use crate::combine::{DeviceSummary, combine};
use crate::kernel_source::MAX_GRID;
use crate::{Error, KernelId, Partial, Precision};
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, PinnedHostSlice, result};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Pending summaries one backend allows at once; beyond it
/// [`CudaStats::summarize_deferred`](crate::CudaStats::summarize_deferred) answers `None` and the
/// caller computes synchronously. Each holds one pinned buffer of the largest grid's partials
/// (147 KiB), so the pool stays under 10 MiB of pinned memory.
pub const MAX_PENDING: usize = 64;

/// Words of one pinned partials buffer: the largest grid's partials.
const BUFFER_WORDS: usize = MAX_GRID as usize * Partial::WORDS;

/// A pinned buffer and the event its last copy recorded.
#[derive(Debug)]
pub(crate) struct Slot {
    buf: PinnedHostSlice<u64>,
    done: CudaEvent,
}

/// Pinned partials buffers kept for reuse (pinned allocation is slow), and the number lent.
#[derive(Debug, Default)]
pub(crate) struct PinnedPool {
    free: Mutex<Vec<Slot>>,
    lent: AtomicUsize,
}

impl PinnedPool {
    /// A buffer, or `None` when [`MAX_PENDING`] are lent.
    pub(crate) fn take(self: &Arc<Self>, ctx: &Arc<CudaContext>) -> Result<Option<Lent>, Error> {
        if self.lent.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING {
            self.lent.fetch_sub(1, Ordering::AcqRel);
            return Ok(None);
        }
        let kept = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let slot = match kept {
            Some(b) => Ok(b),
            None => Self::fresh(ctx),
        };
        match slot {
            Ok(slot) => Ok(Some(Lent {
                slot: Some(slot),
                pool: Arc::clone(self),
            })),
            Err(e) => {
                self.lent.fetch_sub(1, Ordering::AcqRel);
                Err(e)
            }
        }
    }

    fn fresh(ctx: &Arc<CudaContext>) -> Result<Slot, Error> {
        // SAFETY: u64 is plain data; flags 0 is ordinary (cached) pinned memory, fast for
        // host reads; the buffer is only read after its event says the copy is complete.
        let buf = unsafe { ctx.alloc_pinned_with_flags::<u64>(BUFFER_WORDS, 0) }
            .map_err(|e| Error::driver("allocating pinned host memory", e))?;
        let done = ctx
            .new_event(None)
            .map_err(|e| Error::driver("creating a copy event", e))?;
        Ok(Slot { buf, done })
    }
}

/// A buffer lent by a [`PinnedPool`]; given back on drop, once its copy has completed.
#[derive(Debug)]
pub(crate) struct Lent {
    slot: Option<Slot>,
    pool: Arc<PinnedPool>,
}

impl Lent {
    /// Queues the copy of `words` words of the device buffer `src` into this buffer on
    /// `stream`, and records the buffer's event behind it.
    fn copy_from(
        &mut self,
        src: &CudaSlice<u64>,
        words: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<(), Error> {
        let slot = self.slot.as_mut().ok_or(LOST)?;
        if words > BUFFER_WORDS || words > src.len() {
            return Err(Error::Length {
                what: "block partials",
                expected: BUFFER_WORDS.min(src.len()),
                actual: words,
            });
        }
        let dst = slot
            .buf
            .as_mut_ptr()
            .map_err(|e| Error::driver("waiting for a pinned buffer", e))?;
        let (src_ptr, _record) = cudarc::driver::DevicePtr::device_ptr(src, stream);
        // SAFETY: `dst` is this lent pinned buffer of BUFFER_WORDS >= `words` words, which no
        // other copy writes (it was given back only after its event completed) and which
        // outlives the copy (a PendingSummary waits for the event before it is read, dropped
        // or given back); `src` holds at least `words` words and is kept alive by the pending
        // summary until then; the copy is ordered after the kernel on `stream`.
        unsafe {
            let dst = std::slice::from_raw_parts_mut(dst, words);
            result::memcpy_dtoh_async(dst, src_ptr, stream.cu_stream())
                .map_err(|e| Error::driver("queueing the copy of block partials", e))?;
        }
        slot.done
            .record(stream)
            .map_err(|e| Error::driver("recording a copy event", e))
    }

    /// Waits for the copy, then the first `words` words.
    fn read(&self, words: usize) -> Result<&[u64], Error> {
        let slot = self.slot.as_ref().ok_or(LOST)?;
        slot.done
            .synchronize()
            .map_err(|e| Error::driver("waiting for the block partials", e))?;
        let all = slot
            .buf
            .as_slice()
            .map_err(|e| Error::driver("reading a pinned buffer", e))?;
        Ok(&all[..words.min(all.len())])
    }
}

/// The error of a lent buffer that is gone (never expected).
const LOST: Error = Error::Driver {
    during: "reading pending statistics",
    message: String::new(),
};

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            // Only a buffer whose copy has completed is reused; otherwise it is freed (its
            // drop waits for the copy first).
            if slot.done.synchronize().is_ok() {
                self.pool
                    .free
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(slot);
            }
        }
        self.pool.lent.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A summary queued on the device: [`wait`](PendingSummary::wait) for it. Dropped without
/// waiting, it still waits for its copy before its buffers are reused or freed.
#[derive(Debug)]
pub struct PendingSummary {
    kernel: KernelId,
    precision: Precision,
    n: u64,
    grid: u32,
    /// The device partials, kept until the copy out of them has completed.
    partials: CudaSlice<u64>,
    host: Lent,
}

impl PendingSummary {
    /// Queues the copy of `partials` (`grid` blocks of `kernel` over `n` elements) into
    /// `host` on `stream`.
    pub(crate) fn queue(
        (kernel, precision, n, grid): (KernelId, Precision, u64, u32),
        partials: CudaSlice<u64>,
        mut host: Lent,
        stream: &Arc<CudaStream>,
    ) -> Result<PendingSummary, Error> {
        host.copy_from(&partials, grid as usize * Partial::WORDS, stream)?;
        Ok(PendingSummary {
            kernel,
            precision,
            n,
            grid,
            partials,
            host,
        })
    }

    /// Blocks until the block partials are on the host, then combines them into the summary
    /// [`CudaStats::summarize`](crate::CudaStats::summarize) would have returned.
    pub fn wait(self) -> Result<DeviceSummary, Error> {
        let words = self.host.read(self.grid as usize * Partial::WORDS)?;
        let partials = Partial::all_from_words(words);

        // The device partials were read by the copy; they are freed with `self`.
        let _ = &self.partials;
        combine(self.kernel, self.precision, self.n, &partials)?.ok_or(Error::Driver {
            during: "combining pending statistics",
            message: "no partials for a non-empty tensor".into(),
        })
    }
}
