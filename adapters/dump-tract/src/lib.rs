//! `dump-tract`: every node of a [tract](https://github.com/sonos/tract) plan dumped in
//! MindSpore 2.10's layout with one call.
//!
//! tract's `SimpleState::run_plan_with_eval` calls a closure for every node of the plan, in
//! the plan's execution order, with its inputs; this crate's closure asks the
//! [`Dumper`] whether the kernel is wanted, hands it the inputs, runs the
//! node with `tract_core::plan::eval`, and hands it the outputs (tract's own buffers, never
//! copied by the adapter). Before the first step it describes the plan to the Dumper
//! ([`dump_host::graph`]: `graphs/*.ir|.pb`, the execution order) and dumps `Const` nodes
//! once as constants; graph inputs are dumped as Parameters at the end of each step.
//!
//! - Kernel names: `Default/{node name}/{op name}-op{n}` (`n` counts the kernels of that op in
//!   execution order); the op type is tract's op name (`Conv`, `Max`, `Softmax`, `EinSum`).
//! - ONNX value names (tract's outlet labels) are the graph description's output names, so the
//!   dumps of different runtimes pair up by value.
//! - The plan is dumped as built: `into_typed()` keeps one kernel per ONNX node (what the
//!   fixture tests compare with onnx.reference's intermediates); `into_decluttered()` and
//!   `into_optimized()` fold nodes (a Flatten into the next MatMul), so some ONNX values are
//!   no longer a kernel output.
//! - ONNX nodes: tract rewrites some ONNX nodes into several typed nodes named `N` or
//!   `N.suffix` (Gemm → `EinSum` + `Add`, Relu → `Max`, LSTM → `Scan` and helpers). Built with
//!   [`TractDump::with_onnx_nodes`], each kernel's source row in `graphs/*.ir` names the ONNX
//!   node it came from (`; onnx node "fc1" decomposed; outputs 0->0`), which `opdump compare`
//!   uses to pair tract with ONNX Runtime or candle at ONNX node boundaries only.
//! - Datum types: bool, u8-u64, i8-i64, f16, f32, f64 are dumped; `TDim`, `String`, `Blob`,
//!   quantized and complex types are skipped with one diagnostic each (tract has no bf16).
//!
//! ```no_run
//! use dump_host::Dumper;
//! use tract_onnx::prelude::*;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let plan = tract_onnx::onnx()
//!     .model_for_path("model.onnx")?
//!     .into_typed()? // no declutter: one kernel per ONNX node, every ONNX value dumped
//!     .into_runnable()?;
//! let mut state = plan.spawn()?;
//! let mut dumper = Dumper::from_env()?; // MINDSPORE_DUMP_CONFIG
//! let x = Tensor::zero::<f32>(&[1, 3, 224, 224])?;
//! let outputs = dump_tract::run_dumped(&mut dumper, &mut state, tvec!(x.into_tvalue()))?;
//! dumper.close()?;
//! # drop(outputs);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod describe;
mod dtype;
mod origin;
mod run;
mod runner;
mod tensor;

use core::fmt;

pub use dtype::dtype_of;
/// dump-onnx, whose `OnnxRuntime` trait this crate's runner implements (re-exported so
/// users need no second dependency).
pub use dump_onnx;
pub use origin::OnnxNodes;
pub use run::TractDump;
pub use runner::TractRunner;
pub use tensor::host_tensor;
/// The tract version this adapter is built against (re-exported so users need no second pin).
pub use tract_onnx;

use dump_host::Dumper;
use tract_onnx::prelude::{TValue, TVec, TypedSimpleState};

/// What can go wrong running a dumped tract model.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// tract failed to run the model.
    Tract(tract_onnx::prelude::TractError),
    /// The Dumper failed (a write error, a config problem).
    Dump(dump_host::Error),
    /// Host data cannot become a tract tensor (byte count, dtype tract lacks), or a
    /// [`TractRunner`] used out of order.
    Tensor {
        /// What is wrong.
        message: String,
    },
    /// tract cannot load the model (an operator or attribute it does not read).
    Load(tract_onnx::prelude::TractError),
    /// tract cannot load the model: a graph input has an ONNX type tract has no tensors of.
    InputType {
        /// The graph input.
        input: String,
        /// Its ONNX element type (`BFLOAT16`).
        onnx_type: &'static str,
    },
    /// tract cannot type or plan the model for the inputs given.
    Plan(tract_onnx::prelude::TractError),
    /// The file is not an ONNX model tract or dump-onnx can read.
    Onnx(dump_onnx::Error),
    /// The model file cannot be read.
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        cause: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Tract(e) => write!(f, "tract: {e:#}"),
            Error::Dump(e) => write!(f, "dump: {e}"),
            Error::Tensor { message } => write!(f, "tensor: {message}"),
            Error::Load(e) => write!(f, "tract cannot load this model: {e:#}"),
            Error::InputType { input, onnx_type } => write!(
                f,
                "tract cannot load this model: input {input:?} is {onnx_type}, a type tract has \
                 no tensors of (run it with --runtime ort)"
            ),
            Error::Plan(e) => write!(f, "tract cannot run this model: {e:#}"),
            Error::Onnx(e) => write!(f, "{e}"),
            Error::Io { path, cause } => write!(f, "{}: {cause}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Dump(e) => Some(e),
            Error::Onnx(e) => Some(e),
            Error::Io { cause, .. } => Some(cause),
            _ => None,
        }
    }
}

impl From<dump_host::Error> for Error {
    fn from(e: dump_host::Error) -> Self {
        Error::Dump(e)
    }
}

/// Runs one step of `state` on `inputs` with every node dumped as graph 0 of `dumper`: the
/// one-call integration. The graph is described to the Dumper at the first call (and again
/// only if the plan changes); with a disabled Dumper it is `state.run(inputs)`. Use [`TractDump`] to choose the graph id or to read the
/// diagnostics (unsupported tensor types).
pub fn run_dumped(
    dumper: &mut Dumper,
    state: &mut TypedSimpleState,
    inputs: TVec<TValue>,
) -> Result<TVec<TValue>, Error> {
    if !dumper.is_enabled() {
        // MINDSPORE_DUMP_CONFIG unset: plain tract, nothing described or hooked
        return state.run(inputs).map_err(Error::Tract);
    }
    TractDump::new(state.plan(), 0).run(dumper, state, inputs)
}
