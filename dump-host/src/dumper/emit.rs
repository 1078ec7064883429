//! One tensor out: sampling, the `.npy` file (queued to the background writer, or written on
//! the caller's thread when the tensor is too large to copy) and the `statistic.csv` row
//! (appended in one write, in the caller's order).

use std::{
    borrow::Cow,
    path::{Path, PathBuf},
    sync::{Arc, atomic::Ordering},
    time::{SystemTime, UNIX_EPOCH},
};

use dump_core::{
    DType,
    hash::{Md5Stream, MsSha1},
    stats::{Accumulator, FUSE_CHUNK},
};
use dump_npy::WriteOptions;
use dump_stats::{
    DeviceStats, Hashes, TensorStats,
    csv::{RowMeta, write_device_row, write_row},
    engine::TensorRef as StatsTensor,
};

use dump_device_ascend::{
    DeviceTensor as AscendTensor, Format as AscendFormat,
    device_stats::Simulated as AscendSimulated, dump_view,
};

use super::{Shared, TensorRef, quota::Reservation, tensor::Source};
use crate::{
    Error,
    config::Device,
    layout::{Io, NAME_MAX, TensorFileName, sanitize, short_name},
    writer::{WriteFailure, write_atomic},
};

/// Who a tensor belongs to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Owner<'a> {
    pub op_type: &'a str,
    pub full_name: &'a str,
    pub io: Io,
    pub slot: u32,
}

impl Owner<'_> {
    /// The tensor error for this kernel input/output.
    fn error(&self, message: String) -> Error {
        Error::Tensor {
            kernel: self.full_name.to_owned(),
            io: self.io.as_str(),
            slot: self.slot,
            message,
        }
    }
}

/// The statistics of one csv row: host semantics, or Ascend device semantics (spec §7).
#[derive(Clone, Copy)]
enum RowStats<'a> {
    Host(&'a TensorStats),
    Device(&'a DeviceStats),
}

/// Mode bits of every file opdump writes (MindSpore: read-only for the owner).
pub(crate) const FILE_MODE: u32 = 0o400;

/// Budget charged for a queued file beyond its data bytes (header, path, shape).
const JOB_OVERHEAD: usize = 256;

/// An `.npy` file named, validated and counted, waiting for its bytes.
struct NpyOut {
    path: PathBuf,
    dtype: DType,
    shape: Vec<usize>,
    opts: WriteOptions,
    /// Bytes of the whole file (counted in the report once it is written).
    file_len: u64,
}

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
    /// the first time; later calls check that it still exists (one `lstat`) and recreate it if
    /// it was deleted mid-run, reporting the loss. Failures are recorded and returned.
    pub(crate) fn ensure_dir(&self, dir: &Path) -> Result<(), ()> {
        let made = self
            .dirs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(dir);
        if made {
            match std::fs::symlink_metadata(dir) {
                Ok(m) if m.is_dir() => return Ok(()),
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
            }
        }
        match crate::layout::create_dir_nofollow(self.tree.root(), dir) {
            Ok(()) => {
                self.dirs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(dir.to_owned());
                Ok(())
            }
            Err(e) => {
                self.writer.errors().record(dir.to_owned(), e);
                Err(())
            }
        }
    }

    /// Dumps one tensor into `dir` according to the plan.
    pub(crate) fn emit(&self, dir: &Path, who: Owner<'_>, t: &TensorRef<'_>) -> Result<(), Error> {
        if let (Some(host_shape), Source::Host(bytes)) = (t.host_shape, t.source) {
            return self.emit_device_format(dir, who, t, host_shape, bytes);
        }
        self.emit_plain(dir, who, t)
    }

    /// A tensor in an Ascend device format: converted to the host layout when `trans_flag` is
    /// set, otherwise written with its device shape and format name.
    fn emit_device_format(
        &self,
        dir: &Path,
        who: Owner<'_>,
        t: &TensorRef<'_>,
        host_shape: &[usize],
        bytes: &[u8],
    ) -> Result<(), Error> {
        let bad = |message: String| who.error(message);
        let format = AscendFormat::parse(t.format).map_err(|e| bad(e.to_string()))?;
        let dev = AscendTensor {
            format,
            dtype: t.dtype,
            device_shape: t.shape,
            host_shape,
            data: bytes,
        };
        let mut scratch = Vec::new();
        if self.plan.trans_flag {
            scratch.resize(dev.host_bytes().map_err(|e| bad(e.to_string()))?, 0);
        }
        let view =
            dump_view(self.plan.trans_flag, &dev, &mut scratch).map_err(|e| bad(e.to_string()))?;
        let plain = TensorRef::host(t.dtype, view.shape, view.data).with_format(view.format_name);
        self.emit_plain(dir, who, &plain)
    }

    fn emit_plain(&self, dir: &Path, who: Owner<'_>, t: &TensorRef<'_>) -> Result<(), Error> {
        let bad = |message: String| who.error(message);
        let elems = t
            .elems()
            .ok_or_else(|| bad(format!("shape {:?} overflows", t.shape)))?;
        if t.dtype.is_complex()
            && self.plan.saved_data.statistics()
            && !self.plan.saved_data.tensors()
        {
            return Ok(()); // MindSpore computes no statistics for complex tensors
        }
        if elems == 0 {
            return Ok(()); // MindSpore writes neither a file nor a row for an empty tensor
        }
        let sampled = self.sampled(t.dtype, elems);
        if !self.plan.saved_data.statistics() && self.quota.is_stopped() {
            // Tensors only, and the disk budget has stopped the files: count this one as
            // skipped without copying a device tensor or gathering a strided one for nothing.
            let (shape, n) = match sampled {
                Some(n) => (&[n][..], n),
                None => (t.shape, elems),
            };
            let len = t.dtype.storage_bytes(n).unwrap_or(0);
            let opts = WriteOptions::new().with_bf16(self.plan.bf16);
            if let Ok(layout) = dump_npy::NpyLayout::new(t.dtype, shape, len, opts) {
                self.quota.reserve(layout.file_len() as u64);
            }
            return Ok(());
        }
        if let Some(done) = self.device_stats_only(dir, who, t, elems) {
            return done;
        }
        if let Some(done) = self.stream_device_tensor(dir, who, t, elems) {
            return done;
        }
        let bytes = t.contiguous().map_err(bad)?;
        // sample_mode 1: the first sample_num elements, flat.
        let (bytes, shape_buf, elems) = match sampled {
            Some(n) => {
                let nb = t.dtype.storage_bytes(n).unwrap_or(0);
                let b = match bytes {
                    Cow::Borrowed(b) => Cow::Borrowed(&b[..nb]),
                    Cow::Owned(mut v) => {
                        v.truncate(nb);
                        Cow::Owned(v)
                    }
                };
                (b, Some([n]), n)
            }
            _ => (bytes, None, elems),
        };
        let shape: &[usize] = match &shape_buf {
            Some(s) => s,
            None => t.shape,
        };
        let ts = self.timestamp();
        let name = self.file_name(who, t, ts);
        if self.ensure_dir(dir).is_err() {
            return Ok(()); // recorded; returned at step end / close
        }
        // The file is validated and counted first (a bad tensor is an error value, not a failed
        // write); the row is computed before the bytes go to the writer, so a private copy
        // (device tensor, strided gather) can be handed over without copying it again.
        let npy = if self.plan.saved_data.tensors() {
            self.prepare_npy(dir, name, t.dtype, shape, bytes.len())?
        } else {
            None
        };
        let row = if self.plan.saved_data.statistics() {
            self.stat_row(dir, who, ts, t.dtype, shape, &bytes, elems)
        } else {
            Ok(())
        };
        if let Some(npy) = npy {
            self.write_npy(npy, bytes);
        }
        row.map_err(bad)
    }

    /// The `.npy` file name of `t` (before the long-name mapping).
    fn file_name(&self, who: Owner<'_>, t: &TensorRef<'_>, ts: u64) -> String {
        TensorFileName {
            op_type: who.op_type,
            op_name: who.full_name,
            task_id: 0,
            stream_id: 0,
            timestamp: ts,
            io: who.io,
            slot: who.slot,
            format: t.format,
            dtype: t.dtype,
            spelling: self.plan.spelling(),
        }
        .render()
    }

    /// A large device tensor dumped with its file: streamed. The device hands over chunks
    /// ([`DeviceTensor::copy_chunks`](super::DeviceTensor::copy_chunks); CUDA: pinned buffers,
    /// the next chunk copying while this one is consumed) that feed the statistics, the hashes
    /// and the `.npy` file on this thread, so no host copy of the whole tensor is ever held:
    /// memory stays bounded however large the tensor. Statistics are fed in [`FUSE_CHUNK`]
    /// pieces, so the row equals the one the copy path computes, bit for bit.
    ///
    /// Used when the file is written on this thread anyway: a synchronous writer, or a tensor
    /// the memory budget cannot hold. A smaller device tensor with writer threads is copied
    /// once and its copy queued, which returns to the runtime sooner. `None` when this does
    /// not apply (the caller copies the tensor): that case, sampled, int4/uint1/complex, or
    /// Ascend device statistics.
    fn stream_device_tensor(
        &self,
        dir: &Path,
        who: Owner<'_>,
        t: &TensorRef<'_>,
        elems: usize,
    ) -> Option<Result<(), Error>> {
        let d = t.device_tensor()?;
        let p = &self.plan;
        let len = t.dtype.storage_bytes(elems)?;
        if !p.saved_data.tensors()
            || self.sampled(t.dtype, elems).is_some()
            || matches!(t.dtype, DType::Int4 | DType::UInt1)
            || t.dtype.is_complex()
            || (p.device == Device::Ascend && p.device_stats)
            || !(self.writer.is_sync() || len >= self.writer.budget().limit())
        {
            return None;
        }
        let bad = |message: String| who.error(message);
        let ts = self.timestamp();
        let name = self.file_name(who, t, ts);
        if self.ensure_dir(dir).is_err() {
            return Some(Ok(())); // recorded; returned at step end / close
        }
        let npy = match self.prepare_npy(dir, name, t.dtype, t.shape, len) {
            Ok(npy) => npy,
            Err(e) => return Some(Err(e)),
        };
        let mut stats = if p.saved_data.statistics() {
            match StreamStats::new(t.dtype, elems, Hashes::for_categories(&p.categories)) {
                Ok(s) => Some(s),
                Err(e) => return Some(Err(bad(e))),
            }
        } else {
            None
        };
        let want_stats = stats.is_some();
        let mut feed = |chunk: &[u8]| match stats.as_mut() {
            Some(s) => s.update(chunk),
            None => Ok(()),
        };
        let mut device_error = None;
        match npy {
            Some(out) => self.writer.run_direct(|| {
                let written = write_atomic(&out.path, FILE_MODE, |f| {
                    stream_npy(f, &out, d, &mut feed).map_err(|e| match e {
                        StreamError::Write(e) => e,
                        StreamError::Source(e) => {
                            device_error = Some(e);
                            std::io::Error::other("the device copy failed")
                        }
                    })
                });
                match written {
                    // A device failure is the tensor's error (below), not a write failure.
                    Err(_) if device_error.is_some() => Ok(()),
                    Ok(()) => {
                        self.writer.written().add(out.file_len);
                        Ok(())
                    }
                    r => r.map_err(|error| WriteFailure {
                        path: out.path.clone(),
                        error,
                    }),
                }
            }),
            // The disk budget refused the file: the row still needs the statistics.
            None if want_stats => device_error = d.copy_chunks(&mut feed).err(),
            None => {}
        }
        if let Some(e) = device_error {
            return Some(Err(bad(format!("device copy failed: {e}"))));
        }
        let Some(stats) = stats else {
            return Some(Ok(()));
        };
        let row = stats
            .finish()
            .and_then(|s| self.append_row(dir, who, ts, t.dtype, t.shape, len, RowStats::Host(&s)));
        Some(row.map_err(bad))
    }

    /// The element count sample_mode 1 keeps of a tensor of `elems` (`None`: not sampled): the
    /// first `sample_num` elements, an even count for int4 (two per byte).
    fn sampled(&self, dtype: DType, elems: usize) -> Option<usize> {
        let n = self.plan.sample.filter(|&n| elems > n)?;
        Some(if dtype == DType::Int4 { n & !1 } else { n })
    }

    /// Validates an `.npy` file of `len` data bytes, reserves it against the disk budget and
    /// names it (long names through `mapping.csv`); it is counted once written:
    /// [`write_npy`](Shared::write_npy) writes it. `None` when the disk budget refuses it.
    fn prepare_npy(
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
    fn write_npy(&self, out: NpyOut, bytes: Cow<'_, [u8]>) {
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

    /// Statistics-only dump of a device tensor with `stat_calc_mode: device`: ask the device for
    /// the summary so only the partial results cross the bus (no copy of the tensor). `None` when this does not apply
    /// (tensors wanted, digests or sampling requested, or the device cannot) — the caller then
    /// copies the tensor and computes on the host.
    fn device_stats_only(
        &self,
        dir: &Path,
        who: Owner<'_>,
        t: &TensorRef<'_>,
        elems: usize,
    ) -> Option<Result<(), Error>> {
        let d = t.device_tensor()?;
        let p = &self.plan;
        if !p.device_stats
            || p.device == Device::Ascend
            || p.saved_data.tensors()
            || Hashes::for_categories(&p.categories).any()
            || p.sample.is_some_and(|n| elems > n)
        {
            return None;
        }
        let summary = d.device_summary().ok()?;
        if self.ensure_dir(dir).is_err() {
            return Some(Ok(()));
        }
        let stats = TensorStats {
            summary,
            md5: None,
            sha1: None,
        };
        let size = t.dtype.storage_bytes(elems).unwrap_or(0);
        let ts = self.timestamp();
        Some(
            self.append_row(dir, who, ts, t.dtype, t.shape, size, RowStats::Host(&stats))
                .map_err(|message| who.error(message)),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn stat_row(
        &self,
        dir: &Path,
        who: Owner<'_>,
        ts: u64,
        dtype: DType,
        shape: &[usize],
        bytes: &[u8],
        elems: usize,
    ) -> Result<(), String> {
        if self.plan.device == Device::Ascend && self.plan.device_stats {
            // Ascend device statistics (spec §7), computed with the device's semantics on the
            // host bytes (dump-device-ascend's simulated backend): max/min/avg/l2norm only,
            // `null` for unsupported cells, avg/l2norm in f32 (high) or the source dtype (low).
            let sim = AscendSimulated::new(self.plan.device_precision);
            let Some(stats) = sim
                .statistics(dtype, bytes, elems)
                .map_err(|e| e.to_string())?
            else {
                return Ok(());
            };
            return self.append_row(
                dir,
                who,
                ts,
                dtype,
                shape,
                bytes.len(),
                RowStats::Device(&stats),
            );
        }
        if dtype.is_complex() {
            return Ok(());
        }
        let stats = self
            .engine
            .summarize(
                StatsTensor::new(dtype, bytes, elems),
                Hashes::for_categories(&self.plan.categories),
            )
            .map_err(|e| e.to_string())?;
        self.append_row(
            dir,
            who,
            ts,
            dtype,
            shape,
            bytes.len(),
            RowStats::Host(&stats),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn append_row(
        &self,
        dir: &Path,
        who: Owner<'_>,
        ts: u64,
        dtype: DType,
        shape: &[usize],
        data_size: usize,
        stats: RowStats<'_>,
    ) -> Result<(), String> {
        // A comma would split the row (sanitize already removed newlines): both fields get
        // `_` for it, and the op type is sanitised as in the file name.
        let op_type = sanitize(who.op_type).replace(',', "_");
        let op_name = sanitize(who.full_name).replace(',', "_");
        let meta = RowMeta {
            op_type: &op_type,
            op_name: &op_name,
            task_id: 0,
            stream_id: 0,
            timestamp: ts,
            io: who.io,
            slot: who.slot as u64,
            data_size: data_size as u64,
            dtype,
            shape,
        };
        let mut row = String::with_capacity(160 + op_name.len());
        let cats = &self.plan.categories;
        let written = match stats {
            RowStats::Host(t) => write_row(&mut row, &meta, cats, t),
            RowStats::Device(d) => write_device_row(&mut row, &meta, cats, d).map(|()| true),
        };
        if !written.map_err(|e| e.to_string())? {
            return Ok(());
        }
        let path = dir.join("statistic.csv");
        match self.csv.append(&path, &self.csv_header, &row, FILE_MODE) {
            // Counted once it is in the file, never before.
            Ok(()) => {
                self.rows.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => self.writer.errors().record(path, e),
        }
        Ok(())
    }
}

/// A buffer of ours ready to queue, and the budget it costs: a sample keeps the whole copy's
/// allocation, so the rest is given back first and the budget counts what the job holds.
fn hand_over(mut owned: Vec<u8>) -> (Vec<u8>, usize) {
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

/// Statistics and digests fed chunk by chunk (the streamed path of a device tensor).
struct StreamStats {
    acc: Accumulator,
    md5: Option<Md5Stream>,
    sha1: Option<MsSha1>,
}

impl StreamStats {
    fn new(dtype: DType, elems: usize, hashes: Hashes) -> Result<Self, String> {
        Ok(StreamStats {
            acc: Accumulator::new(dtype, elems).map_err(|e| e.to_string())?,
            md5: hashes.md5.then(Md5Stream::new),
            sha1: hashes.sha1.then(|| MsSha1::new(dtype, elems)),
        })
    }

    /// The next bytes of the tensor, in [`FUSE_CHUNK`] pieces as `summarize` takes them, so
    /// that the result is the same bit for bit however the device chunks the tensor.
    fn update(&mut self, chunk: &[u8]) -> Result<(), String> {
        for piece in chunk.chunks(FUSE_CHUNK) {
            self.acc.update(piece).map_err(|e| e.to_string())?;
        }
        if let Some(m) = self.md5.as_mut() {
            m.update(chunk);
        }
        if let Some(s) = self.sha1.as_mut() {
            s.update(chunk);
        }
        Ok(())
    }

    fn finish(self) -> Result<TensorStats, String> {
        Ok(TensorStats {
            summary: self.acc.finish().map_err(|e| e.to_string())?,
            md5: self.md5.map(Md5Stream::finish),
            sha1: self.sha1.map(MsSha1::finish),
        })
    }
}

/// Why [`stream_npy`] stopped.
enum StreamError {
    /// Writing the file failed.
    Write(std::io::Error),
    /// The device (or the statistics fed from it) failed.
    Source(String),
}

/// Writes `out`'s header, then the tensor's chunks as `d` hands them over (bf16 widened to
/// f32 when the options say so), each chunk fed to `feed` first. Every chunk is consumed even
/// after a write error, so that the statistics still see the whole tensor; the first write
/// error is returned at the end.
fn stream_npy(
    f: &mut dyn std::io::Write,
    out: &NpyOut,
    d: &dyn super::DeviceTensor,
    feed: &mut dyn FnMut(&[u8]) -> Result<(), String>,
) -> Result<(), StreamError> {
    let invalid = |e: String| StreamError::Write(std::io::Error::other(e));
    let len = out
        .shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .and_then(|n| out.dtype.storage_bytes(n))
        .ok_or_else(|| invalid(format!("shape {:?} overflows", out.shape)))?;
    let layout = dump_npy::NpyLayout::new(out.dtype, &out.shape, len, out.opts)
        .map_err(|e| invalid(e.to_string()))?;
    // Only bf16 widens on this path (int4 and uint1 are not streamed).
    let widen = layout.widens();
    let mut header = Vec::with_capacity(layout.header_len());
    dump_npy::write_header(&mut header, layout.descr(), &out.shape)
        .map_err(|e| invalid(e.to_string()))?;
    let mut write_error = f.write_all(&header).err();
    let mut scratch = if widen {
        vec![0u8; 1 << 20]
    } else {
        Vec::new()
    };
    d.copy_chunks(&mut |chunk| {
        feed(chunk)?;
        if write_error.is_some() {
            return Ok(());
        }
        let r = if widen {
            chunk.chunks(scratch.len() / 2).try_for_each(|c| {
                let n = dump_core::widen::bf16_to_f32(c, &mut scratch[..c.len() * 2])
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                f.write_all(&scratch[..n])
            })
        } else {
            f.write_all(chunk)
        };
        write_error = r.err();
        Ok(())
    })
    .map_err(StreamError::Source)?;
    write_error.map_or(Ok(()), |e| Err(StreamError::Write(e)))
}

#[cfg(test)]
mod tests {
    //! Which path a tensor's file takes: copied and queued, handed over, or written directly.

    use std::{collections::HashMap, path::PathBuf, sync::Arc};

    use dump_core::{DType, Summary};

    use crate::{
        DumpOptions, Dumper, TensorRef,
        dumper::{DeviceTensor, Shared},
        writer::{DEFAULT_DIRECT_WRITE_BYTES, WriterConfig},
    };

    fn root(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("opdump-emit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn dumper(root: &std::path::Path, saved: &str, writer: WriterConfig) -> Dumper {
        let text = format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "all", "saved_data": "{saved}", "input_output": 0, "kernels": [],
            "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
            root.display()
        );
        let opts = DumpOptions {
            writer,
            ..DumpOptions::default()
        };
        Dumper::from_json_with(text.into_bytes(), &HashMap::<String, String>::new(), &opts).unwrap()
    }

    /// `elems` f32 values, distinct per tensor.
    fn f32_bytes(elems: usize, seed: u32) -> Vec<u8> {
        (0..elems)
            .flat_map(|i| ((i as u32 ^ seed) as f32).to_le_bytes())
            .collect()
    }

    /// The `.npy` file of kernel `op` in `dir` (final name only), if it exists.
    fn npy_of(dir: &std::path::Path, op: &str) -> Option<dump_npy::NpyFile> {
        let e = std::fs::read_dir(dir).ok()?.find_map(|e| {
            let e = e.ok()?;
            let n = e.file_name().to_string_lossy().into_owned();
            (n.starts_with(&format!("{op}.")) && n.ends_with(".npy")).then_some(e.path())
        })?;
        Some(dump_npy::read_file(e).unwrap())
    }

    /// The Dumper's internals (kept across `begin_step`, which borrows the Dumper).
    fn shared(d: &Dumper) -> Arc<Shared> {
        Arc::clone(d.shared.as_ref().unwrap())
    }

    /// (jobs queued to the writer threads, writes run on the caller's thread).
    fn counts(s: &Shared) -> (u64, u64) {
        (s.writer.queued_jobs(), s.writer.inline_jobs())
    }

    const SMALL: usize = 4 << 10; // 16 KiB of f32
    const LARGE: usize = 32 << 10; // 128 KiB of f32

    fn two_threads(direct_write_bytes: usize) -> WriterConfig {
        WriterConfig {
            threads: 2,
            budget_bytes: 1 << 20,
            direct_write_bytes,
        }
    }

    #[test]
    fn large_host_tensors_are_written_directly_small_ones_copied_and_queued() {
        let r = root("paths");
        let mut d = dumper(&r, "tensor", two_threads(64 << 10));
        let s = shared(&d);
        let dir = r.join("rank_0/Net/0/0");
        let small = f32_bytes(SMALL, 1);
        let large = f32_bytes(LARGE, 2);
        let bf16: Vec<u8> = (0..LARGE * 2)
            .flat_map(|i| (i as u16).to_le_bytes())
            .collect();
        let step = d.begin_step();
        let k = step.kernel("Small", "Default/Small-op0").unwrap();
        k.output(0, TensorRef::host(DType::Float32, &[SMALL], &small))
            .unwrap();
        drop(k);
        assert_eq!(counts(&s), (1, 0), "small tensor queued");
        let k = step.kernel("Large", "Default/Large-op1").unwrap();
        k.output(0, TensorRef::host(DType::Float32, &[LARGE], &large))
            .unwrap();
        drop(k);
        assert_eq!(
            counts(&s),
            (1, 1),
            "large tensor written on the caller's thread"
        );
        // Written directly: complete under its final name before the call returned.
        assert_eq!(npy_of(&dir, "Large").expect("Large written").data, large);
        let k = step.kernel("Half", "Default/Half-op2").unwrap();
        k.output(0, TensorRef::host(DType::BFloat16, &[LARGE * 2], &bf16))
            .unwrap();
        drop(k);
        assert_eq!(
            counts(&s),
            (1, 2),
            "bf16 of 128 KiB (256 KiB widened) directly"
        );
        let half = npy_of(&dir, "Half").expect("Half written");
        assert_eq!((half.descr.as_str(), half.data.len()), ("<f4", LARGE * 8));
        step.finish().unwrap();
        let budget_peak = s.writer.budget().peak();
        assert!(
            (SMALL * 4..LARGE * 4).contains(&budget_peak),
            "only the small copy went through the budget ({budget_peak})"
        );
        assert!(
            (SMALL * 4..LARGE * 4).contains(&s.pool.idle_bytes()),
            "only the small copy buffer was pooled ({})",
            s.pool.idle_bytes()
        );
        let report = d.close().unwrap();
        assert_eq!(
            (report.files, report.bytes),
            (3, (SMALL * 4 + LARGE * 12 + 384) as u64)
        );
        assert_eq!(npy_of(&dir, "Small").expect("Small written").data, small);
        std::fs::remove_dir_all(&r).unwrap();
    }

    #[test]
    fn the_default_threshold_is_8_mib() {
        let r = root("default");
        let cfg = WriterConfig {
            threads: 2,
            ..WriterConfig::default()
        };
        assert_eq!(cfg.direct_write_bytes, DEFAULT_DIRECT_WRITE_BYTES);
        assert_eq!(DEFAULT_DIRECT_WRITE_BYTES, 8 << 20);
        let mut d = dumper(&r, "tensor", cfg);
        let s = shared(&d);
        let at = f32_bytes(DEFAULT_DIRECT_WRITE_BYTES / 4, 3);
        let step = d.begin_step();
        let k = step.kernel("Below", "Default/Below-op0").unwrap();
        k.output(
            0,
            TensorRef::host(DType::Float32, &[at.len() / 4 - 1], &at[4..]),
        )
        .unwrap();
        drop(k);
        assert_eq!(counts(&s), (1, 0), "8 MiB - 4 bytes: copied and queued");
        let k = step.kernel("At", "Default/At-op1").unwrap();
        k.output(0, TensorRef::host(DType::Float32, &[at.len() / 4], &at))
            .unwrap();
        drop(k);
        assert_eq!(counts(&s), (1, 1), "8 MiB: written directly");
        step.finish().unwrap();
        assert_eq!(d.close().unwrap().files, 2);
        let dir = r.join("rank_0/Net/0/0");
        assert_eq!(npy_of(&dir, "At").unwrap().data, at);
        assert_eq!(npy_of(&dir, "Below").unwrap().data, &at[4..]);
        std::fs::remove_dir_all(&r).unwrap();
    }

    /// A device tensor whose "device memory" is a host vector.
    struct FakeDevice {
        shape: [usize; 1],
        data: Vec<u8>,
    }

    impl DeviceTensor for FakeDevice {
        fn dtype(&self) -> DType {
            DType::Float32
        }
        fn shape(&self) -> &[usize] {
            &self.shape
        }
        fn device_summary(&self) -> Result<Option<Summary>, String> {
            Err("no device statistics".into())
        }
        fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), String> {
            dst.copy_from_slice(&self.data);
            Ok(())
        }
    }

    #[test]
    fn a_device_copy_is_handed_to_the_writer_without_another_copy() {
        let r = root("device");
        // Budget 1 MiB, direct from 64 KiB: a 128 KiB device tensor is still queued (its host
        // copy is ours already), one of 1 MiB is written directly (the budget cannot hold it).
        let mut d = dumper(&r, "full", two_threads(64 << 10));
        let s = shared(&d);
        let mid = FakeDevice {
            shape: [LARGE],
            data: f32_bytes(LARGE, 4),
        };
        let huge = FakeDevice {
            shape: [1 << 18],
            data: f32_bytes(1 << 18, 5),
        };
        let step = d.begin_step();
        let k = step.kernel("Mid", "Default/Mid-op0").unwrap();
        k.output(0, TensorRef::device(&mid)).unwrap();
        drop(k);
        assert_eq!(counts(&s), (1, 0), "device copy queued");
        let k = step.kernel("Huge", "Default/Huge-op1").unwrap();
        k.output(0, TensorRef::device(&huge)).unwrap();
        drop(k);
        assert_eq!(
            counts(&s),
            (1, 1),
            "device copy beyond the budget written directly"
        );
        step.finish().unwrap();
        assert_eq!(s.pool.idle_bytes(), 0, "no pooled copy buffer was used");
        assert!(
            s.writer.budget().peak() >= LARGE * 4,
            "the queued copy held budget"
        );
        let report = d.close().unwrap();
        assert_eq!((report.files, report.rows), (2, 2));
        let dir = r.join("rank_0/Net/0/0");
        assert_eq!(npy_of(&dir, "Mid").unwrap().data, mid.data);
        assert_eq!(npy_of(&dir, "Huge").unwrap().data, huge.data);
        std::fs::remove_dir_all(&r).unwrap();
    }

    /// A device tensor that hands its bytes over in `chunk`-byte pieces (failing at piece
    /// `fail_at`, if set) and must never be copied whole.
    struct Chunked {
        dtype: DType,
        shape: [usize; 1],
        data: Vec<u8>,
        chunk: usize,
        fail_at: Option<usize>,
        pieces: std::sync::atomic::AtomicUsize,
    }

    impl DeviceTensor for Chunked {
        fn dtype(&self) -> DType {
            self.dtype
        }
        fn shape(&self) -> &[usize] {
            &self.shape
        }
        fn device_summary(&self) -> Result<Option<Summary>, String> {
            Err("no device statistics".into())
        }
        fn copy_to_host(&self, _: &mut [u8]) -> Result<(), String> {
            panic!("a streamed tensor must not be copied whole")
        }
        fn copy_chunks(
            &self,
            sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
        ) -> Result<(), String> {
            for (i, c) in self.data.chunks(self.chunk).enumerate() {
                if self.fail_at == Some(i) {
                    return Err("link lost".into());
                }
                self.pieces
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                sink(c)?;
            }
            Ok(())
        }
    }

    /// A dumper writing synchronously with every statistic column.
    fn sync_full(root: &std::path::Path) -> Dumper {
        let text = format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "all", "saved_data": "full", "input_output": 0, "kernels": [],
            "support_device": [0], "statistic_category": ["max", "min", "avg", "count",
            "negative zero count", "positive zero count", "nan count", "negative inf count",
            "positive inf count", "zero count", "md5", "l2norm", "hash:sha1"]}},
            "e2e_dump_settings": {{"enable": true}}}}"#,
            root.display()
        );
        let opts = DumpOptions {
            writer: WriterConfig::sync(),
            ..DumpOptions::default()
        };
        Dumper::from_json_with(text.into_bytes(), &HashMap::<String, String>::new(), &opts).unwrap()
    }

    /// The statistic.csv rows of `dir` without the timestamp column.
    fn rows(dir: &std::path::Path) -> Vec<String> {
        std::fs::read_to_string(dir.join("statistic.csv"))
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| {
                let mut f: Vec<&str> = l.split(',').collect();
                f.remove(4);
                f.join(",")
            })
            .collect()
    }

    #[test]
    fn large_device_tensors_stream_into_the_file_and_the_row() {
        // 1 MiB + 12 bytes of f32 and of bf16 (values with NaN, inf, zeros of both signs),
        // handed over in 40-byte pieces, which straddle every FUSE_CHUNK boundary.
        let n = (1 << 18) + 3;
        let mut f32s: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.37 - 150.0).collect();
        f32s[5] = f32::NAN;
        f32s[77] = f32::INFINITY;
        f32s[n - 1] = -0.0;
        let f32_data: Vec<u8> = f32s.iter().flat_map(|v| v.to_le_bytes()).collect();
        let bf16_data: Vec<u8> = f32s
            .iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect();
        for (dtype, data) in [(DType::Float32, f32_data), (DType::BFloat16, bf16_data)] {
            let streamed = root("stream");
            let mut d = sync_full(&streamed);
            let dev = Chunked {
                dtype,
                shape: [n],
                data: data.clone(),
                chunk: 40,
                fail_at: None,
                pieces: Default::default(),
            };
            let step = d.begin_step();
            let k = step.kernel("Dev", "Default/Dev-op0").unwrap();
            k.output(0, TensorRef::device(&dev)).unwrap();
            drop(k);
            step.finish().unwrap();
            d.close().unwrap();
            assert_eq!(
                dev.pieces.load(std::sync::atomic::Ordering::Relaxed),
                data.len().div_ceil(40)
            );

            let copied = root("stream-host");
            let mut d = sync_full(&copied);
            let step = d.begin_step();
            let k = step.kernel("Dev", "Default/Dev-op0").unwrap();
            k.output(0, TensorRef::host(dtype, &[n], &data)).unwrap();
            drop(k);
            step.finish().unwrap();
            d.close().unwrap();

            let (a, b) = (
                streamed.join("rank_0/Net/0/0"),
                copied.join("rank_0/Net/0/0"),
            );
            assert_eq!(rows(&a), rows(&b), "{dtype}: streamed row = host row");
            let (fa, fb) = (npy_of(&a, "Dev").unwrap(), npy_of(&b, "Dev").unwrap());
            assert_eq!(fa.descr, fb.descr, "{dtype}");
            assert!(fa.data == fb.data, "{dtype}: streamed file = host file");
            std::fs::remove_dir_all(&streamed).unwrap();
            std::fs::remove_dir_all(&copied).unwrap();
        }
    }

    #[test]
    fn a_device_failure_while_streaming_is_the_tensors_error_and_leaves_no_file() {
        let r = root("stream-fail");
        let mut d = sync_full(&r);
        let dev = Chunked {
            dtype: DType::Float32,
            shape: [4096],
            data: f32_bytes(4096, 9),
            chunk: 1024,
            fail_at: Some(3),
            pieces: Default::default(),
        };
        let step = d.begin_step();
        let k = step.kernel("Dev", "Default/Dev-op0").unwrap();
        let e = k.output(0, TensorRef::device(&dev)).unwrap_err();
        assert!(
            e.to_string().contains("device copy failed: link lost"),
            "{e}"
        );
        drop(k);
        step.finish().expect("not a write failure");
        let report = d.close().unwrap();
        assert_eq!((report.files, report.bytes, report.rows), (0, 0, 0));
        let dir = r.join("rank_0/Net/0/0");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names
                .iter()
                .all(|n| !n.ends_with(".npy") && !n.starts_with(".opdump-tmp")),
            "{names:?}"
        );
        std::fs::remove_dir_all(&r).unwrap();
    }

    #[test]
    fn a_sampled_device_copy_holds_only_the_sample() {
        // Sampling is Ascend-only; the sample of a device tensor's host copy is queued, and the
        // budget must see (and the job hold) the sample, not the whole copy.
        let r = root("sample");
        let text = format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "all", "saved_data": "tensor", "input_output": 0, "kernels": [],
            "support_device": [0]}}, "e2e_dump_settings": {{"enable": true, "sample_mode": 1,
            "sample_num": 16}}}}"#,
            r.display()
        );
        let opts = DumpOptions {
            device: crate::config::Device::Ascend,
            writer: two_threads(64 << 10),
            ..DumpOptions::default()
        };
        let mut d =
            Dumper::from_json_with(text.into_bytes(), &HashMap::<String, String>::new(), &opts)
                .unwrap();
        let s = shared(&d);
        let dev = FakeDevice {
            shape: [LARGE],
            data: f32_bytes(LARGE, 7),
        };
        let step = d.begin_step();
        let k = step.kernel("Dev", "Default/Dev-op0").unwrap();
        k.output(0, TensorRef::device(&dev)).unwrap();
        drop(k);
        assert_eq!(counts(&s), (1, 0), "the sample is queued");
        step.finish().unwrap();
        let peak = s.writer.budget().peak();
        assert!(
            peak < 1024,
            "budget charged for the 64-byte sample, not the copy ({peak})"
        );
        d.close().unwrap();
        let npy = npy_of(&r.join("rank_0/Net/0/0"), "Dev").unwrap();
        assert_eq!(npy.data, &dev.data[..64]);
        std::fs::remove_dir_all(&r).unwrap();
    }

    #[test]
    fn a_handed_over_buffer_is_charged_for_its_allocation() {
        let mut v = vec![7u8; 1 << 16];
        v.truncate(64);
        let (v, cost) = super::hand_over(v);
        assert_eq!(v, [7u8; 64]);
        assert!(v.capacity() < 1 << 16, "the rest of the copy is freed");
        assert_eq!(cost, v.capacity() + super::JOB_OVERHEAD);
    }

    #[test]
    fn a_synchronous_writer_queues_nothing() {
        let r = root("sync");
        let mut d = dumper(&r, "tensor", WriterConfig::sync());
        let s = shared(&d);
        let small = f32_bytes(SMALL, 6);
        let step = d.begin_step();
        for i in 0..3 {
            let name = format!("Default/S-op{i}");
            let k = step.kernel("S", &name).unwrap();
            k.output(0, TensorRef::host(DType::Float32, &[SMALL], &small))
                .unwrap();
        }
        step.finish().unwrap();
        assert_eq!(counts(&s), (0, 3));
        assert_eq!(d.close().unwrap().files, 3);
        std::fs::remove_dir_all(&r).unwrap();
    }
}
