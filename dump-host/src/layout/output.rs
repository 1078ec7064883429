//! The write side's seam: every directory, file name, statistics row and metadata file the
//! Dumper writes is asked of an [`OutputLayout`]. MindSpore's layout ([`MindSporeLayout`]) is
//! the first implementation.
//!
//! # Adding an output layout
//!
//! Say msprobe's `dump.json` tree. Write `layout/msprobe.rs` with a type implementing
//! [`OutputLayout`]:
//!
//! - the directories: where a step's tensors go ([`iteration_dir`]), a graph's constants,
//!   the metadata and graph files, the execution order. The Dumper creates each directory
//!   (never through a symlink) the first time it is used and writes every file through a
//!   temporary name and a rename, so the layout only names paths; it touches no file;
//! - [`tensor_file`]: a tensor's file name from its [`TensorId`], format and dtype (the
//!   Dumper maps names longer than the file system allows to short ones itself);
//! - the statistics table: its path in a tensor directory, its header, and one row per
//!   tensor ([`stat_row`]: return `None` for a tensor the layout writes no row for).
//!
//! Then add one arm to [`open`], keyed by the plan's [`LayoutKind`]. Everything above
//! (routing, the writer, budgets, crash safety) is shared.
//!
//! [`iteration_dir`]: OutputLayout::iteration_dir
//! [`tensor_file`]: OutputLayout::tensor_file
//! [`stat_row`]: OutputLayout::stat_row

use std::{
    fmt,
    path::{Path, PathBuf},
};

use dump_core::DType;
use dump_stats::{
    CategorySet, DeviceStats, TensorId, TensorStats,
    csv::{RowMeta, header_string, write_device_row, write_row},
    names::{DTypeSpelling, TensorFileName, sanitize},
};

use super::DumpTree;

/// Which output layout a plan writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutKind {
    /// MindSpore 2.10's layout (`rank_{n}/{net}/{graph}/{iteration}/`, `statistic.csv`).
    #[default]
    MindSpore,
    /// msprobe's layout (`step{N}/rank{R}/dump.json`, `stack.json`, `construct.json`,
    /// `dump_tensor_data/`).
    Msprobe,
}

/// The statistics of one row: host semantics, or a device's (spec §7).
#[derive(Clone, Copy, Debug)]
pub enum RowValues<'a> {
    /// Host statistics (and digests).
    Host(&'a TensorStats),
    /// Device statistics (`null` cells, device precision).
    Device(&'a DeviceStats),
}

/// What a statistics row describes.
#[derive(Clone, Copy, Debug)]
pub struct RowTensor<'a> {
    /// Who the tensor belongs to (the op name as the runtime gave it: full scope name).
    pub id: TensorId<&'a str>,
    /// Element type.
    pub dtype: DType,
    /// Dimensions.
    pub shape: &'a [usize],
    /// Bytes of the tensor as loaded (the `Data Size` column).
    pub data_size: u64,
    /// CRC-32 of the tensor's bytes, when the layout asked for it ([`OutputLayout::wants_crc32`]).
    pub crc32: Option<u32>,
}

/// An on-disk layout the Dumper writes (see the module docs).
pub trait OutputLayout: Send + Sync + fmt::Debug {
    /// Short name (`mindspore`).
    fn name(&self) -> &'static str;
    /// The dump root every directory is created below.
    fn root(&self) -> &Path;
    /// Where the tensors of `graph` at `iteration` go.
    fn iteration_dir(&self, graph: u32, iteration: u64) -> PathBuf;
    /// Where the constants of `graph` go.
    fn constants_dir(&self, graph: u32) -> PathBuf;
    /// The directory of the metadata files (a copy of the config, versions).
    fn metadata_dir(&self) -> PathBuf;
    /// The directory of the graph description files.
    fn graphs_dir(&self) -> PathBuf;
    /// The directory of the execution-order files.
    fn execution_order_dir(&self) -> PathBuf;
    /// The execution order of `graph` (rewritten when the graph is described).
    fn execution_order_csv(&self, graph: u32) -> PathBuf;
    /// The list of dumped steps of `graph` (appended once per step).
    fn global_execution_order_csv(&self, graph: u32) -> PathBuf;
    /// The flight recorder's `trigger.json` of its `n`-th write (1 for the first), written
    /// last, after every file of that write.
    fn trigger_file(&self, n: u32) -> PathBuf;
    /// A tensor's file name, before the long-name mapping.
    fn tensor_file(&self, id: TensorId<&str>, format: &str, dtype: DType) -> String;
    /// The statistics table of the tensor directory `dir`.
    fn statistic_csv(&self, dir: &Path) -> PathBuf;
    /// The statistics table's header line (with its `\n`) for `categories`.
    fn stat_header(&self, categories: &CategorySet) -> String;
    /// One statistics row (with its `\n`), or `None` when this tensor gets no row.
    fn stat_row(
        &self,
        t: RowTensor<'_>,
        categories: &CategorySet,
        values: RowValues<'_>,
    ) -> Result<Option<String>, dump_stats::Error>;
    /// Whether rows carry the CRC-32 of the tensor's bytes (msprobe's summary_mode md5).
    fn wants_crc32(&self) -> bool {
        false
    }
    /// Whether rows are gathered per kernel into one document entry (msprobe's `dump.json`)
    /// instead of appended to a statistics table.
    fn per_kernel_entries(&self) -> bool {
        false
    }
}

/// The layout a plan asks for.
pub fn open(plan: &crate::DumpPlan) -> Box<dyn OutputLayout> {
    match plan.layout {
        LayoutKind::MindSpore => Box::new(MindSporeLayout {
            tree: DumpTree::new(&plan.root, plan.rank, &plan.net),
            spelling: plan.spelling(),
        }),
        LayoutKind::Msprobe => Box::new(super::MsprobeLayout::from_plan(plan)),
    }
}

/// MindSpore 2.10's layout: [`DumpTree`]'s directories, [`TensorFileName`]s and
/// `statistic.csv` rows byte-identical to MindSpore's.
#[derive(Clone, Debug)]
pub struct MindSporeLayout {
    tree: DumpTree,
    spelling: DTypeSpelling,
}

impl OutputLayout for MindSporeLayout {
    fn name(&self) -> &'static str {
        "mindspore"
    }

    fn root(&self) -> &Path {
        self.tree.root()
    }

    fn iteration_dir(&self, graph: u32, iteration: u64) -> PathBuf {
        self.tree.iteration_dir(graph, iteration)
    }

    fn constants_dir(&self, graph: u32) -> PathBuf {
        self.tree.constants_dir(graph)
    }

    fn metadata_dir(&self) -> PathBuf {
        self.tree.metadata_dir()
    }

    fn graphs_dir(&self) -> PathBuf {
        self.tree.rank_dir().join("graphs")
    }

    fn execution_order_dir(&self) -> PathBuf {
        self.tree.execution_order_dir()
    }

    fn execution_order_csv(&self, graph: u32) -> PathBuf {
        self.tree.execution_order_csv(graph)
    }

    fn global_execution_order_csv(&self, graph: u32) -> PathBuf {
        self.tree.global_execution_order_csv(graph)
    }

    fn trigger_file(&self, n: u32) -> PathBuf {
        let rank = self.tree.rank_dir();
        match n {
            0 | 1 => rank.join("trigger.json"),
            n => rank.join(format!("trigger_{n}.json")),
        }
    }

    fn tensor_file(&self, id: TensorId<&str>, format: &str, dtype: DType) -> String {
        TensorFileName {
            id,
            format,
            dtype,
            spelling: self.spelling,
        }
        .render()
    }

    fn statistic_csv(&self, dir: &Path) -> PathBuf {
        dir.join("statistic.csv")
    }

    fn stat_header(&self, categories: &CategorySet) -> String {
        header_string(categories)
    }

    fn stat_row(
        &self,
        t: RowTensor<'_>,
        categories: &CategorySet,
        values: RowValues<'_>,
    ) -> Result<Option<String>, dump_stats::Error> {
        // A comma would split the row (sanitize already removed newlines): both fields get
        // `_` for it, and the op type is sanitised as in the file name.
        let op_type = sanitize(t.id.op_type).replace(',', "_");
        let op_name = sanitize(t.id.op_name).replace(',', "_");
        let meta = RowMeta {
            id: TensorId {
                op_type: &op_type,
                op_name: &op_name,
                ..t.id
            },
            data_size: t.data_size,
            dtype: t.dtype,
            shape: t.shape,
        };
        let mut row = String::with_capacity(160 + op_name.len());
        let written = match values {
            RowValues::Host(s) => write_row(&mut row, &meta, categories, s)?,
            RowValues::Device(d) => {
                write_device_row(&mut row, &meta, categories, d)?;
                true
            }
        };
        Ok(written.then_some(row))
    }
}
