//! [`OrtRunner`]: an ONNX model in an ONNX Runtime session with every node output its Dumper
//! can dump exposed as a graph output (dump-onnx's [`ExposedModel`]; a `kernels` filter
//! narrows them, a disabled Dumper exposes none), run with graph optimisation disabled so each
//! dumped kernel is one node of the original graph.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use dump_host::{Dumper, config::OpDebugMode};
use dump_onnx::{ExposedModel, HostTensor, MAX_INLINE_MODEL, Model, inline_data};
use ort::{
    session::{Session, builder::GraphOptimizationLevel},
    value::{DynValue, ValueRef},
};

use crate::{
    Error,
    env::environment,
    values::{to_host, view},
};

/// An ONNX model prepared for dumped runs on ONNX Runtime.
pub struct OrtRunner {
    model: ExposedModel,
    session: Session,
    /// The inputs [`OnnxRuntime::set_inputs`](dump_onnx::OnnxRuntime::set_inputs) fixed.
    pub(crate) fed: Vec<(String, DynValue)>,
    /// The outputs of the last [`OnnxRuntime::step`](dump_onnx::OnnxRuntime::step).
    pub(crate) last: HashMap<String, DynValue>,
    /// The model's folder, where its external data is (`from_file`).
    dir: Option<PathBuf>,
    /// What an exception dump could not do.
    pub(crate) diagnostics: Vec<String>,
    /// A session of the narrowed model failed once: every node output stays exposed.
    keep_all: bool,
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
        let model = ExposedModel::new(Model::parse(bytes)?, graph_id);
        let session = open_session(&model, dir)?;
        // The dump reads the weights too: from the external files when there are some.
        let model = match dir.and_then(|d| model.model().with_external_weights(d)) {
            Some(m) => ExposedModel::new(m, graph_id),
            None => model,
        };
        Ok(OrtRunner {
            model,
            session,
            fed: Vec::new(),
            last: HashMap::new(),
            dir: dir.map(Path::to_path_buf),
            diagnostics: Vec::new(),
            keep_all: false,
        })
    }

    /// Exposes only the node outputs `dumper` can dump ([`ExposedModel::expose_for`]); when
    /// that changes them, the session is opened again on the narrowed model, so ONNX Runtime
    /// neither returns nor keeps alive the values of kernels the `kernels` filter rejects
    /// (none at all for a disabled Dumper). Should that session fail, every output stays
    /// exposed (a diagnostic says why) and the dump is as before.
    fn narrow_to(&mut self, dumper: &Dumper) {
        if self.keep_all || !self.model.expose_for(dumper) {
            return;
        }
        match open_session(&self.model, self.dir.as_deref()) {
            Ok(s) => self.session = s,
            Err(e) => {
                self.model.expose_all();
                self.keep_all = true;
                self.diagnostics.push(format!(
                    "every node output stays exposed: a session of the model with only the \
                     dumped kernels' values failed: {e}"
                ));
            }
        }
    }

    /// The node outputs the session returns beyond the model's own outputs: every node
    /// output after loading, only those of the kernels the last step's Dumper can dump after
    /// a step ([`ExposedModel::expose_for`]).
    pub fn exposed_outputs(&self) -> &[String] {
        self.model.exposed()
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
        self.narrow_to(dumper);
        let fed: Vec<(String, ort::session::SessionInputValue<'_>)> =
            inputs.iter().map(|(k, v)| (k.clone(), v.into())).collect();
        let ran = self.session.run(fed).map_err(Error::from);
        let mut outputs = match ran {
            Ok(o) => o,
            Err(e) => {
                let message = e.to_string();
                // Disjoint fields: the failed run still borrows the session.
                exception_dump(
                    (&mut self.model, self.dir.as_deref(), &mut self.diagnostics),
                    dumper,
                    inputs,
                    &message,
                );
                return Err(e);
            }
        };
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

/// Exception dump (`op_debug_mode` 4) after a failed run: the node ONNX Runtime's `message`
/// names is found, the values it needed are computed again by a session of the model cut off
/// before it (its computed inputs as the only outputs), and its inputs go to
/// `Step::kernel_failed`. What cannot be done is a diagnostic; the run's error stands.
fn exception_dump(
    (model, dir, diagnostics): (&mut ExposedModel, Option<&Path>, &mut Vec<String>),
    dumper: &mut Dumper,
    inputs: &[(String, DynValue)],
    message: &str,
) {
    if dumper.plan().map(|p| p.op_debug_mode) != Some(OpDebugMode::Exception) {
        return;
    }
    let Some(node) = model.failed_node(message) else {
        diagnostics.push(format!(
            "exception dump: ONNX Runtime's error names no node of the model: {message}"
        ));
        return;
    };
    match failed_inputs(model, dir, node, inputs) {
        Ok(values) => {
            if let Err(e) = model.dump_failed(dumper, node, &values) {
                diagnostics.push(format!("exception dump: {e}"));
            }
        }
        Err(e) => diagnostics.push(format!("exception dump: {e}")),
    }
}

/// The values node `node` of `model` was given: the graph inputs fed, and its computed inputs
/// from a session of the model whose only outputs they are (external data from `dir`).
fn failed_inputs(
    model: &ExposedModel,
    dir: Option<&Path>,
    node: usize,
    inputs: &[(String, DynValue)],
) -> Result<HashMap<String, HostTensor>, Error> {
    let mut values = HashMap::new();
    for (k, v) in inputs {
        values.insert(k.clone(), to_host(k, v)?);
    }
    let wanted = model.computed_inputs(node);
    if wanted.is_empty() {
        return Ok(values);
    }
    let names: Vec<&str> = wanted.iter().map(String::as_str).collect();
    let cut = dump_onnx::only_outputs(model.model().bytes(), &names)?;
    let env = environment()?;
    let mut session = session_builder(&env, dir)?
        .commit_from_memory(&cut)
        .map_err(Error::Load)?;
    let fed: Vec<(String, ort::session::SessionInputValue<'_>)> =
        inputs.iter().map(|(k, v)| (k.clone(), v.into())).collect();
    let mut outputs = session.run(fed)?;
    for name in &wanted {
        if let Some(v) = outputs.remove(name.as_str()) {
            values.insert(name.clone(), to_host(name, &v)?);
        }
    }
    Ok(values)
}

/// A session of `model` as exposed now (external data from `dir`). ONNX Runtime refuses some
/// external data it could read (an absolute location): then the weights are inlined (up to
/// 2 GiB) and the model is given again.
fn open_session(model: &ExposedModel, dir: Option<&Path>) -> Result<Session, Error> {
    let env = environment()?;
    let exposed = model.exposed_bytes()?;
    match session_builder(&env, dir)?.commit_from_memory(&exposed) {
        Ok(s) => Ok(s),
        Err(e) => match dir.map(|d| inline_data(model.model().bytes(), d, MAX_INLINE_MODEL)) {
            Some(Ok(inlined)) => Session::builder(&env)?
                .with_optimization_level(GraphOptimizationLevel::Disable)?
                .commit_from_memory(&model.rewrite(&inlined)?)
                .map_err(Error::Load),
            _ => Err(Error::Load(e)),
        },
    }
}

/// A session builder with graph optimisation off (each dumped kernel is one node of the
/// original graph) and, with `dir`, ONNX Runtime's own external-data resolution rooted at the
/// model's folder (a session created from memory otherwise roots it at the current folder).
fn session_builder(
    env: &ort::environment::Environment,
    dir: Option<&Path>,
) -> Result<ort::session::builder::SessionBuilder, Error> {
    let mut builder =
        Session::builder(env)?.with_optimization_level(GraphOptimizationLevel::Disable)?;
    if let Some(dir) = dir {
        builder = builder.with_config_entry(
            "session.model_external_initializers_file_folder_path",
            dir.to_string_lossy(),
        )?;
    }
    Ok(builder)
}
