//! [`DumperBuilder`]: the one way to open a [`Dumper`] with anything but the defaults.

use std::path::PathBuf;

use super::{DumpOptions, DumpPlan, Dumper};
use crate::{
    Error,
    config::{Env, ProcessEnv, env::dump_config_path},
    diag::{Event, EventSink},
};

/// Where the builder's config comes from.
#[derive(Debug)]
enum Source {
    /// `MINDSPORE_DUMP_CONFIG` in the environment (disabled when unset or empty).
    Env,
    /// A config file.
    File(PathBuf),
    /// Config text (also copied into `.dump_metadata/data_dump.json`).
    Json(Vec<u8>),
    /// A resolved plan.
    Plan(Box<DumpPlan>),
}

/// Opens a [`Dumper`]: `Dumper::builder().config_file(p).env(&e).options(o).open()`.
///
/// Every setting is optional. The config is the file named by `MINDSPORE_DUMP_CONFIG` unless
/// [`config_file`](DumperBuilder::config_file), [`config_json`](DumperBuilder::config_json) or
/// [`plan`](DumperBuilder::plan) gives one; the environment (for `MINDSPORE_DUMP_CONFIG`,
/// `MS_DIAGNOSTIC_DATA_PATH`, the rank and the `OPDUMP_*` options) is the process's unless
/// [`env`](DumperBuilder::env) gives another; the options are
/// [`DumpOptions::from_env`] unless [`options`](DumperBuilder::options) gives them.
///
/// ```
/// use std::collections::HashMap;
/// use dump_host::{DumpOptions, Dumper};
///
/// # fn main() -> Result<(), dump_host::Error> {
/// let no_env: HashMap<String, String> = HashMap::new();
/// // No MINDSPORE_DUMP_CONFIG in this environment: a disabled Dumper.
/// let d = Dumper::builder().env(&no_env).options(DumpOptions::default()).open()?;
/// assert!(!d.is_enabled());
/// # Ok(())
/// # }
/// ```
#[must_use = "a builder does nothing until `open`"]
pub struct DumperBuilder<'e> {
    source: Source,
    env: Option<&'e dyn Env>,
    options: Option<DumpOptions>,
    events: Option<EventSink>,
}

impl std::fmt::Debug for DumperBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DumperBuilder")
            .field("source", &self.source)
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
            source: Source::Env,
            env: None,
            options: None,
            events: None,
        }
    }
}

impl<'e> DumperBuilder<'e> {
    /// Reads the config from the file at `path` (instead of `MINDSPORE_DUMP_CONFIG`).
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.source = Source::File(path.into());
        self
    }

    /// Uses config text `json` (its bytes are also copied into
    /// `.dump_metadata/data_dump.json`).
    pub fn config_json(mut self, json: impl Into<Vec<u8>>) -> Self {
        self.source = Source::Json(json.into());
        self
    }

    /// Uses a resolved plan. The plan already holds the writer settings and disk budget, so of
    /// the options only the event sink is used.
    pub fn plan(mut self, plan: DumpPlan) -> Self {
        self.source = Source::Plan(Box::new(plan));
        self
    }

    /// Reads environment variables from `env` instead of the process environment.
    pub fn env<'f>(self, env: &'f dyn Env) -> DumperBuilder<'f> {
        DumperBuilder {
            source: self.source,
            env: Some(env),
            options: self.options,
            events: self.events,
        }
    }

    /// Uses `options` instead of [`DumpOptions::from_env`].
    pub fn options(mut self, options: DumpOptions) -> Self {
        self.options = Some(options);
        self
    }

    /// Delivers events to `sink` (overrides [`DumpOptions::events`]).
    pub fn events(mut self, sink: EventSink) -> Self {
        self.events = Some(sink);
        self
    }

    /// Delivers events to `f` (see [`EventSink::new`]).
    pub fn on_event(self, f: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.events(EventSink::new(f))
    }

    /// Reads and validates the config and starts the Dumper (writes `.dump_metadata/`, starts
    /// the writer threads). A disabled Dumper when no config is named.
    pub fn open(self) -> Result<Dumper, Error> {
        let env = self.env.unwrap_or(&ProcessEnv);
        let mut opts = match self.options {
            Some(o) => o,
            None => DumpOptions::from_env(env)?,
        };
        if let Some(sink) = self.events {
            opts.events = sink;
        }
        match self.source {
            Source::Env => match dump_config_path(env)? {
                None => Ok(Dumper::disabled()),
                Some(p) => Dumper::from_config_file_with(&p, env, &opts),
            },
            Source::File(p) => Dumper::from_config_file_with(&p, env, &opts),
            Source::Json(bytes) => Dumper::from_json_with(bytes, env, &opts),
            Source::Plan(plan) => Dumper::start(*plan, opts.events),
        }
    }
}
