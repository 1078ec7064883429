//! A byte budget: producers wait while too many bytes are in flight (back-pressure).

use std::{
    collections::BTreeMap,
    sync::{
        Condvar, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
};

use super::CopyBuf;

/// Bounds the bytes held by queued and running write jobs **and** by idle copy buffers kept for
/// reuse ([`BufferPool`](super::BufferPool)): both are memory opdump holds, so both count.
///
/// [`acquire`](Budget::acquire) blocks while admitting `n` more bytes would exceed the limit;
/// idle buffers are freed first (as many as needed). One job larger than the whole budget is
/// still admitted when nothing else is in flight, so an oversized tensor is written (alone)
/// instead of deadlocking.
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
    /// Idle buffers by capacity, and their total capacity.
    idle: BTreeMap<usize, Vec<CopyBuf>>,
    idle_bytes: usize,
}

impl State {
    /// Removes an idle buffer of capacity `cap` (which must be there).
    fn pop_idle(&mut self, cap: usize) -> Option<CopyBuf> {
        let list = self.idle.get_mut(&cap)?;
        let b = list.pop();
        if list.is_empty() {
            self.idle.remove(&cap);
        }
        self.idle_bytes -= cap;
        b
    }

    /// Takes idle buffers, largest first, until `n` more bytes fit in `limit` or none is
    /// left; returns them to be freed outside the lock.
    fn make_room(&mut self, n: usize, limit: usize, out: &mut Vec<CopyBuf>) {
        while self.used + self.idle_bytes + n > limit {
            let Some(&cap) = self.idle.keys().next_back() else {
                return;
            };
            out.extend(self.pop_idle(cap));
        }
    }

    fn fits(&self, n: usize, limit: usize) -> bool {
        self.used + self.idle_bytes + n <= limit
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
        let mut freed = Vec::new();
        let st = self.admit(n, 0, &mut freed, |_| None);
        drop(st);
        drop(freed);
    }

    /// The waiting loop of [`acquire`](Self::acquire) and [`take_buffer`](Self::take_buffer):
    /// `reuse` may take an idle buffer instead (then its capacity plus `reuse_extra` is
    /// charged instead of `n`).
    fn admit(
        &self,
        n: usize,
        reuse_extra: usize,
        freed: &mut Vec<CopyBuf>,
        mut reuse: impl FnMut(&mut State) -> Option<CopyBuf>,
    ) -> (MutexGuard<'_, State>, Option<CopyBuf>) {
        let mut st = self.lock();
        let reused = loop {
            if let Some(b) = reuse(&mut st) {
                break Some(b);
            }
            st.make_room(n, self.limit, freed);
            if st.fits(n, self.limit) || st.used == 0 {
                break None; // fits, or oversized and alone
            }
            st = self.freed.wait(st).unwrap_or_else(PoisonError::into_inner);
        };
        st.used += reused.as_ref().map_or(n, |b| b.capacity() + reuse_extra);
        self.peak
            .fetch_max(st.used + st.idle_bytes, Ordering::Relaxed);
        (st, reused)
    }

    /// A buffer with room for `len` bytes, and the bytes charged for it (its capacity plus
    /// `overhead`), waiting while the budget is full: the smallest idle buffer that fits and is
    /// at most about twice `len` (a small tensor never takes a large buffer), or a new one once
    /// its bytes are admitted (idle buffers that do not fit are freed to make room). The charge
    /// is returned with [`release`](Self::release) and the buffer with
    /// [`keep_idle`](Self::keep_idle).
    pub(crate) fn take_buffer(&self, len: usize, overhead: usize) -> (CopyBuf, usize) {
        let most = len.saturating_mul(2).max(len.saturating_add(4096));
        let mut freed = Vec::new();
        let (st, reused) = self.admit(len.saturating_add(overhead), overhead, &mut freed, |st| {
            // Reusing an idle buffer moves its bytes from idle to used: only `overhead` more.
            let cap = *st.idle.range(len..=most).next()?.0;
            (st.used + st.idle_bytes + overhead <= self.limit || st.used == 0)
                .then(|| st.pop_idle(cap))
                .flatten()
        });
        drop(st);
        drop(freed);
        match reused {
            Some(mut b) => {
                b.clear();
                let cost = b.capacity() + overhead;
                (b, cost)
            }
            None => {
                let b = CopyBuf::with_capacity(len);
                let extra = b.capacity() - len;
                if extra > 0 {
                    // The allocator gave more than asked: charge what is held.
                    let mut st = self.lock();
                    st.used += extra;
                }
                (b, len.saturating_add(overhead) + extra)
            }
        }
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

    /// Keeps `buf` idle for reuse when that fits in the budget, otherwise frees it. (The job
    /// that held it still holds its charge until the writer releases it, so the check is
    /// conservative.) Reusing buffers instead of freeing and allocating them again also keeps
    /// the allocator from fragmenting its heap, which would hold memory the budget cannot see.
    pub(crate) fn keep_idle(&self, buf: CopyBuf) {
        let mut st = self.lock();
        let cap = buf.capacity();
        if cap == 0 || !st.fits(cap, self.limit) {
            drop(st);
            drop(buf);
            return;
        }
        st.idle_bytes += cap;
        st.idle.entry(cap).or_default().push(buf);
        self.freed.notify_all();
    }

    /// Frees every idle buffer.
    pub(crate) fn clear_idle(&self) {
        let freed = {
            let mut st = self.lock();
            st.idle_bytes = 0;
            std::mem::take(&mut st.idle)
        };
        drop(freed);
    }
}

/// Releases `cost` bytes of a [`Budget`] when dropped, whatever happens to the job that held
/// them (a panic included): a writer job can never leave [`Budget::wait_idle`] waiting forever.
#[derive(Debug)]
pub(crate) struct Admitted<'b> {
    pub(crate) budget: &'b Budget,
    pub(crate) cost: usize,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.budget.release(self.cost);
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
        const K: usize = 1 << 10;
        let b = Budget::new(100 * K);
        let (buf, cost) = b.take_buffer(40 * K, 0);
        assert_eq!((buf.capacity(), cost, b.in_use()), (40 * K, 40 * K, 40 * K));
        b.keep_idle(buf);
        b.release(cost);
        assert_eq!((b.in_use(), b.idle_bytes()), (0, 40 * K));
        // A request it fits takes it: its bytes move from idle to used.
        let (buf, cost) = b.take_buffer(30 * K, 100);
        assert_eq!((buf.capacity(), cost), (40 * K, 40 * K + 100));
        assert_eq!((b.in_use(), b.idle_bytes()), (40 * K + 100, 0));
        b.keep_idle(buf);
        b.release(cost);
        // A small request never takes a much larger buffer; 40 KiB idle + 70 KiB would pass
        // 100 KiB, so the idle buffer is freed rather than waited for.
        b.acquire(70 * K);
        assert_eq!((b.in_use(), b.idle_bytes()), (70 * K, 0));
        // A buffer that does not fit next to the jobs is not kept.
        b.keep_idle(CopyBuf::with_capacity(40 * K));
        assert_eq!(b.idle_bytes(), 0);
        b.keep_idle(CopyBuf::with_capacity(20 * K));
        assert_eq!(b.idle_bytes(), 20 * K);
        let (small, cost) = b.take_buffer(K, 0);
        assert_eq!(small.capacity(), K, "not the 20 KiB buffer");
        assert_eq!(b.idle_bytes(), 20 * K);
        b.release(cost);
        assert!(b.peak() <= 100 * K, "{}", b.peak());
        b.release(70 * K);
        b.clear_idle();
        assert_eq!((b.in_use(), b.idle_bytes()), (0, 0));
    }

    #[test]
    fn a_waiting_taker_is_woken_and_the_budget_holds() {
        let b = Arc::new(Budget::new(100));
        let (buf, cost) = b.take_buffer(90, 0);
        let b2 = Arc::clone(&b);
        let t = thread::spawn(move || b2.take_buffer(80, 0)); // must wait
        thread::sleep(Duration::from_millis(50));
        b.keep_idle(buf); // 90 + 90 > 100: not kept while the job is still charged
        b.release(cost);
        let (got, cost) = t.join().unwrap();
        assert!(got.capacity() >= 80);
        assert_eq!(b.in_use(), cost);
        assert!(b.peak() <= 100);
    }

    #[test]
    fn admitted_bytes_are_released_even_when_the_job_panics() {
        let b = Budget::new(100);
        b.acquire(40);
        let r = std::panic::catch_unwind(|| {
            let _held = Admitted {
                budget: &b,
                cost: 40,
            };
            panic!("a job that dies");
        });
        assert!(r.is_err());
        assert_eq!(b.in_use(), 0);
        b.wait_idle(); // returns at once
    }
}
