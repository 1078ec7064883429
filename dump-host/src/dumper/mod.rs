//! The [`Dumper`]: what a runtime calls on every kernel (the crate docs show a whole
//! integration).
//!
//! ```
//! use dump_host::{Dumper, TensorRef};
//!
//! # fn main() -> Result<(), dump_host::Error> {
//! let no_env = std::collections::HashMap::<String, String>::new();
//! let mut dumper = Dumper::builder().env(&no_env).open_env()?; // no MINDSPORE_DUMP_CONFIG: disabled
//! let step = dumper.begin_step();
//! if let Some(k) = step.kernel("Conv2D", "Default/network/conv1-Conv2d/Conv2D-op0") {
//!     k.output(0, TensorRef::from_slice(&[2, 2], &[1.0f32, 2.0, 3.0, 4.0]))?;
//! }
//! step.finish()?;
//! dumper.close()?;
//! # Ok(())
//! # }
//! ```
//!
//! Cost model: [`Step::kernel`] answers "not wanted" from an iteration flag computed once per
//! step and the kernel filter (a few string comparisons, no allocation, no tensor touched).
//! Statistics are computed on the calling thread (large tensors split over the stats engine's
//! threads); `.npy` files below [`WriterConfig::direct_write_bytes`](crate::writer::WriterConfig)
//! (8 MiB) are copied and written by background threads through a byte-bounded queue, larger
//! ones on the calling thread straight from the caller's memory.
//!
//! # The parts
//!
//! A Dumper's state is a few parts, each a struct in its own file that owns its (private)
//! fields and the methods on them. [`shared::Shared`] (shared.rs: what every [`Step`] and
//! [`TriggerHandle`] holds) composes the plan and most of them; code that needs two parts
//! takes both as arguments instead of reaching through one big object:
//!
//! - the output parts, together an [`out::Out`]: [`tree::OutputTree`] (the plan's output
//!   layout, the directories made and their once-per-step check, the per-tensor timestamps),
//!   [`row_sink::RowSink`] (`statistic.csv` rows batched per step, the tables' header, the
//!   one-line tables `mapping.csv` and the global execution order, the row count),
//!   [`tensor_files::TensorFiles`] (`.npy` files: the bounded writer, its copy buffers, the
//!   disk budget of [`quota`]) and [`metadata::Metadata`] (the files written once:
//!   `.dump_metadata/`, graph files, execution orders, kernel arguments; the constants
//!   dumped);
//! - [`state::DumpState`]: closed, recording (start / stop), overflow mode's count, watching;
//! - [`flight::Recorder`]: the flight recorder (steps held in memory, written on a trigger
//!   through an `&Out`);
//! - [`msprobe::StepDocs`]: msprobe's per-step documents (`dump.json` and its side files);
//! - owned by the [`Dumper`] itself: [`graphs::Graphs`] (the graphs described to it) and
//!   [`session::SessionStep`] (the step [`Dumper::save`] writes into, shared with the
//!   [`Session`] handles: it holds a [`Step`], so it never sits inside the state steps
//!   share).
//!
//! One tensor's way out is [`emit::Emit`]: the plan, the output parts, the statistics engine
//! and the flight recorder, borrowed for the call. The graph description ([`crate::graph`])
//! writes no file; [`metadata::Metadata`] writes its files. Imports run one way: the parts
//! import nothing of `emit`, `flight` or `msprobe`; `flight` and `msprobe` write through
//! [`out::Out`]; `flight`'s record holds msprobe's held document (`msprobe::HeldDoc`, for a
//! recorder in msprobe's layout; `msprobe` imports nothing of `flight`); `emit` imports the
//! flight recorder's record and msprobe's entry.

mod builder;
mod element;
mod emit;
mod flight;
mod ge;
mod graphs;
mod metadata;
mod msprobe;
mod open;
mod out;
mod plan;
mod quota;
mod row_sink;
mod session;
mod shared;
mod state;
mod step;
mod tensor;
mod tensor_files;
#[cfg(test)]
mod tests;
mod tree;
mod trigger;
pub(crate) mod watcher;

use std::sync::Arc;

use dump_core::iteration::{IterationSpec, SegmentKind};

pub use builder::DumperBuilder;
pub use element::Element;
pub use flight::NonFiniteAt;
pub use graphs::GraphToken;
pub use open::DumpOptions;
pub use plan::{DumpPlan, MS_VERSION, Planned};
pub use session::Session;
pub use step::{Kernel, Step};
pub use tensor::{DeviceTensor, TensorRef};
pub use trigger::TriggerHandle;

use shared::Shared;

use crate::{
    Error,
    diag::{EmptyReason, Event, EventSink},
    layout::DumpTree,
};

/// What a dump produced, returned by [`Dumper::close`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DumpReport {
    /// `.npy` files written.
    pub files: u64,
    /// Bytes of `.npy` files written.
    pub bytes: u64,
    /// `statistic.csv` rows written.
    pub rows: u64,
    /// `.npy` files not written because the disk budget
    /// ([`DumpOptions::disk_budget_bytes`]) was reached (their rows were written).
    pub skipped_files: u64,
    /// Bytes those files would have taken.
    pub skipped_bytes: u64,
    /// `kernels` entries that never matched a kernel (reported like MindSpore's
    /// `[DataDump] Unused Kernel in json: <k>`).
    pub unused_kernels: Vec<String>,
}

/// The steps `iteration` selects, as [`IterationSpec::matches`] answers: `None` for `all`,
/// else the inclusive range of each segment that can match (a single step `v` is `(v, v)`);
/// empty for a text that does not parse (no step matches).
fn selected_steps(iteration: &str) -> Option<Vec<(u64, u64)>> {
    let Ok(spec) = IterationSpec::parse(iteration) else {
        return Some(Vec::new());
    };
    if spec == IterationSpec::ALL {
        return None;
    }
    Some(
        spec.segments()
            .filter_map(|s| match s.kind {
                SegmentKind::Single(v) => Some((v, v)),
                SegmentKind::Range(lo, hi) => Some((lo, hi)),
                _ => None,
            })
            .collect(),
    )
}

/// Dumps the kernels of a running model as MindSpore 2.10 does.
///
/// Create it with [`Dumper::builder`] (a config file, config text or a plan, an environment,
/// options, an event sink), or [`from_env`](Dumper::from_env) for the defaults. Call
/// [`begin_graph`](Dumper::begin_graph) once per graph, [`begin_step`](Dumper::begin_step) for
/// each step, and [`close`](Dumper::close) at the end (dropping the Dumper closes it too,
/// ignoring errors).
pub struct Dumper {
    shared: Option<Arc<Shared>>,
    iteration: String,
    /// `iteration` parsed once: `None` for `all`, else the inclusive ranges of steps it
    /// selects (empty: none). Asked at every step instead of parsing the text again.
    selected: Option<Vec<(u64, u64)>>,
    graph: u32,
    next_step: u64,
    closed: bool,
    /// Steps begun, and those of them `iteration` selected (for the "nothing dumped" warning).
    steps: (u64, u64),
    /// Graphs described with [`begin_graph_with`](Dumper::begin_graph_with).
    graphs: graphs::Graphs,
    /// A step was begun since the last [`step`](Dumper::step).
    begun_since_step: bool,
    /// The step saves go into (shared with the [`Session`] handles).
    session: Arc<session::SessionStep>,
}

impl std::fmt::Debug for Dumper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dumper")
            .field("enabled", &self.shared.is_some())
            .field("graph", &self.graph)
            .field("next_step", &self.next_step)
            .finish()
    }
}

impl Dumper {
    /// A Dumper that dumps nothing (what [`from_env`](Dumper::from_env) gives when
    /// `MINDSPORE_DUMP_CONFIG` is unset). Every kernel is "not wanted".
    pub fn disabled() -> Self {
        Dumper {
            shared: None,
            iteration: String::new(),
            selected: Some(Vec::new()),
            graph: 0,
            next_step: 0,
            closed: true,
            steps: (0, 0),
            graphs: Default::default(),
            begun_since_step: false,
            session: Default::default(),
        }
    }

    /// Starts dumping with a resolved plan, events delivered to `events`: writes
    /// `.dump_metadata/` and starts the writer.
    pub(crate) fn launch(plan: DumpPlan, events: EventSink) -> Result<Self, Error> {
        IterationSpec::parse(&plan.iteration)
            .map_err(|e| Error::Plan(format!("iteration {:?}: {e}", plan.iteration)))?;
        open::check_watch(plan.op_debug_mode, plan.flight.as_ref(), plan.on_nonfinite)?;
        watcher::check_plan(&plan)?;
        if !plan.device_selected() {
            events.emit(&Event::DeviceNotSelected {
                device_id: plan.device_id,
                support_device: plan.support_device.clone(),
            });
            return Ok(Self::disabled());
        }
        let tree = DumpTree::new(&plan.root, plan.rank, &plan.net);
        tree.check_root().map_err(|message| Error::Path {
            path: plan.root.clone(),
            message,
        })?;
        let shared = Shared::start(plan, events);
        let mut d = Dumper {
            iteration: shared.plan.iteration.clone(),
            selected: selected_steps(&shared.plan.iteration),
            next_step: shared.plan.initial_iteration,
            shared: Some(Arc::new(shared)),
            graph: 0,
            closed: false,
            steps: (0, 0),
            graphs: Default::default(),
            begun_since_step: false,
            session: Default::default(),
        };
        let first = d.next_step;
        d.session_moves_to(first, d.step_active(first));
        d.graph = 0;
        Ok(d)
    }

    /// `true` when this Dumper writes anything at all.
    pub fn is_enabled(&self) -> bool {
        self.shared.is_some()
    }

    /// `false` when no step of this Dumper can dump kernel `full_name`: the
    /// Dumper is disabled, the `kernels` filter rejects the name (`dump_mode` 1 or 2), or
    /// `op_debug_mode` 4 leaves kernels to [`Step::kernel_failed`](crate::Step::kernel_failed).
    /// `true` when some step may ([`Step::kernel`](crate::Step::kernel) decides per step: the
    /// iteration, an msprobe `scope` or `list`, an overflow count). A runtime that must prepare
    /// to show a kernel's values (ONNX Runtime returns a node's output only when the model
    /// lists it as a graph output) asks once per kernel and prepares only those. Asking marks
    /// no `kernels` entry used: only a dumped kernel does (the unused-entries report at close).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("may-dump-doc-{}", std::process::id()));
    /// let config = format!(
    ///     r#"{{"common_dump_settings": {{"dump_mode": 1, "path": "{}", "net_name": "Net",
    ///        "iteration": "all", "saved_data": "statistic", "input_output": 0,
    ///        "kernels": ["conv"], "support_device": [0]}},
    ///        "e2e_dump_settings": {{"enable": true}}}}"#,
    ///     dir.display()
    /// );
    /// let dumper = dump_host::Dumper::builder().open_json(config.into_bytes()).unwrap();
    /// assert!(dumper.may_dump_kernel("Default/conv1/Conv-op0"));
    /// assert!(!dumper.may_dump_kernel("Default/relu/Relu-op1"));
    /// assert!(!dump_host::Dumper::disabled().may_dump_kernel("Default/conv1/Conv-op0"));
    /// // Asking marks nothing used: "conv" is still reported unused if no step dumps a conv.
    /// assert_eq!(dumper.plan().unwrap().kernels.unused_entries(), ["conv"]);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// ```
    pub fn may_dump_kernel(&self, full_name: &str) -> bool {
        match self.plan() {
            None => false,
            Some(p) => match p.op_debug_mode {
                crate::config::OpDebugMode::Exception => false,
                crate::config::OpDebugMode::Overflow => true,
                crate::config::OpDebugMode::Off => {
                    p.kernels.would_match(full_name)
                        && p.ge
                            .as_ref()
                            .and_then(|g| g.layers.as_ref())
                            .is_none_or(|l| l.iter().any(|n| n == full_name))
                }
            },
        }
    }

    /// The plan this Dumper runs on (`None` when disabled).
    pub fn plan(&self) -> Option<&DumpPlan> {
        self.shared.as_deref().map(|s| &s.plan)
    }

    /// Starts (or switches to) graph `graph_id` and writes its execution order
    /// (`ms_execution_order_graph_{id}.csv`, one full scope name per kernel).
    pub fn begin_graph(&mut self, graph_id: u32, execution_order: &[&str]) -> Result<(), Error> {
        self.graph = graph_id;
        // The kernels are named by this order now, not by a description.
        self.graphs.unsettle(graph_id);
        // CANN's GE layout holds dump files only.
        if let Some(s) = self.shared.as_ref().filter(|s| s.plan.ge.is_none()) {
            match &s.recorder {
                Some(r) => {
                    let names = execution_order.iter().map(|n| (*n).to_owned()).collect();
                    r.deferred
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .orders
                        .insert(graph_id, names);
                }
                None => s
                    .out
                    .meta
                    .write_execution_order(&s.out.tree, graph_id, execution_order),
            }
        }
        Ok(())
    }

    /// Switches to graph `graph_id` without writing anything (its execution order was written
    /// by an earlier [`begin_graph`](Dumper::begin_graph), or is unknown: a device agent's
    /// stream that lost its begin-graph frame).
    pub fn switch_graph(&mut self, graph_id: u32) {
        self.graph = graph_id;
    }

    /// Starts (or switches to) graph `graph_id` described by `graph`: writes its execution
    /// order (the node names), `graphs/ms_output_trace_code_graph_{id}.ir` and `.pb`, and keeps
    /// the graph for [`graph`](Dumper::graph) (edges for inspect and compare, useless outputs).
    /// Describing graph `graph_id` again with the same description only switches to it (no
    /// file is rewritten), so a runtime alternating between graphs can call it before each step.
    pub fn begin_graph_with(
        &mut self,
        graph_id: u32,
        graph: &crate::graph::Graph,
    ) -> Result<(), Error> {
        self.graph = graph_id;
        if self.graphs.get(graph_id) == Some(graph) {
            return Ok(());
        }
        let quiet = self.dumps_none_of(graph);
        self.graphs.insert(graph_id, graph, quiet);
        if let Some(s) = self.shared.as_ref().filter(|s| s.plan.ge.is_none()) {
            match &s.recorder {
                Some(r) => {
                    let mut d = r.deferred.lock().unwrap_or_else(|e| e.into_inner());
                    d.orders.remove(&graph_id);
                    d.graphs.insert(graph_id, graph.clone());
                }
                None => s.out.meta.write_graph(&s.out.tree, graph_id, graph),
            }
        }
        Ok(())
    }

    /// Graph `graph_id` as described to [`begin_graph_with`](Dumper::begin_graph_with).
    pub fn graph(&self, graph_id: u32) -> Option<&crate::graph::Graph> {
        self.graphs.get(graph_id)
    }

    /// The token of the description of graph `graph_id` this Dumper holds (`None`: not
    /// described). Every [`begin_graph_with`](Dumper::begin_graph_with) that records a
    /// description gives a new token, unique in the process, so a runtime that kept the token
    /// after describing its graph learns from one comparison that this very Dumper still
    /// holds that description, and can [`switch_graph`](Dumper::switch_graph) instead of
    /// handing the description again (which compares whole graphs).
    ///
    /// ```
    /// # use dump_host::{Dumper, graph::Graph};
    /// let mut dumper = Dumper::disabled();
    /// let graph = Graph::default();
    /// dumper.begin_graph_with(0, &graph).unwrap();
    /// let token = dumper.graph_token(0);
    /// assert!(token.is_some());
    /// dumper.begin_graph_with(0, &graph).unwrap(); // the same description: kept
    /// assert_eq!(dumper.graph_token(0), token);
    /// assert_ne!(Dumper::disabled().graph_token(0), token);
    /// ```
    pub fn graph_token(&self, graph_id: u32) -> Option<GraphToken> {
        self.graphs.token(graph_id)
    }

    /// Whether no step of this Dumper can dump any kernel or parameter of `graph`: disabled,
    /// or every kernel and parameter name is rejected by the `kernels` filter (and the GE
    /// layout's layers), with nothing else looking at kernels (watcher mode, an overflow or
    /// exception dump). Asked once per description; marks no `kernels` entry used.
    fn dumps_none_of(&self, graph: &crate::graph::Graph) -> bool {
        match self.shared.as_deref() {
            None => true,
            Some(s) => {
                s.plan.op_debug_mode == crate::config::OpDebugMode::Off
                    && s.watcher.is_none()
                    && !graph.nodes.iter().any(|n| self.may_dump_kernel(&n.name))
                    && !graph
                        .parameters
                        .iter()
                        .any(|p| s.plan.kernels.would_match(&p.name))
            }
        }
    }

    /// Whether outputs marked useless are dumped (`MINDSPORE_DUMP_IGNORE_USELESS_OUTPUT=0`),
    /// with the warning for a value other than 0 or 1 (read at the first described graph).
    pub fn useless_outputs(&self) -> (crate::graph::UselessOutputs, Option<&str>) {
        self.graphs.policy()
    }

    /// Sets the step counter (MindSpore's `_set_init_iter`): the next step is `step`.
    pub fn set_step(&mut self, step: u64) {
        self.next_step = step;
    }

    /// The step number the next [`begin_step`](Dumper::begin_step) will use.
    pub fn next_step(&self) -> u64 {
        self.next_step
    }

    /// Starts the next step of the current graph. Whether it dumps anything is decided here,
    /// once, from `iteration`.
    ///
    /// The [`Step`] holds a reference-counted handle on the Dumper's shared state, not a borrow
    /// of the Dumper: a runtime can keep it in its own structs or a thread-local, and send it to
    /// other threads. A step still held after [`close`](Dumper::close) dumps nothing more.
    pub fn begin_step(&mut self) -> Step {
        let (n, active) = self.advance();
        let quiet = !active || self.graphs.quiet(self.graph);
        Step::new(self.shared.clone(), self.graph, n, active).with_quiet(quiet)
    }

    /// Begins the next step as [`begin_step`](Dumper::begin_step) does, unless it
    /// [dumps nothing](Step::dumps_nothing): such a step is ended at once and `None` is
    /// returned with what [`Step::finish`] returns for it (the write failures of earlier
    /// steps); no [`Step`] is built at all when it is not active (a disabled Dumper, a step
    /// `iteration` rejects). The step counter, the steps counted for the "nothing dumped"
    /// report and the step [`save`](Dumper::save) writes into move on alike. For an adapter
    /// that reports only the current graph's kernels and parameters: `None` means the step
    /// is over and nothing is to be reported.
    ///
    /// ```
    /// # use dump_host::Dumper;
    /// let mut dumper = Dumper::disabled();
    /// assert!(dumper.begin_dumping_step().unwrap().is_none());
    /// assert_eq!(dumper.next_step(), 1);
    /// ```
    pub fn begin_dumping_step(&mut self) -> Result<Option<Step>, Error> {
        let (n, active) = self.advance();
        let Some(s) = self.shared.as_deref().filter(|_| active) else {
            return Ok(None); // what an inactive step's finish or drop does: nothing
        };
        let quiet = self.graphs.quiet(self.graph);
        if quiet && s.recorder.is_none() && s.plan.msprobe.is_none() {
            // What `Step::finish` does for a step that dumped nothing, with no flight
            // recorder to hand it to and no msprobe document to close: the rows of earlier
            // steps still pending, and the write failures so far.
            return Step::end_quiet(s).map(|()| None);
        }
        let step = Step::new(self.shared.clone(), self.graph, n, active).with_quiet(quiet);
        if quiet {
            step.finish().map(|()| None)
        } else {
            Ok(Some(step))
        }
    }

    /// Moves on to the next step: its number and whether it is active, counted, and the
    /// session's saves moved to it.
    fn advance(&mut self) -> (u64, bool) {
        let n = self.next_step;
        self.next_step += 1;
        let active = self.step_active(n);
        self.steps.0 += 1;
        self.steps.1 += u64::from(active);
        self.begun_since_step = true;
        self.session_moves_to(n, active);
        (n, active)
    }

    /// Whether the step the next [`begin_step`](Dumper::begin_step) begins would
    /// [dump nothing](Step::dumps_nothing) if graph `graph_id` were the current graph, asked
    /// before it begins: the step is not active (a disabled Dumper, `iteration` rejects it), or
    /// graph `graph_id` is described and no step can dump any kernel or parameter of it. Nothing
    /// changes (no step is counted). A runtime that pays for what it prepares for the dump
    /// (ONNX Runtime's node outputs exposed as graph outputs) prepares nothing for a step
    /// this answers `true` for; `false` means the step may dump.
    ///
    /// ```
    /// # use dump_host::{Dumper, graph::{Graph, Node}};
    /// # let dir = std::env::temp_dir().join(format!("next-quiet-doc-{}", std::process::id()));
    /// let config = format!(
    ///     r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
    ///        "iteration": "1", "saved_data": "statistic", "input_output": 0,
    ///        "kernels": [], "support_device": [0]}},
    ///        "e2e_dump_settings": {{"enable": true}}}}"#,
    ///     dir.display()
    /// );
    /// let mut dumper = Dumper::builder().open_json(config.into_bytes()).unwrap();
    /// let mut graph = Graph::default();
    /// graph.nodes.push(Node {
    ///     name: "Default/relu/Relu-op0".into(), op_type: "Relu".into(), inputs: vec![],
    ///     outputs: vec![], scope: String::new(), source: None,
    /// });
    /// dumper.begin_graph_with(0, &graph).unwrap();
    /// assert!(dumper.next_step_dumps_nothing(0)); // step 0: iteration "1" rejects it
    /// assert!(dumper.begin_step().dumps_nothing());
    /// assert!(!dumper.next_step_dumps_nothing(0)); // step 1 may dump
    /// assert!(!dumper.begin_step().dumps_nothing());
    /// assert!(Dumper::disabled().next_step_dumps_nothing(0));
    /// # drop(dumper);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// ```
    pub fn next_step_dumps_nothing(&self, graph_id: u32) -> bool {
        !self.step_active(self.next_step) || self.graphs.quiet(graph_id)
    }

    /// Whether step `n` dumps anything: enabled, and `iteration` selects it (or exception
    /// mode, which dumps failed kernels whatever the step).
    fn step_active(&self, n: u64) -> bool {
        match &self.shared {
            None => false,
            Some(s) => {
                s.plan.op_debug_mode == crate::config::OpDebugMode::Exception
                    || n <= u32::MAX as u64
                        && self
                            .selected
                            .as_deref()
                            .is_none_or(|ranges| ranges.iter().any(|&(lo, hi)| lo <= n && n <= hi))
            }
        }
    }

    /// Why a dump that wrote nothing wrote nothing, when that is likely a mistake (users of
    /// other tools lose hours to silently empty dumps): no step ran, `iteration` matched no
    /// step, every write failed, or no kernel matched `kernels`. `None` when something was
    /// written, when dumping is disabled, or in overflow / exception mode (where nothing
    /// written is good news).
    fn nothing_dumped(&self, report: &DumpReport) -> Option<EmptyReason> {
        let s = self.shared.as_deref()?;
        if report.files + report.rows + report.skipped_files > 0
            || s.plan.op_debug_mode != crate::config::OpDebugMode::Off
            || s.recorder.is_some()
        {
            return None;
        }
        let (begun, active) = self.steps;
        let errors = s.out.files.writer().errors();
        let failures = errors.total();
        Some(if begun == 0 {
            EmptyReason::NoStep
        } else if active == 0 {
            EmptyReason::IterationMatchedNone {
                iteration: self.iteration.clone(),
                steps: begun,
                first: self.next_step - begun,
                last: self.next_step - 1,
            }
        } else if failures > 0 {
            EmptyReason::WritesFailed {
                selected_steps: active,
                failures,
                first: errors.first().unwrap_or_default(),
            }
        } else if s.plan.kernels.selects_all() {
            EmptyReason::NoTensor {
                selected_steps: active,
            }
        } else {
            EmptyReason::KernelsMatchedNone {
                selected_steps: active,
                kernels: s.plan.kernels.entries().to_vec(),
            }
        })
    }

    /// Dumps a constant of graph `graph_id` into `{net}/{graph}/constants/` (as
    /// `Parameter.{name}...output.0`), once per graph and name: later calls for the same
    /// constant are ignored, like MindSpore's once-per-graph constant dump. Nothing in
    /// msprobe's layout.
    pub fn constant(&self, graph_id: u32, name: &str, t: TensorRef<'_>) -> Result<(), Error> {
        let Some(s) = &self.shared else { return Ok(()) };
        // msprobe's layout has no constants directory.
        if !s.plan.saved_data.tensors() || s.plan.msprobe.is_some() || s.plan.ge.is_some() {
            return Ok(());
        }
        if !s.out.meta.first_constant(graph_id, name) {
            return Ok(()); // once per graph, like MindSpore
        }
        let who = emit::Owner {
            op_type: "Parameter",
            full_name: name,
            io: crate::layout::Io::Output,
            slot: 0,
            entry: None,
        };
        let dir = s.out.tree.layout().constants_dir(graph_id);
        let held = s.recorder.as_ref().map(|r| r.constants(graph_id, &dir));
        s.emit()
            .emit(&emit::To::new(&dir, held.as_deref()), who, &t)
    }

    /// Fires the flight recorder: when the step in progress ends (or at
    /// [`close`](Dumper::close)), the steps it holds and that step are written with
    /// `trigger.json` (`"kind": "user"`, `"reason"`). Returns `false` when there is no flight
    /// recorder. From another thread, use a [`trigger_handle`](Dumper::trigger_handle).
    ///
    /// ```
    /// # use dump_host::{Dumper, config::FlightRecorder};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = std::env::temp_dir().join(format!("opdump-doc-trigger-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # let config = format!(r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}",
    /// #   "net_name": "Net", "iteration": "all", "saved_data": "full", "input_output": 0,
    /// #   "kernels": [], "support_device": [0]}}}}"#, dir.display());
    /// let mut dumper = Dumper::builder()
    ///     .flight_recorder(FlightRecorder { steps: 2, ..FlightRecorder::default() })
    ///     .open_json(config.into_bytes())?;
    /// let handle = dumper.trigger_handle(); // Send + Sync: give it to another thread
    /// for i in 0..5u32 {
    ///     let step = dumper.begin_step();
    ///     if let Some(k) = step.kernel("Add", "Default/Add-op0") {
    ///         k.output(0, dump_host::TensorRef::from_slice(&[1], &[i as f32]))?;
    ///     }
    ///     if i == 3 {
    ///         handle.trigger("loss spike: 9.1 > 3 x mean");
    ///     }
    ///     step.finish()?; // step 3 ends: steps 1, 2 and 3 are written, trigger.json last
    /// }
    /// dumper.close()?;
    /// let trigger = std::fs::read_to_string(dir.join("rank_0/trigger.json"))?;
    /// assert!(trigger.contains("loss spike"));
    /// assert!(!dir.join("rank_0/Net/0/4").exists() && dir.join("rank_0/Net/0/1").exists());
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn trigger(&self, reason: &str) -> bool {
        self.shared
            .as_deref()
            .is_some_and(|s| s.arm_trigger(reason))
    }

    /// A handle that fires this Dumper's flight recorder from any thread (see
    /// [`trigger`](Dumper::trigger)).
    pub fn trigger_handle(&self) -> TriggerHandle {
        TriggerHandle(self.shared.as_ref().map(Arc::downgrade).unwrap_or_default())
    }

    /// Watcher mode: how many watched outputs were read again after a kernel, and how many
    /// memory corruptions were found, so far (`(0, 0)` without watcher mode). docs/watcher.md
    /// relates the first to the cost.
    pub fn watcher_counts(&self) -> (u64, u64) {
        self.shared
            .as_deref()
            .and_then(|s| s.watcher.as_ref())
            .map_or((0, 0), |w| w.counts())
    }

    /// Bytes of tensor copies the flight recorder holds now (0 without one).
    pub fn flight_recorder_bytes(&self) -> u64 {
        self.shared
            .as_deref()
            .and_then(|s| s.recorder.as_ref())
            .map_or(0, |r| r.held_bytes())
    }

    /// The background writer (its byte budget and error log); `None` when disabled.
    pub fn writer(&self) -> Option<&crate::writer::Writer> {
        self.shared.as_deref().map(|s| s.out.files.writer())
    }

    /// Files, bytes and rows written so far.
    pub fn progress(&self) -> DumpReport {
        match &self.shared {
            None => DumpReport::default(),
            Some(s) => {
                let files = &s.out.files;
                DumpReport {
                    files: files.writer().written().files(),
                    bytes: files.writer().written().bytes(),
                    rows: s.out.tables.written(),
                    skipped_files: files.quota().refused_files(),
                    skipped_bytes: files.quota().refused_bytes(),
                    unused_kernels: Vec::new(),
                }
            }
        }
    }

    /// Waits until every queued file is written (and a flight-recorder trigger's write in
    /// progress has finished); returns the write failures since the last flush.
    pub fn flush(&self) -> Result<(), Error> {
        match &self.shared {
            None => Ok(()),
            Some(s) => {
                if let Some(r) = &s.recorder {
                    r.wait_write();
                }
                s.out.flush_rows(true);
                s.out.files.flush()
            }
        }
    }

    /// Flushes everything, stops the writer threads, reports kernels in `kernels` that never
    /// matched, and returns what was written (or the write failures).
    pub fn close(&mut self) -> Result<DumpReport, Error> {
        if self.closed {
            return Ok(self.progress());
        }
        self.closed = true;
        let Some(s) = self.shared.as_ref() else {
            return Ok(DumpReport::default());
        };
        if let Some(r) = &s.recorder {
            // The trigger write in progress finishes; an armed user trigger writes what the
            // recorder holds.
            r.close(s);
        }
        self.session.end(&s.docs, (&s.plan, &s.out));
        let flushed = s.close();
        let mut report = self.progress();
        report.unused_kernels = s
            .plan
            .kernels
            .unused_entries()
            .into_iter()
            .map(str::to_owned)
            .collect();
        for k in &report.unused_kernels {
            s.events.emit(&Event::UnusedKernel { entry: k.clone() });
        }
        if let Some(why) = self.nothing_dumped(&report) {
            s.events.emit(&Event::NothingDumped(why));
        }
        if report.skipped_files > 0 {
            s.events.emit(&Event::DiskBudgetSummary {
                skipped_files: report.skipped_files,
                skipped_bytes: report.skipped_bytes,
                written_bytes: report.bytes,
            });
        }
        flushed?;
        Ok(report)
    }
}

impl Drop for Dumper {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
