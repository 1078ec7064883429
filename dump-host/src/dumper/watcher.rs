//! Watcher mode (CANN's `dump_scene: watcher`): the outputs of the watched kernels
//! (`watcher_nodes`) are summarised again after every kernel (every kernel of `layer` when it
//! is given), and a watched output that changed although the kernel that just ran is not its
//! writer is reported as **memory corruption**, naming that kernel.
//!
//! Rust runtimes hand the Dumper borrowed slices, gone when the call returns; to read a
//! watched output again later the runtime hands an owned handle, a [`WatchedTensor`]: a clone
//! of tract's `TValue` or candle's `Tensor` (both reference-counted, so the clone is cheap and
//! keeps the very buffer alive), or a [`RawView`] into a custom engine's arena (with an unsafe
//! contract). The handles of a step are held by that [`Step`](crate::Step) and released when
//! it ends ([`Step::finish`](crate::Step::finish) or drop).
//!
//! Each watched output keeps the digest of its bytes (MD5; for large outputs the MD5 of the
//! MD5s of up to 16 pieces hashed side by side, see `digest`) and its statistics (computed
//! when its writer reports it). After a checked kernel the digest is computed again (O(watched bytes) per
//! checked kernel: docs/watcher.md has the measured cost); the statistics only when it
//! changed. A change is reported three ways:
//! a row of `watcher.csv` (beside the flight recorder's `trigger.json`: the rank directory in
//! MindSpore's layout), an [`Event::MemoryCorruption`](crate::diag::Event::MemoryCorruption),
//! and per `on_corruption`: nothing more, a flight-recorder trigger, or
//! [`Error::MemoryCorruption`](crate::Error::MemoryCorruption) from
//! [`Step::kernel_ran`](crate::Step::kernel_ran).

use std::{
    borrow::Cow,
    fmt,
    path::PathBuf,
    sync::atomic::{AtomicU64, Ordering},
};

use dump_core::{DType, Summary, fmt::g, hash::hex, stats::summarize};

use super::tensor::TensorRef;
use crate::{
    Error,
    config::{CorruptionPolicy, WatcherConfig, watcher_names},
    diag::Event,
};

/// An owned handle on a watched output: reads the tensor as it is now, without a copy.
///
/// `read` calls `f` once with the tensor (the same dtype and shape every time); a handle
/// that cannot be read now (a device tensor whose copy failed) does not call it, and the
/// watcher reports it once as unreadable.
pub trait WatchedTensor: Send {
    /// Calls `f` with the tensor's current contents.
    fn read(&self, f: &mut dyn FnMut(TensorRef<'_>));
}

/// Any `Fn(&mut dyn FnMut(TensorRef))` closure that owns what it reads is a handle.
impl<F> WatchedTensor for F
where
    F: Fn(&mut dyn FnMut(TensorRef<'_>)) + Send,
{
    fn read(&self, f: &mut dyn FnMut(TensorRef<'_>)) {
        self(f)
    }
}

/// A raw view of a watched output living in memory the runtime manages itself (a custom
/// engine's arena): what a runtime without reference-counted tensors hands the watcher.
#[derive(Debug)]
pub struct RawView {
    ptr: *const u8,
    len: usize,
    dtype: DType,
    shape: Vec<usize>,
}

// SAFETY: a RawView only reads through its pointer, and `RawView::new`'s contract makes the
// memory readable from whichever thread the Step is used on for as long as the view lives.
unsafe impl Send for RawView {}

impl RawView {
    /// A view of the `len` bytes at `ptr`, holding a C-order tensor of `dtype` and `shape`.
    /// Errors (no view made) when `len` is not the storage of `shape` in `dtype`.
    ///
    /// # Safety
    ///
    /// From this call until the view is dropped (the end of the step it is handed to, or
    /// an earlier [`Step::watch_output`](crate::Step::watch_output) of the same output):
    /// the `len` bytes at `ptr` stay allocated and readable, and no other thread writes them
    /// while a [`Step`](crate::Step) call that reads the view runs
    /// ([`kernel_ran`](crate::Step::kernel_ran), [`watch_output`](crate::Step::watch_output),
    /// on the thread that calls it). Writes between those calls are what the watcher is for:
    /// the runtime's own kernels, and the out-of-bounds writes of a faulty one.
    pub unsafe fn new(
        ptr: *const u8,
        len: usize,
        dtype: DType,
        shape: &[usize],
    ) -> Result<RawView, crate::Error> {
        let want = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .and_then(|n| dtype.storage_bytes(n));
        if want != Some(len) || ptr.is_null() {
            return Err(crate::Error::Tensor {
                kernel: String::new(),
                io: "watched output",
                slot: 0,
                message: format!(
                    "a raw view of {len} bytes at {ptr:p} cannot hold a {dtype} tensor of \
                     shape {shape:?} ({} bytes)",
                    want.map_or_else(|| "too many".to_owned(), |n| n.to_string())
                ),
            });
        }
        Ok(RawView {
            ptr,
            len,
            dtype,
            shape: shape.to_vec(),
        })
    }
}

impl WatchedTensor for RawView {
    fn read(&self, f: &mut dyn FnMut(TensorRef<'_>)) {
        // SAFETY: `RawView::new`'s contract: the bytes stay allocated and readable while the
        // view lives, and nothing writes them during this call (made by a Step call).
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr, self.len) };
        f(TensorRef::host(self.dtype, &self.shape, bytes))
    }
}

/// What a watched output looked like at one check: its MD5 and statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchStats {
    /// The digest of the bytes, lowercase hex: their MD5, or for 128 KiB and more the MD5 of
    /// the MD5s of up to 16 equal pieces (hashed side by side; docs/watcher.md).
    pub md5: String,
    /// Largest value (`%g`, MindSpore's spelling); empty for an empty or complex tensor.
    pub max: String,
    /// Smallest value.
    pub min: String,
    /// Mean value.
    pub avg: String,
    /// NaN elements.
    pub nan: u64,
    /// −Inf elements.
    pub neg_inf: u64,
    /// +Inf elements.
    pub pos_inf: u64,
}

impl WatchStats {
    fn of(dtype: DType, bytes: &[u8], elems: usize, md5: [u8; 16]) -> Self {
        let s: Option<Summary> = summarize(dtype, bytes, elems).ok().flatten();
        let fmt_g = |v: f64| g(v).as_str().to_owned();
        WatchStats {
            md5: hex(&md5).as_str().to_owned(),
            max: s.map(|s| fmt_g(s.max)).unwrap_or_default(),
            min: s.map(|s| fmt_g(s.min)).unwrap_or_default(),
            avg: s
                .filter(|s| s.count > 0)
                .map(|s| fmt_g(s.sum / s.count as f64))
                .unwrap_or_default(),
            nan: s.map_or(0, |s| s.nan),
            neg_inf: s.map_or(0, |s| s.neg_inf),
            pos_inf: s.map_or(0, |s| s.pos_inf),
        }
    }
}

/// A watched output changed by a kernel that is not its writer: what watcher mode reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Corruption {
    /// The step.
    pub step: u64,
    /// The graph.
    pub graph: u32,
    /// Primitive type of the kernel that ran when the change was seen.
    pub op_type: String,
    /// That kernel's full name: the change happened while it ran (or, with `layer`, since
    /// [`checked_since`](Corruption::checked_since)).
    pub kernel: String,
    /// The kernel after which the output was last seen unchanged (its writer, or the
    /// previous checked kernel).
    pub checked_since: String,
    /// The watched output's writer (full name).
    pub watched: String,
    /// Its output slot.
    pub slot: u32,
    /// Its element type.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its digest and statistics before the change.
    pub before: WatchStats,
    /// And after.
    pub after: WatchStats,
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "memory corruption at step {}: output {} of {} ({} {:?}) changed while {} ran \
             (unchanged after {}); it is not that output's writer. before: md5 {} max {} min \
             {} avg {}; after: md5 {} max {} min {} avg {} (nan {}, -inf {}, +inf {})",
            self.step,
            self.slot,
            self.watched,
            self.dtype,
            self.shape,
            self.kernel,
            self.checked_since,
            self.before.md5,
            self.before.max,
            self.before.min,
            self.before.avg,
            self.after.md5,
            self.after.max,
            self.after.min,
            self.after.avg,
            self.after.nan,
            self.after.neg_inf,
            self.after.pos_inf,
        )
    }
}

/// The header of `watcher.csv`.
pub const WATCHER_CSV_HEADER: &str = "Step,Graph,Op Type,Op Name,Checked Since,Watched Op Name,\
Output Index,Data Type,Shape,MD5 Before,MD5 After,Max Before,Max After,Min Before,Min After,\
Avg Before,Avg After,Nan Count After,Negative Inf Count After,Positive Inf Count After\n";

impl Corruption {
    /// Its `watcher.csv` row (with `\n`; names quoted as csv needs).
    pub fn csv_row(&self) -> String {
        let mut row = String::new();
        let shape = self
            .shape
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join("x");
        let fields: [&str; 20] = [
            &self.step.to_string(),
            &self.graph.to_string(),
            &self.op_type,
            &self.kernel,
            &self.checked_since,
            &self.watched,
            &self.slot.to_string(),
            &self.dtype.to_string(),
            &shape,
            &self.before.md5,
            &self.after.md5,
            &self.before.max,
            &self.after.max,
            &self.before.min,
            &self.after.min,
            &self.before.avg,
            &self.after.avg,
            &self.after.nan.to_string(),
            &self.after.neg_inf.to_string(),
            &self.after.pos_inf.to_string(),
        ];
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                row.push(',');
            }
            // Writing to a String cannot fail.
            let _ = dump_stats::csv::write_field(&mut row, f);
        }
        row.push('\n');
        row
    }
}

/// One watched output of the step.
struct Watched {
    writer: String,
    slot: u32,
    dtype: DType,
    shape: Vec<usize>,
    /// The groups watching it (indices into the config's items).
    groups: Vec<usize>,
    handle: Box<dyn WatchedTensor>,
    digest: [u8; 16],
    /// Its statistics at the last check (those of `digest`'s bytes).
    stats: WatchStats,
    checked_since: String,
    /// Reported unreadable already.
    unreadable: bool,
}

/// What one check found.
pub(crate) struct Seen {
    /// The corruptions.
    found: Vec<Corruption>,
    /// The handles that could not be read (each reported once).
    unreadable: Vec<String>,
    /// Watched outputs read.
    reads: u64,
}

/// The handles of one step and their last digests (held by the [`Step`](crate::Step)).
#[derive(Default)]
pub(crate) struct WatchSet {
    watched: Vec<Watched>,
}

/// Bytes from which a watched output is hashed in lanes (below: one MD5 stream).
const LANE_MIN_BYTES: usize = 64 << 10;

/// The digest of a watched output: the MD5 of its bytes when they are fewer than
/// 2 × [`LANE_MIN_BYTES`]; otherwise the bytes are cut into up to 16 equal pieces (64-byte
/// multiples, the last one taking the rest), the pieces hashed side by side in the SIMD lanes
/// of [`md5_many`](dump_core::hash::md5_many) (about 8x one stream with AVX2), and the
/// digest is the MD5 of their MD5s. Any change of any byte changes a piece's MD5, so it
/// detects a change as strongly as one MD5 of the whole; it is not the `md5` column of
/// `statistic.csv` for large tensors.
fn digest(bytes: &[u8]) -> [u8; 16] {
    use dump_core::hash::{MD5_MAX_LANES, md5, md5_many};
    let pieces = (bytes.len() / LANE_MIN_BYTES).min(MD5_MAX_LANES);
    if pieces < 2 {
        return md5(bytes);
    }
    let size = (bytes.len() / pieces) & !63;
    let mut parts: [&[u8]; MD5_MAX_LANES] = [&[]; MD5_MAX_LANES];
    for (i, p) in parts.iter_mut().enumerate().take(pieces) {
        let end = if i + 1 == pieces {
            bytes.len()
        } else {
            (i + 1) * size
        };
        *p = &bytes[i * size..end];
    }
    let mut out = [[0u8; 16]; MD5_MAX_LANES];
    if md5_many(&parts[..pieces], &mut out).is_err() {
        // Cannot happen (`out` has a slot per piece); one stream is the same strength.
        return md5(bytes);
    }
    md5(out[..pieces].as_flattened())
}

/// Reads `h`: the digest of its bytes ([`digest`]), and their statistics unless `known` is that MD5 (the
/// bytes did not change: the caller's statistics still hold), or why it could not.
fn read(
    h: &dyn WatchedTensor,
    known: Option<[u8; 16]>,
) -> Result<([u8; 16], Option<WatchStats>), String> {
    let mut out = Err("the handle did not call back (not readable now)".to_owned());
    h.read(&mut |t: TensorRef<'_>| {
        out = (|| {
            let bytes: Cow<'_, [u8]> = t.contiguous()?;
            let digest = digest(&bytes);
            if known == Some(digest) {
                return Ok((digest, None));
            }
            let elems = t.elems().ok_or("the shape overflows")?;
            Ok((
                digest,
                Some(WatchStats::of(t.dtype(), &bytes, elems, digest)),
            ))
        })();
    });
    out
}

impl WatchSet {
    /// Number of handles held (tests check they are released).
    pub(crate) fn len(&self) -> usize {
        self.watched.len()
    }

    /// Output `slot` of `writer` (which just ran) is watched through `handle` from now on,
    /// replacing an earlier handle of the same output. Errors when the handle cannot be read.
    pub(crate) fn watch(
        &mut self,
        cfg: &WatcherConfig,
        (writer, slot): (&str, u32),
        (dtype, shape): (DType, &[usize]),
        handle: Box<dyn WatchedTensor>,
    ) -> Result<(), String> {
        let groups: Vec<usize> = cfg
            .items
            .iter()
            .enumerate()
            .filter(|(_, it)| it.nodes.iter().any(|n| watcher_names(n, writer)))
            .map(|(i, _)| i)
            .collect();
        if groups.is_empty() {
            return Ok(());
        }
        let (digest, stats) = read(handle.as_ref(), None)?;
        let w = Watched {
            writer: writer.to_owned(),
            slot,
            dtype,
            shape: shape.to_vec(),
            groups,
            handle,
            digest,
            stats: stats.unwrap_or_default(),
            checked_since: writer.to_owned(),
            unreadable: false,
        };
        match self
            .watched
            .iter_mut()
            .find(|o| o.writer == writer && o.slot == slot)
        {
            Some(old) => *old = w,
            None => self.watched.push(w),
        }
        Ok(())
    }

    /// Kernel `name` (type `op_type`) just ran: every watched output whose group checks after
    /// it is read again. Returns the corruptions seen, and the handles that could not be read
    /// (reported once each).
    pub(crate) fn after_kernel(
        &mut self,
        cfg: &WatcherConfig,
        (step, graph): (u64, u32),
        (op_type, name): (&str, &str),
    ) -> Seen {
        let mut found = Vec::new();
        let mut reads = 0;
        let mut unreadable = Vec::new();
        for w in &mut self.watched {
            let own = w.writer == name;
            let checked = own
                || w.groups.iter().any(|&g| {
                    let layer = &cfg.items[g].layer;
                    layer.is_empty() || layer.iter().any(|l| watcher_names(l, name))
                });
            if !checked {
                continue;
            }
            reads += 1;
            let (digest, stats) = match read(w.handle.as_ref(), Some(w.digest)) {
                Ok(r) => r,
                Err(why) => {
                    if !std::mem::replace(&mut w.unreadable, true) {
                        unreadable.push(format!("output {} of {}: {why}", w.slot, w.writer));
                    }
                    continue;
                }
            };
            if let Some(after) = stats {
                // Changed (a read returns statistics only for bytes whose MD5 changed).
                let before = std::mem::replace(&mut w.stats, after);
                w.digest = digest;
                if !own {
                    found.push(Corruption {
                        step,
                        graph,
                        op_type: op_type.to_owned(),
                        kernel: name.to_owned(),
                        checked_since: w.checked_since.clone(),
                        watched: w.writer.clone(),
                        slot: w.slot,
                        dtype: w.dtype,
                        shape: w.shape.clone(),
                        before,
                        after: w.stats.clone(),
                    });
                }
            }
            name.clone_into(&mut w.checked_since);
        }
        Seen {
            found,
            unreadable,
            reads,
        }
    }
}

/// A Dumper's watcher: the settings and `watcher.csv` (held by the shared state).
pub(crate) struct Watcher {
    pub(crate) cfg: WatcherConfig,
    /// `watcher.csv`, and whether this Dumper has written to it yet (the lock orders rows).
    csv: (PathBuf, std::sync::Mutex<bool>),
    /// Watched outputs read again after a kernel, and corruptions found, so far.
    counts: (AtomicU64, AtomicU64),
}

impl Watcher {
    /// The watcher of a dump laid out by `layout`: `watcher.csv` beside the flight
    /// recorder's first `trigger.json` (the rank directory in MindSpore's layout).
    pub(crate) fn new(cfg: WatcherConfig, layout: &dyn crate::layout::OutputLayout) -> Self {
        let t = layout.trigger_file(1);
        let path = t
            .parent()
            .map_or_else(|| PathBuf::from("watcher.csv"), |p| p.join("watcher.csv"));
        Watcher {
            cfg,
            csv: (path, std::sync::Mutex::new(false)),
            counts: (AtomicU64::new(0), AtomicU64::new(0)),
        }
    }

    /// Watched outputs read again after a kernel, and corruptions found, so far.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.counts.0.load(Ordering::Relaxed),
            self.counts.1.load(Ordering::Relaxed),
        )
    }

    /// Reports what a check found: a `watcher.csv` row and an event per corruption, an event
    /// per unreadable handle; under `on_corruption` `record` the flight recorder is armed
    /// (through `arm`), under `stop` the first corruption is returned as the error.
    pub(crate) fn report(&self, s: &super::shared::Shared, seen: Seen) -> Result<(), Error> {
        let Seen {
            found,
            unreadable,
            reads,
        } = seen;
        self.counts.0.fetch_add(reads, Ordering::Relaxed);
        self.counts
            .1
            .fetch_add(found.len() as u64, Ordering::Relaxed);
        for what in unreadable {
            s.events.emit(&Event::WatchedUnreadable { what });
        }
        if found.is_empty() {
            return Ok(());
        }
        {
            let mut started = self.csv.1.lock().unwrap_or_else(|e| e.into_inner());
            let path = &self.csv.0;
            let mut text = String::new();
            if !*started && !path.exists() {
                text.push_str(WATCHER_CSV_HEADER);
            }
            for c in &found {
                text.push_str(&c.csv_row());
            }
            let dir = path.parent().unwrap_or(path);
            if s.out.tree.ensure_dir(dir).is_ok() {
                s.out.tables.append_line(path, &text);
                *started = true;
            }
        }
        for c in &found {
            s.events.emit(&Event::MemoryCorruption(Box::new(c.clone())));
        }
        match self.cfg.on_corruption {
            CorruptionPolicy::Continue => Ok(()),
            CorruptionPolicy::Record => {
                let c = &found[0];
                s.arm_trigger(&format!(
                    "memory corruption: output {} of {} changed while {} ran",
                    c.slot, c.watched, c.kernel
                ));
                Ok(())
            }
            CorruptionPolicy::Stop => {
                let mut found = found;
                Err(Error::MemoryCorruption(Box::new(found.swap_remove(0))))
            }
        }
    }
}

/// The watcher settings of `plan` are usable: every problem of a Rust-built config, `record`
/// with a flight recorder, a normal dump (op_debug_mode 0).
pub(crate) fn check_plan(plan: &super::DumpPlan) -> Result<(), Error> {
    let Some(w) = &plan.watcher else {
        return Ok(());
    };
    let mut p = w.problems();
    if plan.op_debug_mode != crate::config::OpDebugMode::Off {
        p.push(format!(
            "watcher mode watches a normal dump; op_debug_mode is {}, allowed: 0",
            plan.op_debug_mode.as_u32()
        ));
    }
    if w.on_corruption == CorruptionPolicy::Record && plan.flight.is_none() {
        p.push(
            "on_corruption \"record\" fires the flight recorder, and there is none; add one \
             or use continue or stop"
                .to_owned(),
        );
    }
    if p.is_empty() {
        Ok(())
    } else {
        Err(Error::Plan(p.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corruption(kernel: &str) -> Corruption {
        Corruption {
            step: 3,
            graph: 1,
            op_type: "Add".into(),
            kernel: kernel.into(),
            checked_since: "Default/Mul-op0".into(),
            watched: "Default/Conv-op1".into(),
            slot: 2,
            dtype: DType::Float16,
            shape: vec![2, 3],
            before: WatchStats {
                md5: "aa".into(),
                max: "1".into(),
                ..WatchStats::default()
            },
            after: WatchStats {
                md5: "bb".into(),
                max: "9".into(),
                nan: 4,
                ..WatchStats::default()
            },
        }
    }

    #[test]
    fn a_row_has_the_header_s_columns_and_quotes_hostile_names() {
        let row = corruption("Default/a,\"b\"/Add-op2").csv_row();
        assert_eq!(
            row,
            "3,1,Add,\"Default/a,\"\"b\"\"/Add-op2\",Default/Mul-op0,Default/Conv-op1,2,\
             float16,2x3,aa,bb,1,9,,,,,4,0,0\n"
        );
        let plain = corruption("Default/Add-op2").csv_row();
        assert_eq!(
            plain.split(',').count(),
            WATCHER_CSV_HEADER.split(',').count()
        );
    }

    #[test]
    fn the_digest_of_a_large_output_sees_a_change_of_any_byte() {
        use dump_core::hash::md5;
        let small = vec![7u8; 1000];
        assert_eq!(digest(&small), md5(&small));
        // 16 pieces of 64 KiB + 5 bytes left for the last one.
        let mut big: Vec<u8> = (0..16 * LANE_MIN_BYTES + 5)
            .map(|i| (i % 251) as u8)
            .collect();
        let d0 = digest(&big);
        assert_ne!(d0, md5(&big));
        // The MD5 of the pieces' MD5s, the pieces as documented.
        let size = (big.len() / 16) & !63;
        let mut cat = Vec::new();
        for i in 0..16 {
            let end = if i == 15 { big.len() } else { (i + 1) * size };
            cat.extend_from_slice(&md5(&big[i * size..end]));
        }
        assert_eq!(d0, md5(&cat));
        for at in [0, size - 1, size, 8 * size + 3, big.len() - 1] {
            big[at] ^= 1;
            assert_ne!(digest(&big), d0, "byte {at}");
            big[at] ^= 1;
        }
        assert_eq!(digest(&big), d0);
    }

    #[test]
    fn statistics_are_computed_only_for_changed_bytes() {
        let v = [1.0f32, -2.0, 4.0];
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let shape = [3usize];
        let h =
            |f: &mut dyn FnMut(TensorRef<'_>)| f(TensorRef::host(DType::Float32, &shape, &bytes));
        let (d, s) = read(&h, None).unwrap();
        let s = s.unwrap();
        assert_eq!(
            (s.max.as_str(), s.min.as_str(), s.avg.as_str()),
            ("4", "-2", "1")
        );
        assert_eq!(s.md5, hex(&d).as_str());
        // The same bytes again: the digest only.
        assert_eq!(read(&h, Some(d)).unwrap(), (d, None));
        // A handle that never calls back is unreadable, with a reason.
        let silent = |_: &mut dyn FnMut(TensorRef<'_>)| {};
        assert!(
            read(&silent, None)
                .unwrap_err()
                .contains("did not call back")
        );
    }
}
