//! The disk budget: a cap on the bytes of `.npy` files one Dumper writes.
//!
//! MindSpore has none, and tensor-mode dumps of large models reach terabytes (spec/peers.md §6:
//! 41 TB on 8 cards). With a budget, the first file that would pass it and every later one are
//! skipped (their `statistic.csv` rows are still written, so "statistics first, then only the
//! suspicious operators" needs no second run to find them), one warning says so, and
//! [`DumpReport`](super::DumpReport) counts what was skipped. Reservations are atomic, so
//! concurrent producers never overshoot the cap together.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Bytes reserved against an optional limit, and what was refused.
#[derive(Debug, Default)]
pub(crate) struct DiskQuota {
    limit: Option<u64>,
    used: AtomicU64,
    refused_files: AtomicU64,
    refused_bytes: AtomicU64,
    warned: AtomicBool,
}

/// The answer of [`DiskQuota::reserve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reservation {
    /// Write the file.
    Granted,
    /// Skip it; `first` is true for the first refusal of this Dumper (warn once).
    Refused {
        /// This is the first file refused.
        first: bool,
    },
}

impl DiskQuota {
    /// A quota of `limit` bytes (`None`: unlimited).
    pub(crate) fn new(limit: Option<u64>) -> Self {
        DiskQuota {
            limit,
            ..DiskQuota::default()
        }
    }

    /// The limit in bytes, if any.
    pub(crate) fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Reserves `bytes` for one file: granted while the total stays within the limit.
    /// Once one file is refused, every later one is too, even a smaller one that would still
    /// fit: a dump with a hole in the middle is harder to read than one that stops.
    pub(crate) fn reserve(&self, bytes: u64) -> Reservation {
        let Some(limit) = self.limit else {
            self.used.fetch_add(bytes, Ordering::Relaxed);
            return Reservation::Granted;
        };
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let stopped = self.is_stopped();
            let Some(total) = used.checked_add(bytes).filter(|&t| t <= limit && !stopped) else {
                self.refused_files.fetch_add(1, Ordering::Relaxed);
                self.refused_bytes.fetch_add(bytes, Ordering::Relaxed);
                let first = !self.warned.swap(true, Ordering::Relaxed);
                return Reservation::Refused { first };
            };
            match self
                .used
                .compare_exchange_weak(used, total, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Reservation::Granted,
                Err(now) => used = now,
            }
        }
    }

    /// `true` once a file was refused: every later one will be too.
    pub(crate) fn is_stopped(&self) -> bool {
        self.refused_files.load(Ordering::Relaxed) > 0
    }

    /// Files refused so far.
    pub(crate) fn refused_files(&self) -> u64 {
        self.refused_files.load(Ordering::Relaxed)
    }

    /// Bytes of the files refused so far.
    pub(crate) fn refused_bytes(&self) -> u64 {
        self.refused_bytes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn unlimited_grants_everything() {
        let q = DiskQuota::new(None);
        for _ in 0..3 {
            assert_eq!(q.reserve(u64::MAX / 2), Reservation::Granted);
        }
        assert_eq!(q.refused_files(), 0);
    }

    #[test]
    fn the_first_file_over_the_limit_stops_all_later_ones() {
        let q = DiskQuota::new(Some(1000));
        assert_eq!(q.reserve(400), Reservation::Granted);
        assert_eq!(q.reserve(600), Reservation::Granted); // exactly at the limit
        assert!(!q.is_stopped());
        assert_eq!(q.reserve(1), Reservation::Refused { first: true });
        assert!(q.is_stopped());
        assert_eq!(q.reserve(0), Reservation::Refused { first: false });
        assert_eq!((q.refused_files(), q.refused_bytes()), (2, 1));

        let q = DiskQuota::new(Some(1000));
        assert_eq!(q.reserve(900), Reservation::Granted);
        assert_eq!(q.reserve(200), Reservation::Refused { first: true });
        // 50 would fit, but the dump has already stopped: no holes.
        assert_eq!(q.reserve(50), Reservation::Refused { first: false });
        assert_eq!(q.reserve(u64::MAX), Reservation::Refused { first: false });
    }

    #[test]
    fn concurrent_producers_never_overshoot() {
        let q = Arc::new(DiskQuota::new(Some(10_000)));
        let granted: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    let q = Arc::clone(&q);
                    s.spawn(move || {
                        (0..500)
                            .filter(|_| q.reserve(7) == Reservation::Granted)
                            .count() as u64
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert!(granted * 7 <= 10_000, "{granted} files of 7 bytes granted");
        assert!(granted * 7 > 10_000 - 7 * 8, "stopped too early: {granted}");
        assert_eq!(granted + q.refused_files(), 8 * 500);
    }
}
