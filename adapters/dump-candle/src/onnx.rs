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
use dump_host::Dumper;
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
        let inlined = dump_onnx::inline_data(&bytes, dir, dump_onnx::MAX_INLINE_MODEL)
            .map_err(|e| Error::Model(e.to_string()))?;
        drop(bytes);
        let model = Model::parse(inlined).map_err(|e| Error::Model(e.to_string()))?;
        let model = ExposedModel::new(model, graph_id);
        let rewritten = model
            .exposed_bytes()
            .map_err(|e| Error::Model(e.to_string()))?;
        let exposed = candle_onnx::onnx::ModelProto::decode(rewritten.as_slice())
            .map_err(|e| Error::Model(format!("candle-onnx cannot read the model: {e}")))?;
        Ok(CandleRunner {
            model,
            exposed,
            fed: HashMap::new(),
            last: HashMap::new(),
        })
    }

    /// The model's dump state: graph description, execution order, diagnostics.
    pub fn dump(&self) -> &OnnxDump {
        self.model.dump()
    }

    /// Runs one step: evaluates the model on `inputs` (by graph input name), dumps every node
    /// in graph order as the Dumper's next step, and returns the model's declared outputs.
    ///
    /// A panic inside candle-onnx is caught and returned as [`Error::Eval`], which names the
    /// first node that fails (found by evaluating prefixes of the graph); nothing is dumped
    /// for that step.
    pub fn run(
        &mut self,
        dumper: &mut Dumper,
        inputs: HashMap<String, Tensor>,
    ) -> Result<HashMap<String, Tensor>, Error> {
        self.model
            .check_inputs(|n| inputs.contains_key(n))
            .map_err(|e| Error::Model(e.to_string()))?;
        let mut values = crate::eval::evaluate(&self.exposed, &inputs)?;
        values.extend(inputs);
        self.model.dump_values(dumper, &values, view)?;
        Ok(self.model.take_outputs(|name| values.remove(name)))
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
