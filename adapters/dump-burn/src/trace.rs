//! [`Tracer`]: runs one step of a burn model with a [`Step`] installed for the calling
//! thread, so that [`layer`] and [`tap`] calls inside the forward (and the training dump)
//! find it without threading a handle through the model's code.
//!
//! Kernels are named `{scope}/{Type}-op{n}`, `n` counting the kernels of the step in call
//! order; the names seen in a step become the graph's execution order
//! (`ms_execution_order_graph_{g}.csv`, rewritten only when the sequence changes).

use std::{
    cell::{Cell, RefCell},
    collections::BTreeSet,
    fmt::Write as _,
};

use burn::tensor::{Tensor, TensorData};
use dump_host::{
    Dumper, Kernel, Step, TensorRef,
    scope::{self, StepScope},
};

use crate::{
    Error,
    convert::{HostData, data_ref, with_tensor_ref},
};

/// Per-graph state of a burn model's dump: the graph id, the execution order seen so far,
/// and the diagnostics (tensors that could not be dumped, one line per reason).
#[derive(Debug, Default)]
pub struct Tracer {
    graph: u32,
    order: Vec<String>,
    begun: bool,
    diagnostics: BTreeSet<String>,
}

/// What a step records while it runs (lives on the stack of [`Tracer::step`]).
struct Active<'a> {
    step: &'a Step,
    seq: Cell<usize>,
    order: RefCell<Vec<String>>,
    changed: Cell<bool>,
    name: RefCell<String>,
    error: RefCell<Option<Error>>,
    diagnostics: RefCell<&'a mut BTreeSet<String>>,
}

/// The marker of this adapter's step scope ([`dump_host::scope`]): inside [`Tracer::step`],
/// its `Active` is reachable from any [`layer`]/[`tap`] call on the thread.
struct Scope;

impl StepScope for Scope {
    type Active<'a> = Active<'a>;
}

/// Runs `f` with the active step of this thread, if any.
fn with_active<R>(f: impl FnOnce(&Active<'_>) -> R) -> Option<R> {
    scope::with::<Scope, _>(|a| f(a))
}

impl Tracer {
    /// A tracer for graph `graph_id` (the `{graph}` directory level of the dump).
    pub fn new(graph_id: u32) -> Self {
        Tracer {
            graph: graph_id,
            ..Tracer::default()
        }
    }

    /// Runs one step: begins a Dumper step, runs `f` (a forward, a whole training step, ...)
    /// with that step installed for this thread, finishes the step and, when the sequence of
    /// dumped kernels changed on a step that dumps, rewrites the graph's execution order.
    ///
    /// `f`'s result is returned as is. A dump failure never fails the model: the first one is
    /// returned here after `f` has run (and its result dropped).
    pub fn step<R>(&mut self, dumper: &mut Dumper, f: impl FnOnce() -> R) -> Result<R, Error> {
        if self.begun {
            dumper.switch_graph(self.graph);
        } else {
            dumper.begin_graph(self.graph, &[])?;
            self.begun = true;
        }
        let step = dumper.begin_step();
        let active = Active {
            step: &step,
            seq: Cell::new(0),
            order: RefCell::new(std::mem::take(&mut self.order)),
            changed: Cell::new(false),
            name: RefCell::new(String::new()),
            error: RefCell::new(None),
            diagnostics: RefCell::new(&mut self.diagnostics),
        };
        let out = scope::enter::<Scope, _>(&active, f);
        let Active {
            seq,
            order,
            changed,
            error,
            ..
        } = active;
        let dumped = step.is_active();
        let finished = step.finish();
        let mut order = order.into_inner();
        let changed = changed.get() || order.len() != seq.get();
        order.truncate(seq.get());
        self.order = order;
        // A step that dumps nothing leaves the execution order alone: kernels reported only
        // on dumped steps (the training dump's) would otherwise rewrite it back and forth.
        if changed && dumped {
            let names: Vec<&str> = self.order.iter().map(String::as_str).collect();
            dumper.begin_graph(self.graph, &names)?;
        }
        if let Some(e) = error.into_inner() {
            return Err(e);
        }
        finished?;
        Ok(out)
    }

    /// The graph id.
    pub fn graph(&self) -> u32 {
        self.graph
    }

    /// The kernel names of the last step, in call order (the execution order).
    pub fn execution_order(&self) -> &[String] {
        &self.order
    }

    /// Tensors that could not be dumped, one line per distinct reason (a quantized dtype, a
    /// tensor the backend could not read back).
    pub fn diagnostics(&self) -> impl Iterator<Item = &str> {
        self.diagnostics.iter().map(String::as_str)
    }
}

/// Whether a [`Tracer::step`] is running on this thread and its step dumps anything (its
/// iteration is selected): what the training dump asks before it reads any tensor.
pub(crate) fn dumping() -> bool {
    with_active(|a| a.step.is_active()).unwrap_or(false)
}

/// A tensor of a kernel, for [`Active::tensor`]: which side and slot.
#[derive(Clone, Copy)]
enum Io {
    Input(u32),
    Output(u32),
}

impl Active<'_> {
    /// Numbers the next kernel, names it `{prefix}{n}` and records it in the execution order;
    /// returns the kernel when the Dumper wants it (the filter is asked before any tensor is
    /// touched).
    fn open<'s>(
        &'s self,
        op_type: &'s str,
        prefix: &str,
        name: &'s mut String,
    ) -> Option<Kernel<'s>> {
        let n = self.seq.get();
        self.seq.set(n + 1);
        name.clear();
        name.push_str(prefix);
        let _ = write!(name, "{n}");
        let mut order = self.order.borrow_mut();
        match order.get_mut(n) {
            Some(known) if *known == *name => {}
            Some(known) => {
                name.clone_into(known);
                self.changed.set(true);
            }
            None => {
                order.push(name.clone());
                self.changed.set(true);
            }
        }
        drop(order);
        self.step.kernel(op_type, name)
    }

    /// The outcome of dumping one tensor: a non-finite stop or a write failure becomes the step's
    /// error, an unreadable tensor a diagnostic.
    fn settle(&self, r: Result<Result<(), dump_host::Error>, String>) {
        match r {
            Ok(Ok(())) => {}
            // The stop wins over an earlier dump error: it is what the caller acts on.
            Ok(Err(dump_host::Error::NonFinite(at))) => {
                let mut e = self.error.borrow_mut();
                if !matches!(*e, Some(Error::Dump(dump_host::Error::NonFinite(_)))) {
                    *e = Some(Error::Dump(dump_host::Error::NonFinite(at)));
                }
            }
            Ok(Err(e)) => {
                self.error.borrow_mut().get_or_insert(Error::Dump(e));
            }
            Err(why) => {
                self.diagnostics.borrow_mut().insert(why);
            }
        }
    }

    /// Watcher mode, after kernel `name` ran: its output `out` is handed over when it is
    /// watched (a clone of the burn tensor, read to the host at every check), then every
    /// watched output is checked. A corruption under `on_corruption` `stop` becomes the step's
    /// error (returned by [`Tracer::step`]; the forward is not interrupted).
    fn ran(&self, op_type: &str, name: &str, out: Option<&dyn Fn() -> Watched>) {
        if let Some(out) = out
            && self.step.watches(name)
            && let Err(e) = self.step.watch_output(name, 0, out())
        {
            self.diagnostics
                .borrow_mut()
                .insert(format!("{name}: watcher: {e}"));
        }
        match self.step.kernel_ran(op_type, name) {
            Ok(()) => {}
            Err(e @ dump_host::Error::MemoryCorruption(_)) => {
                let mut err = self.error.borrow_mut();
                if !matches!(
                    *err,
                    Some(Error::Dump(dump_host::Error::MemoryCorruption(_)))
                ) {
                    *err = Some(Error::Dump(e));
                }
            }
            Err(e) => {
                self.diagnostics
                    .borrow_mut()
                    .insert(format!("{name}: watcher: {e}"));
            }
        }
    }

    fn parameter(&self, name: &str, t: TensorRef<'_>) {
        if let Err(e) = self.step.parameter(name, t) {
            self.error.borrow_mut().get_or_insert(Error::Dump(e));
        }
    }
}

/// A watched output's handle (watcher mode): a clone of the burn tensor (its storage shared),
/// read to the host at every check.
pub(crate) struct Watched(Box<dyn HostData + Send>);

impl dump_host::watcher::WatchedTensor for Watched {
    fn read(&self, f: &mut dyn FnMut(TensorRef<'_>)) {
        // A tensor that cannot be read is reported unreadable by the watcher (no call back).
        let _ = with_tensor_ref(&*self.0, f);
    }
}

/// Dumps one tensor as `io` of `k`.
fn dump<T: HostData + ?Sized>(a: &Active<'_>, k: &Kernel<'_>, io: Io, t: &T) {
    let r = with_tensor_ref(t, |r| match io {
        Io::Input(s) => k.input(s, r),
        Io::Output(s) => k.output(s, r),
    });
    a.settle(r);
}

/// Reports kernel `prefix{n}` of type `op_type` with output 0 `t` to the active step. Does
/// nothing outside [`Tracer::step`]; when the Dumper does not want the kernel, costs the
/// name's formatting and the filter (the tensor is not touched).
pub(crate) fn report<T: HostData + ?Sized>(op_type: &str, prefix: &str, t: &T) {
    with_active(|a| {
        let mut name = std::mem::take(&mut *a.name.borrow_mut());
        if let Some(k) = a.open(op_type, prefix, &mut name) {
            dump(a, &k, Io::Output(0), t);
        }
        // A borrowed tensor cannot be held: checked after, never watched (`layer` outputs are).
        a.ran(op_type, &name, None);
        *a.name.borrow_mut() = name;
    });
}

/// Reports kernel `prefix{n}` of type `op_type` whose outputs `outputs()` computes (already on
/// the host), output `i` in slot `i`. `outputs` runs only when the Dumper wants the kernel; the
/// reason it gives when it cannot compute them becomes a diagnostic. Does nothing outside
/// [`Tracer::step`].
pub(crate) fn report_data(
    op_type: &str,
    prefix: &str,
    outputs: impl FnOnce() -> Result<Vec<TensorData>, String>,
) {
    with_active(|a| {
        let mut name = std::mem::take(&mut *a.name.borrow_mut());
        if let Some(k) = a.open(op_type, prefix, &mut name) {
            match outputs() {
                Ok(data) => {
                    for (slot, d) in data.iter().enumerate() {
                        a.settle(data_ref(d, |r| k.output(slot as u32, r)));
                    }
                }
                Err(why) => {
                    a.diagnostics.borrow_mut().insert(why);
                }
            }
        }
        a.ran(op_type, &name, None);
        *a.name.borrow_mut() = name;
    });
}

/// Records `why` (something that could not be dumped) in the running step's diagnostics.
pub(crate) fn diagnose(why: String) {
    with_active(|a| a.diagnostics.borrow_mut().insert(why));
}

/// Dumps `t` as Parameter `name` of the active step. Does nothing outside [`Tracer::step`].
pub(crate) fn parameter<const D: usize>(name: &str, t: &Tensor<D>) {
    with_active(|a| {
        if !a.step.is_active() {
            return;
        }
        let r = with_tensor_ref(t, |r| a.parameter(name, r));
        if let Err(why) = r {
            a.diagnostics.borrow_mut().insert(why);
        }
    });
}

/// Dumps `t` as the output of a kernel of type `op_type` named by the module path `name`
/// (`"block1.attn.softmax"` becomes `Default/block1/attn/softmax/{op_type}-op{n}`). For
/// tensors inside a forward that no [`layer`] call exposes. Does nothing outside
/// [`Tracer::step`]; when the kernel is not wanted, costs one string build and the filter.
///
/// With `on_nonfinite` `stop`, a non-finite `t` becomes the step's error (returned by
/// [`Tracer::step`]); `tap` itself cannot fail the forward.
pub fn tap<T: HostData + ?Sized>(name: &str, op_type: &str, t: &T) {
    if !scope::is_active::<Scope>() {
        return;
    }
    report(op_type, &scope_prefix(name, op_type), t);
}

/// Runs one layer of a model as a kernel: `f(module, input)` (the layer's forward), with
/// `input` dumped as input 0 and the result as output 0 of
/// `Default/{name with / for .}/{Type}-op{n}`, `Type` being the module's type name
/// (`Conv2d`, `Linear`, `Relu`: [`op_type_of`]). Outside [`Tracer::step`] it is `f(module,
/// input)`.
///
/// burn modules have no common forward trait and burn 0.22 no operator hook (see the crate
/// docs), so this is the one-line change per layer inside the model's `forward`:
/// `layer("features.conv1", &self.conv1, x, |m, x| m.forward(x))`.
pub fn layer<M, const DI: usize, const DO: usize>(
    name: &str,
    module: &M,
    input: Tensor<DI>,
    f: impl FnOnce(&M, Tensor<DI>) -> Tensor<DO>,
) -> Tensor<DO> {
    if !scope::is_active::<Scope>() {
        return f(module, input);
    }
    let op_type = op_type_of::<M>();
    let prefix = scope_prefix(name, op_type);
    with_active(|a| {
        let mut name = String::new();
        let kernel = a.open(op_type, &prefix, &mut name);
        if let Some(k) = &kernel {
            dump(a, k, Io::Input(0), &input);
        }
        let out = f(module, input);
        if let Some(k) = &kernel {
            dump(a, k, Io::Output(0), &out);
        }
        drop(kernel);
        a.ran(op_type, &name, Some(&|| Watched(Box::new(out.clone()))));
        out
    })
    .unwrap_or_else(|| unreachable!("checked above"))
}

/// The op type of module type `M`: its type name without the module path and generic
/// arguments (`burn_nn::modules::conv::conv2d::Conv2d` -> `Conv2d`).
pub fn op_type_of<M>() -> &'static str {
    let full = std::any::type_name::<M>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

/// `Default/{a}/{b}/{c}/{op_type}-op` for the path `a.b.c`.
pub(crate) fn scope_prefix(name: &str, op_type: &str) -> String {
    let mut s = String::from("Default");
    for part in name.split('.').filter(|p| !p.is_empty()) {
        s.push('/');
        s.push_str(part);
    }
    s.push('/');
    s.push_str(op_type);
    s.push_str("-op");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_names_follow_mindspore() {
        assert_eq!(
            scope_prefix("features.conv1", "Conv2d"),
            "Default/features/conv1/Conv2d-op"
        );
        assert_eq!(scope_prefix("", "Add"), "Default/Add-op");
    }

    #[test]
    fn op_types_are_bare_type_names() {
        assert_eq!(op_type_of::<Vec<u8>>(), "Vec");
        assert_eq!(op_type_of::<Tracer>(), "Tracer");
    }

    #[test]
    fn nothing_is_active_outside_a_step() {
        assert!(with_active(|_| ()).is_none());
        assert!(!dumping());
    }
}
