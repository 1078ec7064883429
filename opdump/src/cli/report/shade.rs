//! How bad each kernel is, judged once when a report value is built ([`compare_worst`],
//! [`inspect_nonfinite`]) and read by the renderers: the graph view colours its nodes by it
//! (`--html`), `--json` lists it (`kernel_shades`).

use dump_read::{
    Dump, KernelRef, Stats,
    compare::{PairOutcome, PairResult},
};
use dump_stats::Io;

/// How bad a kernel is, worse the later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shade {
    /// Nothing to judge it by (no pair, no statistics).
    Unknown,
    /// Within 1e-6 relative error (compare), or every output finite (inspect).
    Close,
    /// Within 1e-4.
    Near,
    /// Within 1e-3.
    Drift,
    /// Over 1e-3 but within tolerance.
    Far,
    /// Outside tolerance (compare), or NaN/Inf in its outputs (inspect).
    Bad,
    /// The first divergent (compare) or first non-finite (inspect) kernel.
    First,
}

impl Shade {
    /// Every shade, mildest first.
    pub const ALL: [Shade; 7] = [
        Shade::Unknown,
        Shade::Close,
        Shade::Near,
        Shade::Drift,
        Shade::Far,
        Shade::Bad,
        Shade::First,
    ];

    /// The shade of a pair's largest relative error `rel` (NaN: unknown), `diverged` or not.
    pub fn of_error(rel: f64, diverged: bool) -> Shade {
        if diverged {
            Shade::Bad
        } else if rel.is_nan() {
            Shade::Unknown
        } else if rel <= 1e-6 {
            Shade::Close
        } else if rel <= 1e-4 {
            Shade::Near
        } else if rel <= 1e-3 {
            Shade::Drift
        } else {
            Shade::Far
        }
    }

    /// Its name in `--json` (`unknown`, `close`, `near`, `drift`, `far`, `bad`, `first`).
    pub fn as_str(self) -> &'static str {
        match self {
            Shade::Unknown => "unknown",
            Shade::Close => "close",
            Shade::Near => "near",
            Shade::Drift => "drift",
            Shade::Far => "far",
            Shade::Bad => "bad",
            Shade::First => "first",
        }
    }
}

/// A pair's largest relative error: over its elements (`+inf` where their NaN/Inf positions
/// differ), or over its statistics; NaN when neither says.
pub fn rel_error(p: &PairResult) -> f64 {
    match &p.outcome {
        PairOutcome::Elements(m) if m.nonfinite_mismatch > 0 => f64::INFINITY,
        PairOutcome::Elements(m) => m.max_rel,
        PairOutcome::Statistics { rel } => rel
            .iter()
            .flatten()
            .copied()
            .reduce(f64::max)
            .unwrap_or(f64::NAN),
        _ => f64::NAN,
    }
}

/// A compare kernel's worst pair.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelWorst {
    /// Its shade: the worst of its pairs' ([`Shade::First`] for the first divergent pair's).
    pub shade: Shade,
    /// That pair's largest relative error ([`rel_error`]).
    pub rel: f64,
    /// That pair (an index into the comparison's pairs).
    pub pair: usize,
}

/// Per kernel of `kernels` (A's), its worst pair among `pairs` (whose `a` tensors and
/// `rel` errors are given), `None` for a kernel without a pair: the worse shade, then the
/// larger error, then an output over an input (so that a tie links an output's row).
pub fn compare_worst(
    a: &Dump,
    kernels: &[KernelRef],
    pairs: &[PairResult],
    rel: &[f64],
    first: Option<usize>,
) -> Vec<Option<KernelWorst>> {
    let mut kernel_of = vec![usize::MAX; a.tensors.len()];
    for (n, k) in kernels.iter().enumerate() {
        for &t in &k.tensors {
            kernel_of[t] = n;
        }
    }
    let key = |rel: f64| if rel.is_nan() { -1.0 } else { rel };
    let out = |i: usize| a.tensors[pairs[i].a].id.io == Io::Output;
    let mut worst: Vec<Option<KernelWorst>> = vec![None; kernels.len()];
    for (i, p) in pairs.iter().enumerate() {
        let Some(&n) = kernel_of.get(p.a).filter(|&&n| n != usize::MAX) else {
            continue;
        };
        let shade = if first == Some(i) {
            Shade::First
        } else {
            Shade::of_error(rel[i], p.diverged())
        };
        let better = match worst[n] {
            None => true,
            Some(w) => {
                shade > w.shade
                    || (shade == w.shade && key(rel[i]) > key(w.rel))
                    || (shade == w.shade && key(rel[i]) == key(w.rel) && out(i) && !out(w.pair))
            }
        };
        if better {
            worst[n] = Some(KernelWorst {
                shade,
                rel: rel[i],
                pair: i,
            });
        }
    }
    worst
}

/// An inspect kernel's outputs' NaN/Inf count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelNonfinite {
    /// [`Shade::First`] for the first non-finite kernel, [`Shade::Bad`] with NaN/Inf,
    /// [`Shade::Close`] when every output is finite, [`Shade::Unknown`] when no statistic
    /// says.
    pub shade: Shade,
    /// NaN and Inf elements in its outputs (`None` when no statistic counts them).
    pub count: Option<u64>,
}

/// Per kernel of `kernels`, its outputs' NaN/Inf count (from `stats`, per tensor of `dump`)
/// and shade; kernel `first` is the first non-finite one.
pub fn inspect_nonfinite(
    dump: &Dump,
    kernels: &[KernelRef],
    stats: &[Option<Stats>],
    first: Option<usize>,
) -> Vec<KernelNonfinite> {
    kernels
        .iter()
        .enumerate()
        .map(|(n, k)| {
            let mut count: Option<u64> = None;
            for &i in &k.tensors {
                if dump.tensors[i].id.io != Io::Output {
                    continue;
                }
                let Some(st) = stats.get(i).and_then(Option::as_ref) else {
                    continue;
                };
                if let Some(nan) = st.nan {
                    count = Some(count.unwrap_or(0) + nan);
                }
                if let (Some(p), Some(m)) = (st.pos_inf, st.neg_inf) {
                    count = Some(count.unwrap_or(0) + p + m);
                }
            }
            let shade = match count {
                _ if first == Some(n) => Shade::First,
                Some(c) if c > 0 => Shade::Bad,
                Some(_) => Shade::Close,
                None => Shade::Unknown,
            };
            KernelNonfinite { shade, count }
        })
        .collect()
}
