//! Runs an ONNX model through candle-onnx with every node dumped (feature `onnx`).
//!
//! candle-onnx evaluates the graph node by node but only returns the graph's outputs, so the
//! model is rewritten once ([`dump_onnx::with_outputs`]) to make every node output a graph
//! output; after each evaluation [`dump_onnx::OnnxDump`] reports the nodes in graph order,
//! each with its input and output tensors (candle's buffers, borrowed), the weights once per
//! graph as constants and the graph inputs as Parameters.
//!
//! Kernels are named `Default/{node name}/{op type}-op{n}`, the names dump-ort and
//! dump-tract give the same model, and the graph description carries the ONNX value names,
//! so dumps of one model by different runtimes line up.

use std::{
    collections::{BTreeSet, HashMap},
    path::Path,
};

use candle_core::Tensor;
use dump_host::{Dumper, TensorRef};
use dump_onnx::{Lookup, Model, OnnxDump, Values};
use prost::Message;

use crate::{Error, convert};

/// A candle-onnx model prepared for dumped runs.
#[derive(Debug)]
pub struct OnnxRunner {
    dump: OnnxDump,
    exposed: candle_onnx::onnx::ModelProto,
}

impl OnnxRunner {
    /// Prepares `bytes` (an `.onnx` file) for graph `graph_id`; external data is looked up
    /// relative to the current folder ([`from_file`](OnnxRunner::from_file) looks beside the
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
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        Self::build(bytes, dir, graph_id)
    }

    fn build(bytes: Vec<u8>, dir: &Path, graph_id: u32) -> Result<Self, Error> {
        let inlined = dump_onnx::inline_data(&bytes, dir, dump_onnx::MAX_INLINE_MODEL)
            .map_err(|e| Error::Model(e.to_string()))?;
        drop(bytes);
        let model = Model::parse(inlined).map_err(|e| Error::Model(e.to_string()))?;
        let declared: BTreeSet<&str> = model
            .graph
            .outputs
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        let extra: Vec<&str> = model
            .graph
            .nodes
            .iter()
            .flat_map(|n| n.outputs.iter())
            .map(String::as_str)
            .filter(|o| !o.is_empty() && !declared.contains(o))
            .collect();
        let rewritten = dump_onnx::with_outputs(model.bytes(), &extra)
            .map_err(|e| Error::Model(e.to_string()))?;
        let exposed = candle_onnx::onnx::ModelProto::decode(rewritten.as_slice())
            .map_err(|e| Error::Model(format!("candle-onnx cannot read the model: {e}")))?;
        Ok(OnnxRunner {
            dump: OnnxDump::new(model, graph_id),
            exposed,
        })
    }

    /// The model's dump state: graph description, execution order, diagnostics.
    pub fn dump(&self) -> &OnnxDump {
        &self.dump
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
        if let Some(m) = self.dump.missing_inputs(|n| inputs.contains_key(n)) {
            return Err(Error::Model(m));
        }
        let mut values = crate::eval::evaluate(&self.exposed, &inputs)?;
        values.extend(inputs);
        self.dump.dump_step(dumper, &CandleValues(&values))?;
        let mut out = HashMap::new();
        for o in &self.dump.model().graph.outputs {
            if let Some(t) = values.remove(&o.name) {
                out.insert(o.name.clone(), t);
            }
        }
        Ok(out)
    }
}

/// One evaluation's candle tensors by value name.
struct CandleValues<'a>(&'a HashMap<String, Tensor>);

impl Values for CandleValues<'_> {
    fn with_value(
        &self,
        name: &str,
        f: &mut dyn FnMut(TensorRef<'_>) -> Result<(), dump_host::Error>,
    ) -> Lookup {
        let Some(t) = self.0.get(name) else {
            return Lookup::Missing;
        };
        match convert::with_tensor_ref(t, f) {
            Some(r) => Lookup::Done(r),
            None => Lookup::Unsupported(
                convert::unsupported_reason(t).unwrap_or_else(|| format!("{name}: no dump view")),
            ),
        }
    }
}
