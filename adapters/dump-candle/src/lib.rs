//! `dump-candle`: dump every operator of a candle model in MindSpore 2.10's layout.
//!
//! candle has no operator hook, so the dump points are explicit:
//!
//! * [`Dumped<M>`](Dumped) (and [`DumpedT<M>`](DumpedT) for `ModuleT`-only modules) wraps a
//!   module: each forward is one kernel, its input and output dumped, named by the
//!   VarBuilder-style prefix you give (`"features.conv1"`), its op type from the module type;
//! * [`tap`] dumps a tensor inside a forward that no module boundary exposes;
//! * [`DumpedOptimizer`] wraps a candle-nn optimizer: each step of training also dumps every
//!   parameter's gradient (a `Gradient` kernel, in backward's order), the parameters
//!   themselves (`Parameter`), the update Δw with ‖Δw‖/‖w‖, and the optimizer's state
//!   ([`OptimizerState`]); [`Training`] is the same for loops that call the optimizer
//!   themselves;
//! * with feature `onnx`, `CandleRunner` runs an ONNX model through candle-onnx with every
//!   node's inputs and outputs dumped in graph order (dump-onnx's shared driver); it is one
//!   of the three `dump_onnx::OnnxRuntime`s, beside dump-tract's `TractRunner` and
//!   dump-ort's `OrtRunner`.
//!
//! A [`Tracer`] runs each step: it begins the Dumper's step, installs it for the calling
//! thread while your closure runs, and keeps the graph's execution order. CPU tensors are
//! handed to the Dumper without a copy (candle's storage and layout become a host or strided
//! [`TensorRef`](dump_host::TensorRef)). Feature `cuda` dumps tensors in candle's CUDA
//! storage in place through `dump-device-cuda` (statistics on the GPU, on candle's stream); it
//! needs nvcc at build time, as candle's own `cuda` does (see the README).
//!
//! ```
//! use candle_core::{Device, Module, Tensor};
//! use dump_candle::{Dumped, Tracer};
//! use dump_host::{DumpOptions, Dumper};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::env::temp_dir().join(format!("dump-candle-doc-{}", std::process::id()));
//! let config = format!(
//!     r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
//!        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
//!        "support_device": [0]}},
//!        "e2e_dump_settings": {{"enable": true, "trans_flag": true}}}}"#,
//!     dir.display()
//! );
//! let env = std::collections::HashMap::<String, String>::new();
//! let mut dumper = Dumper::builder().env(&env).options(DumpOptions::default()).open_json(config.into_bytes())?;
//!
//! // Any Module works; a closure is one.
//! let relu = Dumped::new(|x: &Tensor| x.relu(), "block.act");
//! let mut tracer = Tracer::new(0);
//! let x = Tensor::new(&[-1f32, 2.0, -3.0], &Device::Cpu)?;
//! let y = tracer.step(&mut dumper, || relu.forward(&x))??;
//! assert_eq!(y.to_vec1::<f32>()?, [0.0, 2.0, 0.0]);
//! assert_eq!(tracer.execution_order()[0], "Default/block/act-{{closure}}/{{closure}}-op0");
//! let report = dumper.close()?;
//! assert_eq!(report.rows, 2); // input 0 and output 0
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod convert;
#[cfg(feature = "cuda")]
mod cuda;
mod dtype;
mod dumped;
mod error;
#[cfg(feature = "onnx")]
mod eval;
mod graph;
#[cfg(feature = "onnx")]
mod onnx;
#[cfg(feature = "onnx")]
mod runtime;
mod trace;
mod train;

/// The candle version this adapter is built against (re-exported so users need no second pin).
pub use candle_core;
/// The candle-nn version the training dump wraps (VarMap, optimizers).
pub use candle_nn;
/// The candle-onnx version the ONNX evaluator runs (feature `onnx`).
#[cfg(feature = "onnx")]
pub use candle_onnx;
pub use convert::{dtype_of, host_tensor, with_tensor_ref};
/// dump-onnx, whose `OnnxRuntime` trait [`CandleRunner`] implements (feature `onnx`;
/// re-exported so users need no second dependency).
#[cfg(feature = "onnx")]
pub use dump_onnx;
pub use dumped::{Dumped, DumpedT, op_type_of};
pub use error::{Error, EvalCause, NodeAt};
#[cfg(feature = "onnx")]
pub use onnx::CandleRunner;
pub use trace::{Tracer, tap};
pub use train::{DumpedOptimizer, OptimizerState, Training};
