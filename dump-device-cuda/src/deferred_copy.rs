//! Host copies started now and read later: [`CudaStats::copy_to_host_deferred`] queues the
//! copy of a whole tensor into pinned host memory on the producer's stream and returns at once;
//! [`PendingHostCopy`] (a [`dump_stats::PendingCopy`]) blocks only when its bytes are asked
//! for. The flight recorder holds GPU tensors this way: its ring costs the bus bandwidth of the
//! copies, but the runtime's thread never waits for them inside a kernel call.
//!
//! Staging buffers are pinned (page-locked) memory, the only host memory a copy can be queued
//! into without the driver waiting; they are pooled by power-of-two size class (pinned
//! allocation is slow) and bounded by [`MAX_DEFERRED_COPY_BYTES`], idle ones included.
//!
//! [`CudaStats::copy_to_host_deferred`]: crate::CudaStats::copy_to_host_deferred

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, PinnedHostSlice, result};

use crate::{DeviceTensor, Error};

/// Pinned bytes the deferred copies of one backend may hold, lent and idle together; past it
/// [`CudaStats::copy_to_host_deferred`](crate::CudaStats::copy_to_host_deferred) answers
/// `None` and the caller copies synchronously.
pub const MAX_DEFERRED_COPY_BYTES: usize = 256 << 20;

/// The smallest staging buffer (smaller tensors share its size class).
const MIN_CLASS: usize = 64 << 10;

/// A pinned staging buffer and the event its last copy recorded.
#[derive(Debug)]
struct Staging {
    buf: PinnedHostSlice<u8>,
    done: CudaEvent,
}

/// Idle staging buffers by size class, and the pinned bytes held (lent and idle).
#[derive(Debug, Default)]
struct State {
    idle: BTreeMap<usize, Vec<Staging>>,
    held: usize,
}

/// The staging buffers of one backend.
#[derive(Debug, Default)]
pub(crate) struct CopyPool {
    state: Mutex<State>,
}

/// The size class of a copy of `len` bytes.
fn class_of(len: usize) -> Option<usize> {
    len.checked_next_power_of_two().map(|c| c.max(MIN_CLASS))
}

impl CopyPool {
    /// A staging buffer of at least `len` bytes, or `None` when the pool cannot hold one more
    /// without passing [`MAX_DEFERRED_COPY_BYTES`] (idle buffers of other classes are freed
    /// first).
    fn take(self: &Arc<Self>, ctx: &Arc<CudaContext>, len: usize) -> Result<Option<Lent>, Error> {
        let Some(class) = class_of(len).filter(|&c| c <= MAX_DEFERRED_COPY_BYTES) else {
            return Ok(None);
        };
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = st.idle.get_mut(&class).and_then(Vec::pop) {
            return Ok(Some(self.lend(s, class)));
        }
        while st.held + class > MAX_DEFERRED_COPY_BYTES {
            let Some((c, mut v)) = st.idle.pop_last() else {
                return Ok(None);
            };
            v.pop();
            st.held -= c;
            if !v.is_empty() {
                st.idle.insert(c, v);
            }
        }
        // SAFETY: u8 is plain data; flags 0 is ordinary (cached) pinned memory, fast for host
        // reads; the buffer is only read after its event says the copy into it is complete.
        let buf = unsafe { ctx.alloc_pinned_with_flags::<u8>(class, 0) }
            .map_err(|e| Error::driver("allocating pinned host memory", e))?;
        let done = ctx
            .new_event(None)
            .map_err(|e| Error::driver("creating a copy event", e))?;
        st.held += class;
        Ok(Some(self.lend(Staging { buf, done }, class)))
    }

    fn lend(self: &Arc<Self>, s: Staging, class: usize) -> Lent {
        Lent {
            slot: Some(s),
            class,
            pool: Arc::clone(self),
        }
    }

    /// Pinned bytes held now (lent and idle).
    pub(crate) fn held(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .held
    }
}

/// A staging buffer lent by a [`CopyPool`]; given back on drop, once its copy has completed.
#[derive(Debug)]
struct Lent {
    slot: Option<Staging>,
    class: usize,
    pool: Arc<CopyPool>,
}

impl Drop for Lent {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else { return };
        let mut st = self
            .pool
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Only a buffer whose copy has completed is reused; otherwise it is freed (its drop
        // waits for the copy first).
        if slot.done.synchronize().is_ok() {
            st.idle.entry(self.class).or_default().push(slot);
        } else {
            st.held -= self.class.min(st.held);
        }
    }
}

/// A tensor's copy queued into pinned memory: [`dump_stats::PendingCopy::wait_into`] waits
/// for it and copies the bytes out. Dropped without waiting, it still waits for its copy
/// before the buffer is reused or freed.
#[derive(Debug)]
pub struct PendingHostCopy {
    host: Lent,
    len: usize,
}

impl PendingHostCopy {
    /// Queues the copy of all of `t` into a buffer of `pool` on `stream`; `None` when the pool
    /// has no room.
    pub(crate) fn queue(
        pool: &Arc<CopyPool>,
        ctx: &Arc<CudaContext>,
        t: &DeviceTensor<'_>,
        stream: &Arc<CudaStream>,
    ) -> Result<Option<PendingHostCopy>, Error> {
        let len = t.bytes();
        if len == 0 {
            return Ok(None);
        }
        ctx.bind_to_thread()
            .map_err(|e| Error::driver("binding the context", e))?;
        let Some(mut host) = pool.take(ctx, len)? else {
            return Ok(None);
        };
        let slot = host.slot.as_mut().ok_or(LOST)?;
        let dst = slot
            .buf
            .as_mut_ptr()
            .map_err(|e| Error::driver("waiting for a pinned buffer", e))?;
        // SAFETY: `dst` is this lent pinned buffer of at least `len` bytes (its size class),
        // which no other copy writes (it was given back only after its event completed) and
        // which outlives the copy (it is waited for before it is read, reused or freed); the
        // source holds `len` bytes per DeviceTensor's contract, and the copy is ordered after
        // the tensor's producer on `stream`.
        unsafe {
            let dst = std::slice::from_raw_parts_mut(dst, len);
            result::memcpy_dtoh_async(dst, t.ptr(), stream.cu_stream())
                .map_err(|e| Error::driver("queueing a device-to-host copy", e))?;
        }
        slot.done
            .record(stream)
            .map_err(|e| Error::driver("recording a copy event", e))?;
        Ok(Some(PendingHostCopy { host, len }))
    }
}

/// The error of a lent buffer that is gone (never expected).
const LOST: Error = Error::Driver {
    during: "reading a deferred copy",
    message: String::new(),
};

impl dump_stats::PendingCopy for PendingHostCopy {
    fn len(&self) -> usize {
        self.len
    }

    fn wait_into(self: Box<Self>, dst: &mut [u8]) -> Result<(), dump_stats::DeviceError> {
        if dst.len() != self.len {
            return Err(Error::Length {
                what: "host buffer bytes",
                expected: self.len,
                actual: dst.len(),
            }
            .into());
        }
        let slot = self.host.slot.as_ref().ok_or(LOST)?;
        slot.done
            .synchronize()
            .map_err(|e| Error::driver("waiting for a deferred copy", e))?;
        let all = slot
            .buf
            .as_slice()
            .map_err(|e| Error::driver("reading a pinned buffer", e))?;
        dst.copy_from_slice(&all[..self.len]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_are_powers_of_two_from_64_kib() {
        assert_eq!(class_of(1), Some(64 << 10));
        assert_eq!(class_of(64 << 10), Some(64 << 10));
        assert_eq!(class_of((64 << 10) + 1), Some(128 << 10));
        assert_eq!(class_of(3 << 20), Some(4 << 20));
        assert_eq!(class_of(usize::MAX), None);
        // The largest copy the pool takes is the cap itself.
        assert_eq!(
            class_of(MAX_DEFERRED_COPY_BYTES),
            Some(MAX_DEFERRED_COPY_BYTES)
        );
    }

    #[test]
    fn pending_copies_can_go_to_other_threads() {
        fn send<T: Send>() {}
        send::<PendingHostCopy>();
    }
}
