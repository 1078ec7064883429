//! One tensor out. [`route`] decides how a tensor is dumped — a pure function of a few facts
//! ([`Facts`]), tested as a table — and [`Emit`], the tensor's way out, gathers the facts and
//! runs the route through the Dumper's parts: the output parts ([`Out`]: tree, tables, tensor
//! files, metadata), the plan, the statistics engine and the flight recorder. What each route
//! computes lives in a file named after it: `statistic.csv` rows ([`rows`]), streamed device
//! tensors ([`stream`]), rows of statistics computed elsewhere ([`precomputed`]).
//!
//! The Dumper never names a device: a device tensor is a [`DeviceTensor`], whose layout (a
//! device format with its host shape) and statistics (asked with the plan's request:
//! precision, categories, semantics) come from the tensor itself.

#[cfg(test)]
mod digest_tests;
mod held;
mod precomputed;
mod rows;
mod stream;
#[cfg(test)]
mod tests;

use std::{
    borrow::Cow,
    cell::Cell,
    path::Path,
    sync::atomic::{AtomicU64, Ordering},
};

use dump_core::DType;
use dump_stats::{
    Hashes,
    device::{DeviceTensor, Layout, StatsKind},
    engine::{Engine, TensorRef as StatsTensor},
};

use super::tensor_files;

use rows::{RowStats, RowTensor};

use super::{
    flight::{Counts, Recorder, StepRecord},
    msprobe::Entry,
    out::Out,
    plan::DumpPlan,
    tensor::{Source, TensorRef},
};
use crate::{Error, layout::Io};

/// Whether a statistic-only dump (no `.npy` file to write) copies a tensor's bytes to hand
/// its MD5/SHA-1 to the writer threads, as a full dump does with the copy it queues anyway.
/// Measured on the demo (BENCHMARKS.md, "Digests on the writer threads"), every category,
/// interleaved with main's binary on the 2-core machine: the copy wins, batch 8 1.58x the
/// undumped step against 3.72x with one MD5 stream per tensor here (2.19x with the writer at
/// the runtime's priority), batch 64 1.44x against 2.35x.
const STAT_ONLY_DIGESTS_ON_WRITER: bool = true;

/// A tensor's way out: the parts of the Dumper that one tensor's dump touches, borrowed for
/// the call ([`crate::dumper::shared::Shared::emit`] makes one).
pub(crate) struct Emit<'a> {
    /// What to dump and how.
    pub(crate) plan: &'a DumpPlan,
    /// Where it goes.
    pub(crate) out: &'a Out,
    /// Host statistics (large tensors split over its threads).
    pub(crate) engine: &'a Engine,
    /// The flight recorder, which holds rows and copies instead of the disk.
    pub(crate) recorder: Option<&'a Recorder>,
    /// Outputs are checked for NaN/Inf.
    pub(crate) watching: bool,
}

/// Where one tensor's outputs go — a directory, and the flight recorder's record of the step
/// when it holds them instead of the disk — and what its statistics said.
pub(crate) struct To<'a> {
    /// The directory the files and rows belong to.
    pub(crate) dir: &'a Path,
    /// The flight recorder's record of this step: rows and files are held there.
    pub(crate) held: Option<&'a StepRecord>,
    /// The non-finite counts of a watched output, set where its statistics are computed.
    pub(crate) seen: Cell<Option<Counts>>,
    /// The l2norm of a watched output that is all finite (for the flight recorder's
    /// `l2norm_growth` rule).
    pub(crate) l2: Cell<Option<f64>>,
    /// A step's own: the statistics table of `dir` (resolved once per step, not per row)
    /// and the directory-check epoch + 1 in which `dir` was last ensured (0: not yet).
    pub(crate) step: Option<(&'a Path, &'a AtomicU64)>,
}

impl<'a> To<'a> {
    /// Straight to `dir` on disk (or held by `held`).
    pub(crate) fn new(dir: &'a Path, held: Option<&'a StepRecord>) -> Self {
        To {
            dir,
            held,
            seen: Cell::new(None),
            l2: Cell::new(None),
            step: None,
        }
    }

    /// A step's rows: as [`To::new`], with the step's statistics table `csv` (in `dir`) and
    /// its directory-check cache `ensured` (see [`Emit::ensure`]).
    pub(crate) fn step(
        dir: &'a Path,
        held: Option<&'a StepRecord>,
        csv: &'a Path,
        ensured: &'a AtomicU64,
    ) -> Self {
        To {
            step: Some((csv, ensured)),
            ..To::new(dir, held)
        }
    }
}

/// Who a tensor belongs to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Owner<'a> {
    pub op_type: &'a str,
    pub full_name: &'a str,
    pub io: Io,
    pub slot: u32,
    /// The call entry gathering this kernel's tensors (msprobe's layout).
    pub entry: Option<&'a std::sync::Mutex<Entry>>,
}

impl<'a> Owner<'a> {
    /// Its identity for a tensor stamped `ts` (task and stream 0: host runtimes).
    pub(crate) fn id(&self, ts: u64) -> crate::layout::TensorId<&'a str> {
        crate::layout::TensorId {
            op_type: self.op_type,
            op_name: self.full_name,
            task_id: 0,
            stream_id: 0,
            timestamp: ts,
            io: self.io,
            slot: self.slot,
        }
    }

    /// The tensor error for this kernel input/output.
    pub(crate) fn error(&self, message: String) -> Error {
        Error::Tensor {
            kernel: self.full_name.to_owned(),
            io: self.io.as_str(),
            slot: self.slot,
            message,
        }
    }
}

/// How one tensor is dumped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Nothing is written: an empty tensor (MindSpore writes neither file nor row), or a
    /// complex one when only statistics are saved (MindSpore computes none for complex).
    Skip,
    /// Tensors only, and the disk budget has stopped the files: counted as skipped, never
    /// copied from the device or gathered.
    Refused,
    /// Statistics only, computed by the device (only the results cross the bus).
    DeviceStats,
    /// A device tensor streamed chunk by chunk into its file (and row), never held whole.
    Stream,
    /// Bytes in host memory (borrowed, gathered or copied from the device), then file and row;
    /// `sample`: the element count sample_mode 1 keeps.
    Copy {
        /// Elements kept (`None`: the whole tensor).
        sample: Option<usize>,
    },
}

/// What [`route`] decides on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Elements of the tensor as dumped.
    pub elems: usize,
    /// A complex dtype.
    pub complex: bool,
    /// `saved_data` includes statistics.
    pub statistics: bool,
    /// `saved_data` includes tensors.
    pub tensors: bool,
    /// The disk budget has stopped the `.npy` files.
    pub files_stopped: bool,
    /// A device tensor (not host bytes).
    pub device: bool,
    /// `stat_calc_mode: device`.
    pub device_stats: bool,
    /// Rows use Ascend device semantics (computed over the whole tensor, never streamed).
    pub device_rows: bool,
    /// An MD5 or SHA-1 column is configured (digests are computed on the host).
    pub digests: bool,
    /// sample_mode 1 applies: the elements kept.
    pub sample: Option<usize>,
    /// The tensor is converted from its device format to the host layout (`trans_flag`),
    /// which needs the whole tensor.
    pub converted: bool,
    /// The file would be written on the caller's thread anyway (synchronous writer, or a
    /// tensor the writer's memory budget cannot hold).
    pub direct: bool,
}

/// How a tensor with these facts is dumped (see [`Route`]).
pub(crate) fn route(f: &Facts) -> Route {
    if f.elems == 0 || (f.complex && f.statistics && !f.tensors) {
        return Route::Skip;
    }
    if !f.statistics && f.files_stopped {
        return Route::Refused;
    }
    let whole = f.sample.is_none() && !f.converted;
    if f.device && whole && f.device_stats && !f.tensors && !f.digests {
        return Route::DeviceStats;
    }
    if f.device && whole && f.tensors && f.direct && !f.complex && !f.device_rows {
        return Route::Stream;
    }
    Route::Copy { sample: f.sample }
}

/// A device tensor as it will be dumped: the layout resolved against `trans_flag`.
pub(super) struct DeviceView<'a> {
    pub(super) device: &'a dyn DeviceTensor,
    pub(super) dtype: DType,
    /// The `.npy` shape and the `Shape` column.
    pub(super) shape: &'a [usize],
    /// The file name's format field.
    pub(super) format: &'a str,
    /// Converted from a device format to the host layout.
    pub(super) converted: bool,
}

impl<'a> DeviceView<'a> {
    fn new(device: &'a dyn DeviceTensor, format: &'a str, trans_flag: bool) -> Self {
        let (shape, format, converted) = match device.layout() {
            Layout::Default => (device.shape(), format, false),
            Layout::Device { host_shape, .. } if trans_flag => (host_shape, "DefaultFormat", true),
            Layout::Device { format, .. } => (device.shape(), format, false),
        };
        DeviceView {
            device,
            dtype: device.dtype(),
            shape,
            format,
            converted,
        }
    }

    /// The bytes in host memory, in the dumped layout.
    fn copy(&self, len: usize) -> Result<Vec<u8>, String> {
        let mut v = vec![0u8; len];
        let r = if self.converted {
            self.device.copy_host_layout(&mut v)
        } else {
            self.device.copy_to_host(&mut v)
        };
        r.map_err(|e| format!("device copy failed: {e}"))?;
        Ok(v)
    }
}

impl Emit<'_> {
    /// Dumps one tensor into `dir` according to the plan.
    pub(crate) fn emit(&self, to: &To<'_>, who: Owner<'_>, t: &TensorRef<'_>) -> Result<(), Error> {
        match t.source {
            Source::Device(d) => {
                self.emit_device(to, who, &DeviceView::new(d, t.format, self.plan.trans_flag))
            }
            _ => self.emit_host(to, who, t),
        }
    }

    /// The facts of a tensor of `dtype` with `elems` elements of `len` bytes.
    fn facts(&self, to: &To<'_>, dtype: DType, elems: usize, len: usize, device: bool) -> Facts {
        let p = &self.plan;
        Facts {
            elems,
            complex: dtype.is_complex(),
            statistics: p.saved_data.statistics(),
            tensors: p.saved_data.tensors(),
            files_stopped: self.out.files.quota().is_stopped(),
            device,
            device_stats: p.device_stats,
            device_rows: p.stats_kind() == StatsKind::Device,
            digests: Hashes::for_categories(&p.categories).any(),
            sample: self.sampled(dtype, elems),
            converted: false,
            // Held by the flight recorder: copied into memory, never streamed to a file.
            direct: to.held.is_none() && self.out.files.written_by_caller(len),
        }
    }

    /// Host bytes, contiguous or strided: skipped, refused or copied.
    fn emit_host(&self, to: &To<'_>, who: Owner<'_>, t: &TensorRef<'_>) -> Result<(), Error> {
        let bad = |message: String| who.error(message);
        let elems = t
            .elems()
            .ok_or_else(|| bad(format!("shape {:?} overflows", t.shape)))?;
        let len = t.dtype.storage_bytes(elems).unwrap_or(usize::MAX);
        match route(&self.facts(to, t.dtype, elems, len, false)) {
            Route::Skip => Ok(()),
            Route::Refused => self.refuse(t.dtype, t.shape, elems),
            Route::Copy { sample } => {
                let bytes = t.contiguous().map_err(bad)?;
                self.emit_bytes(to, who, (t.dtype, t.shape, t.format), bytes, elems, sample)
            }
            // Host tensors are never routed to the device paths.
            Route::DeviceStats | Route::Stream => {
                Err(bad("a host tensor routed to a device path".to_owned()))
            }
        }
    }

    /// A device tensor: skipped, refused, device statistics, streamed or copied.
    fn emit_device(&self, to: &To<'_>, who: Owner<'_>, v: &DeviceView<'_>) -> Result<(), Error> {
        let bad = |message: String| who.error(message);
        let elems = v
            .shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| bad(format!("shape {:?} overflows", v.shape)))?;
        let len = v
            .dtype
            .storage_bytes(elems)
            .ok_or_else(|| bad(format!("shape {:?} overflows", v.shape)))?;
        let facts = Facts {
            converted: v.converted,
            ..self.facts(to, v.dtype, elems, len, true)
        };
        let sample = match route(&facts) {
            Route::Skip => return Ok(()),
            Route::Refused => return self.refuse(v.dtype, v.shape, elems),
            Route::Stream => return self.stream(to, who, v, elems, len),
            Route::DeviceStats => {
                let req = self.plan.stats_request();
                // Queued without waiting when nothing needs the values before the step ends.
                let deferred = if self.can_defer(to, who, v.dtype) {
                    v.device.statistics_deferred(&req)
                } else {
                    Ok(None)
                };
                match deferred {
                    Ok(Some(pending)) => return self.defer_device_row(to, who, v, len, pending),
                    Ok(None) => match v.device.statistics(&req) {
                        Ok(stats) => return self.device_stats_row(to, who, v, len, stats),
                        // The device cannot: copy the tensor and compute on the host.
                        Err(_) => None,
                    },
                    Err(_) => None,
                }
            }
            Route::Copy { sample } => sample,
        };
        if let (Some(rec), None) = (to.held, sample)
            && self.hold_deferred(rec, who, v, (elems, len))?
        {
            return Ok(());
        }
        let bytes = v.copy(len).map_err(bad)?;
        self.emit_bytes(
            to,
            who,
            (v.dtype, v.shape, v.format),
            Cow::Owned(bytes),
            elems,
            sample,
        )
    }

    /// Counts a file the disk budget refused (tensors only), without touching its bytes.
    fn refuse(&self, dtype: DType, shape: &[usize], elems: usize) -> Result<(), Error> {
        let (shape, n) = match self.sampled(dtype, elems) {
            Some(n) => (&[n][..], n),
            None => (shape, elems),
        };
        let len = dtype.storage_bytes(n).unwrap_or(0);
        self.out.files.refuse(dtype, shape, len);
        Ok(())
    }

    /// Whether a device row may wait for the end of the step: nothing reads its statistics
    /// before then (no watch on this output, no flight recorder holding the step, no
    /// per-kernel document entry).
    fn can_defer(&self, to: &To<'_>, who: Owner<'_>, dtype: DType) -> bool {
        to.held.is_none()
            && !self.watches(who, dtype)
            && !self.out.tree.layout().per_kernel_entries()
    }

    /// Queues the row of statistics the device is computing, in its place among the rows of
    /// the step; formatted when the step's rows are flushed.
    fn defer_device_row(
        &self,
        to: &To<'_>,
        who: Owner<'_>,
        v: &DeviceView<'_>,
        len: usize,
        pending: Box<dyn dump_stats::PendingStatistics>,
    ) -> Result<(), Error> {
        if self.ensure(to).is_err() {
            return Ok(()); // recorded; the pending work is waited for as it drops
        }
        let layout = self.out.tree.layout();
        let path = layout.statistic_csv(to.dir);
        let row = crate::writer::DeferredRow {
            id: who.id(self.out.tree.timestamp()).to_owned(),
            dtype: v.dtype,
            shape: v.shape.to_vec(),
            data_size: len as u64,
            pending,
        };
        self.out.tables.push_deferred(&self.out.tree, &path, row);
        Ok(())
    }

    /// The row of statistics the device computed (`None`: an empty tensor, no row).
    fn device_stats_row(
        &self,
        to: &To<'_>,
        who: Owner<'_>,
        v: &DeviceView<'_>,
        len: usize,
        stats: Option<dump_stats::device::DeviceStatistics>,
    ) -> Result<(), Error> {
        let Some(stats) = stats else {
            return Ok(());
        };
        if self.ensure(to).is_err() {
            return Ok(());
        }
        let t = RowTensor {
            ts: self.out.tree.timestamp(),
            dtype: v.dtype,
            shape: v.shape,
            data_size: len,
            crc32: None,
            xor64: None,
        };
        self.device_row(to, who, t, stats)
            .map_err(|message| who.error(message))
    }

    /// Bytes in host memory: the sample (sample_mode 1: the first elements, flat), the file
    /// and the row.
    fn emit_bytes(
        &self,
        to: &To<'_>,
        who: Owner<'_>,
        (dtype, shape, format): (DType, &[usize], &str),
        bytes: Cow<'_, [u8]>,
        elems: usize,
        sample: Option<usize>,
    ) -> Result<(), Error> {
        let (bytes, shape_buf, elems) = match sample {
            Some(n) => {
                let nb = dtype.storage_bytes(n).unwrap_or(0);
                let b = match bytes {
                    Cow::Borrowed(b) => Cow::Borrowed(&b[..nb]),
                    Cow::Owned(mut v) => {
                        v.truncate(nb);
                        Cow::Owned(v)
                    }
                };
                (b, Some([n]), n)
            }
            None => (bytes, None, elems),
        };
        let shape: &[usize] = match &shape_buf {
            Some(s) => s,
            None => shape,
        };
        let ts = self.out.tree.timestamp();
        let name = self.out.tree.tensor_file(who.id(ts), format, dtype);
        if self.ensure(to).is_err() {
            return Ok(()); // recorded; returned at step end / close
        }
        if let Some(rec) = to.held {
            return self.hold_bytes(to, rec, who, (dtype, shape), name, bytes, (ts, elems));
        }
        // The file is validated and counted first (a bad tensor is an error value, not a failed
        // write); the row is computed before the bytes go to the writer, so a private copy
        // (device tensor, strided gather) can be handed over without copying it again.
        let Out { tables, files, .. } = self.out;
        let npy = if self.plan.saved_data.tensors() {
            files.prepare(tables, to.dir, name, (dtype, shape), bytes.len())?
        } else {
            None
        };
        let owned = matches!(bytes, Cow::Owned(_));
        if let Some(hashes) = self.hashes_for_writer(to, dtype, (bytes.len(), owned), npy.is_some())
        {
            return self
                .row_hashed_on_writer(to, who, (ts, dtype, shape), (bytes, elems), npy, hashes)
                .map_err(|message| who.error(message));
        }
        let row = self.row_or_watch(to, who, (ts, dtype, shape), &bytes, elems);
        if let Some(npy) = npy {
            files.write(npy, bytes);
        }
        row.map_err(|message| who.error(message))
    }

    /// The digests of this tensor's row (`len` bytes; `owned`: a private copy) to compute on
    /// a writer thread instead of here, if any: when the writer queues a copy of it (for its
    /// file, `file`; or, with [`STAT_ONLY_DIGESTS_ON_WRITER`], a copy made for the digests
    /// alone), the row is a host statistics row of a `statistic.csv` with an MD5 or SHA-1
    /// column, and nothing needs the row before the step's rows are flushed (no flight
    /// recorder holding the step, no per-kernel document entry).
    fn hashes_for_writer(
        &self,
        to: &To<'_>,
        dtype: DType,
        (len, owned): (usize, bool),
        file: bool,
    ) -> Option<Hashes> {
        let p = self.plan;
        let layout = self.out.tree.layout();
        let hashes = Hashes::for_categories(&p.categories);
        let ok = hashes.any()
            && (file || STAT_ONLY_DIGESTS_ON_WRITER)
            && p.saved_data.statistics()
            && to.held.is_none()
            && !dtype.is_complex()
            && p.stats_kind() == StatsKind::Host
            && !layout.per_kernel_entries()
            && !layout.wants_crc32()
            && !layout.wants_xor64()
            && self.out.files.hashes_on_writer(len, owned);
        ok.then_some(hashes)
    }

    /// The row of `bytes` with its digests computed on a writer thread: the statistics here
    /// (no digest), the bytes queued for hashing (and for `npy`, their file), the row queued
    /// in its place among the step's rows, formatted once the digests are in.
    fn row_hashed_on_writer(
        &self,
        to: &To<'_>,
        who: Owner<'_>,
        (ts, dtype, shape): (u64, DType, &[usize]),
        (bytes, elems): (Cow<'_, [u8]>, usize),
        npy: Option<tensor_files::NpyOut>,
        hashes: Hashes,
    ) -> Result<(), String> {
        let files = &self.out.files;
        let stats = self
            .engine
            .summarize(StatsTensor::new(dtype, &bytes, elems), Hashes::NONE)
            .map_err(|e| e.to_string());
        let stats = match stats {
            Ok(s) => s,
            Err(e) => {
                // As for a row computed here: the file is still written, the error returned.
                if let Some(npy) = npy {
                    files.write(npy, bytes);
                }
                return Err(e);
            }
        };
        if let Some(sm) = &stats.summary {
            self.saw(to, who, dtype, sm);
        }
        let data_size = bytes.len() as u64;
        let slot = files.write_hashed(npy, bytes, (dtype, elems), hashes);
        let layout = self.out.tree.layout();
        let owned;
        let path = match to.step {
            Some((csv, _)) => csv,
            None => {
                owned = layout.statistic_csv(to.dir);
                owned.as_path()
            }
        };
        let row = crate::writer::DigestRow {
            id: who.id(ts).to_owned(),
            dtype,
            shape: shape.to_vec(),
            data_size,
            stats,
            slot,
        };
        self.out.tables.push_digests(&self.out.tree, path, row);
        Ok(())
    }

    /// The row of host bytes when statistics are saved; otherwise, for a watched output, only
    /// the statistics the non-finite check needs.
    fn row_or_watch(
        &self,
        to: &To<'_>,
        who: Owner<'_>,
        (ts, dtype, shape): (u64, DType, &[usize]),
        bytes: &[u8],
        elems: usize,
    ) -> Result<(), String> {
        if self.plan.saved_data.statistics() {
            let t = RowTensor {
                ts,
                dtype,
                shape,
                data_size: bytes.len(),
                crc32: None,
                xor64: None,
            };
            return self.stat_row(to, who, t, bytes, elems);
        }
        if self.watches(who, dtype)
            && let Ok(Some(sm)) = dump_core::stats::summarize(dtype, bytes, elems)
        {
            self.saw(to, who, dtype, &sm);
        }
        Ok(())
    }

    /// Holds a tensor in the flight recorder: its row (or its watch statistics) computed now,
    /// its bytes copied into the step's record (taken without a copy when already ours).
    #[allow(clippy::too_many_arguments)]
    fn hold_bytes(
        &self,
        to: &To<'_>,
        rec: &StepRecord,
        who: Owner<'_>,
        (dtype, shape): (DType, &[usize]),
        name: String,
        bytes: Cow<'_, [u8]>,
        (ts, elems): (u64, usize),
    ) -> Result<(), Error> {
        if self.plan.saved_data.tensors() {
            // Validated now, as for a file written at once: a bad tensor is an error value.
            dump_npy::NpyLayout::new(dtype, shape, bytes.len(), self.out.files.opts())
                .map_err(|e| who.error(e.to_string()))?;
        }
        let row = self.row_or_watch(to, who, (ts, dtype, shape), &bytes, elems);
        if self.plan.saved_data.tensors()
            && let Some(r) = self.recorder
        {
            r.hold_npy(rec, name, (dtype, shape), bytes);
        }
        row.map_err(|message| who.error(message))
    }

    /// Creates `to`'s directory, unless the flight recorder holds its files (or msprobe's
    /// statistics task, which writes none there from this thread).
    ///
    /// A step's directory is looked up once per directory-check epoch (the tree checks a
    /// directory once per epoch anyway): later rows of the step compare one number instead
    /// of hashing the path.
    pub(crate) fn ensure(&self, to: &To<'_>) -> Result<(), ()> {
        // msprobe's statistics task writes no file there from this thread: dump.json's
        // journal thread creates the step's directories.
        if to.held.is_some()
            || (self.out.tree.layout().per_kernel_entries() && !self.plan.saved_data.tensors())
        {
            return Ok(());
        }
        let Some((_, ensured)) = to.step else {
            return self.out.tree.ensure_dir(to.dir);
        };
        let epoch = self.out.tree.epoch();
        if ensured.load(Ordering::Relaxed) == epoch.wrapping_add(1) {
            return Ok(());
        }
        self.out.tree.ensure_dir(to.dir)?;
        // Checked in `epoch` (or later: then the next row looks again, which is only slower).
        ensured.store(epoch.wrapping_add(1), Ordering::Relaxed);
        Ok(())
    }

    /// Whether the non-finite check looks at this tensor: an output of a watched dtype, and
    /// something acts on what it finds (a flight recorder, or a policy other than continue).
    pub(crate) fn watches(&self, who: Owner<'_>, dtype: DType) -> bool {
        who.io == Io::Output && self.watching && self.plan.watch.covers(dtype)
    }

    /// Notes the non-finite counts of a watched output's statistics in `to`.
    pub(crate) fn saw(&self, to: &To<'_>, who: Owner<'_>, dtype: DType, s: &dump_core::Summary) {
        if self.watches(who, dtype) && to.seen.get().is_none() {
            to.seen.set(Counts::of(dtype, s));
            if to.seen.get().is_none() && s.count > 0 {
                to.l2.set(Some(s.sum_sq.sqrt()));
            }
        }
    }

    /// The element count sample_mode 1 keeps of a tensor of `elems` (`None`: not sampled): the
    /// first `sample_num` elements, an even count for int4 (two per byte).
    fn sampled(&self, dtype: DType, elems: usize) -> Option<usize> {
        let n = self.plan.sample.filter(|&n| elems > n)?;
        Some(if dtype == DType::Int4 { n & !1 } else { n })
    }
}

#[cfg(test)]
mod route_table {
    use super::{Facts, Route, route};

    /// Every route, and each condition that turns one route into another.
    #[test]
    fn routes() {
        let base = Facts {
            elems: 10,
            statistics: true,
            tensors: true,
            ..Facts::default()
        };
        let host_full = base;
        let dev = Facts {
            device: true,
            ..base
        };
        let dev_stats_only = Facts {
            tensors: false,
            device_stats: true,
            ..dev
        };
        let dev_direct = Facts {
            direct: true,
            ..dev
        };
        let copy = Route::Copy { sample: None };
        let table: &[(&str, Facts, Route)] = &[
            (
                "empty",
                Facts {
                    elems: 0,
                    ..dev_direct
                },
                Route::Skip,
            ),
            (
                "complex, statistics only",
                Facts {
                    complex: true,
                    tensors: false,
                    ..host_full
                },
                Route::Skip,
            ),
            (
                "complex, full",
                Facts {
                    complex: true,
                    ..host_full
                },
                copy,
            ),
            (
                "tensors only, budget stopped",
                Facts {
                    statistics: false,
                    files_stopped: true,
                    ..dev_direct
                },
                Route::Refused,
            ),
            (
                "full, budget stopped: the row still needs the bytes",
                Facts {
                    files_stopped: true,
                    ..host_full
                },
                copy,
            ),
            ("host tensor", host_full, copy),
            (
                "host tensor, direct",
                Facts {
                    direct: true,
                    ..host_full
                },
                copy,
            ),
            ("device statistics only", dev_stats_only, Route::DeviceStats),
            (
                "device statistics with a digest",
                Facts {
                    digests: true,
                    ..dev_stats_only
                },
                copy,
            ),
            (
                "device statistics, sampled",
                Facts {
                    sample: Some(4),
                    ..dev_stats_only
                },
                Route::Copy { sample: Some(4) },
            ),
            (
                "device statistics, converted layout",
                Facts {
                    converted: true,
                    ..dev_stats_only
                },
                copy,
            ),
            (
                "device statistics on a host tensor",
                Facts {
                    device: false,
                    ..dev_stats_only
                },
                copy,
            ),
            (
                "host statistics of a device tensor",
                Facts {
                    device_stats: false,
                    ..dev_stats_only
                },
                copy,
            ),
            ("device tensor, queued", dev, copy),
            ("device tensor, direct", dev_direct, Route::Stream),
            (
                "device tensor, direct, tensors only",
                Facts {
                    statistics: false,
                    ..dev_direct
                },
                Route::Stream,
            ),
            (
                "device tensor, direct, sampled",
                Facts {
                    sample: Some(4),
                    ..dev_direct
                },
                Route::Copy { sample: Some(4) },
            ),
            (
                "device tensor, direct, converted",
                Facts {
                    converted: true,
                    ..dev_direct
                },
                copy,
            ),
            (
                "device tensor, direct, complex",
                Facts {
                    complex: true,
                    ..dev_direct
                },
                copy,
            ),
            (
                "device tensor, direct, Ascend device rows",
                Facts {
                    device_rows: true,
                    ..dev_direct
                },
                copy,
            ),
            (
                "device tensor, direct, digests stream too",
                Facts {
                    digests: true,
                    ..dev_direct
                },
                Route::Stream,
            ),
        ];
        for (what, facts, want) in table {
            assert_eq!(route(facts), *want, "{what}: {facts:?}");
        }
    }
}
