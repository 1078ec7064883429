//! Files written once: `.dump_metadata/`, the execution-order csv files, kernel-argument json.

use std::{collections::BTreeMap, path::Path};

use serde::Serialize;

use super::{Shared, emit::FILE_MODE};
use crate::{layout::sanitize, writer::write_bytes_atomic};

impl Shared {
    /// `.dump_metadata/data_dump.json` (byte copy of the config) and `config.json`; existing
    /// files are kept, like MindSpore.
    pub(crate) fn write_metadata(&self) {
        let dir = self.tree.metadata_dir();
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
        let dir = self.tree.execution_order_dir();
        if self.ensure_dir(&dir).is_err() {
            return;
        }
        let mut text = String::from("NodeExecutionOrder-FullNameWithScope\n");
        for n in names {
            text.push_str(n);
            text.push('\n');
        }
        let p = self.tree.execution_order_csv(graph);
        if let Err(e) = write_bytes_atomic(&p, FILE_MODE, text.as_bytes()) {
            self.writer.errors().record(p, e);
        }
    }

    /// Appends a dumped step to `ms_global_execution_order_graph_{g}.csv`.
    pub(crate) fn append_global_order(&self, graph: u32, step: u64) {
        let dir = self.tree.execution_order_dir();
        if self.ensure_dir(&dir).is_err() {
            return;
        }
        let p = self.tree.global_execution_order_csv(graph);
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
        let text = kernel_args_json(args);
        let p = dir.join(file);
        if let Err(e) = write_bytes_atomic(&p, FILE_MODE, text.as_bytes()) {
            self.writer.errors().record(p, e);
        }
    }
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
}
