//! Recycled copy buffers for background writes.
//!
//! A tensor handed to the Dumper is copied before it is queued (the runtime may reuse its
//! memory as soon as the call returns); tensors of
//! [`WriterConfig::direct_write_bytes`](super::WriterConfig::direct_write_bytes) and more are
//! written directly from the caller's memory instead. Fresh allocations of large buffers cost
//! page faults and zeroing that can exceed the copy itself; reusing the buffers of finished
//! writes avoids them.
//!
//! Idle buffers are charged to the writer's [`Budget`] like queued jobs, so the memory opdump
//! holds for copies (queued, being written, or idle) stays within the budget: idle buffers are
//! freed as soon as a job needs their room, kept only while no producer waits, and a small
//! tensor never takes a buffer more than about twice its size.

use std::sync::Arc;

use super::{Budget, CopyBuf};

/// Idle copy buffers, charged to a writer's budget.
#[derive(Debug)]
pub struct BufferPool {
    budget: Arc<Budget>,
}

impl BufferPool {
    /// A pool whose idle buffers count against `budget`.
    pub fn new(budget: Arc<Budget>) -> Self {
        BufferPool { budget }
    }

    /// An empty buffer with room for at least `len` bytes and the bytes charged to the budget
    /// for it (its capacity plus `overhead`), waiting while the budget is full: the smallest idle
    /// buffer that fits (and is at most about twice `len`), or a new one. Return the charge with
    /// [`Budget::release`] (the writer does, for a submitted job) and the buffer with
    /// [`give`](Self::give).
    pub(crate) fn take(&self, len: usize, overhead: usize) -> (CopyBuf, usize) {
        self.budget.take_buffer(len, overhead)
    }

    /// Returns a buffer for reuse (freed when the budget has no room for it).
    pub(crate) fn give(&self, buf: CopyBuf) {
        self.budget.keep_idle(buf);
    }

    /// Returns `n` bytes of charge to the budget (a copy's charge, once nothing holds it).
    pub(crate) fn release(&self, n: usize) {
        self.budget.release(n);
    }

    /// Bytes held by idle buffers.
    pub fn idle_bytes(&self) -> usize {
        self.budget.idle_bytes()
    }

    /// Frees every idle buffer.
    pub fn clear(&self) {
        self.budget.clear_idle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_the_smallest_fit_and_stays_bounded() {
        let budget = Arc::new(Budget::new(1000));
        let p = BufferPool::new(Arc::clone(&budget));
        let (a, ca) = p.take(600, 0);
        let (b, cb) = p.take(300, 0);
        assert_eq!(budget.in_use(), ca + cb);
        budget.release(ca + cb);
        p.give(a);
        p.give(b); // 600 + 300 <= 1000
        assert_eq!(p.idle_bytes(), ca + cb);
        let (c, cc) = p.take(200, 0);
        assert_eq!(
            c.capacity(),
            cb,
            "smallest fitting buffer (at most twice the request)"
        );
        assert!(c.is_empty());
        budget.release(cc);
        p.give(c);
        let (d, cd) = p.take(900, 0); // frees idle buffers to make room
        assert!(budget.peak() <= 1000);
        budget.release(cd);
        p.give(d);
        assert!(p.idle_bytes() <= 1000);
        p.clear();
        assert_eq!(p.idle_bytes(), 0);
    }
}
