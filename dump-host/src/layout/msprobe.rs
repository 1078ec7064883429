//! msprobe's layout (shared spec peers.md §2–§3): `{dump_path}/step{N}/rank{R}/` holding
//! `dump.json`, `stack.json`, `construct.json` and, for the tensor and overflow tasks,
//! `dump_tensor_data/{call}.{input|output}.{slot}.npy` (a parameter's gradient:
//! `{entry}.{param}.npy`, see `dumper::msprobe`).
//!
//! A row of this layout is one tensor object of `dump.json` (keys in msprobe's order: `type`,
//! `dtype`, `shape`, `Max`, `Min`, `Mean`, `Norm`, `requires_grad`, `data_name`, `md5`; with
//! summary_mode `xor` the four statistics are left out and `md5` is `"0x%016x"`, the
//! [`xor64`](dump_core::hash::xor64) of the bytes, or for a 0-d number the value itself),
//! indented as msprobe's `json.dump(indent=1)` puts it inside a call's argument list; the
//! Dumper gathers a call's tensors into one `dump.json` entry and appends it crash-safely
//! (`dumper::msprobe`). Call names are the op names the Dumper hands over
//! (`Functional.Conv.0.forward`, `Module.conv1.Conv2d.forward.0`).
//!
//! Values are msprobe's PyTorch flavour: `"type": "torch.Tensor"`, `"dtype": "torch.float32"`,
//! `"requires_grad": false`; tensor files are `.npy` (msprobe's PyTorch writes `.pt`; its
//! MindSpore side writes `.npy`). Non-finite statistics are the strings `"NaN"`, `"Infinity"`,
//! `"-Infinity"` (msprobe writes bare tokens, which are not JSON).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use dump_core::{DType, Summary};

use crate::config::SummaryMode;
use dump_stats::{CategorySet, DeviceValue, Io, TensorId};

use super::{OutputLayout, RowTensor, RowValues};

/// msprobe's layout rooted at `dump_path` for one rank.
#[derive(Clone, Debug)]
pub struct MsprobeLayout {
    root: PathBuf,
    rank: u32,
    /// Tensor files are written (`data_name` keys, `dump_tensor_data/`).
    files: bool,
    /// What goes with the statistics: `md5` keys (CRC-32, summary_mode md5), or the XOR
    /// checksum instead of them (summary_mode xor).
    summary: SummaryMode,
}

impl MsprobeLayout {
    /// The layout under `root` for `rank`; `files`: the task writes tensor files; `summary`:
    /// the statistics task's summary_mode.
    pub fn new(root: &Path, rank: u32, files: bool, summary: SummaryMode) -> Self {
        MsprobeLayout {
            root: root.to_owned(),
            rank,
            files,
            summary,
        }
    }

    /// The layout of an msprobe plan (task and summary mode from its msprobe config).
    pub fn from_plan(plan: &crate::DumpPlan) -> Self {
        let summary = plan
            .msprobe
            .as_ref()
            .map_or(SummaryMode::Statistics, |m| m.summary_mode);
        MsprobeLayout::new(&plan.root, plan.rank, plan.saved_data.tensors(), summary)
    }

    /// `{root}/step{step}/rank{rank}`: where `dump.json`, `stack.json`, `construct.json` go.
    pub fn rank_dir(&self, step: u64) -> PathBuf {
        self.root
            .join(format!("step{step}"))
            .join(format!("rank{}", self.rank))
    }

    /// opdump's own files (config copy, graphs, execution order): `{root}/.opdump/`.
    fn own_dir(&self) -> PathBuf {
        self.root.join(".opdump")
    }
}

/// Whether `op_name` names a module call's parameter,
/// `Module.{path}.{Class}.forward.{n}.parameters.{name}` (its file is `{op_name}.npy`, as
/// msprobe's `Module.conv1.Conv2d.forward.0.parameters.weight.pt`).
pub(crate) fn is_parameter(op_name: &str) -> bool {
    op_name
        .rsplit_once(".parameters.")
        .is_some_and(|(call, name)| {
            !name.is_empty()
                && !name.contains('.')
                && call
                    .rsplit_once(".forward.")
                    .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// msprobe's (PyTorch) spelling of a dtype.
pub fn torch_dtype(d: DType) -> &'static str {
    match d {
        DType::Bool => "torch.bool",
        DType::Int4 => "torch.int4",
        DType::Int8 => "torch.int8",
        DType::Int16 => "torch.int16",
        DType::Int32 => "torch.int32",
        DType::Int64 => "torch.int64",
        DType::UInt1 => "torch.uint1",
        DType::UInt8 => "torch.uint8",
        DType::UInt16 => "torch.uint16",
        DType::UInt32 => "torch.uint32",
        DType::UInt64 => "torch.uint64",
        DType::Float16 => "torch.float16",
        DType::BFloat16 => "torch.bfloat16",
        DType::Float32 => "torch.float32",
        DType::Float64 => "torch.float64",
        DType::Complex64 => "torch.complex64",
        DType::Complex128 => "torch.complex128",
        DType::Float8E4M3FN => "torch.float8_e4m3fn",
        DType::Float8E5M2 => "torch.float8_e5m2",
        DType::UInt4 => "torch.uint4",
        DType::Float8E4M3FNUZ => "torch.float8_e4m3fnuz",
        DType::Float8E5M2FNUZ => "torch.float8_e5m2fnuz",
    }
}

/// A statistic as a JSON value: a number (with a fraction part or exponent, as Python's
/// `repr` of a float has), or `"NaN"`/`"Infinity"`/`"-Infinity"`.
fn push_float(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("\"NaN\"");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        });
    } else {
        // `{:?}` prints the shortest text that reads back to the same f64, `1.0` for integers.
        let _ = write!(out, "{v:?}");
    }
}

/// Max, Min, Mean, Norm of a summary, as msprobe reports them: NaN propagates into all four;
/// integers keep integer Max/Min; bool gives Max = any, Min = all and null Mean/Norm.
fn push_stats(out: &mut String, pad: &str, dtype: DType, s: Option<&Summary>) {
    let Some(s) = s.filter(|s| s.count > 0) else {
        for k in ["Max", "Min", "Mean", "Norm"] {
            let _ = write!(out, ",\n{pad}\"{k}\": null");
        }
        return;
    };
    let nan = s.nan > 0;
    let _ = write!(out, ",\n{pad}\"Max\": ");
    if dtype == DType::Bool {
        let _ = write!(out, "{},\n{pad}\"Min\": {}", s.max > 0.0, s.min > 0.0);
        let _ = write!(out, ",\n{pad}\"Mean\": null,\n{pad}\"Norm\": null");
        return;
    }
    let int = dtype.is_int();
    let push = |out: &mut String, v: f64| {
        if nan {
            out.push_str("\"NaN\"");
        } else if int && v.fract() == 0.0 && v.abs() < 9.007_199_254_740_992e15 {
            let _ = write!(out, "{}", v as i64);
        } else {
            push_float(out, v);
        }
    };
    push(out, s.max);
    let _ = write!(out, ",\n{pad}\"Min\": ");
    push(out, s.min);
    let _ = write!(out, ",\n{pad}\"Mean\": ");
    let mean = if nan {
        f64::NAN
    } else {
        s.sum / s.count as f64
    };
    push_float(out, mean);
    let _ = write!(out, ",\n{pad}\"Norm\": ");
    let norm = if nan { f64::NAN } else { s.sum_sq.sqrt() };
    push_float(out, norm);
}

/// xor mode on a 0-d tensor: msprobe writes the number itself under `md5` (a float, or an
/// integer), not a checksum. `None` (the checksum is written) for other shapes, bool, integers
/// beyond 2^53 and values the row does not hold.
fn scalar_value(t: &RowTensor<'_>, values: RowValues<'_>) -> Option<String> {
    if !t.shape.is_empty() || t.dtype == DType::Bool || t.dtype.is_complex() {
        return None;
    }
    let v = match values {
        RowValues::Host(s) => {
            let s = s.summary.as_ref().filter(|s| s.count == 1)?;
            // `max` leaves NaN out: a NaN value is only counted.
            if s.nan > 0 { f64::NAN } else { s.max }
        }
        RowValues::Device(d) => match d.max {
            DeviceValue::Float(v) => v,
            DeviceValue::Int(v) => return Some(v.to_string()),
            _ => return None,
        },
    };
    let mut out = String::new();
    if t.dtype.is_int() {
        if v.fract() != 0.0 || v.abs() >= 9.007_199_254_740_992e15 {
            return None;
        }
        let _ = write!(out, "{}", v as i64);
    } else {
        push_float(&mut out, v);
    }
    Some(out)
}

impl OutputLayout for MsprobeLayout {
    fn name(&self) -> &'static str {
        "msprobe"
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn iteration_dir(&self, _graph: u32, iteration: u64) -> PathBuf {
        let dir = self.rank_dir(iteration);
        if self.files {
            dir.join("dump_tensor_data")
        } else {
            dir
        }
    }

    fn constants_dir(&self, graph: u32) -> PathBuf {
        self.own_dir().join("constants").join(graph.to_string())
    }

    fn metadata_dir(&self) -> PathBuf {
        self.own_dir().join("metadata")
    }

    fn graphs_dir(&self) -> PathBuf {
        self.own_dir().join("graphs")
    }

    fn execution_order_dir(&self) -> PathBuf {
        self.own_dir().join("execution_order")
    }

    /// `{call}.{input|output}.{slot}.npy`; a parameter's gradient (call
    /// `Module.{path}.{Class}.parameters_grad.{k}.{param}`, output 0) is `{call}.npy`.
    fn tensor_file(&self, id: TensorId<&str>, _format: &str, _dtype: DType) -> String {
        let whole = id.op_name.contains(".parameters_grad.") || is_parameter(id.op_name);
        if whole && id.io == Io::Output && id.slot == 0 {
            return format!("{}.npy", id.op_name);
        }
        format!("{}.{}.{}.npy", id.op_name, id.io.as_str(), id.slot)
    }

    /// `dump.json` of the rank directory (the tensor directory, or its parent).
    /// `{dump_path}/trigger.json` (`trigger_{n}.json` after the first): beside the step
    /// directories, like opdump's own `.opdump/` files.
    fn trigger_file(&self, n: u32) -> PathBuf {
        match n {
            0 | 1 => self.root.join("trigger.json"),
            n => self.root.join(format!("trigger_{n}.json")),
        }
    }

    fn statistic_csv(&self, dir: &Path) -> PathBuf {
        if self.files {
            dir.parent().unwrap_or(dir).join("dump.json")
        } else {
            dir.join("dump.json")
        }
    }

    /// No header: entries are JSON.
    fn stat_header(&self, _categories: &CategorySet) -> String {
        String::new()
    }

    fn wants_crc32(&self) -> bool {
        self.summary == SummaryMode::Md5
    }

    fn wants_xor64(&self) -> bool {
        self.summary == SummaryMode::Xor
    }

    fn per_kernel_entries(&self) -> bool {
        true
    }

    /// One tensor object of `dump.json`, indented for its place in an argument list.
    fn stat_row(
        &self,
        t: RowTensor<'_>,
        _categories: &CategorySet,
        values: RowValues<'_>,
    ) -> Result<Option<String>, dump_stats::Error> {
        const PAD: &str = "     ";
        let mut o = String::with_capacity(256);
        o.push_str("    {\n");
        let _ = write!(
            o,
            "{PAD}\"type\": \"torch.Tensor\",\n{PAD}\"dtype\": \"{}\",\n{PAD}\"shape\": ",
            torch_dtype(t.dtype)
        );
        if t.shape.is_empty() {
            o.push_str("[]");
        } else {
            o.push('[');
            for (i, d) in t.shape.iter().enumerate() {
                let _ = write!(o, "{}\n      {d}", if i == 0 { "" } else { "," });
            }
            let _ = write!(o, "\n{PAD}]");
        }
        match values {
            // xor mode: no statistics.
            _ if self.summary == SummaryMode::Xor => {}
            RowValues::Host(s) => push_stats(&mut o, PAD, t.dtype, s.summary.as_ref()),
            RowValues::Device(d) => {
                for (k, v) in [
                    ("Max", d.max),
                    ("Min", d.min),
                    ("Mean", d.avg),
                    ("Norm", d.l2norm),
                ] {
                    let _ = write!(o, ",\n{PAD}\"{k}\": ");
                    match v {
                        DeviceValue::Float(v) => push_float(&mut o, v),
                        DeviceValue::Int(v) => {
                            let _ = write!(o, "{v}");
                        }
                        DeviceValue::Bool(v) => {
                            let _ = write!(o, "{v}");
                        }
                        DeviceValue::Null => o.push_str("null"),
                    }
                }
            }
        }
        let _ = write!(o, ",\n{PAD}\"requires_grad\": false");
        if self.files {
            // The name the Dumper gives the file: a name too long for the file system is
            // mapped to its short form (listed in dump_tensor_data/mapping.csv).
            let mut name = self.tensor_file(t.id, "", t.dtype);
            if name.len() > super::NAME_MAX {
                name = super::short_name(&name);
            }
            let _ = write!(o, ",\n{PAD}\"data_name\": ");
            o.push_str(&serde_json::Value::String(name).to_string());
        }
        if self.summary == SummaryMode::Xor {
            let _ = write!(o, ",\n{PAD}\"md5\": ");
            match (scalar_value(&t, values), t.xor64) {
                (Some(v), _) => o.push_str(&v),
                (None, Some(x)) => {
                    let _ = write!(o, "\"{}\"", dump_core::hash::xor64::hex(x));
                }
                (None, None) => o.push_str("null"),
            }
        }
        if self.summary == SummaryMode::Md5 {
            match t.crc32 {
                Some(c) => {
                    let _ = write!(o, ",\n{PAD}\"md5\": \"{c:08x}\"");
                }
                None => {
                    let _ = write!(o, ",\n{PAD}\"md5\": null");
                }
            }
        }
        o.push_str("\n    }");
        Ok(Some(o))
    }
}
