//! [`OnnxRuntime`]: the one shape of a runtime that runs an ONNX model with every node dumped.
//!
//! dump-tract (`TractRunner`), dump-candle (`CandleRunner`, feature `onnx`) and dump-ort
//! (`OrtRunner`) implement it; `opdump run --runtime NAME` sees nothing else. A runtime is
//! loaded from a path ([`OnnxRuntime::load`], external data beside the model), told its inputs
//! once as host bytes ([`OnnxRuntime::set_inputs`], converted to the runtime's tensors there),
//! then stepped ([`OnnxRuntime::step`]: one evaluation, dumped as the Dumper's next step). Its
//! errors are this crate's [`Error`], which says whose fault a failure is (the caller's input,
//! the runtime, the dump) and keeps the runtime's own error as its cause.

use std::path::Path;

use dump_core::DType;
use dump_host::Dumper;

use crate::{Error, Model, type_name};

/// How a runtime loads a model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadOptions {
    /// The graph id the model is dumped as (`graphs/*_{id}.ir`, the `{graph_id}` directory).
    pub graph_id: u32,
}

impl LoadOptions {
    /// Options dumping the model as graph `graph_id`.
    pub fn graph(graph_id: u32) -> Self {
        LoadOptions { graph_id }
    }
}

/// One graph input as the runtime declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredInput {
    /// Input name.
    pub name: String,
    /// Element type, when the model fixes it and opdump has a dtype for it.
    pub dtype: Option<DType>,
    /// Dimensions, when the model fixes all of them.
    pub shape: Option<Vec<usize>>,
    /// The ONNX element type's name when it has no dump dtype (`FLOAT4E2M1`).
    pub onnx_type: Option<&'static str>,
}

impl DeclaredInput {
    /// The graph inputs `model` declares, in order (what a runtime that reads the model
    /// itself, such as ONNX Runtime or candle-onnx, is fed).
    pub fn of(model: &Model) -> Vec<DeclaredInput> {
        model
            .graph
            .inputs
            .iter()
            .map(|i| DeclaredInput {
                name: i.name.clone(),
                dtype: i.dtype(),
                shape: i.fixed_shape(),
                onnx_type: i.elem_type.filter(|_| i.dtype().is_none()).map(type_name),
            })
            .collect()
    }
}

/// A named tensor on the host: little-endian bytes in C order (an `.npy` file's data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostTensor {
    /// Value name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Bytes (`dtype.storage_bytes(elements)` of them).
    pub data: Vec<u8>,
}

/// A runtime running one ONNX model, every node dumped.
///
/// The lifecycle is `load` → `inputs` → `set_inputs` (once) → `step` (per step) → `outputs`
/// / `diagnostics`. Every method returns a [`Result`] whose error says whose fault it is
/// ([`Error::blames_caller`]); a panic inside the runtime is not caught here (the caller
/// decides how to contain it: `opdump run` turns it into a clean error).
pub trait OnnxRuntime {
    /// Loads the model at `path`; external data (`M.onnx.data`) is looked up beside it,
    /// whatever the current folder.
    fn load(path: &Path, options: &LoadOptions) -> Result<Self, Error>
    where
        Self: Sized;

    /// The runtime's name as `opdump run --runtime` spells it (`tract`).
    fn name(&self) -> &'static str;

    /// The model's graph inputs in order, as the runtime declares them.
    fn inputs(&self) -> Vec<DeclaredInput>;

    /// Fixes the inputs of every following step: one per declared input, in order (converted
    /// to the runtime's tensors once; tract also types and plans the model for them). An input
    /// the runtime has no tensors of is an [`Error::Input`] naming it.
    fn set_inputs(&mut self, inputs: Vec<HostTensor>) -> Result<(), Error>;

    /// Runs one step on the inputs set: one evaluation, every wanted node dumped as the
    /// Dumper's next step. Returns how many kernels the dumped graph has. With
    /// `on_nonfinite` `stop` the step ends at the first non-finite output with
    /// [`Error::Dump`] holding `dump_host::Error::NonFinite`.
    fn step(&mut self, dumper: &mut Dumper) -> Result<usize, Error>;

    /// The graph outputs of the last step, in the model's order, copied to the host (empty
    /// before the first step).
    fn outputs(&self) -> Result<Vec<HostTensor>, Error>;

    /// Values the runtime could not dump (unsupported types), one line per reason.
    fn diagnostics(&self) -> Vec<String>;
}

/// [`OnnxRuntime::load`] behind a box: what a registry of runtimes (`opdump run`) stores as
/// each runtime's constructor (`load_boxed::<TractRunner>`).
pub fn load_boxed<R: OnnxRuntime + 'static>(
    path: &Path,
    options: &LoadOptions,
) -> Result<Box<dyn OnnxRuntime>, Error> {
    Ok(Box::new(R::load(path, options)?))
}

/// The folder external data is looked up in for the model at `path`: its parent, `.` for a
/// bare file name.
pub fn model_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
