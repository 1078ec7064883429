//! [`Metadata`]: the part of a Dumper that writes the files a dump holds once —
//! `.dump_metadata/`, the graph files (`graphs/*.ir`, `*.pb`, from the graph's own
//! description), the execution-order tables, kernel-argument json — and remembers which
//! constants were dumped (once per graph and name).

use std::{
    collections::{BTreeMap, HashSet},
    path::Path,
    sync::{Arc, Mutex},
};

use serde::Serialize;

use super::{row_sink::RowSink, tree::OutputTree};
use crate::{
    graph::Graph,
    layout::{NAME_MAX, sanitize, short_name},
    writer::{ErrorLog, FILE_MODE, write_bytes_atomic},
};

/// The once-written files of one Dumper. Failures are recorded in the writer's error log like
/// every other write.
pub(crate) struct Metadata {
    /// `.dump_metadata/`'s files: `data_dump.json` (the config's bytes) and `config.json`.
    files: [(&'static str, Vec<u8>); 2],
    /// Constants dumped, by graph and name.
    constants: Mutex<HashSet<(u32, String)>>,
    errors: Arc<ErrorLog>,
}

impl Metadata {
    /// The metadata of a dump of `config` (the config file's bytes) for `device_target`
    /// running MindSpore `ms_version`; failures recorded in `errors`.
    pub(crate) fn new(
        config: Vec<u8>,
        (device_target, ms_version): (&str, &str),
        errors: Arc<ErrorLog>,
    ) -> Self {
        let config_json =
            format!("{{\"device_target\":\"{device_target}\",\"ms_version\":\"{ms_version}\"}}");
        Metadata {
            files: [
                ("data_dump.json", config),
                ("config.json", config_json.into_bytes()),
            ],
            constants: Mutex::new(HashSet::new()),
            errors,
        }
    }

    /// `true` the first time constant `name` of graph `graph` is asked for (MindSpore dumps a
    /// constant once per graph).
    pub(crate) fn first_constant(&self, graph: u32, name: &str) -> bool {
        self.constants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((graph, name.to_owned()))
    }

    fn write(&self, path: &Path, bytes: &[u8]) {
        if let Err(e) = write_bytes_atomic(path, FILE_MODE, bytes) {
            self.errors.record(path.to_owned(), e);
        }
    }

    /// `.dump_metadata/data_dump.json` (byte copy of the config) and `config.json`; existing
    /// files are kept, like MindSpore.
    pub(crate) fn write_metadata(&self, tree: &OutputTree) {
        let dir = tree.layout().metadata_dir();
        if tree.ensure_dir(&dir).is_err() {
            return;
        }
        for (name, bytes) in &self.files {
            let p = dir.join(name);
            if !p.exists() {
                self.write(&p, bytes);
            }
        }
    }

    /// Writes `graphs/ms_output_trace_code_graph_{id}.ir` and `.pb` and the execution order.
    pub(crate) fn write_graph(&self, tree: &OutputTree, id: u32, graph: &Graph) {
        self.write_execution_order(tree, id, &graph.execution_order());
        let dir = tree.layout().graphs_dir();
        if tree.ensure_dir(&dir).is_err() {
            return;
        }
        let stem = format!("ms_output_trace_code_graph_{id}");
        for (ext, bytes) in [("ir", graph.to_ir().into_bytes()), ("pb", graph.to_pb())] {
            self.write(&dir.join(format!("{stem}.{ext}")), &bytes);
        }
    }

    /// `execution_order/ms_execution_order_graph_{g}.csv`, rewritten.
    pub(crate) fn write_execution_order(&self, tree: &OutputTree, graph: u32, names: &[&str]) {
        let dir = tree.layout().execution_order_dir();
        if tree.ensure_dir(&dir).is_err() {
            return;
        }
        let mut text = String::from("NodeExecutionOrder-FullNameWithScope\n");
        for n in names {
            push_order_line(&mut text, n);
        }
        self.write(&tree.layout().execution_order_csv(graph), text.as_bytes());
    }

    /// Appends a dumped step to `ms_global_execution_order_graph_{g}.csv` (through `tables`).
    pub(crate) fn append_global_order(
        &self,
        tree: &OutputTree,
        tables: &RowSink,
        graph: u32,
        step: u64,
    ) {
        let dir = tree.layout().execution_order_dir();
        if tree.ensure_dir(&dir).is_err() {
            return;
        }
        let p = tree.layout().global_execution_order_csv(graph);
        tables.append_line(&p, &format!("{step}\n"));
    }

    /// `{dir}/{T}.{S}.json` with MindSpore's formatting: 4-space indent, sorted keys, no
    /// trailing newline; `null` when there are no arguments. A name too long for the file
    /// system gets a short one, listed in `mapping.csv` through `tables`.
    pub(crate) fn write_kernel_args(
        &self,
        (tree, tables): (&OutputTree, &RowSink),
        dir: &Path,
        full_name: &str,
        args: &[(&str, &str)],
    ) {
        if tree.ensure_dir(dir).is_err() {
            return;
        }
        // MindSpore: T = the type part of the name, S = the name with `.` and `/` made `_`;
        // opdump also replaces the other characters `sanitize` removes, for safety.
        let t = crate::config::type_part(full_name);
        let file = format!("{}.{}.json", sanitize(t), sanitize(full_name));
        let file = if file.len() > NAME_MAX {
            // Too long for the file system: a short name, listed in mapping.csv like a long
            // .npy name.
            let short = kernel_args_short_name(&file);
            tables.append_line(&dir.join("mapping.csv"), &format!("{short},{file}\n"));
            short
        } else {
            file
        };
        self.write(&dir.join(file), kernel_args_json(args).as_bytes());
    }
}

/// The short name of a kernel-args file whose name passes [`NAME_MAX`]: the `.npy` short name
/// scheme (`opdump-{16 hex digits of its SHA-1}`) with `.json`.
fn kernel_args_short_name(long: &str) -> String {
    let npy = short_name(long);
    format!("{}.json", npy.strip_suffix(".npy").unwrap_or(&npy))
}

/// Appends one line of an execution-order csv: the name as given (MindSpore writes it raw),
/// except that ASCII control characters (newline, CR, NUL, ...) become `_`, so a name can never
/// add or split a line.
fn push_order_line(text: &mut String, name: &str) {
    text.extend(
        name.chars()
            .map(|c| if c.is_ascii_control() { '_' } else { c }),
    );
    text.push('\n');
}

/// MindSpore's kernel-args text (nlohmann `dump(4)` of a sorted object; `null` when empty).
pub(crate) fn kernel_args_json(args: &[(&str, &str)]) -> String {
    if args.is_empty() {
        return "null".into();
    }
    let map: BTreeMap<&str, &str> = args.iter().copied().collect();
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    // Serialising a map of strings cannot fail.
    let _ = map.serialize(&mut ser);
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_args_like_mindspore() {
        assert_eq!(
            kernel_args_json(&[("transpose_b", "False"), ("transpose_a", "True")]),
            "{\n    \"transpose_a\": \"True\",\n    \"transpose_b\": \"False\"\n}"
        );
        assert_eq!(kernel_args_json(&[]), "null");
    }

    #[test]
    fn order_lines_never_split_or_join() {
        let mut t = String::new();
        for n in ["Default/Add-op0", "a\nb", "c\r\nd", "e\0f", "g,\"h"] {
            push_order_line(&mut t, n);
        }
        assert_eq!(t, "Default/Add-op0\na_b\nc__d\ne_f\ng,\"h\n");
    }

    #[test]
    fn long_kernel_args_names_get_a_short_json_name() {
        let long = format!("T.{}.json", "x".repeat(300));
        let short = kernel_args_short_name(&long);
        assert!(
            short.starts_with("opdump-") && short.ends_with(".json"),
            "{short}"
        );
        assert_eq!(short.len(), "opdump-".len() + 16 + ".json".len());
        assert_eq!(short, kernel_args_short_name(&long), "deterministic");
    }
}
