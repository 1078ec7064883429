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

use burn::{
    module::{Module, ModuleVisitor, Param},
    optim::GradientsParams,
    tensor::{Gradients, Tensor},
};

use crate::trace::{dumping, parameter, report};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_kernels_follow_the_module_path() {
        assert_eq!(
            gradient_prefix("features.conv1.weight"),
            "Default/features/conv1/weight/Gradient-op"
        );
    }
}
