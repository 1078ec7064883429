//! `dump-ort`: every node of an ONNX model run by [ONNX Runtime](https://onnxruntime.ai)
//! dumped in MindSpore 2.10's layout.
//!
//! ONNX Runtime's released binaries have no per-node callback, so [`OrtRunner`] rewrites the
//! model once (`dump_onnx::with_outputs`: every node output becomes a graph output), creates
//! the session with graph optimisation disabled (so each kernel is one node of the original
//! graph, never a fused one), and after each run reports the nodes in graph order with their
//! inputs and outputs — ONNX Runtime's own CPU buffers, borrowed, never copied by the adapter.
//! Weights are dumped once per graph as constants, graph inputs as Parameters.
//!
//! `libonnxruntime` is loaded at run time from `ORT_DYLIB_PATH` ([`environment`]); nothing is
//! downloaded when building. `ci/fetch-ort.sh` fetches the `onnxruntime` PyPI wheel and
//! prints the library's path.
//!
//! Kernels are named `Default/{node name}/{op type}-op{n}` and the graph description carries
//! the ONNX value names, like dump-tract and dump-candle's ONNX evaluator, so dumps of one
//! model by different runtimes pair up.
//!
//! Not supported: nodes inside `If`/`Loop`/`Scan` subgraphs (their outputs cannot be graph
//! outputs; the control-flow node itself is dumped), and values on other devices than the
//! CPU (skipped with a diagnostic).
//!
//! ```no_run
//! use dump_host::Dumper;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // ORT_DYLIB_PATH=/path/to/libonnxruntime.so (loaded once per process: `environment()`)
//! let mut runner = dump_ort::OrtRunner::from_file("model.onnx".as_ref(), 0)?;
//! let mut dumper = Dumper::from_env()?; // MINDSPORE_DUMP_CONFIG
//! let x = [0f32; 64];
//! let input = dump_ort::host_tensor(dump_core::DType::Float32, &[1, 1, 8, 8], bytemuck::cast_slice(&x))?;
//! let outputs = runner.run(&mut dumper, &[("x".into(), input)])?;
//! dumper.close()?;
//! # drop(outputs);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod env;
mod error;
mod outputs;
mod runner;
mod runtime;
mod values;

/// dump-onnx, whose `OnnxRuntime` trait this crate's runner implements (re-exported so
/// users need no second dependency).
pub use dump_onnx;
pub use env::{DYLIB_VAR, environment, library_path};
pub use error::Error;
/// The `ort` version this adapter is built against (re-exported so users need no second pin).
pub use ort;
pub use outputs::OrtOutputs;
pub use runner::{OrtRunner, OrtRunnerBuilder, SessionOptions};
pub use values::{dtype_of, host_tensor, with_tensor_ref};
