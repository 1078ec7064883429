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
//!
//! A row can also wait for its values: a device that computes statistics asynchronously (a
//! GPU stream) leaves a [`DeferredRow`] in the row's place, formatted at the flush by the
//! caller's resolver, so the file's rows keep the order the tensors were dumped in. So does a
//! row whose digests a writer thread is computing ([`DigestRow`]): a flush that does not wait
//! ([`RowBatch::flush`] with `wait: false`, at a step's end) leaves a file whose rows are not
//! all ready pending, whole, for a later flush; `Dumper::flush` and `Dumper::close` wait.

use std::{
    io,
    path::{Path, PathBuf},
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
};

use dump_core::DType;
use dump_stats::{PendingStatistics, TensorId, TensorStats};

use super::{CsvAppender, digest::DigestSlot};

/// Bytes a deferred row is counted as until it is formatted (a typical row).
const DEFERRED_ROW_BYTES: usize = 160;

/// A statistics row whose values a device is still computing.
pub(crate) struct DeferredRow {
    /// The tensor's identity (owned: the kernel is gone when the row is formatted).
    pub(crate) id: TensorId<String>,
    /// Element type.
    pub(crate) dtype: DType,
    /// Dimensions.
    pub(crate) shape: Vec<usize>,
    /// The `Data Size` column.
    pub(crate) data_size: u64,
    /// The statistics, queued on the device.
    pub(crate) pending: Box<dyn PendingStatistics>,
}

impl std::fmt::Debug for DeferredRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredRow")
            .field("id", &self.id)
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

/// A host statistics row whose digests (MD5, SHA-1) a writer thread is computing: everything
/// else was computed when the tensor was dumped.
#[derive(Debug)]
pub(crate) struct DigestRow {
    /// The tensor's identity (owned: the kernel is gone when the row is formatted).
    pub(crate) id: TensorId<String>,
    /// Element type.
    pub(crate) dtype: DType,
    /// Dimensions.
    pub(crate) shape: Vec<usize>,
    /// The `Data Size` column.
    pub(crate) data_size: u64,
    /// The statistics, digests still `None`.
    pub(crate) stats: TensorStats,
    /// Where the digests arrive.
    pub(crate) slot: std::sync::Arc<DigestSlot>,
}

/// A row formatted at the flush.
#[derive(Debug)]
pub(crate) enum Deferred {
    /// Statistics a device is computing (waited for at any flush).
    Device(DeferredRow),
    /// Digests a writer thread is computing.
    Digests(DigestRow),
}

impl Deferred {
    /// `true` when formatting it now would not wait.
    fn ready(&self) -> bool {
        match self {
            Deferred::Device(_) => true,
            Deferred::Digests(d) => d.slot.ready(),
        }
    }
}

impl From<DeferredRow> for Deferred {
    fn from(r: DeferredRow) -> Self {
        Deferred::Device(r)
    }
}

/// Emptied texts [`RowBatch`] keeps for reuse.
const SPARE_TEXTS: usize = 8;

/// Pending bytes that make a push write the batch out at once, whatever the step.
pub(crate) const BATCH_BYTES: usize = 256 * 1024;

/// One file's pending rows.
#[derive(Debug)]
struct Pending {
    path: PathBuf,
    text: String,
    rows: u64,
    /// Rows still computing, with the byte offset in `text` where each belongs.
    deferred: Vec<(usize, Deferred)>,
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
    /// Emptied texts of flushed files, kept for the next ones (a step's text grows to tens of
    /// KiB; without this every step would grow a new one from nothing, copying it each time).
    spare: Mutex<Vec<String>>,
    /// Held while a batch is taken and written, so two flushes never reorder rows of a file.
    writing: Mutex<()>,
    /// Whether `pending` holds a file (written under its lock): a flush that need not wait
    /// finds nothing to do from this one load, without a lock (a step that dumped nothing).
    any: AtomicBool,
}

impl RowBatch {
    /// Whether no row is pending: a flush that does not wait has nothing to do (one load,
    /// no lock).
    pub(crate) fn is_empty(&self) -> bool {
        !self.any.load(Ordering::Acquire)
    }

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
                let text = self
                    .spare
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .pop()
                    .unwrap_or_default();
                files.push(Pending {
                    path: path.to_owned(),
                    text,
                    rows: 0,
                    deferred: Vec::new(),
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
            self.any.store(true, Ordering::Release);
            return Ok(Some(*bytes >= BATCH_BYTES));
        }
        p.text.truncate(before);
        if p.rows == 0 {
            // Just added for this row: a file with no rows must not be created at the flush.
            files.remove(i);
        }
        wrote.map(|_| None)
    }

    /// Queues a row whose values are still being computed, in its place among `path`'s
    /// rows; like [`push`](Self::push), `true` asks for a flush.
    pub(crate) fn push_deferred(&self, path: &Path, row: impl Into<Deferred>) -> bool {
        let row = row.into();
        let mut g = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let (files, bytes) = &mut *g;
        match files.iter_mut().rev().find(|p| p.path == path) {
            Some(p) => {
                p.deferred.push((p.text.len(), row));
                p.rows += 1;
            }
            None => files.push(Pending {
                path: path.to_owned(),
                text: String::new(),
                rows: 1,
                deferred: vec![(0, row)],
            }),
        }
        *bytes += DEFERRED_ROW_BYTES;
        self.any.store(true, Ordering::Release);
        *bytes >= BATCH_BYTES
    }

    /// Writes every pending row: one append per file, through `csv` (a file it creates gets
    /// `header` first and mode `mode`). Deferred rows are formatted first by `resolve`, in
    /// order (`None`: the row is dropped; the resolver reports why).
    ///
    /// Without `wait`, a file with a [`DigestRow`] whose digests are not in yet stays pending,
    /// whole, ahead of any row pushed meanwhile: never waited for here, since the tensors it
    /// waits for may not be queued yet (a flush asked by [`push_with`](Self::push_with)'s
    /// byte threshold). What is held that way is bounded by the writer's budget (the
    /// tensors queued for hashing). With `wait` every row is written: the caller has queued
    /// every tensor gathered for hashing first.
    pub(crate) fn flush(
        &self,
        csv: &CsvAppender,
        header: &str,
        mode: u32,
        wait: bool,
        resolve: &mut dyn FnMut(&Path, Deferred) -> Option<String>,
    ) -> Flushed {
        if !wait && self.is_empty() {
            // Nothing pending. (A flush that waits takes the locks: it returns only once a
            // flush running on another thread has written what it took.)
            return Flushed::default();
        }
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        let files = {
            let mut g = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            g.1 = 0;
            self.any.store(false, Ordering::Release);
            std::mem::take(&mut g.0)
        };
        let mut done = Flushed::default();
        let mut kept = Vec::new();
        for mut p in files {
            if !wait && p.deferred.iter().any(|(_, d)| !d.ready()) {
                kept.push(p);
                continue;
            }
            if !p.deferred.is_empty() {
                let mut text =
                    String::with_capacity(p.text.len() + DEFERRED_ROW_BYTES * p.deferred.len());
                let mut at = 0;
                for (offset, row) in std::mem::take(&mut p.deferred) {
                    text.push_str(&p.text[at..offset]);
                    at = offset;
                    match resolve(&p.path, row) {
                        Some(r) => text.push_str(&r),
                        None => p.rows -= 1,
                    }
                }
                text.push_str(&p.text[at..]);
                p.text = text;
            }
            if p.rows == 0 {
                continue;
            }
            match csv.append(&p.path, header, &p.text, mode) {
                Ok(()) => done.rows += p.rows,
                Err(e) => done.failed.push((p.path, e, p.rows)),
            }
            let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
            if spare.len() < SPARE_TEXTS && p.text.capacity() <= 2 * BATCH_BYTES {
                p.text.clear();
                spare.push(p.text);
            }
        }
        if !kept.is_empty() {
            self.put_back(kept);
        }
        done
    }

    /// Returns files a flush left pending, each ahead of the rows pushed for it meanwhile.
    fn put_back(&self, kept: Vec<Pending>) {
        let mut g = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        self.any.store(true, Ordering::Release);
        let files = &mut g.0;
        for mut old in kept {
            match files.iter().position(|p| p.path == old.path) {
                Some(i) => {
                    let newer = std::mem::replace(
                        &mut files[i],
                        Pending {
                            path: PathBuf::new(),
                            text: String::new(),
                            rows: 0,
                            deferred: Vec::new(),
                        },
                    );
                    let shift = old.text.len();
                    old.text.push_str(&newer.text);
                    old.rows += newer.rows;
                    old.deferred.extend(
                        newer
                            .deferred
                            .into_iter()
                            .map(|(offset, row)| (offset + shift, row)),
                    );
                    files[i] = old;
                }
                None => files.insert(0, old),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn never(_: &Path, _: Deferred) -> Option<String> {
        unreachable!("no deferred rows here")
    }

    struct Ready(Option<f64>);
    impl PendingStatistics for Ready {
        fn wait(
            self: Box<Self>,
        ) -> Result<Option<dump_stats::DeviceStatistics>, dump_stats::DeviceError> {
            match self.0 {
                Some(v) => {
                    let mut s = dump_core::Summary::EMPTY;
                    s.max = v;
                    Ok(Some(dump_stats::DeviceStatistics::Host(s)))
                }
                None => Err("the device failed".into()),
            }
        }
    }

    fn deferred(max: Option<f64>, name: &str) -> DeferredRow {
        DeferredRow {
            id: TensorId {
                op_type: "MatMul".into(),
                op_name: name.into(),
                ..TensorId::default()
            },
            dtype: DType::Float32,
            shape: vec![2],
            data_size: 8,
            pending: Box::new(Ready(max)),
        }
    }

    #[test]
    fn deferred_rows_are_resolved_in_their_places_at_the_flush() {
        let d = tmp("deferred");
        let (a, b) = (d.join("a.csv"), d.join("b.csv"));
        let (csv, batch) = (CsvAppender::new(), RowBatch::default());
        assert!(!batch.push_deferred(&a, deferred(Some(1.0), "first")));
        batch.push(&a, "host1\n");
        batch.push_deferred(&a, deferred(None, "broken"));
        batch.push_deferred(&a, deferred(Some(3.0), "third"));
        batch.push(&a, "host2\n");
        batch.push_deferred(&b, deferred(None, "only"));
        let mut resolved = Vec::new();
        let f = batch.flush(&csv, "h\n", 0o600, true, &mut |path, row| {
            let Deferred::Device(row) = row else {
                unreachable!("device rows only")
            };
            resolved.push((path.to_owned(), row.id.op_name.clone()));
            match row.pending.wait() {
                Ok(Some(dump_stats::DeviceStatistics::Host(s))) => {
                    Some(format!("{}={}\n", row.id.op_name, s.max))
                }
                _ => None,
            }
        });
        assert_eq!(
            resolved.iter().map(|r| r.1.as_str()).collect::<Vec<_>>(),
            ["first", "broken", "third", "only"],
            "resolved in push order"
        );
        assert_eq!(f.rows, 4, "two host rows and two resolved ones");
        assert_eq!(
            fs::read_to_string(&a).unwrap(),
            "h\nfirst=1\nhost1\nthird=3\nhost2\n"
        );
        assert!(!b.exists(), "a file whose only row failed is not created");
        fs::remove_dir_all(&d).unwrap();
    }

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
        let f = batch.flush(&csv, "h\n", 0o600, true, &mut never);
        assert_eq!(f.rows, 10);
        assert!(f.failed.is_empty());
        assert_eq!(fs::read_to_string(&a).unwrap(), "h\na0\na1\na2\na3\na4\n");
        assert_eq!(fs::read_to_string(&b).unwrap(), "h\nb0\nb1\nb2\nb3\nb4\n");
        batch.push(&a, "a5\n");
        assert_eq!(batch.flush(&csv, "h\n", 0o600, true, &mut never).rows, 1);
        assert_eq!(
            batch.flush(&csv, "h\n", 0o600, true, &mut never).rows,
            0,
            "a second flush has nothing"
        );
        assert!(fs::read_to_string(&a).unwrap().ends_with("a4\na5\n"));
        fs::remove_dir_all(&d).unwrap();
    }

    /// The flush at a step's end (it does not wait) writes whatever was queued since the
    /// last one, host rows and deferred ones alike, and then has nothing left.
    #[test]
    fn a_flush_that_does_not_wait_writes_every_row_queued_since_the_last() {
        let d = tmp("nowait");
        let (a, b) = (d.join("a.csv"), d.join("b.csv"));
        let (csv, batch) = (CsvAppender::new(), RowBatch::default());
        let mut device = |_: &Path, row: Deferred| {
            let Deferred::Device(row) = row else {
                unreachable!("device rows only")
            };
            Some(format!("{}\n", row.id.op_name))
        };
        assert_eq!(batch.flush(&csv, "h\n", 0o600, false, &mut never).rows, 0);
        batch.push(&a, "a0\n");
        assert_eq!(batch.flush(&csv, "h\n", 0o600, false, &mut never).rows, 1);
        assert_eq!(batch.flush(&csv, "h\n", 0o600, false, &mut never).rows, 0);
        batch.push_deferred(&b, deferred(Some(1.0), "dev"));
        assert_eq!(batch.flush(&csv, "h\n", 0o600, false, &mut device).rows, 1);
        assert_eq!(batch.flush(&csv, "h\n", 0o600, false, &mut never).rows, 0);
        // A row the writer refused ("no row") leaves nothing to flush.
        let none = batch.push_with(&a, |t| {
            t.push_str("junk\n");
            Ok::<_, ()>(false)
        });
        assert_eq!(none, Ok(None));
        assert_eq!(batch.flush(&csv, "h\n", 0o600, false, &mut never).rows, 0);
        assert_eq!(fs::read_to_string(&a).unwrap(), "h\na0\n");
        assert_eq!(fs::read_to_string(&b).unwrap(), "h\ndev\n");
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
        let f = batch.flush(&csv, "h\n", 0o600, true, &mut never);
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
        let f = batch.flush(&csv, "h\n", 0o600, true, &mut never);
        assert_eq!(f.rows, 1);
        assert_eq!(f.failed.len(), 1);
        assert_eq!(
            (f.failed[0].0.as_path(), f.failed[0].2),
            (gone.as_path(), 2)
        );
        assert_eq!(fs::read_to_string(d.join("ok.csv")).unwrap(), "h\nr3\n");
        fs::remove_dir_all(&d).unwrap();
    }

    fn digest_row(name: &str) -> (DigestRow, crate::writer::DigestPromise) {
        let (slot, promise) = DigestSlot::new();
        let row = DigestRow {
            id: TensorId {
                op_type: "MatMul".into(),
                op_name: name.into(),
                ..TensorId::default()
            },
            dtype: DType::Float32,
            shape: vec![2],
            data_size: 8,
            stats: TensorStats {
                summary: None,
                md5: None,
                sha1: None,
            },
            slot,
        };
        (row, promise)
    }

    /// Formats a digest row as `name=<first md5 byte>`; `None` when its digests failed.
    fn by_digest(_: &Path, r: Deferred) -> Option<String> {
        let Deferred::Digests(r) = r else {
            unreachable!("digest rows only")
        };
        let d = r.slot.wait().ok()?;
        Some(format!("{}={}\n", r.id.op_name, d.md5.unwrap()[0]))
    }

    fn md5_of(byte: u8) -> Result<crate::writer::Digests, String> {
        Ok(crate::writer::Digests {
            md5: Some([byte; 16]),
            sha1: None,
        })
    }

    #[test]
    fn a_flush_that_does_not_wait_keeps_a_file_with_digests_pending_whole_and_in_order() {
        let d = tmp("digests");
        let (a, b) = (d.join("a.csv"), d.join("b.csv"));
        let (csv, batch) = (CsvAppender::new(), RowBatch::default());
        batch.push(&a, "a0\n");
        let (x, px) = digest_row("x");
        batch.push_deferred(&a, Deferred::Digests(x));
        batch.push(&a, "a2\n");
        batch.push(&b, "b0\n");
        let f = batch.flush(&csv, "h\n", 0o600, false, &mut by_digest);
        assert_eq!(f.rows, 1, "b's row only");
        assert!(
            !a.exists(),
            "a waits for x's digests, all of its rows with it"
        );
        // A row pushed to a after the flush left it pending goes after a's kept rows.
        batch.push(&a, "a3\n");
        px.fulfil(md5_of(9));
        let f = batch.flush(&csv, "h\n", 0o600, false, &mut by_digest);
        assert_eq!(f.rows, 4);
        assert_eq!(fs::read_to_string(&a).unwrap(), "h\na0\nx=9\na2\na3\n");
        assert_eq!(fs::read_to_string(&b).unwrap(), "h\nb0\n");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn kept_rows_go_back_ahead_of_rows_pushed_during_the_flush() {
        let d = tmp("putback");
        let a = d.join("a.csv");
        let (csv, batch) = (CsvAppender::new(), RowBatch::default());
        let (x, px) = digest_row("x");
        batch.push(&a, "old0\n");
        batch.push_deferred(&a, Deferred::Digests(x));
        // What a flush takes and then keeps, while another thread pushes to the same file.
        let kept = std::mem::take(&mut batch.pending.lock().unwrap().0);
        let (y, py) = digest_row("y");
        batch.push(&a, "new0\n");
        batch.push_deferred(&a, Deferred::Digests(y));
        batch.push(&a, "new2\n");
        batch.put_back(kept);
        px.fulfil(md5_of(1));
        py.fulfil(md5_of(2));
        let f = batch.flush(&csv, "h\n", 0o600, false, &mut by_digest);
        assert_eq!(f.rows, 5);
        assert_eq!(
            fs::read_to_string(&a).unwrap(),
            "h\nold0\nx=1\nnew0\ny=2\nnew2\n"
        );
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_waiting_flush_waits_for_the_digests_and_drops_only_a_failed_row() {
        let d = tmp("digestwait");
        let a = d.join("a.csv");
        let (csv, batch) = (CsvAppender::new(), RowBatch::default());
        let (x, px) = digest_row("x");
        let (y, py) = digest_row("y");
        batch.push_deferred(&a, Deferred::Digests(x));
        batch.push_deferred(&a, Deferred::Digests(y));
        batch.push(&a, "z\n");
        let late = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            px.fulfil(md5_of(5));
            // The job hashing y died: its promise drops unfulfilled.
            drop(py);
        });
        let f = batch.flush(&csv, "h\n", 0o600, true, &mut by_digest);
        late.join().unwrap();
        assert_eq!(
            f.rows, 2,
            "x and z; y's row is lost, not waited for forever"
        );
        assert_eq!(fs::read_to_string(&a).unwrap(), "h\nx=5\nz\n");
        fs::remove_dir_all(&d).unwrap();
    }
}
