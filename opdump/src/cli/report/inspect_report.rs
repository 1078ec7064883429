//! [`InspectReport`]: everything `opdump inspect` found, built once by the command and read by
//! every renderer (`text`, `json`, `html`), none of which derives anything again.

use std::path::Path;

use dump_read::{
    Dump, KernelRef, Stats,
    inspect::Inspection,
    train::{ParameterTrend, Role, Verdict, parameter_of},
};
use dump_stats::Io;

use super::shade::{KernelNonfinite, inspect_nonfinite};

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
    /// Per kernel of `ins.kernels`: its outputs' NaN/Inf count and shade.
    pub kernel_nonfinite: Vec<KernelNonfinite>,
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
        let kernel_nonfinite = inspect_nonfinite(
            dump,
            &ins.kernels,
            &ins.stats,
            ins.first_nonfinite.as_ref().map(|f| f.kernel),
        );
        InspectReport {
            kernel_nonfinite,
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

#[cfg(test)]
mod tests {
    use dump_read::inspect::inspect;

    use super::*;
    use crate::cli::report::{test_dumps as td, text};

    fn train(name: &str) -> Dump {
        let d = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/train")
            .join(name);
        Dump::open(&d).unwrap()
    }

    #[test]
    fn a_diverging_training_dump_gives_roles_trends_and_peaks() {
        let dump = train("diverging");
        let ins = inspect(&dump, 1, &|_, _| {});
        let r = InspectReport::new(Path::new("diverging"), &dump, ins, 5);
        assert!(r.found());
        let f = r
            .ins
            .first_nonfinite
            .as_ref()
            .expect("the head's gradient overflows");
        assert_eq!(r.roles[f.kernel].role, Role::Gradient);
        assert_eq!(r.roles[f.kernel].parameter.as_deref(), Some("head_weight"));
        assert_eq!(
            (r.roles.len(), r.peaks.len()),
            (r.ins.kernels.len(), r.ins.kernels.len())
        );
        assert_eq!(r.trends.len(), r.ins.parameters.len());
        assert_eq!(r.flagged, 6, "every parameter explodes");
        for (p, t) in r.ins.parameters.iter().zip(&r.trends) {
            let finite: Vec<f64> = p
                .grad_norm
                .iter()
                .flatten()
                .copied()
                .filter(|v| v.is_finite())
                .collect();
            assert_eq!(
                t.grad_max,
                finite.iter().copied().reduce(f64::max),
                "{}",
                p.name
            );
            assert_eq!(t.grad_first, p.grad_norm.iter().flatten().next().copied());
        }
        // A kernel's peak is its largest output l2norm, inputs left out.
        let (n, k) = r
            .ins
            .kernels
            .iter()
            .enumerate()
            .find(|(_, k)| k.op_type == "Conv2d")
            .unwrap();
        let outs: Vec<f64> = k
            .tensors
            .iter()
            .filter(|&&i| dump.tensors[i].id.io == Io::Output)
            .filter_map(|&i| r.ins.stats[i].as_ref().and_then(|s| s.l2norm))
            .collect();
        assert_eq!(
            r.peaks[n].l2norm,
            outs.iter().copied().reduce(f64::max).unwrap()
        );

        let healthy = train("healthy");
        let ins = inspect(&healthy, 1, &|_, _| {});
        let r = InspectReport::new(Path::new("healthy"), &healthy, ins, 5);
        assert!(!r.found() && !r.tensor_apart);
        assert_eq!(r.flagged, 0);
    }

    #[test]
    fn a_nan_only_an_input_holds_is_reported_apart_and_rendered_from_the_report() {
        let root = td::fresh("nan-input");
        let d = td::stat_dump(
            &root,
            &[
                "Relu,Default_Relu-op0,0,0,5,output,0,12,float32,\"(3)\",3,1,2,0".into(),
                "LSTM,Default_LSTM-op1,0,0,10,input,0,12,float32,\"(3)\",nan,nan,nan,1".into(),
                "LSTM,Default_LSTM-op1,0,0,12,output,0,12,float32,\"(3)\",0.5,-0.5,0.7,0".into(),
            ],
        );
        let dump = Dump::open(&d).unwrap();
        let ins = inspect(&dump, 1, &|_, _| {});
        let _ = std::fs::remove_dir_all(&root);
        let mut r = InspectReport::new(&d, &dump, ins, 5);
        assert!(r.found() && r.tensor_apart);
        assert!(r.ins.first_nonfinite.is_none());
        assert_eq!(
            r.peaks.iter().map(|p| p.l2norm).collect::<Vec<_>>(),
            [2.0, 0.7]
        );
        let mut out = Vec::new();
        text::inspect(&r, &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("first non-finite tensor in run order: rank 0 iteration 0 graph 0: LSTM Default_LSTM-op1 input.0"), "{s}");
        // The renderer follows the report's fields; it does not decide again.
        r.tensor_apart = false;
        let mut out = Vec::new();
        text::inspect(&r, &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(!s.contains("first non-finite tensor in run order"), "{s}");
    }
}
