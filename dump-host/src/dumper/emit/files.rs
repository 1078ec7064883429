//! Where a tensor's outputs go: the per-tensor timestamp, the directory (made once) and the
//! `.npy` file name.

use std::{
    path::Path,
    sync::atomic::Ordering,
    time::{SystemTime, UNIX_EPOCH},
};

use dump_core::DType;

use super::Owner;
use crate::dumper::Shared;

/// Mode bits of every file opdump writes (MindSpore: read-only for the owner).
pub(crate) const FILE_MODE: u32 = 0o400;

impl Shared {
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

    /// Creates `dir` (0700, with its parents below the dump root, never through a symlink)
    /// the first time; later it checks that it still exists (one `lstat`, once per step: the
    /// check's epoch moves with every row flush) and recreates it if it was deleted mid-run,
    /// reporting the loss. Failures are recorded and returned.
    pub(crate) fn ensure_dir(&self, dir: &Path) -> Result<(), ()> {
        let epoch = self.dir_epoch.load(Ordering::Relaxed);
        let checked = self
            .dirs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(dir)
            .copied();
        match checked {
            Some(e) if e == epoch => return Ok(()),
            Some(_) => match std::fs::symlink_metadata(dir) {
                Ok(m) if m.is_dir() => {
                    self.dirs
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(dir.to_owned(), epoch);
                    return Ok(());
                }
                _ => {
                    self.dirs
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(dir);
                    self.writer.errors().record(
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
        match crate::layout::create_dir_nofollow(self.layout.root(), dir) {
            Ok(()) => {
                self.dirs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(dir.to_owned(), epoch);
                Ok(())
            }
            Err(e) => {
                self.writer.errors().record(dir.to_owned(), e);
                Err(())
            }
        }
    }

    /// The `.npy` file name of a tensor (before the long-name mapping).
    pub(super) fn file_name(&self, who: Owner<'_>, format: &str, dtype: DType, ts: u64) -> String {
        self.layout.tensor_file(who.id(ts), format, dtype)
    }
}
