//! [`Out`]: where a dump's bytes go, the four output parts of a Dumper together. Each part
//! owns its state and its methods; what needs two of them (a long tensor name listed in
//! `mapping.csv`, the global execution order) takes both as arguments. The tensor path
//! ([`super::emit`]), the flight recorder's write ([`super::flight`]) and msprobe's documents
//! ([`super::msprobe`]) write through an `&Out`.

use super::{metadata::Metadata, row_sink::RowSink, tensor_files::TensorFiles, tree::OutputTree};

/// The output parts of one Dumper.
pub(crate) struct Out {
    /// The layout, the directories made, the timestamps ([`OutputTree`]).
    pub(crate) tree: OutputTree,
    /// `statistic.csv` rows and the one-line tables ([`RowSink`]).
    pub(crate) tables: RowSink,
    /// `.npy` files: the writer, its buffers, the disk budget ([`TensorFiles`]).
    pub(crate) files: TensorFiles,
    /// The files written once ([`Metadata`]).
    pub(crate) meta: Metadata,
}

impl Out {
    /// Appends every pending statistic row to its file and starts a new directory-check
    /// epoch (at the end of each step, and before the writer is flushed). The tensors gathered
    /// for hashing on the writer are queued first; rows still waiting for their digests are
    /// waited for with `wait` (a flush of the writer), else left for a later flush (a step's
    /// end: the runtime does not wait for the writer).
    pub(crate) fn flush_rows(&self, wait: bool) {
        self.files.send_hashes();
        self.tables.flush(&self.tree, wait);
    }

    /// Appends a dumped step to the global execution order of `graph`.
    pub(crate) fn append_global_order(&self, graph: u32, step: u64) {
        self.meta
            .append_global_order(&self.tree, &self.tables, graph, step);
    }

    /// Writes a kernel's arguments into `dir`.
    pub(crate) fn write_kernel_args(
        &self,
        dir: &std::path::Path,
        kernel: &str,
        args: &[(&str, &str)],
    ) {
        self.meta
            .write_kernel_args((&self.tree, &self.tables), dir, kernel, args);
    }
}
