//! What the writer has put on disk: counted when a file is complete under its final name,
//! never before (a run on a full disk reports 0 files, not the files it tried).

use std::sync::atomic::{AtomicU64, Ordering};

/// Files and bytes written, shared with the write jobs.
#[derive(Debug, Default)]
pub struct Tally {
    files: AtomicU64,
    bytes: AtomicU64,
}

impl Tally {
    /// Counts one file of `bytes` bytes that is now complete under its final name.
    pub fn add(&self, bytes: u64) {
        self.files.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Files counted so far.
    pub fn files(&self) -> u64 {
        self.files.load(Ordering::Relaxed)
    }

    /// Bytes of those files.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}
