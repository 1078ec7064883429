//! MindSpore `data_dump.json`: parsing, validation that reports every problem at once, and the
//! matching it drives (steps via [`dump_core::iteration::IterationSpec`], kernels via
//! [`KernelFilter`]).
//!
//! The text is parsed into a [`serde_json::Value`] and checked by hand, key by key, in
//! MindSpore 2.10's order, so that every problem is reported with its JSON path and the first
//! error is the one MindSpore would raise (with its exact text in the message). Warnings cover
//! what MindSpore accepts but what probably surprises: never-matching iteration segments,
//! unknown keys (with "did you mean"), coerced values, dump_mode 1 without kernels, and so on.
//!
//! ```
//! use std::collections::HashMap;
//! use dump_host::config::{DumpConfig, ParseOptions, Device};
//!
//! let text = r#"{
//!   "common_dump_settings": {
//!     "dump_mode": 0, "path": "/tmp/dump", "net_name": "Net", "iteration": "0|2",
//!     "input_output": 0, "kernels": [], "support_device": [0]
//!   },
//!   "e2e_dump_settings": {"enable": true}
//! }"#;
//! let env = HashMap::<String, String>::new();
//! let ok = DumpConfig::from_json_str(text, &ParseOptions::new(Device::Cpu, &env)).unwrap();
//! assert_eq!(ok.config.saved_data.as_str(), "tensor");
//! assert!(ok.config.iteration_spec().matches(2));
//! assert!(ok.warnings.is_empty());
//!
//! // Every error at once, each with its path; the first is MindSpore's.
//! let bad = text.replace("\"0|2\"", "\"a|b\"").replace("\"Net\"", "\"N/et\"");
//! let err = DumpConfig::from_json_str(&bad, &ParseOptions::new(Device::Cpu, &env)).unwrap_err();
//! let dump_host::Error::Config(d) = err else { panic!() };
//! let paths: Vec<_> = d.errors().map(|e| e.path.as_str()).collect();
//! assert_eq!(paths, ["common_dump_settings.net_name", "common_dump_settings.iteration"]);
//! ```

pub mod acl;
mod categories;
mod common;
mod diagnostics;
mod dialect;
mod e2e;
mod effective;
pub mod env;
mod file;
mod kernels;
mod msprobe;
mod opdump;
mod read;
mod rules;
mod suggest;
pub mod torchair;
mod types;
mod watcher;

use std::path::Path;

use serde_json::Value;

use dump_core::iteration::IterationSpec;

pub use categories::{DEFAULT_CATEGORIES, DEVICE_CATEGORIES, STATISTIC_CATEGORIES};
pub use common::COMMON_KEYS;
pub use diagnostics::{Diagnostic, Diagnostics, Severity};
pub use dialect::ConfigDialect;
pub use e2e::{E2E_KEYS, E2eSettings};
pub use env::{Env, ProcessEnv};
pub use file::{MAX_CONFIG_BYTES, read_config_file};
pub use kernels::{BadRegex, EntryKind, KernelFilter, classify, normalize_entry, type_part};
pub use msprobe::{
    DataMode, MSPROBE_TASKS, MSPROBE_TOP_KEYS, MsprobeConfig, MsprobeLevel, MsprobeTask,
    MsprobeValidated, SummaryMode, is_api_name, is_module_name,
};
pub use opdump::{
    FLIGHT_RECORDER_KEYS, FlightRecorder, MAX_FLIGHT_STEPS, NonFinitePolicy, OPDUMP_KEYS,
    OpdumpSettings, Watch,
};
pub use suggest::{did_you_mean, edit_distance};
pub use types::{
    Device, DumpMode, FileFormat, InputOutput, OpDebugMode, PrecisionMode, SavedData, StatCalcMode,
    UnknownDevice,
};
pub(crate) use watcher::names as watcher_names;
pub use watcher::{CorruptionPolicy, WATCHER_KEYS, WatchItem, WatcherConfig};

use crate::Error;
use read::{describe, warn_unknown};

/// What parsing depends on besides the text: the device and the environment
/// (`MS_DIAGNOSTIC_DATA_PATH`).
#[derive(Clone, Copy)]
pub struct ParseOptions<'a> {
    /// The device the config is checked for.
    pub device: Device,
    /// Where environment variables are read.
    pub env: &'a dyn Env,
}

impl<'a> ParseOptions<'a> {
    /// Options for `device` reading `env`.
    pub fn new(device: Device, env: &'a dyn Env) -> Self {
        ParseOptions { device, env }
    }
}

/// A valid config with the warnings found while reading it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validated {
    /// The effective config (defaults filled in, coercions applied).
    pub config: DumpConfig,
    /// Warnings only (a config with errors is never returned).
    pub warnings: Diagnostics,
}

/// A validated `data_dump.json`, every default filled in and MindSpore's coercions applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpConfig {
    /// The device it was validated for.
    pub device: Device,
    /// `dump_mode` (after op_debug_mode's coercion).
    pub dump_mode: DumpMode,
    /// The dump root: `path`, or `$MS_DIAGNOSTIC_DATA_PATH/debug_dump`. Absolute, only
    /// `[A-Za-z0-9_/-]`.
    pub path: String,
    /// `net_name`.
    pub net_name: String,
    /// `iteration` text, valid for [`IterationSpec::parse`] (see [`DumpConfig::iteration_spec`]).
    pub iteration: String,
    /// `input_output`.
    pub input_output: InputOutput,
    /// `kernels`, normalised (see [`normalize_entry`]), without empty entries and duplicates.
    pub kernels: Vec<String>,
    /// `support_device`, converted to ids, without duplicates (ignored on CPU).
    pub support_device: Vec<u32>,
    /// `op_debug_mode` (1 and 2 coerced to 3).
    pub op_debug_mode: OpDebugMode,
    /// `overflow_number` (0 = unlimited; only with op_debug_mode 3).
    pub overflow_number: u32,
    /// `saved_data`.
    pub saved_data: SavedData,
    /// `initial_iteration`: the first step number.
    pub initial_iteration: u32,
    /// `statistic_category`, checked, duplicates removed (default `max, min, l2norm`). Kept
    /// as strings; the dump-stats crate turns them into columns.
    pub statistic_category: Vec<String>,
    /// `file_format` (Ascend without e2e settings only; default `bin`).
    pub file_format: FileFormat,
    /// Whether e2e (kernel-by-kernel) dump is in force: the e2e section is present, or the
    /// device is CPU/GPU (where MindSpore forces it).
    pub e2e_enabled: bool,
    /// `e2e_dump_settings`.
    pub e2e: E2eSettings,
    /// The `opdump` section (MindSpore ignores it): flight recorder, non-finite policy.
    pub opdump: OpdumpSettings,
}

impl DumpConfig {
    /// Parses and validates a config text. On failure the error is [`Error::Config`] holding
    /// every error and warning found.
    pub fn from_json_str(text: &str, opts: &ParseOptions<'_>) -> Result<Validated, Error> {
        let mut d = Diagnostics::new();
        match parse_document(text, opts, &mut d) {
            Some(config) if !d.has_errors() => Ok(Validated {
                config,
                warnings: d,
            }),
            _ => Err(Error::Config(d)),
        }
    }

    /// Validates a config's bytes: they must be UTF-8 text of at most [`MAX_CONFIG_BYTES`]
    /// (both a config error, like every other problem of the text). The Dumper and
    /// `opdump check` read configs through this function.
    pub fn from_json_bytes(bytes: &[u8], opts: &ParseOptions<'_>) -> Result<Validated, Error> {
        let mut d = Diagnostics::new();
        if bytes.len() as u64 > MAX_CONFIG_BYTES {
            d.error("", file::too_large(bytes.len() as u64));
            return Err(Error::Config(d));
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => Self::from_json_str(text, opts),
            Err(e) => {
                d.error(
                    "",
                    format!(
                        "the dump config is not UTF-8 text (invalid byte at offset {}); allowed: \
                         JSON text in UTF-8",
                        e.valid_up_to()
                    ),
                );
                Err(Error::Config(d))
            }
        }
    }

    /// Reads ([`read_config_file`]) and validates ([`from_json_bytes`](Self::from_json_bytes))
    /// a config file.
    pub fn load(path: &Path, opts: &ParseOptions<'_>) -> Result<Validated, Error> {
        Self::from_json_bytes(&read_config_file(path)?, opts)
    }

    /// The config named by `MINDSPORE_DUMP_CONFIG` in `opts.env`, or `None` when that variable
    /// is unset or empty (dump disabled).
    pub fn from_env(opts: &ParseOptions<'_>) -> Result<Option<Validated>, Error> {
        match env::dump_config_path(opts.env)? {
            None => Ok(None),
            Some(p) => Self::load(&p, opts).map(Some),
        }
    }

    /// Whether dumping is enabled on device `device_id`: always on CPU (MindSpore ignores
    /// `support_device` there); elsewhere only for ids listed in `support_device` (MindSpore
    /// silently disables dump otherwise: "Dump is not enabled. device_id:`<id>` not support").
    pub fn supports_device(&self, device_id: u32) -> bool {
        self.device == Device::Cpu || self.support_device.contains(&device_id)
    }

    /// The `iteration` filter.
    pub fn iteration_spec(&self) -> IterationSpec<'_> {
        // Validated at construction; `ALL` only if a caller broke the invariant by hand.
        IterationSpec::parse(&self.iteration).unwrap_or(IterationSpec::ALL)
    }

    /// A fresh kernel filter for this config: everything for dump_mode 0 (and 1 without
    /// entries), the `kernels` entries for dump_mode 1. For dump_mode 2 (Ascend `set_dump`)
    /// only marked kernels are dumped and the config holds no marks: this returns the filter
    /// that selects nothing; build one with [`KernelFilter::marked`] from the runtime's marks
    /// (the Dumper takes them from `DumpOptions::set_dump`).
    pub fn kernel_filter(&self) -> Result<KernelFilter, Error> {
        match self.dump_mode {
            DumpMode::Kernels => KernelFilter::from_entries(&self.kernels).map_err(|bad| {
                let mut d = Diagnostics::new();
                for b in bad {
                    d.error(
                        format!("common_dump_settings.kernels[{}]", b.index),
                        format!("invalid regular expression in {:?}: {}", b.entry, b.message),
                    );
                }
                Error::Config(d)
            }),
            DumpMode::SetDump => Ok(KernelFilter::marked(std::iter::empty::<&str>())),
            DumpMode::All => Ok(KernelFilter::all()),
        }
    }

    /// The effective config as MindSpore JSON, every default filled in (see
    /// [`effective`](DumpConfig::to_effective_json)). Parsing it again gives the same config.
    pub fn to_effective_json(&self) -> Value {
        effective::to_json(self)
    }
}

/// Top-level keys MindSpore reads.
pub const TOP_KEYS: [&str; 2] = ["common_dump_settings", "e2e_dump_settings"];

/// Top-level keys opdump reads: MindSpore's, and its own `opdump` section.
const KNOWN_TOP_KEYS: [&str; 3] = ["common_dump_settings", "e2e_dump_settings", "opdump"];

fn parse_document(text: &str, opts: &ParseOptions<'_>, d: &mut Diagnostics) -> Option<DumpConfig> {
    let doc: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            d.error("", format!("Parse dump json failed, error:{e}"));
            return None;
        }
    };
    let Value::Object(top) = &doc else {
        d.error(
            "",
            format!(
                "Dump config parse failed, the dump config must be a JSON object with \
                 common_dump_settings; got {}",
                describe(&doc)
            ),
        );
        return None;
    };
    let e2e = e2e::parse_e2e(top.get("e2e_dump_settings"), d);
    let e2e_enabled = e2e.present || opts.device != Device::Ascend;
    let common = match top.get("common_dump_settings") {
        None => {
            d.error(
                "common_dump_settings",
                "Check dump json failed, common_dump_settings not found",
            );
            None
        }
        Some(Value::Object(map)) => Some(common::parse_common(
            map,
            opts.device,
            e2e_enabled,
            opts.env,
            d,
        )),
        Some(other) => {
            d.error(
                "common_dump_settings",
                format!(
                    "Dump config parse failed, common_dump_settings should be an object; got {}",
                    describe(other)
                ),
            );
            None
        }
    };
    if top.contains_key("async_dump_settings") {
        d.warn(
            "async_dump_settings",
            "async_dump_settings is a MindSpore 1.x key and is ignored; use e2e_dump_settings",
        );
    }
    let others: serde_json::Map<String, Value> = top
        .iter()
        .filter(|(k, _)| k.as_str() != "async_dump_settings")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    warn_unknown("", &others, &KNOWN_TOP_KEYS, d);
    let own = opdump::parse_opdump(top.get("opdump"), d);
    let mut config = rules::assemble(common?, e2e, opts.device, e2e_enabled, d)?;
    opdump::check(&own, config.op_debug_mode, d);
    config.opdump = own;
    Some(config)
}
