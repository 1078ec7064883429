//! Files written once: `.dump_metadata/`, the graph files, the execution-order csv files,
//! kernel-argument json.

use std::{collections::BTreeMap, path::Path};

use serde::Serialize;

use super::{Shared, emit::FILE_MODE};
use crate::{
    layout::{NAME_MAX, sanitize, short_name},
    writer::write_bytes_atomic,
};

impl Shared {
    /// Writes `graphs/ms_output_trace_code_graph_{id}.ir` and `.pb` and the execution order;
    /// failures are recorded in the writer's error log like every other write.
    pub(crate) fn write_graph(&self, id: u32, graph: &crate::graph::Graph) {
        self.write_execution_order(id, &graph.execution_order());
        let dir = self.layout.graphs_dir();
        if self.ensure_dir(&dir).is_err() {
            return;
        }
        let stem = format!("ms_output_trace_code_graph_{id}");
        for (ext, bytes) in [("ir", graph.to_ir().into_bytes()), ("pb", graph.to_pb())] {
            let p = dir.join(format!("{stem}.{ext}"));
            if let Err(e) = write_bytes_atomic(&p, FILE_MODE, &bytes) {
                self.writer.errors().record(p, e);
            }
        }
    }
}

impl Shared {
    /// `.dump_metadata/data_dump.json` (byte copy of the config) and `config.json`; existing
    /// files are kept, like MindSpore.
    pub(crate) fn write_metadata(&self) {
        let dir = self.layout.metadata_dir();
        if self.ensure_dir(&dir).is_err() {
            return;
        }
        let config = format!(
            "{{\"device_target\":\"{}\",\"ms_version\":\"{}\"}}",
            self.plan.device.as_str(),
            self.plan.ms_version
        );
        for (name, bytes) in [
            ("data_dump.json", self.plan.config_bytes.as_slice()),
            ("config.json", config.as_bytes()),
        ] {
            let p = dir.join(name);
            if p.exists() {
                continue;
            }
            if let Err(e) = write_bytes_atomic(&p, FILE_MODE, bytes) {
                self.writer.errors().record(p, e);
            }
        }
    }

    /// `execution_order/ms_execution_order_graph_{g}.csv`, rewritten.
    pub(crate) fn write_execution_order(&self, graph: u32, names: &[&str]) {
        let dir = self.layout.execution_order_dir();
        if self.ensure_dir(&dir).is_err() {
            return;
        }
        let mut text = String::from("NodeExecutionOrder-FullNameWithScope\n");
        for n in names {
            push_order_line(&mut text, n);
        }
        let p = self.layout.execution_order_csv(graph);
        if let Err(e) = write_bytes_atomic(&p, FILE_MODE, text.as_bytes()) {
            self.writer.errors().record(p, e);
        }
    }

    /// Appends a dumped step to `ms_global_execution_order_graph_{g}.csv`.
    pub(crate) fn append_global_order(&self, graph: u32, step: u64) {
        let dir = self.layout.execution_order_dir();
        if self.ensure_dir(&dir).is_err() {
            return;
        }
        let p = self.layout.global_execution_order_csv(graph);
        if let Err(e) = self.csv.append(&p, "", &format!("{step}\n"), FILE_MODE) {
            self.writer.errors().record(p, e);
        }
    }

    /// `{dir}/{T}.{S}.json` with MindSpore's formatting: 4-space indent, sorted keys, no
    /// trailing newline; `null` when there are no arguments.
    pub(crate) fn write_kernel_args(&self, dir: &Path, full_name: &str, args: &[(&str, &str)]) {
        if self.ensure_dir(dir).is_err() {
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
            let map = dir.join("mapping.csv");
            if let Err(e) = self
                .csv
                .append(&map, "", &format!("{short},{file}\n"), FILE_MODE)
            {
                self.writer.errors().record(map, e);
            }
            short
        } else {
            file
        };
        let text = kernel_args_json(args);
        let p = dir.join(file);
        if let Err(e) = write_bytes_atomic(&p, FILE_MODE, text.as_bytes()) {
            self.writer.errors().record(p, e);
        }
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
