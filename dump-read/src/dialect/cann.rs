//! Ascend CANN dump files (MindSpore 1.x asynchronous dump, Ascend O2, acl.json, torchair
//! graph mode): one binary file per kernel launch named
//! `{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}`, in GE's layout
//! `{dump_path}/{time}/{device_id}/{model_name}/{model_id}/{data_index}/` (single-op dumps:
//! `{dump_path}/{time}/{device_id}/`), or any directory of such files
//! (`shared/spec/cann-dump.md` §3).
//!
//! Only each file's header (the `DumpData` message) is read here; one [`TensorRecord`] per
//! input and output points at its payload ([`TensorSource::Cann`]), which statistics and
//! compare stream later. Device formats with a converter (NC1HWC0, FRACTAL_Z, FRACTAL_NZ) are
//! read in the host layout of their `original_shape`; other formats are read as stored and a
//! [`Problem`] says so. Record fields: `rank` = device id, `net` = model name, `graph` = model
//! id, `iteration` = data index (0 / `""` where the path has none).
//!
//! Also accepted: the older 4-field name `{op_type}.{op_name}.{task_id}.{timestamp}`, FFTS+
//! names (`….{timestamp}.4.{context_id}.{thread_id}.{device_id}`), the adump form with a dump
//! number before the task id, and names shortened by adump to a decimal hash listed in the
//! directory's `mapping.csv` (`hash,original`). Overflow (`Opdebug`) files are not tensors:
//! a problem points to `opdump convert`, which writes their JSON.

use std::{
    collections::HashMap,
    fs::{self, File},
    io::BufReader,
    path::{Path, PathBuf},
};

use dump_device_ascend::{
    Format,
    blocked::HostBlocks,
    dumpfile::{DumpReader, TensorKind, TensorMeta, is_opdebug_file},
};
use dump_stats::{Io, TensorId};

use super::Dialect;
use crate::{CannTensor, Dump, Error, Problem, TensorRecord, TensorSource};

/// Reads directories of CANN dump files.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cann;

/// How deep below the root files are looked for: GE's five levels and one more.
const MAX_DEPTH: usize = 6;
/// Directory entries [`Dialect::detect`] looks at before giving up.
const DETECT_BUDGET: usize = 4096;

/// The fields of a CANN dump file name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CannName {
    /// Op type (sanitised: ` `, `.`, `/`, `\` became `_`).
    pub op_type: String,
    /// Op name (sanitised).
    pub op_name: String,
    /// Task id.
    pub task_id: u32,
    /// Stream id (0 in the old 4-field form).
    pub stream_id: u32,
    /// Timestamp, µs.
    pub timestamp: u64,
}

impl CannName {
    /// Parses `{op_type}.{op_name}.{task}.{stream}.{timestamp}` and the variants in the module
    /// docs; `None` for anything else.
    pub fn parse(name: &str) -> Option<CannName> {
        let f: Vec<&str> = name.split('.').collect();
        if f.len() < 4 || f[0].is_empty() || f[1].is_empty() {
            return None;
        }
        let nums = &f[2..];
        if !nums
            .iter()
            .all(|s| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()))
        {
            return None;
        }
        let (task, stream, ts) = match nums.len() {
            2 => (nums[0], "0", nums[1]),
            3 => (nums[0], nums[1], nums[2]),
            4 => (nums[1], nums[2], nums[3]),
            7 => (nums[0], nums[1], nums[2]),
            _ => return None,
        };
        Some(CannName {
            op_type: f[0].to_owned(),
            op_name: f[1].to_owned(),
            task_id: task.parse().ok()?,
            stream_id: stream.parse().ok()?,
            timestamp: ts.parse().ok()?,
        })
    }
}

/// Where a directory sits in GE's layout: (device id, model name, model id, data index), from
/// its last path components (`{14-digit time}/{device}/{model}/{model_id}/{index}`, or
/// `{time}/{device}` for single-op dumps); zeros and `""` otherwise.
pub fn ge_position(dir: &Path) -> (u32, String, u32, u64) {
    let comps: Vec<&str> = dir
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .collect();
    let num = |s: &str| s.parse::<u64>().ok();
    let is_time = |s: &str| s.len() == 14 && s.bytes().all(|b| b.is_ascii_digit());
    let r = comps.len();
    if r >= 5
        && is_time(comps[r - 5])
        && let (Some(dev), Some(mid), Some(idx)) =
            (num(comps[r - 4]), num(comps[r - 2]), num(comps[r - 1]))
    {
        return (dev as u32, comps[r - 3].to_owned(), mid as u32, idx);
    }
    if r >= 2
        && is_time(comps[r - 2])
        && let Some(dev) = num(comps[r - 1])
    {
        return (dev as u32, String::new(), 0, 0);
    }
    (0, String::new(), 0, 0)
}

/// Regular files (no symlinks) and sub-directories of `dir`, sorted by name.
fn entries(dir: &Path) -> (Vec<(String, PathBuf)>, Vec<PathBuf>) {
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            dirs.push(e.path());
        } else if t.is_file()
            && let Ok(n) = e.file_name().into_string()
        {
            files.push((n, e.path()));
        }
    }
    files.sort();
    dirs.sort();
    (files, dirs)
}

/// `mapping.csv` of adump's hashed names: `hash,original` per line.
fn read_mapping(dir: &Path) -> HashMap<String, String> {
    let mut m = HashMap::new();
    if let Ok(text) = fs::read_to_string(dir.join("mapping.csv")) {
        for line in text.lines() {
            if let Some((short, long)) = line.split_once(',') {
                m.insert(short.trim().to_owned(), long.trim().to_owned());
            }
        }
    }
    m
}

impl Dialect for Cann {
    fn name(&self) -> &'static str {
        "cann"
    }

    fn describe(&self) -> &'static str {
        "CANN dump files ({op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}, in GE's \
         {time}/{device_id}/{model_name}/{model_id}/{data_index}/ or any directory)"
    }

    fn detect(&self, root: &Path) -> bool {
        let mut budget = DETECT_BUDGET;
        let mut stack = vec![(root.to_path_buf(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let (files, dirs) = entries(&dir);
            budget = budget.saturating_sub(files.len() + dirs.len());
            if files.iter().any(|(n, _)| CannName::parse(n).is_some()) {
                return true;
            }
            if budget == 0 {
                return false;
            }
            if depth < MAX_DEPTH {
                stack.extend(dirs.into_iter().rev().map(|d| (d, depth + 1)));
            }
        }
        false
    }

    fn read(&self, root: &Path) -> Result<Dump, Error> {
        let mut dump = Dump {
            root: root.to_path_buf(),
            dialect: self.name(),
            ..Dump::default()
        };
        let mut stack = vec![(root.to_path_buf(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let (files, dirs) = entries(&dir);
            let mapping = read_mapping(&dir);
            let at = ge_position(&dir);
            for (name, path) in &files {
                let long = mapping.get(name).map(String::as_str).unwrap_or(name);
                let parsed = CannName::parse(long);
                if parsed.is_some() && is_opdebug_file(long) {
                    dump.problems.push(Problem {
                        path: path.clone(),
                        message: "an overflow (Opdebug) report, not a tensor: `opdump convert` \
                                  writes it as JSON"
                            .into(),
                    });
                    continue;
                }
                let Some(n) = parsed else {
                    continue;
                };
                read_file(&mut dump, path, &n, &at);
            }
            if depth < MAX_DEPTH {
                stack.extend(dirs.into_iter().rev().map(|d| (d, depth + 1)));
            }
        }
        Ok(dump)
    }
}

/// Reads one file's header and pushes a record per input and output.
fn read_file(dump: &mut Dump, path: &Path, n: &CannName, at: &(u32, String, u32, u64)) {
    let problem = |dump: &mut Dump, message: String| {
        dump.problems.push(Problem {
            path: path.to_path_buf(),
            message,
        })
    };
    let opened = File::open(path).and_then(|f| {
        let len = f.metadata()?.len();
        Ok((f, len))
    });
    let (f, len) = match opened {
        Ok(x) => x,
        Err(e) => return problem(dump, e.to_string()),
    };
    let header = match DumpReader::open(BufReader::new(f), len) {
        Ok(r) => r.into_header(),
        Err(e) => return problem(dump, e.to_string()),
    };
    for t in &header.tensors {
        let io = match t.kind {
            TensorKind::Input => Io::Input,
            TensorKind::Output => Io::Output,
            _ => continue,
        };
        let which = format!("{}.{}", io.as_str(), t.index);
        let c = match CannTensor::from_meta(path, t, true) {
            Ok((c, warning)) => {
                if let Some(w) = warning {
                    problem(dump, format!("{which}: {w}"));
                }
                c
            }
            Err(m) => {
                problem(dump, format!("{which}: {m}"));
                continue;
            }
        };
        let dtype = c.dtype;
        dump.tensors.push(TensorRecord {
            rank: at.0,
            net: at.1.clone(),
            graph: at.2,
            iteration: at.3,
            id: TensorId {
                op_type: n.op_type.clone(),
                op_name: n.op_name.clone(),
                task_id: n.task_id,
                stream_id: n.stream_id,
                timestamp: n.timestamp,
                io,
                slot: t.index as u32,
            },
            dtype,
            shape: c.shape().to_vec(),
            source: Some(TensorSource::Cann(Box::new(c))),
            stored: Some(dtype),
            row_stats: None,
            arg_name: None,
            unreadable: None,
        });
    }
}

impl CannTensor {
    /// The tensor `t` of the CANN file `path`: its dtype must have a host equivalent and its
    /// payload must hold its shape (`Err` says why not). With `to_host`, a device format with
    /// a converter and an `original_shape` that fits is read in the host layout; otherwise it
    /// is read as stored, and the `Some` warning says why.
    pub fn from_meta(
        path: &Path,
        t: &TensorMeta,
        to_host: bool,
    ) -> Result<(CannTensor, Option<String>), String> {
        let dtype = t.dtype().map_err(|e| format!("{e}; not read"))?;
        let device_shape =
            dims(&t.shape).ok_or_else(|| format!("shape {:?} overflows", t.shape))?;
        match t.shape_bytes() {
            Some(b) if b <= t.size => {}
            b => {
                return Err(format!(
                    "shape {:?} of {} needs {} bytes but the payload at byte {} has {}",
                    t.shape,
                    t.data_type,
                    b.map_or("too many".into(), |b| b.to_string()),
                    t.offset,
                    t.size
                ));
            }
        }
        let (plan, warning) = if to_host {
            match host_plan(t, dtype, &device_shape) {
                Ok(p) => (p, None),
                Err(m) => (None, Some(m)),
            }
        } else {
            (None, None)
        };
        Ok((
            CannTensor {
                path: path.to_path_buf(),
                offset: t.offset,
                size: t.size,
                dtype,
                format: t.format,
                device_shape,
                to_host: plan,
            },
            warning,
        ))
    }
}

fn dims(shape: &[u64]) -> Option<Vec<usize>> {
    shape.iter().map(|&d| usize::try_from(d).ok()).collect()
}

/// The conversion of a device-format payload to the host layout of its `original_shape`:
/// `Ok(None)` for host layouts (read as stored), `Err` (a problem; read as stored) when the
/// format has no converter or the shapes do not fit.
pub(crate) fn host_plan(
    t: &TensorMeta,
    dtype: dump_core::DType,
    device_shape: &[usize],
) -> Result<Option<HostBlocks>, String> {
    let format = match t.format.format() {
        Some(Format::Nd | Format::Nchw | Format::Nhwc | Format::Default) => return Ok(None),
        Some(f) => f,
        None if t.format.name().is_some_and(|n| {
            matches!(
                n,
                "NCDHW"
                    | "NDHWC"
                    | "DHWCN"
                    | "DHWNC"
                    | "HWCN"
                    | "CHWN"
                    | "CN"
                    | "NC"
                    | "NCL"
                    | "MD"
            )
        }) =>
        {
            return Ok(None);
        }
        None => {
            return Err(format!(
                "format {} has no converter to the host layout; read as stored (device shape {device_shape:?}, padding included)",
                t.format
            ));
        }
    };
    if t.sub_format > 1 {
        // Grouped convolution weights: the groups' blocks are laid out in a way the specs do
        // not give, and converting them as one group would silently scramble the values.
        return Err(format!(
            "format {} with sub_format {} (grouped weights, {} groups) has no converter; read as stored (device shape {device_shape:?}, padding included)",
            t.format, t.sub_format, t.sub_format
        ));
    }
    let Some(orig) = t.original_shape.as_deref().filter(|s| !s.is_empty()) else {
        return Err(format!(
            "format {} without an original_shape: read as stored (device shape {device_shape:?}, padding included)",
            t.format
        ));
    };
    let host = dims(orig).ok_or_else(|| format!("original_shape {orig:?} overflows"))?;
    HostBlocks::new(
        format,
        dtype,
        device_shape,
        &host,
        crate::source::MAX_CONVERT_BLOCK,
    )
    .map(Some)
    .map_err(|e| {
        format!(
            "{} {device_shape:?} to original_shape {host:?}: {e}; read as stored",
            t.format
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_every_form_and_not_others() {
        let n = CannName::parse("Conv2D.Default_conv1-Conv2d_Conv2D-op12.12.3.1700000000000044")
            .unwrap();
        assert_eq!(
            (n.op_type.as_str(), n.task_id, n.stream_id, n.timestamp),
            ("Conv2D", 12, 3, 1_700_000_000_000_044)
        );
        let old = CannName::parse("Add.Add-op1.5.1600000000000001").unwrap();
        assert_eq!((old.task_id, old.stream_id), (5, 0));
        let ffts = CannName::parse("MatMul.mm.7.1.1700000000000002.4.3.0.1").unwrap();
        assert_eq!(
            (ffts.task_id, ffts.stream_id, ffts.timestamp),
            (7, 1, 1_700_000_000_000_002)
        );
        let adump = CannName::parse("Relu.r.9.4.2.1700000000000003").unwrap();
        assert_eq!((adump.task_id, adump.stream_id), (4, 2));
        for bad in [
            "Add.Add-op0.0.0.5.output.0.DefaultFormat.Float32.npy",
            "statistic.csv",
            "Add.x.1.2.3.csv",
            "a.b.c.d.e",
            "..1.2.3",
            "Add.op.1.2.99999999999999999999999",
        ] {
            assert_eq!(CannName::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn grouped_weights_are_read_as_stored_and_said_so() {
        use dump_device_ascend::dumpfile::{CannDType, CannFormat, TensorKind};
        let mut t = TensorMeta {
            kind: TensorKind::Input,
            index: 1,
            ordinal: 1,
            data_type: CannDType(1), // FLOAT16
            format: CannFormat::from_format(dump_device_ascend::Format::FractalZ),
            sub_format: 0,
            // FRACTAL_Z of a (32, 16, 1, 1) weight: C1·H·W = 1, N1 = 2, N0 = 16, C0 = 16.
            shape: vec![1, 2, 16, 16],
            original_shape: Some(vec![32, 16, 1, 1]),
            size: 1024,
            offset: 0,
            address: 0,
            address_offset: 0,
            arg_index: None,
            input_type: 0,
            buffer_type: 0,
            original_op: None,
            dim_range: Vec::new(),
        };
        let dtype = t.dtype().unwrap();
        assert!(matches!(host_plan(&t, dtype, &[1, 2, 16, 16]), Ok(Some(_))));
        t.sub_format = 2;
        let e = host_plan(&t, dtype, &[1, 2, 16, 16]).unwrap_err();
        assert!(
            e.contains("FRACTAL_Z with sub_format 2 (grouped weights, 2 groups) has no converter; read as stored"),
            "{e}"
        );
        // 1 means one group: converted as before.
        t.sub_format = 1;
        assert!(matches!(host_plan(&t, dtype, &[1, 2, 16, 16]), Ok(Some(_))));
    }

    #[test]
    fn ge_layout_positions() {
        let p = Path::new("/d/20260101120000/3/resnet/7/42");
        assert_eq!(ge_position(p), (3, "resnet".into(), 7, 42));
        assert_eq!(
            ge_position(Path::new("/d/20260101120000/1")),
            (1, String::new(), 0, 0)
        );
        assert_eq!(
            ge_position(Path::new("/tmp/x/0/1")),
            (0, String::new(), 0, 0)
        );
    }
}
