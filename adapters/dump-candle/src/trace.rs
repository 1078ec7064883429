//! [`Tracer`]: runs one step of a candle model with a [`Step`] installed for the calling
//! thread, so that [`Dumped`](crate::Dumped) modules and [`tap`] calls inside the forward find
//! it without threading a handle through the model's code.
//!
//! Kernels are named `{scope}/{Type}-op{n}`, `n` counting the dumped modules and taps of the
//! step in call order; the kernels seen in a step become the graph's description (execution
//! order csv, `graphs/*.ir|.pb`, inputs wired by candle tensor ids; rewritten only when the
//! sequence of kernels changes).

use std::{
    cell::{Cell, RefCell},
    collections::BTreeSet,
    fmt::Write as _,
};

use candle_core::Tensor;
use dump_host::{
    Dumper, Step,
    scope::{self, StepScope},
};

use crate::{
    Error, convert,
    graph::{Rec, describe},
};

/// Per-graph state of a candle model's dump: the graph id, the execution order seen so far,
/// and the diagnostics (tensors that could not be dumped, one line per reason).
#[derive(Debug, Default)]
pub struct Tracer {
    graph: u32,
    order: Vec<String>,
    recs: Vec<Rec>,
    described: Option<dump_host::graph::Graph>,
    diagnostics: BTreeSet<String>,
}

/// What a step records while its forward runs (lives on the stack of [`Tracer::step`]).
struct Active<'a> {
    step: &'a Step,
    seq: Cell<usize>,
    order: RefCell<Vec<String>>,
    recs: RefCell<Vec<Rec>>,
    changed: Cell<bool>,
    name: RefCell<String>,
    error: RefCell<Option<Error>>,
    diagnostics: RefCell<&'a mut BTreeSet<String>>,
}

/// The marker of this adapter's step scope ([`dump_host::scope`]): inside [`Tracer::step`],
/// its `Active` is reachable from any [`Dumped`](crate::Dumped)/[`tap`] call on the thread.
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

    /// Runs one step: begins a Dumper step, runs `f` (the model's forward, a training step,
    /// ...) with that step installed for this thread, finishes the step and, when the
    /// sequence of dumped kernels changed on a step that dumps, rewrites the graph's execution
    /// order.
    ///
    /// `f`'s result is returned as is. A dump failure never fails the forward: the first one
    /// is returned here after `f` has run (and its result dropped).
    pub fn step<R>(&mut self, dumper: &mut Dumper, f: impl FnOnce() -> R) -> Result<R, Error> {
        // Switch the Dumper to this graph (several tracers may share one Dumper); describing it
        // again with the same description rewrites nothing.
        match &self.described {
            Some(g) => dumper.begin_graph_with(self.graph, g)?,
            None => dumper.begin_graph(self.graph, &[])?,
        }
        let step = dumper.begin_step();
        let active = Active {
            step: &step,
            seq: Cell::new(0),
            order: RefCell::new(std::mem::take(&mut self.order)),
            recs: RefCell::new(std::mem::take(&mut self.recs)),
            changed: Cell::new(false),
            name: RefCell::new(String::new()),
            error: RefCell::new(None),
            diagnostics: RefCell::new(&mut self.diagnostics),
        };
        let out = scope::enter::<Scope, _>(&active, f);
        let Active {
            seq,
            order,
            recs,
            changed,
            error,
            ..
        } = active;
        let active_step = step.is_active();
        let finished = step.finish();
        let mut order = order.into_inner();
        let changed = changed.get() || order.len() != seq.get();
        order.truncate(seq.get());
        self.order = order;
        self.recs = recs.into_inner();
        self.recs.truncate(seq.get());
        // A step that dumps nothing leaves the description alone: kernels reported only on
        // dumped steps (the training dump's gradients and updates) would otherwise rewrite it
        // back and forth. The next dumped step compares against this step's order.
        if (changed && active_step) || self.described.is_none() {
            let graph = describe(self.graph, &self.order, &self.recs);
            dumper.begin_graph_with(self.graph, &graph)?;
            self.described = Some(graph);
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

    /// Tensors that could not be dumped, one line per distinct reason (a dtype without a
    /// MindSpore dtype, a device without a dump path).
    pub fn diagnostics(&self) -> impl Iterator<Item = &str> {
        self.diagnostics.iter().map(String::as_str)
    }
}

/// Whether a [`Tracer::step`] is running on this thread and its step dumps anything (its
/// iteration is selected): what the training dump asks before it copies weights.
pub(crate) fn dumping() -> bool {
    with_active(|a| a.step.is_active()).unwrap_or(false)
}

/// Dumps `t` as Parameter `name` of the active step (its post-step value, at the step's end,
/// as MindSpore does). Does nothing outside [`Tracer::step`].
pub(crate) fn parameter(name: &str, t: &Tensor) {
    with_active(|a| a.parameter(name, t));
}

/// Reports a kernel of the active step: `prefix` is its full name without the op number,
/// `inputs` and `outputs` its tensors. Does nothing outside [`Tracer::step`]. Returns where
/// an output went non-finite when the Dumper's policy is `stop` (the step's error is set too):
/// the caller's cue to fail the forward.
pub(crate) fn report(
    op_type: &str,
    prefix: &str,
    inputs: &[&Tensor],
    outputs: &[&Tensor],
) -> Option<dump_host::NonFiniteAt> {
    report_module(op_type, prefix, (inputs, outputs), &[])
}

/// [`report`] for a module call with its parameters as its forward used them (`(name,
/// tensor)`, reported through `Kernel::parameter`: msprobe's `parameters` of a module call).
pub(crate) fn report_module(
    op_type: &str,
    prefix: &str,
    (inputs, outputs): (&[&Tensor], &[&Tensor]),
    params: &[(String, Tensor)],
) -> Option<dump_host::NonFiniteAt> {
    with_active(|a| a.report(op_type, prefix, (inputs, outputs), params)).flatten()
}

/// Reports a kernel of the active step that failed (its forward returned an error): with
/// `op_debug_mode` 4 (exception dump) its input is dumped through `Step::kernel_failed`. It is
/// named and numbered like any kernel. Does nothing outside [`Tracer::step`].
pub(crate) fn report_failed(op_type: &str, prefix: &str, input: &Tensor) {
    with_active(|a| {
        let n = a.seq.get();
        a.seq.set(n + 1);
        let name = format!("{prefix}{n}");
        a.record(n, &name, op_type, &[input], &[]);
        let done = convert::with_tensor_ref(input, |r| a.step.kernel_failed(op_type, &name, &[r]));
        if let Ok(Err(e)) = done {
            a.error.borrow_mut().get_or_insert(Error::Dump(e));
        }
    });
}

impl Active<'_> {
    fn report(
        &self,
        op_type: &str,
        prefix: &str,
        (inputs, outputs): (&[&Tensor], &[&Tensor]),
        params: &[(String, Tensor)],
    ) -> Option<dump_host::NonFiniteAt> {
        let n = self.seq.get();
        self.seq.set(n + 1);
        let mut name = self.name.borrow_mut();
        name.clear();
        name.push_str(prefix);
        let _ = write!(name, "{n}");
        self.record(n, &name, op_type, inputs, outputs);
        self.watch(op_type, &name, outputs);
        let k = self.step.kernel(op_type, &name)?;
        let mut diagnostics = self.diagnostics.borrow_mut();
        let io = inputs.iter().enumerate().map(|(s, t)| (true, s, t));
        let oo = outputs.iter().enumerate().map(|(s, t)| (false, s, t));
        for (is_input, slot, t) in io.chain(oo) {
            let done = convert::dump_tensor(&k, is_input, slot as u32, t, &mut diagnostics);
            if let Some(at) = self.settle(done) {
                return Some(at);
            }
        }
        for (pname, t) in params {
            let done = match convert::with_tensor_ref(t, |r| k.parameter(pname, r)) {
                Ok(r) => r,
                Err(why) => {
                    diagnostics.insert(why.to_string());
                    Ok(())
                }
            };
            if let Some(at) = self.settle(done) {
                return Some(at);
            }
        }
        None
    }

    /// Watcher mode: hands the watched outputs of kernel `name` over (a clone of the candle
    /// tensor: the same storage, read in place), then checks every watched output after this
    /// kernel. A corruption under `on_corruption` `stop` becomes the step's error (returned by
    /// [`Tracer::step`]; a module's forward is not interrupted).
    fn watch(&self, op_type: &str, name: &str, outputs: &[&Tensor]) {
        if self.step.watches(name) {
            for (slot, t) in outputs.iter().enumerate() {
                let done =
                    self.step
                        .watch_output(name, slot as u32, convert::Watched((*t).clone()));
                if let Err(e) = done {
                    self.diagnostics
                        .borrow_mut()
                        .insert(format!("{name}: watcher: {e}"));
                }
            }
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

    /// Keeps the first error of a tensor's dump for the step; a stop at a non-finite output
    /// (which wins over an earlier dump error: it is what the runtime acts on) is returned.
    fn settle(&self, done: Result<(), dump_host::Error>) -> Option<dump_host::NonFiniteAt> {
        match done {
            Ok(()) => None,
            Err(dump_host::Error::NonFinite(at)) => {
                let mut e = self.error.borrow_mut();
                if !matches!(*e, Some(Error::Dump(dump_host::Error::NonFinite(_)))) {
                    *e = Some(Error::Dump(dump_host::Error::NonFinite(at.clone())));
                }
                Some(at)
            }
            Err(e) => {
                self.error.borrow_mut().get_or_insert(Error::Dump(e));
                None
            }
        }
    }

    fn parameter(&self, name: &str, t: &Tensor) {
        match convert::with_tensor_ref(t, |r| self.step.parameter(name, r)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                self.error.borrow_mut().get_or_insert(Error::Dump(e));
            }
            Err(why) => {
                self.diagnostics.borrow_mut().insert(why.to_string());
            }
        }
    }

    /// Records kernel `n` for the execution order and the graph description.
    fn record(&self, n: usize, name: &str, op_type: &str, inputs: &[&Tensor], outputs: &[&Tensor]) {
        let mut recs = self.recs.borrow_mut();
        if recs.len() <= n {
            recs.resize_with(n + 1, Rec::default);
        }
        recs[n].set(op_type, inputs, outputs);
        let mut order = self.order.borrow_mut();
        match order.get_mut(n) {
            Some(known) if known == name => {}
            Some(known) => {
                name.clone_into(known);
                self.changed.set(true);
            }
            None => {
                order.push(name.to_owned());
                self.changed.set(true);
            }
        }
    }
}

/// Dumps `t` as the output of a kernel of type `op_type` named by the VarBuilder-style
/// `name` (`"block1.attn.softmax"` becomes `Default/block1/attn/softmax/{op_type}-op{n}`).
/// For tensors inside a forward that no module boundary exposes. Does nothing outside
/// [`Tracer::step`], and costs one string build when the kernel is not wanted.
pub fn tap(name: &str, op_type: &str, t: &Tensor) {
    if !scope::is_active::<Scope>() {
        return;
    }
    let prefix = scope_prefix(name, None, op_type);
    // With `on_nonfinite` `stop`, a non-finite `t` becomes the step's error (returned by
    // `Tracer::step`); `tap` itself cannot fail the forward.
    let _ = report(op_type, &prefix, &[], &[t]);
}

/// `Default/{a}/{b}/{c}[-{cell}]/{op_type}-op` for the prefix `a.b.c`.
pub(crate) fn scope_prefix(name: &str, cell: Option<&str>, op_type: &str) -> String {
    let mut s = String::from("Default");
    for part in name.split('.').filter(|p| !p.is_empty()) {
        s.push('/');
        s.push_str(part);
    }
    if let Some(cell) = cell {
        s.push('-');
        s.push_str(cell);
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
            scope_prefix("features.conv1", Some("Conv2d"), "Conv2d"),
            "Default/features/conv1-Conv2d/Conv2d-op"
        );
        assert_eq!(scope_prefix("", None, "Add"), "Default/Add-op");
    }

    #[test]
    fn nothing_is_active_outside_a_step() {
        assert!(with_active(|_| ()).is_none());
        let t = Tensor::zeros(2, candle_core::DType::F32, &candle_core::Device::Cpu).unwrap();
        tap("x", "Add", &t); // must not panic or record anything
    }
}
