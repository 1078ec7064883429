//! [`Step`] and [`Kernel`]: the per-step and per-kernel handles a runtime uses.
//!
//! Both are `Sync`: several threads may report kernels of one step at once. A [`Step`] owns a
//! reference-counted handle on the Dumper's shared state (no lifetime), so a runtime can store
//! it; a [`Kernel`] borrows its step.

use std::{
    path::PathBuf,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
};

use dump_core::{DType, Summary, stats::summarize};

use super::{
    emit::{Owner, To},
    flight::{NonFiniteAt, Order, StepRecord},
    ge::GeKernel,
    msprobe::{Call, Entry, HeldDoc, StepDoc},
    shared::Shared,
    tensor::TensorRef,
    watcher::{WatchSet, WatchedTensor},
};
use crate::{
    Error,
    config::{InputOutput, NonFinitePolicy, OpDebugMode, Watch},
    layout::Io,
};

/// One step of one graph. Created by [`crate::Dumper::begin_step`]; `Send + Sync + 'static`,
/// so it can live in a runtime's struct or a thread-local until [`finish`](Step::finish).
pub struct Step {
    shared: Option<Arc<Shared>>,
    graph: u32,
    iteration: u64,
    active: bool,
    /// Nothing of the step's graph can be dumped (see [`Step::dumps_nothing`]).
    quiet: bool,
    /// The step's directory, made on first use ([`Step::dir`]): a step that dumps nothing
    /// never builds its paths.
    dir: OnceLock<PathBuf>,
    /// The statistics table of `dir` (resolved once, not per row).
    csv: OnceLock<PathBuf>,
    /// The directory-check epoch + 1 in which `dir` was last ensured (0: not yet).
    ensured: AtomicU64,
    used: std::sync::atomic::AtomicBool,
    /// The flight recorder's record of this step (`None`: written as it goes).
    held: Option<Arc<StepRecord>>,
    /// msprobe's layout: call names, dump.json, construct.json (`None` otherwise).
    /// Shared by every [`Step`] of the same step number (an adapter's and the session's).
    doc: Option<Arc<Mutex<StepDoc>>>,
    /// CANN's GE layout: the next kernel's task id (a per-step sequence number, as GE's task
    /// ids repeat each execution of a model).
    ge_tasks: std::sync::atomic::AtomicU32,
    /// Watcher mode: the watched outputs' handles and digests, released at the step's end.
    watched: Option<Mutex<WatchSet>>,
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Step")
            .field("graph", &self.graph)
            .field("iteration", &self.iteration)
            .field("active", &self.active)
            .finish()
    }
}

/// A tensor kept back in overflow mode until the kernel's outputs are known.
struct Pending {
    io: Io,
    slot: u32,
    dtype: DType,
    shape: Vec<usize>,
    format: String,
    bytes: Vec<u8>,
}

/// One wanted kernel of a step. Created by [`Step::kernel`]; report its tensors with
/// [`input`](Kernel::input) and [`output`](Kernel::output).
///
/// In overflow mode (`op_debug_mode` 3) the tensors are held until the `Kernel` is dropped (or
/// [`finish`](Kernel::finish)ed) and written only if a floating-point output holds NaN or Inf.
pub struct Kernel<'s> {
    step: &'s Step,
    shared: &'s Shared,
    op_type: &'s str,
    full_name: &'s str,
    pending: Option<Mutex<Vec<Pending>>>,
    args_written: std::sync::atomic::AtomicBool,
    /// msprobe's layout: the call and the entry gathering its tensors.
    call: Option<(Call, Mutex<Entry>)>,
    /// CANN's GE layout (CANN files or statistics csv): the kernel's tensors, gathered until
    /// it ends, and its task id.
    ge: Option<(Mutex<GeKernel>, u32)>,
}

impl std::fmt::Debug for Kernel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("op_type", &self.op_type)
            .field("full_name", &self.full_name)
            .finish()
    }
}

impl Step {
    pub(crate) fn new(
        shared: Option<Arc<Shared>>,
        graph: u32,
        iteration: u64,
        active: bool,
    ) -> Self {
        let dir = OnceLock::new();
        let doc = shared
            .as_deref()
            .filter(|s| active && s.plan.msprobe.is_some())
            .map(|s| s.docs.get(iteration));
        // With msprobe's layout the record holds the step's document too: a trigger writes it.
        let held = shared
            .as_deref()
            .filter(|s| active && s.recorder.is_some())
            .map(|s| {
                let d = doc
                    .as_ref()
                    .and_then(|d| HeldDoc::new(&s.plan, iteration, Arc::clone(d)));
                let at = dir.get_or_init(|| s.out.tree.layout().iteration_dir(graph, iteration));
                Arc::new(StepRecord::new(graph, iteration, at, true).with_doc(d))
            });
        let watched = shared
            .as_deref()
            .filter(|s| active && s.watcher.is_some())
            .map(|_| Mutex::new(WatchSet::default()));
        Step {
            shared,
            graph,
            iteration,
            active,
            quiet: !active,
            dir,
            csv: OnceLock::new(),
            ensured: AtomicU64::new(0),
            used: std::sync::atomic::AtomicBool::new(false),
            held,
            doc,
            ge_tasks: std::sync::atomic::AtomicU32::new(0),
            watched,
        }
    }

    /// Marks the step as one that dumps nothing of its graph (`true`), as the Dumper found
    /// when the graph was described. An inactive step is quiet whatever this says.
    pub(crate) fn with_quiet(mut self, quiet: bool) -> Self {
        self.quiet = quiet || !self.active;
        self
    }

    /// Where this step's tensors go (held by the flight recorder, or the step's directory).
    fn to(&self) -> To<'_> {
        To::step(self.dir(), self.held.as_deref(), self.csv(), &self.ensured)
    }

    /// After a tensor of `who` was dumped: when its statistics showed a watched output going
    /// non-finite, tells the flight recorder (which fires under `record` and `stop`) and,
    /// under `stop`, returns the error that stops the runtime.
    fn after(&self, s: &Shared, to: &To<'_>, who: Owner<'_>) -> Result<(), Error> {
        self.after_at(s, to, who, (self.held.as_deref(), None))
    }

    /// [`after`](Step::after) for a tensor of the recorded step `held` at `order` in its
    /// report order (`None`: the one being reported now).
    fn after_at(
        &self,
        s: &Shared,
        to: &To<'_>,
        who: Owner<'_>,
        (held, order): (Option<&StepRecord>, Option<Order>),
    ) -> Result<(), Error> {
        if let (Some(l2), Some(r), Some(rec)) = (to.l2.get(), &s.recorder, held) {
            r.check_growth(rec, (who.op_type, who.full_name, who.slot), l2);
        }
        let Some(c) = to.seen.get() else {
            return Ok(());
        };
        let at = NonFiniteAt {
            step: self.iteration,
            graph: self.graph,
            op_type: who.op_type.to_owned(),
            kernel: who.full_name.to_owned(),
            io: who.io.as_str(),
            slot: who.slot,
            dtype: c.dtype,
            nan: c.nan,
            pos_inf: c.pos_inf,
            neg_inf: c.neg_inf,
        };
        let policy = s.plan.on_nonfinite;
        if let (Some(r), Some(rec)) = (&s.recorder, held) {
            let kind = match s.plan.watch {
                Watch::NonFinite => "nonfinite",
                Watch::Overflow => "overflow",
            };
            let order = order.unwrap_or_else(|| 2 * rec.lock().entries.len());
            r.saw_nonfinite(
                rec,
                (&at, order),
                (policy != NonFinitePolicy::Continue).then_some(kind),
            );
        }
        match policy {
            NonFinitePolicy::Stop => Err(Error::NonFinite(at)),
            NonFinitePolicy::Continue | NonFinitePolicy::Record => Ok(()),
        }
    }

    /// The step number (the iteration directory's name).
    pub fn iteration(&self) -> u64 {
        self.iteration
    }

    /// Whether this step dumps anything (`iteration` matched and dumping is enabled).
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// `true` when this step dumps nothing of its graph, decided once when the step began:
    /// it is not [active](Step::is_active), or its graph was described to the Dumper
    /// ([`begin_graph_with`](crate::Dumper::begin_graph_with)) and no kernel or parameter of
    /// that description can be dumped by any step (the `kernels` filter rejects every name;
    /// no watcher mode, overflow or exception dump). A runtime that reports only that graph's
    /// kernels and parameters can then run the step unhooked, skipping its per-kernel calls;
    /// it still [finishes](Step::finish) an active step (the write failures of earlier steps,
    /// a flight recorder's step). `false` means a kernel may be dumped: ask
    /// [`kernel`](Step::kernel) as usual.
    ///
    /// ```
    /// # use dump_host::{Dumper, graph::{Graph, Node}};
    /// # let node = |op: &str, name: &str| Node {
    /// #     name: name.into(), op_type: op.into(), inputs: vec![], outputs: vec![],
    /// #     scope: String::new(), source: None,
    /// # };
    /// # let dir = std::env::temp_dir().join(format!("dumps-nothing-doc-{}", std::process::id()));
    /// let config = format!(
    ///     r#"{{"common_dump_settings": {{"dump_mode": 1, "path": "{}", "net_name": "Net",
    ///        "iteration": "0|2", "saved_data": "statistic", "input_output": 0,
    ///        "kernels": ["Default/conv1/Conv-op0"], "support_device": [0]}},
    ///        "e2e_dump_settings": {{"enable": true}}}}"#,
    ///     dir.display()
    /// );
    /// let mut dumper = Dumper::builder().open_json(config.into_bytes()).unwrap();
    /// let mut graph = Graph::default();
    /// graph.nodes.push(node("Relu", "Default/relu/Relu-op0"));
    /// dumper.begin_graph_with(0, &graph).unwrap();
    /// assert!(dumper.begin_step().dumps_nothing()); // the filter rejects every kernel
    /// graph.nodes.push(node("Conv", "Default/conv1/Conv-op0"));
    /// dumper.begin_graph_with(0, &graph).unwrap();
    /// assert!(dumper.begin_step().dumps_nothing()); // step 1: iteration rejects it
    /// assert!(!dumper.begin_step().dumps_nothing()); // step 2 may dump the conv
    /// # drop(dumper);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// ```
    pub fn dumps_nothing(&self) -> bool {
        self.quiet
    }

    /// The iteration directory of this step.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.get_or_init(|| {
            self.shared.as_deref().map_or_else(PathBuf::new, |s| {
                s.out
                    .tree
                    .layout()
                    .iteration_dir(self.graph, self.iteration)
            })
        })
    }

    /// The statistics table of [`dir`](Self::dir).
    fn csv(&self) -> &std::path::Path {
        self.csv.get_or_init(|| {
            self.shared.as_deref().map_or_else(PathBuf::new, |s| {
                s.out.tree.layout().statistic_csv(self.dir())
            })
        })
    }

    /// The shared state when this step dumps: active, and the Dumper not closed.
    fn live(&self) -> Option<&Shared> {
        let s = self.shared.as_deref().filter(|_| self.active)?;
        (!s.state.is_closed()).then_some(s)
    }

    /// [`live`](Step::live), and recording (between [`crate::Dumper::start`] and
    /// [`stop`](crate::Dumper::stop)).
    fn recording(&self) -> Option<&Shared> {
        self.live().filter(|s| s.state.is_recording())
    }

    /// `Some` when kernel `full_name` (primitive `op_type`) is to be dumped this step. Cheap when
    /// the answer is no: no tensor is touched and nothing is allocated.
    ///
    /// Between [`Dumper::stop`](crate::Dumper::stop) and [`start`](crate::Dumper::start)
    /// every kernel is "not wanted" (one atomic load).
    pub fn kernel<'s>(&'s self, op_type: &'s str, full_name: &'s str) -> Option<Kernel<'s>> {
        let s = self.recording()?;
        match s.plan.op_debug_mode {
            OpDebugMode::Exception => return None,
            OpDebugMode::Overflow => {
                let n = s.plan.overflow_number as u64;
                if n != 0 && s.state.overflowed() >= n {
                    return None;
                }
            }
            OpDebugMode::Off => {
                if !s.plan.kernels.matches(full_name) {
                    return None;
                }
            }
        }
        if let Some(g) = &s.plan.ge
            && let Some(layers) = &g.layers
            && !layers.iter().any(|l| l == full_name)
        {
            return None;
        }
        let ge = s.plan.ge.as_ref().filter(|g| !g.npy).map(|_| {
            (
                Mutex::default(),
                self.ge_tasks.fetch_add(1, Ordering::Relaxed),
            )
        });
        let call = match (&self.doc, &s.plan.msprobe) {
            (Some(doc), Some(cfg)) => {
                let (call, wanted) = doc
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .namer
                    .name(cfg, op_type, full_name);
                if !wanted {
                    return None;
                }
                Some((call, Mutex::new(Entry::default())))
            }
            _ => None,
        };
        self.used.store(true, Ordering::Relaxed);
        Some(Kernel {
            step: self,
            shared: s,
            op_type,
            full_name,
            pending: (s.plan.op_debug_mode == OpDebugMode::Overflow)
                .then(|| Mutex::new(Vec::new())),
            args_written: std::sync::atomic::AtomicBool::new(false),
            call,
            ge,
        })
    }

    /// Dumps a parameter (or graph input) as `Parameter.{name}...output.0` — call it at the end
    /// of the step with the post-step value, as MindSpore does. Skipped when `input_output` is
    /// inputs-only, with `dump_mode` 1 when `kernels` does not select `name`, and in msprobe's
    /// layout (which has no place for a tensor outside a call).
    pub fn parameter(&self, name: &str, t: TensorRef<'_>) -> Result<(), Error> {
        let Some(s) = self.recording() else {
            return Ok(());
        };
        // msprobe's layout has no place for a tensor outside a call (its parameters belong
        // to module calls).
        if s.plan.op_debug_mode != OpDebugMode::Off
            || s.plan.input_output == InputOutput::Inputs
            || !s.plan.kernels.matches(name)
            || s.plan.msprobe.is_some()
            || s.plan.ge.is_some()
        {
            return Ok(());
        }
        self.used.store(true, Ordering::Relaxed);
        let who = Owner {
            op_type: "Parameter",
            full_name: name,
            io: Io::Output,
            slot: 0,
            entry: None,
        };
        let to = self.to();
        s.emit().emit(&to, who, &t)?;
        self.after(s, &to, who)
    }

    /// Exception dump (`op_debug_mode` 4): the runtime reports a kernel that failed; its inputs
    /// are dumped (never its outputs), whatever `iteration` says.
    pub fn kernel_failed(
        &self,
        op_type: &str,
        full_name: &str,
        inputs: &[TensorRef<'_>],
    ) -> Result<(), Error> {
        let Some(s) = self.shared.as_deref() else {
            return Ok(());
        };
        if s.plan.op_debug_mode != OpDebugMode::Exception || s.state.is_closed() {
            return Ok(());
        }
        self.used.store(true, Ordering::Relaxed);
        for (slot, t) in inputs.iter().enumerate() {
            let who = Owner {
                op_type,
                full_name,
                io: Io::Input,
                slot: slot as u32,
                entry: None,
            };
            s.emit().emit(&To::new(self.dir(), None), who, t)?;
        }
        Ok(())
    }

    /// Watcher mode: whether kernel `full_name`'s outputs are watched this step (a
    /// `watcher_nodes` / `opdump.watcher.nodes` entry names it, by full name or its last `/`
    /// component). A runtime hands [`watch_output`](Step::watch_output) an owned handle only
    /// for these. `false` without watcher mode or on a step that dumps nothing.
    pub fn watches(&self, full_name: &str) -> bool {
        if self.watched.is_none() {
            return false;
        }
        self.live()
            .and_then(|s| s.watcher.as_ref())
            .is_some_and(|w| w.cfg.watches(full_name))
    }

    /// Watcher mode: output `slot` of kernel `full_name` (which just ran) is watched through
    /// `handle` until the step ends (or the same output is handed again): its MD5 and
    /// statistics are recorded now, and [`kernel_ran`](Step::kernel_ran) compares them after
    /// every later kernel. Nothing happens when the kernel is not watched. Errors when the
    /// handle cannot be read.
    ///
    /// The handle must read the tensor in place (a clone of a reference-counted tensor, a
    /// [`RawView`](crate::watcher::RawView)): a copy would never change.
    pub fn watch_output(
        &self,
        full_name: &str,
        slot: u32,
        handle: impl WatchedTensor + 'static,
    ) -> Result<(), Error> {
        let Some(set) = &self.watched else {
            return Ok(());
        };
        let Some(s) = self.live() else { return Ok(()) };
        let Some(w) = &s.watcher else { return Ok(()) };
        if !w.cfg.watches(full_name) {
            return Ok(());
        }
        let mut meta = None;
        handle.read(&mut |t| meta = Some((t.dtype(), t.shape().to_vec())));
        let fail = |message: String| Error::Tensor {
            kernel: full_name.to_owned(),
            io: "watched output",
            slot,
            message,
        };
        let (dtype, shape) = meta.ok_or_else(|| fail("the handle did not call back".into()))?;
        set.lock()
            .unwrap_or_else(|e| e.into_inner())
            .watch(&w.cfg, (full_name, slot), (dtype, &shape), Box::new(handle))
            .map_err(fail)
    }

    /// Watcher mode: kernel `full_name` (primitive `op_type`) has just run. When it is in a
    /// watched output's `layer` (every kernel when there is none), that output is read again;
    /// a changed MD5 when this kernel is not the output's writer is memory corruption,
    /// reported in `watcher.csv` and as an [`Event::MemoryCorruption`](crate::diag::Event),
    /// and under `on_corruption` `stop` returned as [`Error::MemoryCorruption`] (the runtime's
    /// cue to stop). Call it after every kernel, wanted or not (before or after the kernel's
    /// [`watch_output`](Step::watch_output): a kernel is never corruption of its own outputs).
    /// Without watcher mode it costs one branch.
    ///
    /// ```
    /// use dump_host::{Dumper, TensorRef, config::WatcherConfig};
    ///
    /// # fn main() -> Result<(), dump_host::Error> {
    /// let dir = std::env::temp_dir().join(format!("watcher-doc-{}", std::process::id()));
    /// let config = format!(
    ///     r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
    ///        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
    ///        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
    ///     dir.display()
    /// );
    /// let mut dumper = Dumper::builder()
    ///     .watcher(WatcherConfig::new(["Add-op0"], []))
    ///     .open_json(config.into_bytes())?;
    /// let out = std::sync::Arc::new(vec![1.0f32, 2.0]); // the runtime's own buffer
    /// let step = dumper.begin_step();
    /// // kernel Add-op0 ran and wrote `out`: hand the watcher a handle that reads it in place
    /// if step.watches("Default/Add-op0") {
    ///     let held = out.clone();
    ///     step.watch_output("Default/Add-op0", 0, move |f: &mut dyn FnMut(TensorRef<'_>)| {
    ///         f(TensorRef::from_slice(&[2], &held[..]))
    ///     })?;
    /// }
    /// step.kernel_ran("Add", "Default/Add-op0")?;
    /// // ... after every later kernel:
    /// step.kernel_ran("Mul", "Default/Mul-op1")?; // reads `out` again: unchanged, no report
    /// step.finish()?; // the handle is released
    /// assert_eq!(dumper.watcher_counts(), (2, 0)); // outputs read again, corruptions found
    /// dumper.close()?;
    /// std::fs::remove_dir_all(&dir).ok();
    /// # Ok(())
    /// # }
    /// ```
    pub fn kernel_ran(&self, op_type: &str, full_name: &str) -> Result<(), Error> {
        let Some(set) = &self.watched else {
            return Ok(());
        };
        let Some(s) = self.live() else { return Ok(()) };
        let Some(w) = &s.watcher else { return Ok(()) };
        let seen = set.lock().unwrap_or_else(|e| e.into_inner()).after_kernel(
            &w.cfg,
            (self.iteration, self.graph),
            (op_type, full_name),
        );
        w.report(s, seen)
    }

    /// Watcher mode: handles of watched outputs this step holds (0 without watcher mode).
    pub fn watched_outputs(&self) -> usize {
        self.watched
            .as_ref()
            .map_or(0, |m| m.lock().unwrap_or_else(|e| e.into_inner()).len())
    }

    /// Ends the step: writes its statistic rows (one append per `statistic.csv`), records it
    /// in `ms_global_execution_order_graph_{g}.csv` when anything was dumped, and returns the
    /// write failures seen so far (without waiting for queued writes; [`crate::Dumper::close`]
    /// waits).
    ///
    /// Rows whose MD5/SHA-1 the writer threads compute (a tensor dump with a digest column,
    /// see `dumper/tensor_files.rs`) are not waited for either: a table with such a row still
    /// hashing is appended, whole and in order, by a later step's end or by
    /// [`crate::Dumper::flush`] / [`crate::Dumper::close`].
    ///
    /// With a flight recorder the step is kept in memory instead, the oldest step leaving the
    /// ring; when a trigger fired during the step (or a user trigger is armed), the steps
    /// held and this one are written here, `trigger.json` last. Dropping a step does the
    /// same (a runtime stopped by a non-finite output need not finish it).
    pub fn finish(mut self) -> Result<(), Error> {
        self.finish_doc();
        // The watched outputs' handles are let go here (and by drop).
        self.watched = None;
        let held = self.held.take();
        let ended = self.end(held);
        // Ended: the drop that follows has no rows of its own to flush (a second flush per
        // step, with its locks, was a step's largest fixed cost when nothing is dumped).
        self.active = false;
        ended
    }

    /// [`finish`](Step::finish)'s work once the document and the watched outputs are let go:
    /// the rows flushed, the recorded step `held` handed to the flight recorder, the step in
    /// the global execution order, the write failures so far.
    fn end(&self, held: Option<Arc<StepRecord>>) -> Result<(), Error> {
        let Some(s) = self.live() else { return Ok(()) };
        if held.is_none() && !self.used.load(Ordering::Relaxed) {
            return Self::end_quiet(s);
        }
        s.out.flush_rows(false);
        if let Some(rec) = held {
            let settled = self.settle(s, &rec);
            if let (Some(r), Some(arc)) = (&s.recorder, &self.shared) {
                r.end_step(arc, rec);
            }
            settled?;
        } else if self.used.load(Ordering::Relaxed)
            && s.plan.op_debug_mode != OpDebugMode::Exception
            && s.plan.ge.is_none()
        {
            s.out.append_global_order(self.graph, self.iteration);
        }
        s.out.files.take_errors()
    }
}

impl Step {
    /// The end of an active step that dumped nothing and is held by no flight recorder (what
    /// [`finish`](Step::finish) does for it, also without a `Step`: see
    /// [`crate::Dumper::begin_dumping_step`]): the rows earlier steps left pending are
    /// flushed, and the write failures so far returned. Nothing once the Dumper is closed.
    pub(crate) fn end_quiet(s: &Shared) -> Result<(), Error> {
        if s.state.is_closed() {
            return Ok(());
        }
        s.out.flush_rows(false);
        s.out.files.take_errors()
    }

    /// The deferred device copies of the recorded step `rec` land: their rows are computed
    /// and their outputs checked (in report order), then the budget is enforced again.
    fn settle(&self, s: &Shared, rec: &StepRecord) -> Result<(), Error> {
        let r = s.emit().settle(rec, &|to, who, order| {
            self.after_at(s, to, who, (Some(rec), Some(order)))
        });
        if let Some(rc) = &s.recorder {
            rc.settled(rec);
        }
        r
    }

    /// msprobe's layout: closes the step's dump.json and writes construct.json and stack.json
    /// (once; [`finish`](Step::finish) or drop).
    fn finish_doc(&mut self) {
        if let (Some(doc), Some(s)) = (self.doc.take(), self.shared.as_deref()) {
            s.release_step_doc(self.iteration, doc);
        }
    }
}

impl Drop for Step {
    /// A step dropped without [`Step::finish`] still closes its msprobe document, writes its
    /// pending statistic rows, and hands a recorded step to the flight recorder.
    fn drop(&mut self) {
        self.finish_doc();
        if let Some(s) = self.live() {
            s.out.flush_rows(false);
        }
        let Some(rec) = self.held.take() else { return };
        if let Some(s) = self.live()
            && let Some(r) = &s.recorder
        {
            // Nobody to return a failed device copy to: it is counted as let go.
            let _ = self.settle(s, &rec);
            if let Some(arc) = &self.shared {
                r.end_step(arc, rec);
            }
        }
    }
}

impl Kernel<'_> {
    /// Who a tensor of this kernel belongs to: under msprobe's layout the call's name and entry.
    fn owner(&self, io: Io, slot: u32) -> Owner<'_> {
        let (full_name, entry) = match &self.call {
            Some((call, entry)) => (call.name.as_str(), Some(entry)),
            None => (self.full_name, None),
        };
        Owner {
            op_type: self.op_type,
            full_name,
            io,
            slot,
            entry,
        }
    }

    /// The call's name in msprobe's layout (`Functional.Conv.0.forward`); `None` in
    /// MindSpore's.
    pub fn call_name(&self) -> Option<&str> {
        self.call.as_ref().map(|(c, _)| c.name.as_str())
    }

    /// Dumps parameter `name` of this call as its forward used it (a module's `weight`):
    /// msprobe's `parameters` of a module call's forward entry, `"parameters": {"weight":
    /// {...}}` in the order reported, its file `{call}.parameters.{name}.npy` with the tensor
    /// task. Only module calls of msprobe's layout (levels L0 and mix) have parameters: for an
    /// API call, at L1, in overflow mode and in MindSpore's layout (whose Parameters are
    /// [`Step::parameter`]'s, at the step's end) nothing is written. Characters of `name`
    /// other than ASCII letters, digits, `_` and `-` become `_`; a name reported twice keeps
    /// its first tensor. A watched parameter holding NaN or ±Inf is reported as
    /// [`output`](Kernel::output) is.
    pub fn parameter(&self, name: &str, t: TensorRef<'_>) -> Result<(), Error> {
        let Some((call, entry)) = &self.call else {
            return Ok(());
        };
        if call.module.is_none() || self.pending.is_some() {
            return Ok(());
        }
        let name = super::msprobe::clean(name);
        let full_name = format!("{}.parameters.{name}", call.name);
        // Its tensor object is gathered alone, then moved into the call's entry by name.
        let alone = Mutex::new(Entry::default());
        let who = Owner {
            op_type: self.op_type,
            full_name: &full_name,
            io: Io::Output,
            slot: 0,
            entry: Some(&alone),
        };
        let to = self.step.to();
        let done = self
            .shared
            .emit()
            .emit(&to, who, &t)
            .and_then(|()| self.step.after(self.shared, &to, who));
        let object = alone
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .take_output(0);
        if let Some(object) = object {
            entry
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_parameter(&name, object);
        }
        done
    }

    /// Dumps input `slot`.
    pub fn input(&self, slot: u32, t: TensorRef<'_>) -> Result<(), Error> {
        if !self.shared.plan.input_output.inputs() {
            return Ok(());
        }
        self.tensor(Io::Input, slot, &t)
    }

    /// Dumps output `slot`. With `opdump.on_nonfinite` `stop`, a watched output holding NaN or
    /// ±Inf is dumped (or held by the flight recorder) and then returns
    /// [`Error::NonFinite`], naming the kernel, the step and the tensor: the runtime's cue to
    /// stop.
    pub fn output(&self, slot: u32, t: TensorRef<'_>) -> Result<(), Error> {
        if !self.shared.plan.input_output.outputs() {
            return Ok(());
        }
        self.tensor(Io::Output, slot, &t)
    }

    /// Writes the `statistic.csv` row of input `slot` from statistics computed elsewhere (a
    /// device agent's [`Summary`], and the MD5 of the tensor's bytes when it sent one): the
    /// same row, through the same code, as [`input`](Kernel::input) writes for the tensor's
    /// bytes. No `.npy` file (there are no bytes). Errors name what the plan asks that a
    /// summary cannot give: `saved_data` "tensor", Ascend device semantics, SHA-1, an MD5
    /// column without an MD5, overflow mode (which needs the tensors), or a summary whose
    /// count is not the shape's element count.
    ///
    /// ```
    /// # use dump_host::Dumper;
    /// # use dump_core::{DType, Summary};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = std::env::temp_dir().join(format!("opdump-doc-summary-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # let config = format!(r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}",
    /// #   "net_name": "Net", "iteration": "all", "saved_data": "statistic", "input_output": 0,
    /// #   "kernels": [], "support_device": [0]}}}}"#, dir.display());
    /// let mut dumper = Dumper::builder().open_json(config.into_bytes())?;
    /// let step = dumper.begin_step();
    /// let mut s = Summary::EMPTY;
    /// for v in [1.0, -2.0, 3.0, 4.0] {
    ///     s.push(v);
    /// }
    /// if let Some(k) = step.kernel("Add", "Default/Add-op0") {
    ///     k.output_summary(0, DType::Float32, &[2, 2], s, None)?;
    /// }
    /// step.finish()?;
    /// assert_eq!(dumper.close()?.rows, 1);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn input_summary(
        &self,
        slot: u32,
        dtype: DType,
        shape: &[usize],
        summary: Summary,
        md5: Option<[u8; 16]>,
    ) -> Result<(), Error> {
        if !self.shared.plan.input_output.inputs() {
            return Ok(());
        }
        self.summary(Io::Input, slot, (dtype, shape), summary, md5)
    }

    /// Writes the `statistic.csv` row of output `slot` from statistics computed elsewhere; see
    /// [`input_summary`](Kernel::input_summary).
    pub fn output_summary(
        &self,
        slot: u32,
        dtype: DType,
        shape: &[usize],
        summary: Summary,
        md5: Option<[u8; 16]>,
    ) -> Result<(), Error> {
        if !self.shared.plan.input_output.outputs() {
            return Ok(());
        }
        self.summary(Io::Output, slot, (dtype, shape), summary, md5)
    }

    fn summary(
        &self,
        io: Io,
        slot: u32,
        t: (DType, &[usize]),
        summary: Summary,
        md5: Option<[u8; 16]>,
    ) -> Result<(), Error> {
        let who = self.owner(io, slot);
        if let Some((g, _)) = &self.ge {
            let stats = self
                .shared
                .plan
                .ge
                .as_ref()
                .is_some_and(|g| g.stats.is_some());
            return g.lock().unwrap_or_else(|e| e.into_inner()).add_summary(
                (self.full_name, io, slot),
                t,
                summary,
                stats,
            );
        }
        if self.pending.is_some() {
            return Err(who.error(
                "op_debug_mode 3 (overflow) keeps the tensors of kernels whose outputs \
                 overflowed; precomputed statistics carry no tensor (use op_debug_mode 0)"
                    .to_owned(),
            ));
        }
        let to = self.step.to();
        self.shared.emit().emit_summary(&to, who, t, summary, md5)?;
        self.step.after(self.shared, &to, who)
    }

    /// Records the kernel's arguments (`save_kernel_args`): written as `{type}.{scope}.json` in
    /// the iteration directory, keys sorted, values as strings (`"True"`, `"False"`, numbers).
    pub fn args(&self, args: &[(&str, &str)]) {
        if self.shared.plan.save_kernel_args && !self.args_written.swap(true, Ordering::Relaxed) {
            self.write_args(args);
        }
    }

    fn write_args(&self, args: &[(&str, &str)]) {
        match (&self.step.held, &self.shared.recorder) {
            (Some(rec), Some(r)) => r.hold_args(rec, self.full_name, args),
            _ => self
                .shared
                .out
                .write_kernel_args(self.step.dir(), self.full_name, args),
        }
    }

    fn tensor(&self, io: Io, slot: u32, t: &TensorRef<'_>) -> Result<(), Error> {
        if let Some((g, _)) = &self.ge {
            return g.lock().unwrap_or_else(|e| e.into_inner()).add(
                self.shared,
                self.step.dir(),
                (self.full_name, io, slot),
                t,
            );
        }
        if let Some(p) = &self.pending {
            let bytes = t.contiguous().map_err(|message| Error::Tensor {
                kernel: self.full_name.to_owned(),
                io: io.as_str(),
                slot,
                message,
            })?;
            p.lock().unwrap_or_else(|e| e.into_inner()).push(Pending {
                io,
                slot,
                dtype: t.dtype,
                shape: t.shape.to_vec(),
                format: t.format.to_owned(),
                bytes: bytes.into_owned(),
            });
            return Ok(());
        }
        let who = self.owner(io, slot);
        let to = self.step.to();
        self.shared.emit().emit(&to, who, t)?;
        self.step.after(self.shared, &to, who)
    }

    /// Ends the kernel: in overflow mode, writes its held tensors if an output overflowed, and
    /// returns the first error of those writes (I/O failures are returned by
    /// [`Step::finish`] and [`crate::Dumper::close`], as for every write). Dropping the
    /// kernel does the same but has nowhere to return the error.
    pub fn finish(mut self) -> Result<(), Error> {
        self.finish_ge();
        self.settle_overflow()
    }

    /// CANN's GE layout: writes the kernel's file (once; [`finish`](Kernel::finish) or drop).
    fn finish_ge(&mut self) {
        if let Some((g, task)) = self.ge.take() {
            g.into_inner().unwrap_or_else(|e| e.into_inner()).finish(
                self.shared,
                self.step.dir(),
                (self.op_type, self.full_name, task),
            );
        }
    }

    fn settle_overflow(&mut self) -> Result<(), Error> {
        let Some(p) = self.pending.take() else {
            return Ok(());
        };
        let held = p.into_inner().unwrap_or_else(|e| e.into_inner());
        let s = self.shared;
        let overflow = held.iter().any(|t| {
            t.io == Io::Output
                && t.dtype.is_float()
                && t.bytes.len()
                    == t.dtype
                        .storage_bytes(t.shape.iter().product())
                        .unwrap_or(usize::MAX)
                && matches!(
                    summarize(t.dtype, &t.bytes, t.shape.iter().product()),
                    Ok(Some(sm)) if sm.nan + sm.pos_inf + sm.neg_inf > 0
                )
        });
        if !overflow {
            return Ok(());
        }
        let n = s.plan.overflow_number as u64;
        let before = s.state.count_overflow();
        if n != 0 && before >= n {
            return Ok(());
        }
        let mut first = Ok(());
        for t in &held {
            let who = self.owner(t.io, t.slot);
            let r = TensorRef::host(t.dtype, &t.shape, &t.bytes).with_format(&t.format);
            // I/O errors are recorded in the writer's log; others are returned.
            if let Err(e) = s.emit().emit(&To::new(self.step.dir(), None), who, &r) {
                first = first.and(Err(e));
            }
        }
        first
    }
}

impl Drop for Kernel<'_> {
    fn drop(&mut self) {
        self.finish_ge();
        // Nowhere to return an error from drop; `Kernel::finish` returns it.
        let _ = self.settle_overflow();
        if let (Some((call, entry)), Some(doc)) = (self.call.take(), &self.step.doc) {
            let entry = entry.into_inner().unwrap_or_else(|e| e.into_inner());
            // A call that reported no tensor (asked for and dropped, or not overflowed in
            // overflow mode) writes no entry and keeps its name for the next ask.
            if entry.tensors() > 0 {
                let s = self.shared;
                doc.lock().unwrap_or_else(|e| e.into_inner()).commit(
                    (&s.plan, &s.out),
                    self.step.iteration,
                    call,
                    entry,
                );
            }
        }
        if self.shared.plan.save_kernel_args && !self.args_written.load(Ordering::Relaxed) {
            self.write_args(&[]);
        }
    }
}
