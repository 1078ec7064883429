//! A byte budget: producers wait while too many bytes are in flight (back-pressure).

use std::sync::{
    Condvar, Mutex, PoisonError,
    atomic::{AtomicUsize, Ordering},
};

/// Bounds the bytes held by queued and running write jobs.
///
/// [`acquire`](Budget::acquire) blocks while admitting `n` more bytes would exceed the limit. One
/// job larger than the whole budget is still admitted when nothing else is in flight, so an
/// oversized tensor is written (alone) instead of deadlocking.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    used: Mutex<usize>,
    freed: Condvar,
    peak: AtomicUsize,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Budget {
            limit,
            used: Mutex::new(0),
            freed: Condvar::new(),
            peak: AtomicUsize::new(0),
        }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes currently admitted.
    pub fn in_use(&self) -> usize {
        *self.used.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until `n` bytes fit, then admits them.
    pub fn acquire(&self, n: usize) {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        while *used != 0 && used.saturating_add(n) > self.limit {
            used = self
                .freed
                .wait(used)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *used += n;
        self.peak.fetch_max(*used, Ordering::Relaxed);
    }

    /// The most bytes ever admitted at once (at most the limit, or one oversized job alone).
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Returns `n` admitted bytes.
    pub fn release(&self, n: usize) {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        *used = used.saturating_sub(n);
        self.freed.notify_all();
    }

    /// Waits until nothing is admitted (every job finished).
    pub fn wait_idle(&self) {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        while *used != 0 {
            used = self
                .freed
                .wait(used)
                .unwrap_or_else(PoisonError::into_inner);
        }
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
