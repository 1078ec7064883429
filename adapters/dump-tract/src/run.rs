//! [`TractDump`]: runs a tract plan with every node's inputs and outputs handed to the Dumper.

use std::collections::HashSet;

use dump_host::{Dumper, GraphToken, Kernel, config::OpDebugMode, graph::Graph};
use tract_onnx::prelude::{
    TValue, TVec, Tensor, TractResult, TypedNode, TypedSimplePlan, TypedSimpleState,
};
use tract_onnx::tract_core::{
    ops::{OpState, konst::Const},
    plan::{EvalContext, eval},
};

use crate::{
    Error,
    describe::{Described, Role, describe},
    origin::OnnxNodes,
    tensor::{Skip, Watched, tensor_ref},
};

/// A tract plan prepared for dumping: kernel names, the graph description and the diagnostics
/// of the runs so far. Make one per plan and call [`run`](TractDump::run) for every step
/// ([`crate::run_dumped`] does both in one call).
#[derive(Debug)]
pub struct TractDump {
    graph_id: u32,
    /// Per kernel of the graph: the attributes of the ONNX node it came from (empty when
    /// unknown), written as kernel arguments under `save_kernel_args`.
    args: Vec<Vec<(String, String)>>,
    described: Described,
    announced: bool,
    /// The token of the description the last Dumper announced to holds
    /// ([`Dumper::graph_token`]): while that Dumper still holds it, announcing is a switch.
    token: Option<GraphToken>,
    diagnostics: Vec<String>,
    reported: HashSet<String>,
}

/// Records `skip` once per kind.
fn note(diags: &mut Vec<String>, seen: &mut HashSet<String>, what: &str, skip: Skip) {
    if seen.insert(skip.key()) {
        diags.push(format!("{what}: not dumped: {}", skip.describe()));
    }
}

/// Hands `t` to the kernel as input or output `slot`; problems become diagnostics, except
/// the non-finite output that stops the run (`on_nonfinite` `stop`), which is returned.
fn report(
    k: &Kernel<'_>,
    output: bool,
    slot: usize,
    t: &Tensor,
    diags: &mut Vec<String>,
    seen: &mut HashSet<String>,
    name: &str,
) -> Option<dump_host::Error> {
    let io = if output { "output" } else { "input" };
    match tensor_ref(t) {
        Ok(r) => {
            let done = if output {
                k.output(slot as u32, r)
            } else {
                k.input(slot as u32, r)
            };
            match done {
                Err(e @ dump_host::Error::NonFinite(_)) => return Some(e),
                Err(e) => diags.push(format!("{name} {io} {slot}: {e}")),
                Ok(()) => {}
            }
        }
        Err(skip) => note(diags, seen, &format!("{name} {io} {slot}"), skip),
    }
    None
}

impl TractDump {
    /// Prepares `plan` (its kernels in the plan's execution order) as graph `graph_id`.
    pub fn new(plan: &TypedSimplePlan, graph_id: u32) -> Self {
        Self::build(plan, graph_id, None)
    }

    /// Like [`new`](TractDump::new), with the ONNX nodes of the model the plan was made from
    /// ([`OnnxNodes::of`] the `InferenceModel` before `into_typed`): every kernel's source row
    /// in `graphs/*.ir` then names the ONNX node it came from, whether tract decomposed it
    /// (Gemm → `EinSum` + `Add`, Relu → `Max`), and which of its outputs are that node's
    /// outputs, so that `opdump compare` pairs tract with another runtime at ONNX node
    /// boundaries only.
    pub fn with_onnx_nodes(plan: &TypedSimplePlan, graph_id: u32, onnx: &OnnxNodes) -> Self {
        Self::build(plan, graph_id, Some(onnx))
    }

    fn build(plan: &TypedSimplePlan, graph_id: u32, onnx: Option<&OnnxNodes>) -> Self {
        let described = describe(plan, &format!("kernel_graph{graph_id}"), onnx);
        // Each kernel's arguments: the attributes of the ONNX node it came from.
        let args = described
            .graph
            .nodes
            .iter()
            .map(|g| {
                // The typed node's own name is its scope after `Default/` (the kernel name
                // is the MindSpore-style full name).
                let typed = g.scope.strip_prefix("Default/").unwrap_or(&g.scope);
                onnx.and_then(|o| o.origin(typed).map(|n| o.args(n).to_vec()))
                    .unwrap_or_default()
            })
            .collect();
        TractDump {
            graph_id,
            args,
            described,
            announced: false,
            token: None,
            diagnostics: Vec::new(),
            reported: HashSet::new(),
        }
    }

    /// The graph description handed to the Dumper (kernels in execution order, ONNX value
    /// names on their outputs).
    pub fn graph(&self) -> &Graph {
        &self.described.graph
    }

    /// Tensors that could not be dumped (one line per unsupported type), and dump errors.
    pub fn diagnostics(&self) -> &[String] {
        &self.diagnostics
    }

    /// Switches the Dumper to this graph, describing it first when the Dumper does not hold this
    /// very description yet, and dumps the constants once.
    fn announce(&mut self, dumper: &mut Dumper, plan: &TypedSimplePlan) -> Result<(), Error> {
        if self.token.is_some() && dumper.graph_token(self.graph_id) == self.token {
            // This Dumper holds this very description: a switch, no graph compared.
            dumper.switch_graph(self.graph_id);
            return Ok(());
        }
        let known = dumper.graph(self.graph_id) == Some(&self.described.graph);
        dumper.begin_graph_with(self.graph_id, &self.described.graph)?;
        self.token = dumper.graph_token(self.graph_id);
        if std::mem::replace(&mut self.announced, true) || known {
            return Ok(());
        }
        if dumper.plan().map(|p| p.op_debug_mode) != Some(OpDebugMode::Off) {
            return Ok(()); // overflow/exception dumps hold kernels only
        }
        let model = plan.model();
        for (id, role) in self.described.roles.iter().enumerate() {
            let (Some(Role::Const(p)), Some(c)) = (role.clone(), model.node(id).op_as::<Const>())
            else {
                continue;
            };
            let name = &self.described.graph.parameters[p].name;
            match tensor_ref(c.val()) {
                Ok(t) => dumper.constant(self.graph_id, name, t)?,
                Err(skip) => note(
                    &mut self.diagnostics,
                    &mut self.reported,
                    &format!("constant {name}"),
                    skip,
                ),
            }
        }
        Ok(())
    }

    /// Runs one step of `state` on `inputs` with the Dumper's next step: every selected kernel's
    /// inputs (before it runs) and outputs (after), graph inputs as Parameters at step end.
    /// Returns the model's outputs; a tensor the Dumper rejects becomes a
    /// [`diagnostic`](TractDump::diagnostics), a failed write an [`Error::Dump`] after the step.
    /// With `op_debug_mode` 4 (exception dump) a node that fails (an error, or a panic, which
    /// is caught and becomes the error) has its inputs dumped through `Step::kernel_failed`.
    /// With `on_nonfinite` `stop`, the first node whose output holds NaN or ±Inf ends the run
    /// there (no later node runs) and the step returns
    /// `Error::Dump(dump_host::Error::NonFinite(..))` naming that node, the step and the output.
    /// In watcher mode (`opdump.watcher`, an acl.json watcher scene) the outputs of the
    /// watched nodes are held (a clone of their `TValue`) and checked after every node
    /// (`Step::kernel_ran`); with `on_corruption` `stop` the first corruption ends the run
    /// there and the step returns `Error::Dump(dump_host::Error::MemoryCorruption(..))`.
    pub fn run(
        &mut self,
        dumper: &mut Dumper,
        state: &mut TypedSimpleState,
        inputs: TVec<TValue>,
    ) -> Result<TVec<TValue>, Error> {
        self.announce(dumper, state.plan())?;
        let step = dumper.begin_step();
        if step.dumps_nothing() {
            // No kernel or graph input of this plan is dumped this step (a disabled Dumper, a
            // step the iteration filter rejects, a `kernels` filter that rejects every
            // kernel): tract's own run, unhooked.
            if !step.is_active() {
                drop(step);
                return state.run(inputs).map_err(Error::Tract);
            }
            let outputs = state.run(inputs);
            let finished = step.finish();
            let outputs = outputs.map_err(Error::Tract)?;
            finished?;
            return Ok(outputs);
        }
        let policy = dumper.useless_outputs().0;
        let graph = &self.described.graph;
        let roles = &self.described.roles;
        let args = &self.args;
        let (diags, seen) = (&mut self.diagnostics, &mut self.reported);
        let mut fed: Vec<(usize, TValue)> = Vec::new();
        let mut stopped: Option<dump_host::Error> = None;
        let exception = dumper.plan().map(|p| p.op_debug_mode) == Some(OpDebugMode::Exception);
        let hook = |ctx: &EvalContext<'_>,
                    op_state: Option<&mut (dyn OpState + 'static)>,
                    node: &TypedNode,
                    ins: TVec<TValue>|
         -> TractResult<TVec<TValue>> {
            match roles.get(node.id).cloned().flatten() {
                Some(Role::Kernel(k)) if exception => {
                    // Exception dump (op_debug_mode 4): the inputs of a node that fails.
                    let g = &graph.nodes[k];
                    let kept = ins.clone();
                    // A node that panics (tract indexes without checks: a Gather index out
                    // of range) fails like one that returns an error.
                    let outs = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        eval(ctx, op_state, node, ins)
                    }))
                    .unwrap_or_else(|p| {
                        let why = p
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                            .or_else(|| p.downcast_ref::<String>().cloned())
                            .unwrap_or_default();
                        Err(tract_onnx::prelude::TractError::msg(format!(
                            "{} panicked: {why}",
                            g.name
                        )))
                    });
                    if outs.is_err() {
                        let refs: Vec<_> = kept.iter().filter_map(|t| tensor_ref(t).ok()).collect();
                        if let Err(e) = step.kernel_failed(&g.op_type, &g.name, &refs) {
                            diags.push(format!("{}: exception dump: {e}", g.name));
                        }
                    }
                    outs
                }
                Some(Role::Kernel(k)) => {
                    let g = &graph.nodes[k];
                    let kernel = step.kernel(&g.op_type, &g.name);
                    if let Some(kernel) = &kernel {
                        if !args[k].is_empty() {
                            // Written only under save_kernel_args.
                            let pairs: Vec<(&str, &str)> = args[k]
                                .iter()
                                .map(|(n, v)| (n.as_str(), v.as_str()))
                                .collect();
                            kernel.args(&pairs);
                        }
                        for (slot, t) in ins.iter().enumerate() {
                            report(kernel, false, slot, t, diags, seen, &g.name);
                        }
                    }
                    let outs = eval(ctx, op_state, node, ins)?;
                    if let Some(kernel) = &kernel {
                        for (slot, t) in outs.iter().enumerate() {
                            if graph.output_dumped(k, slot, policy)
                                && let Some(e) = report(kernel, true, slot, t, diags, seen, &g.name)
                            {
                                let m = e.to_string();
                                stopped = Some(e);
                                return Err(tract_onnx::prelude::TractError::msg(m));
                            }
                        }
                    }
                    // Watcher mode: the watched outputs are handed over (a clone of the
                    // TValue: the same buffer, kept alive until the step ends), then every
                    // watched output is checked after this kernel.
                    if step.watches(&g.name) {
                        for (slot, t) in outs.iter().enumerate() {
                            if let Err(e) =
                                step.watch_output(&g.name, slot as u32, Watched(t.clone()))
                            {
                                diags.push(format!("{}: watcher: {e}", g.name));
                            }
                        }
                    }
                    match step.kernel_ran(&g.op_type, &g.name) {
                        Ok(()) => {}
                        Err(e @ dump_host::Error::MemoryCorruption(_)) => {
                            let m = e.to_string();
                            stopped = Some(e);
                            return Err(tract_onnx::prelude::TractError::msg(m));
                        }
                        Err(e) => diags.push(format!("{}: watcher: {e}", g.name)),
                    }
                    Ok(outs)
                }
                Some(Role::Input(p)) => {
                    let outs = eval(ctx, op_state, node, ins)?;
                    if let Some(v) = outs.first() {
                        fed.push((p, v.clone()));
                    }
                    Ok(outs)
                }
                _ => eval(ctx, op_state, node, ins),
            }
        };
        let outputs = state.run_plan_with_eval(inputs, hook);
        for (p, v) in &fed {
            let name = &graph.parameters[*p].name;
            match tensor_ref(v) {
                Ok(t) => {
                    if let Err(e) = step.parameter(name, t) {
                        self.diagnostics.push(format!("parameter {name}: {e}"));
                    }
                }
                Err(skip) => note(
                    &mut self.diagnostics,
                    &mut self.reported,
                    &format!("parameter {name}"),
                    skip,
                ),
            }
        }
        let finished = step.finish();
        if let Some(e) = stopped {
            return Err(Error::Dump(e));
        }
        let outputs = outputs.map_err(Error::Tract)?;
        finished?;
        Ok(outputs)
    }
}
