//! What the Dumper does for msprobe's layout beyond naming files: msprobe call names for the
//! runtime's kernels ([`Namer`]: level, `scope` and `list` filters, per-step call counters),
//! one `dump.json` entry per call gathered from its tensors ([`Entry`]), the crash-safe
//! `dump.json` ([`journal`], committed on a thread of the step's own) and, at the end of the step, `construct.json` and `stack.json`
//! ([`StepDoc`]); [`StepDocs`], the part of a Dumper that holds each live step's document.
//!
//! Names. A kernel whose full name ends in a cell segment of its own type —
//! `Default/features/conv1-Conv2d/Conv2d-op3`, as `dump_candle::Dumped` names a module, or
//! MindSpore's `relu-ReLU/ReLU-op0` — is a module call at levels L0 and mix,
//! `Module.features.conv1.Conv2d.forward.{n}`; at L1 it is the call of the one operator of
//! that module. Any other kernel is an API call, `Functional.{op_type}.{n}.forward` (L1 and
//! mix). `n` counts the calls of that module path or op type in the step, whether dumped or
//! not, as msprobe's counters do.
//!
//! Gradients. A training step's gradient kernel (dump-candle's `DumpedOptimizer`:
//! `Gradients/Default/{module path}/{param}/Gradient-op{n}`, op type `Gradient`) is, at levels
//! L0 and mix with backward in `data_mode`, one parameter of msprobe's
//! `Module.{module path}.{Class}.parameters_grad.{k}` entry, `{param: [tensor]}`, where `k`
//! counts that parameter's gradients in the step (0 for the first backward; a second
//! backward in one step, as in gradient accumulation, gives `.1`); its tensor file is
//! `{entry}.{param}.npy`: `Module.fc.Linear.parameters_grad.0.weight.npy`, the names real
//! msprobe 26.2 writes (`tools/msprobe_train.py`). `Class` is the class of the module call of that path seen in the
//! step (a `Dumped` module's kernel names it), else `Module` (every torch module is an
//! `nn.Module`: the class is not known). At L1 msprobe writes no parameter gradients (its L1
//! dump of a training step has none), nor does opdump. The gradients of a step are gathered
//! and their entries appended when the step ends (an entry is never rewritten once in
//! dump.json, and a parameter's gradients must all be in its entry), so a kill -9 during a
//! step loses that step's gradient entries, never dump.json's validity.

pub(crate) mod journal;

use std::{
    collections::HashMap,
    fmt::Write as _,
    path::Path,
    sync::{Arc, Mutex},
};

use serde_json::{Map, Value};

use super::{out::Out, plan::DumpPlan};
use crate::{
    config::{MsprobeConfig, MsprobeLevel},
    layout::{Io, MsprobeLayout},
    writer::{FILE_MODE, WriteFailure, write_bytes_atomic},
};
use journal::JournalThread;

/// A call's name and where it sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    /// msprobe's name (`Functional.Conv.0.forward`).
    pub(crate) name: String,
    /// The module path of a module call (`features.conv1`), `None` for an API call.
    pub(crate) module: Option<String>,
    /// The module path the call runs in (`features` for `features.conv1`, the scope of an API).
    pub(crate) scope: String,
    /// The runtime's kernel name and type (for stack.json).
    pub(crate) kernel: String,
    /// The runtime's op type.
    pub(crate) op_type: String,
    /// A parameter's gradient: the `parameters_grad` entry it goes into and the parameter.
    pub(crate) grad: Option<(String, String)>,
}

/// Characters kept in name parts; others become `_` (a dot would split the name).
pub(crate) fn clean(part: &str) -> String {
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Module path and class of a full name: the segments after `Default`, the last one (the op)
/// dropped, `-Class` suffixes removed; the class is the last segment's suffix.
fn scope_of(full_name: &str) -> (Vec<String>, Option<&str>) {
    let mut segs: Vec<&str> = full_name.split('/').filter(|s| !s.is_empty()).collect();
    if segs.first() == Some(&"Default") {
        segs.remove(0);
    }
    segs.pop();
    let class = segs.last().and_then(|s| s.rsplit_once('-')).map(|(_, c)| c);
    let path = segs
        .iter()
        .map(|s| clean(s.rsplit_once('-').map_or(s, |(p, _)| p)))
        .collect();
    (path, class)
}

/// The entry name without its counter (`Module.{path}.{Class}.parameters_grad`) and the parameter of a gradient
/// kernel `Gradients/[Default/]{path}/{param}/Gradient-op{n}`; `None` for other names.
fn grad_of(full_name: &str, classes: &HashMap<String, String>) -> Option<(String, String)> {
    let rest = full_name.strip_prefix("Gradients/")?;
    let mut segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    if segs.first() == Some(&"Default") {
        segs.remove(0);
    }
    segs.pop()?;
    let param = clean(segs.pop()?);
    let path: Vec<String> = segs.iter().map(|s| clean(s)).collect();
    let path = path.join(".");
    let class = classes.get(&path).map_or("Module", String::as_str);
    let entry = if path.is_empty() {
        format!("Module.{class}.parameters_grad")
    } else {
        format!("Module.{path}.{class}.parameters_grad")
    };
    Some((entry, param))
}

/// Per-step call naming and filtering.
#[derive(Debug, Default)]
pub(crate) struct Namer {
    counters: HashMap<String, u32>,
    /// Module path → class, from the kernels named this step (`features.conv1` → `Conv2d`).
    classes: HashMap<String, String>,
    /// Module paths of the module calls dumped this step (`scope` selects their gradients).
    dumped_modules: std::collections::HashSet<String>,
    /// Gradients named this step per `{entry}.{param}` (the next `k` of its entry).
    grads: HashMap<String, u32>,
    /// Inside `scope` (between its first and last name).
    in_scope: bool,
    /// Calls named but not yet in dump.json, by kernel name: asking again for the same
    /// kernel (a runtime that checks `kernel(..).is_some()` before reporting) gives the same
    /// call; once its entry is written, the next call of that kernel is a new call.
    open: HashMap<String, (Call, bool)>,
}

impl Namer {
    /// The call of kernel `full_name` (type `op_type`) and whether the config wants it.
    pub(crate) fn name(
        &mut self,
        cfg: &MsprobeConfig,
        op_type: &str,
        full_name: &str,
    ) -> (Call, bool) {
        if let Some((call, wanted)) = self.open.get(full_name) {
            return (call.clone(), *wanted);
        }
        let (call, wanted) = self.new_call(cfg, op_type, full_name);
        self.open
            .insert(full_name.to_owned(), (call.clone(), wanted));
        (call, wanted)
    }

    /// The entry of kernel `kernel` is written: its next call gets a new number.
    pub(crate) fn committed(&mut self, kernel: &str) {
        self.open.remove(kernel);
    }

    fn new_call(&mut self, cfg: &MsprobeConfig, op_type: &str, full_name: &str) -> (Call, bool) {
        if op_type == "Gradient"
            && let Some((entry, param)) = grad_of(full_name, &self.classes)
        {
            return self.grad_call(cfg, op_type, full_name, entry, param);
        }
        let (path, class) = scope_of(full_name);
        if let Some(c) = class
            && !path.is_empty()
        {
            let p = path.join(".");
            self.classes.entry(p).or_insert_with(|| clean(c));
        }
        // At L1 every kernel is an operator: a module-form kernel is the only operator of its
        // module, so it is that operator's call.
        let is_module = cfg.level != MsprobeLevel::L1
            && class.is_some_and(|c| c == op_type)
            && !path.is_empty();
        let (key, module, scope) = if is_module {
            let p = path.join(".");
            let scope = path[..path.len() - 1].join(".");
            (format!("Module.{p}.{}", clean(op_type)), Some(p), scope)
        } else {
            (
                format!("Functional.{}", clean(op_type)),
                None,
                path.join("."),
            )
        };
        let n = self.counters.entry(key.clone()).or_insert(0);
        let count = *n;
        *n += 1;
        let name = if is_module {
            format!("{key}.forward.{count}")
        } else {
            format!("{key}.{count}.forward")
        };
        let level_ok = cfg.level != MsprobeLevel::L0 || is_module;
        let mut wanted = level_ok && cfg.data_mode.forward;
        if let [first, last] = cfg.scope.as_slice() {
            if !self.in_scope && name == *first {
                self.in_scope = true;
            }
            wanted &= self.in_scope;
            if self.in_scope && name == *last {
                self.in_scope = false;
            }
        }
        if !cfg.list.is_empty() {
            wanted &= cfg
                .list
                .iter()
                .any(|l| name.contains(l.as_str()) || full_name.contains(l.as_str()));
        }
        if wanted && let Some(m) = &module {
            self.dumped_modules.insert(m.clone());
        }
        let call = Call {
            name,
            module,
            scope,
            kernel: full_name.to_owned(),
            op_type: op_type.to_owned(),
            grad: None,
        };
        (call, wanted)
    }

    /// A gradient's call: the parameter's k-th gradient of the step (k counts backward
    /// passes: msprobe hooks the accumulated gradient, so a module called twice in one
    /// forward still has one) goes into entry `{entry}.{k}` and is named
    /// `{entry}.{k}.{param}` (its file `{entry}.{k}.{param}.npy`), as msprobe 26.2 names
    /// them (`Module.fc.Linear.parameters_grad.0.weight.pt`). Wanted at L0 and
    /// mix with backward in `data_mode`; with a `scope`, when a module call of that path was
    /// dumped this step; with a `list`, when an item is in the entry name or the kernel name.
    fn grad_call(
        &mut self,
        cfg: &MsprobeConfig,
        op_type: &str,
        full_name: &str,
        entry: String,
        param: String,
    ) -> (Call, bool) {
        let path = entry
            .strip_prefix("Module.")
            .and_then(|e| e.strip_suffix(".parameters_grad"))
            .and_then(|e| e.rsplit_once('.'))
            .map_or(String::new(), |(p, _)| p.to_owned());
        let k = self.grads.entry(format!("{entry}.{param}")).or_insert(0);
        let entry = format!("{entry}.{k}");
        *k += 1;
        let name = format!("{entry}.{param}");
        let mut wanted = cfg.level != MsprobeLevel::L1 && cfg.data_mode.backward;
        if !cfg.scope.is_empty() {
            wanted &= self.dumped_modules.contains(&path);
        }
        if !cfg.list.is_empty() {
            wanted &= cfg
                .list
                .iter()
                .any(|l| entry.contains(l.as_str()) || full_name.contains(l.as_str()));
        }
        let call = Call {
            name,
            module: None,
            scope: path,
            kernel: full_name.to_owned(),
            op_type: op_type.to_owned(),
            grad: Some((entry, param)),
        };
        (call, wanted)
    }
}

/// The tensor objects of one call, by side and slot, and a module call's parameters.
#[derive(Debug, Default)]
pub(crate) struct Entry {
    inputs: Vec<(u32, String)>,
    outputs: Vec<(u32, String)>,
    /// Parameters by name, in the order reported (the first report of a name is kept).
    params: Vec<(String, String)>,
}

impl Entry {
    /// Adds the tensor object of `io` `slot`.
    pub(crate) fn push(&mut self, io: Io, slot: u32, object: String) {
        match io {
            Io::Input => self.inputs.push((slot, object)),
            Io::Output => self.outputs.push((slot, object)),
        }
    }

    /// Adds the tensor object of parameter `name` (a second report of a name is ignored).
    pub(crate) fn push_parameter(&mut self, name: &str, object: String) {
        if !self.params.iter().any(|(n, _)| n == name) {
            self.params.push((name.to_owned(), object));
        }
    }

    /// The tensor object of output `slot`, taken out.
    pub(crate) fn take_output(&mut self, slot: u32) -> Option<String> {
        let i = self.outputs.iter().position(|(s, _)| *s == slot)?;
        Some(self.outputs.swap_remove(i).1)
    }

    /// Tensors gathered.
    pub(crate) fn tensors(&self) -> usize {
        self.inputs.len() + self.outputs.len() + self.params.len()
    }

    /// The `"name": {...}` member of `data` (indented as msprobe's `indent=1`): slots in
    /// order, a missing slot (an empty tensor the Dumper skipped) as `null`, so a reader
    /// numbering leaves finds every tensor at its slot. A module call (`module`) ends with
    /// `"parameters"`, `{}` when none was reported, as msprobe 26.2.0 writes every module's
    /// forward entry.
    pub(crate) fn render(mut self, name: &str, module: bool) -> String {
        let mut o = String::with_capacity(64 + 300 * self.tensors());
        let _ = write!(
            o,
            "  {}: {{\n   \"input_args\": ",
            Value::String(name.to_owned())
        );
        list(&mut o, &mut self.inputs);
        o.push_str(",\n   \"input_kwargs\": {},\n   \"output\": ");
        list(&mut o, &mut self.outputs);
        if module {
            o.push_str(",\n   \"parameters\": {");
            for (i, (param, obj)) in self.params.iter().enumerate() {
                // A tensor object is indented for a list item (`    {`): as a member, its
                // name takes that indentation.
                let _ = write!(
                    o,
                    "{}\n    {}: {}",
                    if i == 0 { "" } else { "," },
                    Value::String(param.clone()),
                    obj.trim_start()
                );
            }
            o.push_str(if self.params.is_empty() {
                "}"
            } else {
                "\n   }"
            });
        }
        o.push_str("\n  }");
        o
    }
}

fn list(o: &mut String, items: &mut [(u32, String)]) {
    if items.is_empty() {
        o.push_str("[]");
        return;
    }
    items.sort_by_key(|(s, _)| *s);
    o.push('[');
    let mut next = 0u32;
    let mut first = true;
    for (slot, obj) in items.iter() {
        if *slot < next {
            continue; // the same slot twice: the first one is kept
        }
        while next < *slot {
            o.push_str(if first { "\n    null" } else { ",\n    null" });
            first = false;
            next += 1;
        }
        o.push_str(if first { "\n" } else { ",\n" });
        o.push_str(obj);
        first = false;
        next = slot + 1;
    }
    o.push_str("\n   ]");
}

/// One `parameters_grad` entry being gathered: its name, the call of its first gradient, and
/// per parameter (in the order their first gradient came) the tensor objects.
type GradEntry = (String, Call, Vec<(String, Vec<String>)>);

/// The `"Module.….parameters_grad": {"weight": [...], ...}` member of `data`.
fn render_grads(name: &str, params: &[(String, Vec<String>)]) -> String {
    let mut o =
        String::with_capacity(64 + params.iter().map(|(_, v)| 300 * v.len()).sum::<usize>());
    let _ = write!(o, "  {}: {{", Value::String(name.to_owned()));
    for (i, (param, objs)) in params.iter().enumerate() {
        let _ = write!(
            o,
            "{}\n   {}: [",
            if i == 0 { "" } else { "," },
            Value::String(param.clone())
        );
        for (j, obj) in objs.iter().enumerate() {
            o.push_str(if j == 0 { "\n" } else { ",\n" });
            o.push_str(obj);
        }
        o.push_str("\n   ]");
    }
    o.push_str("\n  }");
    o
}

/// The msprobe state of one step: names, its `dump.json`, the calls for construct.json.
#[derive(Debug, Default)]
pub(crate) struct StepDoc {
    pub(crate) namer: Namer,
    /// The thread committing to the step's dump.json (started with the first publication).
    journal: Option<JournalThread>,
    /// Calls committed to dump.json, in order.
    calls: Vec<Call>,
    /// dump.json could not be written: no more attempts this step.
    failed: bool,
    /// Members waiting for the next group commit, with their calls and tensor counts.
    pending: Vec<(String, Call, u64)>,
    /// When dump.json was last published.
    last_commit: Option<std::time::Instant>,
    /// `parameters_grad` entries gathered this step, appended at its end.
    grads: Vec<GradEntry>,
    /// The flight recorder holds this step: nothing is published while it records; a trigger
    /// writes the document whole ([`HeldDoc`]).
    held: bool,
}

impl StepDoc {
    /// Appends call `call`'s entry to the step's `dump.json` (created with the first entry).
    pub(crate) fn commit(
        &mut self,
        (plan, out): (&DumpPlan, &Out),
        step: u64,
        call: Call,
        entry: Entry,
    ) {
        self.namer.committed(&call.kernel);
        if self.failed {
            return;
        }
        if let Some((name, param)) = call.grad.clone() {
            let mut entry = entry;
            if let Some(obj) = entry.take_output(0) {
                self.gather_grad(name, param, call, obj);
            }
            return;
        }
        let tensors = entry.tensors() as u64;
        let member = entry.render(&call.name, call.module.is_some());
        self.pending.push((member, call, tensors));
        let due = self
            .last_commit
            .is_none_or(|t| t.elapsed() >= plan.msprobe_commit_interval);
        if due && !self.held {
            self.publish((plan, out), step);
        }
    }

    /// Adds a gradient's tensor object to its `parameters_grad` entry.
    fn gather_grad(&mut self, name: String, param: String, call: Call, obj: String) {
        let i = match self.grads.iter().position(|(n, _, _)| *n == name) {
            Some(i) => i,
            None => {
                let mut first = call;
                first.name = name.clone();
                self.grads.push((name, first, Vec::new()));
                self.grads.len() - 1
            }
        };
        let params = &mut self.grads[i].2;
        match params.iter_mut().find(|(p, _)| *p == param) {
            Some((_, objs)) => objs.push(obj),
            None => params.push((param, vec![obj])),
        }
    }

    /// Writes the pending members to the step's `dump.json` (created with the first).
    pub(crate) fn publish(&mut self, (plan, out): (&DumpPlan, &Out), step: u64) {
        if self.pending.is_empty() || self.failed || self.held {
            return;
        }
        let Some(layout) = msprobe_layout(plan) else {
            return;
        };
        let dir = layout.rank_dir(step);
        let started = (|| {
            if self.journal.is_none() {
                // The step's directories, dump.json and every commit on the step's journal
                // thread: creating a directory or a file can take milliseconds (ext4 looking
                // for a free inode), never on the runtime's thread.
                let header = header(plan, &dir);
                let root = out.tree.layout().root().to_owned();
                self.journal = Some(JournalThread::spawn(root, dir.clone(), header)?);
            }
            Ok(())
        })();
        self.last_commit = Some(std::time::Instant::now());
        if let Err(e) = started {
            self.failed = true;
            self.pending.clear();
            out.files.writer().errors().record(dir.join("dump.json"), e);
            return;
        }
        let mut members = Vec::with_capacity(self.pending.len());
        for (member, call, tensors) in self.pending.drain(..) {
            members.push(member);
            out.tables.count(tensors);
            self.calls.push(call);
        }
        if !self.journal.as_ref().is_some_and(|j| j.send(members)) {
            self.failed = true; // the thread is gone: `finish` reports why
        }
    }

    /// Publishes what is pending and waits until it is in dump.json: the step a runtime
    /// ended is complete on disk when its `finish` returns.
    pub(crate) fn flush(&mut self, (plan, out): (&DumpPlan, &Out), step: u64) {
        self.publish((plan, out), step);
        if let Some(j) = &self.journal {
            j.flush();
        }
    }

    /// Ends the step: closes `dump.json`, writes `construct.json` and `stack.json` — on a
    /// writer thread: removing the stale twin frees its blocks, which takes milliseconds on
    /// ext4, and dump.json is already complete.
    pub(crate) fn finish(&mut self, (plan, out): (&DumpPlan, &Out), step: u64) {
        // What waits for a group commit goes in now, on the caller's thread: the step's
        // dump.json is complete when the step is. The gradients' entries come last, whole.
        if !self.failed {
            for (name, call, params) in std::mem::take(&mut self.grads) {
                let tensors = params.iter().map(|(_, v)| v.len() as u64).sum();
                self.pending
                    .push((render_grads(&name, &params), call, tensors));
            }
        }
        self.publish((plan, out), step);
        let Some(thread) = self.journal.take() else {
            return;
        };
        let Some(layout) = msprobe_layout(plan) else {
            return;
        };
        let dir = layout.rank_dir(step);
        // Waits for the last commits: dump.json is complete when the step is.
        let (journal, error) = thread.finish();
        if let Some(e) = error {
            out.files.writer().errors().record(dir.join("dump.json"), e);
        }
        let Some(j) = journal else {
            return;
        };
        let level = plan.msprobe.as_ref().map_or(MsprobeLevel::L1, |m| m.level);
        let construct = pretty(&construct(&self.calls, level));
        let stack = pretty(&stack(&self.calls));
        let cost = construct.len() + stack.len();
        let job = move || -> Result<(), WriteFailure> {
            let fail = |path: std::path::PathBuf| move |error| WriteFailure { path, error };
            j.close().map_err(fail(dir.join("dump.json")))?;
            for (name, text) in [("construct.json", construct), ("stack.json", stack)] {
                let p = dir.join(name);
                write_bytes_atomic(&p, FILE_MODE, text.as_bytes()).map_err(fail(p))?;
            }
            Ok(())
        };
        out.files.writer().submit(cost, Box::new(job));
    }
}

impl StepDoc {
    /// A held step's document so far, taken out: the members of `data` in the order a plain
    /// dump publishes them (calls as they finished, then the `parameters_grad` entries), the
    /// calls they belong to, and the tensor objects they hold.
    fn take_document(&mut self) -> (Vec<String>, Vec<Call>, u64) {
        let mut members = Vec::with_capacity(self.pending.len() + self.grads.len());
        let mut calls = std::mem::take(&mut self.calls);
        let mut tensors = 0;
        for (member, call, n) in self.pending.drain(..) {
            members.push(member);
            calls.push(call);
            tensors += n;
        }
        for (name, call, params) in self.grads.drain(..) {
            tensors += params.iter().map(|(_, v)| v.len() as u64).sum::<u64>();
            members.push(render_grads(&name, &params));
            calls.push(call);
        }
        (members, calls, tensors)
    }
}

/// A step's msprobe document held by the flight recorder (with the step's record): the calls
/// gather in the [`StepDoc`] as usual, nothing is published, and a trigger writes
/// `dump.json` (the same bytes the crash-safe journal would have left), `construct.json` and
/// `stack.json`, each whole through a temporary name and a rename.
pub(crate) struct HeldDoc {
    doc: Arc<Mutex<StepDoc>>,
    /// `step{N}/rank{R}`.
    dir: std::path::PathBuf,
    /// The document up to `"data": {`.
    header: String,
    level: MsprobeLevel,
}

impl HeldDoc {
    /// The held document `doc` of step `step`; `None` when the plan does not write msprobe's
    /// layout.
    pub(crate) fn new(plan: &DumpPlan, step: u64, doc: Arc<Mutex<StepDoc>>) -> Option<Self> {
        let layout = msprobe_layout(plan)?;
        let dir = layout.rank_dir(step);
        Some(HeldDoc {
            header: header(plan, &dir),
            doc,
            dir,
            level: plan.msprobe.as_ref().map_or(MsprobeLevel::L1, |m| m.level),
        })
    }

    /// The step's rank directory (where `dump.json` goes).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether any call is held (the step dumped something).
    pub(crate) fn has_calls(&self) -> bool {
        let d = self.doc.lock().unwrap_or_else(|e| e.into_inner());
        !d.pending.is_empty() || !d.grads.is_empty() || !d.calls.is_empty()
    }

    /// Writes the document held so far (nothing when no call was): `dump.json`,
    /// `construct.json`, `stack.json`. Failures go to the writer's log. Returns the calls
    /// written.
    pub(crate) fn write(&self, out: &Out) -> usize {
        let (members, calls, tensors) = self
            .doc
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_document();
        if members.is_empty() {
            return 0;
        }
        if out.tree.ensure_dir(&self.dir).is_err() {
            return 0; // recorded in the writer's log
        }
        let files = [
            ("dump.json", journal::whole(&self.header, &members)),
            (
                "construct.json",
                pretty(&construct(&calls, self.level)).into_bytes(),
            ),
            ("stack.json", pretty(&stack(&calls)).into_bytes()),
        ];
        for (name, bytes) in files {
            let p = self.dir.join(name);
            if let Err(e) = write_bytes_atomic(&p, FILE_MODE, &bytes) {
                out.files.writer().errors().record(p, e);
            }
        }
        out.tables.count(tensors);
        calls.len()
    }
}

/// The document up to `"data": {`, msprobe's top-level keys in its order.
fn header(plan: &DumpPlan, dir: &Path) -> String {
    let m = plan.msprobe.as_ref();
    let task = m.map_or("statistics", |m| m.task.as_str());
    let level = m.map_or("L1", |m| m.level.as_str());
    let data_dir = if plan.saved_data.tensors() {
        Value::String(dir.join("dump_tensor_data").to_string_lossy().into_owned())
    } else {
        Value::Null
    };
    format!(
        "{{\n \"task\": {},\n \"level\": {},\n \"framework\": \"pytorch\",\n \"dump_data_dir\": \
         {data_dir},\n \"data\": {{",
        Value::String(task.into()),
        Value::String(level.into()),
    )
}

/// `construct.json`: `{}` at L1; at L0 and mix every call mapped to the module call it ran
/// in (the first later call of the module path it sits in: a module reports after its body),
/// or `null` at the top.
pub(crate) fn construct(calls: &[Call], level: MsprobeLevel) -> Value {
    let mut m = Map::new();
    if level == MsprobeLevel::L1 {
        return Value::Object(m);
    }
    for (i, c) in calls.iter().enumerate() {
        if c.grad.is_some() {
            continue; // parameters_grad entries are not calls of the hierarchy
        }
        let parent = (!c.scope.is_empty())
            .then(|| {
                calls[i + 1..]
                    .iter()
                    .find(|p| p.module.as_deref() == Some(c.scope.as_str()))
                    .map(|p| Value::String(p.name.clone()))
            })
            .flatten()
            .unwrap_or(Value::Null);
        m.insert(c.name.clone(), parent);
    }
    Value::Object(m)
}

/// `stack.json`: for each call, `[[name], [where]]`; a Rust runtime has no Python stack, so
/// "where" is the runtime's kernel name and type.
pub(crate) fn stack(calls: &[Call]) -> Value {
    let mut m = Map::new();
    for (i, c) in calls.iter().enumerate() {
        m.insert(
            i.to_string(),
            Value::Array(vec![
                Value::Array(vec![Value::String(c.name.clone())]),
                Value::Array(vec![Value::String(format!(
                    "kernel {}, type {}",
                    c.kernel, c.op_type
                ))]),
            ]),
        );
    }
    Value::Object(m)
}

/// JSON with msprobe's one-space indentation.
fn pretty(v: &Value) -> String {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    // Serialising a Value into memory cannot fail.
    let _ = serde::Serialize::serialize(v, &mut ser);
    String::from_utf8(out).unwrap_or_default()
}

/// The msprobe layout, when the plan writes msprobe's layout.
fn msprobe_layout(plan: &DumpPlan) -> Option<MsprobeLayout> {
    plan.msprobe
        .as_ref()
        .map(|_| MsprobeLayout::from_plan(plan))
}

/// A step's document and how many [`crate::Step`]s (and the session) hold it.
type Holders = (Arc<Mutex<StepDoc>>, usize);

/// msprobe's per-step state of one Dumper, by step number, while a [`crate::Step`] (or the
/// session) of that number lives.
#[derive(Default)]
pub(crate) struct StepDocs {
    docs: Mutex<HashMap<u64, Holders>>,
    /// A flight recorder holds the steps: documents are held, not published ([`HeldDoc`]).
    held: bool,
}

impl StepDocs {
    /// The documents of a Dumper; `held` when a flight recorder holds its steps.
    pub(crate) fn new(held: bool) -> Self {
        StepDocs {
            docs: Mutex::default(),
            held,
        }
    }

    /// The msprobe state of step `iteration`, shared by every [`crate::Step`] of that number;
    /// each `get` is matched by one [`release`](StepDocs::release).
    pub(crate) fn get(&self, iteration: u64) -> Arc<Mutex<StepDoc>> {
        let mut docs = self.docs.lock().unwrap_or_else(|e| e.into_inner());
        let (doc, holders) = docs.entry(iteration).or_insert_with(|| {
            let doc = StepDoc {
                held: self.held,
                ..StepDoc::default()
            };
            (Arc::new(Mutex::new(doc)), 0)
        });
        *holders += 1;
        Arc::clone(doc)
    }

    /// A holder of step `iteration`'s `doc` is done with it: the last one closes the step's
    /// dump.json and writes its side files; another publishes what it finished.
    pub(crate) fn release(
        &self,
        (plan, out): (&DumpPlan, &Out),
        iteration: u64,
        doc: Arc<Mutex<StepDoc>>,
    ) {
        let mut docs = self.docs.lock().unwrap_or_else(|e| e.into_inner());
        // Counted, not by the Arc's references: a flight recorder's record holds one too.
        let last = match docs.get_mut(&iteration) {
            Some((d, holders)) if Arc::ptr_eq(d, &doc) => {
                *holders = holders.saturating_sub(1);
                let last = *holders == 0;
                if last {
                    docs.remove(&iteration);
                }
                last
            }
            // Not in the map (any more): no other holder is left.
            _ => true,
        };
        drop(docs);
        let mut d = doc.lock().unwrap_or_else(|e| e.into_inner());
        if last {
            d.finish((plan, out), iteration);
        } else {
            // Another holder (the session) keeps the document open; what this step
            // finished is in dump.json now all the same.
            d.flush((plan, out), iteration);
        }
    }
}

#[cfg(test)]
mod tests;
