//! The training step: parameters, gradients, the update and the optimizer's state, dumped
//! around the optimizer's step inside a [`Tracer::step`](crate::Tracer::step).
//!
//! [`DumpedOptimizer`] wraps any candle-nn [`Optimizer`]; its [`step`](DumpedOptimizer::step)
//! (and [`backward_step`](DumpedOptimizer::backward_step)) does, on a step the Dumper selects:
//!
//! 1. every gradient of the [`GradStore`] that belongs to a parameter, as a backward kernel
//!    `Gradients/Default/{path}/Gradient-op{n}` (op type `Gradient`, output 0: the gradient),
//!    in the order candle's backward produced them (last-created gradient last), and a copy
//!    of each weight as it is before the update;
//! 2. the wrapped optimizer's step;
//! 3. every parameter as `Parameter.{path}` (its value after the update, as MindSpore dumps
//!    Parameters at the end of a step), then per parameter the kernel
//!    `Optimizer/Default/{path}/Update-op{n}` (op type `Update`): output 0 is Δw (after −
//!    before), output 1 a 0-d f32 tensor holding ‖Δw‖/‖w‖ (w before the update);
//! 4. the optimizer's state per parameter ([`OptimizerState`]), each tensor as
//!    `Optimizer/Default/{path}/{state}/OptimizerState-op{n}`, and the learning rate as a 0-d
//!    f64 tensor `Optimizer/Default/learning_rate/LearningRate-op{n}`.
//!
//! `{path}` is the parameter's VarBuilder path with `.` turned into `/` (`features.conv1.weight`
//! → `features/conv1/weight`); in file names every `/` and `.` becomes `_`, so the gradient
//! `Gradients_Default_features_conv1_weight_Gradient-op5` and the Parameter
//! `features_conv1_weight` name the same weight (`dump_read::train` pairs them back).
//!
//! On a step that dumps nothing the wrapper is the bare optimizer plus one thread-local read:
//! no copy, no statistic.

use candle_core::{Result, Tensor, Var, backprop::GradStore};
use candle_nn::{AdamW, Optimizer, SGD, VarMap};
use dump_core::stats::summarize;

use crate::{
    convert::with_tensor_ref,
    trace::{dumping, parameter, report, scope_prefix},
};

/// The state an optimizer keeps per parameter, for the dump.
///
/// candle-nn 0.11.1 exposes none: [`SGD`] has no momentum, and [`AdamW`] keeps its moments in
/// a private field with no accessor, so both use the default (no tensors); their learning
/// rate is dumped through [`Optimizer::learning_rate`]. Implement it for your own optimizer
/// to dump its buffers (see the `train_mlp` example's momentum SGD).
pub trait OptimizerState {
    /// The state tensors kept for `var` as `(name, tensor)` pairs, in a fixed order
    /// (`"exp_avg"`, `"exp_avg_sq"`; `"momentum"`). Names become a level of the kernel's
    /// scope, so keep them free of `/` and `.`.
    fn state(&self, var: &Var) -> Vec<(String, Tensor)> {
        let _ = var;
        Vec::new()
    }
}

impl OptimizerState for SGD {}
impl OptimizerState for AdamW {}

/// One parameter: its VarBuilder path, its variable and the names of its kernels.
#[derive(Debug)]
struct Param {
    path: String,
    var: Var,
    gradient: String,
    update: String,
}

/// The dump of a training step's parameters, gradients, updates and optimizer state, for
/// loops that call the optimizer themselves; [`DumpedOptimizer`] is the one-line form.
///
/// Call [`gradients`](Training::gradients) after `loss.backward()` and before the optimizer's
/// step, [`parameters`](Training::parameters) after it, both inside
/// [`Tracer::step`](crate::Tracer::step). Outside a step, or on a step the Dumper does not
/// select, both return at once.
#[derive(Debug)]
pub struct Training {
    params: Vec<Param>,
    before: Vec<Option<Tensor>>,
    learning_rate: String,
}

impl Training {
    /// The parameters of `varmap` (every `Var`, by its VarBuilder path), in path order.
    pub fn new(varmap: &VarMap) -> Self {
        let data = varmap.data().lock().unwrap_or_else(|e| e.into_inner());
        Training::from_vars(data.iter().map(|(k, v)| (k.clone(), v.clone())))
    }

    /// Named variables, for models built without a [`VarMap`]; sorted by name.
    pub fn from_vars(vars: impl IntoIterator<Item = (String, Var)>) -> Self {
        let mut params: Vec<Param> = vars
            .into_iter()
            .map(|(path, var)| Param {
                gradient: format!("Gradients/{}", scope_prefix(&path, None, "Gradient")),
                update: format!("Optimizer/{}", scope_prefix(&path, None, "Update")),
                path,
                var,
            })
            .collect();
        params.sort_by(|a, b| a.path.cmp(&b.path));
        Training {
            before: Vec::new(),
            learning_rate: format!(
                "Optimizer/{}",
                scope_prefix("learning_rate", None, "LearningRate")
            ),
            params,
        }
    }

    /// The parameters' VarBuilder paths, in the order their Parameters are dumped.
    pub fn parameter_names(&self) -> impl Iterator<Item = &str> {
        self.params.iter().map(|p| p.path.as_str())
    }

    /// Dumps each parameter's gradient in `grads` as a `Gradient` kernel, in the order
    /// candle's backward produced them, and keeps a copy of each weight for the update ratio.
    /// Parameters without a gradient (frozen, unused) are skipped. Errors are candle's (the
    /// weight copy); dump failures are returned by [`Tracer::step`](crate::Tracer::step).
    pub fn gradients(&mut self, grads: &GradStore) -> Result<()> {
        self.before.clear();
        if !dumping() {
            return Ok(());
        }
        let mut order: Vec<(usize, usize, &Tensor)> = self
            .params
            .iter()
            .enumerate()
            .filter_map(|(i, p)| grads.get(p.var.as_tensor()).map(|g| (created(g), i, g)))
            .collect();
        order.sort_by_key(|&(c, i, _)| (c, i));
        for (_, i, g) in order {
            report("Gradient", &self.params[i].gradient, &[], &[g]);
        }
        self.before = self
            .params
            .iter()
            .map(|p| p.var.as_tensor().copy().map(Some))
            .collect::<Result<_>>()?;
        Ok(())
    }

    /// Dumps every parameter (its value now: call it after the optimizer's step), its update
    /// Δw and ‖Δw‖/‖w‖ (when [`gradients`](Training::gradients) ran this step), the
    /// optimizer's state per parameter and its learning rate.
    pub fn parameters<O: Optimizer + OptimizerState>(&mut self, opt: &O) -> Result<()> {
        let before = std::mem::take(&mut self.before);
        if !dumping() {
            return Ok(());
        }
        for (i, p) in self.params.iter().enumerate() {
            let w = p.var.as_tensor();
            parameter(&p.path, w);
            if let Some(Some(old)) = before.get(i) {
                let dw = w.sub(old)?;
                let ratio = (l2(&dw)? / l2(old)?) as f32;
                let ratio = Tensor::new(ratio, w.device())?;
                report("Update", &p.update, &[], &[&dw, &ratio]);
            }
            for (name, t) in opt.state(&p.var) {
                let path = format!("{}.{name}", p.path);
                let prefix = format!("Optimizer/{}", scope_prefix(&path, None, "OptimizerState"));
                report("OptimizerState", &prefix, &[], &[&t]);
            }
        }
        let lr = Tensor::new(opt.learning_rate(), &candle_core::Device::Cpu)?;
        report("LearningRate", &self.learning_rate, &[], &[&lr]);
        Ok(())
    }
}

/// Creation rank of a tensor: candle numbers tensors from one counter as it creates them
/// (`TensorId`), and backward creates a parameter's final gradient when its last contribution
/// arrives, so ids order gradients as backward produced them. The id is opaque in candle
/// 0.11.1 (no accessor, no `Ord`); its `Debug` form `TensorId(n)` is read, and a form that
/// does not parse sorts last (then by path).
fn created(t: &Tensor) -> usize {
    let s = format!("{:?}", t.id());
    s.trim_start_matches("TensorId(")
        .trim_end_matches(')')
        .parse()
        .unwrap_or(usize::MAX)
}

/// ‖t‖₂ in f64: dump-core's one-pass statistics over CPU storage, candle's ops elsewhere.
fn l2(t: &Tensor) -> Result<f64> {
    let host = with_tensor_ref(t, |r| {
        let (bytes, n) = (r.host_bytes()?, r.elems()?);
        summarize(r.dtype(), bytes, n)
            .ok()
            .map(|s| s.map_or(0.0, |s| s.l2norm()))
    });
    match host.ok().flatten() {
        Some(v) => Ok(v),
        None => t
            .to_dtype(candle_core::DType::F64)?
            .sqr()?
            .sum_all()?
            .sqrt()?
            .to_scalar::<f64>(),
    }
}

/// A candle-nn optimizer whose [`step`](DumpedOptimizer::step) dumps the training step, on
/// the steps the config selects:
///
/// 1. each parameter's gradient as `Gradients/Default/{path}/Gradient-op{n}` (op type
///    `Gradient`), in the order candle's backward produced them, and a copy of each weight;
/// 2. the wrapped optimizer's step;
/// 3. each parameter as `Parameter.{path}` (after the update), its update as
///    `Optimizer/Default/{path}/Update-op{n}` (output 0: Δw, output 1: ‖Δw‖/‖w‖ as a 0-d
///    f32), the [`OptimizerState`] tensors as
///    `Optimizer/Default/{path}/{state}/OptimizerState-op{n}`, and the learning rate
///    (`Optimizer/Default/learning_rate/LearningRate-op{n}`, 0-d f64).
///
/// `{path}` is the VarBuilder path with `.` as `/`. Swap it in for the optimizer and run the
/// step inside [`Tracer::step`](crate::Tracer::step):
///
/// ```
/// use candle_core::{DType, Device, Module, Tensor};
/// use candle_nn::{Optimizer, SGD, VarBuilder, VarMap, linear};
/// use dump_candle::{Dumped, DumpedOptimizer, Tracer};
/// use dump_host::Dumper;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = std::env::temp_dir().join(format!("dump-candle-doc-train-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// # let config = format!(r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}",
/// #   "net_name": "Net", "iteration": "all", "saved_data": "statistic", "input_output": 0,
/// #   "kernels": [], "support_device": [0]}}}}"#, dir.display());
/// let mut dumper = Dumper::builder().open_json(config.into_bytes())?;
/// let varmap = VarMap::new();
/// let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
/// let fc = Dumped::new(linear(3, 1, vb.pp("fc"))?, "fc");
/// let mut opt = DumpedOptimizer::new(SGD::new(varmap.all_vars(), 0.1)?, &varmap);
/// let (x, y) = (Tensor::ones((4, 3), DType::F32, &Device::Cpu)?, Tensor::zeros((4, 1), DType::F32, &Device::Cpu)?);
/// let mut tracer = Tracer::new(0);
/// for _ in 0..2 {
///     tracer.step(&mut dumper, || -> candle_core::Result<()> {
///         let loss = (fc.forward(&x)? - &y)?.sqr()?.mean_all()?;
///         opt.backward_step(&loss)
///     })??;
/// }
/// // Per step: the Linear kernel (input + output), 2 gradients, 2 Parameters,
/// // 2 updates (Δw and the ratio), the learning rate.
/// assert_eq!(dumper.close()?.rows, 2 * (2 + 2 + 2 + 2 * 2 + 1));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct DumpedOptimizer<O> {
    inner: O,
    training: Training,
}

impl<O: Optimizer + OptimizerState> DumpedOptimizer<O> {
    /// Wraps `inner`, naming its parameters by their paths in `varmap`.
    pub fn new(inner: O, varmap: &VarMap) -> Self {
        DumpedOptimizer {
            inner,
            training: Training::new(varmap),
        }
    }

    /// Wraps `inner` with parameters named by a [`Training`] built elsewhere
    /// ([`Training::from_vars`]).
    pub fn with_training(inner: O, training: Training) -> Self {
        DumpedOptimizer { inner, training }
    }

    /// Dumps the gradients, runs the wrapped optimizer's step, dumps the parameters, updates
    /// and state.
    pub fn step(&mut self, grads: &GradStore) -> Result<()> {
        self.training.gradients(grads)?;
        self.inner.step(grads)?;
        self.training.parameters(&self.inner)
    }

    /// `loss.backward()`, then [`step`](DumpedOptimizer::step).
    pub fn backward_step(&mut self, loss: &Tensor) -> Result<()> {
        let grads = loss.backward()?;
        self.step(&grads)
    }

    /// The learning rate of the wrapped optimizer.
    pub fn learning_rate(&self) -> f64 {
        self.inner.learning_rate()
    }

    /// Sets the learning rate of the wrapped optimizer.
    pub fn set_learning_rate(&mut self, lr: f64) {
        self.inner.set_learning_rate(lr);
    }

    /// The wrapped optimizer.
    pub fn inner(&self) -> &O {
        &self.inner
    }

    /// The wrapped optimizer, mutably.
    pub fn inner_mut(&mut self) -> &mut O {
        &mut self.inner
    }

    /// The parameters and kernel names used.
    pub fn training(&self) -> &Training {
        &self.training
    }

    /// The wrapped optimizer back.
    pub fn into_inner(self) -> O {
        self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    #[test]
    fn ids_order_tensors_by_creation() {
        let a = Tensor::zeros(2, DType::F32, &Device::Cpu).unwrap();
        let b = (&a + 1.0).unwrap();
        assert!(created(&a) < created(&b) && created(&b) != usize::MAX);
    }

    #[test]
    fn kernel_names_follow_the_varbuilder_path() {
        let v = Var::zeros(2, DType::F32, &Device::Cpu).unwrap();
        let t = Training::from_vars([("b.w".to_owned(), v.clone()), ("a".to_owned(), v)]);
        assert_eq!(t.parameter_names().collect::<Vec<_>>(), ["a", "b.w"]);
        assert_eq!(t.params[1].gradient, "Gradients/Default/b/w/Gradient-op");
        assert_eq!(t.params[1].update, "Optimizer/Default/b/w/Update-op");
        assert_eq!(
            t.learning_rate,
            "Optimizer/Default/learning_rate/LearningRate-op"
        );
    }

    #[test]
    fn l2_matches_the_definition() {
        let t = Tensor::new(&[3f32, 4.0], &Device::Cpu).unwrap();
        assert_eq!(l2(&t).unwrap(), 5.0);
        let strided = Tensor::new(&[[3f32, 0.0], [4.0, 0.0]], &Device::Cpu)
            .unwrap()
            .t()
            .unwrap();
        assert_eq!(l2(&strided).unwrap(), 5.0, "non-contiguous: candle's ops");
    }
}
