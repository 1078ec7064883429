//! msprobe's `config.json` (MindStudio Probe, dynamic mode): the keys opdump honours, checked
//! with msprobe's rules and messages (shared spec peers.md §1), every problem reported at once
//! with its key, the value found and what is allowed.
//!
//! ```
//! use dump_host::config::{MsprobeConfig, MsprobeLevel, MsprobeTask};
//!
//! let text = r#"{"task": "statistics", "dump_path": "/tmp/dump", "rank": [], "step": [0, "2-3"],
//!                "level": "L1", "statistics": {"scope": [], "list": [], "data_mode": ["all"],
//!                "summary_mode": "md5"}}"#;
//! let ok = MsprobeConfig::from_json_str(text).unwrap();
//! assert_eq!(ok.config.task, MsprobeTask::Statistics);
//! assert_eq!(ok.config.level, MsprobeLevel::L1);
//! assert_eq!(ok.config.step, [0, 2, 3]);
//!
//! // Every error at once, each naming its key.
//! let bad = text.replace("\"L1\"", "\"L9\"").replace("\"2-3\"", "\"3-2\"");
//! let dump_host::Error::Config(d) = MsprobeConfig::from_json_str(&bad).unwrap_err() else {
//!     panic!()
//! };
//! let paths: Vec<_> = d.errors().map(|e| e.path.as_str()).collect();
//! assert_eq!(paths, ["step[1]", "level"]);
//! ```

use serde_json::{Map, Value, json};

use super::diagnostics::Diagnostics;
use super::read::{describe, warn_unknown};
use crate::Error;

/// Tasks msprobe knows; opdump writes the first three.
pub const MSPROBE_TASKS: [&str; 11] = [
    "statistics",
    "tensor",
    "overflow_check",
    "free_benchmark",
    "run_ut",
    "acc_check",
    "grad_probe",
    "structure",
    "exception_dump",
    "diff_check",
    "nan_check",
];

/// Top-level keys of msprobe's config.json (26.2.0 and before).
pub const MSPROBE_TOP_KEYS: [&str; 21] = [
    "task",
    "dump_path",
    "rank",
    "step",
    "level",
    "async_dump",
    "precision",
    "enable_dataloader",
    "extra_info",
    "dump_enable",
    "risk_level",
    "custom_op_namespaces",
    "load",
    "is_deterministic",
    "statistics",
    "tensor",
    "overflow_check",
    "free_benchmark",
    "run_ut",
    "acc_check",
    "grad_probe",
];

/// Keys of the task sections opdump reads.
const TASK_KEYS: [&str; 9] = [
    "scope",
    "list",
    "data_mode",
    "summary_mode",
    "file_format",
    "precision",
    "tensor_list",
    "overflow_nums",
    "check_mode",
];

/// Largest rank or step msprobe accepts (exclusive).
const MAX_RANK_STEP: u64 = 1_000_000;

/// msprobe's `task`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsprobeTask {
    /// `statistics`: Max/Min/Mean/Norm (or a CRC-32) per tensor in dump.json.
    Statistics,
    /// `tensor`: the statistics and every tensor as a `.npy` file.
    Tensor,
    /// `overflow_check`: the tensors of APIs whose outputs hold NaN or Inf.
    OverflowCheck,
}

impl MsprobeTask {
    /// msprobe's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            MsprobeTask::Statistics => "statistics",
            MsprobeTask::Tensor => "tensor",
            MsprobeTask::OverflowCheck => "overflow_check",
        }
    }
}

/// msprobe's `level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsprobeLevel {
    /// Modules (candle `Dumped` modules): `Module.{path}.{Class}.forward.{n}`.
    L0,
    /// APIs (operators): `Functional.{op}.{n}.forward`.
    L1,
    /// Both, with `construct.json` giving each call's module.
    Mix,
}

impl MsprobeLevel {
    /// msprobe's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            MsprobeLevel::L0 => "L0",
            MsprobeLevel::L1 => "L1",
            MsprobeLevel::Mix => "mix",
        }
    }

    /// Whether module calls are dumped.
    pub fn modules(self) -> bool {
        self != MsprobeLevel::L1
    }

    /// Whether API (operator) calls are dumped.
    pub fn apis(self) -> bool {
        self != MsprobeLevel::L0
    }
}

/// msprobe's `summary_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummaryMode {
    /// Max, Min, Mean, Norm.
    Statistics,
    /// The four statistics and `md5`: the CRC-32 of the tensor's bytes (as msprobe's dynamic
    /// mode computes it).
    Md5,
    /// msprobe 26's `xor`: no statistics; `md5` holds `0x%016x`, the XOR of the tensor's bytes
    /// as little-endian `u64` words, zero-padded ([`dump_core::hash::xor64`]).
    Xor,
}

impl SummaryMode {
    /// msprobe's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SummaryMode::Statistics => "statistics",
            SummaryMode::Md5 => "md5",
            SummaryMode::Xor => "xor",
        }
    }
}

/// msprobe's `data_mode`, resolved: which sides are dumped (an omitted axis means both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataMode {
    /// Inputs (and a module's parameters).
    pub input: bool,
    /// Outputs.
    pub output: bool,
    /// Forward calls (the only ones a Rust runtime reports).
    pub forward: bool,
    /// Backward calls.
    pub backward: bool,
}

impl DataMode {
    /// `["all"]`.
    pub const ALL: DataMode = DataMode {
        input: true,
        output: true,
        forward: true,
        backward: true,
    };

    /// The values as msprobe writes them.
    pub fn to_list(self) -> Vec<&'static str> {
        if self == DataMode::ALL {
            return vec!["all"];
        }
        let mut v = Vec::new();
        if self.input != self.output {
            v.push(if self.input { "input" } else { "output" });
        }
        if self.forward != self.backward {
            v.push(if self.forward { "forward" } else { "backward" });
        }
        v
    }
}

/// A validated msprobe `config.json`, defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MsprobeConfig {
    /// `task`.
    pub task: MsprobeTask,
    /// `dump_path`, absolute.
    pub dump_path: String,
    /// `rank`: expanded, sorted, without duplicates (`[]`: every rank).
    pub rank: Vec<u32>,
    /// `step`: expanded, sorted, without duplicates (`[]`: every step).
    pub step: Vec<u32>,
    /// `level`.
    pub level: MsprobeLevel,
    /// `scope`: `[]` or `[first, last]` call names.
    pub scope: Vec<String>,
    /// `list`: substrings of the call names (or the runtime's kernel names) to dump.
    pub list: Vec<String>,
    /// `data_mode`.
    pub data_mode: DataMode,
    /// `summary_mode` (statistics task).
    pub summary_mode: SummaryMode,
    /// `async_dump`.
    pub async_dump: bool,
    /// `precision`: `high` (`true`) or `low`.
    pub precision_high: bool,
    /// `overflow_nums` (overflow_check): overflowing calls dumped before stopping, 0 for no
    /// limit (msprobe's -1).
    pub overflow_nums: u32,
    /// opdump's own section, `opdump` (the flight recorder, the non-finite policy and watch,
    /// as in a MindSpore `data_dump.json`; not one of msprobe's keys, so msprobe's own
    /// tools do not read it).
    pub opdump: super::opdump::OpdumpSettings,
}

/// A valid msprobe config with its warnings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MsprobeValidated {
    /// The config.
    pub config: MsprobeConfig,
    /// Warnings only.
    pub warnings: Diagnostics,
}

impl MsprobeConfig {
    /// Parses and validates config text; [`Error::Config`] holds every error and warning.
    pub fn from_json_str(text: &str) -> Result<MsprobeValidated, Error> {
        let mut d = Diagnostics::new();
        match parse(text, &mut d) {
            Some(config) if !d.has_errors() => Ok(MsprobeValidated {
                config,
                warnings: d,
            }),
            _ => Err(Error::Config(d)),
        }
    }

    /// The effective config as msprobe JSON (what `opdump check` prints).
    pub fn to_effective_json(&self) -> Value {
        let mut section = Map::new();
        section.insert("scope".into(), json!(self.scope));
        section.insert("list".into(), json!(self.list));
        section.insert("data_mode".into(), json!(self.data_mode.to_list()));
        match self.task {
            MsprobeTask::Statistics => {
                section.insert("summary_mode".into(), json!(self.summary_mode.as_str()));
            }
            MsprobeTask::Tensor => {
                section.insert("file_format".into(), json!("npy"));
            }
            MsprobeTask::OverflowCheck => {
                let n = if self.overflow_nums == 0 {
                    -1
                } else {
                    i64::from(self.overflow_nums)
                };
                section.insert("overflow_nums".into(), json!(n));
            }
        }
        let mut v = json!({
            "task": self.task.as_str(),
            "dump_path": self.dump_path,
            "rank": self.rank,
            "step": self.step,
            "level": self.level.as_str(),
            "async_dump": self.async_dump,
            "precision": if self.precision_high { "high" } else { "low" },
            (self.task.as_str()): section,
        });
        if let (Some(own), Value::Object(m)) = (super::opdump::to_json(&self.opdump), &mut v) {
            m.insert("opdump".into(), own);
        }
        v
    }

    /// The `iteration` spec of this config's steps (`all`, or `0|2-5|9`: consecutive steps
    /// as one range, so `["0-999999"]` stays one segment).
    pub fn iteration(&self) -> String {
        if self.step.is_empty() {
            return "all".into();
        }
        let mut parts: Vec<String> = Vec::new();
        let mut i = 0;
        while i < self.step.len() {
            let start = self.step[i];
            let mut end = start;
            while i + 1 < self.step.len() && self.step[i + 1] == end + 1 {
                i += 1;
                end += 1;
            }
            parts.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
            i += 1;
        }
        parts.join("|")
    }
}

fn parse(text: &str, d: &mut Diagnostics) -> Option<MsprobeConfig> {
    let doc: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            d.error(
                "",
                format!("the config is not valid JSON: {e}; allowed: one JSON object"),
            );
            return None;
        }
    };
    let Value::Object(top) = &doc else {
        d.error(
            "",
            format!(
                "the config must be a JSON object with task, dump_path, level, ...; got {}",
                describe(&doc)
            ),
        );
        return None;
    };
    let mut known = MSPROBE_TOP_KEYS.to_vec();
    known.push("opdump");
    warn_unknown("", top, &known, d);
    let task = parse_task(top.get("task"), d);
    let dump_path = parse_dump_path(top.get("dump_path"), d);
    let rank = parse_ranges("rank", top.get("rank"), d);
    let step = parse_ranges("step", top.get("step"), d);
    let level = parse_level(top.get("level"), d);
    let async_dump = match top.get("async_dump") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            d.error(
                "async_dump",
                format!(
                    "async_dump is invalid, it should be a boolean; got {}, allowed: true or false",
                    describe(v)
                ),
            );
            false
        }
    };
    let mut precision_high = parse_precision("precision", top.get("precision"), d);
    for k in ["extra_info", "enable_dataloader", "dump_enable"] {
        if let Some(v) = top.get(k).filter(|v| !v.is_boolean()) {
            d.error(
                k,
                format!(
                    "{k} should be a boolean; got {}, allowed: true or false",
                    describe(v)
                ),
            );
        }
    }
    let task = task?;
    let name = task.as_str();
    let empty = Map::new();
    let section = match top.get(name) {
        None => &empty,
        Some(Value::Object(m)) => m,
        Some(v) => {
            d.error(
                name,
                format!(
                    "the {name} section must be an object; got {}, allowed: {{\"scope\": [], \
                     \"list\": [], \"data_mode\": [\"all\"], ...}}",
                    describe(v)
                ),
            );
            &empty
        }
    };
    warn_unknown(name, section, &TASK_KEYS, d);
    let level = level?;
    let scope = parse_scope(name, section.get("scope"), level, d);
    let list = parse_strings(&format!("{name}.list"), section.get("list"), d);
    let data_mode = parse_data_mode(name, section.get("data_mode"), d);
    let summary_mode = match task {
        MsprobeTask::Statistics => parse_summary_mode(name, section.get("summary_mode"), d),
        _ => {
            if section.contains_key("summary_mode") {
                d.warn(
                    format!("{name}.summary_mode"),
                    "summary_mode is read only by the statistics task; ignored",
                );
            }
            SummaryMode::Statistics
        }
    };
    if task == MsprobeTask::Tensor {
        parse_file_format(name, section.get("file_format"), d);
    }
    if section.contains_key("precision") {
        precision_high = parse_precision(&format!("{name}.precision"), section.get("precision"), d);
    }
    if section.contains_key("tensor_list") {
        d.warn(
            format!("{name}.tensor_list"),
            "tensor_list is not supported by opdump; use the tensor task with list",
        );
    }
    let overflow_nums = if task == MsprobeTask::OverflowCheck {
        parse_overflow_nums(name, section.get("overflow_nums"), d)
    } else {
        0
    };
    if async_dump {
        d.warn(
            "async_dump",
            "async_dump is True, it may cause OOM when dumping large tensor. (opdump writes \
             through its bounded writer either way; the flag changes nothing)",
        );
        if task == MsprobeTask::Tensor && list.is_empty() {
            d.error(
                format!("{name}.list"),
                "The parameters async_dump is true in tensor task, the parameters list cannot \
                 be empty; got [], allowed: one or more API or module names",
            );
        }
        if summary_mode == SummaryMode::Md5 {
            d.error(
                format!("{name}.summary_mode"),
                "md5 is not allowed when async_dump is true; got \"md5\", allowed: \"statistics\" \
                 (or async_dump false)",
            );
        }
    }
    if !data_mode.forward {
        d.warn(
            format!("{name}.data_mode"),
            "only backward calls are selected; a Rust runtime reports forward calls only (and, \
             at levels L0 and mix, the parameters_grad of a dumped training step), so nothing \
             else is dumped",
        );
    }
    let opdump = super::opdump::parse_opdump(top.get("opdump"), d);
    let mode = match task {
        MsprobeTask::OverflowCheck => super::types::OpDebugMode::Overflow,
        _ => super::types::OpDebugMode::Off,
    };
    super::opdump::check(&opdump, mode, d);
    Some(MsprobeConfig {
        opdump,
        task,
        dump_path: dump_path?,
        rank,
        step,
        level,
        scope,
        list,
        data_mode,
        summary_mode,
        async_dump,
        precision_high,
        overflow_nums,
    })
}

fn parse_task(v: Option<&Value>, d: &mut Diagnostics) -> Option<MsprobeTask> {
    let allowed = "allowed: statistics, tensor, overflow_check";
    match v {
        None => Some(MsprobeTask::Statistics),
        Some(Value::String(s)) => match s.as_str() {
            "statistics" => Some(MsprobeTask::Statistics),
            "tensor" => Some(MsprobeTask::Tensor),
            "overflow_check" => Some(MsprobeTask::OverflowCheck),
            other if MSPROBE_TASKS.contains(&other) => {
                d.error(
                    "task",
                    format!(
                        "task {other:?} is an msprobe task that opdump does not run; {allowed}"
                    ),
                );
                None
            }
            other => {
                d.error(
                    "task",
                    format!(
                        "task is invalid, it should be one of {}; got {other:?} ({allowed} in \
                         opdump)",
                        MSPROBE_TASKS.join(", ")
                    ),
                );
                None
            }
        },
        Some(v) => {
            d.error(
                "task",
                format!(
                    "task is invalid, it should be a string; got {}; {allowed}",
                    describe(v)
                ),
            );
            None
        }
    }
}

fn parse_dump_path(v: Option<&Value>, d: &mut Diagnostics) -> Option<String> {
    let allowed = "allowed: a path of letters, digits and _ . / -";
    let s = match v {
        None | Some(Value::Null) => {
            d.error("dump_path", format!("Dump path is empty.; {allowed}"));
            return None;
        }
        Some(Value::String(s)) if s.is_empty() => {
            d.error(
                "dump_path",
                format!("Dump path is empty.; got \"\", {allowed}"),
            );
            return None;
        }
        Some(Value::String(s)) => s,
        Some(v) => {
            d.error(
                "dump_path",
                format!("dump_path must be a string; got {}, {allowed}", describe(v)),
            );
            return None;
        }
    };
    let abs = if s.starts_with('/') {
        std::path::PathBuf::from(s)
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(s),
            Err(e) => {
                d.error(
                    "dump_path",
                    format!(
                        "dump_path {s:?} is relative and the current directory is unknown \
                         ({e}); allowed: an absolute path"
                    ),
                );
                return None;
            }
        }
    };
    let text = abs.to_string_lossy().into_owned();
    let mut ok = true;
    if let Some(c) = text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_./-".contains(*c)))
    {
        d.error(
            "dump_path",
            format!(
                "dump_path {text:?} contains special characters ({c:?}); {allowed} (msprobe's \
                 check of the absolute path)"
            ),
        );
        ok = false;
    }
    if text.len() > 4096 {
        d.error(
            "dump_path",
            format!(
                "dump_path is {} characters long; allowed: at most 4096",
                text.len()
            ),
        );
        ok = false;
    }
    if let Some(part) = text.split('/').find(|p| p.len() > 255) {
        d.error(
            "dump_path",
            format!(
                "dump_path has a {}-character component ({:?}...); allowed: at most 255 per \
                 component",
                part.len(),
                &part[..20]
            ),
        );
        ok = false;
    }
    ok.then_some(text)
}

/// `rank` / `step`: ints and `"a-b"` strings, expanded, de-duplicated and sorted.
fn parse_ranges(key: &str, v: Option<&Value>, d: &mut Diagnostics) -> Vec<u32> {
    let allowed = format!(
        "allowed: integers from 0 to {} and \"a-b\" ranges, e.g. [0, \"3-5\"]",
        MAX_RANK_STEP - 1
    );
    let items = match v {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(a)) => a,
        Some(v) => {
            d.error(
                key,
                format!("{key} must be a list; got {}, {allowed}", describe(v)),
            );
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("{key}[{i}]");
        let in_range = |n: u64, d: &mut Diagnostics| {
            if n < MAX_RANK_STEP {
                Some(n as u32)
            } else {
                d.error(
                    path.clone(),
                    format!("{key} element {n} is out of range; {allowed}"),
                );
                None
            }
        };
        match item {
            Value::Number(n) if n.is_u64() => {
                if let Some(n) = in_range(n.as_u64().unwrap_or(u64::MAX), d) {
                    out.push(n);
                }
            }
            Value::Number(n) if n.is_i64() => d.error(
                path.clone(),
                format!("{key} element {n} is out of range; {allowed}"),
            ),
            Value::String(s) => {
                let parts = s.split_once('-').and_then(|(a, b)| {
                    let num = |t: &str| {
                        (!t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()))
                            .then(|| t.parse::<u64>().ok())
                            .flatten()
                    };
                    Some((num(a)?, num(b)?))
                });
                match parts {
                    None => d.error(
                        path.clone(),
                        format!(
                            "{key} element {s:?}: the string only supports formats like \"3-5\"; \
                             {allowed}"
                        ),
                    ),
                    Some((a, b)) if a > b => d.error(
                        path.clone(),
                        format!(
                            "{key} element {s:?}: the left boundary {a} cannot be greater than \
                             the right {b}; {allowed}"
                        ),
                    ),
                    Some((a, b)) => {
                        if let (Some(a), Some(b)) = (in_range(a, d), in_range(b, d)) {
                            out.extend(a..=b);
                        }
                    }
                }
            }
            other => d.error(
                path.clone(),
                format!(
                    "{key} element must be an integer or string; got {}, {allowed}",
                    describe(other)
                ),
            ),
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn parse_level(v: Option<&Value>, d: &mut Diagnostics) -> Option<MsprobeLevel> {
    let allowed = "allowed: L0 (modules), L1 (APIs), mix";
    match v {
        None => Some(MsprobeLevel::L1),
        Some(Value::String(s)) => match s.as_str() {
            "L0" => Some(MsprobeLevel::L0),
            "L1" => Some(MsprobeLevel::L1),
            "mix" => Some(MsprobeLevel::Mix),
            "L2" | "debug" => {
                d.error(
                    "level",
                    format!(
                        "level {s:?} is an msprobe level that opdump does not write; {allowed}"
                    ),
                );
                None
            }
            _ => {
                d.error(
                    "level",
                    format!("level is invalid, it should be one of L0, L1, L2, mix, debug; got {s:?}, {allowed}"),
                );
                None
            }
        },
        Some(v) => {
            d.error(
                "level",
                format!(
                    "level is invalid, it should be a string; got {}, {allowed}",
                    describe(v)
                ),
            );
            None
        }
    }
}

fn parse_precision(path: &str, v: Option<&Value>, d: &mut Diagnostics) -> bool {
    match v {
        None => false,
        Some(Value::String(s)) if s == "low" => false,
        Some(Value::String(s)) if s == "high" => true,
        Some(v) => {
            d.error(
                path,
                format!(
                    "precision is invalid; got {}, allowed: \"low\" or \"high\"",
                    describe(v)
                ),
            );
            false
        }
    }
}

fn parse_strings(path: &str, v: Option<&Value>, d: &mut Diagnostics) -> Vec<String> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => {
            let mut out = Vec::new();
            for (i, x) in a.iter().enumerate() {
                match x {
                    Value::String(s) if !s.is_empty() => out.push(s.clone()),
                    other => d.error(
                        format!("{path}[{i}]"),
                        format!(
                            "{path} elements must be non-empty strings; got {}, allowed: API or \
                             module names",
                            describe(other)
                        ),
                    ),
                }
            }
            out
        }
        Some(v) => {
            d.error(
                path,
                format!("{path} must be a list of strings; got {}", describe(v)),
            );
            Vec::new()
        }
    }
}

const API_PREFIXES: [&str; 11] = [
    "Distributed",
    "Functional",
    "Torch",
    "Tensor",
    "Mint",
    "MintFunctional",
    "Primitive",
    "Aten",
    "VF",
    "NPU",
    "Jit",
];

/// Whether `name` has msprobe's API-name form (`{Prefix}.{api}.{n}.forward|backward`).
pub fn is_api_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('.').collect();
    let n = parts.len();
    n >= 4
        && API_PREFIXES.contains(&parts[0])
        && matches!(parts[n - 1], "forward" | "backward")
        && parts[n - 2].bytes().all(|b| b.is_ascii_digit())
        && !parts[n - 2].is_empty()
}

/// Whether `name` has msprobe's module-name form (`Module|Cell.{path}.forward|backward.{n}`).
pub fn is_module_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('.').collect();
    let n = parts.len();
    n >= 4
        && matches!(parts[0], "Module" | "Cell")
        && matches!(parts[n - 2], "forward" | "backward")
        && parts[n - 1].bytes().all(|b| b.is_ascii_digit())
        && !parts[n - 1].is_empty()
}

fn parse_scope(
    section: &str,
    v: Option<&Value>,
    level: MsprobeLevel,
    d: &mut Diagnostics,
) -> Vec<String> {
    let path = format!("{section}.scope");
    let names = parse_strings(&path, v, d);
    if names.is_empty() {
        return names;
    }
    if names.len() != 2 {
        d.error(
            &path,
            format!(
                "scope must be configured as a list of two names [start, end]; got {} names, \
                 allowed: [] or two full call names",
                names.len()
            ),
        );
        return Vec::new();
    }
    let mut ok = true;
    let mut kinds = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let api = is_api_name(n);
        let module = is_module_name(n);
        kinds.push(module);
        let fits = match level {
            MsprobeLevel::L1 => api,
            MsprobeLevel::L0 => module,
            MsprobeLevel::Mix => api || module,
        };
        if !fits {
            let want = match level {
                MsprobeLevel::L1 => "an API name like Functional.conv2d.0.forward",
                MsprobeLevel::L0 => "a module name like Module.conv1.Conv2d.forward.0",
                MsprobeLevel::Mix => "an API or module name",
            };
            d.error(
                format!("{path}[{i}]"),
                format!(
                    "scope name {n:?} is not valid at level {}; allowed: {want}",
                    level.as_str()
                ),
            );
            ok = false;
        }
    }
    if ok && kinds[0] != kinds[1] && level != MsprobeLevel::Mix {
        d.error(
            &path,
            "scope mixes an API and a module name, which is valid only at level mix",
        );
        ok = false;
    }
    if ok { names } else { Vec::new() }
}

fn parse_data_mode(section: &str, v: Option<&Value>, d: &mut Diagnostics) -> DataMode {
    let path = format!("{section}.data_mode");
    let allowed = "allowed: [\"all\"] or up to 4 of input, output, forward, backward";
    let items = match v {
        None => return DataMode::ALL,
        Some(Value::Array(a)) => a,
        Some(v) => {
            d.error(
                &path,
                format!("data_mode must be a list; got {}, {allowed}", describe(v)),
            );
            return DataMode::ALL;
        }
    };
    if items.is_empty() {
        d.error(&path, format!("data_mode is empty; {allowed}"));
        return DataMode::ALL;
    }
    if items.len() > 4 {
        d.error(
            &path,
            format!("data_mode holds {} items; {allowed}", items.len()),
        );
        return DataMode::ALL;
    }
    let mut seen = Vec::new();
    for (i, x) in items.iter().enumerate() {
        match x.as_str() {
            Some(s @ ("all" | "input" | "output" | "forward" | "backward")) => seen.push(s),
            _ => d.error(
                format!("{path}[{i}]"),
                format!("data_mode value {} is invalid; {allowed}", describe(x)),
            ),
        }
    }
    if seen.contains(&"all") {
        if items.len() > 1 {
            d.error(
                &path,
                format!("'all' cannot be combined with other data_mode values; {allowed}"),
            );
        }
        return DataMode::ALL;
    }
    let has = |s: &str| seen.contains(&s);
    let both = |a: bool, b: bool| if a || b { (a, b) } else { (true, true) };
    let (input, output) = both(has("input"), has("output"));
    let (forward, backward) = both(has("forward"), has("backward"));
    DataMode {
        input,
        output,
        forward,
        backward,
    }
}

fn parse_summary_mode(section: &str, v: Option<&Value>, d: &mut Diagnostics) -> SummaryMode {
    let path = format!("{section}.summary_mode");
    let allowed = "allowed: \"statistics\", \"md5\" or \"xor\"";
    match v {
        None => SummaryMode::Statistics,
        Some(Value::String(s)) if s == "statistics" => SummaryMode::Statistics,
        Some(Value::String(s)) if s == "md5" => SummaryMode::Md5,
        Some(Value::String(s)) if s == "xor" => SummaryMode::Xor,
        Some(Value::String(s)) => {
            d.error(
                &path,
                format!("summary_mode is an invalid string; got {s:?}, {allowed}"),
            );
            SummaryMode::Statistics
        }
        Some(Value::Array(_)) => {
            d.error(
                &path,
                format!(
                    "a summary_mode list is read only by MindSpore static L2 dumps; got {}, \
                     {allowed}",
                    describe(v.unwrap_or(&Value::Null))
                ),
            );
            SummaryMode::Statistics
        }
        Some(v) => {
            d.error(
                &path,
                format!("summary_mode is invalid; got {}, {allowed}", describe(v)),
            );
            SummaryMode::Statistics
        }
    }
}

fn parse_file_format(section: &str, v: Option<&Value>, d: &mut Diagnostics) {
    let path = format!("{section}.file_format");
    match v {
        None => {}
        Some(Value::String(s)) if s == "npy" => {}
        Some(Value::String(s)) if s == "bin" => d.error(
            &path,
            "file_format \"bin\" is read only by MindSpore static L2 dumps; allowed: \"npy\"",
        ),
        Some(v) => d.error(
            &path,
            format!(
                "file_format is invalid; got {}, allowed: \"npy\"",
                describe(v)
            ),
        ),
    }
}

fn parse_overflow_nums(section: &str, v: Option<&Value>, d: &mut Diagnostics) -> u32 {
    let path = format!("{section}.overflow_nums");
    let allowed = "allowed: -1 (no limit) or an integer greater than 0";
    match v {
        None => 1,
        Some(Value::Number(n)) if n.as_i64() == Some(-1) => 0,
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n > 0 && n <= u32::MAX as u64) => {
            n.as_u64().unwrap_or(1) as u32
        }
        Some(v) => {
            d.error(
                &path,
                format!("overflow_nums is invalid; got {}, {allowed}", describe(v)),
            );
            1
        }
    }
}

#[cfg(test)]
mod tests;
