//! `dump-onnx`: what opdump's runtime adapters need from an ONNX model, read by a small
//! dependency-free protobuf reader: the main graph's nodes (name, op type, input and output
//! value names), its declared inputs and outputs, and its initializers as bytes
//! ([`Model`]); and a rewrite that exposes chosen values as graph outputs
//! ([`with_outputs`]), for runtimes (ONNX Runtime, candle-onnx) that only return graph
//! outputs; a rewrite that moves every initializer's data (typed fields, external files)
//! into `raw_data` ([`inline_data`]), for runtimes (candle-onnx) that read nothing else; the graph description for the Dumper ([`describe`]) and the driver that dumps
//! one evaluation's values in graph order ([`OnnxDump`]).
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
mod inline;
mod model;
mod scope;
mod step;
pub mod wire;

pub use describe::{describe, full_name};
pub use error::Error;
pub use expose::with_outputs;
pub use inline::{MAX_INLINE_MODEL, inline_data};
pub use model::{Dim, Graph, Initializer, Model, Node, ValueInfo, dtype, onnx_code, type_name};
pub use scope::{
    CLASS_HIERARCHY, NAME_SCOPES, REWRITE_RULE, TorchScope, node_rows, python_str_list,
};
pub use step::{Lookup, OnnxDump, Values};
