//! [`StepRecord`]: what the flight recorder holds of one step, in the order the runtime
//! reported it: statistic rows (formatted, as they would have been appended), tensor copies
//! (named, as they would have been written) and kernel arguments.

use std::{
    path::{Path, PathBuf},
    sync::Mutex,
};

use dump_core::DType;

use super::nonfinite::NonFiniteAt;
use crate::dumper::msprobe::HeldDoc;

/// One thing a step would have written.
pub(crate) enum Held {
    /// A statistic row for the table at `csv`.
    Row {
        /// The table (`statistic.csv` of the step's directory).
        csv: PathBuf,
        /// The row with its `\n`.
        text: String,
    },
    /// A tensor file.
    Npy(HeldNpy),
    /// A kernel's arguments (`save_kernel_args`).
    Args {
        /// The kernel's full name.
        kernel: String,
        /// Its arguments.
        args: Vec<(String, String)>,
    },
}

/// A tensor file held: its name and layout, and its bytes while the budget keeps them.
pub(crate) struct HeldNpy {
    /// The file name (before the long-name mapping).
    pub(crate) name: String,
    pub(crate) dtype: DType,
    pub(crate) shape: Vec<usize>,
    /// The host copy; `None` once the budget let it go (the row is kept).
    pub(crate) bytes: Option<Vec<u8>>,
    /// The bytes' length (the copy's buffer may be larger).
    pub(crate) len: usize,
    /// A device copy still landing in `bytes` (waited for when the step ends).
    pub(crate) pending: Option<PendingHeld>,
}

/// A device-to-host copy a held tensor is waiting for, and what its statistic row needs
/// when the bytes land at the end of the step.
pub(crate) struct PendingHeld {
    pub(crate) copy: Box<dyn dump_stats::PendingCopy>,
    pub(crate) op_type: String,
    /// The kernel's full name.
    pub(crate) kernel: String,
    pub(crate) io: dump_stats::Io,
    pub(crate) slot: u32,
    /// The row's timestamp (taken when the tensor was reported).
    pub(crate) ts: u64,
    pub(crate) elems: usize,
}

/// What fired a trigger.
#[derive(Clone, Debug)]
pub(crate) enum Fired {
    /// A watched output went non-finite (`kind`: `nonfinite` or `overflow`).
    Output { kind: &'static str, at: NonFiniteAt },
    /// [`Dumper::trigger`](crate::Dumper::trigger) or a [`TriggerHandle`](super::TriggerHandle).
    User { reason: String },
    /// The statistic rule: an output's l2norm grew past `factor` times its ring median.
    Growth(Growth),
}

/// Where the `l2norm_growth` rule fired.
#[derive(Clone, Debug)]
pub(crate) struct Growth {
    pub(crate) step: u64,
    pub(crate) graph: u32,
    pub(crate) op_type: String,
    pub(crate) kernel: String,
    pub(crate) slot: u32,
    pub(crate) l2norm: f64,
    pub(crate) median: f64,
    pub(crate) factor: f64,
}

impl Fired {
    /// `nonfinite`, `overflow` or `user`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Fired::Output { kind, .. } => kind,
            Fired::User { .. } => "user",
            Fired::Growth(_) => "l2norm_growth",
        }
    }

    /// The kernel that fired it, or the user's reason.
    pub(crate) fn what(&self) -> String {
        match self {
            Fired::Output { at, .. } => format!("{} {} {}", at.kernel, at.io, at.slot),
            Fired::User { reason } => reason.clone(),
            Fired::Growth(g) => format!(
                "{} output {}: l2norm {} > {} x ring median {}",
                g.kernel, g.slot, g.l2norm, g.factor, g.median
            ),
        }
    }
}

/// The mutable part of a [`StepRecord`].
#[derive(Default)]
pub(crate) struct Record {
    pub(crate) entries: Vec<Held>,
    /// Bytes of tensor copies held (buffer capacities).
    pub(crate) bytes: u64,
    /// Tensors the budget let go.
    pub(crate) dropped: u64,
    /// Anything was reported (the step goes into the global execution order when written).
    pub(crate) used: bool,
    /// The first watched output that went non-finite, in report order.
    pub(crate) first_nonfinite: Option<NonFiniteAt>,
    /// Where in report order `first_nonfinite` (and an output trigger in `fired`) was seen
    /// (see [`Order`]).
    pub(crate) first_at: Order,
    /// The trigger this step fired (the first), written when the step ends.
    pub(crate) fired: Option<Fired>,
}

/// A tensor's place in its step's report order, for outputs whose statistics are known only
/// when the step ends (a deferred device copy): `2 n` for a tensor checked when reported, after
/// `n` held entries; `2 i + 1` for the held entry at index `i` checked when the step ends. A
/// tensor reported earlier always orders first.
pub(crate) type Order = usize;

/// One step held by the flight recorder (or the constants of the graphs, held until the
/// first write).
pub(crate) struct StepRecord {
    pub(crate) graph: u32,
    pub(crate) iteration: u64,
    /// The step's directory (where its files would have gone).
    pub(crate) dir: PathBuf,
    /// `false` for the constants' record (never in the global execution order).
    pub(crate) is_step: bool,
    pub(crate) inner: Mutex<Record>,
    /// msprobe's layout: the step's document (dump.json, construct.json, stack.json), written
    /// with the step's tensor files.
    pub(crate) doc: Option<HeldDoc>,
}

impl StepRecord {
    pub(crate) fn new(graph: u32, iteration: u64, dir: &Path, is_step: bool) -> Self {
        StepRecord {
            graph,
            iteration,
            dir: dir.to_owned(),
            is_step,
            inner: Mutex::new(Record::default()),
            doc: None,
        }
    }

    /// The record with msprobe's document `doc` of the step.
    pub(crate) fn with_doc(mut self, doc: Option<HeldDoc>) -> Self {
        self.doc = doc;
        self
    }

    /// Where the step was written: its msprobe rank directory, else its directory.
    pub(crate) fn written_dir(&self) -> &Path {
        self.doc.as_ref().map_or(&self.dir, HeldDoc::dir)
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Record> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lets go of the earliest tensor copies until `over` bytes are freed (or none is left);
    /// returns the bytes and buffers freed.
    pub(crate) fn let_go(&self, over: u64) -> (u64, Vec<Vec<u8>>) {
        let mut r = self.lock();
        let mut freed = 0u64;
        let mut bufs = Vec::new();
        let mut dropped = 0;
        for e in r.entries.iter_mut() {
            if freed >= over {
                break;
            }
            // A copy still landing is kept: its row is computed from it when the step ends.
            if let Held::Npy(n) = e
                && n.pending.is_none()
                && let Some(b) = n.bytes.take()
            {
                freed += b.capacity() as u64;
                dropped += 1;
                bufs.push(b);
            }
        }
        r.bytes -= freed.min(r.bytes);
        r.dropped += dropped;
        (freed, bufs)
    }
}
