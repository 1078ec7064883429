//! [`OnnxDump`]: dumps the nodes of an ONNX model run by a runtime that hands back every
//! value (by ONNX value name) after the run — the driver behind dump-ort and dump-candle's
//! ONNX evaluator. Kernels are reported in graph order with their inputs and outputs,
//! initializers are dumped once per graph as constants (straight from the model's bytes),
//! graph inputs as Parameters at the end of each step.

use std::collections::BTreeSet;

use dump_host::{Dumper, GraphToken, Kernel, Step, TensorRef, config::OpDebugMode, graph::Graph};

use crate::{Model, describe};

/// Runtime values of one evaluation, looked up by ONNX value name.
pub trait Values {
    /// Calls `f` with value `name` as a [`TensorRef`] (borrowing the runtime's buffer) and
    /// says how it went.
    fn with_value(
        &self,
        name: &str,
        f: &mut dyn FnMut(TensorRef<'_>) -> Result<(), dump_host::Error>,
    ) -> Lookup;
}

/// What [`Values::with_value`] did.
#[derive(Debug)]
pub enum Lookup {
    /// The value was handed to the Dumper; the Dumper's answer.
    Done(Result<(), dump_host::Error>),
    /// The runtime did not produce the value.
    Missing,
    /// The value cannot be dumped (an unsupported type or device), and why.
    Unsupported(String),
}

/// An ONNX model's dump state: its graph description, kernel names and diagnostics.
#[derive(Debug)]
pub struct OnnxDump {
    graph_id: u32,
    model: Model,
    graph: Graph,
    announced: bool,
    /// The token of the description the last Dumper announced to holds
    /// ([`Dumper::graph_token`]): while that Dumper still holds it, announcing is a switch.
    token: Option<GraphToken>,
    diagnostics: BTreeSet<String>,
}

impl OnnxDump {
    /// Describes `model` as graph `graph_id`.
    pub fn new(model: Model, graph_id: u32) -> Self {
        OnnxDump {
            graph_id,
            graph: describe::describe(&model),
            model,
            announced: false,
            token: None,
            diagnostics: BTreeSet::new(),
        }
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The graph description given to the Dumper.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The graph id.
    pub fn graph_id(&self) -> u32 {
        self.graph_id
    }

    /// The token of this graph's description in the Dumper it was last announced to
    /// (`None` before the first step).
    pub fn token(&self) -> Option<GraphToken> {
        self.token
    }

    /// Whether the step `dumper` begins next for this graph would
    /// [dump nothing](dump_host::Step::dumps_nothing) ([`Dumper::next_step_dumps_nothing`]),
    /// known before the runtime evaluates: once `dumper` holds this graph's description (an
    /// earlier step announced it: [`token`](OnnxDump::token)); `false` (the step may dump)
    /// before that, so a runtime that prepares less for a step answered `true` never lacks a
    /// value the step dumps.
    pub fn next_step_dumps_nothing(&self, dumper: &Dumper) -> bool {
        self.token.is_some()
            && dumper.graph_token(self.graph_id) == self.token
            && dumper.next_step_dumps_nothing(self.graph_id)
    }

    /// Kernel names in execution (graph) order.
    pub fn execution_order(&self) -> Vec<&str> {
        self.graph.execution_order()
    }

    /// The model's declared outputs found in `values` (one evaluation's values by name), in
    /// the model's order, each copied to the host by `to_host`; a failed copy is
    /// [`Error::Failed`](crate::Error::Failed) keeping its cause. What `OnnxRuntime::outputs`
    /// of a runtime driven through [`ExposedModel`](crate::ExposedModel) returns.
    pub fn declared_outputs<V, E>(
        &self,
        values: &std::collections::HashMap<String, V>,
        to_host: impl Fn(&str, &V) -> Result<crate::HostTensor, E>,
    ) -> Result<Vec<crate::HostTensor>, crate::Error>
    where
        E: core::error::Error + Send + Sync + 'static,
    {
        self.model
            .graph
            .outputs
            .iter()
            .filter_map(|o| values.get(&o.name).map(|v| to_host(&o.name, v)))
            .collect::<Result<_, _>>()
            .map_err(|e| crate::Error::Failed(Box::new(e)))
    }

    /// Values that could not be dumped, one line per distinct reason.
    pub fn diagnostics(&self) -> impl Iterator<Item = &str> {
        self.diagnostics.iter().map(String::as_str)
    }

    /// The names of the graph inputs a run needs that `has` does not have, as one message
    /// naming what the model expects; `None` when all are there.
    pub fn missing_inputs(&self, has: impl Fn(&str) -> bool) -> Option<String> {
        if self.model.graph.inputs.iter().all(|i| has(&i.name)) {
            return None; // every step's case: nothing allocated
        }
        let all: Vec<&str> = self
            .model
            .graph
            .inputs
            .iter()
            .map(|i| i.name.as_str())
            .collect();
        let missing: Vec<&str> = all.iter().copied().filter(|n| !has(n)).collect();
        (!missing.is_empty()).then(|| {
            format!(
                "missing input{} {} (the model's inputs: {})",
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", "),
                all.join(", ")
            )
        })
    }

    /// Switches the Dumper to this graph, describing it (graphs/, execution order) the
    /// first time, and dumps the initializers as constants once. Called by every
    /// [`dump_step`](OnnxDump::dump_step), so several models can share one Dumper.
    pub fn announce(&mut self, dumper: &mut Dumper) -> Result<(), dump_host::Error> {
        if self.token.is_some() && dumper.graph_token(self.graph_id) == self.token {
            // This Dumper holds this very description: a switch, no graph compared.
            dumper.switch_graph(self.graph_id);
            return Ok(());
        }
        // The same description again only switches graphs (nothing is rewritten).
        dumper.begin_graph_with(self.graph_id, &self.graph)?;
        self.token = dumper.graph_token(self.graph_id);
        if self.announced {
            return Ok(());
        }
        self.announced = true;
        if dumper.plan().map(|p| p.op_debug_mode) != Some(OpDebugMode::Off) {
            return Ok(()); // overflow/exception dumps hold kernels only
        }
        for w in &self.model.graph.initializers {
            match (w.dtype(), &w.data) {
                (Some(dt), Some(data)) => {
                    dumper.constant(self.graph_id, &w.name, TensorRef::host(dt, &w.dims, data))?
                }
                _ => {
                    self.diagnostics
                        .insert(initializer_reason(w.data_type, w.data.is_some()));
                }
            }
        }
        Ok(())
    }

    /// Dumps one evaluation as the Dumper's next step: every wanted kernel in graph order with
    /// its inputs and outputs (looked up in `values`, initializers from the model), then the
    /// graph inputs as Parameters. The first Dumper error is returned after the step ends.
    ///
    /// With `on_nonfinite` `stop`, the first node whose output holds NaN or ±Inf is the last
    /// one dumped, and its `dump_host::Error::NonFinite` (node, step, output) is returned
    /// (before any other error): the runtime already evaluated the graph, the dump stops where
    /// it first went wrong.
    pub fn dump_step(
        &mut self,
        dumper: &mut Dumper,
        values: &dyn Values,
    ) -> Result<(), dump_host::Error> {
        let step = self.begin_step(dumper)?;
        self.dump_into(dumper, step, values)
    }

    /// Announces the graph ([`announce`](OnnxDump::announce)) and begins the Dumper's next
    /// step, for [`dump_into`](OnnxDump::dump_into): a runtime that learns from
    /// [`Step::dumps_nothing`] that nothing is dumped this step skips collecting the values.
    pub fn begin_step(&mut self, dumper: &mut Dumper) -> Result<Step, dump_host::Error> {
        self.announce(dumper)?;
        Ok(dumper.begin_step())
    }

    /// Announces the graph ([`announce`](OnnxDump::announce)) and begins the Dumper's next
    /// step unless it dumps nothing ([`Dumper::begin_dumping_step`]): `None` when the step
    /// dumps nothing and is already over (no values to collect), else the step for
    /// [`dump_into`](OnnxDump::dump_into).
    pub fn begin_dumping_step(
        &mut self,
        dumper: &mut Dumper,
    ) -> Result<Option<Step>, dump_host::Error> {
        self.announce(dumper)?;
        dumper.begin_dumping_step()
    }

    /// [`dump_step`](OnnxDump::dump_step) into `step`, begun by
    /// [`begin_step`](OnnxDump::begin_step) on `dumper`. A step that
    /// [dumps nothing](Step::dumps_nothing) is only finished (when active): `values` is not
    /// looked at.
    pub fn dump_into(
        &mut self,
        dumper: &Dumper,
        step: Step,
        values: &dyn Values,
    ) -> Result<(), dump_host::Error> {
        if step.dumps_nothing() {
            // No kernel or parameter of this graph is dumped: the step's bookkeeping only.
            return if step.is_active() {
                step.finish()
            } else {
                Ok(())
            };
        }
        let policy = dumper.useless_outputs().0;
        let mut sink = Sink {
            model: &self.model,
            diags: &mut self.diagnostics,
            first_error: None,
            stop: None,
        };
        for (index, (node, g)) in self
            .model
            .graph
            .nodes
            .iter()
            .zip(&self.graph.nodes)
            .enumerate()
        {
            let Some(k) = step.kernel(&g.op_type, &g.name) else {
                continue;
            };
            if !node.attributes.is_empty() {
                // Written only under save_kernel_args (`null` for a node without attributes).
                let args: Vec<(&str, &str)> = node
                    .attributes
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect();
                k.args(&args);
            }
            for (slot, v) in node.inputs.iter().enumerate() {
                sink.report(&k, true, slot, v, values);
            }
            for (slot, v) in node.outputs.iter().enumerate() {
                if self.graph.output_dumped(index, slot, policy) {
                    sink.report(&k, false, slot, v, values);
                }
            }
            if sink.stop.is_some() {
                break; // on_nonfinite stop: the dump ends at the first non-finite node
            }
        }
        for i in &self.model.graph.inputs {
            let r = values.with_value(&i.name, &mut |t| step.parameter(&i.name, t));
            sink.settle(&i.name, r);
        }
        let finished = step.finish();
        match sink.stop.or(sink.first_error) {
            Some(e) => Err(e),
            None => finished,
        }
    }
}

/// Where one step's outcomes go: the first Dumper error, the non-finite output that stops
/// the step (`on_nonfinite` `stop`), and diagnostics.
struct Sink<'a> {
    model: &'a Model,
    diags: &'a mut BTreeSet<String>,
    first_error: Option<dump_host::Error>,
    stop: Option<dump_host::Error>,
}

impl Sink<'_> {
    /// Hands one node input or output to kernel `k`: an initializer from the model's bytes,
    /// any other value from the runtime.
    fn report(
        &mut self,
        k: &Kernel<'_>,
        is_input: bool,
        slot: usize,
        value: &str,
        values: &dyn Values,
    ) {
        if value.is_empty() {
            return; // an omitted optional input or output
        }
        let slot = slot as u32;
        let mut hand = |t: TensorRef<'_>| {
            if is_input {
                k.input(slot, t)
            } else {
                k.output(slot, t)
            }
        };
        if let Some(w) = self.model.initializer(value) {
            match (w.dtype(), &w.data) {
                (Some(dt), Some(data)) => {
                    let r = hand(TensorRef::host(dt, &w.dims, data));
                    self.settle(value, Lookup::Done(r));
                }
                _ => {
                    self.diags
                        .insert(initializer_reason(w.data_type, w.data.is_some()));
                }
            }
            return;
        }
        let r = values.with_value(value, &mut hand);
        self.settle(value, r);
    }

    /// Records the outcome of a lookup.
    fn settle(&mut self, value: &str, r: Lookup) {
        match r {
            Lookup::Done(Ok(())) => {}
            Lookup::Done(Err(e @ dump_host::Error::NonFinite(_))) => {
                self.stop.get_or_insert(e);
            }
            Lookup::Done(Err(e)) => {
                self.first_error.get_or_insert(e);
            }
            Lookup::Missing => {
                self.diags
                    .insert(format!("value {value:?} was not produced by the runtime"));
            }
            Lookup::Unsupported(why) => {
                self.diags.insert(why);
            }
        }
    }
}

fn initializer_reason(code: i32, has_data: bool) -> String {
    if has_data {
        format!("initializers of ONNX type {code} have no MindSpore dtype; they are skipped")
    } else {
        format!("initializers of ONNX type {code} stored outside the model are skipped")
    }
}
