//! [`RowSink`]: the part of a Dumper that appends lines to tables — `statistic.csv` rows
//! batched per step ([`RowBatch`]), the tables' header, and the one-line appends of
//! `mapping.csv` and the global execution order — through one [`CsvAppender`], and counts the
//! rows that reached their files.

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use super::tree::OutputTree;
use crate::writer::{
    CsvAppender, Deferred, DeferredRow, DigestRow, ErrorLog, FILE_MODE, RowBatch,
    write_bytes_atomic,
};
use dump_stats::{CategorySet, TensorId};

/// The tables of one Dumper. Failures go to the writer's error log (with the number of rows
/// lost); rows are counted once they are in their file, never before.
pub(crate) struct RowSink {
    csv: CsvAppender,
    /// Statistic rows waiting for the end of their step (one append per file per step).
    batch: RowBatch,
    /// The statistic table's header (the layout's, for the plan's categories).
    header: String,
    /// The plan's categories (what a deferred row is formatted with).
    categories: CategorySet,
    /// Rows in their files (statistic rows, and msprobe's tensor objects in dump.json).
    written: AtomicU64,
    errors: Arc<ErrorLog>,
}

impl RowSink {
    /// Tables headed by `header`; failures recorded in `errors`.
    pub(crate) fn new(header: String, categories: CategorySet, errors: Arc<ErrorLog>) -> Self {
        RowSink {
            csv: CsvAppender::new(),
            batch: RowBatch::default(),
            header,
            categories,
            written: AtomicU64::new(0),
            errors,
        }
    }

    /// Queues the statistic row that `write` formats straight into the table's pending text
    /// (see [`RowBatch::push_with`]: whole or not at all); flushes when the batch has grown
    /// large, as [`push`](Self::push). `write` returns `Ok(false)` for a tensor with no row.
    pub(crate) fn push_with<E>(
        &self,
        tree: &OutputTree,
        path: &Path,
        write: impl FnOnce(&mut String) -> Result<bool, E>,
    ) -> Result<(), E> {
        if self.batch.push_with(path, write)? == Some(true) {
            self.flush(tree, false);
        }
        Ok(())
    }

    /// Queues a statistic row whose values a device is still computing, in its place.
    pub(crate) fn push_deferred(&self, tree: &OutputTree, path: &Path, row: DeferredRow) {
        self.push_later(tree, path, Deferred::Device(row));
    }

    /// Queues a statistic row whose digests a writer thread is computing, in its place.
    pub(crate) fn push_digests(&self, tree: &OutputTree, path: &Path, row: DigestRow) {
        self.push_later(tree, path, Deferred::Digests(row));
    }

    fn push_later(&self, tree: &OutputTree, path: &Path, row: Deferred) {
        if self.batch.push_deferred(path, row) {
            self.flush(tree, false);
        }
    }

    /// Appends every pending statistic row to its file (one write per file) and starts a new
    /// directory-check epoch of `tree`. Deferred rows wait for their device here and are
    /// formatted by `tree`'s layout. Rows waiting for their digests are waited for with
    /// `wait`; without it a file with such a row stays pending for a later flush (see
    /// [`RowBatch::flush`]). Failures go to the error log with the rows lost.
    pub(crate) fn flush(&self, tree: &OutputTree, wait: bool) {
        if !wait && self.batch.is_empty() {
            tree.next_epoch(); // a new epoch all the same: once per step
            return;
        }
        let layout = tree.layout();
        let mut resolve = |path: &Path, row: Deferred| -> Option<String> {
            let row = match row {
                Deferred::Device(row) => row,
                Deferred::Digests(row) => return self.digest_row(layout, path, row),
            };
            let failed = |e: String| self.row_lost(path, "device statistics", &row.id, e);
            let stats = match row.pending.wait() {
                Ok(Some(s)) => s,
                Ok(None) => return None,
                Err(e) => {
                    failed(e.to_string());
                    return None;
                }
            };
            let host;
            let values = match &stats {
                dump_stats::DeviceStatistics::Host(s) => {
                    host = dump_stats::TensorStats {
                        summary: Some(*s),
                        md5: None,
                        sha1: None,
                    };
                    crate::layout::RowValues::Host(&host)
                }
                dump_stats::DeviceStatistics::Device(d) => crate::layout::RowValues::Device(d),
            };
            let t = crate::layout::RowTensor {
                id: row.id.as_str(),
                dtype: row.dtype,
                shape: &row.shape,
                data_size: row.data_size,
                crc32: None,
                xor64: None,
            };
            match layout.stat_row(t, &self.categories, values) {
                Ok(r) => r,
                Err(e) => {
                    failed(e.to_string());
                    None
                }
            }
        };
        let done = self
            .batch
            .flush(&self.csv, &self.header, FILE_MODE, wait, &mut resolve);
        self.count(done.rows);
        for (path, e, lost) in done.failed {
            let e = std::io::Error::new(
                e.kind(),
                format!(
                    "{e} ({lost} statistic row{} lost)",
                    if lost == 1 { "" } else { "s" }
                ),
            );
            self.errors.record(path, e);
        }
        tree.next_epoch();
    }

    /// Records that the row of tensor `id` in the table at `path` is lost because its `what`
    /// (device statistics, digests) failed with `e`.
    fn row_lost(&self, path: &Path, what: &str, id: &TensorId<String>, e: String) {
        self.errors.record(
            path.to_owned(),
            std::io::Error::other(format!(
                "{what} of {} {}: {e} (1 statistic row lost)",
                id.op_name,
                id.io_slot()
            )),
        );
    }

    /// Formats a row whose digests were computed on a writer thread (waiting for them); `None`
    /// when they could not be (recorded, with the row lost) or the tensor gets no row.
    fn digest_row(
        &self,
        layout: &dyn crate::layout::OutputLayout,
        path: &Path,
        row: DigestRow,
    ) -> Option<String> {
        let failed = |e: String| self.row_lost(path, "digests", &row.id, e);
        let d = match row.slot.wait() {
            Ok(d) => d,
            Err(e) => {
                failed(e);
                return None;
            }
        };
        let stats = dump_stats::TensorStats {
            md5: d.md5,
            sha1: d.sha1,
            ..row.stats
        };
        let t = crate::layout::RowTensor {
            id: row.id.as_str(),
            dtype: row.dtype,
            shape: &row.shape,
            data_size: row.data_size,
            crc32: None,
            xor64: None,
        };
        match layout.stat_row(t, &self.categories, crate::layout::RowValues::Host(&stats)) {
            Ok(r) => r,
            Err(e) => {
                failed(e.to_string());
                None
            }
        }
    }

    /// Appends `line` (ending in `\n`) to the headerless table at `path` (`mapping.csv`, the
    /// global execution order); a failure is recorded.
    pub(crate) fn append_line(&self, path: &Path, line: &str) {
        if let Err(e) = self.csv.append(path, "", line, FILE_MODE) {
            self.errors.record(path.to_owned(), e);
        }
    }

    /// Writes `rows` (whole lines) into the statistic table at `path` at once: appended when
    /// the table exists, else a new table with its header through a temporary name. Counted
    /// when written; a failure is recorded.
    pub(crate) fn write_table(&self, path: &Path, rows: &str) {
        let n = rows.lines().count() as u64;
        let done = if path.exists() {
            self.csv.append(path, &self.header, rows, FILE_MODE)
        } else {
            write_bytes_atomic(path, FILE_MODE, (self.header.clone() + rows).as_bytes())
        };
        match done {
            Ok(()) => self.count(n),
            Err(e) => self.errors.record(path.to_owned(), e),
        }
    }

    /// Counts `n` rows that reached their file by another way (msprobe's dump.json).
    pub(crate) fn count(&self, n: u64) {
        self.written.fetch_add(n, Ordering::Relaxed);
    }

    /// Rows in their files so far.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Closes every open table (at the Dumper's close, after the last flush).
    pub(crate) fn close(&self) {
        self.csv.close_all();
    }
}
