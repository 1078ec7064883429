//! What must hold of a dump tree whatever went wrong while it was written: every `.npy` under a
//! final name is complete, every csv has its header and only whole rows, no temporary file is
//! left, and the Dumper's counts equal what is on disk.

use std::{fs, path::Path};

use dump_host::writer::TMP_PREFIX;

use crate::{
    csv::parse_statistic_csv,
    fsutil::{file_name, walk},
};

/// What is on disk under a dump root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OnDisk {
    /// `.npy` files (all complete).
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Data rows of every `statistic.csv`.
    pub rows: u64,
}

/// Checks the tree under `root` and returns what it holds; `Err` says which file breaks which
/// rule.
pub fn check_tree(root: &Path) -> Result<OnDisk, String> {
    let mut disk = OnDisk::default();
    for e in walk(root) {
        if e.is_dir {
            continue;
        }
        let name = file_name(&e.path);
        let shown = e.path.display();
        if name.starts_with(TMP_PREFIX) {
            return Err(format!("{shown}: temporary file left behind"));
        }
        let bytes = fs::read(&e.path).map_err(|err| format!("{shown}: {err}"))?;
        if name.ends_with(".npy") {
            dump_npy::read_npy(&bytes).map_err(|err| format!("{shown}: incomplete: {err}"))?;
            disk.files += 1;
            disk.bytes += bytes.len() as u64;
            continue;
        }
        let text = String::from_utf8(bytes).map_err(|err| format!("{shown}: {err}"))?;
        if name == "statistic.csv" {
            let parsed = std::panic::catch_unwind(|| parse_statistic_csv(&text))
                .map_err(|_| format!("{shown}: broken csv:\n{text}"))?;
            disk.rows += parsed.rows.len() as u64;
        } else if name == "mapping.csv" {
            for l in text.split_inclusive('\n') {
                if !l.ends_with('\n') || l.trim_end().split(',').count() != 2 {
                    return Err(format!("{shown}: broken line {l:?}"));
                }
            }
        } else if name.starts_with("ms_global_execution_order_graph_") {
            for l in text.split_inclusive('\n') {
                if !l.ends_with('\n') || l.trim_end().parse::<u64>().is_err() {
                    return Err(format!("{shown}: broken line {l:?}"));
                }
            }
        } else if name.starts_with("ms_execution_order_graph_")
            && !text.starts_with("NodeExecutionOrder-FullNameWithScope\n")
        {
            return Err(format!("{shown}: no header"));
        }
    }
    Ok(disk)
}
