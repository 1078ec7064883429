//! [`NonFiniteAt`]: where a watched output went non-finite, taken from the statistics the
//! Dumper computed anyway (no second pass over the tensor).

use core::fmt;

use dump_core::{DType, Summary};

/// A watched output that holds NaN or ±Inf: the kernel, the step and the tensor, with the
/// counts from its statistics. Held by [`Error::NonFinite`](crate::Error::NonFinite) and
/// written into `trigger.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonFiniteAt {
    /// The step (iteration) number.
    pub step: u64,
    /// The graph id.
    pub graph: u32,
    /// The kernel's op type.
    pub op_type: String,
    /// The kernel's full scope name.
    pub kernel: String,
    /// `output` (or `input` for a parameter's value).
    pub io: &'static str,
    /// The output slot.
    pub slot: u32,
    /// Its element type.
    pub dtype: DType,
    /// NaN elements.
    pub nan: u64,
    /// `+inf` elements.
    pub pos_inf: u64,
    /// `-inf` elements.
    pub neg_inf: u64,
}

impl fmt::Display for NonFiniteAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel {} ({}) at step {} (graph {}): {} {} ({}) holds {} NaN, {} +Inf, {} -Inf",
            self.kernel,
            self.op_type,
            self.step,
            self.graph,
            self.io,
            self.slot,
            self.dtype.name(),
            self.nan,
            self.pos_inf,
            self.neg_inf
        )
    }
}

/// The non-finite counts of one tensor's statistics (`None` when it is all finite).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) dtype: DType,
    pub(crate) nan: u64,
    pub(crate) pos_inf: u64,
    pub(crate) neg_inf: u64,
}

impl Counts {
    /// The counts of `s`, when any is non-zero.
    pub(crate) fn of(dtype: DType, s: &Summary) -> Option<Counts> {
        (s.nan + s.pos_inf + s.neg_inf > 0).then_some(Counts {
            dtype,
            nan: s.nan,
            pos_inf: s.pos_inf,
            neg_inf: s.neg_inf,
        })
    }
}
