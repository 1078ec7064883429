//! Polygraphy's `--save-outputs` JSON (a `RunResults`): `{"lst": [[runner, [iteration, ...]],
//! ...]}`, each iteration `{"outputs": {name: array, ...}, "runtime", "runner_name"}`, each
//! array an `.npy` file in base64 (`{"array": ...}`, inside `{"values": ...}` for Polygraphy's
//! lazy arrays). Keyed by output (ONNX value) name, like the other reference dialects.
//!
//! Records: op name = the output name, op type `Reference`, `output.0`, rank = the runner's
//! position (the first runner is rank 0, the one a Rust run's rank 0 pairs with), iteration =
//! the iteration's position. The file of a record is `results.json/{runner}/{iteration}/{k}`
//! (the k-th output); [`TensorFile`](crate::TensorFile) decodes that one array when it is opened (Polygraphy
//! keeps its arrays inline, so one array is held in memory while it is read).

use std::path::{Path, PathBuf};

use dump_stats::{Io, TensorId};
use serde_json::Value;

use super::Dialect;
use crate::{Dump, Error, GraphNode, Problem, TensorRecord, TensorSource};

/// Largest Polygraphy JSON read.
pub(crate) const MAX_POLYGRAPHY_JSON: u64 = 1 << 30;

/// Polygraphy's saved outputs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Polygraphy;

pub(crate) fn load(path: &Path) -> Result<Value, Error> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(Error::format(
            path,
            "not a regular file (symlinks are not followed)",
        ));
    }
    if meta.len() > MAX_POLYGRAPHY_JSON {
        return Err(Error::format(
            path,
            format!(
                "{} bytes, more than the {MAX_POLYGRAPHY_JSON} read",
                meta.len()
            ),
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::format(path, format!("not valid JSON: {e}")))
}

/// The runners of a RunResults: `(name, iterations)`.
pub(crate) fn runners(doc: &Value) -> Option<Vec<(&str, &Vec<Value>)>> {
    doc.get("lst")?
        .as_array()?
        .iter()
        .map(|r| {
            let r = r.as_array()?;
            Some((r.first()?.as_str()?, r.get(1)?.as_array()?))
        })
        .collect()
}

/// The base64 text of an encoded array (`{"array": ...}` or `{"values": {"array": ...}}`).
pub(crate) fn array_text(v: &Value) -> Option<&str> {
    v.get("array")
        .or_else(|| v.get("values")?.get("array"))?
        .as_str()
}

/// The dtype and shape of an encoded array, from its first bytes only (`.npy` headers are at
/// most [`dump_npy::MAX_HEADER_LEN`] bytes).
fn header_of(text: &str) -> Result<(dump_core::DType, Vec<usize>), String> {
    let head = &text[..text.len().min((dump_npy::MAX_HEADER_LEN + 12) / 3 * 4 + 4)];
    // Whole 4-character groups only, so the prefix decodes as the file's first bytes.
    let head = &head[..head.len() / 4 * 4];
    let bytes = base64(head)?;
    let n =
        dump_npy::header_len_from_prefix(&bytes).map_err(|e| format!("not an .npy array: {e}"))?;
    if n > bytes.len() {
        return Err(format!("the .npy header claims {n} bytes"));
    }
    let h = dump_npy::parse_header(&bytes[..n]).map_err(|e| format!("not an .npy array: {e}"))?;
    Ok((h.dtype(), h.dims().collect()))
}

/// The `.npy` bytes of output `k` of iteration `it` of runner `ri`.
pub(crate) fn npy_bytes(doc: &Value, ri: usize, it: usize, k: usize) -> Result<Vec<u8>, String> {
    let runners = runners(doc).ok_or("not a Polygraphy RunResults")?;
    let (_, iterations) = runners.get(ri).ok_or(format!("no runner {ri}"))?;
    let outputs = iterations
        .get(it)
        .and_then(|r| r.get("outputs"))
        .and_then(Value::as_object)
        .ok_or(format!("runner {ri} has no iteration {it} with outputs"))?;
    let (name, v) = outputs.iter().nth(k).ok_or(format!("no output {k}"))?;
    let text = array_text(v).ok_or(format!(
        "output {name:?} is not an encoded array ({{\"array\": base64 .npy}})"
    ))?;
    base64(text)
}

/// Decodes standard base64 (padding optional, whitespace skipped).
pub(crate) fn base64(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for (i, c) in text.bytes().enumerate() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return Err(format!("byte {i} of the base64 array is {:?}", c as char)),
        };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Ok(out)
}

impl Dialect for Polygraphy {
    fn name(&self) -> &'static str {
        "polygraphy"
    }

    fn describe(&self) -> &'static str {
        "Polygraphy's --save-outputs JSON ({\"lst\": [[runner, [iterations]]]})"
    }

    fn detect(&self, root: &Path) -> bool {
        use std::io::Read;
        if root.extension().is_none_or(|e| e != "json")
            || !std::fs::symlink_metadata(root).is_ok_and(|m| m.is_file())
        {
            return false;
        }
        let mut head = [0u8; 256];
        let n = std::fs::File::open(root)
            .and_then(|mut f| f.read(&mut head))
            .unwrap_or(0);
        let t = String::from_utf8_lossy(&head[..n]);
        t.trim_start().starts_with('{') && t.trim_start()[1..].trim_start().starts_with("\"lst\"")
    }

    fn read(&self, root: &Path) -> Result<Dump, Error> {
        let doc = load(root)?;
        let runners = runners(&doc).ok_or_else(|| {
            Error::format(
                root,
                "\"lst\" is not a list of [runner name, [iteration results]] pairs (Polygraphy's RunResults)",
            )
        })?;
        let mut dump = Dump {
            root: root.to_path_buf(),
            dialect: self.name(),
            ..Dump::default()
        };
        for (ri, (_, iterations)) in runners.iter().enumerate() {
            for (it, result) in iterations.iter().enumerate() {
                let Some(outputs) = result.get("outputs").and_then(Value::as_object) else {
                    dump.problems.push(Problem {
                        path: root.to_path_buf(),
                        message: format!(
                            "runner {ri} iteration {it}: no \"outputs\" object; skipped"
                        ),
                    });
                    continue;
                };
                for (k, (name, v)) in outputs.iter().enumerate() {
                    let file = PathBuf::from(format!("{}/{ri}/{it}/{k}", root.display()));
                    let header = array_text(v)
                        .ok_or_else(|| "not an encoded array ({\"array\": base64 .npy})".to_owned())
                        .and_then(header_of);
                    let (dtype, shape) = match header {
                        Ok(h) => h,
                        Err(m) => {
                            dump.problems.push(Problem {
                                path: root.to_path_buf(),
                                message: format!(
                                    "output {name:?} (runner {ri}, iteration {it}): {m}; skipped"
                                ),
                            });
                            continue;
                        }
                    };
                    let n = dump.tensors.len() as u64;
                    dump.tensors.push(TensorRecord {
                        rank: ri as u32,
                        net: String::new(),
                        graph: 0,
                        iteration: it as u64,
                        id: TensorId {
                            op_type: "Reference".to_owned(),
                            op_name: name.clone(),
                            task_id: 0,
                            stream_id: 0,
                            timestamp: n,
                            io: Io::Output,
                            slot: 0,
                        },
                        dtype,
                        shape,
                        source: Some(TensorSource::File(file)),
                        stored: Some(dtype),
                        row_stats: None,
                        arg_name: None,
                        unreadable: None,
                    });
                    let key = (ri as u32, 0);
                    match dump.graphs.iter_mut().find(|(g, _)| *g == key) {
                        Some((_, nodes)) if nodes.iter().any(|n| &n.op_name == name) => {}
                        Some((_, nodes)) => nodes.push(GraphNode {
                            op_name: name.clone(),
                            full_name: String::new(),
                            values: vec![name.clone()],
                            inputs: Vec::new(),
                            onnx: None,
                        }),
                        None => dump.graphs.push((
                            key,
                            vec![GraphNode {
                                op_name: name.clone(),
                                full_name: String::new(),
                                values: vec![name.clone()],
                                inputs: Vec::new(),
                                onnx: None,
                            }],
                        )),
                    }
                }
            }
        }
        Ok(dump)
    }
}
