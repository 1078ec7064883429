//! One tensor out: sampling, the `.npy` file (through the background writer) and the
//! `statistic.csv` row (appended in one write, in the caller's order).

use std::{
    borrow::Cow,
    path::Path,
    sync::{Arc, atomic::Ordering},
    time::{SystemTime, UNIX_EPOCH},
};

use dump_core::DType;
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

use super::{Shared, TensorRef, tensor::Source};
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

/// The statistics of one csv row: host semantics, or Ascend device semantics (spec §7).
#[derive(Clone, Copy)]
enum RowStats<'a> {
    Host(&'a TensorStats),
    Device(&'a DeviceStats),
}

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

    /// Creates `dir` (0700, recursively) once; failures are recorded and returned.
    pub(crate) fn ensure_dir(&self, dir: &Path) -> Result<(), ()> {
        {
            let made = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
            if made.contains(dir) {
                return Ok(());
            }
        }
        let mut b = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        match b.recursive(true).create(dir) {
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
        let bad = |message: String| Error::Tensor {
            kernel: who.full_name.to_owned(),
            io: who.io.as_str(),
            slot: who.slot,
            message,
        };
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
        let bad = |message: String| Error::Tensor {
            kernel: who.full_name.to_owned(),
            io: who.io.as_str(),
            slot: who.slot,
            message,
        };
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
        if let Some(done) = self.device_stats_only(dir, who, t, elems) {
            return done;
        }
        let bytes = t.contiguous().map_err(bad)?;
        // sample_mode 1: the first sample_num elements, flat (int4 needs an even count).
        let (bytes, shape_buf, elems) = match self.plan.sample {
            Some(n) if elems > n => {
                let n = if t.dtype == DType::Int4 { n & !1 } else { n };
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
        let name = TensorFileName {
            op_type: who.op_type,
            full_name: who.full_name,
            task_id: 0,
            stream_id: 0,
            timestamp_us: ts,
            io: who.io,
            slot: who.slot,
            format: t.format,
            dtype: t.dtype,
            spelling: self.plan.spelling(),
        }
        .render();
        if self.ensure_dir(dir).is_err() {
            return Ok(()); // recorded; returned at step end / close
        }
        if self.plan.saved_data.tensors() {
            self.write_npy(dir, name, t.dtype, shape, bytes.as_ref())?;
        }
        if self.plan.saved_data.statistics() {
            self.stat_row(dir, who, ts, t.dtype, shape, &bytes, elems)
                .map_err(bad)?;
        }
        Ok(())
    }

    fn write_npy(
        &self,
        dir: &Path,
        name: String,
        dtype: DType,
        shape: &[usize],
        bytes: &[u8],
    ) -> Result<(), Error> {
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
        let opts = WriteOptions::new().with_bf16(self.plan.bf16);
        // Validate now, in the caller, so a bad tensor is an error value, not a failed write.
        let layout = dump_npy::NpyLayout::new(dtype, shape, bytes.len(), opts).map_err(|e| {
            Error::Tensor {
                kernel: path.display().to_string(),
                io: "npy",
                slot: 0,
                message: e.to_string(),
            }
        })?;
        self.files.fetch_add(1, Ordering::Relaxed);
        self.bytes
            .fetch_add(layout.file_len() as u64, Ordering::Relaxed);
        let shape = shape.to_vec();
        if self.writer.is_sync() {
            write_one(&path, dtype, &shape, bytes, opts)
                .map_err(|f| {
                    self.writer.errors().record(f.path, f.error);
                })
                .ok();
            return Ok(());
        }
        // The runtime may reuse its buffer as soon as we return: the job owns a copy, which the
        // writer's byte budget bounds (the producer waits when the budget is full).
        let mut owned = self.pool.take(bytes.len());
        owned.extend_from_slice(bytes);
        let pool = Arc::clone(&self.pool);
        self.writer.submit(
            owned.len() + 256,
            Box::new(move || {
                let r = write_one(&path, dtype, &shape, &owned, opts);
                pool.give(owned);
                r
            }),
        );
        Ok(())
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
                .map_err(|message| Error::Tensor {
                    kernel: who.full_name.to_owned(),
                    io: who.io.as_str(),
                    slot: who.slot,
                    message,
                }),
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
        self.rows.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = self.csv.append(&path, &self.csv_header, &row, FILE_MODE) {
            self.writer.errors().record(path, e);
        }
        Ok(())
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
