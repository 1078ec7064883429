//! `common_dump_settings`: existence checks first, then values in MindSpore's parse order.

use serde_json::{Map, Value};

use dump_core::iteration::{IterationSpec, SegmentKind};

use super::diagnostics::Diagnostics;
use super::env::{DIAGNOSTIC_PATH_VAR, Env, diagnostic_data_path};
use super::kernels::normalize_entry;
use super::read::{Got, Section, describe};
use super::types::{Device, DumpMode, FileFormat, InputOutput, OpDebugMode, SavedData};

/// Every key MindSpore 2.10 reads in `common_dump_settings`.
pub const COMMON_KEYS: [&str; 13] = [
    "dump_mode",
    "path",
    "net_name",
    "iteration",
    "input_output",
    "kernels",
    "support_device",
    "op_debug_mode",
    "file_format",
    "overflow_number",
    "saved_data",
    "initial_iteration",
    "statistic_category",
];

/// The section's values as read, before cross-field rules. `None` = absent or invalid.
#[derive(Debug, Default)]
pub(crate) struct Common {
    pub dump_mode: Option<DumpMode>,
    pub path: Option<String>,
    pub net_name: Option<String>,
    pub iteration: Option<String>,
    pub input_output: Option<InputOutput>,
    /// Normalised entries, in order, without empties and duplicates.
    pub kernels: Vec<String>,
    /// For each entry of `kernels`, its index in the JSON array.
    pub kernel_indices: Vec<usize>,
    pub support_device: Vec<u32>,
    /// As coerced (1/2 → 3); `None` when absent (0).
    pub op_debug_mode: Option<OpDebugMode>,
    pub file_format: Option<FileFormat>,
    pub overflow_number: Option<u32>,
    pub saved_data: Option<SavedData>,
    pub initial_iteration: Option<u32>,
    /// The raw `statistic_category` value, checked later: MindSpore reads it only when
    /// saved_data is statistic or full.
    pub statistic_category: Option<Value>,
}

/// Path characters MindSpore allows.
fn path_char_ok(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '/'
}

fn net_name_char_ok(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// Reads `common_dump_settings` (`map`) for `device`; `e2e_enabled` says whether the e2e
/// section is in force (it decides whether `op_debug_mode` is required and `file_format` read).
pub(crate) fn parse_common(
    map: &Map<String, Value>,
    device: Device,
    e2e_enabled: bool,
    env: &dyn Env,
    d: &mut Diagnostics,
) -> Common {
    let sec = Section {
        name: "common_dump_settings",
        map,
    };
    let mut c = Common::default();

    // 1. Existence checks, all before any value check.
    let mut required = vec![
        "dump_mode",
        "net_name",
        "iteration",
        "input_output",
        "kernels",
        "support_device",
    ];
    if !e2e_enabled {
        required.push("op_debug_mode");
    }
    for key in required {
        if !map.contains_key(key) {
            d.error(
                sec.path(key),
                format!("Check dump json failed, {key} not found"),
            );
        }
    }

    // 2. Values, in MindSpore's order.
    match sec.uint(
        "dump_mode",
        "Dump config parse failed, dump_mode should be unsigned int type",
        d,
    ) {
        Got::Val(0) => c.dump_mode = Some(DumpMode::All),
        Got::Val(1) => c.dump_mode = Some(DumpMode::Kernels),
        Got::Val(2) if device == Device::Ascend => c.dump_mode = Some(DumpMode::SetDump),
        Got::Val(2) => d.error(
            sec.path("dump_mode"),
            format!(
                "Set dump is only supported in Ascend async dump. Please set dump_mode to 0 or 1. \
                 (got 2 for device {device})"
            ),
        ),
        Got::Val(n) => d.error(
            sec.path("dump_mode"),
            format!("Dump config parse failed, dump_mode should be 0, 1 or 2, but got {n}"),
        ),
        _ => {}
    }

    c.path = parse_path(&sec, env, d);

    match sec.string(
        "net_name",
        "Dump config parse failed, net_name should be string type",
        d,
    ) {
        Got::Val(s) if !s.is_empty() && s.chars().all(net_name_char_ok) => {
            c.net_name = Some(s.to_owned());
        }
        Got::Val(s) => d.error(
            sec.path("net_name"),
            format!(
                "net_name only supports alphabetic, digit, or {{'-', '_'}}, but got: {s} \
                 (allowed: a non-empty name of ASCII letters, digits, '-' and '_')"
            ),
        ),
        _ => {}
    }

    if let Got::Val(s) = sec.string(
        "iteration",
        "Dump config parse failed, iteration should be string type",
        d,
    ) {
        check_iteration(&sec, s, d);
        if IterationSpec::parse(s).is_ok() {
            c.iteration = Some(s.to_owned());
        }
    }

    match sec.uint(
        "input_output",
        "Dump config parse failed, input_output should be unsigned int type",
        d,
    ) {
        Got::Val(0) => c.input_output = Some(InputOutput::Both),
        Got::Val(1) => c.input_output = Some(InputOutput::Inputs),
        Got::Val(2) => c.input_output = Some(InputOutput::Outputs),
        Got::Val(n) => d.error(
            sec.path("input_output"),
            format!("Dump Json Parse Failed. input_output should be 0, 1, 2; got {n}"),
        ),
        _ => {}
    }

    if let Got::Val(items) = sec.array(
        "kernels",
        "Dump config parse failed, kernels should be array type",
        d,
    ) {
        let mut seen = std::collections::HashSet::new();
        for (i, item) in items.iter().enumerate() {
            let e = normalize_entry(item);
            if e.is_empty() {
                d.warn(
                    format!("{}[{i}]", sec.path("kernels")),
                    "empty kernels entry is skipped",
                );
            } else if !seen.insert(e.clone()) {
                d.warn(
                    format!("{}[{i}]", sec.path("kernels")),
                    format!("Duplicate dump kernel name:{e}"),
                );
            } else {
                c.kernels.push(e);
                c.kernel_indices.push(i);
            }
        }
    }

    if let Got::Val(items) = sec.array(
        "support_device",
        "Dump config parse failed, support_device should be array type",
        d,
    ) {
        parse_support_device(&sec, items, &mut c.support_device, d);
    }

    match sec.uint(
        "op_debug_mode",
        "Dump config parse failed, op_debug_mode should be unsigned int type",
        d,
    ) {
        Got::Val(0) => c.op_debug_mode = Some(OpDebugMode::Off),
        Got::Val(m @ (1 | 2)) => {
            d.warn(
                sec.path("op_debug_mode"),
                format!(
                    "op_debug_mode {m} is treated as 3 (overflow dump), as MindSpore does silently"
                ),
            );
            c.op_debug_mode = Some(OpDebugMode::Overflow);
        }
        Got::Val(3) => c.op_debug_mode = Some(OpDebugMode::Overflow),
        Got::Val(4) => c.op_debug_mode = Some(OpDebugMode::Exception),
        Got::Val(n) => d.error(
            sec.path("op_debug_mode"),
            format!("Dump Json Parse Failed. op_debug_mode should be 0, 3, 4; got {n}"),
        ),
        _ => {}
    }

    if !e2e_enabled {
        match sec.string(
            "file_format",
            "Dump config parse failed, file_format should be string type",
            d,
        ) {
            Got::Val("bin") => c.file_format = Some(FileFormat::Bin),
            Got::Val("npy") => c.file_format = Some(FileFormat::Npy),
            Got::Val(other) => d.error(
                sec.path("file_format"),
                format!(
                    "Dump Json Parse Failed. file_format only supports bin or npy, but got: {other}"
                ),
            ),
            _ => {}
        }
    } else if map.contains_key("file_format") {
        d.warn(
            sec.path("file_format"),
            "file_format is ignored: it only applies to Ascend dump without e2e_dump_settings",
        );
    }

    // Its presence is checked before its type: with op_debug_mode other than 3 MindSpore
    // rejects the key whatever its value.
    if c.op_debug_mode == Some(OpDebugMode::Overflow) {
        if let Got::Val(n) = sec.uint(
            "overflow_number",
            "Dump config parse failed, overflow_number should be unsigned int type",
            d,
        ) {
            c.overflow_number = Some(n);
        }
    } else if map.contains_key("overflow_number") {
        d.error(
            sec.path("overflow_number"),
            format!(
                "overflow_number only need to be set when op_debug_mode is 3. (got {}; remove \
                 it, or set op_debug_mode to 3)",
                describe(&map["overflow_number"])
            ),
        );
    }

    match sec.string(
        "saved_data",
        "Dump config parse failed, saved_data should be string type",
        d,
    ) {
        Got::Val("tensor") => c.saved_data = Some(SavedData::Tensor),
        Got::Val("statistic") => c.saved_data = Some(SavedData::Statistic),
        Got::Val("full") => c.saved_data = Some(SavedData::Full),
        Got::Val(other) => d.error(
            sec.path("saved_data"),
            format!(
                "Dump Json parse failed, saved_data only supports statistic, tensor, or full, but \
                 got: {other}. Please set saved_data to either statistic, tensor, or full"
            ),
        ),
        _ => {}
    }

    if let Got::Val(n) = sec.uint(
        "initial_iteration",
        "Dump config parse failed, initial_iteration should be unsigned int type",
        d,
    ) {
        c.initial_iteration = Some(n);
    }

    // Read (and type-checked) later, only when saved_data asks for statistics.
    c.statistic_category = map.get("statistic_category").cloned();

    sec.unknown_keys(&COMMON_KEYS, d);
    c
}

/// `path`: explicit, or `MS_DIAGNOSTIC_DATA_PATH/debug_dump`; whitelist and absolute rules.
fn parse_path(sec: &Section<'_>, env: &dyn Env, d: &mut Diagnostics) -> Option<String> {
    let (path, where_) = match sec.string(
        "path",
        "Dump config parse failed, path should be string type",
        d,
    ) {
        Got::Bad => return None,
        Got::Val(p) if !p.is_empty() => (p.to_owned(), sec.path("path")),
        _ => match diagnostic_data_path(env) {
            Some(base) => (
                format!("{base}/debug_dump"),
                format!("{} (from {DIAGNOSTIC_PATH_VAR})", sec.path("path")),
            ),
            None => {
                d.error(
                    sec.path("path"),
                    format!(
                        "Dump path is empty. Please set it in dump json file or environment \
                         variable `{DIAGNOSTIC_PATH_VAR}`."
                    ),
                );
                return None;
            }
        },
    };
    let mut ok = true;
    if !path.chars().all(path_char_ok) {
        let bad: String = path.chars().filter(|&c| !path_char_ok(c)).take(8).collect();
        d.error(
            where_.clone(),
            format!(
                "Dump path only support alphabets, digit or {{'-', '_', '/'}}, but got:{path} \
                 (offending characters: {bad:?})"
            ),
        );
        ok = false;
    }
    if !path.starts_with('/') {
        d.error(
            where_,
            format!("Dump path only support absolute path and should start with '/' (got: {path})"),
        );
        ok = false;
    }
    ok.then_some(path)
}

/// Validates `iteration` and warns about segments that can never match.
fn check_iteration(sec: &Section<'_>, s: &str, d: &mut Diagnostics) {
    let path = sec.path("iteration");
    match IterationSpec::parse(s) {
        Err(e) => {
            let at = match e {
                dump_core::Error::InvalidIteration { at } => at,
                _ => 0,
            };
            let detail = if s.is_empty() {
                "the value is empty".to_owned()
            } else {
                format!("bad character at byte {at}")
            };
            d.error(
                path,
                format!(
                    "iteration only supports digits, {{'-', '|'}}, or just \"all\" but got: {s} \
                     ({detail}; allowed: \"all\", or steps and inclusive ranges separated by \
                     '|', e.g. \"0|5-8|100-120\"; spaces around '|' are accepted by opdump)"
                ),
            );
        }
        Ok(spec) => {
            let mut any_live = spec.is_all();
            for seg in spec.segments() {
                if !seg.never_matches() {
                    any_live = true;
                    continue;
                }
                let why = match seg.kind {
                    SegmentKind::Empty => "it is empty".to_owned(),
                    SegmentKind::Reversed(lo, hi) => {
                        format!("the range is reversed ({lo} > {hi})")
                    }
                    SegmentKind::Malformed => {
                        "a range needs exactly one '-' with a number on both sides".to_owned()
                    }
                    SegmentKind::Overflow => "the number does not fit in 64 bits".to_owned(),
                    _ => format!("steps are at most {}", u32::MAX),
                };
                d.warn(
                    path.clone(),
                    format!(
                        "segment {:?} of {s:?} can never match: {why} (MindSpore accepts it \
                         silently)",
                        seg.text
                    ),
                );
            }
            if !any_live {
                d.warn(
                    path,
                    format!("iteration {s:?} matches no step: nothing will be dumped"),
                );
            }
        }
    }
}

/// `support_device`: each element converted to a device id as MindSpore's `get<uint32_t>`
/// does (numbers truncated/wrapped, booleans 0/1, with a warning); other types are errors.
fn parse_support_device(
    sec: &Section<'_>,
    items: &[Value],
    out: &mut Vec<u32>,
    d: &mut Diagnostics,
) {
    let mut seen = std::collections::HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("{}[{i}]", sec.path("support_device"));
        let id = match item {
            Value::Number(n) => {
                if let Some(u) = n.as_u64().filter(|_| !n.is_f64()) {
                    let id = u as u32;
                    if u > u64::from(u32::MAX) {
                        d.warn(path.clone(), format!("device id {u} wraps to {id}"));
                    }
                    id
                } else if let Some(neg) = n.as_i64() {
                    let id = neg as u32;
                    d.warn(
                        path.clone(),
                        format!("negative device id {neg} wraps to {id}"),
                    );
                    id
                } else {
                    let f = n.as_f64().unwrap_or(0.0);
                    let id = f as u32;
                    d.warn(path.clone(), format!("device id {f} is truncated to {id}"));
                    id
                }
            }
            Value::Bool(b) => {
                let id = u32::from(*b);
                d.warn(path.clone(), format!("device id {b} is read as {id}"));
                id
            }
            other => {
                d.error(
                    path,
                    format!(
                        "Dump config parse failed, support_device elements should be unsigned \
                         int type (MindSpore fails with nlohmann type_error 302: type must be \
                         number); got {}, allowed: device ids 0 to {}",
                        describe(other),
                        u32::MAX
                    ),
                );
                continue;
            }
        };
        if !seen.insert(id) {
            d.warn(path, format!("Duplicate support device:{id}"));
        } else {
            out.push(id);
        }
    }
}
