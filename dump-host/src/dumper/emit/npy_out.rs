//! The `.npy` output of a tensor held in host memory: validated, reserved against the disk
//! budget, named and counted ([`prepare_npy`](Shared::prepare_npy)), then written
//! ([`write_npy`](Shared::write_npy)): a private copy is queued as is, borrowed bytes are copied
//! into a pooled buffer and queued, or written on the caller's thread when too large to copy.

use std::{
    borrow::Cow,
    path::{Path, PathBuf},
    sync::Arc,
};

use dump_core::DType;
use dump_npy::WriteOptions;

use super::FILE_MODE;
use crate::{
    Error,
    dumper::{Shared, quota::Reservation},
    layout::{NAME_MAX, short_name},
    writer::{WriteFailure, write_atomic},
};

/// Budget charged for a queued file beyond its data bytes (header, path, shape).
pub(super) const JOB_OVERHEAD: usize = 256;

/// An `.npy` file named, validated and counted, waiting for its bytes.
pub(crate) struct NpyOut {
    pub(super) path: PathBuf,
    pub(super) dtype: DType,
    pub(super) shape: Vec<usize>,
    pub(super) opts: WriteOptions,
    /// Bytes of the whole file (counted in the report once it is written).
    pub(super) file_len: u64,
}

impl Shared {
    /// names it (long names through `mapping.csv`) and counts it;
    /// [`write_npy`](Shared::write_npy) writes it. `None` when the disk budget refuses it.
    pub(crate) fn prepare_npy(
        &self,
        dir: &Path,
        name: String,
        dtype: DType,
        shape: &[usize],
        len: usize,
    ) -> Result<Option<NpyOut>, Error> {
        let opts = WriteOptions::new().with_bf16(self.plan.bf16);
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
                let e = crate::diag::Event::DiskBudgetReached {
                    limit,
                    file: name,
                    file_bytes,
                };
                self.events.emit(&e);
            }
            return Ok(None);
        }
        let file_name = if name.len() > NAME_MAX {
            let short = short_name(&name);
            let map = dir.join("mapping.csv");
            if let Err(e) = self
                .csv
                .append(&map, "", &format!("{short},{name}\n"), FILE_MODE)
            {
                self.writer.errors().record(map, e);
            }
            short
        } else {
            name
        };
        let path = dir.join(file_name);
        Ok(Some(NpyOut {
            path,
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
    pub(crate) fn write_npy(&self, out: NpyOut, bytes: Cow<'_, [u8]>) {
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
