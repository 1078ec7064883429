//! CANN's `acl.json` dump section (`{"dump": {…}}`), validated as CANN validates it, every
//! problem at once (spec `peers.md` §5.3).
//!
//! Each error message starts with CANN's error code (`EP0001` a wrong type or a missing or
//! empty section, `EP0002` a value outside its allowed set, `EP0003` an invalid value,
//! `EP0005` fields in conflict) and names the value and what is allowed. The result says which
//! dump CANN would run ([`AclDumpKind`]: an exception scene wins, then overflow, then the
//! operator dump) or that the file asks for none. [`acl_request`] then translates an accepted
//! file into what opdump's Dumper writes ([`GeRequest`]: CANN's GE layout, docs/cann.md),
//! refusing with an error naming the key what the Dumper cannot honour.
//!
//! ```
//! use dump_host::config::acl::{AclDumpKind, check_acl};
//!
//! let dir = std::env::temp_dir();
//! let text = format!(
//!     r#"{{"dump": {{"dump_path": "{}", "dump_list": [{{"model_name": "resnet"}}],
//!          "dump_mode": "all", "dump_data": "stats", "dump_stats": ["Max", "Nan"]}}}}"#,
//!     dir.display()
//! );
//! let ok = check_acl(&serde_json::from_str(&text).unwrap()).unwrap();
//! assert_eq!(ok.kind, AclDumpKind::Operators);
//! assert!(ok.stats_only);
//!
//! let bad = r#"{"dump": {"dump_path": "", "dump_mode": "both", "dump_debug": "on",
//!               "dump_op_switch": "on"}}"#;
//! let d = check_acl(&serde_json::from_str(bad).unwrap()).unwrap_err();
//! let codes: Vec<&str> = d.errors().map(|e| &e.message[..6]).collect();
//! assert_eq!(codes, ["EP0002", "EP0005", "EP0003"]);
//! ```

use std::path::Path;

use serde_json::{Map, Value};

use super::Diagnostics;

/// The string keys of the `dump` section with their allowed values (`None`: free text).
const STRINGS: [(&str, Option<&[&str]>); 9] = [
    ("dump_path", None),
    ("dump_mode", Some(&["input", "output", "all"])),
    ("dump_op_switch", Some(&["on", "off"])),
    ("dump_debug", Some(&["on", "off"])),
    ("dump_level", Some(&["op", "kernel", "all"])),
    ("dump_data", Some(&["tensor", "stats"])),
    (
        "dump_scene",
        Some(&[
            "lite_exception",
            "aic_err_brief_dump",
            "aic_err_norm_dump",
            "aic_err_detail_dump",
            "watcher",
        ]),
    ),
    ("dump_kernel_data", None),
    ("dump_step", None),
];

/// `dump_kernel_data`'s comma-separated items.
const KERNEL_DATA: [&str; 5] = ["all", "printf", "tensor", "assert", "timestamp"];

/// `dump_stats`' allowed items.
pub const ACL_STATS: [&str; 7] = [
    "Max",
    "Min",
    "Avg",
    "Nan",
    "Negative Inf",
    "Positive Inf",
    "L2norm",
];

/// Keys of a `dump_list` item.
const ITEM_KEYS: [&str; 6] = [
    "model_name",
    "layer",
    "watcher_nodes",
    "optype_blacklist",
    "opname_blacklist",
    "opname_range",
];

/// The most `|`-separated parts `dump_step` may hold, and entries a blacklist may hold.
pub const MAX_PARTS: usize = 100;

/// `dump_path`'s longest accepted length, in characters.
pub const MAX_PATH_CHARS: usize = 512;

/// Which dump an accepted `acl.json` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AclDumpKind {
    /// No `dump` section, an empty one, or nothing that starts a dump.
    None,
    /// An exception scene (`lite_exception`, `aic_err_*_dump`): other fields are ignored.
    Exception,
    /// `dump_debug: on`: overflow dump.
    Overflow,
    /// The operator dump (`dump_list`, or `dump_op_switch: on` for single operators), also in
    /// the `watcher` scene.
    Operators,
}

/// What an accepted `acl.json` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclDump {
    /// Which dump runs.
    pub kind: AclDumpKind,
    /// `dump_data: stats`: CANN's statistics csv instead of tensor files.
    pub stats_only: bool,
    /// `dump_scene: watcher`.
    pub watcher: bool,
    /// Warnings (fields CANN ignores in this configuration).
    pub warnings: Diagnostics,
}

/// Validates the document of an `acl.json`; every error at once, or what it asks for.
pub fn check_acl(doc: &Value) -> Result<AclDump, Diagnostics> {
    let mut d = Diagnostics::new();
    let none = AclDump {
        kind: AclDumpKind::None,
        stats_only: false,
        watcher: false,
        warnings: Diagnostics::new(),
    };
    let Some(root) = doc.as_object() else {
        d.error(
            "",
            "EP0001: an acl.json is a JSON object (`{\"dump\": {…}}`)",
        );
        return Err(d);
    };
    let dump = match root.get("dump") {
        None => return Ok(none),
        Some(Value::Object(m)) if m.is_empty() => return Ok(none),
        Some(Value::Object(m)) => m,
        Some(v) => {
            d.error(
                "dump",
                format!("EP0001: `dump` must be an object, got {}", kind(v)),
            );
            return Err(d);
        }
    };
    let mut warnings = Diagnostics::new();
    for k in dump.keys() {
        let known = STRINGS.iter().any(|(s, _)| s == k) || k == "dump_stats" || k == "dump_list";
        if !known {
            warnings.warn(
                format!("dump.{k}"),
                "not an acl.json dump key; CANN ignores it",
            );
        }
    }
    let s = |k: &str| dump.get(k).and_then(Value::as_str);
    for (key, allowed) in STRINGS {
        match dump.get(key) {
            None => {}
            Some(Value::String(v)) => {
                if let Some(set) = allowed
                    && !set.contains(&v.as_str())
                {
                    d.error(
                        format!("dump.{key}"),
                        format!("EP0002: {v:?} is not allowed; allowed: {}", set.join(", ")),
                    );
                }
            }
            Some(v) => d.error(
                format!("dump.{key}"),
                format!("EP0001: must be a string, got {}", kind(v)),
            ),
        }
    }
    let on = |k: &str| s(k) == Some("on");
    let scene = s("dump_scene");
    let exception = scene.is_some_and(|v| v != "watcher");
    let watcher = scene == Some("watcher");

    // Conflicts first (EP0005): they hold in every scene.
    if on("dump_debug") && on("dump_op_switch") {
        d.error(
            "dump.dump_debug",
            "EP0005: dump_debug \"on\" (overflow dump) cannot be combined with dump_op_switch \"on\" (single-operator dump)",
        );
    }
    if let Some(sc) = scene
        && (on("dump_debug") || on("dump_op_switch"))
        && (exception || watcher)
    {
        d.error(
            "dump.dump_scene",
            format!(
                "EP0005: dump_scene {sc:?} cannot be combined with dump_debug \"on\" or dump_op_switch \"on\""
            ),
        );
    }
    if exception {
        for k in dump
            .keys()
            .filter(|k| *k != "dump_scene" && *k != "dump_path")
        {
            if !matches!(k.as_str(), "dump_debug" | "dump_op_switch") {
                warnings.warn(
                    format!("dump.{k}"),
                    format!(
                        "ignored: the exception scene {:?} takes only dump_path (and ASCEND_DUMP_PATH / ASCEND_WORK_PATH before it)",
                        scene.unwrap_or_default()
                    ),
                );
            }
        }
    } else {
        check_path(dump, &mut d);
        if let Some(v) = dump.get("dump_step").and_then(Value::as_str) {
            check_acl_steps(v, &mut d);
        }
        if let Some(v) = s("dump_kernel_data") {
            for item in v.split(',') {
                if !KERNEL_DATA.contains(&item) {
                    d.error(
                        "dump.dump_kernel_data",
                        format!(
                            "EP0002: {item:?} is not allowed; a comma list of: {}",
                            KERNEL_DATA.join(", ")
                        ),
                    );
                }
            }
        }
        check_stats(dump, s("dump_data") == Some("stats"), &mut d);
        check_list(dump, &mut d, watcher, s("dump_level"), on("dump_op_switch"));
        if watcher && s("dump_mode").is_some_and(|m| m != "output") {
            d.error(
                "dump.dump_mode",
                format!(
                    "EP0005: the watcher scene dumps outputs only; dump_mode must be \"output\" or absent, got {:?}",
                    s("dump_mode").unwrap_or_default()
                ),
            );
        }
    }
    if d.has_errors() {
        return Err(d);
    }
    let has_list = dump
        .get("dump_list")
        .and_then(Value::as_array)
        .is_some_and(|l| !l.is_empty());
    let kind = if exception {
        AclDumpKind::Exception
    } else if on("dump_debug") {
        AclDumpKind::Overflow
    } else if has_list || on("dump_op_switch") || watcher {
        AclDumpKind::Operators
    } else {
        AclDumpKind::None
    };
    Ok(AclDump {
        kind,
        stats_only: s("dump_data") == Some("stats") && kind == AclDumpKind::Operators,
        watcher,
        warnings,
    })
}

/// What an accepted acl.json or torchair config asks opdump's Dumper to write: the GE
/// layout's settings before the Dumper's start time is known. Made by [`acl_request`] and
/// [`super::torchair::torchair_request`]; the Dumper's plan is made from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeRequest {
    /// `dump_path`.
    pub dump_path: std::path::PathBuf,
    /// torchair's `worldsize{W}_global_rank{R}` below `dump_path` (`None` for an acl.json).
    pub prefix: Option<String>,
    /// `dump_mode`: inputs, outputs or both.
    pub input_output: super::InputOutput,
    /// `dump_step` as CANN writes it (`0|5|10-20`), or `all`.
    pub steps: String,
    /// The model directory's name (sanitised); `None`: single-operator layout.
    pub model_name: Option<String>,
    /// Exact op names to dump; `None`: every kernel.
    pub layers: Option<Vec<String>>,
    /// `dump_data: stats`: the statistics csv's columns.
    pub stats: Option<crate::layout::GeStats>,
    /// torchair's eager npy dump.
    pub npy: bool,
    /// `dump_scene: watcher`: the watched nodes (`watcher_nodes`) and the kernels after which
    /// they are read again (`layer`), per `dump_list` item.
    pub watcher: Option<super::WatcherConfig>,
    /// Warnings: keys read but meaningless for a Rust runtime.
    pub warnings: Diagnostics,
}

/// Validates an acl.json ([`check_acl`]) and translates it into what the Dumper writes, every
/// problem at once. On top of CANN's own errors, what opdump's Dumper cannot honour is an
/// error naming the key and its value: no dump asked for, the exception scenes, overflow
/// (`dump_debug: on`), blacklists and `opname_range`, several models in
/// `dump_list`, a remote `ip:path` dump path. `dump_level` (op, kernel, all) writes the same
/// dump (a Rust runtime's kernel is both its op and its kernel); `dump_kernel_data` (AscendC
/// kernels' printf/assert data) is ignored with a warning.
pub fn acl_request(doc: &Value) -> Result<GeRequest, Diagnostics> {
    let checked = match check_acl(doc) {
        Ok(c) => c,
        Err(mut d) => {
            // CANN's errors, then what opdump could not run even if they were fixed.
            if let Err(more) = unsupported(doc) {
                for e in more.errors() {
                    d.error(e.path.clone(), e.message.clone());
                }
            }
            return Err(d);
        }
    };
    let mut d = unsupported(doc).err().unwrap_or_default();
    let watcher = super::WatcherConfig::from_checked_acl(&checked, doc);
    let mut warnings = checked.warnings;
    let empty = Map::new();
    let dump = doc.get("dump").and_then(Value::as_object).unwrap_or(&empty);
    let s = |k: &str| dump.get(k).and_then(Value::as_str);
    match checked.kind {
        AclDumpKind::None => d.error(
            "dump",
            "nothing to dump: no dump_list item and dump_op_switch is not \"on\" \
             (CANN dumps nothing either); add {\"dump_list\": [{\"model_name\": …}]} or \
             \"dump_op_switch\": \"on\"",
        ),
        AclDumpKind::Exception => d.error(
            "dump.dump_scene",
            format!(
                "{:?}: exception dumps need a device kernel failing on an NPU; opdump's Dumper \
                 does not run them (a MindSpore data_dump.json with op_debug_mode 4 dumps the \
                 inputs of a kernel the runtime reports failed)",
                s("dump_scene").unwrap_or_default()
            ),
        ),
        AclDumpKind::Overflow => d.error(
            "dump.dump_debug",
            "\"on\": overflow dump writes the NPU's Opdebug overflow blocks, which a Rust \
             runtime does not have; opdump's Dumper does not run it (a MindSpore \
             data_dump.json with op_debug_mode 3 dumps the kernels whose outputs hold NaN/Inf)",
        ),
        AclDumpKind::Operators => {}
    }
    if let Some(k) = s("dump_kernel_data") {
        warnings.warn(
            "dump.dump_kernel_data",
            format!(
                "{k:?} selects AscendC kernels' own printf/assert/timestamp data, which a Rust \
                 runtime's kernels do not produce; ignored"
            ),
        );
    }
    let mut models: Vec<&str> = Vec::new();
    let mut layers: Vec<String> = Vec::new();
    let mut every_layer = false;
    let items = dump
        .get("dump_list")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for item in items {
        let Some(m) = item.as_object() else { continue };
        if let Some(name) = m.get("model_name").and_then(Value::as_str)
            && !name.is_empty()
            && !models.contains(&name)
        {
            models.push(name);
        }
        // The watcher scene dumps its watched nodes' outputs; `layer` there says after which
        // kernels they are read again (the watcher), not what is dumped.
        let dumped = if checked.watcher {
            "watcher_nodes"
        } else {
            "layer"
        };
        match m.get(dumped).and_then(Value::as_array) {
            Some(a) if !a.is_empty() => {
                layers.extend(a.iter().filter_map(Value::as_str).map(str::to_owned));
            }
            _ => every_layer = true,
        }
    }
    if d.has_errors() {
        return Err(d);
    }
    let single_op = items.is_empty();
    let model_name = (!single_op).then(|| {
        crate::layout::ge_sanitize(
            models
                .first()
                .copied()
                .unwrap_or(crate::layout::DEFAULT_MODEL_NAME),
        )
    });
    let stats = if s("dump_data") == Some("stats") {
        let items = dump
            .get("dump_stats")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>());
        // check_acl accepted every item.
        Some(crate::layout::GeStats::from_items(items).map_err(|m| {
            let mut d = Diagnostics::new();
            d.error("dump.dump_stats", m);
            d
        })?)
    } else {
        None
    };
    Ok(GeRequest {
        dump_path: std::path::PathBuf::from(s("dump_path").unwrap_or_default()),
        prefix: None,
        input_output: match s("dump_mode") {
            Some("input") => super::InputOutput::Inputs,
            Some("all") => super::InputOutput::Both,
            // CANN's default is output.
            _ => super::InputOutput::Outputs,
        },
        steps: s("dump_step")
            .filter(|v| !v.is_empty())
            .unwrap_or("all")
            .to_owned(),
        model_name,
        layers: (!single_op && !every_layer).then_some(layers),
        stats,
        npy: false,
        watcher,
        warnings,
    })
}

/// What opdump's Dumper cannot run whatever CANN says of the rest: a remote `ip:path`,
/// blacklists and `opname_range`, several models in `dump_list`.
fn unsupported(doc: &Value) -> Result<(), Diagnostics> {
    let mut d = Diagnostics::new();
    let Some(dump) = doc.get("dump").and_then(Value::as_object) else {
        return Ok(());
    };
    if let Some(p) = dump.get("dump_path").and_then(Value::as_str)
        && let Some((host, _)) = p.split_once(':')
        && !host.is_empty()
        && !host.contains('/')
    {
        d.error(
            "dump.dump_path",
            format!("{p:?}: a remote ip:path dump path; opdump writes to a local directory"),
        );
    }
    let items = dump
        .get("dump_list")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut models: Vec<&str> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(m) = item.as_object() else { continue };
        for k in ["optype_blacklist", "opname_blacklist", "opname_range"] {
            if let Some(v) = m.get(k) {
                d.error(
                    format!("dump.dump_list[{i}].{k}"),
                    format!(
                        "{v}: not supported by opdump's Dumper (it dumps every selected kernel \
                         whole)"
                    ),
                );
            }
        }
        if let Some(name) = m.get("model_name").and_then(Value::as_str)
            && !name.is_empty()
            && !models.contains(&name)
        {
            models.push(name);
        }
    }
    if models.len() > 1 {
        d.error(
            "dump.dump_list",
            format!(
                "names {} models ({}); opdump's Dumper dumps the one model its runtime runs: \
                 keep one model_name",
                models.len(),
                models.join(", ")
            ),
        );
    }
    if d.has_errors() { Err(d) } else { Ok(()) }
}

/// `dump_path`: required, non-empty, at most [`MAX_PATH_CHARS`] characters, an existing
/// directory with read and write access (an `ip:path` form is taken as remote and not
/// checked).
fn check_path(dump: &Map<String, Value>, d: &mut Diagnostics) {
    let Some(v) = dump.get("dump_path") else {
        d.error(
            "dump.dump_path",
            "EP0003: required (the directory the dump goes to)",
        );
        return;
    };
    let Some(p) = v.as_str() else { return };
    if p.is_empty() {
        d.error("dump.dump_path", "EP0003: must not be empty");
        return;
    }
    let chars = p.chars().count();
    if chars > MAX_PATH_CHARS {
        d.error(
            "dump.dump_path",
            format!("EP0003: {chars} characters; at most {MAX_PATH_CHARS} are allowed"),
        );
        return;
    }
    // `host:path` (a remote dump server): CANN checks it there, not here.
    if let Some((host, _)) = p.split_once(':')
        && !host.is_empty()
        && !host.contains('/')
    {
        return;
    }
    match std::fs::metadata(Path::new(p)) {
        Ok(m) if m.is_dir() => {
            if m.permissions().readonly() {
                d.error(
                    "dump.dump_path",
                    format!("EP0003: {p:?} is not writable (read and write access needed)"),
                );
            }
        }
        Ok(_) => d.error(
            "dump.dump_path",
            format!("EP0003: {p:?} is not a directory"),
        ),
        Err(e) => d.error(
            "dump.dump_path",
            format!("EP0003: {p:?} must be an existing directory: {e}"),
        ),
    }
}

/// acl.json's `dump_step`: at most [`MAX_PARTS`] `|`-separated parts, each `N` or `A-B` with
/// `A ≤ B` (GE, through torchair, wants `A < B`).
fn check_acl_steps(v: &str, d: &mut Diagnostics) {
    let parts: Vec<&str> = v.split('|').collect();
    if parts.len() > MAX_PARTS {
        d.error(
            "dump.dump_step",
            format!(
                "EP0003: {} parts; at most {MAX_PARTS} are allowed",
                parts.len()
            ),
        );
    }
    for part in parts {
        match step_part(part) {
            Some((a, Some(b))) if a > b => d.error(
                "dump.dump_step",
                format!("EP0003: {part:?}: the first step is greater than the second"),
            ),
            Some(_) => {}
            None => d.error(
                "dump.dump_step",
                format!("EP0003: {part:?} is not a step or a range; example: \"0|3-5|10\""),
            ),
        }
    }
}

/// `N` → `(N, None)`, `A-B` → `(A, Some(B))`; `None` when the part is neither.
pub(crate) fn step_part(part: &str) -> Option<(u64, Option<u64>)> {
    let num = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    match part.split_once('-') {
        None => Some((num(part)?, None)),
        Some((a, b)) => Some((num(a)?, Some(num(b)?))),
    }
}

/// `dump_stats`: a non-empty array of [`ACL_STATS`] names, only with `dump_data: stats`.
fn check_stats(dump: &Map<String, Value>, stats_data: bool, d: &mut Diagnostics) {
    let Some(v) = dump.get("dump_stats") else {
        return;
    };
    let Some(items) = v.as_array() else {
        d.error(
            "dump.dump_stats",
            format!("EP0001: must be an array of strings, got {}", kind(v)),
        );
        return;
    };
    if !stats_data {
        d.error(
            "dump.dump_stats",
            "EP0005: dump_stats needs dump_data \"stats\"",
        );
    }
    if items.is_empty() {
        d.error(
            "dump.dump_stats",
            format!(
                "EP0003: must not be empty; choose from {}",
                ACL_STATS.join(", ")
            ),
        );
    }
    for (i, it) in items.iter().enumerate() {
        if !it.as_str().is_some_and(|s| ACL_STATS.contains(&s)) {
            d.error(
                format!("dump.dump_stats[{i}]"),
                format!(
                    "EP0002: {it} is not allowed; allowed: {}",
                    ACL_STATS.join(", ")
                ),
            );
        }
    }
}

/// `dump_list`: an array of objects; watcher rules, blacklist and range rules.
fn check_list(
    dump: &Map<String, Value>,
    d: &mut Diagnostics,
    watcher: bool,
    level: Option<&str>,
    op_switch: bool,
) {
    let Some(v) = dump.get("dump_list") else {
        return;
    };
    let Some(items) = v.as_array() else {
        d.error(
            "dump.dump_list",
            format!("EP0001: must be an array of objects, got {}", kind(v)),
        );
        return;
    };
    for (i, item) in items.iter().enumerate() {
        let at = |k: &str| format!("dump.dump_list[{i}].{k}");
        let Some(m) = item.as_object() else {
            d.error(
                format!("dump.dump_list[{i}]"),
                format!("EP0001: must be an object, got {}", kind(item)),
            );
            continue;
        };
        for k in m.keys().filter(|k| !ITEM_KEYS.contains(&k.as_str())) {
            d.error(
                at(k),
                format!(
                    "EP0001: not a dump_list key; allowed: {}",
                    ITEM_KEYS.join(", ")
                ),
            );
        }
        let model = m.get("model_name");
        if let Some(mv) = model
            && !mv.as_str().is_some_and(|s| !s.is_empty() || op_switch)
        {
            d.error(
                at("model_name"),
                format!("EP0003: must be a non-empty string, got {mv}"),
            );
        }
        for k in ["layer", "watcher_nodes"] {
            if let Some(lv) = m.get(k) {
                match lv.as_array() {
                    Some(a) if a.iter().all(|x| x.as_str().is_some_and(|s| !s.is_empty())) => {
                        if k == "layer" && a.is_empty() && !op_switch {
                            d.error(at(k), "EP0003: must not be empty when present");
                        }
                    }
                    _ => d.error(
                        at(k),
                        format!("EP0001: must be an array of non-empty strings, got {lv}"),
                    ),
                }
            }
        }
        let nodes = m
            .get("watcher_nodes")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if watcher {
            if !nodes {
                d.error(
                    at("watcher_nodes"),
                    "EP0005: the watcher scene needs non-empty watcher_nodes in every dump_list item",
                );
            }
            if model.is_some() {
                d.error(
                    at("model_name"),
                    "EP0005: the watcher scene takes no model_name",
                );
            }
        } else if m.contains_key("watcher_nodes") {
            d.error(
                at("watcher_nodes"),
                "EP0005: watcher_nodes needs dump_scene \"watcher\"",
            );
        }
        for k in ["optype_blacklist", "opname_blacklist"] {
            let Some(bv) = m.get(k) else { continue };
            if level != Some("op") {
                d.error(at(k), "EP0005: blacklists need dump_level \"op\"");
            }
            check_blacklist(bv, &at(k), d);
        }
        if let Some(rv) = m.get("opname_range") {
            if level != Some("op") {
                d.error(
                    at("opname_range"),
                    "EP0005: opname_range needs dump_level \"op\"",
                );
            }
            if model.is_none() {
                d.error(
                    at("opname_range"),
                    "EP0005: opname_range needs a model_name",
                );
            }
            let ok = rv.as_array().is_some_and(|a| {
                a.iter().all(|r| {
                    r.as_object().is_some_and(|o| {
                        ["begin", "end"]
                            .iter()
                            .all(|k| o.get(*k).is_some_and(Value::is_string))
                    })
                })
            });
            if !ok {
                d.error(
                    at("opname_range"),
                    "EP0001: must be an array of {\"begin\": NAME, \"end\": NAME}",
                );
            }
        }
    }
}

/// A blacklist: at most [`MAX_PARTS`] `{"name": …, "pos": ["input0", "output1", …]}`.
fn check_blacklist(v: &Value, at: &str, d: &mut Diagnostics) {
    let Some(a) = v.as_array() else {
        d.error(
            at,
            format!("EP0001: must be an array of {{name, pos}}, got {}", kind(v)),
        );
        return;
    };
    if a.len() > MAX_PARTS {
        d.error(
            at,
            format!(
                "EP0003: {} entries; at most {MAX_PARTS} are allowed",
                a.len()
            ),
        );
    }
    for (i, e) in a.iter().enumerate() {
        let name_ok = e
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty());
        let pos_ok = e.get("pos").is_none_or(|p| {
            p.as_array().is_some_and(|ps| {
                ps.iter().all(|x| {
                    x.as_str().is_some_and(|s| {
                        ["input", "output"].iter().any(|io| {
                            s.strip_prefix(io).is_some_and(|n| {
                                !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
                            })
                        })
                    })
                })
            })
        });
        if !name_ok || !pos_ok {
            d.error(
                format!("{at}[{i}]"),
                format!(
                    "EP0003: {e} must be {{\"name\": NAME, \"pos\": [\"input0\", \"output1\", …]}}"
                ),
            );
        }
    }
}

/// A JSON value's kind, for messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dir() -> String {
        std::env::temp_dir().display().to_string()
    }

    fn errors(doc: Value) -> Vec<(String, String)> {
        check_acl(&doc)
            .unwrap_err()
            .errors()
            .map(|e| (e.path.clone(), e.message.clone()))
            .collect()
    }

    #[test]
    fn no_section_or_an_empty_one_is_no_dump() {
        for doc in [json!({}), json!({"dump": {}})] {
            assert_eq!(check_acl(&doc).unwrap().kind, AclDumpKind::None);
        }
        let e = errors(json!({"dump": []}));
        assert_eq!(e[0].0, "dump");
        assert!(e[0].1.starts_with("EP0001"), "{e:?}");
    }

    #[test]
    fn kinds_in_cann_order() {
        let p = dir();
        let ok = |doc: Value| check_acl(&doc).unwrap();
        assert_eq!(
            ok(json!({"dump": {"dump_path": p, "dump_list": [{"model_name": "m"}]}})).kind,
            AclDumpKind::Operators
        );
        assert_eq!(
            ok(json!({"dump": {"dump_path": p, "dump_debug": "on"}})).kind,
            AclDumpKind::Overflow
        );
        let e = ok(json!({"dump": {"dump_scene": "lite_exception", "dump_step": "x"}}));
        assert_eq!(e.kind, AclDumpKind::Exception);
        assert_eq!(
            e.warnings.warnings().count(),
            1,
            "dump_step is ignored there"
        );
        let w = ok(json!({"dump": {"dump_path": p, "dump_scene": "watcher",
            "dump_list": [{"layer": ["conv1"], "watcher_nodes": ["add_1"]}]}}));
        assert!(w.watcher);
        assert_eq!(w.kind, AclDumpKind::Operators);
        assert_eq!(
            ok(json!({"dump": {"dump_path": p, "dump_list": []}})).kind,
            AclDumpKind::None
        );
    }

    #[test]
    fn every_error_at_once_with_its_code() {
        let e = errors(json!({"dump": {
            "dump_mode": "both", "dump_level": 3, "dump_step": "5-2|x|7",
            "dump_stats": ["Max", "Median"], "dump_kernel_data": "all,printf,bogus",
            "dump_list": [{"model_name": "m", "watcher_nodes": ["a"], "opname_range": [{"begin": "a"}],
                           "optype_blacklist": [{"name": "Conv2D", "pos": ["input0", "weight"]}]}]
        }}));
        let got: Vec<(&str, &str)> = e.iter().map(|(p, m)| (p.as_str(), &m[..6])).collect();
        assert_eq!(
            got,
            [
                ("dump.dump_mode", "EP0002"),
                ("dump.dump_level", "EP0001"),
                ("dump.dump_path", "EP0003"),
                ("dump.dump_step", "EP0003"),
                ("dump.dump_step", "EP0003"),
                ("dump.dump_kernel_data", "EP0002"),
                ("dump.dump_stats", "EP0005"),
                ("dump.dump_stats[1]", "EP0002"),
                ("dump.dump_list[0].watcher_nodes", "EP0005"),
                ("dump.dump_list[0].optype_blacklist", "EP0005"),
                ("dump.dump_list[0].optype_blacklist[0]", "EP0003"),
                ("dump.dump_list[0].opname_range", "EP0005"),
                ("dump.dump_list[0].opname_range", "EP0001"),
            ]
        );
        assert!(
            e[0].1
                .contains("\"both\" is not allowed; allowed: input, output, all")
        );
        assert!(e[3].1.contains("\"5-2\": the first step is greater"));
    }

    #[test]
    fn watcher_and_overflow_conflicts() {
        let p = dir();
        let e = errors(
            json!({"dump": {"dump_path": p, "dump_scene": "watcher", "dump_mode": "all",
            "dump_debug": "on", "dump_list": [{"model_name": "m"}]}}),
        );
        let paths: Vec<&str> = e.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "dump.dump_scene",
                "dump.dump_list[0].watcher_nodes",
                "dump.dump_list[0].model_name",
                "dump.dump_mode"
            ]
        );
        assert!(e.iter().all(|(_, m)| m.starts_with("EP0005")), "{e:?}");
    }

    #[test]
    fn dump_path_must_be_a_directory_of_at_most_512_characters() {
        let e = errors(json!({"dump": {"dump_path": "/no/such/dir", "dump_debug": "on"}}));
        assert!(e[0].1.contains("must be an existing directory"), "{e:?}");
        let e = errors(json!({"dump": {"dump_path": "/".repeat(513), "dump_debug": "on"}}));
        assert!(e[0].1.contains("513 characters; at most 512"), "{e:?}");
        // A remote `host:path` is not checked here.
        let ok = check_acl(&json!({"dump": {"dump_path": "10.0.0.1:/dump", "dump_debug": "on"}}));
        assert_eq!(ok.unwrap().kind, AclDumpKind::Overflow);
    }

    #[test]
    fn steps() {
        assert_eq!(step_part("12"), Some((12, None)));
        assert_eq!(step_part("3-5"), Some((3, Some(5))));
        for bad in ["", "-", "3-", "-5", "a", "1-2-3", "+1"] {
            assert_eq!(step_part(bad), None, "{bad:?}");
        }
        let p = dir();
        let many: Vec<String> = (0..101).map(|i| i.to_string()).collect();
        let e = errors(
            json!({"dump": {"dump_path": p, "dump_debug": "on", "dump_step": many.join("|")}}),
        );
        assert!(e[0].1.contains("101 parts; at most 100"), "{e:?}");
        // a == b is allowed by acl.json (GE, through torchair, refuses it).
        assert!(
            check_acl(&json!({"dump": {"dump_path": p, "dump_debug": "on", "dump_step": "4-4"}}))
                .is_ok()
        );
    }

    fn request(doc: Value) -> GeRequest {
        acl_request(&doc).unwrap()
    }

    #[test]
    fn each_key_translates() {
        use crate::config::InputOutput;
        use crate::layout::{GeStat, GeStats};
        let p = dir();
        let base = |extra: Value| {
            let mut d = json!({"dump_path": p, "dump_list": [{"model_name": "m.1"}]});
            for (k, v) in extra.as_object().unwrap() {
                d[k] = v.clone();
            }
            json!({ "dump": d })
        };
        let r = request(base(json!({})));
        assert_eq!(r.dump_path, std::path::PathBuf::from(&p));
        assert_eq!(r.prefix, None);
        assert_eq!(r.input_output, InputOutput::Outputs, "CANN's default");
        assert_eq!(r.steps, "all");
        assert_eq!(r.model_name.as_deref(), Some("m_1"), "sanitised as GE does");
        assert_eq!(r.layers, None);
        assert_eq!(r.stats, None);
        assert!(!r.npy);
        for (mode, io) in [
            ("input", InputOutput::Inputs),
            ("output", InputOutput::Outputs),
            ("all", InputOutput::Both),
        ] {
            assert_eq!(request(base(json!({"dump_mode": mode}))).input_output, io);
        }
        assert_eq!(
            request(base(json!({"dump_step": "0|5|10-20"}))).steps,
            "0|5|10-20"
        );
        assert_eq!(
            request(base(json!({"dump_data": "stats"}))).stats,
            Some(GeStats { chosen: None })
        );
        assert_eq!(
            request(base(
                json!({"dump_data": "stats", "dump_stats": ["L2norm", "Min"]})
            ))
            .stats,
            Some(GeStats {
                chosen: Some(vec![GeStat::Min, GeStat::L2norm])
            })
        );
        for level in ["op", "kernel", "all"] {
            assert_eq!(
                request(base(json!({"dump_level": level}))),
                request(base(json!({}))),
                "dump_level {level} writes the same dump"
            );
        }
        let w = request(base(json!({"dump_kernel_data": "printf"}))).warnings;
        assert_eq!(w.warnings().next().unwrap().path, "dump.dump_kernel_data");
        // Layers of every item, one model.
        let r = request(json!({"dump": {"dump_path": p, "dump_list": [
            {"model_name": "m", "layer": ["a", "b"]}, {"model_name": "m", "layer": ["c"]}]}}));
        assert_eq!(r.layers, Some(vec!["a".into(), "b".into(), "c".into()]));
        // An item without layer dumps the whole model.
        let r = request(json!({"dump": {"dump_path": p, "dump_list": [
            {"model_name": "m", "layer": ["a"]}, {"model_name": "m"}]}}));
        assert_eq!(r.layers, None);
        // Layers without a model name: opdump's default model directory.
        let r = request(json!({"dump": {"dump_path": p, "dump_list": [{"layer": ["a"]}]}}));
        assert_eq!(r.model_name.as_deref(), Some("Net"));
        // Single-operator dump: no model directories, every kernel.
        let r = request(json!({"dump": {"dump_path": p, "dump_op_switch": "on"}}));
        assert_eq!((r.model_name, r.layers), (None, None));
    }

    #[test]
    fn what_the_dumper_cannot_run_is_every_error_at_once() {
        let p = dir();
        let e = acl_request(
            &json!({"dump": {"dump_path": "10.0.0.1:/d", "dump_level": "op",
            "dump_list": [
                {"model_name": "a", "optype_blacklist": [{"name": "Conv2D"}]},
                {"model_name": "b", "layer": ["x"], "opname_range": [{"begin": "x", "end": "y"}]}
            ]}}),
        )
        .unwrap_err();
        let got: Vec<(&str, &str)> = e
            .errors()
            .map(|d| (d.path.as_str(), d.message.as_str()))
            .collect();
        let paths: Vec<&str> = got.iter().map(|g| g.0).collect();
        assert_eq!(
            paths,
            [
                "dump.dump_path",
                "dump.dump_list[0].optype_blacklist",
                "dump.dump_list[1].opname_range",
                "dump.dump_list",
            ]
        );
        assert!(got[0].1.contains("\"10.0.0.1:/d\""), "{got:?}");
        assert!(got[1].1.contains("Conv2D"), "{got:?}");
        assert!(got[3].1.contains("2 models (a, b)"), "{got:?}");
        // CANN's errors come first, then opdump's, all at once.
        let e = acl_request(&json!({"dump": {"dump_path": p, "dump_mode": "both",
            "dump_list": [{"model_name": "a"}, {"model_name": "b"}]}}))
        .unwrap_err();
        let paths: Vec<&str> = e.errors().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["dump.dump_mode", "dump.dump_list"]);
        // The scenes and modes opdump does not run.
        for (doc, path, text) in [
            (json!({"dump": {"dump_path": p}}), "dump", "nothing to dump"),
            (
                json!({"dump": {"dump_scene": "aic_err_brief_dump"}}),
                "dump.dump_scene",
                "\"aic_err_brief_dump\": exception dumps",
            ),
            (
                json!({"dump": {"dump_path": p, "dump_debug": "on"}}),
                "dump.dump_debug",
                "overflow dump",
            ),
        ] {
            let e = acl_request(&doc).unwrap_err();
            let first = e.errors().next().unwrap();
            assert_eq!(first.path, path, "{doc}");
            assert!(first.message.contains(text), "{doc}: {}", first.message);
        }
    }

    /// The watcher scene runs: the watched nodes' outputs are what is dumped, `layer` goes to
    /// the watcher (after which kernels the watched outputs are read again).
    #[test]
    fn the_watcher_scene_dumps_its_watched_nodes_and_watches_them_after_its_layers() {
        let p = dir();
        let r = acl_request(&json!({"dump": {"dump_path": p, "dump_scene": "watcher",
            "dump_list": [{"layer": ["conv1", "relu1"], "watcher_nodes": ["add_1"]},
                          {"watcher_nodes": ["mul_2"]}]}}))
        .unwrap();
        // What is dumped: every item's watched nodes.
        assert_eq!(r.layers, Some(vec!["add_1".to_owned(), "mul_2".to_owned()]));
        let w = r.watcher.expect("watcher settings");
        assert_eq!(w.items.len(), 2);
        assert_eq!(
            (w.items[0].nodes.as_slice(), w.items[0].layer.as_slice()),
            (
                &["add_1".to_owned()][..],
                &["conv1".to_owned(), "relu1".to_owned()][..]
            )
        );
        assert!(w.items[1].layer.is_empty());
        assert_eq!(r.input_output, super::super::InputOutput::Outputs);
        let one = acl_request(&json!({"dump": {"dump_path": p, "dump_scene": "watcher",
            "dump_list": [{"layer": ["conv1"], "watcher_nodes": ["add_1", "mul_2"]}]}}))
        .unwrap();
        assert_eq!(
            one.layers,
            Some(vec!["add_1".to_owned(), "mul_2".to_owned()])
        );
        // Without the scene there is no watcher.
        let plain = acl_request(&json!({"dump": {"dump_path": p,
            "dump_list": [{"model_name": "m", "layer": ["conv1"]}]}}))
        .unwrap();
        assert!(plain.watcher.is_none());
        assert_eq!(plain.layers, Some(vec!["conv1".to_owned()]));
    }
}
