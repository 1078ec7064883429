//! [`InspectReport`]: everything `opdump inspect` found, built once by the command and read by
//! every renderer (`text`, `json`, `html`), none of which derives anything again.

use std::path::Path;

use dump_read::{
    Dump, KernelRef, Stats,
    inspect::Inspection,
    train::{ParameterTrend, Role, Verdict, parameter_of},
};
use dump_stats::Io;

/// What a kernel is in a training step: its role and, when it belongs to one, the parameter.
pub struct KernelRole {
    /// Activation, gradient, parameter or optimizer.
    pub role: Role,
    /// The parameter a gradient, update or parameter kernel belongs to.
    pub parameter: Option<String>,
}

impl KernelRole {
    /// The role of kernel `k`, from its op type and name.
    pub fn of(k: &KernelRef) -> KernelRole {
        KernelRole {
            role: Role::of_kernel(k),
            parameter: parameter_of(&k.op_type, &k.op_name),
        }
    }
}

/// The figures of one parameter's row: its gradient norm's first, last and largest finite
/// value, and its update ratio's last and largest finite value (`None` where none is).
pub struct TrendFigures {
    /// The first gradient norm dumped.
    pub grad_first: Option<f64>,
    /// The last gradient norm dumped.
    pub grad_last: Option<f64>,
    /// The largest finite gradient norm.
    pub grad_max: Option<f64>,
    /// The last update ratio dumped.
    pub ratio_last: Option<f64>,
    /// The largest finite update ratio.
    pub ratio_max: Option<f64>,
}

impl TrendFigures {
    /// The figures of `p`'s series.
    pub fn of(p: &ParameterTrend) -> TrendFigures {
        let (grad_first, grad_last) = first_last(&p.grad_norm);
        let (_, ratio_last) = first_last(&p.update_ratio);
        TrendFigures {
            grad_first,
            grad_last,
            grad_max: series_max(&p.grad_norm),
            ratio_last,
            ratio_max: series_max(&p.update_ratio),
        }
    }
}

/// The largest finite value of a series (`None` when none is).
fn series_max(v: &[Option<f64>]) -> Option<f64> {
    v.iter()
        .flatten()
        .copied()
        .filter(|x| x.is_finite())
        .reduce(f64::max)
}

/// The first and the last value a series has.
fn first_last(v: &[Option<f64>]) -> (Option<f64>, Option<f64>) {
    (
        v.iter().flatten().next().copied(),
        v.iter().flatten().last().copied(),
    )
}

/// The largest output statistic of one kernel (NaN when no output has it).
pub struct KernelPeaks {
    /// The largest l2 norm of the kernel's outputs.
    pub l2norm: f64,
    /// The largest max|x| of the kernel's outputs.
    pub max_abs: f64,
}

/// What `opdump inspect` reports on one dump.
pub struct InspectReport<'a> {
    /// The path the user named.
    pub dir: &'a Path,
    /// The dump read.
    pub dump: &'a Dump,
    /// The findings (kernels, statistics per tensor, first non-finite operator and tensor,
    /// growth, oddities, parameter trends, errors).
    pub ins: Inspection,
    /// How many kernels to list by growth (`--top`).
    pub top: usize,
    /// Per kernel of `ins.kernels`: its role in a training step.
    pub roles: Vec<KernelRole>,
    /// Per kernel of `ins.kernels`: its outputs' largest statistics.
    pub peaks: Vec<KernelPeaks>,
    /// Per parameter of `ins.parameters`: the figures of its row.
    pub trends: Vec<TrendFigures>,
    /// How many parameters have a verdict other than ok.
    pub flagged: usize,
    /// The first non-finite tensor is not the first non-finite operator's output (so it is
    /// reported on its own).
    pub tensor_apart: bool,
}

impl<'a> InspectReport<'a> {
    /// The report on `dump` (opened from `dir`) from its inspection `ins`.
    pub fn new(dir: &'a Path, dump: &'a Dump, ins: Inspection, top: usize) -> InspectReport<'a> {
        let roles = ins.kernels.iter().map(KernelRole::of).collect();
        let peak = |k: &KernelRef, f: fn(&Stats) -> Option<f64>| {
            k.tensors
                .iter()
                .filter(|&&i| dump.tensors[i].id.io == Io::Output)
                .filter_map(|&i| ins.stats[i].as_ref().and_then(f))
                .fold(f64::NAN, |m, v| if m.is_nan() { v } else { m.max(v) })
        };
        let peaks = ins
            .kernels
            .iter()
            .map(|k| KernelPeaks {
                l2norm: peak(k, |s| s.l2norm),
                max_abs: peak(k, Stats::max_abs),
            })
            .collect();
        let trends = ins.parameters.iter().map(TrendFigures::of).collect();
        let flagged = ins
            .parameters
            .iter()
            .filter(|p| p.verdict != Verdict::Ok)
            .count();
        let tensor_apart = ins.first_nonfinite_tensor.as_ref().is_some_and(|t| {
            ins.first_nonfinite
                .as_ref()
                .is_none_or(|f| f.tensor != t.tensor)
        });
        InspectReport {
            dir,
            dump,
            ins,
            top,
            roles,
            peaks,
            trends,
            flagged,
            tensor_apart,
        }
    }

    /// Some tensor holds a NaN or an Inf.
    pub fn found(&self) -> bool {
        self.ins.first_nonfinite.is_some() || self.ins.first_nonfinite_tensor.is_some()
    }

    /// The statistics of tensor `i` (empty where none could be had).
    pub fn stats(&self, i: usize) -> Stats {
        self.ins.stats[i].clone().unwrap_or_default()
    }
}
