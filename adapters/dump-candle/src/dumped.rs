//! [`Dumped`] and [`DumpedT`]: wrap a candle module so that each call of its forward is a
//! dumped kernel (input 0 and output 0), named by the caller's VarBuilder-style prefix.

use candle_core::{Module, ModuleT, Result, Tensor};

use crate::trace::{report_failed, report_module, scope_prefix};

/// The op type of module type `M`: the last path segment of its type name, generics dropped
/// (`candle_nn::conv::Conv2d` → `Conv2d`).
pub fn op_type_of<M: ?Sized>() -> &'static str {
    let full = std::any::type_name::<M>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

/// Names shared by both wrappers: the op type and the full name up to the op number.
#[derive(Clone, Debug)]
struct Names {
    op_type: &'static str,
    prefix: String,
}

impl Names {
    fn of<M>(name: &str) -> Self {
        let op_type = op_type_of::<M>();
        Names {
            op_type,
            prefix: scope_prefix(name, Some(op_type), op_type),
        }
    }
}

/// A [`Module`] whose every forward is dumped as kernel
/// `Default/{prefix path}-{Type}/{Type}-op{n}` (op type `Type` from the module's type name).
/// [`ModuleT`] comes with it (candle implements it for every `Module`); for modules that only
/// implement `ModuleT` (dropout, batch norm), use [`DumpedT`].
///
/// Outside [`Tracer::step`](crate::Tracer::step) it is the bare module plus one thread-local
/// read per call.
#[derive(Clone, Debug)]
pub struct Dumped<M> {
    inner: M,
    names: Names,
    /// The module's parameters, reported with each call (see [`Dumped::with_parameters`]).
    params: Vec<(String, Tensor)>,
}

impl<M> Dumped<M> {
    /// Wraps `inner`, named by `name` — the prefix of its VarBuilder (`vb.pp("conv1")` →
    /// `"conv1"`, nested `"features.conv1"`).
    pub fn new(inner: M, name: &str) -> Self {
        Dumped {
            names: Names::of::<M>(name),
            inner,
            params: Vec::new(),
        }
    }

    /// Reports `params` (`(name, tensor)`, in the module's order: `("weight", ..)`, then
    /// `("bias", ..)`) with each call: in msprobe's layout at levels L0 and mix they are the
    /// `parameters` of the module call's forward entry, as msprobe writes a torch module's
    /// (values as the forward used them; a `Var`'s tensor follows its updates, since a clone
    /// of a candle tensor shares its storage). Nothing in MindSpore's layout, whose
    /// Parameters are the training step's (`DumpedOptimizer`).
    ///
    /// ```
    /// # use candle_core::{DType, Device};
    /// # use candle_nn::{VarBuilder, VarMap, linear};
    /// # use dump_candle::Dumped;
    /// let varmap = VarMap::new();
    /// let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    /// let fc = linear(4, 2, vb.pp("fc"))?;
    /// let params = [("weight", fc.weight().clone())]
    ///     .into_iter()
    ///     .chain(fc.bias().map(|b| ("bias", b.clone())));
    /// let fc = Dumped::new(fc, "fc").with_parameters(params);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn with_parameters<S: Into<String>>(
        mut self,
        params: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Self {
        self.params = params.into_iter().map(|(n, t)| (n.into(), t)).collect();
        self
    }

    /// The wrapped module.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The kernel's op type.
    pub fn op_type(&self) -> &str {
        self.names.op_type
    }
}

impl<M: Module> Module for Dumped<M> {
    /// The inner forward, dumped. With the Dumper's `on_nonfinite` `stop`, an output holding
    /// NaN or ±Inf fails the forward here with a candle error wrapping
    /// `dump_host::Error::NonFinite` (kernel, step, tensor), so `?` stops the model at this
    /// module; [`Tracer::step`](crate::Tracer::step) returns the same error. A forward that
    /// fails is reported for exception dump (`op_debug_mode` 4: its input is dumped).
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let ys = self
            .inner
            .forward(xs)
            .inspect_err(|_| report_failed(self.names.op_type, &self.names.prefix, xs))?;
        stopped(report_module(
            self.names.op_type,
            &self.names.prefix,
            (&[xs], &[&ys]),
            &self.params,
        ))?;
        Ok(ys)
    }
}

/// The candle error of a stop at a non-finite output.
fn stopped(at: Option<dump_host::NonFiniteAt>) -> Result<()> {
    match at {
        Some(at) => Err(candle_core::Error::wrap(dump_host::Error::NonFinite(at))),
        None => Ok(()),
    }
}

/// [`Dumped`] for modules that implement only [`ModuleT`] (their forward takes the training
/// flag). Named the same way.
#[derive(Clone, Debug)]
pub struct DumpedT<M> {
    inner: M,
    names: Names,
}

impl<M> DumpedT<M> {
    /// Wraps `inner`, named by the VarBuilder-style prefix `name`.
    pub fn new(inner: M, name: &str) -> Self {
        DumpedT {
            names: Names::of::<M>(name),
            inner,
        }
    }

    /// The wrapped module.
    pub fn inner(&self) -> &M {
        &self.inner
    }
}

impl<M: ModuleT> ModuleT for DumpedT<M> {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Result<Tensor> {
        let ys = self
            .inner
            .forward_t(xs, train)
            .inspect_err(|_| report_failed(self.names.op_type, &self.names.prefix, xs))?;
        stopped(report_module(
            self.names.op_type,
            &self.names.prefix,
            (&[xs], &[&ys]),
            &[],
        ))?;
        Ok(ys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Conv2d;
    struct Gen<T>(T);

    #[test]
    fn op_types_are_the_bare_type_name() {
        assert_eq!(op_type_of::<Conv2d>(), "Conv2d");
        assert_eq!(op_type_of::<Gen<Conv2d>>(), "Gen");
        assert_eq!(op_type_of::<u8>(), "u8");
    }
}
