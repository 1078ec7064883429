//! The flight recorder: every step's statistics computed as usual, kept with the wanted
//! kernels' tensors (host copies) in memory for the last N steps, and written only when a
//! trigger fires — a watched output going non-finite, or the user
//! ([`Dumper::trigger`](crate::Dumper::trigger), [`TriggerHandle`](crate::TriggerHandle)) — in
//! the plan's layout,
//! followed by `trigger.json` (docs/flight-recorder.md).
//!
//! Cost on the producer: a row is formatted as usual and pushed on the step's list (one
//! uncontended lock) instead of appended to `statistic.csv`; a tensor is copied into a
//! buffer recycled from the step that left the ring (no allocation in the steady state), or
//! a device tensor's copy queued on the device and waited for when the step ends. A trigger's
//! write starts when the step that fired ends, on a thread of its own (one write at a time;
//! joined by `Dumper::flush` and `close`); under `on_nonfinite: stop` it runs on the thread
//! that ends the step, which is stopping.
//!
//! Budget: `budget_bytes` bounds the tensor copies held, the current step's and the spare
//! buffers included. Past it, copies are let go oldest first (spares, then the ring's oldest
//! step, then the current step's earliest tensors); every statistic row is kept.

mod nonfinite;
mod record;
mod write;

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    },
};

pub(crate) use nonfinite::Counts;
pub use nonfinite::NonFiniteAt;
pub(crate) use record::{Fired, Growth, Held, HeldNpy, Order, PendingHeld, StepRecord};

use super::{out::Out, shared::Shared};
use crate::{
    config::FlightRecorder,
    diag::{Event, EventSink},
};

/// Files of a graph the Dumper writes once (execution order, graph description) and the
/// metadata, held until the first trigger writes.
#[derive(Default)]
pub(crate) struct Deferred {
    pub(crate) metadata: bool,
    pub(crate) orders: BTreeMap<u32, Vec<String>>,
    pub(crate) graphs: BTreeMap<u32, crate::graph::Graph>,
}

/// The flight recorder of one Dumper.
pub(crate) struct Recorder {
    pub(crate) settings: FlightRecorder,
    /// Steps ended, oldest first (at most `settings.steps`).
    ring: Mutex<VecDeque<Arc<StepRecord>>>,
    /// Buffers of steps that left the ring, by capacity, reused for the next copies.
    spare: Mutex<BTreeMap<usize, Vec<Vec<u8>>>>,
    /// Bytes of tensor copies held (ring, current steps, constants, spares).
    held: AtomicU64,
    budget_said: AtomicBool,
    exhausted_said: AtomicBool,
    /// A user trigger waiting for the end of the current step.
    user: Mutex<Option<String>>,
    /// Triggers that fired (written or not).
    fired: AtomicU32,
    /// Graph constants by graph id, held until a write.
    constants: Mutex<BTreeMap<u32, Arc<StepRecord>>>,
    pub(crate) deferred: Mutex<Deferred>,
    /// One write at a time.
    writing: Mutex<()>,
    /// The trigger write running on its own thread, if any (joined before the next write,
    /// by [`Dumper::flush`](crate::Dumper::flush) and at close).
    write_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The l2norm of each output (by kernel, then slot) in the last `steps` steps, for the
    /// `l2norm_growth` rule (empty when the rule is off).
    history: Mutex<std::collections::HashMap<String, Vec<VecDeque<f64>>>>,
    /// Where its warnings and its report of each write go.
    events: EventSink,
}

impl Recorder {
    /// A recorder with `settings`, reporting to `events`.
    pub(crate) fn new(settings: FlightRecorder, events: EventSink) -> Self {
        Recorder {
            settings,
            ring: Mutex::new(VecDeque::new()),
            spare: Mutex::new(BTreeMap::new()),
            held: AtomicU64::new(0),
            budget_said: AtomicBool::new(false),
            exhausted_said: AtomicBool::new(false),
            user: Mutex::new(None),
            fired: AtomicU32::new(0),
            constants: Mutex::new(BTreeMap::new()),
            deferred: Mutex::new(Deferred {
                metadata: true,
                ..Deferred::default()
            }),
            writing: Mutex::new(()),
            write_thread: Mutex::new(None),
            history: Mutex::new(std::collections::HashMap::new()),
            events,
        }
    }

    /// The statistic rule: records `l2` for output `slot` of kernel `who` and fires step
    /// `rec` when it is more than `l2norm_growth` times the median of that output's l2norm
    /// in the earlier steps kept (at least one; a median of 0 never fires).
    pub(crate) fn check_growth(
        &self,
        rec: &StepRecord,
        (op_type, kernel, slot): (&str, &str, u32),
        l2: f64,
    ) {
        let Some(factor) = self.settings.l2norm_growth else {
            return;
        };
        let median = {
            let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
            if !h.contains_key(kernel) {
                h.insert(kernel.to_owned(), Vec::new());
            }
            let Some(slots) = h.get_mut(kernel) else {
                return;
            };
            let slot_i = slot as usize;
            if slots.len() <= slot_i {
                slots.resize_with(slot_i + 1, VecDeque::new);
            }
            let past = &mut slots[slot_i];
            let median = (!past.is_empty()).then(|| {
                let mut v: Vec<f64> = past.iter().copied().collect();
                v.sort_by(f64::total_cmp);
                let n = v.len();
                if n % 2 == 1 {
                    v[n / 2]
                } else {
                    (v[n / 2 - 1] + v[n / 2]) / 2.0
                }
            });
            past.push_back(l2);
            while past.len() > self.settings.steps as usize {
                past.pop_front();
            }
            median
        };
        // A median of 0 (an output that was all zeros) says nothing about growth.
        let Some(median) = median.filter(|m| *m > 0.0) else {
            return;
        };
        if l2 > factor * median {
            let mut r = rec.lock();
            if r.fired.is_none() {
                r.fired = Some(Fired::Growth(Growth {
                    step: rec.iteration,
                    graph: rec.graph,
                    op_type: op_type.to_owned(),
                    kernel: kernel.to_owned(),
                    slot,
                    l2norm: l2,
                    median,
                    factor,
                }));
            }
        }
    }

    /// The record holding graph `graph`'s constants (in `dir`).
    pub(crate) fn constants(&self, graph: u32, dir: &std::path::Path) -> Arc<StepRecord> {
        let mut c = self.constants.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(
            c.entry(graph)
                .or_insert_with(|| Arc::new(StepRecord::new(graph, 0, dir, false))),
        )
    }

    /// Every constants record.
    fn all_constants(&self) -> Vec<Arc<StepRecord>> {
        let c = self.constants.lock().unwrap_or_else(|e| e.into_inner());
        c.values().cloned().collect()
    }

    /// Bytes of tensor copies held now.
    pub(crate) fn held_bytes(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// Whether a write is still allowed (`max_triggers` not reached).
    fn may_write(&self) -> bool {
        let cap = self.settings.max_triggers;
        cap == 0 || self.fired.load(Ordering::Relaxed) < cap
    }

    /// A buffer of at least `len` bytes: a spare one of a close size, or a new one.
    fn buffer(&self, len: usize) -> Vec<u8> {
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        let fit = spare
            .range_mut(len..=len.saturating_mul(2).max(4096))
            .next()
            .map(|(&cap, v)| (cap, v.pop()));
        if let Some((cap, Some(mut b))) = fit {
            if spare.get(&cap).is_some_and(Vec::is_empty) {
                spare.remove(&cap);
            }
            drop(spare);
            // Its capacity stays counted in `held`: it moves from the spares to a step.
            b.clear();
            return b;
        }
        drop(spare);
        let b = Vec::with_capacity(len);
        self.held.fetch_add(b.capacity() as u64, Ordering::Relaxed);
        b
    }

    /// Holds a tensor file of step `rec`: `bytes` copied (or taken, when already ours).
    pub(crate) fn hold_npy(
        &self,
        rec: &StepRecord,
        name: String,
        (dtype, shape): (dump_core::DType, &[usize]),
        bytes: std::borrow::Cow<'_, [u8]>,
    ) {
        let len = bytes.len();
        let owned = match bytes {
            std::borrow::Cow::Owned(v) => {
                self.held.fetch_add(v.capacity() as u64, Ordering::Relaxed);
                v
            }
            std::borrow::Cow::Borrowed(b) => {
                // Room first, so that the copy itself never takes the process past the budget.
                self.make_room(rec, len as u64);
                let mut v = self.buffer(len);
                v.extend_from_slice(b);
                v
            }
        };
        let cap = owned.capacity() as u64;
        {
            let mut r = rec.lock();
            r.bytes += cap;
            r.used = true;
            r.entries.push(Held::Npy(HeldNpy {
                name,
                dtype,
                shape: shape.to_vec(),
                bytes: Some(owned),
                len,
                pending: None,
            }));
        }
        self.make_room(rec, 0);
    }

    /// Makes room for `len` more bytes in step `current`; whether they now fit the budget.
    pub(crate) fn reserve(&self, current: &StepRecord, len: usize) -> bool {
        self.make_room(current, len as u64);
        self.held_bytes().saturating_add(len as u64) <= self.settings.budget_bytes
    }

    /// Holds a tensor file of step `rec` whose bytes a device is still copying (room
    /// [reserved](Recorder::reserve) first): a buffer is taken now, the bytes land in it when
    /// the step ends (`Emit::settle`). The producer does not wait for the bus.
    pub(crate) fn hold_pending(
        &self,
        rec: &StepRecord,
        name: String,
        (dtype, shape): (dump_core::DType, &[usize]),
        pending: PendingHeld,
    ) {
        let len = pending.copy.len();
        let buf = self.buffer(len);
        let mut r = rec.lock();
        r.bytes += buf.capacity() as u64;
        r.used = true;
        r.entries.push(Held::Npy(HeldNpy {
            name,
            dtype,
            shape: shape.to_vec(),
            bytes: Some(buf),
            len,
            pending: Some(pending),
        }));
    }

    /// A held copy of step `rec` that failed: its `cap` bytes are no longer held, and it is
    /// counted as let go.
    pub(crate) fn lost(&self, rec: &StepRecord, cap: usize) {
        let mut r = rec.lock();
        r.bytes -= (cap as u64).min(r.bytes);
        r.dropped += 1;
        drop(r);
        self.held
            .fetch_sub((cap as u64).min(self.held_bytes()), Ordering::Relaxed);
    }

    /// After the deferred copies of step `current` landed: back under the budget.
    pub(crate) fn settled(&self, current: &StepRecord) {
        self.make_room(current, 0);
    }

    /// Holds a statistic row of step `rec`.
    pub(crate) fn hold_row(&self, rec: &StepRecord, csv: std::path::PathBuf, text: String) {
        let mut r = rec.lock();
        r.used = true;
        r.entries.push(Held::Row { csv, text });
    }

    /// Holds a kernel's arguments.
    pub(crate) fn hold_args(&self, rec: &StepRecord, kernel: &str, args: &[(&str, &str)]) {
        let mut r = rec.lock();
        r.entries.push(Held::Args {
            kernel: kernel.to_owned(),
            args: args
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        });
    }

    /// Brings the bytes held, plus `incoming` about to be, back under the budget: spares
    /// first, then the ring's steps oldest first, then the earliest tensors of `current`.
    fn make_room(&self, current: &StepRecord, incoming: u64) {
        let budget = self.settings.budget_bytes;
        let over =
            |held: &AtomicU64| (held.load(Ordering::Relaxed) + incoming).saturating_sub(budget);
        if over(&self.held) == 0 {
            return;
        }
        {
            let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
            while over(&self.held) > 0 {
                let Some((_, mut v)) = spare.pop_first() else {
                    break;
                };
                for b in v.drain(..) {
                    self.held.fetch_sub(b.capacity() as u64, Ordering::Relaxed);
                }
            }
        }
        let mut let_go = false;
        if over(&self.held) > 0 {
            let constants = self.all_constants();
            let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
            for step in ring.iter().chain(constants.iter()) {
                let need = over(&self.held);
                if need == 0 {
                    break;
                }
                let (freed, _) = step.let_go(need);
                let_go |= freed > 0;
                self.held.fetch_sub(freed, Ordering::Relaxed);
            }
        }
        let need = over(&self.held);
        if need > 0 {
            let (freed, _) = current.let_go(need);
            let_go |= freed > 0;
            self.held.fetch_sub(freed, Ordering::Relaxed);
        }
        if let_go && !self.budget_said.swap(true, Ordering::Relaxed) {
            self.events.emit(&Event::FlightBudgetReached {
                budget_bytes: budget,
                steps: self.settings.steps,
                step: current.iteration,
            });
        }
    }

    /// Records that `at` went non-finite in step `rec`; fires the recorder when `fire`.
    pub(crate) fn saw_nonfinite(
        &self,
        rec: &StepRecord,
        (at, order): (&NonFiniteAt, record::Order),
        fire: Option<&'static str>,
    ) {
        let mut r = rec.lock();
        // Earlier in report order wins, also over one seen before it (a deferred copy's
        // output is checked when the step ends).
        let earlier = r.first_nonfinite.is_none() || order < r.first_at;
        if earlier {
            r.first_nonfinite = Some(at.clone());
            r.first_at = order;
        }
        let output_fired = matches!(r.fired, Some(Fired::Output { .. }));
        if let Some(kind) = fire
            && (r.fired.is_none() || (output_fired && earlier))
        {
            r.fired = Some(Fired::Output {
                kind,
                at: at.clone(),
            });
        }
    }

    /// Arms a user trigger: it fires when the current step ends (or at close).
    pub(crate) fn arm(&self, reason: &str) {
        let mut u = self.user.lock().unwrap_or_else(|e| e.into_inner());
        if u.is_none() {
            *u = Some(reason.to_owned());
        }
    }

    fn take_user(&self) -> Option<Fired> {
        self.user
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .map(|reason| Fired::User { reason })
    }

    /// A step ends (its deferred device copies landed): kept in the ring (the oldest step
    /// leaving it, its buffers kept as spares), or, when it (or the user) fired, handed with
    /// the ring to a write on its own thread, so the producer goes on at once. Under
    /// `on_nonfinite: stop` an output's trigger is written here instead: the runtime is
    /// stopping, and its files are on disk before the error reaches it.
    pub(crate) fn end_step(&self, s: &Arc<Shared>, rec: Arc<StepRecord>) {
        let fired = rec.lock().fired.take().or_else(|| self.take_user());
        match fired {
            Some(f) => {
                let stopping = s.plan.on_nonfinite == crate::config::NonFinitePolicy::Stop
                    && matches!(f, Fired::Output { .. });
                self.fire(s, Some(rec), f, !stopping)
            }
            None => self.keep(rec),
        }
    }

    /// The Dumper closes: the write in progress finishes, and a user trigger still armed
    /// writes the ring (here, before the writer stops).
    pub(crate) fn close(&self, s: &Arc<Shared>) {
        self.wait_write();
        if let Some(f) = self.take_user() {
            self.fire(s, None, f, false);
        }
    }

    /// Waits for the trigger write in progress, if any.
    pub(crate) fn wait_write(&self) {
        let h = self
            .write_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(h) = h {
            // A panic in the write is not the runtime's: its files are whole or absent.
            let _ = h.join();
        }
    }

    fn keep(&self, rec: Arc<StepRecord>) {
        let old = {
            let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
            ring.push_back(rec);
            if ring.len() > self.settings.steps as usize {
                ring.pop_front()
            } else {
                None
            }
        };
        if let Some(old) = old {
            self.recycle(&old);
        }
    }

    /// Moves the buffers of a step leaving the ring to the spares (still counted as held).
    fn recycle(&self, old: &StepRecord) {
        let mut r = old.lock();
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        for e in r.entries.drain(..) {
            if let Held::Npy(HeldNpy { bytes: Some(b), .. }) = e {
                spare.entry(b.capacity()).or_default().push(b);
            }
        }
        r.bytes = 0;
    }

    /// A trigger fired: writes the ring and `current` (unless `max_triggers` have written),
    /// then `trigger.json`; the ring starts again empty. With `background` the write runs on
    /// a thread of its own (one at a time: an earlier trigger's write finishes first), else
    /// here (or here too when no thread can be started).
    fn fire(
        &self,
        s: &Arc<Shared>,
        current: Option<Arc<StepRecord>>,
        fired: Fired,
        background: bool,
    ) {
        self.wait_write();
        let step = current
            .as_ref()
            .map(|c| c.iteration)
            .or_else(|| {
                self.ring
                    .lock()
                    .ok()
                    .and_then(|r| r.back().map(|c| c.iteration))
            })
            .unwrap_or(0);
        if !self.may_write() {
            if !self.exhausted_said.swap(true, Ordering::Relaxed) {
                self.events.emit(&Event::FlightTriggersExhausted {
                    max_triggers: self.settings.max_triggers,
                    kind: fired.kind(),
                    step,
                });
            }
            if let Some(c) = current {
                self.keep(c);
            }
            return;
        }
        let n = self.fired.fetch_add(1, Ordering::Relaxed) + 1;
        let mut steps: Vec<Arc<StepRecord>> = self
            .ring
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        steps.extend(current);
        let job = TriggerWrite {
            constants: self.all_constants(),
            steps,
            fired,
            n,
        };
        if !background {
            return job.run(self, &s.out);
        }
        // Handed to the thread through a slot, so that it can be taken back and written here
        // when no thread can be started.
        let slot = Arc::new(Mutex::new(Some(job)));
        let (shared, theirs) = (Arc::clone(s), Arc::clone(&slot));
        let spawned = std::thread::Builder::new()
            .name("opdump-trigger".into())
            .spawn(move || {
                let job = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let (Some(job), Some(r)) = (job, &shared.recorder) {
                    job.run(r, &shared.out);
                }
            });
        match spawned {
            Ok(h) => *self.write_thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(h),
            Err(_) => {
                let job = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(job) = job {
                    job.run(self, &s.out);
                }
            }
        }
    }
}

/// One trigger's write: the held constants and steps (oldest first), what fired, its number.
struct TriggerWrite {
    constants: Vec<Arc<StepRecord>>,
    steps: Vec<Arc<StepRecord>>,
    fired: Fired,
    n: u32,
}

impl TriggerWrite {
    fn run(self, r: &Recorder, out: &Out) {
        let _one = r.writing.lock().unwrap_or_else(|e| e.into_inner());
        let freed = write::write(out, r, (&self.constants, &self.steps), &self.fired, self.n);
        r.held
            .fetch_sub(freed.min(r.held_bytes()), Ordering::Relaxed);
    }
}
