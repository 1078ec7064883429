//! [`CandleRunner`]: an ONNX model run through candle-onnx with every node dumped (feature
//! `onnx`).
//!
//! candle-onnx evaluates the graph node by node but only returns the graph's outputs, so the
//! model goes through dump-onnx's shared driver ([`dump_onnx::ExposedModel`]): it is
//! rewritten once to make every node output a graph output, and after each evaluation the
//! nodes are reported in graph order, each with its input and output tensors (candle's
//! buffers, borrowed), the weights once per graph as constants and the graph inputs as
//! Parameters.
//!
//! Kernels are named `Default/{node name}/{op type}-op{n}`, the names dump-ort and
//! dump-tract give the same model, and the graph description carries the ONNX value names,
//! so dumps of one model by different runtimes line up.

use std::{collections::HashMap, path::Path};

use candle_core::Tensor;
use dump_host::{Dumper, config::OpDebugMode};
use dump_onnx::{ExposedModel, Hand, Lookup, Model, OnnxDump};
use prost::Message;

use crate::{Error, convert};

/// A candle-onnx model prepared for dumped runs.
#[derive(Debug)]
pub struct CandleRunner {
    model: ExposedModel,
    exposed: candle_onnx::onnx::ModelProto,
    /// The inputs [`OnnxRuntime::set_inputs`](dump_onnx::OnnxRuntime::set_inputs) fixed.
    pub(crate) fed: HashMap<String, Tensor>,
    /// The outputs of the last [`OnnxRuntime::step`](dump_onnx::OnnxRuntime::step).
    pub(crate) last: HashMap<String, Tensor>,
    /// What an exception dump could not do (the run's own error stands).
    pub(crate) diagnostics: Vec<String>,
    /// The model's declared outputs as `exposed`'s graph outputs: swapped with its list (every
    /// node output) for a step known beforehand to dump nothing, so candle-onnx hands back
    /// only what the caller gets (no map entry per exposed value to hash, insert and drop).
    declared: Vec<candle_onnx::onnx::ValueInfoProto>,
}

impl CandleRunner {
    /// Prepares `bytes` (an `.onnx` file) for graph `graph_id`; external data is looked up
    /// relative to the current folder ([`from_file`](CandleRunner::from_file) looks beside the
    /// model).
    pub fn new(bytes: Vec<u8>, graph_id: u32) -> Result<Self, Error> {
        Self::build(bytes, Path::new("."), graph_id)
    }

    /// Prepares the model at `path` for graph `graph_id`. Every initializer is handed to
    /// candle-onnx in `raw_data`, the only field it reads ([`dump_onnx::inline_data`]:
    /// `float_data`, `int64_data` and the other typed fields, and external data beside the
    /// model such as torch's `M.onnx.data`, up to 2 GiB in all).
    pub fn from_file(path: &Path, graph_id: u32) -> Result<Self, Error> {
        let bytes =
            std::fs::read(path).map_err(|e| Error::Model(format!("{}: {e}", path.display())))?;
        Self::build(bytes, dump_onnx::model_dir(path), graph_id)
    }

    fn build(bytes: Vec<u8>, dir: &Path, graph_id: u32) -> Result<Self, Error> {
        let model = |e: dump_onnx::Error| Error::Model(e.to_string());
        // candle-onnx's model is built from the exposed graph without its weights, then each
        // initializer gets its bytes in `raw_data` (the only field candle-onnx reads), tensor
        // by tensor: the weights never pass through one protobuf message, so models beyond
        // protobuf's 2 GiB run.
        let parsed = Model::parse(bytes).map_err(model)?;
        let small = ExposedModel::new(parsed, graph_id);
        let rewritten = small.exposed_bytes().map_err(model)?;
        let mut exposed = candle_onnx::onnx::ModelProto::decode(rewritten.as_slice())
            .map_err(|e| Error::Model(format!("candle-onnx cannot read the model: {e}")))?;
        drop(rewritten);
        if let Some(g) = exposed.graph.as_mut() {
            for t in &mut g.initializer {
                let encoded = t.encode_to_vec();
                if let Some(data) =
                    dump_onnx::initializer_data(&encoded, dir, u64::MAX).map_err(model)?
                {
                    t.raw_data = data;
                    t.float_data.clear();
                    t.int32_data.clear();
                    t.int64_data.clear();
                    t.double_data.clear();
                    t.uint64_data.clear();
                    t.external_data.clear();
                    t.data_location = 0;
                }
            }
        }
        let declared = exposed.graph.as_ref().map_or_else(Vec::new, |g| {
            g.output
                .iter()
                .filter(|o| small.model().graph.outputs.iter().any(|d| d.name == o.name))
                .cloned()
                .collect()
        });
        // The dump reads the weights too (constants, kernel inputs): from the external files
        // when the model fits one message, else without them (a diagnostic names each).
        let model = match small.model().with_external_weights(dir) {
            Some(m) => ExposedModel::new(m, graph_id),
            None => small,
        };
        Ok(CandleRunner {
            model,
            exposed,
            fed: HashMap::new(),
            last: HashMap::new(),
            diagnostics: Vec::new(),
            declared,
        })
    }

    /// The model's dump state: graph description, execution order, diagnostics.
    pub fn dump(&self) -> &OnnxDump {
        self.model.dump()
    }

    /// Runs one step: evaluates the model on `inputs` (by graph input name), dumps every node
    /// in graph order as the Dumper's next step, and returns the model's declared outputs.
    /// A step known beforehand to dump nothing (from the Dumper's second step with this
    /// runner on: a disabled Dumper, a rejected iteration, a `kernels` filter rejecting every
    /// node) evaluates with the declared outputs only and collects no values.
    ///
    /// A panic inside candle-onnx is caught and returned as [`Error::Eval`], which names the
    /// first node that fails (found by evaluating prefixes of the graph); nothing else is
    /// dumped for that step. With `op_debug_mode` 4 (exception dump) that node's inputs go to
    /// `Step::kernel_failed`, computed again by the graph cut before it.
    pub fn run(
        &mut self,
        dumper: &mut Dumper,
        inputs: HashMap<String, Tensor>,
    ) -> Result<HashMap<String, Tensor>, Error> {
        self.model
            .check_inputs(|n| inputs.contains_key(n))
            .map_err(|e| Error::Model(e.to_string()))?;
        let declared_only = self.model.next_step_dumps_nothing(dumper);
        let evaluated = if declared_only {
            self.swap_outputs();
            // Panics are caught inside: the outputs are always swapped back.
            let evaluated = crate::eval::evaluate(&self.exposed, &inputs);
            self.swap_outputs();
            evaluated
        } else {
            crate::eval::evaluate(&self.exposed, &inputs)
        };
        let mut values = match evaluated {
            Ok(v) => v,
            Err(e) => {
                self.exception_dump(dumper, &e, &inputs);
                return Err(e);
            }
        };
        match self.model.begin_dumping_step(dumper)? {
            // Nothing of the model is dumped this step (it is over): no value is looked up.
            None if declared_only => return Ok(values), // the declared outputs, nothing else
            None => {}
            Some(step) => {
                values.extend(inputs);
                self.model.dump_begun(dumper, step, &values, view)?;
            }
        }
        Ok(self.model.take_outputs(|name| values.remove(name)))
    }

    /// Swaps the exposed model's graph outputs (every node output) with the declared ones.
    fn swap_outputs(&mut self) {
        if let Some(g) = self.exposed.graph.as_mut() {
            std::mem::swap(&mut g.output, &mut self.declared);
        }
    }
}

impl CandleRunner {
    /// Exception dump (`op_debug_mode` 4) after evaluation failed with `e`: the values the
    /// failed node was given are evaluated again by the graph cut before it (every node output
    /// is a graph output of the exposed model), and its inputs go to `Step::kernel_failed`.
    /// What cannot be done is a diagnostic; the run's error stands.
    fn exception_dump(&mut self, dumper: &mut Dumper, e: &Error, inputs: &HashMap<String, Tensor>) {
        if dumper.plan().map(|p| p.op_debug_mode) != Some(OpDebugMode::Exception) {
            return;
        }
        let Error::Eval { node: Some(at), .. } = e else {
            self.diagnostics.push(format!(
                "exception dump: the failed node could not be found: {e}"
            ));
            return;
        };
        let mut values = match crate::eval::values_before(&self.exposed, inputs, at.index) {
            Ok(v) => v,
            Err(why) => {
                self.diagnostics.push(format!(
                    "exception dump: the inputs of {at} could not be computed again: {why}"
                ));
                return;
            }
        };
        values.extend(inputs.iter().map(|(k, v)| (k.clone(), v.clone())));
        let wanted = self
            .model
            .model()
            .graph
            .nodes
            .get(at.index)
            .map(|n| n.inputs.clone())
            .unwrap_or_default();
        let mut host = HashMap::new();
        for name in wanted {
            let Some(t) = values.get(&name) else { continue };
            match crate::runtime::to_host(&name, t) {
                Ok(h) => {
                    host.insert(name, h);
                }
                Err(e) => self
                    .diagnostics
                    .push(format!("exception dump: input {name:?} of {at}: {e}")),
            }
        }
        if let Err(e) = self.model.dump_failed(dumper, at.index, &host) {
            self.diagnostics.push(format!("exception dump: {e}"));
        }
    }
}

/// Shows one candle tensor of an evaluation to the Dumper (dump-onnx's
/// [`View`](dump_onnx::View)).
fn view(t: &Tensor, hand: &mut Hand<'_>) -> Lookup {
    match convert::with_tensor_ref(t, hand) {
        Ok(r) => Lookup::Done(r),
        Err(e) => Lookup::Unsupported(e.to_string()),
    }
}
