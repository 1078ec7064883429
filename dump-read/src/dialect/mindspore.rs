//! MindSpore's layout (which opdump writes too):
//! `rank_{n}/{net}/{graph}/{iteration}/` holding `.npy` files, `statistic.csv` and
//! `mapping.csv`, plus `rank_{n}/execution_order/ms_execution_order_graph_{graph}.csv`.
//! Symlinks inside the tree are never followed.

use std::{
    collections::HashMap,
    fs,
    path::{Path, PathBuf},
};

use dump_npy::NpyReader;
use dump_stats::{
    TensorId,
    names::{TensorFileName, sanitize},
};

use super::Dialect;
use super::walk::{files, subdirs};
use crate::{Dump, Error, Problem, TensorRecord, csv::read_statistic_csv, graph::parse_ir};

/// Reads MindSpore 2.10's dump layout (and opdump's, which is the same).
#[derive(Clone, Copy, Debug, Default)]
pub struct MindSpore;

/// `rank_{n}` → `n`.
fn rank_of(name: &str) -> Option<u32> {
    name.strip_prefix("rank_")?.parse().ok()
}

impl Dialect for MindSpore {
    fn name(&self) -> &'static str {
        "mindspore"
    }

    fn describe(&self) -> &'static str {
        "MindSpore's layout (rank_{n}/{net}/{graph}/{iteration}/, or a rank_{n} directory itself)"
    }

    fn detect(&self, root: &Path) -> bool {
        root.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| rank_of(n).is_some())
            || subdirs(root).iter().any(|(n, _)| rank_of(n).is_some())
    }

    fn read(&self, root: &Path) -> Result<Dump, Error> {
        let mut dump = Dump {
            root: root.to_path_buf(),
            dialect: self.name(),
            ..Dump::default()
        };
        let own = root.file_name().and_then(|n| n.to_str()).and_then(rank_of);
        let ranks: Vec<(u32, PathBuf)> = match own {
            Some(r) => vec![(r, root.to_path_buf())],
            None => subdirs(root)
                .into_iter()
                .filter_map(|(n, p)| Some((rank_of(&n)?, p)))
                .collect(),
        };
        for (rank, dir) in ranks {
            read_rank(rank, &dir, &mut dump);
        }
        Ok(dump)
    }
}

fn read_rank(rank: u32, dir: &Path, dump: &mut Dump) {
    let order_dir = dir.join("execution_order");
    for (name, _) in files(&order_dir) {
        let Some(graph) = name
            .strip_prefix("ms_execution_order_graph_")
            .and_then(|s| s.strip_suffix(".csv"))
            .and_then(|g| g.parse().ok())
        else {
            continue;
        };
        let path = order_dir.join(&name);
        match read_bounded(&path, 64 << 20) {
            Ok(text) => {
                let names = text
                    .lines()
                    .skip(1)
                    .filter(|l| !l.is_empty())
                    .map(sanitize)
                    .collect();
                dump.execution_orders.push(((rank, graph), names));
            }
            Err(m) => dump.problems.push(Problem { path, message: m }),
        }
    }
    let graphs_dir = dir.join("graphs");
    for (name, path) in files(&graphs_dir) {
        let Some(graph) = name
            .strip_prefix("ms_output_trace_code_graph_")
            .and_then(|s| s.strip_suffix(".ir"))
            .and_then(|g| g.parse().ok())
        else {
            continue;
        };
        match read_bounded(&path, 64 << 20) {
            Ok(text) => dump.graphs.push(((rank, graph), parse_ir(&text))),
            Err(m) => dump.problems.push(Problem { path, message: m }),
        }
    }
    for (net, net_dir) in subdirs(dir) {
        if net.starts_with('.') || net == "execution_order" || net == "graphs" {
            continue;
        }
        for (g, graph_dir) in subdirs(&net_dir) {
            let Ok(graph) = g.parse::<u32>() else {
                continue;
            };
            for (it, it_dir) in subdirs(&graph_dir) {
                // `constants/` (GPU only) holds no per-iteration tensors.
                let Ok(iteration) = it.parse::<u64>() else {
                    continue;
                };
                let at = Place {
                    rank,
                    net: &net,
                    graph,
                    iteration,
                };
                read_iteration(&at, &it_dir, dump);
            }
        }
    }
}

/// A small text file, refused above `max` bytes.
fn read_bounded(path: &Path, max: u64) -> Result<String, String> {
    let len = fs::symlink_metadata(path).map_err(|e| e.to_string())?.len();
    if len > max {
        return Err(format!(
            "{len} bytes, more than the {max} read for this kind of file"
        ));
    }
    fs::read_to_string(path).map_err(|e| e.to_string())
}

struct Place<'a> {
    rank: u32,
    net: &'a str,
    graph: u32,
    iteration: u64,
}

fn read_iteration(at: &Place<'_>, dir: &Path, dump: &mut Dump) {
    let entries = files(dir);
    let mut mapping: HashMap<String, String> = HashMap::new();
    if entries.iter().any(|(n, _)| n == "mapping.csv") {
        let path = dir.join("mapping.csv");
        match read_bounded(&path, 256 << 20) {
            Ok(text) => {
                for l in text.lines() {
                    if let Some((s, long)) = l.split_once(',') {
                        mapping.insert(s.to_owned(), long.to_owned());
                    }
                }
            }
            Err(m) => dump.problems.push(Problem { path, message: m }),
        }
    }
    let start = dump.tensors.len();
    // The identity of each record of this directory: what pairs a row with a file.
    let mut by_key: HashMap<TensorId<String>, usize> = HashMap::new();
    for (name, path) in &entries {
        if !name.ends_with(".npy") {
            continue;
        }
        let long = mapping.get(name).map(String::as_str).unwrap_or(name);
        let Some(n) = TensorFileName::parse(long) else {
            dump.problems.push(Problem {
                path: path.clone(),
                message: if name.starts_with("opdump-") && !mapping.contains_key(name) {
                    "short name without a mapping.csv line".into()
                } else {
                    "file name not of the form {op_type}.{op_name}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy".into()
                },
            });
            continue;
        };
        let (file, stored, shape, unreadable) = match NpyReader::open(path) {
            Ok(s) => (Some(path.clone()), Some(s.dtype), s.shape.clone(), None),
            Err(e) => {
                let message = Error::from(e).reason();
                let why = format!("{}: {message}", path.display());
                dump.problems.push(Problem {
                    path: path.clone(),
                    message,
                });
                (None, None, Vec::new(), Some(why))
            }
        };
        let mut id = n.id.to_owned();
        id.op_name = id.op_name.replace(',', "_");
        by_key.insert(id.clone(), dump.tensors.len());
        dump.tensors.push(TensorRecord {
            rank: at.rank,
            net: at.net.to_owned(),
            graph: at.graph,
            iteration: at.iteration,
            id,
            dtype: n.dtype,
            shape,
            source: file.map(crate::TensorSource::File),
            stored,
            row_stats: None,
            arg_name: None,
            unreadable,
        });
    }
    let had_files = dump.tensors.len() > start;
    if !entries.iter().any(|(n, _)| n == "statistic.csv") {
        return;
    }
    let csv_path = dir.join("statistic.csv");
    let (rows, problems) = match read_statistic_csv(&csv_path) {
        Ok(r) => r,
        Err(e) => {
            dump.problems.push(Problem {
                path: csv_path,
                message: e.reason(),
            });
            return;
        }
    };
    for m in problems {
        dump.problems.push(Problem {
            path: csv_path.clone(),
            message: m,
        });
    }
    for r in rows {
        match by_key.get(&r.id) {
            Some(&i) => {
                let t = &mut dump.tensors[i];
                if t.source.is_none() {
                    t.shape = r.shape.clone();
                }
                t.row_stats = Some(r.stats);
            }
            None => {
                if had_files {
                    dump.problems.push(Problem {
                        path: csv_path.clone(),
                        message: format!(
                            "line {}: row for {}.{} {}.{} (timestamp {}) has no .npy file in this directory; its statistics are used",
                            r.line, r.id.op_type, r.id.op_name, r.id.io.as_str(), r.id.slot, r.id.timestamp
                        ),
                    });
                }
                dump.tensors.push(TensorRecord {
                    rank: at.rank,
                    net: at.net.to_owned(),
                    graph: at.graph,
                    iteration: at.iteration,
                    id: r.id,
                    dtype: r.dtype.unwrap_or(dump_core::DType::Float32),
                    shape: r.shape,
                    source: None,
                    stored: None,
                    row_stats: Some(r.stats),
                    arg_name: None,
                    unreadable: None,
                });
            }
        }
    }
}
