//! Plain reference arrays, keyed by tensor name (the ONNX value name a Rust run's
//! `graphs/*.ir` gives each node's output): an `.npz` archive of `NAME.npy` members
//! ([`Npz`], what `numpy.savez(path, **{name: array})` writes, e.g. from a PyTorch
//! forward-hook script), or a directory of `NAME.npy` files ([`NpyDir`], names not in
//! MindSpore's form).
//!
//! Each array is one record: op type `Reference`, op name = the tensor name, `output.0`, rank
//! 0, iteration 0, timestamp = its position (archive order, or name order for a directory).
//! A graph node per name defines the value of the same name, so `compare` pairs a reference
//! with the Rust kernel whose node defines that value (the `value` rule), whatever the op
//! names. Arrays are never read whole: `.npz` members are streamed in place (stored, not
//! compressed: `numpy.savez`, not `savez_compressed`).

use std::path::{Path, PathBuf};

use dump_stats::{Io, TensorId, names::TensorFileName};

use super::Dialect;
use crate::{Dump, Error, GraphNode, Problem, TensorFile, TensorRecord, TensorSource, pt};

/// An `.npz` archive of reference arrays.
#[derive(Clone, Copy, Debug, Default)]
pub struct Npz;

/// A directory of `NAME.npy` reference arrays.
#[derive(Clone, Copy, Debug, Default)]
pub struct NpyDir;

fn is_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
}

/// The `.npy` files directly in `dir` (no symlinks), sorted by name.
fn npy_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut v = super::walk::files(dir);
    v.retain(|(n, _)| n.ends_with(".npy"));
    v
}

/// Adds one reference record (and its graph node) named `name`, read from `path`.
fn push(dump: &mut Dump, name: &str, path: PathBuf) {
    match TensorFile::open(&path) {
        Ok(f) => {
            let n = dump.tensors.len() as u64;
            dump.tensors.push(TensorRecord {
                rank: 0,
                net: String::new(),
                graph: 0,
                iteration: 0,
                id: TensorId {
                    op_type: "Reference".to_owned(),
                    op_name: name.to_owned(),
                    task_id: 0,
                    stream_id: 0,
                    timestamp: n,
                    io: Io::Output,
                    slot: 0,
                },
                dtype: f.dtype,
                shape: f.shape.clone(),
                source: Some(TensorSource::File(path)),
                stored: Some(f.dtype),
                row_stats: None,
                arg_name: None,
                unreadable: None,
            });
            if dump.graphs.is_empty() {
                dump.graphs.push(((0, 0), Vec::new()));
            }
            dump.graphs[0].1.push(GraphNode {
                op_name: name.to_owned(),
                full_name: String::new(),
                values: vec![name.to_owned()],
                inputs: Vec::new(),
                onnx: None,
            });
        }
        Err(e) => dump.problems.push(Problem {
            path,
            message: e.reason(),
        }),
    }
}

impl Dialect for Npz {
    fn name(&self) -> &'static str {
        "npz"
    }

    fn describe(&self) -> &'static str {
        "an .npz file of reference arrays (NAME.npy members)"
    }

    fn detect(&self, root: &Path) -> bool {
        root.extension().is_some_and(|e| e == "npz") && is_file(root)
    }

    fn read(&self, root: &Path) -> Result<Dump, Error> {
        let mut dump = Dump {
            root: root.to_path_buf(),
            dialect: self.name(),
            ..Dump::default()
        };
        let zip = pt::open_zip(root, ".npz file")?;
        // Archive order: numpy.savez writes the arrays in the order given (a hook script's
        // run order).
        let mut names: Vec<(usize, String)> = (0..zip.len())
            .filter_map(|i| Some((i, zip.name_for_index(i)?.ok()?.into_owned())))
            .collect();
        names.sort();
        for (_, member) in names {
            // Joined as text: a member named `/a/b.npy` (an ONNX value name) stays inside.
            let path = PathBuf::from(format!("{}/{member}", root.display()));
            let Some(name) = member.strip_suffix(".npy") else {
                dump.problems.push(Problem {
                    path,
                    message: "not a NAME.npy member; skipped".into(),
                });
                continue;
            };
            push(&mut dump, name, path);
        }
        Ok(dump)
    }
}

impl Dialect for NpyDir {
    fn name(&self) -> &'static str {
        "npy-dir"
    }

    fn describe(&self) -> &'static str {
        "a directory of NAME.npy reference arrays"
    }

    fn detect(&self, root: &Path) -> bool {
        let files = npy_files(root);
        !files.is_empty()
            && files
                .iter()
                .all(|(n, _)| TensorFileName::parse(n).is_none())
    }

    fn read(&self, root: &Path) -> Result<Dump, Error> {
        let mut dump = Dump {
            root: root.to_path_buf(),
            dialect: self.name(),
            ..Dump::default()
        };
        for (n, path) in npy_files(root) {
            let name = n.strip_suffix(".npy").expect("filtered").to_owned();
            push(&mut dump, &name, path);
        }
        Ok(dump)
    }
}
