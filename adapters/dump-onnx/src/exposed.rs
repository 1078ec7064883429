//! [`ExposedModel`]: the driver shared by runtimes that evaluate a whole ONNX graph and hand
//! back only its outputs (ONNX Runtime, candle-onnx). It exposes every node output: the model
//! is rewritten once so that each node output the graph does not already return becomes a
//! graph output ([`with_outputs`](crate::with_outputs)); the runtime evaluates the rewritten
//! model; after each evaluation its values (every value by name, the inputs fed included)
//! are collected into one step of the Dumper by [`OnnxDump`] (nodes in graph order, weights
//! once as constants, graph inputs as Parameters), and the model's own outputs are picked
//! out for the caller.
//!
//! A runtime plugs in its value type and one function that shows a value to the Dumper
//! ([`View`]); everything else is here. A runtime that pays for every exposed output (ONNX
//! Runtime keeps graph outputs alive) narrows the exposure to what its Dumper can dump
//! ([`ExposedModel::expose_for`]) and evaluates the narrowed model instead.

use std::{
    borrow::Borrow,
    collections::{BTreeSet, HashMap},
    hash::Hash,
};

use dump_host::{Dumper, GraphToken, Step, TensorRef};

use crate::{Error, Lookup, Model, OnnxDump, Values, with_outputs};

/// What a runtime's value is handed to: a kernel's input or output, a Parameter.
pub type Hand<'f> = dyn FnMut(TensorRef<'_>) -> Result<(), dump_host::Error> + 'f;

/// Shows one runtime value to the Dumper: calls `hand` with it as a [`TensorRef`] (borrowing
/// the runtime's buffer) and returns [`Lookup::Done`] with the answer, or
/// [`Lookup::Unsupported`] with why it cannot be dumped (its type or device).
pub type View<V> = fn(&V, &mut Hand<'_>) -> Lookup;

/// An ONNX model with every node output exposed as a graph output, and its dump state.
#[derive(Debug)]
pub struct ExposedModel {
    dump: OnnxDump,
    /// Node outputs that are not graph outputs, in graph order: what can be exposed.
    all: Vec<String>,
    /// What is exposed now (appended as outputs): `all`, or the part a Dumper needs
    /// ([`ExposedModel::expose_for`]).
    exposed: Vec<String>,
    /// [`ExposedModel::expose_for`] has narrowed once: from then on it only widens.
    narrowed: bool,
    /// Per node, whether the last Dumper asked about may dump its kernel.
    selected: Vec<bool>,
    /// The graph token that Dumper held when `selected` was worked out: while a Dumper holds
    /// the same token (the same Dumper, this same description), its answers are the same.
    selected_for: Option<GraphToken>,
}

impl ExposedModel {
    /// Prepares `model` as graph `graph_id`: the node outputs it does not return are listed
    /// for exposing.
    pub fn new(model: Model, graph_id: u32) -> Self {
        let declared: BTreeSet<&str> = model
            .graph
            .outputs
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        let all: Vec<String> = model
            .graph
            .nodes
            .iter()
            .flat_map(|n| n.outputs.iter())
            .filter(|o| !o.is_empty() && !declared.contains(o.as_str()))
            .cloned()
            .collect();
        ExposedModel {
            dump: OnnxDump::new(model, graph_id),
            exposed: all.clone(),
            all,
            narrowed: false,
            selected: Vec::new(),
            selected_for: None,
        }
    }

    /// Exposes what `dumper` can dump: the outputs of the nodes whose kernels it
    /// [may dump](Dumper::may_dump_kernel) and the node outputs those nodes read (a kernel's
    /// inputs are dumped too); nothing when it dumps no kernel (a disabled Dumper, a `kernels`
    /// filter that rejects every node). The first call narrows the exposure to that; later
    /// calls only widen it, when a Dumper needs a value not exposed (one runner stepped with
    /// Dumpers of different filters settles on their union instead of switching every
    /// step). Returns `true` when what is exposed changed: the runtime must then evaluate
    /// [`exposed_bytes`](ExposedModel::exposed_bytes) afresh (ONNX Runtime keeps every graph
    /// output alive, so exposing the rejected nodes' values costs memory and time). Cheap
    /// enough to call every step (one filter match per node, none while the same Dumper
    /// holds the same description of the graph: [`Dumper::graph_token`]).
    pub fn expose_for(&mut self, dumper: &Dumper) -> bool {
        let token = dumper.graph_token(self.dump.graph_id());
        if self.narrowed && token.is_some() && token == self.selected_for {
            return false; // the same Dumper and description as when last asked
        }
        self.selected_for = token;
        let nodes = &self.dump.graph().nodes;
        self.selected.resize(nodes.len(), false);
        let mut same = self.narrowed;
        for (s, g) in self.selected.iter_mut().zip(nodes) {
            let may = dumper.may_dump_kernel(&g.name);
            same &= *s == may;
            *s = may;
        }
        if same {
            return false; // the same kernels as last step: nothing to work out
        }
        let model = self.dump.model();
        let mut wanted: BTreeSet<&str> = BTreeSet::new();
        for (node, _) in model
            .graph
            .nodes
            .iter()
            .zip(&self.selected)
            .filter(|(_, s)| **s)
        {
            wanted.extend(node.inputs.iter().chain(&node.outputs).map(String::as_str));
        }
        let now: BTreeSet<&str> = self.exposed.iter().map(String::as_str).collect();
        let keep = |v: &str| wanted.contains(v) || (self.narrowed && now.contains(v));
        let next: Vec<&String> = self.all.iter().filter(|v| keep(v)).collect();
        let changed =
            next.len() != self.exposed.len() || next.iter().any(|v| !now.contains(v.as_str()));
        if changed {
            self.exposed = next.into_iter().cloned().collect();
        }
        self.narrowed = true;
        changed
    }

    /// Exposes every node output again (as [`new`](ExposedModel::new) does).
    pub fn expose_all(&mut self) {
        self.exposed.clone_from(&self.all);
        self.selected_for = None;
    }

    /// The model's bytes with every node output a graph output: what the runtime evaluates.
    pub fn exposed_bytes(&self) -> Result<Vec<u8>, Error> {
        self.rewrite(self.dump.model().bytes())
    }

    /// `bytes` (this model, or the same model with its data inlined) with every node output
    /// a graph output.
    pub fn rewrite(&self, bytes: &[u8]) -> Result<Vec<u8>, Error> {
        let names: Vec<&str> = self.exposed.iter().map(String::as_str).collect();
        with_outputs(bytes, &names)
    }

    /// The node outputs appended as graph outputs now, in graph order.
    pub fn exposed(&self) -> &[String] {
        &self.exposed
    }

    /// The model's dump state: graph description, execution order, diagnostics.
    pub fn dump(&self) -> &OnnxDump {
        &self.dump
    }

    /// The model.
    pub fn model(&self) -> &Model {
        self.dump.model()
    }

    /// [`Error::Model`] naming every graph input `has` lacks and what the model expects.
    pub fn check_inputs(&self, has: impl Fn(&str) -> bool) -> Result<(), Error> {
        match self.dump.missing_inputs(has) {
            Some(m) => Err(Error::Model(m)),
            None => Ok(()),
        }
    }

    /// Dumps one evaluation as the Dumper's next step ([`OnnxDump::dump_step`]): `values`
    /// holds every value the runtime returned and the inputs it was fed, by value name, each
    /// shown to the Dumper through `view`.
    pub fn dump_values<K, V>(
        &mut self,
        dumper: &mut Dumper,
        values: &HashMap<K, V>,
        view: View<V>,
    ) -> Result<(), dump_host::Error>
    where
        K: Borrow<str> + Hash + Eq,
    {
        self.dump.dump_step(dumper, &ByName { values, view })
    }

    /// Whether the step `dumper` begins next for this model would dump nothing
    /// ([`OnnxDump::next_step_dumps_nothing`]), known before the runtime evaluates: a runtime
    /// that pays for every exposed output asks for the model's own outputs only on such a
    /// step (ONNX Runtime's steps that the `iteration` filter rejects, whose session keeps
    /// every node output exposed).
    pub fn next_step_dumps_nothing(&self, dumper: &Dumper) -> bool {
        self.dump.next_step_dumps_nothing(dumper)
    }

    /// Begins the Dumper's next step for this graph ([`OnnxDump::begin_step`]). When the
    /// step [dumps nothing](Step::dumps_nothing), a runtime skips collecting its values and
    /// only [`finish_quiet`](ExposedModel::finish_quiet)es it; otherwise it hands the values
    /// to [`dump_begun`](ExposedModel::dump_begun).
    pub fn begin_step(&mut self, dumper: &mut Dumper) -> Result<Step, dump_host::Error> {
        self.dump.begin_step(dumper)
    }

    /// Begins the Dumper's next step for this graph unless it dumps nothing
    /// ([`OnnxDump::begin_dumping_step`]): `None` when the step is already over and no value
    /// is to be collected, else the step to hand the values to with
    /// [`dump_begun`](ExposedModel::dump_begun).
    pub fn begin_dumping_step(
        &mut self,
        dumper: &mut Dumper,
    ) -> Result<Option<Step>, dump_host::Error> {
        self.dump.begin_dumping_step(dumper)
    }

    /// [`dump_values`](ExposedModel::dump_values) into `step`, begun by
    /// [`begin_step`](ExposedModel::begin_step) on `dumper`.
    pub fn dump_begun<K, V>(
        &mut self,
        dumper: &Dumper,
        step: Step,
        values: &HashMap<K, V>,
        view: View<V>,
    ) -> Result<(), dump_host::Error>
    where
        K: Borrow<str> + Hash + Eq,
    {
        self.dump.dump_into(dumper, step, &ByName { values, view })
    }

    /// Ends a step that [dumps nothing](Step::dumps_nothing): finished when active (the
    /// write failures of earlier steps are returned), dropped otherwise.
    pub fn finish_quiet(step: Step) -> Result<(), dump_host::Error> {
        if step.is_active() {
            step.finish()
        } else {
            Ok(())
        }
    }

    /// The node a runtime's error message names (quoted, `'name'` or `"name"`, as ONNX
    /// Runtime words it: `... running Gather node. Name:'gather1' ...`): its index in graph
    /// order, the longest name if several match; `None` when no node is named.
    pub fn failed_node(&self, message: &str) -> Option<usize> {
        let nodes = &self.dump.model().graph.nodes;
        nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                !n.name.is_empty()
                    && (message.contains(&format!("'{}'", n.name))
                        || message.contains(&format!("\"{}\"", n.name)))
            })
            .max_by_key(|(_, n)| n.name.len())
            .map(|(i, _)| i)
    }

    /// The inputs of node `node` the runtime must compute for an exception dump: those that
    /// are neither graph inputs nor initializers, in input order, each once.
    pub fn computed_inputs(&self, node: usize) -> Vec<String> {
        let g = &self.dump.model().graph;
        let mut out: Vec<String> = Vec::new();
        for i in g.nodes.get(node).map_or(&[][..], |n| &n.inputs[..]) {
            let given = i.is_empty()
                || g.inputs.iter().any(|x| &x.name == i)
                || g.initializers.iter().any(|w| &w.name == i);
            if !given && !out.contains(i) {
                out.push(i.clone());
            }
        }
        out
    }

    /// Exception dump (`op_debug_mode` 4) of node `node`, which failed: its inputs, looked up
    /// in `values` (computed values and the graph inputs fed, by name) or among the
    /// initializers, go to `Step::kernel_failed` as the Dumper's next step, under the
    /// kernel's name in the graph description. An input found nowhere (an optional one left
    /// empty) is left out.
    pub fn dump_failed(
        &mut self,
        dumper: &mut Dumper,
        node: usize,
        values: &HashMap<String, crate::HostTensor>,
    ) -> Result<(), dump_host::Error> {
        self.dump.announce(dumper)?;
        let model = self.dump.model();
        let Some(n) = model.graph.nodes.get(node) else {
            return Ok(());
        };
        let mut refs = Vec::new();
        for i in &n.inputs {
            if let Some(v) = values.get(i) {
                refs.push(TensorRef::host(v.dtype, &v.shape, &v.data));
            } else if let Some(w) = model.graph.initializers.iter().find(|w| &w.name == i)
                && let (Some(dt), Some(data)) = (w.dtype(), &w.data)
            {
                refs.push(TensorRef::host(dt, &w.dims, data));
            }
        }
        let Some(g) = self.dump.graph().nodes.get(node) else {
            return Ok(());
        };
        let step = dumper.begin_step();
        step.kernel_failed(&g.op_type, &g.name, &refs)?;
        step.finish()
    }

    /// The model's declared outputs, each taken by name with `take` (from the evaluation's
    /// values); an output the runtime did not return is left out.
    pub fn take_outputs<V>(&self, mut take: impl FnMut(&str) -> Option<V>) -> HashMap<String, V> {
        self.dump
            .model()
            .graph
            .outputs
            .iter()
            .filter_map(|o| take(&o.name).map(|v| (o.name.clone(), v)))
            .collect()
    }
}

/// One evaluation's values by name, shown through a runtime's [`View`].
struct ByName<'a, K, V> {
    values: &'a HashMap<K, V>,
    view: View<V>,
}

impl<K: Borrow<str> + Hash + Eq, V> Values for ByName<'_, K, V> {
    fn with_value(&self, name: &str, f: &mut Hand<'_>) -> Lookup {
        match self.values.get(name) {
            Some(v) => (self.view)(v, f),
            None => Lookup::Missing,
        }
    }
}
