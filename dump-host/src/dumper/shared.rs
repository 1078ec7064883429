//! [`Shared`]: the state of an enabled Dumper — the plan and the parts (see the
//! [module docs](super)) — held by the [`Dumper`](super::Dumper), its
//! [`Step`](super::Step)s, its [`Session`](super::Session) handles and its
//! [`TriggerHandle`](super::TriggerHandle)s.

use std::sync::Arc;

use dump_npy::WriteOptions;
use dump_stats::engine::Engine;

use super::{DumpPlan, emit, flight, metadata, msprobe, out, row_sink, state, tensor_files, tree};
use crate::{Error, diag::EventSink, layout::open_layout, writer::Writer};

/// The state of an enabled Dumper, shared with its steps, session handles and trigger
/// handles: the plan and the parts.
pub(crate) struct Shared {
    pub(crate) plan: DumpPlan,
    /// Where everything goes: tree, tables, tensor files, metadata.
    pub(crate) out: out::Out,
    /// Host statistics.
    pub(crate) engine: Engine,
    /// Closed, recording, overflow count, watching.
    pub(crate) state: state::DumpState,
    /// The flight recorder (`opdump.flight_recorder`): steps held in memory, written on a
    /// trigger.
    pub(crate) recorder: Option<flight::Recorder>,
    /// msprobe's per-step documents.
    pub(crate) docs: msprobe::StepDocs,
    /// Where warnings go (never printed directly).
    pub(crate) events: EventSink,
    /// Watcher mode (`None`: off).
    pub(crate) watcher: Option<super::watcher::Watcher>,
}

impl Shared {
    /// The parts of a dump of `plan` (whose root was checked), warnings to `events`; writes
    /// `.dump_metadata/` unless a flight recorder defers it to its first trigger.
    pub(crate) fn start(plan: DumpPlan, events: EventSink) -> Self {
        let layout = open_layout(&plan);
        let header = layout.stat_header(&plan.categories);
        let writer = Writer::with_events(&plan.writer, events.clone());
        let errors = writer.error_log();
        let out = out::Out {
            tree: tree::OutputTree::new(layout, Arc::clone(&errors)),
            tables: row_sink::RowSink::new(header, plan.categories.clone(), Arc::clone(&errors)),
            meta: metadata::Metadata::new(
                plan.config_bytes.clone(),
                (plan.device.as_str(), &plan.ms_version),
                errors,
            ),
            files: tensor_files::TensorFiles::new(
                writer,
                plan.disk_budget_bytes,
                WriteOptions::new().with_bf16(plan.bf16),
                events.clone(),
            ),
        };
        let watching =
            plan.flight.is_some() || plan.on_nonfinite != crate::config::NonFinitePolicy::Continue;
        let watcher = plan
            .watcher
            .clone()
            .map(|w| super::watcher::Watcher::new(w, out.tree.layout()));
        let shared = Shared {
            watcher,
            out,
            engine: Engine::with_available_parallelism(),
            state: state::DumpState::new(watching),
            recorder: plan
                .flight
                .map(|settings| flight::Recorder::new(settings, events.clone())),
            docs: msprobe::StepDocs::new(plan.flight.is_some()),
            events,
            plan,
        };
        // CANN's GE layout holds dump files only.
        if shared.recorder.is_none() && shared.plan.ge.is_none() {
            // The flight recorder writes it with its first trigger.
            shared.out.meta.write_metadata(&shared.out.tree);
        }
        shared
    }

    /// One tensor's way out (see [`emit::Emit`]).
    pub(crate) fn emit(&self) -> emit::Emit<'_> {
        emit::Emit {
            plan: &self.plan,
            out: &self.out,
            engine: &self.engine,
            recorder: self.recorder.as_ref(),
            watching: self.state.watching(),
        }
    }

    /// Releases a [`Step`](super::Step)'s hold on msprobe's document of step `iteration`.
    pub(crate) fn release_step_doc(
        &self,
        iteration: u64,
        doc: Arc<std::sync::Mutex<msprobe::StepDoc>>,
    ) {
        self.docs.release((&self.plan, &self.out), iteration, doc);
    }

    /// Arms a user trigger of the flight recorder (see
    /// [`TriggerHandle::trigger`](super::TriggerHandle::trigger)).
    pub(crate) fn arm_trigger(&self, reason: &str) -> bool {
        match &self.recorder {
            Some(r) if !self.state.is_closed() => {
                r.arm(reason);
                true
            }
            _ => false,
        }
    }

    /// Closes the dump: later kernel calls dump nothing, the last rows are appended, and the
    /// writer is flushed (its failures returned); the tables and copy buffers are let go.
    pub(crate) fn close(&self) -> Result<(), Error> {
        self.state.close();
        // Rows are pushed by the calling threads only (never by writer jobs), so the batch is
        // complete here; its failures are taken with the writer's below.
        self.out.flush_rows(true);
        let flushed = self.out.files.flush();
        self.out.tables.close();
        self.out.files.release_buffers();
        flushed
    }
}
