//! Where MindSpore 2.10 puts things under the dump root.
//!
//! ```text
//! {path}/rank_{rank}/
//!   .dump_metadata/data_dump.json, config.json
//!   {net}/{graph}/{iteration}/   tensors, statistic.csv, mapping.csv, kernel-args *.json
//!   {net}/{graph}/constants/
//!   execution_order/ms_execution_order_graph_{graph}.csv
//!   execution_order/ms_global_execution_order_graph_{graph}.csv
//! ```

use std::path::{Path, PathBuf};

/// The directory tree of one rank's dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpTree {
    rank_dir: PathBuf,
    net: String,
}

impl DumpTree {
    /// The tree for `root` (the config's `path`), `rank` and `net_name`.
    ///
    /// `net` must already be validated (`[A-Za-z0-9_-]+`); the config parser guarantees it.
    pub fn new(root: &Path, rank: u32, net: &str) -> Self {
        DumpTree {
            rank_dir: root.join(format!("rank_{rank}")),
            net: net.to_owned(),
        }
    }

    /// `{path}/rank_{rank}`.
    pub fn rank_dir(&self) -> &Path {
        &self.rank_dir
    }

    /// `{rank}/.dump_metadata`.
    pub fn metadata_dir(&self) -> PathBuf {
        self.rank_dir.join(".dump_metadata")
    }

    /// `{rank}/{net}/{graph}/{iteration}`.
    pub fn iteration_dir(&self, graph: u32, iteration: u64) -> PathBuf {
        self.rank_dir
            .join(&self.net)
            .join(graph.to_string())
            .join(iteration.to_string())
    }

    /// `{rank}/{net}/{graph}/constants`.
    pub fn constants_dir(&self, graph: u32) -> PathBuf {
        self.rank_dir
            .join(&self.net)
            .join(graph.to_string())
            .join("constants")
    }

    /// `{rank}/execution_order`.
    pub fn execution_order_dir(&self) -> PathBuf {
        self.rank_dir.join("execution_order")
    }

    /// `execution_order/ms_execution_order_graph_{graph}.csv`.
    pub fn execution_order_csv(&self, graph: u32) -> PathBuf {
        self.execution_order_dir()
            .join(format!("ms_execution_order_graph_{graph}.csv"))
    }

    /// `execution_order/ms_global_execution_order_graph_{graph}.csv`.
    pub fn global_execution_order_csv(&self, graph: u32) -> PathBuf {
        self.execution_order_dir()
            .join(format!("ms_global_execution_order_graph_{graph}.csv"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_reference() {
        let t = DumpTree::new(Path::new("/ref/raw/a/dump"), 0, "TinyNet");
        assert_eq!(
            t.iteration_dir(0, 2),
            Path::new("/ref/raw/a/dump/rank_0/TinyNet/0/2")
        );
        assert_eq!(
            t.metadata_dir(),
            Path::new("/ref/raw/a/dump/rank_0/.dump_metadata")
        );
        assert_eq!(
            t.global_execution_order_csv(1),
            Path::new(
                "/ref/raw/a/dump/rank_0/execution_order/ms_global_execution_order_graph_1.csv"
            )
        );
        assert_eq!(
            t.constants_dir(3),
            Path::new("/ref/raw/a/dump/rank_0/TinyNet/3/constants")
        );
    }
}
