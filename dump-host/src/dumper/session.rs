//! msprobe's session API on the [`Dumper`]: [`start`](Dumper::start) and
//! [`stop`](Dumper::stop) bound the region that is dumped (outside it every kernel is a
//! rejected kernel: one atomic load), [`save`](Dumper::save) dumps one named tensor into the
//! current step, and [`step`](Dumper::step) ends the step the saves went into. A [`Session`]
//! handle does the same from code that cannot reach the Dumper (a candle forward running
//! inside `Tracer::step`, a thread).
//!
//! ```
//! use std::collections::HashMap;
//! use dump_host::{DumpOptions, Dumper, TensorRef};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = std::env::temp_dir().join(format!("opdump-doc-session-{}", std::process::id()));
//! let config = format!(r#"{{"task": "statistics", "dump_path": "{}", "level": "L1"}}"#,
//!                      root.display());
//! let mut dumper = Dumper::builder()
//!     .env(&HashMap::<String, String>::new())
//!     .options(DumpOptions::default())
//!     .open_json(config)?;
//! let x = [1.0f32, 2.0];
//! for _ in 0..2 {
//!     dumper.stop(); // the data pipeline: not dumped
//!     let step = dumper.begin_step(); // what an adapter does for each run
//!     assert!(step.kernel("Cast", "Default/Cast-op0").is_none()); // rejected
//!     dumper.start(); // the region of interest
//!     if let Some(k) = step.kernel("Relu", "Default/Relu-op0") {
//!         k.output(0, TensorRef::from_slice(&[2], &x))?;
//!     }
//!     step.finish()?;
//!     dumper.save("loss", TensorRef::from_slice(&[1], &[0.5f32]))?;
//!     dumper.step()?; // ends the step the save went into
//! }
//! dumper.close()?;
//! let doc: serde_json::Value =
//!     serde_json::from_slice(&std::fs::read(root.join("step1/rank0/dump.json"))?)?;
//! let calls: Vec<_> = doc["data"].as_object().unwrap().keys().cloned().collect();
//! assert_eq!(calls, ["Functional.Relu.0.forward", "Functional.loss.0.forward"]);
//! # std::fs::remove_dir_all(&root)?;
//! # Ok(())
//! # }
//! ```

use std::sync::{Arc, Mutex};

use super::{
    Dumper, Step, TensorRef,
    msprobe::{StepDoc, StepDocs},
    out::Out,
    plan::DumpPlan,
    shared::Shared,
};
use crate::Error;

/// The part of a Dumper that knows where saves go: the step most recently begun (or the one
/// [`Dumper::step`] moved to), and the session's own [`Step`] of that number once a save
/// needed it. Owned by the [`Dumper`] and its [`Session`] handles (never by the state its
/// steps share: it holds a step itself).
#[derive(Default)]
pub(crate) struct SessionStep {
    current: Mutex<Current>,
}

#[derive(Default)]
struct Current {
    graph: u32,
    iteration: u64,
    active: bool,
    step: Option<Step>,
    /// msprobe's layout: the session holds the current step's document open, so a save after
    /// the adapter's step finished appends to the same dump.json.
    doc: Option<Arc<Mutex<StepDoc>>>,
}

/// A handle on a Dumper's session (`start`, `stop`, `save`), `Clone + Send + Sync`: for code
/// that runs while the Dumper is borrowed by an adapter. Does nothing for a disabled Dumper.
#[derive(Clone, Default)]
pub struct Session {
    shared: Option<Arc<Shared>>,
    /// The Dumper's session step.
    step: Arc<SessionStep>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("enabled", &self.shared.is_some())
            .field("recording", &self.is_recording())
            .finish()
    }
}

impl Session {
    /// Kernels are dumped from now on (the default).
    pub fn start(&self) {
        if let Some(s) = &self.shared {
            s.state.set_recording(true);
        }
    }

    /// Kernels are rejected from now on, until [`start`](Session::start).
    pub fn stop(&self) {
        if let Some(s) = &self.shared {
            s.state.set_recording(false);
        }
    }

    /// Whether kernels are dumped now (`false` for a disabled Dumper).
    pub fn is_recording(&self) -> bool {
        self.shared.as_ref().is_some_and(|s| s.state.is_recording())
    }

    /// Dumps `t` under `name` into the current step (see [`Dumper::save`]).
    pub fn save(&self, name: &str, t: TensorRef<'_>) -> Result<(), Error> {
        match &self.shared {
            Some(s) => self.step.save(
                |graph, iteration, active| Step::new(Some(Arc::clone(s)), graph, iteration, active),
                name,
                t,
            ),
            None => Ok(()),
        }
    }
}

impl SessionStep {
    /// Dumps `t` as output 0 of a kernel named `name` (op type `name`) in the session's step,
    /// made by `new_step` (graph, iteration, active) at the first save.
    fn save(
        &self,
        new_step: impl FnOnce(u32, u64, bool) -> Step,
        name: &str,
        t: TensorRef<'_>,
    ) -> Result<(), Error> {
        let mut st = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let (graph, iteration, active) = (st.graph, st.iteration, st.active);
        let step = st
            .step
            .get_or_insert_with(|| new_step(graph, iteration, active));
        match step.kernel(name, name) {
            Some(k) => {
                k.output(0, t)?;
                k.finish()
            }
            None => Ok(()),
        }
    }

    /// Saves go to step `iteration` of `graph` from now on; the session's step of the
    /// previous number (if a save made one) is finished, and its document (of `docs`)
    /// released (closed when no [`Step`] of that number is left).
    pub(crate) fn moves_to(
        &self,
        docs: &StepDocs,
        (plan, out): (&DumpPlan, &Out),
        (graph, iteration, active): (u32, u64, bool),
    ) {
        let doc = (active && plan.msprobe.is_some()).then(|| docs.get(iteration));
        let (old_step, old_doc, old_iteration) = {
            let mut st = self.current.lock().unwrap_or_else(|e| e.into_inner());
            let old_iteration = st.iteration;
            st.graph = graph;
            st.iteration = iteration;
            st.active = active;
            (
                st.step.take(),
                std::mem::replace(&mut st.doc, doc),
                old_iteration,
            )
        };
        // Write failures stay in the writer's log: returned by the next Step::finish,
        // Dumper::step or close.
        drop(old_step);
        if let Some(d) = old_doc {
            docs.release((plan, out), old_iteration, d);
        }
    }

    /// At close: finishes the session's step and releases its document.
    pub(crate) fn end(&self, docs: &StepDocs, (plan, out): (&DumpPlan, &Out)) {
        let (step, doc, iteration) = {
            let mut st = self.current.lock().unwrap_or_else(|e| e.into_inner());
            (st.step.take(), st.doc.take(), st.iteration)
        };
        drop(step);
        if let Some(d) = doc {
            docs.release((plan, out), iteration, d);
        }
    }

    /// Finishes the session's step (if a save made one); its result.
    pub(crate) fn end_step(&self) -> Result<(), Error> {
        let step = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .step
            .take();
        match step {
            Some(step) => step.finish(),
            None => Ok(()),
        }
    }
}

impl Dumper {
    /// Saves go to step `iteration` of the current graph from now on (see
    /// [`SessionStep::moves_to`]).
    pub(super) fn session_moves_to(&self, iteration: u64, active: bool) {
        if let Some(s) = &self.shared {
            let at = (self.graph, iteration, active);
            self.session.moves_to(&s.docs, (&s.plan, &s.out), at);
        }
    }

    /// Kernels are dumped from now on (the default; msprobe's `debugger.start()`).
    pub fn start(&self) {
        self.session().start();
    }

    /// Every kernel is rejected from now on, until [`start`](Dumper::start) (msprobe's
    /// `debugger.stop()`): [`Step::kernel`] answers `None` after one atomic load, and
    /// [`save`](Dumper::save) and [`Step::parameter`] write nothing.
    pub fn stop(&self) {
        self.session().stop();
    }

    /// A handle to start, stop and save from code that cannot reach the Dumper (a forward
    /// running inside an adapter that borrows it, another thread).
    pub fn session(&self) -> Session {
        Session {
            shared: self.shared.clone(),
            step: Arc::clone(&self.session),
        }
    }

    /// Dumps `t` under `name` (msprobe's `debugger.save(tensor, name)`): output 0 of a
    /// kernel named `name` of op type `name` (`Functional.{name}.{n}.forward` in msprobe's
    /// layout), in the step most recently begun, or the step [`step`](Dumper::step) moved to.
    /// Subject to [`start`](Dumper::start) / [`stop`](Dumper::stop), the config's steps and
    /// its kernel filter like any kernel.
    pub fn save(&mut self, name: &str, t: TensorRef<'_>) -> Result<(), Error> {
        self.session().save(name, t)
    }

    /// Ends the step saves went into (msprobe's `debugger.step()`): finishes it (its
    /// dump.json complete, construct.json and stack.json written) and returns the write
    /// failures seen so far. When no step was begun since the last call (a program that only
    /// saves), the step counter moves on; steps begun with [`begin_step`](Dumper::begin_step)
    /// have moved it already.
    pub fn step(&mut self) -> Result<(), Error> {
        let Some(s) = self.shared.clone() else {
            return Ok(());
        };
        let ended = self.session.end_step();
        if !self.begun_since_step {
            self.next_step += 1;
        }
        self.begun_since_step = false;
        self.session_moves_to(self.next_step, self.step_active(self.next_step));
        ended?;
        s.out.files.take_errors()
    }
}

#[cfg(test)]
mod tests;
