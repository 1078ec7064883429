//! Training dumps: what role a kernel's tensors play (a forward activation, a gradient, a
//! parameter, the optimizer's update or state), and per parameter the trend of its gradient
//! norm and update ratio over the dumped steps — msprobe grad_probe's questions: is a
//! gradient vanishing, exploding, or a weight frozen.
//!
//! The names are those `dump-candle`'s training dump writes (MindSpore's layout, sanitised):
//!
//! | role | op type | op name |
//! |---|---|---|
//! | gradient | `Gradient` | `Gradients_Default_{param}_Gradient-op{n}` |
//! | parameter | `Parameter` | `{param}` |
//! | optimizer | `Update` (output 0 Δw, output 1 ‖Δw‖/‖w‖), `OptimizerState`, `LearningRate` | `Optimizer_Default_{param}_Update-op{n}` … |
//!
//! MindSpore's own backward kernels (`Gradients/Default/...`, sanitised `Gradients_...`) and
//! msprobe's backward calls (`Functional.conv2d.0.backward`, `Module.fc.Linear.backward.0`,
//! `….parameters_grad.0`) are gradients too; every other kernel is a forward activation. In
//! an msprobe dump a parameter's trend is its gradient norm (`Norm`) per step, under the
//! module path and key (`fc1.weight`): msprobe dumps no updates.
//!
//! ## Verdicts ([`Verdict`]), checked in this order
//!
//! - **exploding**: a gradient norm or update ratio is NaN or infinite; or the gradient norm
//!   grows to at least [`EXPLODING_GROWTH`] × its first dumped value; or an update ratio
//!   reaches [`EXPLODING_UPDATE`] (a step moves the weight by as much as its whole norm);
//! - **frozen**: every gradient norm is 0, or every update ratio is at most [`FROZEN_UPDATE`]
//!   (the weight does not move);
//! - **vanishing**: the last gradient norm is at most [`VANISHING_NORM`], or at most
//!   [`VANISHING_DECAY`] × the largest one before it;
//! - **ok** otherwise.

use std::collections::BTreeMap;

use dump_stats::Io;

use crate::{Dump, KernelRef, Stats};

/// Gradient norm growth (largest over first) from which a gradient is exploding.
pub const EXPLODING_GROWTH: f64 = 100.0;
/// Update ratio ‖Δw‖/‖w‖ from which a step is exploding.
pub const EXPLODING_UPDATE: f64 = 1.0;
/// Update ratio at or below which (at every step) a weight is frozen.
pub const FROZEN_UPDATE: f64 = 1e-10;
/// Last gradient norm at or below which a gradient has vanished.
pub const VANISHING_NORM: f64 = 1e-7;
/// Last over largest earlier gradient norm at or below which a gradient is vanishing.
pub const VANISHING_DECAY: f64 = 1e-3;

/// What a kernel's tensors are in a training step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A forward kernel's input or output.
    Activation,
    /// A gradient (a parameter's, or a backward kernel's tensor).
    Gradient,
    /// A weight or graph input (`Parameter`).
    Parameter,
    /// The optimizer's update, state or learning rate.
    Optimizer,
}

impl Role {
    /// The role of kernel `op_type` / `op_name` (sanitised, as in file names).
    pub fn of(op_type: &str, op_name: &str) -> Role {
        match op_type {
            "Parameter" => Role::Parameter,
            "Gradient" => Role::Gradient,
            "Update" | "OptimizerState" | "LearningRate" => Role::Optimizer,
            _ if op_name.starts_with("Gradients_") => Role::Gradient,
            // msprobe: `Functional.conv2d.0.backward`, `Module.fc.Linear.backward.0`, and
            // parameter gradients `Module.fc.Linear.parameters_grad.0`.
            _ if op_name.ends_with(".backward")
                || op_name.contains(".backward.")
                || crate::dialect::parameters_grad_of(op_name).is_some() =>
            {
                Role::Gradient
            }
            _ if op_name.starts_with("Optimizer_Default_") => Role::Optimizer,
            _ => Role::Activation,
        }
    }

    /// The role of a kernel.
    pub fn of_kernel(k: &KernelRef) -> Role {
        Role::of(&k.op_type, &k.op_name)
    }

    /// `activation`, `gradient`, `parameter` or `optimizer`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Activation => "activation",
            Role::Gradient => "gradient",
            Role::Parameter => "parameter",
            Role::Optimizer => "optimizer",
        }
    }
}

/// The parameter a training-dump kernel belongs to: `conv1_weight` for
/// `Gradients_Default_conv1_weight_Gradient-op7` (op type `Gradient`),
/// `Optimizer_Default_conv1_weight_Update-op9` (`Update`) and the Parameter `conv1_weight`.
pub fn parameter_of(op_type: &str, op_name: &str) -> Option<String> {
    let strip = |prefix: &str, op: &str| -> Option<String> {
        let rest = op_name.strip_prefix(prefix)?;
        let cut = rest.rfind(&format!("_{op}-op"))?;
        let n = &rest[cut + op.len() + 4..];
        (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && cut > 0)
            .then(|| rest[..cut].to_owned())
    };
    match op_type {
        "Parameter" => Some(op_name.to_owned()),
        "Gradient" => strip("Gradients_Default_", "Gradient"),
        "Update" => strip("Optimizer_Default_", "Update"),
        _ => None,
    }
}

/// How a parameter's training went, by the thresholds in the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// None of the below.
    Ok,
    /// The gradient norm shrinks towards zero.
    Vanishing,
    /// The gradient norm or the update blows up (or is not finite).
    Exploding,
    /// The weight does not move.
    Frozen,
}

impl Verdict {
    /// `ok`, `vanishing`, `exploding` or `frozen`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Vanishing => "vanishing",
            Verdict::Exploding => "exploding",
            Verdict::Frozen => "frozen",
        }
    }
}

/// One parameter over the dumped steps.
#[derive(Clone, Debug, PartialEq)]
pub struct ParameterTrend {
    /// Rank.
    pub rank: u32,
    /// The parameter's name: sanitised, as in its Parameter file (`conv1_weight`); in an
    /// msprobe dump, the module path and the `parameters_grad` key (`conv1.weight`).
    pub name: String,
    /// The dumped iterations, ascending.
    pub steps: Vec<u64>,
    /// ‖gradient‖₂ per step (`None` where it was not dumped or has no l2norm).
    pub grad_norm: Vec<Option<f64>>,
    /// ‖Δw‖/‖w‖ per step (`None` where no update was dumped).
    pub update_ratio: Vec<Option<f64>>,
    /// ‖w‖₂ after each step (`None` where no Parameter was dumped).
    pub weight_norm: Vec<Option<f64>>,
    /// The first step whose gradient norm or update ratio is NaN or infinite.
    pub first_nonfinite_step: Option<u64>,
    /// The first step at which the exploding rule holds (a non-finite value, the norm at
    /// [`EXPLODING_GROWTH`] × its first, or a ratio of [`EXPLODING_UPDATE`]): usually well
    /// before the first NaN.
    pub exploding_from: Option<u64>,
    /// Gradient norm growth per step: (last / first)^(1 / (steps − 1)) over the finite,
    /// positive norms; NaN with fewer than two.
    pub growth_per_step: f64,
    /// The verdict.
    pub verdict: Verdict,
}

/// Per parameter (with a gradient or an update dumped), its trend over the steps, in
/// (rank, name) order. `stats` are per tensor of `dump` ([`crate::inspect::Inspection::stats`]).
pub fn parameter_trends(
    dump: &Dump,
    kernels: &[KernelRef],
    stats: &[Option<Stats>],
) -> Vec<ParameterTrend> {
    #[derive(Default)]
    struct Acc {
        steps: BTreeMap<u64, [Option<f64>; 3]>,
        trained: bool,
    }
    let mut per: BTreeMap<(u32, String), Acc> = BTreeMap::new();
    let output = |k: &KernelRef, slot: u32| {
        k.tensors
            .iter()
            .copied()
            .find(|&i| dump.tensors[i].id.io == Io::Output && dump.tensors[i].id.slot == slot)
            .and_then(|i| stats[i].as_ref())
    };
    let mut put = |k: &KernelRef, name: String, col: usize, value: Option<f64>| {
        let acc = per.entry((k.rank, name)).or_default();
        acc.trained |= col < 2;
        let row = acc.steps.entry(k.iteration).or_insert([None; 3]);
        row[col] = value;
    };
    for k in kernels {
        if let Some((module, _)) = crate::dialect::parameters_grad_of(&k.op_name) {
            // msprobe: one output per parameter of the module, named by its key.
            for &i in &k.tensors {
                let t = &dump.tensors[i];
                let (Io::Output, Some(arg)) = (t.id.io, t.arg_name.as_deref()) else {
                    continue;
                };
                let name = match module {
                    "" => arg.to_owned(),
                    m => format!("{m}.{arg}"),
                };
                put(k, name, 0, stats[i].as_ref().and_then(|s| s.l2norm));
            }
            continue;
        }
        let Some(name) = parameter_of(&k.op_type, &k.op_name) else {
            continue;
        };
        let (col, value) = match k.op_type.as_str() {
            "Gradient" => (0, output(k, 0).and_then(|s| s.l2norm)),
            // The ratio is a 0-d tensor: its max is its value.
            "Update" => (1, output(k, 1).and_then(|s| s.max)),
            _ => (2, output(k, 0).and_then(|s| s.l2norm)),
        };
        put(k, name, col, value);
    }
    per.into_iter()
        .filter(|(_, a)| a.trained)
        .map(|((rank, name), a)| {
            let steps: Vec<u64> = a.steps.keys().copied().collect();
            let col = |c: usize| a.steps.values().map(|r| r[c]).collect::<Vec<_>>();
            let (grad_norm, update_ratio, weight_norm) = (col(0), col(1), col(2));
            let (growth_per_step, verdict, exploding_from) =
                judge(&steps, &grad_norm, &update_ratio);
            let first_nonfinite_step = steps
                .iter()
                .zip(grad_norm.iter().zip(&update_ratio))
                .find(|(_, (g, u))| [g, u].iter().any(|x| x.is_some_and(|x| !x.is_finite())))
                .map(|(&s, _)| s);
            ParameterTrend {
                rank,
                name,
                steps,
                grad_norm,
                update_ratio,
                weight_norm,
                first_nonfinite_step,
                exploding_from,
                growth_per_step,
                verdict,
            }
        })
        .collect()
}

/// The growth per step and the verdict of one parameter's series (`None` = not dumped).
/// Also the first step the exploding rule holds at.
fn judge(
    steps: &[u64],
    grad: &[Option<f64>],
    update: &[Option<f64>],
) -> (f64, Verdict, Option<u64>) {
    let known = |v: &[Option<f64>]| -> Vec<(u64, f64)> {
        steps
            .iter()
            .zip(v)
            .filter_map(|(&s, x)| x.map(|x| (s, x)))
            .collect()
    };
    let g = known(grad);
    let u = known(update);
    let usable: Vec<(u64, f64)> = g
        .iter()
        .copied()
        .filter(|&(_, x)| x.is_finite() && x > 0.0)
        .collect();
    let growth = match (usable.first(), usable.last()) {
        (Some(&(s0, a)), Some(&(s1, b))) if s1 > s0 => (b / a).powf(1.0 / (s1 - s0) as f64),
        _ => f64::NAN,
    };
    let first = g.first().map(|&(_, x)| x).filter(|&x| x > 0.0);
    let bad_g = g
        .iter()
        .filter(|&&(_, x)| !x.is_finite() || first.is_some_and(|f| x >= EXPLODING_GROWTH * f))
        .map(|&(s, _)| s)
        .min();
    let bad_u = u
        .iter()
        .filter(|&&(_, x)| !x.is_finite() || x >= EXPLODING_UPDATE)
        .map(|&(s, _)| s)
        .min();
    let exploding_from = bad_g.into_iter().chain(bad_u).min();
    let verdict = if exploding_from.is_some() {
        Verdict::Exploding
    } else if (!g.is_empty() && g.iter().all(|&(_, x)| x == 0.0))
        || (!u.is_empty() && u.iter().all(|&(_, x)| x <= FROZEN_UPDATE))
    {
        Verdict::Frozen
    } else if let Some(&(_, last)) = g.last() {
        let peak = g[..g.len() - 1].iter().map(|&(_, x)| x).fold(0.0, f64::max);
        if last <= VANISHING_NORM || (peak > 0.0 && last <= VANISHING_DECAY * peak) {
            Verdict::Vanishing
        } else {
            Verdict::Ok
        }
    } else {
        Verdict::Ok
    };
    (growth, verdict, exploding_from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_follow_op_types_and_backward_names() {
        assert_eq!(Role::of("Parameter", "conv1_weight"), Role::Parameter);
        assert_eq!(
            Role::of("Gradient", "Gradients_Default_fc_weight_Gradient-op4"),
            Role::Gradient
        );
        assert_eq!(
            Role::of(
                "Conv2DBackpropInput",
                "Gradients_Default_network_gradConv2D_Conv2DBackpropInput-op9"
            ),
            Role::Gradient
        );
        for msprobe in [
            "Functional.conv2d.0.backward",
            "Module.fc.Linear.backward.0",
            "Module.fc.Linear.parameters_grad",
            "Module.fc.Linear.parameters_grad.0",
        ] {
            assert_eq!(Role::of("conv2d", msprobe), Role::Gradient, "{msprobe}");
        }
        assert_eq!(
            Role::of("conv2d", "Functional.conv2d.0.forward"),
            Role::Activation
        );
        assert_eq!(Role::of("Update", "x"), Role::Optimizer);
        assert_eq!(
            Role::of("Conv2D", "Default_conv1-Conv2d_Conv2D-op0"),
            Role::Activation
        );
    }

    #[test]
    fn parameter_names_come_back_from_kernel_names() {
        assert_eq!(
            parameter_of(
                "Gradient",
                "Gradients_Default_features_conv1_weight_Gradient-op12"
            )
            .as_deref(),
            Some("features_conv1_weight")
        );
        assert_eq!(
            parameter_of("Update", "Optimizer_Default_fc_bias_Update-op3").as_deref(),
            Some("fc_bias")
        );
        assert_eq!(
            parameter_of("Parameter", "fc_bias").as_deref(),
            Some("fc_bias")
        );
        // Not in the form: no name rather than a wrong one.
        for bad in [
            "Gradients_Default__Gradient-op1",
            "Gradients_Default_x_Gradient-op",
            "Gradients_Default_x_Gradient-opx",
            "Default_x_Gradient-op1",
        ] {
            assert_eq!(parameter_of("Gradient", bad), None, "{bad}");
        }
        assert_eq!(parameter_of("Conv2D", "Default_Conv2D-op0"), None);
    }

    #[test]
    fn verdicts_follow_the_documented_thresholds() {
        let s = [0, 1, 2, 3];
        let j = |g: &[f64], u: &[f64]| {
            let some = |v: &[f64]| v.iter().map(|&x| Some(x)).collect::<Vec<_>>();
            judge(&s, &some(g), &some(u))
        };
        let ok = [1.0, 0.9, 0.8, 0.7];
        let upd = [1e-3; 4];
        assert_eq!(j(&ok, &upd).1, Verdict::Ok);
        let (growth, v, from) = j(&[1.0, 10.0, 100.0, 1000.0], &upd);
        assert_eq!((v, from), (Verdict::Exploding, Some(2)));
        assert!((growth - 10.0).abs() < 1e-9, "{growth}");
        assert_eq!(
            j(&[1.0, 2.0, f64::INFINITY, 1.0], &upd).1,
            Verdict::Exploding
        );
        assert_eq!(j(&ok, &[1e-3, 1e-3, 1.5, 1e-3]).2, Some(2));
        assert_eq!(j(&ok, &upd).2, None);
        assert_eq!(j(&[0.0; 4], &[0.0; 4]).1, Verdict::Frozen);
        assert_eq!(j(&ok, &[1e-12; 4]).1, Verdict::Frozen);
        assert_eq!(j(&[1.0, 1e-2, 1e-3, 1e-4], &upd).1, Verdict::Vanishing);
        assert_eq!(j(&[1e-8; 4], &upd).1, Verdict::Vanishing);
        // Just inside each threshold: ok.
        assert_eq!(j(&[1.0, 99.0, 50.0, 2.0], &[0.99; 4]).1, Verdict::Ok);
        assert_eq!(j(&[1.0, 0.5, 0.1, 1.1e-3], &upd).1, Verdict::Ok);
        // A NaN norm is exploding; a step without a gradient is skipped.
        assert_eq!(j(&[1.0, f64::NAN, 0.9, 0.8], &upd).1, Verdict::Exploding);
        let g = [Some(1.0), None, Some(0.9), Some(0.8)];
        assert_eq!(judge(&s, &g, &[Some(1e-3); 4]).1, Verdict::Ok);
        assert!(judge(&[0], &[Some(1.0)], &[Some(1e-3)]).0.is_nan());
    }

    /// A statistic.csv as the training dump writes it, with hostile rows mixed in: an Update
    /// without its ratio, a Gradient row without l2norm, names not in the form, a Parameter
    /// with no gradient (a frozen input): no panic, and only well-formed kernels count.
    #[test]
    fn odd_training_rows_are_skipped_not_trusted() {
        let root = std::env::temp_dir().join(format!("dump-read-train-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let head = "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,\
                    Shape,Max Value,Min Value,L2Norm Value\n";
        for (step, g) in [(0, "2"), (1, "nan"), (2, "")] {
            let dir = root.join(format!("rank_0/Net/0/{step}"));
            std::fs::create_dir_all(&dir).unwrap();
            let rows = format!(
                "{head}\
                 Gradient,Gradients_Default_fc_w_Gradient-op1,0,0,1,output,0,8,float32,\"(2)\",1,1,{g},\n\
                 Gradient,Gradients_Default__Gradient-op2,0,0,2,output,0,8,float32,\"(2)\",1,1,3,\n\
                 Gradient,bogus,0,0,3,output,0,8,float32,\"(2)\",1,1,3,\n\
                 Parameter,fc_w,0,0,4,output,0,8,float32,\"(2)\",1,1,5,\n\
                 Parameter,x,0,0,5,output,0,8,float32,\"(2)\",1,1,5,\n\
                 Update,Optimizer_Default_fc_w_Update-op3,0,0,6,output,0,8,float32,\"(2)\",1,1,1,\n"
            );
            std::fs::write(dir.join("statistic.csv"), rows).unwrap();
        }
        let dump = Dump::open(&root).unwrap();
        let ins = crate::inspect::inspect(&dump, 1, &|_, _| {});
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(ins.parameters.len(), 1, "{:?}", ins.parameters);
        let p = &ins.parameters[0];
        assert_eq!(
            (p.name.as_str(), p.steps.as_slice()),
            ("fc_w", &[0, 1, 2][..])
        );
        assert_eq!(p.grad_norm[0], Some(2.0));
        assert!(p.grad_norm[1].is_some_and(f64::is_nan));
        assert_eq!(p.update_ratio, [None, None, None], "no output 1: no ratio");
        assert_eq!(p.weight_norm[2], Some(5.0));
        assert_eq!(
            (p.first_nonfinite_step, p.verdict),
            (Some(1), Verdict::Exploding)
        );
    }
}
