//! `dump-onnx`: what opdump's runtime adapters need from an ONNX model, read by a small
//! dependency-free protobuf reader: the main graph's nodes (name, op type, input and output
//! value names), its declared inputs and outputs, and its initializers as bytes
//! ([`Model`]); and a rewrite that exposes chosen values as graph outputs
//! ([`with_outputs`]), for runtimes (ONNX Runtime, candle-onnx) that only return graph
//! outputs; a rewrite that moves every initializer's data (typed fields, external files)
//! into `raw_data` ([`inline_data`]), for runtimes (candle-onnx) that read nothing else; the
//! graph description for the Dumper ([`describe`]) and the driver that dumps one
//! evaluation's values in graph order ([`OnnxDump`]).
//!
//! # The one shape of a runtime adapter
//!
//! Every runtime that runs an ONNX model with each node dumped has the same shape, written
//! down here so that a fourth one is one crate implementing one trait:
//!
//! - **The trait**: [`OnnxRuntime`]. `load(path, &LoadOptions)` (external data beside the
//!   model) → `inputs()` (the graph inputs as the runtime declares them, [`DeclaredInput`]) →
//!   `set_inputs(Vec<HostTensor>)` once (host bytes converted to the runtime's tensors; tract
//!   also types and plans the model for them) → `step(&mut Dumper)` per step (one evaluation,
//!   every wanted node dumped as the Dumper's next step) → `outputs()` (the model's outputs,
//!   copied to the host) and `diagnostics()` (what could not be dumped). `opdump run` holds a
//!   `Box<dyn OnnxRuntime>` made by [`load_boxed`] and knows nothing else of a runtime.
//! - **The implementations**, one per adapter crate, with the same constructor names
//!   (`new(bytes, graph_id)`, `from_file(path, graph_id)`) and a native `run` that takes and
//!   returns the runtime's own tensors: `dump_tract::TractRunner` (tract calls back for every
//!   node: the dump happens inside the plan's run, `TractDump`), `dump_candle::CandleRunner`
//!   (feature `onnx`) and `dump_ort::OrtRunner`.
//! - **The shared driver** for runtimes that evaluate a whole graph and return only its
//!   outputs (candle-onnx, ONNX Runtime): [`ExposedModel`]. It rewrites the model once so
//!   every node output is a graph output, checks the inputs, collects one evaluation's values
//!   (by name, through the runtime's one [`View`] function) into one Dumper step in graph
//!   order ([`OnnxDump`]), and picks the model's own outputs back out for the caller.
//! - **The helpers**, named alike in each adapter crate: `host_tensor(dtype, shape, bytes)`
//!   (host bytes → the runtime's tensor), `with_tensor_ref(tensor, f)` (the runtime's tensor
//!   as a borrowed `TensorRef`), `dtype_of` (its element type → `DType`); every one returns a
//!   `Result` with the crate's error enum.
//! - **Errors**: each adapter keeps its own error enum (its runtime's error inside); through
//!   the trait they become this crate's [`Error`], which keeps that error as its cause and
//!   says whose fault it is ([`Error::blames_caller`]: the model file, an input or the
//!   environment, or else the runtime or the dump) and whether `on_nonfinite` `stop` ended the
//!   step ([`Error::non_finite`]). A panic inside a runtime is left to the caller: `opdump
//!   run` contains it (its `run/contain.rs`) and reports a clean error.
//!
//! Only the main graph is read: nodes inside `If`/`Loop`/`Scan` subgraphs are not listed.
//!
//! ```
//! # fn main() -> Result<(), dump_onnx::Error> {
//! let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/onnx/cnn.onnx"))
//!     .expect("fixture");
//! let model = dump_onnx::Model::parse(bytes)?;
//! let relu = &model.graph.nodes[1];
//! assert_eq!((relu.op_type.as_str(), relu.outputs[0].as_str()), ("Relu", "relu1_out"));
//! assert_eq!(dump_onnx::describe(&model).nodes[1].name, "Default/relu1/Relu-op0");
//!
//! let exposed = dump_onnx::with_outputs(model.bytes(), &["relu1_out"])?;
//! let again = dump_onnx::Model::parse(exposed)?;
//! assert_eq!(again.graph.outputs.last().unwrap().name, "relu1_out");
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod attr;
mod describe;
mod error;
mod expose;
mod exposed;
mod inline;
mod model;
mod runtime;
mod scope;
mod step;
pub mod wire;

pub use describe::{describe, full_name};
pub use error::{Cause, Error};
pub use expose::{only_outputs, with_outputs};
pub use exposed::{ExposedModel, Hand, View};
pub use inline::{MAX_INLINE_MODEL, initializer_data, inline_data};
pub use model::{Dim, Graph, Initializer, Model, Node, ValueInfo, dtype, onnx_code, type_name};
pub use runtime::{DeclaredInput, HostTensor, LoadOptions, OnnxRuntime, load_boxed, model_dir};
pub use scope::{
    CLASS_HIERARCHY, NAME_SCOPES, NodeArgs, REWRITE_RULE, TorchScope, node_args, node_rows,
    python_str_list,
};
pub use step::{Lookup, OnnxDump, Values};
