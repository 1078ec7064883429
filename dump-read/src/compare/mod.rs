//! Comparing two dumps: tensors paired across the dumps ([`pair_tensors`]), per-pair metrics
//! from one fused pass over both files ([`compare_files`]), and the first divergent operator
//! in run order.
//!
//! A pair **diverges** when an element is outside its dtype's tolerance (numpy's `allclose`
//! rule `|a - b| <= atol + rtol * |b|`, defaults in
//! [`Tolerance::default_for`](dump_core::compare::Tolerance::default_for), overridable per
//! dtype; by default atol scales with the reference tensor's magnitude, see
//! [`Tolerances::for_tensor`]), when NaN/Inf positions differ, or when shapes (other than by
//! dimensions of size 1, which are compared by value with a [`Note`]) or dtypes differ. Cosine
//! similarity is
//! reported but never decides alone (a scaled tensor keeps cosine 1). Statistic-only dumps are
//! compared by the relative differences of max/min/avg/l2norm (the same tolerance rule on each
//! statistic); md5-only rows by equality.

pub mod cross;
pub mod kinds;
mod mapping;
mod metrics;
mod pair;
mod rule;

use std::collections::HashMap;

use dump_core::{
    DType,
    compare::{PairMetrics, Tolerance},
};

pub use mapping::{MAX_MAPPING_FILE, Mapping, SECTIONS};
pub use metrics::{compare_files, compare_sources};
pub use pair::{PairRule, Pairing, pair_tensors, pair_tensors_with};

use crate::{Dump, Stats};

/// Tolerances per dtype: opdump's defaults unless overridden.
#[derive(Clone, Debug, Default)]
pub struct Tolerances {
    overrides: HashMap<DType, Tolerance>,
    rtol: Option<f64>,
    atol: Option<f64>,
}

impl Tolerances {
    /// Overrides the tolerance of one dtype.
    pub fn set(&mut self, dtype: DType, tol: Tolerance) {
        self.overrides.insert(dtype, tol);
    }

    /// Overrides rtol and/or atol of every dtype without its own override (`None` keeps the
    /// dtype's default for that one).
    pub fn set_all(&mut self, rtol: Option<f64>, atol: Option<f64>) {
        self.rtol = rtol;
        self.atol = atol;
    }

    /// The tolerance for a tensor of `dtype` whose reference (B) has largest magnitude
    /// `magnitude` (`max(|max|, |min|)` of its statistic row): the dtype's defaults, except that when neither a
    /// `--tol` for the dtype nor a global atol is set, atol scales with the tensor,
    /// `atol = rtol / 10 * magnitude` (so rounding in a tensor of magnitude 50 is not flagged
    /// by a fixed 1e-6, and a 1% change of a tensor whose values are all near 1e-7 is still
    /// caught). Without a finite magnitude the dtype's default atol is used.
    pub fn for_tensor(&self, dtype: DType, magnitude: Option<f64>) -> Tolerance {
        let t = self.get(dtype);
        match magnitude {
            Some(m) if self.scales(dtype) && m.is_finite() && t.atol > 0.0 => Tolerance {
                rtol: t.rtol,
                atol: t.rtol / 10.0 * m,
            },
            _ => t,
        }
    }

    /// Whether atol scales with the tensor for `dtype` (no override of it).
    pub fn scales(&self, dtype: DType) -> bool {
        !self.overrides.contains_key(&dtype) && self.atol.is_none()
    }

    /// The tolerance used for `dtype`.
    pub fn get(&self, dtype: DType) -> Tolerance {
        if let Some(t) = self.overrides.get(&dtype) {
            return *t;
        }
        let d = Tolerance::default_for(dtype);
        Tolerance {
            rtol: self.rtol.unwrap_or(d.rtol),
            atol: self.atol.unwrap_or(d.atol),
        }
    }
}

/// How a pair was compared, with what it measured.
#[derive(Clone, Debug, PartialEq)]
pub enum PairOutcome {
    /// Both files read: element-wise metrics.
    Elements(PairMetrics),
    /// Statistics only: relative difference `|a - b| / |b|` of max, min, avg, l2norm
    /// (`None` where a side lacks the column).
    Statistics {
        /// max, min, avg, l2norm.
        rel: [Option<f64>; 4],
    },
    /// Digests only: whether the MD5 (or SHA-1) is equal.
    Digest {
        /// Equal digests.
        equal: bool,
    },
    /// Not comparable: shapes or dtypes differ, a file could not be read, or there is
    /// nothing in common to compare.
    Mismatch(Divergence),
}

/// Why a pair diverges. The library names the facts; the command line words them (a new
/// reason is a compile error there until it is worded).
#[derive(Clone, Debug, PartialEq)]
pub enum Divergence {
    /// The element types differ.
    DTypes {
        /// A's.
        a: dump_core::DType,
        /// B's.
        b: dump_core::DType,
    },
    /// The shapes differ.
    Shapes {
        /// A's.
        a: Vec<usize>,
        /// B's.
        b: Vec<usize>,
    },
    /// A file of the pair could not be read (the error, as text: a result stays cloneable).
    Unreadable(String),
    /// NaN/Inf are at different positions in this many elements.
    NonfinitePositions(u64),
    /// Elements outside `|a - b| <= atol + rtol * |b|`.
    NotClose {
        /// Elements outside.
        not_close: u64,
        /// Elements compared.
        count: u64,
        /// The tolerance applied.
        tolerance: Tolerance,
        /// Largest `|a - b|`.
        max_abs: f64,
        /// Largest `|a - b| / |b|`.
        max_rel: f64,
    },
    /// A statistic (`max`, `min`, `avg`, `l2norm`) differs beyond the tolerance, or only one
    /// side is finite.
    Statistic {
        /// Which.
        name: &'static str,
        /// A's value.
        a: f64,
        /// B's value.
        b: f64,
    },
    /// The digests differ.
    Digests {
        /// A's (lowercase hex).
        a: String,
        /// B's.
        b: String,
    },
    /// No files on both sides, no common statistic and no digest.
    NothingToCompare,
}

/// One compared pair.
#[derive(Clone, Debug, PartialEq)]
pub struct PairResult {
    /// Index into A's tensors.
    pub a: usize,
    /// Index into B's tensors.
    pub b: usize,
    /// The rule that paired them.
    pub rule: PairRule,
    /// The tolerance applied.
    pub tolerance: Tolerance,
    /// What was measured.
    pub outcome: PairOutcome,
    /// Statistics of A's tensor (from its row, or computed).
    pub stats_a: Stats,
    /// Statistics of B's tensor.
    pub stats_b: Stats,
    /// Whether the pair diverges, and why (empty when within tolerance).
    pub reasons: Vec<Divergence>,
    /// What the reader should know about how the pair was compared.
    pub notes: Vec<Note>,
}

/// A remark on how a pair was compared (not a divergence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// The shapes differ only in dimensions of size 1 (`[1, 1, 384]` and `[384]`): the same
    /// elements in the same order, compared by value.
    Reshaped {
        /// A's shape.
        a: Vec<usize>,
        /// B's shape.
        b: Vec<usize>,
    },
    /// A view's output (a flatten or reshape on either side) recorded with another shape of
    /// as many elements (MindSpore dumps Flatten's output with its input's shape): the same
    /// elements in the same order, compared by value.
    Viewed {
        /// A's shape.
        a: Vec<usize>,
        /// B's shape.
        b: Vec<usize>,
    },
}

/// Whether shapes `a` and `b` hold the same elements in the same C order: equal once their
/// dimensions of size 1 are removed.
pub fn same_but_unit_dims(a: &[usize], b: &[usize]) -> bool {
    a.iter()
        .filter(|&&d| d != 1)
        .eq(b.iter().filter(|&&d| d != 1))
}

impl PairResult {
    /// `true` when the pair is outside tolerance. A pair that could not be read is not: it
    /// is [unreadable](PairResult::unreadable), trouble rather than a finding.
    pub fn diverged(&self) -> bool {
        !self.reasons.is_empty() && !self.unreadable()
    }

    /// `true` when a file of the pair could not be read ([`Divergence::Unreadable`]): nothing
    /// was compared.
    pub fn unreadable(&self) -> bool {
        self.reasons
            .iter()
            .any(|d| matches!(d, Divergence::Unreadable(_)))
    }
}

/// A whole comparison.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// Every pair, in A's run order.
    pub pairs: Vec<PairResult>,
    /// A's tensors with no partner.
    pub only_in_a: Vec<usize>,
    /// B's tensors with no partner.
    pub only_in_b: Vec<usize>,
    /// A's tensors inside an ONNX node that the dumps compute with different kernels (a
    /// decomposition's helpers and inputs), with the node's name: not paired, the node's
    /// outputs are ([`Pairing::within_a`]).
    pub within_a: Vec<(usize, String)>,
    /// B's tensors inside such a node.
    pub within_b: Vec<(usize, String)>,
    /// A's tensors fused into an ONNX node of B that pairs with a later call
    /// ([`Pairing::fused_a`]), with the node's name.
    pub fused_a: Vec<(usize, String)>,
    /// B's tensors fused so into a node of A.
    pub fused_b: Vec<(usize, String)>,
    /// Unpaired outputs of A with their nearest unpaired outputs of B ([`Pairing::nearest_a`]).
    pub nearest_a: Vec<(usize, Vec<usize>)>,
    /// Unpaired outputs of B with their nearest unpaired outputs of A.
    pub nearest_b: Vec<(usize, Vec<usize>)>,
    /// Index into `pairs` of the first divergent pair in run order.
    pub first_divergent: Option<usize>,
}

/// Compares dumps `a` and `b`: pairs tensors, measures every pair (pairs spread over
/// `threads` threads), and finds the first divergent one in A's run order. `progress` is
/// called with (pairs done, pairs total) from the worker threads.
pub fn compare(
    a: &Dump,
    b: &Dump,
    tol: &Tolerances,
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Comparison {
    compare_with(a, b, tol, None, threads, progress)
}

/// [`compare`] with a user's [`Mapping`] tried before the automatic pairing rules.
pub fn compare_with(
    a: &Dump,
    b: &Dump,
    tol: &Tolerances,
    mapping: Option<&Mapping>,
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Comparison {
    let pairing = pair_tensors_with(a, b, mapping);
    let total = pairing.pairs.len();
    let results = crate::par_map(
        total,
        threads,
        |i| {
            let (ia, ib, rule) = pairing.pairs[i];
            metrics::measure(a, b, ia, ib, rule, tol)
        },
        progress,
    );
    // A worker that panicked loses only its own pairs (reported as missing below).
    let pairs: Vec<PairResult> = results.into_iter().flatten().collect();
    let first_divergent = pairs.iter().position(PairResult::diverged);
    Comparison {
        pairs,
        only_in_a: pairing.only_in_a,
        only_in_b: pairing.only_in_b,
        within_a: pairing.within_a,
        within_b: pairing.within_b,
        fused_a: pairing.fused_a,
        fused_b: pairing.fused_b,
        nearest_a: pairing.nearest_a,
        nearest_b: pairing.nearest_b,
        first_divergent,
    }
}
