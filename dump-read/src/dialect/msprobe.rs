//! msprobe's layout (MindStudio Probe, PyTorch and MindSpore dynamic mode):
//! `step{N}/rank{R}|rank|proc{pid}/` holding `dump.json` (every API or module call with the
//! statistics of its tensors), `stack.json`, `construct.json` (the module hierarchy) and, for
//! the tensor task, `dump_tensor_data/` with `.pt` (PyTorch) or `.npy` (MindSpore) files.
//!
//! Each call (`Functional.conv2d.0.forward`, `Module.conv1.Conv2d.forward.0`) becomes a
//! kernel: op name = the msprobe name, op type = the API (`conv2d`) or module class
//! (`Conv2d`), iteration = the step. Its tensors: `input_args` then `input_kwargs` then a
//! module's `parameters` are inputs, `output` outputs (a backward call's `input` and `output`
//! likewise), slots numbered depth-first over every leaf of the list (a nested list's tensors
//! get consecutive slots; `None` and scalars take a slot too, so `conv2d`'s weight is input
//! 1). The timestamp is a counter in `dump.json` order. `Max`/`Min`/`Mean`/`Norm` are the
//! row's statistics, `md5` (CRC-32 in dynamic mode; `0x` + 16 hex digits in `xor` mode, or
//! the value itself for a 0-d tensor) its digest. A listed `data_name` whose
//! file is missing is a [`Problem`]; its statistics still compare.
//!
//! Python's `json.dump` writes NaN and infinities as bare `NaN`/`Infinity`/`-Infinity`
//! tokens; they are read as those values.

use std::path::{Path, PathBuf};

use dump_core::DType;
use dump_stats::{Io, TensorId};
use serde_json::{Map, Value};

use super::Dialect;
use super::walk::subdirs;
use crate::{Dump, Error, Problem, Stats, TensorFile, TensorRecord, TensorSource};

/// Reads msprobe's `dump.json` trees.
#[derive(Clone, Copy, Debug, Default)]
pub struct Msprobe;

/// Largest `dump.json` read.
const MAX_DUMP_JSON: u64 = 1 << 30;
/// Largest `stack.json` / `construct.json` read.
const MAX_SIDE_JSON: u64 = 256 << 20;
/// Nesting of argument lists followed at most (msprobe caps its own recursion at 400).
const MAX_ARG_DEPTH: usize = 64;

/// A parent-child edge of `construct.json`: a call and the module call it ran in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleEdge {
    /// Rank.
    pub rank: u32,
    /// Step.
    pub iteration: u64,
    /// The call (`Module.layer1.0.conv1.Conv2d.forward.0`, or an API at level mix).
    pub node: String,
    /// The module call it ran in (`None` at the top).
    pub parent: Option<String>,
}

fn number(s: &str, prefix: &str) -> Option<u64> {
    let rest = s.strip_prefix(prefix)?;
    (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
        .then(|| rest.parse().ok())
        .flatten()
}

/// Whether `name` names a rank directory of msprobe's (`rank3`, `rank`, `proc8383`).
fn is_rank_dir(name: &str) -> bool {
    name == "rank" || number(name, "rank").is_some() || number(name, "proc").is_some()
}

fn has_dump_json(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join("dump.json")).is_ok_and(|m| m.is_file())
}

/// The `(step, rank, directory)` triples under `root`: `root` is a dump path (holding
/// `step{N}/`), a step directory, or a rank directory.
fn rank_dirs(root: &Path) -> Vec<(u64, u32, PathBuf)> {
    let name = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_owned()
    };
    let ranks_of = |step: u64, dir: &Path| -> Vec<(u64, u32, PathBuf)> {
        let dirs: Vec<(String, PathBuf)> = subdirs(dir)
            .into_iter()
            .filter(|(n, p)| is_rank_dir(n) && has_dump_json(p))
            .collect();
        let procs = dirs.iter().filter(|(n, _)| n.starts_with("proc")).count();
        dirs.into_iter()
            .enumerate()
            .map(|(i, (n, p))| {
                // `proc{pid}` has no rank: one is rank 0, several are numbered in name order.
                let rank = number(&n, "rank").map(|r| r as u32);
                let rank = rank.unwrap_or(if procs > 1 { i as u32 } else { 0 });
                (step, rank, p)
            })
            .collect()
    };
    if has_dump_json(root) {
        let rank = number(&name(root), "rank").unwrap_or(0) as u32;
        let step = root
            .parent()
            .and_then(|p| number(&name(p), "step"))
            .unwrap_or(0);
        return vec![(step, rank, root.to_path_buf())];
    }
    if let Some(step) = number(&name(root), "step") {
        return ranks_of(step, root);
    }
    subdirs(root)
        .into_iter()
        .filter_map(|(n, p)| Some((number(&n, "step")?, p)))
        .flat_map(|(s, p)| ranks_of(s, &p))
        .collect()
}

impl Dialect for Msprobe {
    fn name(&self) -> &'static str {
        "msprobe"
    }

    fn describe(&self) -> &'static str {
        "msprobe's layout (step{N}/rank{R}|proc{pid}/dump.json)"
    }

    fn detect(&self, root: &Path) -> bool {
        if has_dump_json(root) {
            return true;
        }
        let in_step = |d: &Path| {
            subdirs(d)
                .iter()
                .any(|(n, p)| is_rank_dir(n) && has_dump_json(p))
        };
        if root
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| number(n, "step").is_some())
        {
            return in_step(root);
        }
        subdirs(root)
            .iter()
            .any(|(n, p)| number(n, "step").is_some() && in_step(p))
    }

    fn read(&self, root: &Path) -> Result<Dump, Error> {
        let mut dump = Dump {
            root: root.to_path_buf(),
            dialect: self.name(),
            ..Dump::default()
        };
        for (step, rank, dir) in rank_dirs(root) {
            read_rank(step, rank, &dir, &mut dump);
        }
        Ok(dump)
    }
}

/// Rewrites Python's bare `NaN`, `Infinity` and `-Infinity` (outside strings) as the strings
/// `"NaN"`, `"Infinity"`, `"-Infinity"`, which serde_json reads; the statistics reader turns
/// them back into numbers.
pub(crate) fn python_json_to_json(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("NaN") && !text.contains("Infinity") {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 64);
    let b = text.as_bytes();
    let (mut i, mut in_str, mut from) = (0, false, 0);
    while i < b.len() {
        let c = b[i];
        if in_str {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
            }
            i += 1;
            continue;
        }
        if c == b'"' {
            in_str = true;
            i += 1;
            continue;
        }
        let token = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|t| b[i..].starts_with(t.as_bytes()));
        if let Some(t) = token {
            out.push_str(&text[from..i]);
            out.push('"');
            out.push_str(t);
            out.push('"');
            i += t.len();
            from = i;
            continue;
        }
        i += 1;
    }
    out.push_str(&text[from..]);
    out.into()
}

fn read_json(path: &Path, max: u64, dump: &mut Dump) -> Option<Value> {
    let problem = |dump: &mut Dump, message: String| {
        dump.problems.push(Problem {
            path: path.to_path_buf(),
            message,
        })
    };
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        problem(
            dump,
            "not a regular file (symlinks are not followed)".into(),
        );
        return None;
    }
    if meta.len() > max {
        problem(
            dump,
            format!(
                "{} bytes, more than the {max} read for this file",
                meta.len()
            ),
        );
        return None;
    }
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            problem(dump, e.to_string());
            return None;
        }
    };
    match serde_json::from_str(&python_json_to_json(&text)) {
        Ok(v) => Some(v),
        Err(e) => {
            problem(dump, format!("not valid JSON: {e}"));
            None
        }
    }
}

/// The module path and class of a parameter-gradient entry:
/// `Module.layer1.0.conv1.Conv2d.parameters_grad.0` → (`layer1.0.conv1`, `Conv2d`), `Cell.`
/// on MindSpore; the counter is optional (opdump before 2026-11-27 wrote none); a root
/// module's entry (`Module.Net.parameters_grad.0`) has the path `""`. `None` for any other
/// name.
pub(crate) fn parameters_grad_of(name: &str) -> Option<(&str, &str)> {
    let rest = name
        .strip_prefix("Module.")
        .or_else(|| name.strip_prefix("Cell."))?;
    let rest = match rest.rsplit_once('.') {
        Some((r, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => r,
        _ => rest,
    };
    let rest = rest.strip_suffix(".parameters_grad")?;
    match rest.rsplit_once('.') {
        Some((path, class)) if !path.is_empty() && !class.is_empty() => Some((path, class)),
        None if !rest.is_empty() => Some(("", rest)),
        _ => None,
    }
}

/// Op type of an msprobe name: the API (`Functional.conv2d.0.forward` → `conv2d`,
/// `Tensor.__add__.1.backward` → `__add__`) or the module class
/// (`Module.conv1.Conv2d.forward.0` → `Conv2d`, `Module.fc.Linear.parameters_grad.0` →
/// `Linear`); `None` when the name has neither form.
pub fn op_type_of(name: &str) -> Option<&str> {
    if let Some((_, class)) = parameters_grad_of(name) {
        return Some(class);
    }
    let parts: Vec<&str> = name.split('.').collect();
    let n = parts.len();
    let is_dir = |s: &str| s == "forward" || s == "backward";
    let is_num = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if (parts[0] == "Module" || parts[0] == "Cell") && n >= 3 {
        if n >= 4 && is_num(parts[n - 1]) && is_dir(parts[n - 2]) {
            return Some(parts[n - 3]);
        }
        return None;
    }
    if n >= 4 && is_dir(parts[n - 1]) && is_num(parts[n - 2]) {
        // The API may itself hold dots (`Torch.nn.functional.x`): everything between the
        // prefix and the counter, its last component as the kind.
        return Some(parts[n - 3]);
    }
    None
}

/// A dtype string of msprobe's: `torch.float32`, MindSpore's `Float32`/`BFloat16`, numpy's
/// `float32`, torch's `torch.float8_e4m3fn`/`torch.float8_e5m2` (and the FNUZ pair).
fn dtype_of(s: &str) -> Option<DType> {
    let s = s.strip_prefix("torch.").unwrap_or(s).to_ascii_lowercase();
    Some(match s.as_str() {
        "float32" | "float" => DType::Float32,
        "float16" | "half" => DType::Float16,
        "bfloat16" => DType::BFloat16,
        "float64" | "double" => DType::Float64,
        "int8" => DType::Int8,
        "int16" | "short" => DType::Int16,
        "int32" | "int" => DType::Int32,
        "int64" | "long" => DType::Int64,
        "uint8" => DType::UInt8,
        "uint16" => DType::UInt16,
        "uint32" => DType::UInt32,
        "uint64" => DType::UInt64,
        "bool" => DType::Bool,
        "complex64" => DType::Complex64,
        "complex128" => DType::Complex128,
        // torch's float8 names (msprobe writes their values as float32), MindSpore's TypeId
        // spelling lower-cased.
        "float8_e4m3fn" | "float8e4m3fn" => DType::Float8E4M3FN,
        "float8_e5m2" | "float8e5m2" => DType::Float8E5M2,
        "uint4" => DType::UInt4,
        "float8_e4m3fnuz" | "float8e4m3fnuz" => DType::Float8E4M3FNUZ,
        "float8_e5m2fnuz" | "float8e5m2fnuz" => DType::Float8E5M2FNUZ,
        _ => return None,
    })
}

fn stat(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(*b as u8 as f64),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `v` is a tensor entry (`type` names a tensor class, with `dtype` and `shape`).
fn is_tensor(v: &Map<String, Value>) -> bool {
    v.get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t.contains("Tensor") || t.contains("ndarray"))
        && v.contains_key("dtype")
        && v.contains_key("shape")
}

struct Walk<'a> {
    step: u64,
    rank: u32,
    dir: &'a Path,
    json: &'a Path,
    clock: u64,
    /// The parameter whose gradients are being read (a `parameters_grad` entry's key).
    param: Option<String>,
    dump: &'a mut Dump,
}

impl Walk<'_> {
    fn problem(&mut self, path: &Path, message: String) {
        self.dump.problems.push(Problem {
            path: path.to_path_buf(),
            message,
        });
    }

    /// Every leaf of `v` depth-first, numbering slots from `*slot`.
    fn leaves(&mut self, call: &str, io: Io, v: &Value, slot: &mut u32, depth: usize) {
        if depth > MAX_ARG_DEPTH {
            let json = self.json.to_path_buf();
            self.problem(
                &json,
                format!(
                    "{call}: arguments nest more than {MAX_ARG_DEPTH} deep; the rest is skipped"
                ),
            );
            return;
        }
        match v {
            Value::Array(items) => {
                for x in items {
                    self.leaves(call, io, x, slot, depth + 1);
                }
            }
            Value::Object(m) if is_tensor(m) => {
                self.tensor(call, io, *slot, m);
                *slot += 1;
            }
            Value::Object(m) if !m.contains_key("type") => {
                // kwargs / parameters: name → value, in order.
                for x in m.values() {
                    self.leaves(call, io, x, slot, depth + 1);
                }
            }
            _ => *slot += 1,
        }
    }

    fn tensor(&mut self, call: &str, io: Io, slot: u32, m: &Map<String, Value>) {
        let json = self.json.to_path_buf();
        let dtype_s = m.get("dtype").and_then(Value::as_str).unwrap_or("");
        let Some(dtype) = dtype_of(dtype_s) else {
            self.problem(
                &json,
                format!(
                    "{call} {}.{slot}: dtype {dtype_s:?} is not one opdump reads (torch.float32, torch.bfloat16, int64, bool, ...); skipped",
                    io.as_str()
                ),
            );
            return;
        };
        let shape: Option<Vec<usize>> = m.get("shape").and_then(Value::as_array).and_then(|a| {
            a.iter()
                .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                .collect()
        });
        let Some(shape) = shape else {
            self.problem(
                &json,
                format!(
                    "{call} {}.{slot}: shape {} is not a list of non-negative integers; skipped",
                    io.as_str(),
                    m.get("shape").map(Value::to_string).unwrap_or_default()
                ),
            );
            return;
        };
        let count = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64));
        let mut stats = Stats {
            count,
            max: stat(m.get("Max")),
            min: stat(m.get("Min")),
            avg: stat(m.get("Mean")),
            l2norm: stat(m.get("Norm")),
            ..Stats::default()
        };
        match m.get("md5") {
            Some(Value::String(d)) if d.len() == 8 && d.bytes().all(|b| b.is_ascii_hexdigit()) => {
                stats.crc32 = Some(d.to_ascii_lowercase());
            }
            Some(Value::String(d))
                if d.len() == 18
                    && d.starts_with("0x")
                    && d[2..].bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                stats.xor64 = Some(d.to_ascii_lowercase());
            }
            // xor mode on a 0-d tensor: the value itself.
            Some(Value::Number(n)) if shape.is_empty() => {
                let v = n.as_f64();
                stats.max = stats.max.or(v);
                stats.min = stats.min.or(v);
                stats.avg = stats.avg.or(v);
            }
            _ => {}
        }
        let (mut file, mut stored, mut unreadable) = (None, None, None);
        if let Some(name) = m.get("data_name").and_then(Value::as_str) {
            let path = self.dir.join("dump_tensor_data").join(name);
            if name.contains('/') || name.contains('\\') || name == ".." {
                self.problem(
                    &json,
                    format!("{call}: data_name {name:?} is not a file name; its file is not read"),
                );
            } else if std::fs::symlink_metadata(&path).is_err() {
                unreadable = Some(format!("{}: missing", path.display()));
                self.problem(
                    &path,
                    format!(
                        "listed in dump.json ({call} {}.{slot}) but missing; its statistics are compared",
                        io.as_str()
                    ),
                );
            } else {
                match TensorFile::open(&path) {
                    Ok(f) if f.shape == shape || f.elems() == count.unwrap_or(0) as usize => {
                        stored = Some(f.dtype);
                        file = Some(path);
                    }
                    Ok(f) => self.problem(
                        &path,
                        format!(
                            "holds shape {:?}, dump.json says {shape:?}; its statistics are compared",
                            f.shape
                        ),
                    ),
                    Err(e) => {
                        unreadable = Some(format!("{}: {}", path.display(), e.reason()));
                        let message = format!("{}; its statistics are compared", e.reason());
                        self.problem(&path, message);
                    }
                }
            }
        }
        let op_type = op_type_of(call).unwrap_or(call).to_owned();
        self.clock += 1;
        self.dump.tensors.push(TensorRecord {
            rank: self.rank,
            net: String::new(),
            graph: 0,
            iteration: self.step,
            id: TensorId {
                op_type,
                op_name: call.to_owned(),
                task_id: 0,
                stream_id: 0,
                timestamp: self.clock,
                io,
                slot,
            },
            dtype,
            shape,
            source: file.map(TensorSource::File),
            stored,
            row_stats: Some(stats),
            arg_name: self.param.clone(),
            unreadable,
        });
    }
}

fn read_rank(step: u64, rank: u32, dir: &Path, dump: &mut Dump) {
    let json = dir.join("dump.json");
    let Some(doc) = read_json(&json, MAX_DUMP_JSON, dump) else {
        return;
    };
    let Some(data) = doc.get("data").and_then(Value::as_object) else {
        dump.problems.push(Problem {
            path: json,
            message: "no \"data\" object (msprobe's dump.json holds task, level, framework, dump_data_dir, data)".into(),
        });
        return;
    };
    let mut w = Walk {
        step,
        rank,
        dir,
        json: &json,
        clock: 0,
        param: None,
        dump,
    };
    for (call, entry) in data {
        let Some(e) = entry.as_object() else {
            w.problem(&json, format!("{call}: not an object; skipped"));
            continue;
        };
        if op_type_of(call).is_none() {
            w.problem(
                &json,
                format!("{call}: not an msprobe call name ({{Prefix}}.{{api}}.{{n}}.forward|backward, Module.{{path}}.{{Class}}.forward|backward.{{n}} or Module.{{path}}.{{Class}}.parameters_grad.{{n}}); read as is"),
            );
        }
        let mut slot = 0;
        if parameters_grad_of(call).is_some() {
            // `{param: [tensor]}`: one output per parameter, in order, each named by its key.
            for (param, v) in e {
                w.param = Some(param.clone());
                w.leaves(call, Io::Output, v, &mut slot, 1);
            }
            w.param = None;
            continue;
        }
        for key in ["input_args", "input_kwargs", "input", "parameters"] {
            if let Some(v) = e.get(key) {
                w.leaves(call, Io::Input, v, &mut slot, 0);
            }
        }
        let mut slot = 0;
        if let Some(v) = e.get("output") {
            w.leaves(call, Io::Output, v, &mut slot, 0);
        }
    }
    if let Some(Value::Object(m)) = read_json(&dir.join("construct.json"), MAX_SIDE_JSON, dump) {
        for (node, parent) in m {
            let parent = match parent {
                Value::String(p) => Some(p),
                Value::Array(a) => a.first().and_then(Value::as_str).map(str::to_owned),
                _ => None,
            };
            dump.modules.push(ModuleEdge {
                rank,
                iteration: step,
                node,
                parent,
            });
        }
    }
    if let Some(Value::Object(m)) = read_json(&dir.join("stack.json"), MAX_SIDE_JSON, dump) {
        for v in m.into_values() {
            let Value::Array(pair) = v else { continue };
            let strings = |v: Option<&Value>| -> Vec<String> {
                v.and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let frames = strings(pair.get(1));
            for name in strings(pair.first()) {
                dump.stacks.push(((rank, step, name), frames.clone()));
            }
        }
    }
}
