//! [`TractRunner`]: an ONNX model loaded by tract, typed for its inputs and run with every
//! node dumped; dump-onnx's [`OnnxRuntime`] for `opdump run --runtime tract`.

use std::path::Path;

use dump_host::Dumper;
use dump_onnx::{DeclaredInput, HostTensor, LoadOptions, OnnxRuntime};
use tract_onnx::{
    prelude::{
        Framework, InferenceFact, InferenceModel, InferenceModelExt, IntoRunnable as _, IntoTValue,
        TValue, TVec, Tensor, TypedSimpleState,
    },
    tract_hir::infer::Factoid,
};

use crate::{Error, OnnxNodes, TractDump, dtype_of, host_tensor, tensor::tensor_ref};

/// An ONNX model loaded by tract; after [`prepare`](TractRunner::prepare), its typed plan
/// (one kernel per ONNX node, as `into_typed` builds it) and dump state.
///
/// Through the runtime trait, as `opdump run` drives it:
///
/// ```
/// use dump_tract::{TractRunner, dump_onnx::{HostTensor, LoadOptions, OnnxRuntime}};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let model = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/onnx/add2.onnx");
/// let mut r = TractRunner::load(model.as_ref(), &LoadOptions::default())?;
/// let (a, b) = (1.5f32.to_le_bytes().repeat(6), 2.0f32.to_le_bytes().repeat(6));
/// let inputs = r.inputs().into_iter().zip([a, b]).map(|(d, data)| HostTensor {
///     name: d.name,
///     dtype: d.dtype.expect("float32"),
///     shape: d.shape.expect("[2, 3]"),
///     data,
/// });
/// r.set_inputs(inputs.collect())?;
/// let mut dumper = dump_host::Dumper::disabled(); // or Dumper::from_env()
/// r.step(&mut dumper)?;
/// let out = r.outputs()?;
/// assert_eq!(out[0].shape, [2, 3]);
/// assert_eq!(out[0].data, 5.25f32.to_le_bytes().repeat(6)); // y = (a + b) * a
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct TractRunner {
    graph_id: u32,
    model: Option<InferenceModel>,
    running: Option<(TypedSimpleState, TractDump)>,
    /// The inputs [`OnnxRuntime::set_inputs`] fixed.
    fed: TVec<TValue>,
    /// The outputs of the last [`OnnxRuntime::step`].
    last: TVec<TValue>,
    /// The plan's output value names, in order.
    output_names: Vec<String>,
    /// Each ONNX node's source row (its op type and torch scope, which tract does not keep).
    rows: Vec<(String, String)>,
    /// Each ONNX node's attributes as text (kernel arguments under `save_kernel_args`).
    args: Vec<dump_onnx::NodeArgs>,
}

impl TractRunner {
    /// Loads `bytes` (an `.onnx` file) as graph `graph_id`; external data is looked up
    /// relative to the current folder ([`from_file`](TractRunner::from_file) looks beside the
    /// model).
    pub fn new(bytes: Vec<u8>, graph_id: u32) -> Result<Self, Error> {
        let model = tract_onnx::onnx()
            .model_for_read(&mut bytes.as_slice())
            .or_else(|e| inlined(&bytes, Path::new(".")).ok_or(e))
            .map_err(|e| load_error(&bytes, e))?;
        let rows = dump_onnx::node_rows(&bytes).unwrap_or_default();
        let args = dump_onnx::node_args(&bytes).unwrap_or_default();
        Ok(Self::loaded(model, graph_id, (rows, args)))
    }

    /// Loads the model at `path` as graph `graph_id`, its external data from beside it (a
    /// location tract refuses, such as an absolute one, is inlined first: up to 2 GiB).
    pub fn from_file(path: &Path, graph_id: u32) -> Result<Self, Error> {
        let model = tract_onnx::onnx().model_for_path(path).or_else(|e| {
            let bytes = std::fs::read(path).map_err(|io| Error::Io {
                path: path.to_owned(),
                cause: io,
            })?;
            inlined(&bytes, dump_onnx::model_dir(path)).ok_or_else(|| load_error(&bytes, e))
        })?;
        // The source rows and arguments are a courtesy: a file tract read but this cannot is
        // no error.
        let bytes = std::fs::read(path).unwrap_or_default();
        let rows = dump_onnx::node_rows(&bytes).unwrap_or_default();
        let args = dump_onnx::node_args(&bytes).unwrap_or_default();
        Ok(Self::loaded(model, graph_id, (rows, args)))
    }

    fn loaded(
        model: InferenceModel,
        graph_id: u32,
        (rows, args): (Vec<(String, String)>, Vec<dump_onnx::NodeArgs>),
    ) -> Self {
        TractRunner {
            graph_id,
            model: Some(model),
            running: None,
            fed: TVec::new(),
            last: TVec::new(),
            output_names: Vec::new(),
            rows,
            args,
        }
    }

    /// Fixes the input facts from `inputs` (one per model input, in order), types the model
    /// (`into_typed`: one kernel per ONNX node, every ONNX value dumped) and plans it, the
    /// kernels' source rows naming the ONNX nodes they came from ([`OnnxNodes`]). Once only.
    pub fn prepare(&mut self, inputs: &[Tensor]) -> Result<(), Error> {
        let Some(mut model) = self.model.take() else {
            return Err(Error::Tensor {
                message: "the model was already prepared".into(),
            });
        };
        for (i, t) in inputs.iter().enumerate() {
            model
                .set_input_fact(i, InferenceFact::dt_shape_from_tensor(t))
                .map_err(Error::Plan)?;
        }
        let onnx = OnnxNodes::of(&model)
            .with_rows(std::mem::take(&mut self.rows))
            .with_args(std::mem::take(&mut self.args));
        let plan = model
            .into_typed()
            .and_then(|m| m.into_runnable())
            .map_err(Error::Plan)?;
        let typed = plan.model();
        self.output_names = typed
            .output_outlets()
            .map_err(Error::Plan)?
            .iter()
            .map(|o| {
                typed
                    .outlet_label(*o)
                    .map_or_else(|| typed.node(o.node).name.clone(), str::to_owned)
            })
            .collect();
        let state = plan.spawn().map_err(Error::Plan)?;
        let dump = TractDump::with_onnx_nodes(&plan, self.graph_id, &onnx);
        self.running = Some((state, dump));
        Ok(())
    }

    /// Runs one step of the prepared plan on `inputs` with every node dumped as the Dumper's
    /// next step ([`TractDump::run`]); returns the model's outputs.
    pub fn run(
        &mut self,
        dumper: &mut Dumper,
        inputs: TVec<TValue>,
    ) -> Result<TVec<TValue>, Error> {
        let Some((state, dump)) = self.running.as_mut() else {
            return Err(Error::Tensor {
                message: "the model was not prepared (TractRunner::prepare)".into(),
            });
        };
        dump.run(dumper, state, inputs)
    }

    /// The dump state once prepared: the graph description and diagnostics.
    pub fn dump(&self) -> Option<&TractDump> {
        self.running.as_ref().map(|(_, d)| d)
    }
}

/// Why tract could not load `bytes`: not ONNX at all ([`Error::Onnx`], the caller's to fix),
/// an input of a type tract has no tensors of ([`Error::InputType`]), or what tract said
/// ([`Error::Load`]).
fn load_error(bytes: &[u8], e: tract_onnx::prelude::TractError) -> Error {
    match dump_onnx::Model::parse(bytes.to_vec()) {
        Err(p) => Error::Onnx(p),
        Ok(m) => lacking_input_type(&m).unwrap_or(Error::Load(e)),
    }
}

/// The first graph input whose ONNX type tract 0.23 has no datum type for (bfloat16, the
/// float8s, int4, uint4, float4).
fn lacking_input_type(m: &dump_onnx::Model) -> Option<Error> {
    m.graph.inputs.iter().find_map(|i| {
        let code = i.elem_type?;
        (code == 16 || (17..=25).contains(&code)).then(|| Error::InputType {
            input: i.name.clone(),
            onnx_type: dump_onnx::type_name(code),
        })
    })
}

/// `bytes` with their external data (in `dir`) inlined, up to 2 GiB, and loaded from memory:
/// for what tract refuses to read from the file (an absolute external-data location); `None`
/// when the model cannot be inlined or still does not load.
fn inlined(bytes: &[u8], dir: &Path) -> Option<InferenceModel> {
    let inlined = dump_onnx::inline_data(bytes, dir, dump_onnx::MAX_INLINE_MODEL).ok()?;
    tract_onnx::onnx()
        .model_for_read(&mut inlined.as_slice())
        .ok()
}

/// This crate's error as dump-onnx's, its fault named.
fn classify(e: Error) -> dump_onnx::Error {
    match e {
        Error::Dump(d) => dump_onnx::Error::Dump(d),
        Error::Onnx(o) => o,
        e @ Error::Io { .. } => dump_onnx::Error::Refused(Box::new(e)),
        e => dump_onnx::Error::Failed(Box::new(e)),
    }
}

impl OnnxRuntime for TractRunner {
    fn load(path: &Path, options: &LoadOptions) -> Result<Self, dump_onnx::Error> {
        TractRunner::from_file(path, options.graph_id).map_err(classify)
    }

    fn name(&self) -> &'static str {
        "tract"
    }

    fn inputs(&self) -> Vec<DeclaredInput> {
        let Some(m) = &self.model else {
            return Vec::new();
        };
        let outlets = m.input_outlets().map(<[_]>::to_vec).unwrap_or_default();
        outlets
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let fact = m.input_fact(i).ok();
                DeclaredInput {
                    name: m.node(o.node).name.clone(),
                    dtype: fact
                        .and_then(|f| f.datum_type.concretize())
                        .and_then(dtype_of),
                    shape: fact
                        .and_then(|f| f.shape.as_concrete_finite().ok().flatten())
                        .map(|s| s.to_vec()),
                    onnx_type: None,
                }
            })
            .collect()
    }

    fn set_inputs(&mut self, inputs: Vec<HostTensor>) -> Result<(), dump_onnx::Error> {
        let mut tensors = Vec::with_capacity(inputs.len());
        for t in inputs {
            let v =
                host_tensor(t.dtype, &t.shape, &t.data).map_err(|e| dump_onnx::Error::Input {
                    name: t.name,
                    cause: Box::new(e),
                })?;
            tensors.push(v);
        }
        self.prepare(&tensors).map_err(classify)?;
        self.fed = tensors.into_iter().map(IntoTValue::into_tvalue).collect();
        Ok(())
    }

    fn step(&mut self, dumper: &mut Dumper) -> Result<usize, dump_onnx::Error> {
        self.last = self.run(dumper, self.fed.clone()).map_err(|e| match e {
            Error::Dump(d) => dump_onnx::Error::Dump(d),
            e => dump_onnx::Error::Failed(Box::new(e)),
        })?;
        Ok(self.dump().map_or(0, |d| d.graph().nodes.len()))
    }

    fn outputs(&self) -> Result<Vec<HostTensor>, dump_onnx::Error> {
        self.last
            .iter()
            .zip(self.output_names.iter().cloned())
            .map(|(v, name)| match tensor_ref(v) {
                Ok(r) => Ok(HostTensor {
                    name,
                    dtype: r.dtype(),
                    shape: r.shape().to_vec(),
                    data: r.host_bytes().unwrap_or_default().to_vec(),
                }),
                Err(skip) => Err(dump_onnx::Error::Failed(Box::new(Error::Tensor {
                    message: format!("output {name:?}: {}", skip.describe()),
                }))),
            })
            .collect()
    }

    fn diagnostics(&self) -> Vec<String> {
        self.dump()
            .map(|d| d.diagnostics().to_vec())
            .unwrap_or_default()
    }
}
