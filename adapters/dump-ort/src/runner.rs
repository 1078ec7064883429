//! [`OrtRunner`]: an ONNX model in an ONNX Runtime session with every node output exposed as
//! a graph output, run with graph optimisation disabled so each dumped kernel is one node of
//! the original graph.

use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
};

use dump_host::Dumper;
use dump_onnx::{MAX_INLINE_MODEL, Model, OnnxDump, inline_data};
use ort::{
    environment::Environment,
    session::{Session, builder::GraphOptimizationLevel},
    value::{DynValue, ValueRef},
};

use crate::{Error, values::RunValues};

/// An ONNX model prepared for dumped runs on ONNX Runtime.
pub struct OrtRunner {
    dump: OnnxDump,
    session: Session,
}

impl std::fmt::Debug for OrtRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtRunner")
            .field("dump", &self.dump)
            .finish()
    }
}

impl OrtRunner {
    /// Prepares `bytes` (an `.onnx` file) as graph `graph_id` in a session of `env` (see
    /// [`environment`](crate::environment)). External data is looked up by ONNX Runtime
    /// relative to the current folder; [`from_file`](OrtRunner::from_file) looks it up beside
    /// the model.
    pub fn new(env: &Environment, bytes: Vec<u8>, graph_id: u32) -> Result<Self, Error> {
        Self::build(env, bytes, None, graph_id)
    }

    /// Prepares the model at `path` as graph `graph_id`: external data (`M.onnx` +
    /// `M.onnx.data`, as torch exports it) is resolved by ONNX Runtime itself relative to the
    /// model's folder, whatever the current folder; where ONNX Runtime refuses a location (an
    /// absolute path) the weights are inlined instead (up to 2 GiB). The dump's constants are
    /// read from the same files (up to 2 GiB in all; beyond, they are skipped with a
    /// diagnostic).
    pub fn from_file(env: &Environment, path: &Path, graph_id: u32) -> Result<Self, Error> {
        let bytes =
            std::fs::read(path).map_err(|e| Error::Model(format!("{}: {e}", path.display())))?;
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        Self::build(env, bytes, Some(&dir), graph_id)
    }

    fn build(
        env: &Environment,
        bytes: Vec<u8>,
        dir: Option<&Path>,
        graph_id: u32,
    ) -> Result<Self, Error> {
        let model = Model::parse(bytes)?;
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
        let exposed = dump_onnx::with_outputs(model.bytes(), &extra)?;
        let mut builder =
            Session::builder(env)?.with_optimization_level(GraphOptimizationLevel::Disable)?;
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
            Err(e) => match dir.map(|d| inline_data(model.bytes(), d, MAX_INLINE_MODEL)) {
                Some(Ok(inlined)) => {
                    let exposed = dump_onnx::with_outputs(&inlined, &extra)?;
                    Session::builder(env)?
                        .with_optimization_level(GraphOptimizationLevel::Disable)?
                        .commit_from_memory(&exposed)?
                }
                _ => return Err(e.into()),
            },
        };
        // The dump reads the weights too: from the external files when there are some.
        let model = match dir {
            Some(d) if has_external(&model) => inline_data(model.bytes(), d, MAX_INLINE_MODEL)
                .and_then(Model::parse)
                .unwrap_or(model),
            _ => model,
        };
        Ok(OrtRunner {
            dump: OnnxDump::new(model, graph_id),
            session,
        })
    }

    /// The model's dump state: graph description, execution order, diagnostics.
    pub fn dump(&self) -> &OnnxDump {
        &self.dump
    }

    /// Runs one step: feeds `inputs` (by graph input name, borrowed: reusable across steps), dumps every node in graph order
    /// as the Dumper's next step, and returns the model's declared outputs.
    pub fn run(
        &mut self,
        dumper: &mut Dumper,
        inputs: &[(String, DynValue)],
    ) -> Result<HashMap<String, DynValue>, Error> {
        if let Some(m) = self
            .dump
            .missing_inputs(|n| inputs.iter().any(|(k, _)| k == n))
        {
            return Err(Error::Model(m));
        }
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
        let dumped = self.dump.dump_step(dumper, &RunValues { values });
        let mut out = HashMap::new();
        for o in &self.dump.model().graph.outputs {
            if let Some(v) = outputs.remove(&o.name) {
                out.insert(o.name.clone(), v);
            }
        }
        dumped?;
        Ok(out)
    }
}

/// Whether an initializer of `model` keeps its data outside the model.
fn has_external(model: &Model) -> bool {
    model.graph.initializers.iter().any(|i| i.data.is_none())
}
