//! [`OutputTree`]: the part of a Dumper that knows where things go — the plan's output layout
//! (every directory and file name), the directories made so far and the per-tensor timestamps
//! that keep file names unique.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

use dump_core::DType;

use crate::{
    layout::{OutputLayout, TensorId, create_dir_nofollow},
    writer::ErrorLog,
};

/// The output tree of one Dumper: its layout, the directories it made (each with the epoch in
/// which it was last seen to exist) and the last timestamp handed out. Directory failures go
/// to the writer's error log, like every other write failure.
pub(crate) struct OutputTree {
    layout: Box<dyn OutputLayout>,
    /// Directories made, with the epoch in which each was last checked to exist.
    dirs: Mutex<HashMap<PathBuf, u64>>,
    /// Moves at every row flush: a directory is checked once per epoch (once per step).
    epoch: AtomicU64,
    last_ts: AtomicU64,
    errors: Arc<ErrorLog>,
}

impl OutputTree {
    /// The tree of `layout`; failures recorded in `errors`.
    pub(crate) fn new(layout: Box<dyn OutputLayout>, errors: Arc<ErrorLog>) -> Self {
        OutputTree {
            layout,
            dirs: Mutex::new(HashMap::new()),
            epoch: AtomicU64::new(0),
            last_ts: AtomicU64::new(0),
            errors,
        }
    }

    /// The layout every path and name is asked of.
    pub(crate) fn layout(&self) -> &dyn OutputLayout {
        &*self.layout
    }

    /// A per-tensor timestamp in µs since the epoch, strictly increasing within this Dumper so
    /// two tensors never share a name.
    pub(crate) fn timestamp(&self) -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let mut last = self.last_ts.load(Ordering::Relaxed);
        loop {
            let ts = now.max(last + 1);
            match self
                .last_ts
                .compare_exchange_weak(last, ts, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return ts,
                Err(l) => last = l,
            }
        }
    }

    /// The `.npy` file name of tensor `id` (before the long-name mapping).
    pub(crate) fn tensor_file(&self, id: TensorId<&str>, format: &str, dtype: DType) -> String {
        self.layout.tensor_file(id, format, dtype)
    }

    /// The current directory-check epoch.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Starts a new directory-check epoch (at every row flush: once per step).
    pub(crate) fn next_epoch(&self) {
        self.epoch.fetch_add(1, Ordering::Relaxed);
    }

    /// Creates `dir` (0700, with its parents below the dump root, never through a symlink)
    /// the first time; later it checks that it still exists (one `lstat`, once per epoch) and
    /// recreates it if it was deleted mid-run, reporting the loss. Failures are recorded in the
    /// error log and returned.
    pub(crate) fn ensure_dir(&self, dir: &Path) -> Result<(), ()> {
        let epoch = self.epoch.load(Ordering::Relaxed);
        let dirs = || self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let checked = dirs().get(dir).copied();
        match checked {
            Some(e) if e == epoch => return Ok(()),
            Some(_) => match std::fs::symlink_metadata(dir) {
                Ok(m) if m.is_dir() => {
                    dirs().insert(dir.to_owned(), epoch);
                    return Ok(());
                }
                _ => {
                    dirs().remove(dir);
                    self.errors.record(
                        dir.to_owned(),
                        std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "the directory was deleted (or replaced) while the dump was \
                             running; the files written to it before are lost; recreating it",
                        ),
                    );
                }
            },
            None => {}
        }
        match create_dir_nofollow(self.layout.root(), dir) {
            Ok(()) => {
                dirs().insert(dir.to_owned(), epoch);
                Ok(())
            }
            Err(e) => {
                self.errors.record(dir.to_owned(), e);
                Err(())
            }
        }
    }
}
