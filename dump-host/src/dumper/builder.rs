//! [`DumperBuilder`]: the one way to open a [`Dumper`] with anything but the defaults.

use std::path::Path;

use super::{DumpOptions, DumpPlan, Dumper};
use crate::{
    Error,
    config::{Env, ProcessEnv, env::dump_config_path},
    diag::{Event, EventSink},
};

/// Opens a [`Dumper`]. Every setting is optional; the last call names where the config comes
/// from and opens it:
///
/// - [`open_env`](DumperBuilder::open_env): the file named by `MINDSPORE_DUMP_CONFIG` (a
///   disabled Dumper when it is unset or empty), as MindSpore reads it;
/// - [`open_file`](DumperBuilder::open_file): a config file;
/// - [`open_json`](DumperBuilder::open_json): config text (its bytes are also copied into
///   `.dump_metadata/data_dump.json`);
/// - [`open_plan`](DumperBuilder::open_plan): a resolved [`DumpPlan`].
///
/// The environment (for `MINDSPORE_DUMP_CONFIG`, `MS_DIAGNOSTIC_DATA_PATH`, the rank and the
/// `OPDUMP_*` options) is the process's unless [`env`](DumperBuilder::env) gives another; the
/// options are [`DumpOptions::from_env`] unless [`options`](DumperBuilder::options) gives them;
/// events go to stderr unless [`on_event`](DumperBuilder::on_event) or
/// [`events`](DumperBuilder::events) routes them elsewhere.
///
/// ```
/// use std::collections::HashMap;
/// use dump_host::{DumpOptions, Dumper};
///
/// # fn main() -> Result<(), dump_host::Error> {
/// let no_env: HashMap<String, String> = HashMap::new();
/// // No MINDSPORE_DUMP_CONFIG in this environment: a disabled Dumper.
/// let d = Dumper::builder().env(&no_env).options(DumpOptions::default()).open_env()?;
/// assert!(!d.is_enabled());
/// # Ok(())
/// # }
/// ```
#[must_use = "a builder does nothing until one of its `open_*` calls"]
pub struct DumperBuilder<'e> {
    env: Option<&'e dyn Env>,
    options: Option<DumpOptions>,
    events: Option<EventSink>,
    flight: Option<crate::config::FlightRecorder>,
    on_nonfinite: Option<crate::config::NonFinitePolicy>,
    watcher: Option<crate::config::WatcherConfig>,
}

impl std::fmt::Debug for DumperBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DumperBuilder")
            .field("env", &self.env.map(|_| ".."))
            .field("options", &self.options)
            .field("events", &self.events)
            .finish()
    }
}

impl Dumper {
    /// A [`DumperBuilder`] with every setting at its default.
    pub fn builder() -> DumperBuilder<'static> {
        DumperBuilder {
            env: None,
            options: None,
            events: None,
            flight: None,
            on_nonfinite: None,
            watcher: None,
        }
    }
}

impl<'e> DumperBuilder<'e> {
    /// Reads environment variables from `env` instead of the process environment.
    pub fn env<'f>(self, env: &'f dyn Env) -> DumperBuilder<'f> {
        DumperBuilder {
            env: Some(env),
            options: self.options,
            events: self.events,
            flight: self.flight,
            on_nonfinite: self.on_nonfinite,
            watcher: self.watcher,
        }
    }

    /// Runs a flight recorder (overriding the config's `opdump.flight_recorder`): the last
    /// `steps` steps are held in memory (tensors within `budget_bytes`) and written only when
    /// a trigger fires; see docs/flight-recorder.md. The non-finite policy becomes `record`
    /// unless the config or [`on_nonfinite`](DumperBuilder::on_nonfinite) says otherwise.
    pub fn flight_recorder(mut self, recorder: crate::config::FlightRecorder) -> Self {
        self.flight = Some(recorder);
        self
    }

    /// What a NaN or ±Inf in a watched output does (overriding the config's
    /// `opdump.on_nonfinite`): [`Stop`](crate::config::NonFinitePolicy::Stop) makes the
    /// kernel call that reported it return [`Error::NonFinite`].
    pub fn on_nonfinite(mut self, policy: crate::config::NonFinitePolicy) -> Self {
        self.on_nonfinite = Some(policy);
        self
    }

    /// Runs watcher mode (overriding the config's `opdump.watcher`): the outputs of
    /// `watcher`'s nodes are summarised again after every kernel (of its `layer`), and a
    /// change no kernel wrote is reported as memory corruption; see docs/watcher.md and
    /// [`Step::kernel_ran`](crate::Step::kernel_ran).
    pub fn watcher(mut self, watcher: crate::config::WatcherConfig) -> Self {
        self.watcher = Some(watcher);
        self
    }

    /// Uses `options` instead of [`DumpOptions::from_env`].
    pub fn options(mut self, options: DumpOptions) -> Self {
        self.options = Some(options);
        self
    }

    /// Delivers events to `sink` (default: one line each to stderr, see [`EventSink`]).
    pub fn events(mut self, sink: EventSink) -> Self {
        self.events = Some(sink);
        self
    }

    /// Delivers events to `f` (see [`EventSink::new`]).
    pub fn on_event(self, f: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.events(EventSink::new(f))
    }

    /// Opens the config file named by `MINDSPORE_DUMP_CONFIG` (a disabled Dumper when the
    /// variable is unset or empty): the real path, which must end in `.json`, as MindSpore
    /// resolves it.
    pub fn open_env(self) -> Result<Dumper, Error> {
        let (env, opts, events) = self.settings()?;
        match dump_config_path(env)? {
            None => Ok(Dumper::disabled()),
            Some(p) => Dumper::from_planned(DumpPlan::load(&p, env, &opts)?, events),
        }
    }

    /// Reads and validates the config file at `path` (through [`DumpPlan::load`], as
    /// `opdump check` does) and starts the Dumper: writes `.dump_metadata/`, starts the
    /// writer threads.
    pub fn open_file(self, path: impl AsRef<Path>) -> Result<Dumper, Error> {
        let (env, opts, events) = self.settings()?;
        Dumper::from_planned(DumpPlan::load(path.as_ref(), env, &opts)?, events)
    }

    /// Reads and validates config text (through [`DumpPlan::from_json`]: invalid UTF-8 is a
    /// config error; the bytes are also copied into `.dump_metadata/data_dump.json`) and
    /// starts the Dumper.
    pub fn open_json(self, json: impl Into<Vec<u8>>) -> Result<Dumper, Error> {
        let (env, opts, events) = self.settings()?;
        Dumper::from_planned(DumpPlan::from_json(json.into(), env, &opts)?, events)
    }

    /// Starts a Dumper on a resolved plan. The plan already holds the writer settings and
    /// the disk budget: the options and the environment are not used.
    pub fn open_plan(self, mut plan: DumpPlan) -> Result<Dumper, Error> {
        if let Some(f) = self.flight {
            plan.flight = Some(f);
            if self.on_nonfinite.is_none()
                && plan.on_nonfinite == crate::config::NonFinitePolicy::Continue
            {
                plan.on_nonfinite = crate::config::NonFinitePolicy::Record;
            }
        }
        if let Some(p) = self.on_nonfinite {
            plan.on_nonfinite = p;
        }
        if let Some(w) = self.watcher {
            plan.watcher = Some(w);
        }
        Dumper::launch(plan, self.events.unwrap_or_default())
    }

    /// The environment, the options and the event sink.
    fn settings(self) -> Result<(&'e dyn Env, DumpOptions, EventSink), Error> {
        let env = self.env.unwrap_or(&ProcessEnv);
        let mut opts = match self.options {
            Some(o) => o,
            None => DumpOptions::from_env(env)?,
        };
        opts.flight_recorder = self.flight.or(opts.flight_recorder);
        opts.on_nonfinite = self.on_nonfinite.or(opts.on_nonfinite);
        opts.watcher = self.watcher.or(opts.watcher);
        Ok((env, opts, self.events.unwrap_or_default()))
    }
}
