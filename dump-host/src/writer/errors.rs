//! I/O errors of background writes: counted, logged once per path, returned later.

use std::{
    io,
    path::PathBuf,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

/// One failed write.
#[derive(Debug)]
pub struct WriteFailure {
    /// The file that could not be written.
    pub path: PathBuf,
    /// What went wrong.
    pub error: io::Error,
}

impl std::fmt::Display for WriteFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)
    }
}

/// Most failures kept in detail; later ones are only counted.
const KEEP: usize = 32;

/// Collects write failures from any thread without ever panicking.
#[derive(Debug, Default)]
pub struct ErrorLog {
    count: AtomicU64,
    kept: Mutex<Vec<WriteFailure>>,
}

impl ErrorLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a failure; the first failure of each kind and path is logged to stderr.
    pub fn record(&self, path: PathBuf, error: io::Error) {
        let n = self.count.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = kept
            .iter()
            .any(|f| f.error.kind() == error.kind() && f.path.parent() == path.parent());
        if !seen {
            eprintln!(
                "[opdump] write failed: {}: {error} (failure #{}; later failures in this directory are counted, not logged)",
                path.display(),
                n + 1
            );
        }
        if kept.len() < KEEP {
            kept.push(WriteFailure { path, error });
        }
    }

    /// Failures so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Takes the kept failures and the total count, resetting both.
    pub fn take(&self) -> (u64, Vec<WriteFailure>) {
        let kept = std::mem::take(&mut *self.kept.lock().unwrap_or_else(PoisonError::into_inner));
        (self.count.swap(0, Ordering::Relaxed), kept)
    }
}
