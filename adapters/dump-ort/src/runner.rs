//! [`OrtRunner`]: an ONNX model in an ONNX Runtime session with every node output exposed as
//! a graph output (dump-onnx's [`ExposedModel`]), run with graph optimisation disabled so each
//! dumped kernel is one node of the original graph.

use std::{collections::HashMap, path::Path};

use dump_host::Dumper;
use dump_onnx::{ExposedModel, MAX_INLINE_MODEL, Model, inline_data};
use ort::{
    session::{Session, builder::GraphOptimizationLevel},
    value::{DynValue, ValueRef},
};

use crate::{Error, env::environment, values::view};

/// An ONNX model prepared for dumped runs on ONNX Runtime.
pub struct OrtRunner {
    model: ExposedModel,
    session: Session,
    /// The inputs [`OnnxRuntime::set_inputs`](dump_onnx::OnnxRuntime::set_inputs) fixed.
    pub(crate) fed: Vec<(String, DynValue)>,
    /// The outputs of the last [`OnnxRuntime::step`](dump_onnx::OnnxRuntime::step).
    pub(crate) last: HashMap<String, DynValue>,
}

impl std::fmt::Debug for OrtRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtRunner")
            .field("model", &self.model)
            .finish()
    }
}

impl OrtRunner {
    /// Prepares `bytes` (an `.onnx` file) as graph `graph_id` in a session of the process's
    /// ONNX Runtime ([`environment`](crate::environment): the library `ORT_DYLIB_PATH`
    /// names). External data is looked up by ONNX Runtime relative to the current folder;
    /// [`from_file`](OrtRunner::from_file) looks it up beside the model.
    pub fn new(bytes: Vec<u8>, graph_id: u32) -> Result<Self, Error> {
        Self::build(bytes, None, graph_id)
    }

    /// Prepares the model at `path` as graph `graph_id`: external data (`M.onnx` +
    /// `M.onnx.data`, as torch exports it) is resolved by ONNX Runtime itself relative to the
    /// model's folder, whatever the current folder; where ONNX Runtime refuses a location (an
    /// absolute path) the weights are inlined instead (up to 2 GiB). The dump's constants are
    /// read from the same files (up to 2 GiB in all; beyond, they are skipped with a
    /// diagnostic).
    pub fn from_file(path: &Path, graph_id: u32) -> Result<Self, Error> {
        let bytes =
            std::fs::read(path).map_err(|e| Error::Model(format!("{}: {e}", path.display())))?;
        let dir = dump_onnx::model_dir(path).to_owned();
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        Self::build(bytes, Some(&dir), graph_id)
    }

    fn build(bytes: Vec<u8>, dir: Option<&Path>, graph_id: u32) -> Result<Self, Error> {
        let env = environment()?;
        let model = ExposedModel::new(Model::parse(bytes)?, graph_id);
        let exposed = model.exposed_bytes()?;
        let mut builder =
            Session::builder(&env)?.with_optimization_level(GraphOptimizationLevel::Disable)?;
        if let Some(dir) = dir {
            // ONNX Runtime's own external-data resolution, rooted at the model's folder (the
            // session is created from memory, which otherwise roots it at the current folder).
            builder = builder.with_config_entry(
                "session.model_external_initializers_file_folder_path",
                dir.to_string_lossy(),
            )?;
        }
        let session = match builder.commit_from_memory(&exposed) {
            Ok(s) => s,
            // ONNX Runtime refuses some external data it could read (an absolute location):
            // the weights inlined (up to 2 GiB), the model is given again.
            Err(e) => match dir.map(|d| inline_data(model.model().bytes(), d, MAX_INLINE_MODEL)) {
                Some(Ok(inlined)) => Session::builder(&env)?
                    .with_optimization_level(GraphOptimizationLevel::Disable)?
                    .commit_from_memory(&model.rewrite(&inlined)?)
                    .map_err(Error::Load)?,
                _ => return Err(Error::Load(e)),
            },
        };
        drop(exposed);
        // The dump reads the weights too: from the external files when there are some.
        let model = match dir {
            Some(d) if has_external(model.model()) => {
                match inline_data(model.model().bytes(), d, MAX_INLINE_MODEL).and_then(Model::parse)
                {
                    Ok(m) => ExposedModel::new(m, graph_id),
                    Err(_) => model,
                }
            }
            _ => model,
        };
        Ok(OrtRunner {
            model,
            session,
            fed: Vec::new(),
            last: HashMap::new(),
        })
    }

    /// The model's dump state: graph description, execution order, diagnostics.
    pub fn dump(&self) -> &dump_onnx::OnnxDump {
        self.model.dump()
    }

    /// Runs one step: feeds `inputs` (by graph input name, borrowed: reusable across steps),
    /// dumps every node in graph order as the Dumper's next step, and returns the model's
    /// declared outputs.
    pub fn run(
        &mut self,
        dumper: &mut Dumper,
        inputs: &[(String, DynValue)],
    ) -> Result<HashMap<String, DynValue>, Error> {
        self.model
            .check_inputs(|n| inputs.iter().any(|(k, _)| k == n))?;
        let fed: Vec<(String, ort::session::SessionInputValue<'_>)> =
            inputs.iter().map(|(k, v)| (k.clone(), v.into())).collect();
        let mut outputs = self.session.run(fed)?;
        let mut values: HashMap<&str, ValueRef<'_>> = HashMap::new();
        for (k, v) in inputs {
            values.insert(k, v.view());
        }
        for (k, v) in outputs.iter() {
            values.insert(k, v);
        }
        let dumped = self.model.dump_values(dumper, &values, view);
        drop(values);
        let out = self.model.take_outputs(|name| outputs.remove(name));
        dumped?;
        Ok(out)
    }
}

/// Whether an initializer of `model` keeps its data outside the model.
fn has_external(model: &Model) -> bool {
    model.graph.initializers.iter().any(|i| i.data.is_none())
}
