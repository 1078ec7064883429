//! [`OrtRunner`]: an ONNX model in an ONNX Runtime session with every node output its Dumper
//! can dump exposed as a graph output (dump-onnx's [`ExposedModel`]; a `kernels` filter
//! narrows them, a disabled Dumper exposes none), run with graph optimisation disabled so each
//! dumped kernel is one node of the original graph.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};

use dump_host::{Dumper, config::OpDebugMode};
use dump_onnx::{ExposedModel, HostTensor, MAX_INLINE_MODEL, Model, inline_data};
use ort::{
    session::{
        HasSelectedOutputs, OutputSelector, RunOptions, Session, builder::GraphOptimizationLevel,
    },
    value::{DynValue, ValueRef},
};

use crate::{
    Error, OrtOutputs,
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
    /// How its sessions are opened: the model's folder (where its external data is,
    /// `from_file`) and the user's session options.
    setup: Setup,
    /// What an exception dump could not do.
    pub(crate) diagnostics: Vec<String>,
    /// A session of the narrowed model failed once: every node output stays exposed.
    keep_all: bool,
    /// Run options asking ONNX Runtime for the model's declared outputs only: a step that
    /// dumps nothing while node outputs are exposed (the `iteration` filter rejects it) gets
    /// none of them back. In a `Mutex` only so that the runner stays `Sync` (options with
    /// selected outputs are not); reached through `get_mut`, never locked.
    declared_only: Mutex<RunOptions<HasSelectedOutputs>>,
}

impl std::fmt::Debug for OrtRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtRunner")
            .field("model", &self.model)
            .finish()
    }
}

/// Session settings beyond what the dump needs (graph optimisation stays off, so each dumped
/// kernel is one node of the model): see [`OrtRunner::builder`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionOptions {
    /// Threads within a node (`None`: ONNX Runtime's default, one per core).
    pub intra_threads: Option<usize>,
    /// Session config entries, applied in order (for example
    /// `session.intra_op.allow_spinning` = `0`: idle threads sleep instead of spinning).
    pub config: Vec<(String, String)>,
}

/// Where and how sessions are opened.
#[derive(Clone, Debug, Default)]
struct Setup {
    dir: Option<PathBuf>,
    options: SessionOptions,
}

/// Builds an [`OrtRunner`] with [`SessionOptions`]; the last call names the model
/// ([`from_file`](OrtRunnerBuilder::from_file) or [`from_bytes`](OrtRunnerBuilder::from_bytes)).
///
/// ```no_run
/// // Two runners in one process, each on one thread that sleeps when idle.
/// let runner = dump_ort::OrtRunner::builder()
///     .intra_threads(1)
///     .config_entry("session.intra_op.allow_spinning", "0")
///     .from_file("model.onnx".as_ref(), 0)?;
/// # Ok::<(), dump_ort::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct OrtRunnerBuilder {
    options: SessionOptions,
}

impl OrtRunnerBuilder {
    /// Threads within a node for every session of the runner.
    pub fn intra_threads(mut self, n: usize) -> Self {
        self.options.intra_threads = Some(n);
        self
    }

    /// A session config entry (ONNX Runtime's `AddSessionConfigEntry`) for every session of
    /// the runner.
    pub fn config_entry(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.options.config.push((key.into(), value.into()));
        self
    }

    /// All the options at once.
    pub fn options(mut self, options: SessionOptions) -> Self {
        self.options = options;
        self
    }

    /// [`OrtRunner::new`] with these options.
    pub fn from_bytes(self, bytes: Vec<u8>, graph_id: u32) -> Result<OrtRunner, Error> {
        OrtRunner::build(
            bytes,
            Setup {
                dir: None,
                options: self.options,
            },
            graph_id,
        )
    }

    /// [`OrtRunner::from_file`] with these options.
    pub fn from_file(self, path: &Path, graph_id: u32) -> Result<OrtRunner, Error> {
        let bytes =
            std::fs::read(path).map_err(|e| Error::Model(format!("{}: {e}", path.display())))?;
        let dir = dump_onnx::model_dir(path).to_owned();
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        OrtRunner::build(
            bytes,
            Setup {
                dir: Some(dir),
                options: self.options,
            },
            graph_id,
        )
    }
}

impl OrtRunner {
    /// Prepares `bytes` (an `.onnx` file) as graph `graph_id` in a session of the process's
    /// ONNX Runtime ([`environment`](crate::environment): the library `ORT_DYLIB_PATH`
    /// names). External data is looked up by ONNX Runtime relative to the current folder;
    /// [`from_file`](OrtRunner::from_file) looks it up beside the model.
    pub fn new(bytes: Vec<u8>, graph_id: u32) -> Result<Self, Error> {
        Self::builder().from_bytes(bytes, graph_id)
    }

    /// A runner with [`SessionOptions`] (threads, session config entries).
    pub fn builder() -> OrtRunnerBuilder {
        OrtRunnerBuilder::default()
    }

    /// Prepares the model at `path` as graph `graph_id`: external data (`M.onnx` +
    /// `M.onnx.data`, as torch exports it) is resolved by ONNX Runtime itself relative to the
    /// model's folder, whatever the current folder; where ONNX Runtime refuses a location (an
    /// absolute path) the weights are inlined instead (up to 2 GiB). The dump's constants are
    /// read from the same files (up to 2 GiB in all; beyond, they are skipped with a
    /// diagnostic).
    pub fn from_file(path: &Path, graph_id: u32) -> Result<Self, Error> {
        Self::builder().from_file(path, graph_id)
    }

    fn build(bytes: Vec<u8>, setup: Setup, graph_id: u32) -> Result<Self, Error> {
        if let Some(n) = setup.options.intra_threads
            && i32::try_from(n).is_err()
        {
            return Err(Error::Options(format!(
                "intra_threads {n} is out of range; allowed: 0 (ONNX Runtime's default, one \
                 per core) to {}",
                i32::MAX
            )));
        }
        let model = ExposedModel::new(Model::parse(bytes)?, graph_id);
        let session = open_session(&model, &setup)?;
        let declared_only = model
            .model()
            .graph
            .outputs
            .iter()
            .fold(OutputSelector::no_default(), |s, o| s.with(o.name.as_str()));
        let declared_only = Mutex::new(RunOptions::new()?.with_outputs(declared_only));
        // The dump reads the weights too: from the external files when there are some.
        let dir = setup.dir.as_deref();
        let model = match dir.and_then(|d| model.model().with_external_weights(d)) {
            Some(m) => ExposedModel::new(m, graph_id),
            None => model,
        };
        Ok(OrtRunner {
            model,
            session,
            fed: Vec::new(),
            last: HashMap::new(),
            diagnostics: Vec::new(),
            keep_all: false,
            setup,
            declared_only,
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
        match open_session(&self.model, &self.setup) {
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
    /// declared outputs as ONNX Runtime returned them ([`OrtOutputs`]: by name, nothing copied;
    /// [`into_map`](OrtOutputs::into_map) for an owned map). A step that dumps nothing costs
    /// the session's run and a few checks: no values are collected, and when node outputs are
    /// exposed (a step the `iteration` filter rejects) ONNX Runtime is asked for the declared
    /// outputs only.
    pub fn run(
        &mut self,
        dumper: &mut Dumper,
        inputs: &[(String, DynValue)],
    ) -> Result<OrtOutputs<'_>, Error> {
        if !dumper.is_enabled() && self.model.exposed().is_empty() {
            return self.run_undumped(dumper, inputs);
        }
        self.model
            .check_inputs(|n| inputs.iter().any(|(k, _)| k == n))?;
        self.narrow_to(dumper);
        let OrtRunner {
            model,
            session,
            setup,
            diagnostics,
            declared_only,
            ..
        } = self;
        // Names borrowed, not cloned: no allocation per input and step.
        let fed: Vec<(&str, ort::session::SessionInputValue<'_>)> =
            inputs.iter().map(|(k, v)| (k.as_str(), v.into())).collect();
        // Known before the run only once this Dumper holds the model's description (from
        // its first step on); `false` runs with every exposed output, as a dumping step.
        let ran = if !model.exposed().is_empty() && model.next_step_dumps_nothing(dumper) {
            let options = declared_only
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner);
            session.run_with_options(fed, &*options)
        } else {
            session.run(fed)
        };
        let outputs = match ran.map_err(Error::from) {
            Ok(o) => o,
            Err(e) => {
                let message = e.to_string();
                exception_dump((model, setup, diagnostics), dumper, inputs, &message);
                return Err(e);
            }
        };
        let dumped = match model.begin_dumping_step(dumper) {
            // Nothing of the model is dumped this step (a disabled Dumper, a step the
            // iteration filter rejects, a `kernels` filter that rejects every node): the
            // step is over, no values are collected.
            Ok(None) => Ok(()),
            Ok(Some(step)) => {
                let mut values: HashMap<&str, ValueRef<'_>> = HashMap::new();
                for (k, v) in inputs {
                    values.insert(k, v.view());
                }
                for (k, v) in outputs.iter() {
                    values.insert(k, v);
                }
                model.dump_begun(dumper, step, &values, view)
            }
            Err(e) => Err(e),
        };
        dumped?;
        let model: &ExposedModel = model;
        Ok(OrtOutputs::new(outputs, &model.model().graph.outputs))
    }

    /// [`run`](OrtRunner::run) with a disabled Dumper once the session exposes nothing (from
    /// the Dumper's second step on): the session's run, the step counted, nothing else. No
    /// graph is announced or compared and no exposure is worked out: a disabled Dumper can
    /// never dump (it cannot be enabled later), so what the model shows it does not matter.
    /// The inputs are checked only when the run fails (ONNX Runtime refuses a run without
    /// every graph input that is not an initializer, the same inputs the check asks for), so
    /// the error names what is missing as on the dumping path.
    fn run_undumped(
        &mut self,
        dumper: &mut Dumper,
        inputs: &[(String, DynValue)],
    ) -> Result<OrtOutputs<'_>, Error> {
        let fed: Vec<(&str, ort::session::SessionInputValue<'_>)> =
            inputs.iter().map(|(k, v)| (k.as_str(), v.into())).collect();
        let outputs = match self.session.run(fed) {
            Ok(o) => o,
            Err(e) => {
                self.model
                    .check_inputs(|n| inputs.iter().any(|(k, _)| k == n))?;
                return Err(e.into());
            }
        };
        // Counts the step (a disabled Dumper's report); it begins nothing.
        dumper.begin_dumping_step()?;
        Ok(OrtOutputs::new(outputs, &self.model.model().graph.outputs))
    }
}

/// Exception dump (`op_debug_mode` 4) after a failed run: the node ONNX Runtime's `message`
/// names is found, the values it needed are computed again by a session of the model cut off
/// before it (its computed inputs as the only outputs), and its inputs go to
/// `Step::kernel_failed`. What cannot be done is a diagnostic; the run's error stands.
fn exception_dump(
    (model, setup, diagnostics): (&mut ExposedModel, &Setup, &mut Vec<String>),
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
    match failed_inputs(model, setup, node, inputs) {
        Ok(values) => {
            if let Err(e) = model.dump_failed(dumper, node, &values) {
                diagnostics.push(format!("exception dump: {e}"));
            }
        }
        Err(e) => diagnostics.push(format!("exception dump: {e}")),
    }
}

/// The values node `node` of `model` was given: the graph inputs fed, and its computed inputs
/// from a session of the model whose only outputs they are (opened as `setup` says).
fn failed_inputs(
    model: &ExposedModel,
    setup: &Setup,
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
    let mut session = session_builder(&env, setup, true)?
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

/// A session of `model` as exposed now (opened as `setup` says). ONNX Runtime refuses some
/// external data it could read (an absolute location): then the weights are inlined (up to
/// 2 GiB) and the model is given again.
fn open_session(model: &ExposedModel, setup: &Setup) -> Result<Session, Error> {
    let env = environment()?;
    let exposed = model.exposed_bytes()?;
    match session_builder(&env, setup, true)?.commit_from_memory(&exposed) {
        Ok(s) => Ok(s),
        Err(e) => match setup
            .dir
            .as_deref()
            .map(|d| inline_data(model.model().bytes(), d, MAX_INLINE_MODEL))
        {
            Some(Ok(inlined)) => session_builder(&env, setup, false)?
                .commit_from_memory(&model.rewrite(&inlined)?)
                .map_err(Error::Load),
            _ => Err(Error::Load(e)),
        },
    }
}

/// A session builder with graph optimisation off (each dumped kernel is one node of the
/// original graph) and, with `dir`, ONNX Runtime's own external-data resolution rooted at the
/// model's folder (a session created from memory otherwise roots it at the current folder;
/// `external` false: the weights are inline), then the user's [`SessionOptions`].
fn session_builder(
    env: &ort::environment::Environment,
    setup: &Setup,
    external: bool,
) -> Result<ort::session::builder::SessionBuilder, Error> {
    let mut builder =
        Session::builder(env)?.with_optimization_level(GraphOptimizationLevel::Disable)?;
    if let Some(dir) = setup.dir.as_deref().filter(|_| external) {
        builder = builder.with_config_entry(
            "session.model_external_initializers_file_folder_path",
            dir.to_string_lossy(),
        )?;
    }
    let o = &setup.options;
    if let Some(n) = o.intra_threads {
        builder = builder.with_intra_threads(n)?;
    }
    for (k, v) in &o.config {
        builder = builder.with_config_entry(k, v)?;
    }
    Ok(builder)
}
