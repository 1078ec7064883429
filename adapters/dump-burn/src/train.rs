//! The training step: every parameter's gradient and every parameter, by its module path,
//! dumped in one call inside a [`Tracer::step`](crate::Tracer::step).
//!
//! [`training_step`] walks the model with burn's [`ModuleVisitor`] (the path is the field
//! names from the model's root, as `enter_module` gives them: `features.conv1.weight`) and,
//! on a step the Dumper selects:
//!
//! 1. per parameter with a gradient, in the visitor's order (the model's field order), the
//!    backward kernel `Gradients/Default/{path}/Gradient-op{n}` (op type `Gradient`, output 0:
//!    the gradient);
//! 2. per parameter, `Parameter.{path}`: its value as the gradients were computed at it.
//!
//! `{path}` is the parameter's path with `.` as `/`; in file names every `/` and `.` becomes
//! `_`, so the gradient `Gradients_Default_features_conv1_weight_Gradient-op5` and the
//! Parameter `features_conv1_weight` name the same weight (`dump_read::train` pairs them).
//! On a step that dumps nothing the call walks nothing and reads no tensor.

use std::collections::HashMap;

use burn::{
    module::{Module, ModuleVisitor, Param},
    optim::{GradientsParams, ModuleOptimizer},
    tensor::{Gradients, Tensor, TensorData},
};
use dump_core::stats::summarize;

use crate::{
    convert::{HostData, dtype_of},
    trace::{diagnose, dumping, parameter, report, report_data},
};

/// Where [`training_step`] finds a parameter's gradient: burn's [`GradientsParams`] (what
/// the optimizer steps with) or the [`Gradients`] `backward()` returned.
pub trait ParamGradients {
    /// The gradient of `param`, if it has one.
    fn gradient<const D: usize>(&self, param: &Param<Tensor<D>>) -> Option<Tensor<D>>;
}

impl ParamGradients for GradientsParams {
    fn gradient<const D: usize>(&self, param: &Param<Tensor<D>>) -> Option<Tensor<D>> {
        self.get::<D>(param.id)
    }
}

impl ParamGradients for Gradients {
    fn gradient<const D: usize>(&self, param: &Param<Tensor<D>>) -> Option<Tensor<D>> {
        param.val().grad(self)
    }
}

/// Dumps every parameter's gradient in `grads` as a `Gradient` kernel and every float
/// parameter of `model` as a Parameter, named by module path (see the module docs). Call it
/// after `backward()` and before the optimizer's step, inside
/// [`Tracer::step`](crate::Tracer::step); outside a step, or on a step the Dumper does not
/// select, it returns at once. Returns the parameter paths visited, in dump order (empty
/// when nothing was dumped).
///
/// ```
/// use burn::{module::Module, nn::{Linear, LinearConfig}, optim::{GradientsParams, Optimizer, SgdConfig}};
/// use burn::tensor::{Device, Tensor};
/// use dump_burn::{Tracer, layer, training_step};
/// use dump_host::Dumper;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = std::env::temp_dir().join(format!("dump-burn-doc-train-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// # let config = format!(r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}",
/// #   "net_name": "Net", "iteration": "all", "saved_data": "statistic", "input_output": 0,
/// #   "kernels": [], "support_device": [0]}}}}"#, dir.display());
/// let mut dumper = Dumper::builder().open_json(config.into_bytes())?;
/// let device = Device::default().autodiff();
/// let mut fc: Linear = LinearConfig::new(3, 1).init(&device);
/// let mut opt = SgdConfig::new().init();
/// let x = Tensor::<2>::ones([4, 3], &device);
/// let mut tracer = Tracer::new(0);
/// for _ in 0..2 {
///     fc = tracer.step(&mut dumper, || {
///         let y = layer("fc", &fc, x.clone(), |m, x| m.forward(x));
///         let grads = GradientsParams::from_grads(y.powi_scalar(2).mean().backward(), &fc);
///         training_step(&fc, &grads);
///         opt.step(0.1, fc.clone(), grads)
///     })?;
/// }
/// // Per step: the Linear kernel (input + output), 2 gradients, 2 Parameters.
/// assert_eq!(dumper.close()?.rows, 2 * (2 + 2 + 2));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
pub fn training_step<M: Module, G: ParamGradients>(model: &M, grads: &G) -> Vec<String> {
    if !dumping() {
        return Vec::new();
    }
    let mut gradients = Walk {
        path: Vec::new(),
        grads: Some(grads),
        seen: Vec::new(),
    };
    model.visit(&mut gradients);
    let mut parameters = Walk::<G> {
        path: Vec::new(),
        grads: None,
        seen: Vec::new(),
    };
    model.visit(&mut parameters);
    parameters.seen
}

/// A visit of the model: with `grads`, dumps gradients; without, parameters.
struct Walk<'g, G> {
    path: Vec<String>,
    grads: Option<&'g G>,
    seen: Vec<String>,
}

impl<G: ParamGradients> ModuleVisitor for Walk<'_, G> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_owned());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let path = self.path.join(".");
        match self.grads {
            Some(grads) => {
                if let Some(g) = grads.gradient(param) {
                    let prefix = format!("Gradients/{}", gradient_prefix(&path));
                    report("Gradient", &prefix, &g);
                }
            }
            None => parameter(&path, &param.val()),
        }
        self.seen.push(path);
    }
}

/// `Default/{a}/{b}/Gradient-op` for the path `a.b`.
fn gradient_prefix(path: &str) -> String {
    crate::trace::scope_prefix(path, "Gradient")
}

/// A burn optimizer whose [`step`](DumpedOptimizer::step) dumps the whole training step, on
/// the steps the Dumper selects (the same kernels, names and roles as dump-candle's
/// `DumpedOptimizer`, so `opdump inspect` reads both alike):
///
/// 1. each parameter's gradient as `Gradients/Default/{path}/Gradient-op{n}` (op type
///    `Gradient`, what [`training_step`] dumps), in the model's field order;
/// 2. the wrapped optimizer's step;
/// 3. per parameter, in the same order: `Parameter.{path}` (its value **after** the update, as
///    MindSpore dumps Parameters at the end of a step), the kernel
///    `Optimizer/Default/{path}/Update-op{n}` (op type `Update`; output 0: Δw = after − before,
///    output 1: ‖Δw‖/‖w‖ as a 0-d f32, w before the update, both norms dump-core's f64 l2norm
///    of the host data), then each state tensor the optimizer keeps for it as
///    `Optimizer/Default/{path}/{field}/OptimizerState-op{n}` (op type `OptimizerState`;
///    `{field}` is burn's record name with `.` as `/`: AdamW's `momentum/moment_1` and
///    `momentum/moment_2`, momentum SGD's `momentum/velocity`);
/// 4. the learning rate, `Optimizer/Default/learning_rate/LearningRate-op{n}` (0-d f64).
///
/// `{path}` is the parameter's field path from the model's root (`features.conv1.weight`)
/// with `.` as `/`; file names turn every `/` and `.` into `_`.
///
/// **Where the state comes from.** burn 0.22.1's optimizers (`AdamWConfig::init`,
/// `SgdConfig::init`, ...) all return a [`ModuleOptimizer`], which keeps each parameter's state
/// type-erased and private; its public [`ModuleOptimizer::to_record`] flattens every state
/// tensor to host data and [`ModuleOptimizer::into_bytes`] packs them into a burnpack buffer,
/// tensors named `"{param_id}.{field}"` with their parameter's id, which
/// [`burn_pack::Reader`] reads back. That is the path used here, on dumped steps only: per
/// step one host read of every state tensor and one copy into the pack (no state tensor is
/// computed again). The weights before the update are kept as tensor handles for Δw (no copy
/// by the adapter; burn's optimizer then writes the updated weights to fresh buffers instead
/// of in place).
///
/// On a step the Dumper does not select, [`step`](DumpedOptimizer::step) is the bare
/// optimizer's step plus one thread-local read.
///
/// ```
/// use burn::{nn::{Linear, LinearConfig}, optim::{AdamWConfig, GradientsParams}};
/// use burn::tensor::{Device, Tensor};
/// use dump_burn::{DumpedOptimizer, Tracer, layer};
/// use dump_host::Dumper;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = std::env::temp_dir().join(format!("dump-burn-doc-opt-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// # let config = format!(r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}",
/// #   "net_name": "Net", "iteration": "all", "saved_data": "statistic", "input_output": 0,
/// #   "kernels": [], "support_device": [0]}}}}"#, dir.display());
/// let mut dumper = Dumper::builder().open_json(config.into_bytes())?;
/// let device = Device::default().autodiff();
/// let mut fc: Linear = LinearConfig::new(3, 1).init(&device);
/// let mut opt = DumpedOptimizer::new(AdamWConfig::new().init()); // the one changed line
/// let x = Tensor::<2>::ones([4, 3], &device);
/// let mut tracer = Tracer::new(0);
/// for _ in 0..2 {
///     fc = tracer.step(&mut dumper, || {
///         let y = layer("fc", &fc, x.clone(), |m, x| m.forward(x));
///         let grads = GradientsParams::from_grads(y.powi_scalar(2).mean().backward(), &fc);
///         opt.step(1e-3, fc.clone(), grads)
///     })?;
/// }
/// // Per step: the Linear kernel (input + output), 2 gradients, 2 Parameters, 2 updates
/// // (Δw and the ratio), AdamW's 2 moments of 2 parameters, the learning rate.
/// assert_eq!(dumper.close()?.rows, 2 * (2 + 2 + 2 + 2 * 2 + 2 * 2 + 1));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct DumpedOptimizer {
    inner: ModuleOptimizer,
}

impl std::fmt::Debug for DumpedOptimizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // burn's ModuleOptimizer has no Debug.
        f.debug_struct("DumpedOptimizer").finish_non_exhaustive()
    }
}

impl From<ModuleOptimizer> for DumpedOptimizer {
    fn from(inner: ModuleOptimizer) -> Self {
        DumpedOptimizer::new(inner)
    }
}

impl DumpedOptimizer {
    /// Wraps `inner` (what `AdamWConfig::new().init()`, `SgdConfig::new().init()`, ... return).
    pub fn new(inner: ModuleOptimizer) -> Self {
        DumpedOptimizer { inner }
    }

    /// The wrapped optimizer's step (`lr` the learning rate of every parameter), with the
    /// training dump of the type docs around it when the step is dumped. Returns the updated
    /// model, as [`ModuleOptimizer::step`] does.
    pub fn step<M: Module>(&mut self, lr: f64, model: M, grads: GradientsParams) -> M {
        if !dumping() {
            return self.inner.step(lr, model, grads);
        }
        let mut walk = Walk {
            path: Vec::new(),
            grads: Some(&grads),
            seen: Vec::new(),
        };
        model.visit(&mut walk);
        let mut before = Before {
            path: Vec::new(),
            weights: HashMap::new(),
        };
        model.visit(&mut before);
        let after = self.inner.step(lr, model, grads);
        let mut dump = After {
            path: Vec::new(),
            before: before.weights,
            state: optimizer_state(&self.inner).unwrap_or_else(|why| {
                diagnose(why);
                HashMap::new()
            }),
        };
        after.visit(&mut dump);
        report_data("LearningRate", &learning_rate_prefix(), || {
            Ok(vec![TensorData::new(vec![lr], [0usize; 0])])
        });
        after
    }

    /// The wrapped optimizer.
    pub fn inner(&self) -> &ModuleOptimizer {
        &self.inner
    }

    /// The wrapped optimizer, mutably (to load a record, add a parameter group, ...).
    pub fn inner_mut(&mut self) -> &mut ModuleOptimizer {
        &mut self.inner
    }

    /// The wrapped optimizer back.
    pub fn into_inner(self) -> ModuleOptimizer {
        self.inner
    }
}

/// The state tensors of every parameter `opt` keeps state for, by parameter id: `(field,
/// tensor)` in record-name order (burnpack sorts names: `momentum.moment_1` before
/// `momentum.moment_2`). Read through burn's public record (see [`DumpedOptimizer`]).
fn optimizer_state(
    opt: &ModuleOptimizer,
) -> Result<HashMap<u64, Vec<(String, TensorData)>>, String> {
    let why = |e: &dyn std::fmt::Display| format!("the optimizer's state could not be read: {e}");
    let bytes = opt.into_bytes().map_err(|e| why(&e))?;
    let tensors = burn_pack::Reader::from_bytes(bytes)
        .and_then(burn_pack::Reader::into_tensors)
        .map_err(|e| why(&e))?;
    let mut by_param: HashMap<u64, Vec<(String, TensorData)>> = HashMap::new();
    for t in tensors {
        let (name, dtype, shape, id, bytes) = t.into_parts().map_err(|e| why(&e))?;
        let Some(id) = id else { continue };
        // Names are `{param_id}.{field}`; a name that is not is skipped rather than misnamed.
        let Some(field) = name.strip_prefix(&format!("{id}.")) else {
            continue;
        };
        by_param.entry(id).or_default().push((
            field.to_owned(),
            TensorData::from_bytes(bytes, shape, dtype),
        ));
    }
    Ok(by_param)
}

/// Collects every float parameter's value before the update, by id (handles, flattened to
/// 1-d so that one map holds every rank).
struct Before {
    path: Vec<String>,
    weights: HashMap<u64, Tensor<1>>,
}

impl ModuleVisitor for Before {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_owned());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let w = param.val();
        let n = w.shape().num_elements();
        self.weights.insert(param.id.val(), w.reshape([n]));
    }
}

/// Dumps each parameter after the update, its update and its optimizer state.
struct After {
    path: Vec<String>,
    before: HashMap<u64, Tensor<1>>,
    state: HashMap<u64, Vec<(String, TensorData)>>,
}

impl ModuleVisitor for After {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_owned());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let path = self.path.join(".");
        let w = param.val();
        parameter(&path, &w);
        let id = param.id.val();
        if let Some(old) = self.before.remove(&id) {
            report_data("Update", &update_prefix(&path), || {
                update(&old.reshape(w.dims()), &w)
            });
        }
        for (field, data) in self.state.remove(&id).unwrap_or_default() {
            let prefix = format!(
                "Optimizer/{}",
                crate::trace::scope_prefix(&format!("{path}.{field}"), "OptimizerState")
            );
            report_data("OptimizerState", &prefix, || Ok(vec![data]));
        }
    }
}

/// The outputs of an `Update` kernel: Δw = `new` − `old` (computed by burn, outside autodiff)
/// and ‖Δw‖/‖old‖ as a 0-d f32, both norms the f64 l2norm of the host data.
fn update<const D: usize>(old: &Tensor<D>, new: &Tensor<D>) -> Result<Vec<TensorData>, String> {
    let old = old.clone().without_autodiff();
    let dw = (new.clone().without_autodiff() - old.clone()).host_data()?;
    let ratio = (l2(&dw)? / l2(&old.host_data()?)?) as f32;
    Ok(vec![dw, TensorData::new(vec![ratio], [0usize; 0])])
}

/// ‖t‖₂ in f64: dump-core's one-pass statistics of the host data (what the dump's `l2norm`
/// column holds); 0 for an empty tensor.
fn l2(t: &TensorData) -> Result<f64, String> {
    let dtype = dtype_of(t.dtype())
        .ok_or_else(|| format!("burn dtype {:?} has no l2 norm here", t.dtype()))?;
    summarize(dtype, t.as_bytes(), t.num_elements())
        .map(|s| s.map_or(0.0, |s| s.l2norm()))
        .map_err(|e| format!("l2 norm: {e}"))
}

/// `Optimizer/Default/{a}/{b}/Update-op` for the path `a.b`.
fn update_prefix(path: &str) -> String {
    format!("Optimizer/{}", crate::trace::scope_prefix(path, "Update"))
}

/// `Optimizer/Default/learning_rate/LearningRate-op`.
fn learning_rate_prefix() -> String {
    format!(
        "Optimizer/{}",
        crate::trace::scope_prefix("learning_rate", "LearningRate")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_kernels_follow_the_module_path() {
        assert_eq!(
            gradient_prefix("features.conv1.weight"),
            "Default/features/conv1/weight/Gradient-op"
        );
        assert_eq!(
            update_prefix("features.conv1.weight"),
            "Optimizer/Default/features/conv1/weight/Update-op"
        );
        assert_eq!(
            learning_rate_prefix(),
            "Optimizer/Default/learning_rate/LearningRate-op"
        );
    }

    #[test]
    fn l2_matches_the_definition() {
        let t = TensorData::new(vec![3f32, 4.0], [2]);
        assert_eq!(l2(&t).unwrap(), 5.0);
        assert_eq!(l2(&TensorData::new(Vec::<f32>::new(), [0])).unwrap(), 0.0);
    }
}
