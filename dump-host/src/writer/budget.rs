//! A byte budget: producers wait while too many bytes are in flight (back-pressure).

use std::sync::{
    Condvar, Mutex, MutexGuard, PoisonError,
    atomic::{AtomicUsize, Ordering},
};

/// Bounds the bytes held by queued and running write jobs **and** by idle copy buffers kept for
/// reuse ([`BufferPool`](super::BufferPool)): both are memory opdump holds, so both count.
///
/// [`acquire`](Budget::acquire) blocks while admitting `n` more bytes would exceed the limit;
/// idle buffers are freed first. One job larger than the whole budget is still admitted when
/// nothing else is in flight, so an oversized tensor is written (alone) instead of
/// deadlocking.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    state: Mutex<State>,
    freed: Condvar,
    peak: AtomicUsize,
}

#[derive(Debug, Default)]
struct State {
    /// Bytes admitted for jobs.
    used: usize,
    /// Idle buffers and their total capacity.
    idle: Vec<Vec<u8>>,
    idle_bytes: usize,
    /// Producers waiting in `acquire`.
    waiting: usize,
}

impl State {
    /// Frees every idle buffer (returned, to be dropped outside the lock).
    fn drain_idle(&mut self) -> Vec<Vec<u8>> {
        self.idle_bytes = 0;
        std::mem::take(&mut self.idle)
    }
}

impl Budget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Budget {
            limit,
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
            peak: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes currently admitted for jobs (idle buffers not included).
    pub fn in_use(&self) -> usize {
        self.lock().used
    }

    /// Bytes held by idle buffers kept for reuse.
    pub fn idle_bytes(&self) -> usize {
        self.lock().idle_bytes
    }

    /// Waits until `n` bytes fit (freeing idle buffers first), then admits them.
    pub fn acquire(&self, n: usize) {
        let mut st = self.lock();
        let mut freed = Vec::new();
        loop {
            if st.used + st.idle_bytes + n <= self.limit {
                break;
            }
            if st.idle_bytes > 0 {
                freed.extend(st.drain_idle());
                continue;
            }
            if st.used == 0 {
                break; // oversized, alone
            }
            st.waiting += 1;
            st = self.freed.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.waiting -= 1;
        }
        st.used += n;
        self.peak.fetch_max(st.used + st.idle_bytes, Ordering::Relaxed);
        drop(st);
        drop(freed);
    }

    /// The most bytes ever held at once, jobs and idle buffers together (at most the limit,
    /// or one oversized job alone).
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Returns `n` admitted bytes.
    pub fn release(&self, n: usize) {
        let mut st = self.lock();
        st.used = st.used.saturating_sub(n);
        self.freed.notify_all();
    }

    /// Waits until nothing is admitted (every job finished).
    pub fn wait_idle(&self) {
        let mut st = self.lock();
        while st.used != 0 {
            st = self.freed.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// An idle buffer with room for `len` bytes and at most about twice that (a small tensor
    /// never takes a large buffer): the smallest that fits. Its bytes leave the idle count; the
    /// caller charges its capacity with [`acquire`](Budget::acquire).
    pub(crate) fn take_idle(&self, len: usize) -> Option<Vec<u8>> {
        let mut st = self.lock();
        let most = len.saturating_mul(2).max(len + 4096);
        let i = st
            .idle
            .iter()
            .enumerate()
            .filter(|(_, b)| (len..=most).contains(&b.capacity()))
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i)?;
        let b = st.idle.swap_remove(i);
        st.idle_bytes -= b.capacity();
        Some(b)
    }

    /// Keeps `buf` idle for reuse when that fits in the budget and no producer is waiting for
    /// room; otherwise it is freed. (The job that held it still holds its charge until the
    /// writer releases it, so the check is conservative.)
    pub(crate) fn keep_idle(&self, buf: Vec<u8>) {
        let mut st = self.lock();
        let cap = buf.capacity();
        if st.waiting == 0 && st.used + st.idle_bytes + cap <= self.limit {
            st.idle_bytes += cap;
            st.idle.push(buf);
            return;
        }
        drop(st);
        drop(buf);
    }

    /// Frees every idle buffer.
    pub(crate) fn clear_idle(&self) {
        let freed = self.lock().drain_idle();
        drop(freed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{sync::Arc, thread, time::Duration};

    #[test]
    fn blocks_until_released_and_admits_oversized_alone() {
        let b = Arc::new(Budget::new(100));
        b.acquire(60);
        let b2 = Arc::clone(&b);
        let t = thread::spawn(move || {
            b2.acquire(60); // must wait for the first 60 to go
            b2.in_use()
        });
        thread::sleep(Duration::from_millis(50));
        assert_eq!(b.in_use(), 60, "second acquire must still be waiting");
        b.release(60);
        assert_eq!(t.join().unwrap(), 60);
        b.release(60);
        b.acquire(1000); // larger than the limit, but alone: admitted
        assert_eq!(b.in_use(), 1000);
        b.release(1000);
        b.wait_idle();
    }

    #[test]
    fn idle_buffers_count_and_are_freed_for_jobs() {
        let b = Budget::new(100 << 10);
        b.acquire(40 << 10);
        b.keep_idle(Vec::with_capacity(40 << 10));
        assert_eq!(b.idle_bytes(), 40 << 10);
        b.release(40 << 10);
        // 40 KiB idle + 70 KiB would pass 100 KiB: the idle buffer is freed, not waited for.
        b.acquire(70 << 10);
        assert_eq!((b.in_use(), b.idle_bytes()), (70 << 10, 0));
        // A buffer that does not fit next to the jobs is not kept.
        b.keep_idle(Vec::with_capacity(40 << 10));
        assert_eq!(b.idle_bytes(), 0);
        b.keep_idle(Vec::with_capacity(20 << 10));
        assert_eq!(b.idle_bytes(), 20 << 10);
        assert!(b.peak() <= 100 << 10, "{}", b.peak());
        // A small request never takes a much larger buffer.
        assert!(b.take_idle(1 << 10).is_none());
        assert_eq!(b.take_idle(15 << 10).map(|v| v.capacity()), Some(20 << 10));
        assert_eq!(b.idle_bytes(), 0);
        b.release(70 << 10);
        b.keep_idle(Vec::with_capacity(8));
        b.clear_idle();
        assert_eq!(b.idle_bytes(), 0);
    }
}
