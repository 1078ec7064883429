//! Device-to-host copies into pinned buffers, overlapped with the caller's consumption
//! (writing `.npy` files): while the caller consumes chunk `i`, chunk `i + 1` is in flight.

use crate::{DeviceTensor, Error};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, PinnedHostSlice, result};
use std::sync::Arc;

/// The byte ranges, in order, that a tensor of `total` bytes is copied in.
pub fn chunks(total: usize, chunk: usize) -> impl Iterator<Item = core::ops::Range<usize>> {
    let chunk = chunk.max(1);
    (0..total.div_ceil(chunk)).map(move |i| i * chunk..((i + 1) * chunk).min(total))
}

/// An error of [`HostPipeline::copy_chunks`]: from the device, or from the consumer.
#[derive(Debug)]
pub enum PipelineError<E> {
    /// A device error (the copy or its synchronisation).
    Device(Error),
    /// The consumer's error; copying stopped there.
    Consumer(E),
}

impl<E: core::fmt::Display> core::fmt::Display for PipelineError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PipelineError::Device(e) => write!(f, "device-to-host copy failed: {e}"),
            PipelineError::Consumer(e) => write!(f, "consumer failed: {e}"),
        }
    }
}

impl<E: core::fmt::Debug + core::fmt::Display> core::error::Error for PipelineError<E> {}

/// Two pinned host buffers and their completion events: a double-buffered D2H pipeline.
///
/// Create one per writer thread with [`CudaStats::pipeline`](crate::CudaStats::pipeline) and
/// reuse it for every tensor (pinned allocation is slow).
#[derive(Debug)]
pub struct HostPipeline {
    bufs: [PinnedHostSlice<u8>; 2],
    done: [CudaEvent; 2],
    chunk: usize,
}

impl HostPipeline {
    /// Allocates two pinned buffers of `chunk` bytes in `ctx`.
    pub(crate) fn new(ctx: &Arc<CudaContext>, chunk: usize) -> Result<Self, Error> {
        if chunk == 0 {
            return Err(Error::Length {
                what: "pipeline chunk bytes (must be > 0)",
                expected: 1,
                actual: 0,
            });
        }
        let alloc = || {
            // SAFETY: the buffer is only read after a copy into it has completed (its
            // event synchronised), so its initial contents are never observed. Flags 0:
            // plain pinned memory, fast for host reads (write-combined memory is not).
            unsafe { ctx.alloc_pinned_with_flags::<u8>(chunk, 0) }
                .map_err(|e| Error::driver("allocating pinned host memory", e))
        };
        let event = || {
            ctx.new_event(None)
                .map_err(|e| Error::driver("creating a copy event", e))
        };
        Ok(HostPipeline {
            bufs: [alloc()?, alloc()?],
            done: [event()?, event()?],
            chunk,
        })
    }

    /// Bytes per chunk.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk
    }

    fn issue(
        &mut self,
        slot: usize,
        t: &DeviceTensor<'_>,
        range: core::ops::Range<usize>,
        stream: &CudaStream,
    ) -> Result<(), Error> {
        let len = range.len();
        let dst = self.bufs[slot]
            .as_mut_ptr()
            .map_err(|e| Error::driver("waiting for a pinned buffer", e))?;
        // SAFETY: `dst` points to this pipeline's pinned buffer of `self.chunk >= len` bytes,
        // which no copy is writing (its previous chunk was consumed, or it is fresh) and
        // which outlives the copy (we synchronise on `done[slot]` before reading it or
        // returning). The source range lies inside the tensor, whose validity the
        // DeviceTensor constructor's contract guarantees.
        unsafe {
            let dst = std::slice::from_raw_parts_mut(dst, len);
            result::memcpy_dtoh_async(dst, t.ptr() + range.start as u64, stream.cu_stream())
                .map_err(|e| Error::driver("copying device memory to the host", e))?;
        }
        self.done[slot]
            .record(stream)
            .map_err(|e| Error::driver("recording a copy event", e))
    }

    /// Copies `t` to the host chunk by chunk, calling `consume` with each chunk in order,
    /// while the next chunk's copy runs on `stream`. Returns when every chunk is consumed.
    ///
    /// `stream` must be one on which `t` is ready (the producer's stream, or any stream
    /// after a synchronisation). On error no copy is left in flight.
    pub fn copy_chunks<E>(
        &mut self,
        t: &DeviceTensor<'_>,
        stream: &CudaStream,
        mut consume: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), PipelineError<E>> {
        let ranges: Vec<_> = chunks(t.bytes(), self.chunk).collect();
        if ranges.is_empty() {
            return Ok(());
        }
        // The raw copies below need the context current on this (writer) thread.
        self.bufs[0]
            .context()
            .bind_to_thread()
            .map_err(|e| PipelineError::Device(Error::driver("binding the context", e)))?;
        self.issue(0, t, ranges[0].clone(), stream)
            .map_err(PipelineError::Device)?;
        for (i, r) in ranges.iter().enumerate() {
            let slot = i % 2;
            if let Some(next) = ranges.get(i + 1)
                && let Err(e) = self.issue(1 - slot, t, next.clone(), stream)
            {
                // Do not leave the current copy writing a buffer we no longer track.
                let _ = self.done[slot].synchronize();
                return Err(PipelineError::Device(e));
            }
            let wait = self.done[slot]
                .synchronize()
                .map_err(|e| PipelineError::Device(Error::driver("waiting for a copy", e)));
            let result = wait.and_then(|()| {
                let p = self.bufs[slot].as_ptr().map_err(|e| {
                    PipelineError::Device(Error::driver("reading a pinned buffer", e))
                })?;
                // SAFETY: the copy into this buffer completed (its event was synchronised
                // above) and no other copy targets it until the next `issue(slot)`, which
                // happens after `consume` returns; `r.len() <= self.chunk`.
                let chunk = unsafe { std::slice::from_raw_parts(p, r.len()) };
                consume(chunk).map_err(PipelineError::Consumer)
            });
            if let Err(e) = result {
                if ranges.get(i + 1).is_some() {
                    let _ = self.done[1 - slot].synchronize();
                }
                return Err(e);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_tensor_in_order() {
        let c: Vec<_> = chunks(10, 4).collect();
        assert_eq!(c, vec![0..4, 4..8, 8..10]);
        assert_eq!(chunks(0, 4).count(), 0);
        assert_eq!(chunks(8, 4).collect::<Vec<_>>(), vec![0..4, 4..8]);
        // A zero chunk size is clamped, never an endless loop.
        assert_eq!(chunks(3, 0).count(), 3);
    }

    #[test]
    fn errors_say_where_they_came_from() {
        let e: PipelineError<std::io::Error> =
            PipelineError::Consumer(std::io::Error::other("disk full"));
        assert_eq!(e.to_string(), "consumer failed: disk full");
        let e: PipelineError<std::io::Error> = PipelineError::Device(Error::NoDriver);
        assert!(
            e.to_string()
                .starts_with("device-to-host copy failed: the CUDA driver")
        );
    }
}
