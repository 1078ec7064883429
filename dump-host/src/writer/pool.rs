//! Recycled copy buffers for background writes.
//!
//! A tensor handed to the Dumper is copied before it is queued (the runtime may reuse its
//! memory as soon as the call returns); tensors of
//! [`WriterConfig::direct_write_bytes`](super::WriterConfig::direct_write_bytes) and more are
//! written directly from the caller's memory instead. Fresh allocations of large buffers cost
//! page faults and zeroing that can exceed the copy itself; reusing the buffers of finished
//! writes avoids them.
//! The pool keeps at most `limit` bytes of idle buffers, so with the writer's byte budget the
//! memory opdump holds stays bounded (budget in flight + `limit` idle).

use std::sync::{Mutex, PoisonError};

/// Idle buffers, bounded in total capacity.
#[derive(Debug)]
pub struct BufferPool {
    limit: usize,
    idle: Mutex<(usize, Vec<Vec<u8>>)>,
}

impl BufferPool {
    /// A pool keeping at most `limit` bytes of idle buffers.
    pub fn new(limit: usize) -> Self {
        BufferPool {
            limit,
            idle: Mutex::new((0, Vec::new())),
        }
    }

    /// An empty buffer with room for at least `len` bytes: the smallest idle one that fits, or a
    /// new one.
    pub fn take(&self, len: usize) -> Vec<u8> {
        let mut g = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let (held, bufs) = &mut *g;
        let best = bufs
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                let mut b = bufs.swap_remove(i);
                *held -= b.capacity();
                b.clear();
                b
            }
            None => Vec::with_capacity(len),
        }
    }

    /// Returns a buffer for reuse (dropped when the pool is full).
    pub fn give(&self, buf: Vec<u8>) {
        let mut g = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let (held, bufs) = &mut *g;
        if *held + buf.capacity() <= self.limit {
            *held += buf.capacity();
            bufs.push(buf);
        }
    }

    /// Bytes held by idle buffers.
    pub fn idle_bytes(&self) -> usize {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).0
    }

    /// Frees every idle buffer.
    pub fn clear(&self) {
        *self.idle.lock().unwrap_or_else(PoisonError::into_inner) = (0, Vec::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_the_smallest_fit_and_stays_bounded() {
        let p = BufferPool::new(1000);
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
