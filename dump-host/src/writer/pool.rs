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

use super::Budget;

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

    /// An empty buffer with room for at least `len` bytes: the smallest idle one that fits
    /// (and is at most about twice `len`), or a new one. Charge its capacity to the budget
    /// before filling it.
    pub fn take(&self, len: usize) -> Vec<u8> {
        match self.budget.take_idle(len) {
            Some(mut b) => {
                b.clear();
                b
            }
            None => Vec::with_capacity(len),
        }
    }

    /// Returns a buffer for reuse (freed when the budget has no room for it).
    pub fn give(&self, buf: Vec<u8>) {
        self.budget.keep_idle(buf);
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
        let p = BufferPool::new(Arc::new(Budget::new(1000)));
        let a = p.take(600);
        let b = p.take(300);
        let (ca, cb) = (a.capacity(), b.capacity());
        p.give(a);
        p.give(b); // 600 + 300 <= 1000
        assert_eq!(p.idle_bytes(), ca + cb);
        let c = p.take(200);
        assert_eq!(c.capacity(), cb, "smallest fitting buffer");
        assert!(c.is_empty());
        p.give(p.take(900)); // 600 + 900 > 1000: dropped
        assert_eq!(p.idle_bytes(), ca);
        p.clear();
        assert_eq!(p.idle_bytes(), 0);
    }
}
