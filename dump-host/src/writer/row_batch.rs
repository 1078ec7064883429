//! Statistic rows batched per file: a step's rows for one `statistic.csv` go out in one
//! `write(2)` instead of one each.
//!
//! A statistic-only dump used to pay a `write` and an `fstat` per row (and the dumper an
//! `lstat` per tensor), which made system time the largest cost of a small model's dumped step
//! and capped `opdump ingest` near 0.1 M rows/s. Rows now wait in memory until the step ends
//! ([`RowBatch::flush`], called by `Step::finish`, a dropped `Step`, `Dumper::flush` and
//! `Dumper::close`) or until [`BATCH_BYTES`] are pending, then each file gets its rows in one
//! append that is all or nothing ([`CsvAppender::append`]).
//!
//! What a crash costs: a process killed mid-step loses that step's pending rows (at most
//! [`BATCH_BYTES`]); every row on disk is still whole, and every earlier step's rows are there.

use std::{
    io,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};

use super::CsvAppender;

/// Pending bytes that make a push write the batch out at once, whatever the step.
pub(crate) const BATCH_BYTES: usize = 256 * 1024;

/// One file's pending rows.
#[derive(Debug)]
struct Pending {
    path: PathBuf,
    text: String,
    rows: u64,
}

/// What one flush wrote and what it could not.
#[derive(Debug, Default)]
pub(crate) struct Flushed {
    /// Rows now in their files.
    pub(crate) rows: u64,
    /// Files whose rows could not be appended: the path, the error and the rows lost.
    pub(crate) failed: Vec<(PathBuf, io::Error, u64)>,
}

/// Rows waiting for their `statistic.csv`, in the order they were pushed.
#[derive(Debug, Default)]
pub(crate) struct RowBatch {
    pending: Mutex<(Vec<Pending>, usize)>,
    /// Held while a batch is taken and written, so two flushes never reorder rows of a file.
    writing: Mutex<()>,
}

impl RowBatch {
    /// Queues `row` (one whole line ending in `\n`) for `path`. Returns `true` when the
    /// pending bytes passed [`BATCH_BYTES`] and the caller should [`flush`](Self::flush).
    #[cfg(test)]
    pub(crate) fn push(&self, path: &Path, row: &str) -> bool {
        let pushed = self.push_with(path, |text| {
            text.push_str(row);
            Ok::<_, std::convert::Infallible>(true)
        });
        matches!(pushed, Ok(Some(true)))
    }

    /// Queues the row that `write` appends to `path`'s pending text (one whole line ending
    /// in `\n`), formatted in place: no `String` per row. `write` returns `Ok(false)` when
    /// the tensor gets no row; on `Ok(false)` or an error whatever it appended is removed, so
    /// a row is queued whole or not at all. Returns `Some(flush)` when a row was queued,
    /// `flush` being `true` when the pending bytes passed [`BATCH_BYTES`] and the caller
    /// should [`flush`](Self::flush); `None` when there was no row.
    pub(crate) fn push_with<E>(
        &self,
        path: &Path,
        write: impl FnOnce(&mut String) -> Result<bool, E>,
    ) -> Result<Option<bool>, E> {
        let mut g = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let (files, bytes) = &mut *g;
        // A step writes to one file, or a few: the last one is nearly always the match.
        let i = match files.iter().rposition(|p| p.path == path) {
            Some(i) => i,
            None => {
                files.push(Pending {
                    path: path.to_owned(),
                    text: String::new(),
                    rows: 0,
                });
                files.len() - 1
            }
        };
        let p = &mut files[i];
        let before = p.text.len();
        let wrote = write(&mut p.text);
        if let Ok(true) = wrote {
            p.rows += 1;
            *bytes += p.text.len() - before;
            return Ok(Some(*bytes >= BATCH_BYTES));
        }
        p.text.truncate(before);
        if p.rows == 0 {
            // Just added for this row: a file with no rows must not be created at the flush.
            files.remove(i);
        }
        wrote.map(|_| None)
    }

    /// Writes every pending row: one append per file, through `csv` (a file it creates gets
    /// `header` first and mode `mode`).
    pub(crate) fn flush(&self, csv: &CsvAppender, header: &str, mode: u32) -> Flushed {
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        let files = {
            let mut g = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            g.1 = 0;
            std::mem::take(&mut g.0)
        };
        let mut done = Flushed::default();
        for p in files {
            match csv.append(&p.path, header, &p.text, mode) {
                Ok(()) => done.rows += p.rows,
                Err(e) => done.failed.push((p.path, e, p.rows)),
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("opdump-rowbatch-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn rows_wait_for_the_flush_and_keep_their_order_per_file() {
        let d = tmp("order");
        let (a, b) = (d.join("a.csv"), d.join("b.csv"));
        let (csv, batch) = (CsvAppender::new(), RowBatch::default());
        for i in 0..5 {
            assert!(!batch.push(&a, &format!("a{i}\n")));
            assert!(!batch.push(&b, &format!("b{i}\n")));
        }
        assert!(!a.exists(), "nothing is written before the flush");
        let f = batch.flush(&csv, "h\n", 0o600);
        assert_eq!(f.rows, 10);
        assert!(f.failed.is_empty());
        assert_eq!(fs::read_to_string(&a).unwrap(), "h\na0\na1\na2\na3\na4\n");
        assert_eq!(fs::read_to_string(&b).unwrap(), "h\nb0\nb1\nb2\nb3\nb4\n");
        batch.push(&a, "a5\n");
        assert_eq!(batch.flush(&csv, "h\n", 0o600).rows, 1);
        assert_eq!(
            batch.flush(&csv, "h\n", 0o600).rows,
            0,
            "a second flush has nothing"
        );
        assert!(fs::read_to_string(&a).unwrap().ends_with("a4\na5\n"));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_byte_threshold_asks_for_a_flush() {
        let (d, batch) = (tmp("threshold"), RowBatch::default());
        let row = "x".repeat(1023) + "\n";
        let n = BATCH_BYTES / row.len();
        for _ in 0..n - 1 {
            assert!(!batch.push(&d.join("s.csv"), &row));
        }
        assert!(
            batch.push(&d.join("s.csv"), &row),
            "the {n}th KiB passes the threshold"
        );
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_row_formatted_in_place_is_queued_whole_or_not_at_all() {
        let d = tmp("inplace");
        let (csv, batch) = (CsvAppender::new(), RowBatch::default());
        let (a, b) = (d.join("a.csv"), d.join("b.csv"));
        let ok = batch.push_with(&a, |t| {
            t.push_str("a0\n");
            Ok::<_, ()>(true)
        });
        assert_eq!(ok, Ok(Some(false)));
        // A writer that fails half-way, or writes and then says "no row", leaves nothing.
        let failed = batch.push_with(&a, |t| {
            t.push_str("half");
            Err::<bool, _>("bad")
        });
        assert_eq!(failed, Err("bad"));
        let none = batch.push_with(&a, |t| {
            t.push_str("junk\n");
            Ok::<_, ()>(false)
        });
        assert_eq!(none, Ok(None));
        // Nor does it leave a file behind for a path that got no row.
        assert_eq!(
            batch.push_with(&b, |t| {
                t.push('b');
                Err::<bool, _>(())
            }),
            Err(())
        );
        batch.push(&a, "a1\n");
        let f = batch.flush(&csv, "h\n", 0o600);
        assert_eq!(f.rows, 2);
        assert_eq!(fs::read_to_string(&a).unwrap(), "h\na0\na1\n");
        assert!(!b.exists(), "a file with no row is not created");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_that_cannot_be_written_loses_its_rows_only() {
        let d = tmp("fail");
        let (csv, batch) = (CsvAppender::new(), RowBatch::default());
        let gone = d.join("no-such-dir").join("s.csv");
        batch.push(&gone, "r1\n");
        batch.push(&gone, "r2\n");
        batch.push(&d.join("ok.csv"), "r3\n");
        let f = batch.flush(&csv, "h\n", 0o600);
        assert_eq!(f.rows, 1);
        assert_eq!(f.failed.len(), 1);
        assert_eq!(
            (f.failed[0].0.as_path(), f.failed[0].2),
            (gone.as_path(), 2)
        );
        assert_eq!(fs::read_to_string(d.join("ok.csv")).unwrap(), "h\nr3\n");
        fs::remove_dir_all(&d).unwrap();
    }
}
