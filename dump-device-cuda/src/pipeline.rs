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
        consume: impl FnMut(&[u8]) -> Result<(), E>,
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
        let mut slots = CudaSlots {
            pipe: self,
            t,
            stream,
        };
        double_buffered(&mut slots, &ranges, consume)
    }
}

/// Two buffer slots that copies go into: the schedule of [`double_buffered`] is tested
/// with a recording fake, and runs on the GPU through [`CudaSlots`].
trait Slots {
    /// Starts copying `range` of the tensor into `slot` (asynchronously).
    fn issue(&mut self, slot: usize, range: core::ops::Range<usize>) -> Result<(), Error>;
    /// Waits until the copy into `slot` is complete.
    fn wait(&mut self, slot: usize) -> Result<(), Error>;
    /// The first `len` bytes of `slot` (after [`Slots::wait`]).
    fn read(&self, slot: usize, len: usize) -> Result<&[u8], Error>;
}

/// The double-buffered schedule: copy 0; then for each chunk `i`: issue copy `i + 1` into
/// the other slot, wait for copy `i`, consume it. A slot is reissued only after its chunk
/// was consumed; on any error the in-flight copy is waited for before returning.
fn double_buffered<S: Slots, E>(
    s: &mut S,
    ranges: &[core::ops::Range<usize>],
    mut consume: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), PipelineError<E>> {
    let Some(first) = ranges.first() else {
        return Ok(());
    };
    s.issue(0, first.clone()).map_err(PipelineError::Device)?;
    for (i, r) in ranges.iter().enumerate() {
        let slot = i % 2;
        let next = ranges.get(i + 1);
        if let Some(next) = next
            && let Err(e) = s.issue(1 - slot, next.clone())
        {
            // Do not leave the current copy writing a buffer we no longer track.
            let _ = s.wait(slot);
            return Err(PipelineError::Device(e));
        }
        let result = s
            .wait(slot)
            .and_then(|()| s.read(slot, r.len()))
            .map_err(PipelineError::Device)
            .and_then(|chunk| consume(chunk).map_err(PipelineError::Consumer));
        if let Err(e) = result {
            if next.is_some() {
                let _ = s.wait(1 - slot);
            }
            return Err(e);
        }
    }
    Ok(())
}

/// [`Slots`] on a [`HostPipeline`]'s pinned buffers, copying from a device tensor.
struct CudaSlots<'p, 't, 'a> {
    pipe: &'p mut HostPipeline,
    t: &'t DeviceTensor<'a>,
    stream: &'t CudaStream,
}

impl Slots for CudaSlots<'_, '_, '_> {
    fn issue(&mut self, slot: usize, range: core::ops::Range<usize>) -> Result<(), Error> {
        self.pipe.issue(slot, self.t, range, self.stream)
    }

    fn wait(&mut self, slot: usize) -> Result<(), Error> {
        self.pipe.done[slot]
            .synchronize()
            .map_err(|e| Error::driver("waiting for a copy", e))
    }

    fn read(&self, slot: usize, len: usize) -> Result<&[u8], Error> {
        let p = self.pipe.bufs[slot]
            .as_ptr()
            .map_err(|e| Error::driver("reading a pinned buffer", e))?;
        // SAFETY: the copy into this buffer completed (double_buffered waited on its event)
        // and no copy targets it again until double_buffered reissues the slot, after the
        // returned slice is consumed (the borrow of `self` prevents an issue meanwhile);
        // `len` is a chunk length, at most the buffer's size.
        Ok(unsafe { std::slice::from_raw_parts(p, len.min(self.pipe.chunk)) })
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

    /// A fake device: records the schedule and fills a slot with its range's start byte
    /// when the copy is "waited for".
    #[derive(Default)]
    struct Fake {
        log: Vec<String>,
        pending: [Option<core::ops::Range<usize>>; 2],
        bufs: [Vec<u8>; 2],
        fail_issue_at: Option<usize>,
    }

    impl Slots for Fake {
        fn issue(&mut self, slot: usize, r: core::ops::Range<usize>) -> Result<(), Error> {
            if self.fail_issue_at == Some(r.start) {
                return Err(Error::NoDriver);
            }
            assert!(
                self.pending[slot].is_none(),
                "slot {slot} reissued while in flight"
            );
            self.log
                .push(format!("issue {}..{} -> {slot}", r.start, r.end));
            self.pending[slot] = Some(r);
            Ok(())
        }
        fn wait(&mut self, slot: usize) -> Result<(), Error> {
            if let Some(r) = self.pending[slot].take() {
                self.log.push(format!("wait {slot}"));
                self.bufs[slot] = vec![r.start as u8; r.len()];
            }
            Ok(())
        }
        fn read(&self, slot: usize, len: usize) -> Result<&[u8], Error> {
            assert!(
                self.pending[slot].is_none(),
                "read of slot {slot} before its copy ended"
            );
            Ok(&self.bufs[slot][..len])
        }
    }

    #[test]
    fn next_copy_is_in_flight_while_a_chunk_is_consumed() {
        let mut f = Fake::default();
        let ranges: Vec<_> = chunks(10, 4).collect();
        let mut seen = Vec::new();
        double_buffered(&mut f, &ranges, |c: &[u8]| {
            seen.push(c.to_vec());
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(seen, vec![vec![0; 4], vec![4; 4], vec![8; 2]]);
        assert_eq!(
            f.log,
            [
                "issue 0..4 -> 0",
                "issue 4..8 -> 1", // chunk 1 copies while chunk 0 is consumed
                "wait 0",
                "issue 8..10 -> 0",
                "wait 1",
                "wait 0",
            ]
        );
    }

    #[test]
    fn errors_leave_no_copy_in_flight() {
        let ranges: Vec<_> = chunks(12, 4).collect();
        let mut f = Fake::default();
        let r = double_buffered(&mut f, &ranges, |_: &[u8]| Err("disk full"));
        assert!(matches!(r, Err(PipelineError::Consumer("disk full"))));
        assert!(f.pending.iter().all(Option::is_none), "{:?}", f.log);
        let mut f = Fake {
            fail_issue_at: Some(8),
            ..Fake::default()
        };
        let mut n = 0;
        let r = double_buffered(&mut f, &ranges, |_: &[u8]| {
            n += 1;
            Ok::<(), ()>(())
        });
        assert!(matches!(r, Err(PipelineError::Device(Error::NoDriver))));
        assert_eq!(n, 1);
        assert!(f.pending.iter().all(Option::is_none), "{:?}", f.log);
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
