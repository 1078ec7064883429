//! [`TensorFiles`]: the part of a Dumper that writes `.npy` files — the bounded background
//! writer, the pool of copy buffers its budget covers, and the disk budget. A file is
//! validated, reserved against the disk budget, named and counted first
//! ([`prepare`](TensorFiles::prepare)), then written ([`write`](TensorFiles::write)): a private
//! copy is queued as is, borrowed bytes are copied into a pooled buffer and queued, or written
//! on the caller's thread when too large to copy.

use std::{
    borrow::Cow,
    path::{Path, PathBuf},
    sync::Arc,
};

use dump_core::DType;
use dump_npy::WriteOptions;

use super::{
    quota::{DiskQuota, Reservation},
    row_sink::RowSink,
};
use crate::{
    Error,
    diag::{Event, EventSink},
    layout::{NAME_MAX, short_name},
    writer::{BufferPool, FILE_MODE, WriteFailure, Writer, write_atomic},
};

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
                // The runtime may reuse its buffer as soon as we return: the job owns a copy,
                // which the writer's byte budget bounds (the producer waits when it is full).
                // The budget is charged for the whole buffer the copy holds, and the copy is
                // made only once that is admitted.
                let (mut owned, cost) = self.pool.take(bytes.len(), JOB_OVERHEAD);
                owned.extend_from_slice(&bytes);
                let pool = Arc::clone(&self.pool);
                self.writer.submit_admitted(
                    cost,
                    Box::new(move || {
                        let r = write_one(&path, dtype, &shape, &owned, opts);
                        pool.give(owned);
                        r?;
                        tally.add(file_len);
                        Ok(())
                    }),
                );
            }
        }
    }

    /// Waits for every queued file; the failures since the last flush.
    pub(crate) fn flush(&self) -> Result<(), Error> {
        self.writer.flush().map_err(Error::Write)
    }

    /// The failures recorded since they were last taken, as an error (at a step's end).
    pub(crate) fn take_errors(&self) -> Result<(), Error> {
        match self.writer.errors().take() {
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
