//! [`TensorFiles`]: the part of a Dumper that writes `.npy` files — the bounded background
//! writer, the pool of copy buffers its budget covers, and the disk budget. A file is
//! validated, reserved against the disk budget, named and counted first
//! ([`prepare`](TensorFiles::prepare)), then written ([`write`](TensorFiles::write)): a private
//! copy is queued as is, borrowed bytes are copied into a pooled buffer and queued, or written
//! on the caller's thread when too large to copy.
//!
//! A file whose statistic row needs digests (MD5, SHA-1) can have them computed on the writer
//! threads from the copy the writer holds anyway ([`write_hashed`](TensorFiles::write_hashed)):
//! such files wait in a [`HashBatch`] until [`HASH_BATCH_TENSORS`] are gathered (or half the
//! writer's budget, or the step ends), then one job hashes them together with dump-core's
//! multi-buffer MD5 ([`dump_core::hash::md5_many`], AVX-512/AVX2/portable chosen at run time)
//! and MindSpore's SHA-1 ([`dump_core::hash::ms_sha1_many`]: every tensor's 20480-element
//! slices in the lanes of a multi-buffer SHA-1, SHA-NI for the last few), hands each row its
//! digests, and writes the files.
//!
//! Within a step, a tensor handed as the same memory with the same contents as one gathered
//! before it (an operator's input that is an output dumped earlier, a value several operators
//! read) shares that copy while a queued or gathered tensor still holds it: one copy, and one
//! set of fresh pages on the runtime's thread, instead of one per file. In the README demo,
//! 3.1 of the 4.8 MB a step hands over are memory handed before in the same step.

use std::{
    borrow::Cow,
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, PoisonError, Weak,
        atomic::{AtomicBool, Ordering},
    },
};

use dump_core::DType;
use dump_npy::WriteOptions;
use dump_stats::Hashes;

use super::{
    quota::{DiskQuota, Reservation},
    row_sink::RowSink,
};
use crate::{
    Error,
    diag::{Event, EventSink},
    layout::{NAME_MAX, short_name},
    writer::{
        Budget, BufferPool, CopyBuf, DigestPromise, DigestSlot, Digests, FILE_MODE, WriteFailure,
        Writer, write_atomic,
    },
};

/// Tensors hashed together by one writer job (at most; fewer when their copies reach half
/// the writer's budget, or at the end of a step). Two jobs' worth of a typical step keeps
/// both writer threads busy while filling the 16 lanes of the multi-buffer MD5 well.
pub(crate) const HASH_BATCH_TENSORS: usize = 32;

/// A copy of a tensor's bytes, shared by every tensor the runtime handed as the same memory
/// with the same contents during a step while a file still needs it (an operator's input that is an output dumped
/// before it, a value several operators read): one copy, and one set of fresh pages on the
/// runtime's thread, instead of one per file. When the last holder drops it, a pooled buffer
/// goes back to the pool and its charge to the budget.
struct Held {
    buf: CopyBuf,
    /// Budget charged for the buffer (0 when the job's cost carries it).
    charge: usize,
    /// The buffer came from the pool.
    pooled: bool,
    pool: Arc<BufferPool>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.pooled {
            self.pool
                .give(std::mem::replace(&mut self.buf, CopyBuf::from(Vec::new())));
        }
        self.pool.release(self.charge);
    }
}

/// One tensor waiting for its digests: its bytes, the file it goes to (none for a
/// statistic-only dump), and where its digests go.
struct HashItem {
    bytes: Arc<Held>,
    npy: Option<NpyOut>,
    dtype: DType,
    elems: usize,
    hashes: Hashes,
    promise: DigestPromise,
}

/// Tensors gathered for one hashing job, and the budget their copies hold (admitted, not yet
/// queued).
#[derive(Default)]
struct HashBatch {
    items: Vec<HashItem>,
    /// Budget the batch's job releases when it ends (each item's overhead, and the copies
    /// handed over as private buffers).
    cost: usize,
    /// Budget the gathered items hold, their shared copies' charges included: kept at most
    /// half the budget.
    weight: usize,
    /// This step's copies of the runtime's memory by address and length, while a queued or
    /// gathered tensor still holds them (never kept alive by this map: a copy whose files are
    /// written is gone, and the same memory is copied again).
    recent: HashMap<(usize, usize), Weak<Held>>,
    /// `recent`'s size at which entries of copies no longer held are dropped.
    prune_at: usize,
}

/// `recent` entries kept before the first pruning.
const PRUNE_MIN: usize = 4096;

impl HashBatch {
    /// A copy of `b` for one tensor's job, whose overhead ([`JOB_OVERHEAD`]) is admitted here
    /// too: the live copy of exactly `b`'s memory and contents from earlier in the step, or a
    /// new one from `pool` (waiting while the budget is full). A new copy's charge goes back
    /// with its last holder, the overhead with the tensor's job. `true` with a new copy.
    fn copy_of(&mut self, b: &[u8], pool: &Arc<BufferPool>, budget: &Budget) -> (Arc<Held>, bool) {
        if let Some(h) = self.same_as(b) {
            // No second copy (and no fresh pages for it on the runtime's thread).
            budget.acquire(JOB_OVERHEAD);
            return (h, false);
        }
        let (mut buf, cost) = pool.take(b.len(), JOB_OVERHEAD);
        buf.extend_from_slice(b);
        let h = Arc::new(Held {
            buf,
            charge: cost.saturating_sub(JOB_OVERHEAD),
            pooled: true,
            pool: Arc::clone(pool),
        });
        if !b.is_empty() {
            if self.recent.len() >= self.prune_at {
                // Copies already written are gone: forget them (a step of many tensors).
                self.recent.retain(|_, w| w.strong_count() > 0);
                self.prune_at = (2 * self.recent.len()).max(PRUNE_MIN);
            }
            self.recent
                .insert((b.as_ptr() as usize, b.len()), Arc::downgrade(&h));
        }
        (h, true)
    }

    /// A live copy of exactly `b`'s memory and contents from earlier in the step.
    fn same_as(&mut self, b: &[u8]) -> Option<Arc<Held>> {
        if b.is_empty() {
            return None;
        }
        let key = (b.as_ptr() as usize, b.len());
        let held = self.recent.get(&key)?.upgrade();
        match held {
            // The runtime may have written new values into the same memory since.
            Some(h) if h.buf[..] == *b => Some(h),
            Some(_) => None,
            None => {
                self.recent.remove(&key);
                None
            }
        }
    }
}

/// Budget charged for a queued file beyond its data bytes (header, path, shape).
pub(super) const JOB_OVERHEAD: usize = 256;

/// An `.npy` file named, validated and counted, waiting for its bytes.
pub(crate) struct NpyOut {
    pub(crate) path: PathBuf,
    pub(crate) dtype: DType,
    pub(crate) shape: Vec<usize>,
    pub(crate) opts: WriteOptions,
    /// Bytes of the whole file (counted in the report once it is written).
    pub(crate) file_len: u64,
}

/// The tensor files of one Dumper.
pub(crate) struct TensorFiles {
    writer: Writer,
    pool: Arc<BufferPool>,
    quota: DiskQuota,
    /// How every `.npy` is encoded (the plan's bf16 spelling).
    opts: WriteOptions,
    events: EventSink,
    /// Copies waiting to be hashed together ([`write_hashed`](TensorFiles::write_hashed)).
    hashing: Mutex<HashBatch>,
    /// Whether `hashing` holds a copy (written under its lock): a step that gathered none
    /// ends without taking the lock.
    gathered: AtomicBool,
    /// Whether `hashing` remembers a copy for sharing (written under its lock): cleared at
    /// the step's end.
    remembered: AtomicBool,
}

impl Drop for TensorFiles {
    /// Copies still gathered hold budget that only their job gives back: queued before the
    /// writer closes (which waits for the budget), or a `TensorFiles` dropped without a flush
    /// (a panic on the caller's thread) would wait forever.
    fn drop(&mut self) {
        self.send_hashes();
    }
}

impl TensorFiles {
    /// Files written by `writer`, under a disk budget of `disk_budget` bytes, encoded with
    /// `opts`; the disk budget's warning goes to `events`.
    pub(crate) fn new(
        writer: Writer,
        disk_budget: Option<u64>,
        opts: WriteOptions,
        events: EventSink,
    ) -> Self {
        TensorFiles {
            pool: Arc::new(writer.pool()),
            writer,
            quota: DiskQuota::new(disk_budget),
            opts,
            events,
            hashing: Mutex::default(),
            gathered: AtomicBool::new(false),
            remembered: AtomicBool::new(false),
        }
    }

    /// The background writer (its byte budget, error log and tallies).
    pub(crate) fn writer(&self) -> &Writer {
        &self.writer
    }

    /// The pool of copy buffers.
    #[cfg(test)]
    pub(crate) fn pool(&self) -> &BufferPool {
        &self.pool
    }

    /// The disk budget (what it refused).
    pub(crate) fn quota(&self) -> &DiskQuota {
        &self.quota
    }

    /// How every `.npy` is encoded.
    pub(crate) fn opts(&self) -> WriteOptions {
        self.opts
    }

    /// Whether a file of `len` bytes is written on the caller's thread anyway (a synchronous
    /// writer, or more than the writer's memory budget can hold).
    pub(crate) fn written_by_caller(&self, len: usize) -> bool {
        self.writer.is_sync() || len >= self.writer.budget().limit()
    }

    /// Counts a file the disk budget refuses (tensors only), without touching its bytes.
    pub(crate) fn refuse(&self, dtype: DType, shape: &[usize], len: usize) {
        if let Ok(layout) = dump_npy::NpyLayout::new(dtype, shape, len, self.opts) {
            self.quota.reserve(layout.file_len() as u64);
        }
    }

    /// Validates, reserves, names (a name longer than the file system allows gets a short
    /// one, listed in `dir`'s `mapping.csv` through `tables`) and counts file `name` of `dir`;
    /// [`write`](TensorFiles::write) writes it. `None` when the disk budget refuses it.
    pub(crate) fn prepare(
        &self,
        tables: &RowSink,
        dir: &Path,
        name: String,
        (dtype, shape): (DType, &[usize]),
        len: usize,
    ) -> Result<Option<NpyOut>, Error> {
        let opts = self.opts;
        let layout =
            dump_npy::NpyLayout::new(dtype, shape, len, opts).map_err(|e| Error::Tensor {
                kernel: dir.join(&name).display().to_string(),
                io: "npy",
                slot: 0,
                message: e.to_string(),
            })?;
        let file_len = layout.file_len() as u64;
        if let Reservation::Refused { first } = self.quota.reserve(file_len) {
            if first {
                let (limit, file_bytes) = (self.quota.limit().unwrap_or(0), file_len);
                self.events.emit(&Event::DiskBudgetReached {
                    limit,
                    file: name,
                    file_bytes,
                });
            }
            return Ok(None);
        }
        let file_name = if name.len() > NAME_MAX {
            let short = short_name(&name);
            tables.append_line(&dir.join("mapping.csv"), &format!("{short},{name}\n"));
            short
        } else {
            name
        };
        Ok(Some(NpyOut {
            path: dir.join(file_name),
            dtype,
            shape: shape.to_vec(),
            opts,
            file_len,
        }))
    }

    /// Writes the file: a private copy is queued as is; borrowed bytes are written on this
    /// thread when the writer says the tensor is too large to copy
    /// ([`Writer::writes_direct`](crate::writer::Writer::writes_direct)), otherwise copied into
    /// a pooled buffer and queued. Failures are recorded by the writer either way.
    pub(crate) fn write(&self, out: NpyOut, bytes: Cow<'_, [u8]>) {
        let NpyOut {
            path,
            dtype,
            shape,
            opts,
            file_len,
        } = out;
        let tally = Arc::clone(self.writer.written());
        match bytes {
            // Ours already: queue it without another copy, unless the budget could not hold it
            // (it would wait for every queued write to finish, then be written alone).
            Cow::Owned(owned) if owned.len() < self.writer.budget().limit() => {
                let (owned, cost) = hand_over(owned);
                self.writer.submit(
                    cost,
                    Box::new(move || {
                        write_one(&path, dtype, &shape, &owned, opts)?;
                        tally.add(file_len);
                        Ok(())
                    }),
                );
            }
            bytes if self.writer.writes_direct(bytes.len()) => {
                self.writer.run_direct(|| {
                    write_one(&path, dtype, &shape, &bytes, opts)?;
                    tally.add(file_len);
                    Ok(())
                });
            }
            bytes => {
                // The runtime may reuse its buffer as soon as we return: the job holds a copy,
                // which the writer's byte budget bounds (the producer waits when it is full).
                // The budget is charged for the whole buffer the copy holds, and the copy is
                // made only once that is admitted; the same memory handed again unchanged in
                // this step shares it.
                let (held, _) = {
                    let mut batch = self.hashing.lock().unwrap_or_else(PoisonError::into_inner);
                    self.make_room(&mut batch, bytes.len());
                    self.remembered.store(true, Ordering::Release);
                    batch.copy_of(&bytes, &self.pool, self.writer.budget())
                };
                self.writer.submit_admitted(
                    JOB_OVERHEAD,
                    Box::new(move || {
                        write_one(&path, dtype, &shape, &held.buf, opts)?;
                        tally.add(file_len);
                        Ok(())
                    }),
                );
            }
        }
    }

    /// Whether a tensor of `len` bytes (`owned`: a private copy already) can have its digests
    /// computed on a writer thread ([`write_hashed`](Self::write_hashed)): the writer has
    /// threads and the copy would be queued (not written on the caller's thread).
    pub(crate) fn hashes_on_writer(&self, len: usize, owned: bool) -> bool {
        !self.writer.is_sync()
            && if owned {
                len < self.writer.budget().limit()
            } else {
                !self.writer.writes_direct(len)
            }
    }

    /// Queues `bytes` (`elems` elements of `dtype`) to be hashed with `hashes` on a writer
    /// thread, together with other tensors, then written to `out` (when a file is saved);
    /// the returned slot receives the digests. Borrowed bytes are copied into a pooled buffer
    /// (the writer's budget holds it, the caller waiting while it is full), a private copy is
    /// taken as is. Only for tensors [`hashes_on_writer`](Self::hashes_on_writer) accepts.
    pub(crate) fn write_hashed(
        &self,
        out: Option<NpyOut>,
        bytes: Cow<'_, [u8]>,
        (dtype, elems): (DType, usize),
        hashes: Hashes,
    ) -> Arc<DigestSlot> {
        let mut batch = self.hashing.lock().unwrap_or_else(PoisonError::into_inner);
        self.make_room(&mut batch, bytes.len());
        let half = self.writer.budget().limit() / 2;
        let held = |buf: CopyBuf, charge: usize, pooled: bool| {
            Arc::new(Held {
                buf,
                charge,
                pooled,
                pool: Arc::clone(&self.pool),
            })
        };
        let (bytes, cost, weight) = match bytes {
            Cow::Owned(owned) => {
                let (owned, cost) = hand_over(owned);
                self.writer.budget().acquire(cost);
                (held(CopyBuf::from(owned), 0, false), cost, cost)
            }
            Cow::Borrowed(b) => {
                self.remembered.store(true, Ordering::Release);
                let (h, new) = batch.copy_of(b, &self.pool, self.writer.budget());
                // A new copy weighs on the gathered batch; a shared one only its overhead.
                let weight = if new {
                    h.charge + JOB_OVERHEAD
                } else {
                    JOB_OVERHEAD
                };
                (h, JOB_OVERHEAD, weight)
            }
        };
        let (slot, promise) = DigestSlot::new();
        batch.items.push(HashItem {
            bytes,
            npy: out,
            dtype,
            elems,
            hashes,
            promise,
        });
        batch.cost += cost;
        batch.weight += weight;
        self.gathered.store(true, Ordering::Release);
        if batch.items.len() >= HASH_BATCH_TENSORS || batch.weight >= half {
            self.send_batch(&mut batch);
        }
        slot
    }

    /// Before a copy of `len` bytes is admitted: copies gathered but not queued hold budget
    /// that no job will release (only this thread queues them), so they are queued first when
    /// they and the new copy would pass half the budget. The copy's admission can then always
    /// be met by queued jobs finishing, whether it is gathered for hashing or written plain.
    fn make_room(&self, batch: &mut HashBatch, len: usize) {
        let half = self.writer.budget().limit() / 2;
        if !batch.items.is_empty()
            && batch
                .weight
                .saturating_add(len.saturating_add(JOB_OVERHEAD))
                > half
        {
            self.send_batch(batch);
        }
    }

    /// Queues the tensors gathered for hashing now (at the end of a step, and before a flush).
    pub(crate) fn send_hashes(&self) {
        if !self.gathered.load(Ordering::Acquire) && !self.remembered.load(Ordering::Acquire) {
            return; // nothing gathered, no copy remembered
        }
        let mut batch = self.hashing.lock().unwrap_or_else(PoisonError::into_inner);
        self.send_batch(&mut batch);
        // Sharing copies ends with the step: the next step's values are new.
        batch.recent.clear();
        self.remembered.store(false, Ordering::Release);
    }

    /// Queues one job for the tensors of `batch`: their digests, then their files.
    fn send_batch(&self, batch: &mut HashBatch) {
        if batch.items.is_empty() {
            return;
        }
        let items = std::mem::take(&mut batch.items);
        let cost = std::mem::take(&mut batch.cost);
        batch.weight = 0;
        self.gathered.store(false, Ordering::Release);
        let tally = Arc::clone(self.writer.written());
        let errors = self.writer.error_log();
        self.writer.submit_admitted(
            cost,
            Box::new(move || {
                hash_and_write(items, &tally, &errors);
                Ok(())
            }),
        );
    }

    /// Waits for every queued file; the failures since the last flush.
    pub(crate) fn flush(&self) -> Result<(), Error> {
        // Gathered copies hold budget: queued first, or the wait below would never end.
        self.send_hashes();
        self.writer.flush().map_err(Error::Write)
    }

    /// The failures recorded since they were last taken, as an error (at a step's end).
    pub(crate) fn take_errors(&self) -> Result<(), Error> {
        let log = self.writer.errors();
        if log.count() == 0 {
            // No failure since the last take: the answer `take` would give, without its lock.
            return Ok(());
        }
        match log.take() {
            (0, _) => Ok(()),
            (count, failures) => Err(Error::Write(crate::writer::WriteErrors { count, failures })),
        }
    }

    /// Lets the idle copy buffers go (at the Dumper's close).
    pub(crate) fn release_buffers(&self) {
        self.pool.clear();
    }
}

/// A buffer of ours ready to queue, and the budget it costs: a sample keeps the whole copy's
/// allocation, so the rest is given back first and the budget counts what the job holds.
pub(super) fn hand_over(mut owned: Vec<u8>) -> (Vec<u8>, usize) {
    owned.shrink_to_fit();
    let cost = owned.capacity().saturating_add(JOB_OVERHEAD);
    (owned, cost)
}

/// A hashing job: the digests of every item (MD5 and SHA-1 of all items together,
/// multi-buffer), each
/// handed to its row, then the items' files. Every item's promise is fulfilled before any
/// file is written, so a failing write never holds a row back; a panic fails the rows whose
/// digests were not handed over (their promises drop). Each failed file is recorded in
/// `errors`, as its own job's failure would be.
fn hash_and_write(
    items: Vec<HashItem>,
    tally: &crate::writer::Tally,
    errors: &crate::writer::ErrorLog,
) {
    let md5: Vec<&[u8]> = items
        .iter()
        .filter(|i| i.hashes.md5)
        .map(|i| &i.bytes.buf[..])
        .collect();
    let mut digests = vec![[0u8; 16]; md5.len()];
    let md5_ok = dump_core::hash::md5_many(&md5, &mut digests);
    let mut md5 = digests.into_iter();
    let sha1: Vec<(DType, &[u8], usize)> = items
        .iter()
        .filter(|i| i.hashes.sha1)
        .map(|i| (i.dtype, &i.bytes.buf[..], i.elems))
        .collect();
    let mut digests = vec![[0u8; 20]; sha1.len()];
    let sha1_ok = dump_core::hash::ms_sha1_many(&sha1, &mut digests);
    let mut sha1 = digests.into_iter();
    let mut files = Vec::with_capacity(items.len());
    for item in items {
        let d = match (&md5_ok, item.hashes.md5, &sha1_ok, item.hashes.sha1) {
            (Err(e), true, _, _) => Err(format!("multi-buffer MD5: {e}")),
            (_, _, Err(e), true) => Err(format!("multi-buffer SHA-1: {e}")),
            (_, wants_md5, _, wants_sha1) => Ok(Digests {
                md5: if wants_md5 { md5.next() } else { None },
                sha1: if wants_sha1 { sha1.next() } else { None },
            }),
        };
        item.promise.fulfil(d);
        files.push((item.npy, item.bytes));
    }
    for (npy, bytes) in files {
        if let Some(n) = npy {
            match write_one(&n.path, n.dtype, &n.shape, &bytes.buf, n.opts) {
                Ok(()) => tally.add(n.file_len),
                Err(f) => errors.record(f.path, f.error),
            }
        }
        // A copy no other tensor holds goes back to the pool here, and its charge to the
        // budget (`Held::drop`).
        drop(bytes);
    }
}

fn write_one(
    path: &Path,
    dtype: DType,
    shape: &[usize],
    bytes: &[u8],
    opts: WriteOptions,
) -> Result<(), WriteFailure> {
    write_atomic(path, FILE_MODE, |f| {
        dump_npy::write_to(f, dtype, shape, bytes, opts).map(|_| ())
    })
    .map_err(|error| WriteFailure {
        path: path.to_owned(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::WriterConfig;

    /// An empty directory of this process under the temp dir, named for the test.
    fn fresh_dir(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("opdump-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn files(threads: usize) -> TensorFiles {
        let cfg = WriterConfig {
            threads,
            budget_bytes: 1 << 20,
            direct_write_bytes: 256 << 10,
            ..WriterConfig::default()
        };
        TensorFiles::new(
            Writer::new(&cfg),
            None,
            WriteOptions::default(),
            EventSink::default(),
        )
    }

    fn out(path: PathBuf, len: usize) -> NpyOut {
        NpyOut {
            path,
            dtype: DType::UInt8,
            shape: vec![len],
            opts: WriteOptions::default(),
            file_len: 0,
        }
    }

    const BOTH: Hashes = Hashes {
        md5: true,
        sha1: true,
    };

    #[test]
    fn a_failed_write_still_hands_over_the_digests_and_is_reported() {
        let f = files(2);
        let dir = fresh_dir("hashfail");
        let data: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 1000 + 77 * i as usize]).collect();
        let mut slots = Vec::new();
        for (i, d) in data.iter().enumerate() {
            // Tensor 2's directory does not exist: its write fails on the writer thread.
            let path = match i {
                2 => dir.join("missing").join("t2.npy"),
                _ => dir.join(format!("t{i}.npy")),
            };
            assert!(f.hashes_on_writer(d.len(), false));
            let bytes = match i % 2 {
                0 => Cow::Borrowed(d.as_slice()),
                _ => Cow::Owned(d.clone()),
            };
            slots.push(f.write_hashed(
                Some(out(path, d.len())),
                bytes,
                (DType::UInt8, d.len()),
                BOTH,
            ));
        }
        assert!(
            slots.iter().all(|s| !s.ready()),
            "gathered, not queued, before the step ends"
        );
        f.send_hashes();
        for (s, d) in slots.iter().zip(&data) {
            let got = s.wait().expect("the digests, the failed file's included");
            assert_eq!(got.md5, Some(dump_core::hash::md5(d)));
            assert_eq!(
                got.sha1,
                Some(dump_core::hash::ms_sha1(DType::UInt8, d, d.len()))
            );
        }
        let Err(Error::Write(e)) = f.flush() else {
            panic!("the failed write is reported")
        };
        assert_eq!(e.count, 1);
        assert!(e.failures[0].path.ends_with("missing/t2.npy"));
        for i in [0, 1, 3, 4] {
            assert!(dir.join(format!("t{i}.npy")).exists(), "t{i} written");
        }
        assert_eq!(
            f.writer().budget().in_use(),
            0,
            "every copy's budget returned"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn gathered_copies_never_hold_more_than_half_the_budget() {
        let f = files(2);
        let data: Vec<Vec<u8>> = (0..5).map(|_| vec![7u8; 200 << 10]).collect();
        let data = &data;
        let mut slots = Vec::new();
        // Five 200 KiB statistic-only tensors (in five buffers: none is the memory of another)
        // against a 1 MiB budget: the third would pass half of it, so the first two are queued
        // then; nothing waits forever for budget.
        for d in data {
            slots.push(f.write_hashed(
                None,
                Cow::Borrowed(d),
                (DType::UInt8, d.len()),
                Hashes {
                    md5: true,
                    sha1: false,
                },
            ));
            assert!(f.writer().budget().in_use() <= 1 << 20);
        }
        assert!(
            f.writer().queued_jobs() >= 2,
            "queued before the step's end"
        );
        f.flush().unwrap();
        let want = dump_core::hash::md5(&data[0]);
        for s in &slots {
            assert_eq!(s.wait().unwrap().md5, Some(want));
            assert_eq!(s.wait().unwrap().sha1, None);
        }
        assert!(f.writer().budget().peak() <= 1 << 20);
    }

    /// The runtime hands the same memory again (an operator's input that is the output dumped
    /// just before): one copy serves both files and digests, and the budget holds one copy.
    /// The same memory with new contents is copied again; so is an equal copy elsewhere.
    #[test]
    fn the_same_memory_handed_again_is_copied_once() {
        let f = files(2);
        let dir = fresh_dir("samemem");
        let mut act: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let twin = act.clone();
        let mut slots = Vec::new();
        let mut put = |name: &str, b: &[u8]| {
            slots.push((
                name.to_owned(),
                b.to_vec(),
                f.write_hashed(
                    Some(out(dir.join(name), b.len())),
                    Cow::Borrowed(b),
                    (DType::UInt8, b.len()),
                    BOTH,
                ),
            ));
        };
        put("out.npy", &act);
        let after_one = f.writer().budget().in_use();
        put("in.npy", &act);
        put("in_again.npy", &act);
        assert!(
            f.writer().budget().in_use() - after_one <= 2 * JOB_OVERHEAD,
            "no second copy: {} -> {}",
            after_one,
            f.writer().budget().in_use()
        );
        put("twin.npy", &twin);
        assert!(
            f.writer().budget().in_use() - after_one > twin.len(),
            "equal bytes elsewhere are copied"
        );
        act[5] ^= 0xff;
        put("changed.npy", &act);
        put("prefix.npy", &act[..50_000]);
        f.flush().unwrap();
        for (name, want, slot) in &slots {
            let d = slot.wait().unwrap();
            assert_eq!(d.md5, Some(dump_core::hash::md5(want)), "{name}");
            assert_eq!(
                d.sha1,
                Some(dump_core::hash::ms_sha1(DType::UInt8, want, want.len())),
                "{name}"
            );
            let file = std::fs::read(dir.join(name)).unwrap();
            assert!(file.ends_with(want), "{name} holds its bytes");
        }
        assert_eq!(
            f.writer().budget().in_use(),
            0,
            "every copy's budget returned"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Plain writes share a step's copies too, with hashed ones, both ways; every file holds
    /// its bytes and every charge comes back.
    #[test]
    fn plain_and_hashed_writes_share_a_copy() {
        let f = files(2);
        let dir = fresh_dir("sameplain");
        let mut act: Vec<u8> = (0..70_000u32).map(|i| (i * 13) as u8).collect();
        let mut want = Vec::new();
        for round in 0..3u8 {
            for k in 0..4 {
                let name = format!("r{round}k{k}.npy");
                if k % 2 == 0 {
                    f.write(out(dir.join(&name), act.len()), Cow::Borrowed(&act));
                } else {
                    f.write_hashed(
                        Some(out(dir.join(&name), act.len())),
                        Cow::Borrowed(&act),
                        (DType::UInt8, act.len()),
                        BOTH,
                    );
                }
                want.push((name, act.clone()));
            }
            act[round as usize] ^= 0x5a; // new values in the same memory
        }
        f.flush().unwrap();
        for (name, bytes) in &want {
            let file = std::fs::read(dir.join(name)).unwrap();
            assert!(file.ends_with(bytes), "{name}");
        }
        assert_eq!(f.writer().budget().in_use(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A plain write whose copy cannot fit beside the copies gathered for hashing (a budget
    /// smaller than twice the direct-write size) queues the gathered ones first instead of
    /// waiting forever for budget that only this thread could release.
    #[test]
    fn a_plain_copy_beside_gathered_ones_queues_them_first() {
        let cfg = WriterConfig {
            threads: 2,
            budget_bytes: 1 << 20,
            direct_write_bytes: 1 << 20,
            ..WriterConfig::default()
        };
        let f = TensorFiles::new(
            Writer::new(&cfg),
            None,
            WriteOptions::default(),
            EventSink::default(),
        );
        let dir = fresh_dir("plainroom");
        let gathered = vec![7u8; 450 << 10];
        let large = vec![9u8; 700 << 10];
        let (tx, rx) = std::sync::mpsc::channel();
        let d = dir.clone();
        std::thread::spawn(move || {
            f.write_hashed(
                Some(out(d.join("g.npy"), gathered.len())),
                Cow::Borrowed(&gathered),
                (DType::UInt8, gathered.len()),
                BOTH,
            );
            f.write(out(d.join("p.npy"), large.len()), Cow::Borrowed(&large));
            f.flush().unwrap();
            tx.send(f.writer().budget().in_use()).unwrap();
        });
        let in_use = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the plain write waited for budget the gathered copy held");
        assert_eq!(in_use, 0);
        assert!(
            std::fs::read(dir.join("p.npy"))
                .unwrap()
                .ends_with(&[9u8; 1000])
        );
        assert!(
            std::fs::read(dir.join("g.npy"))
                .unwrap()
                .ends_with(&[7u8; 1000])
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Plain writes only (nothing gathered for hashing): the copies remembered for sharing are
    /// still forgotten at the step's end, and a step of many tensors keeps only live entries.
    #[test]
    fn remembered_copies_end_with_the_step_and_are_pruned() {
        let f = files(2);
        let dir = fresh_dir("remember");
        let bufs: Vec<Vec<u8>> = (0..PRUNE_MIN + 100).map(|i| vec![i as u8; 8]).collect();
        for (i, b) in bufs.iter().enumerate() {
            f.write(
                out(dir.join(format!("t{i}.npy")), b.len()),
                Cow::Borrowed(b),
            );
            if i % 512 == 0 {
                f.writer().flush().unwrap(); // the copies so far are written and gone
            }
        }
        {
            let batch = f.hashing.lock().unwrap();
            assert!(
                batch.recent.len() < bufs.len(),
                "pruned: {} entries for {} tensors",
                batch.recent.len(),
                bufs.len()
            );
        }
        f.send_hashes(); // the step's end
        assert!(f.hashing.lock().unwrap().recent.is_empty());
        f.flush().unwrap();
        assert_eq!(f.writer().budget().in_use(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A `TensorFiles` dropped with copies gathered (a panic on the caller's thread before the
    /// step ended) queues them and closes instead of waiting for their budget forever.
    #[test]
    fn dropped_with_gathered_copies_does_not_hang() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let f = files(2);
            let d = vec![1u8; 4096];
            let slot = f.write_hashed(None, Cow::Borrowed(&d), (DType::UInt8, d.len()), BOTH);
            drop(f);
            tx.send(slot.wait().map(|d| d.md5)).unwrap();
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("drop returned");
        assert_eq!(got.unwrap(), Some(dump_core::hash::md5(&[1u8; 4096])));
    }

    #[test]
    fn a_synchronous_writer_or_a_direct_write_hashes_on_the_caller() {
        let f = files(0);
        assert!(!f.hashes_on_writer(10, false) && !f.hashes_on_writer(10, true));
        let f = files(2);
        assert!(f.hashes_on_writer(100 << 10, false));
        assert!(!f.hashes_on_writer(256 << 10, false), "written directly");
        assert!(f.hashes_on_writer(256 << 10, true), "ours: queued as is");
        assert!(!f.hashes_on_writer(1 << 20, true), "as large as the budget");
    }
}
