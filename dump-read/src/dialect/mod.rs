//! Dialects: the on-disk layouts a dump can be read from. Each one is a module here with one
//! type implementing [`Dialect`], listed in [`DIALECTS`]; everything above (`inspect`,
//! `compare`, `opdump stats`) sees only the [`Dump`] and its [`TensorRecord`](crate::TensorRecord)s it produces.
//!
//! # Adding a dialect
//!
//! msprobe's `dump.json` tree ([`Msprobe`], `dialect/msprobe.rs`) is the worked example;
//! a new one is a module with a unit struct and:
//!
//! - [`Dialect::detect`]: a cheap look at the directory (a few `stat`s or one small read:
//!   `step{N}/rank{R}/dump.json` exists). It runs for every dialect on every directory a user
//!   names, and on the directories below when nothing matched (to say "the dump is in
//!   `X/`"), so it must not read tensor data or fail: `false` is the answer to anything odd.
//! - [`Dialect::read`]: walk the tree, and push one [`TensorRecord`](crate::TensorRecord) per dumped tensor into a
//!   [`Dump`] whose `dialect` is [`Dialect::name`]. Fill what the dialect has:
//!   - `rank`, `net` (a model or network name; `""` when the dialect has none), `graph`,
//!     `iteration` (the step);
//!   - `id`: the [`TensorId`](dump_stats::TensorId) (op type, op name as the dialect spells
//!     it, task/stream ids or 0, a timestamp that orders tensors in the order kernels ran —
//!     a counter is fine where the dialect has no clock — input or output, and the slot);
//!   - `dtype` and `shape`, `source` (a [`TensorSource`](crate::TensorSource): an `.npy`
//!     file, or a payload inside a CANN dump file; another container adds a variant there and
//!     an arm in [`TensorStream`](crate::TensorStream)) and `row_stats` (statistics the dialect
//!     recorded, any subset: missing columns are computed from `file` when asked).
//!
//!   Execution order and graph edges go into `execution_orders` and `graphs` when the
//!   dialect has them; inspect uses the edges to name a NaN's producer, compare to pair
//!   tensors by value name.
//! - Never stop for one bad file or row: push a [`Problem`](crate::Problem) naming the file and what is
//!   wrong, and go on. Return `Err` only when nothing can be read (the root itself).
//! - Open files without following symlinks, and never read a tensor whole: records hold
//!   paths, and statistics are streamed later in bounded chunks.
//!
//! Then add one line to [`DIALECTS`]. Detection order matters only when two dialects could
//! claim the same directory: put the more specific one first.

mod cann;
mod mindspore;
mod msprobe;
pub(crate) mod polygraphy;
mod reference;
mod stream;
mod walk;

use std::path::{Path, PathBuf};

pub use cann::{Cann, CannName, ge_position};
pub use mindspore::MindSpore;
pub(crate) use msprobe::parameters_grad_of;
pub use msprobe::{ModuleEdge, Msprobe, op_type_of};
pub use polygraphy::Polygraphy;
pub use reference::{NpyDir, Npz};
pub use stream::Stream;

use crate::{Dump, Error};

/// An on-disk dump layout that can be read back.
pub trait Dialect: Sync {
    /// Short name for reports and errors (`mindspore`).
    fn name(&self) -> &'static str;
    /// What the layout looks like, for the error when no dialect matches
    /// (`MindSpore's rank_{n}/{net}/{graph}/{iteration}/`).
    fn describe(&self) -> &'static str;
    /// Whether `root` holds a dump of this dialect: cheap, never fails.
    fn detect(&self, root: &Path) -> bool;
    /// Reads the dump under `root` (see the module docs for what to fill in).
    fn read(&self, root: &Path) -> Result<Dump, Error>;
}

/// Every dialect [`Dump::open`] tries, in order.
pub const DIALECTS: &[&dyn Dialect] = &[
    &MindSpore,
    &Msprobe,
    &Cann,
    &Npz,
    &NpyDir,
    &Polygraphy,
    &Stream,
];

/// The first dialect that recognises `root`.
pub fn detect(root: &Path) -> Option<&'static dyn Dialect> {
    DIALECTS.iter().copied().find(|d| d.detect(root))
}

/// Reads the dump under `root` with the first dialect that recognises it; the error when none
/// does lists what was looked for and names a directory up to two levels below that holds a
/// dump (a user who gave its parent).
pub(crate) fn open(root: &Path) -> Result<Dump, Error> {
    let meta = std::fs::metadata(root).map_err(|e| Error::io(root, e))?;
    if let Some(d) = detect(root) {
        return d.read(root);
    }
    if !meta.is_dir() {
        return Err(Error::format(
            root,
            "not a directory (give the dump directory), a reference file (.npz, Polygraphy JSON) \
             nor a device agent's frame stream",
        ));
    }
    let looked_for: Vec<&str> = DIALECTS.iter().map(|d| d.describe()).collect();
    let mut message = format!("no dump found: expected {}", looked_for.join(", or "));
    if let Some(below) = dump_below(root) {
        message.push_str(&format!("; {} holds one", below.display()));
    }
    Err(Error::format(root, message))
}

/// A directory up to two levels below `root` where a dialect is detected, or `None`.
fn dump_below(root: &Path) -> Option<PathBuf> {
    let subdirs = |d: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        v.sort();
        v
    };
    let found = |d: &Path| detect(d).is_some();
    for d in subdirs(root) {
        if found(&d) {
            return Some(d);
        }
        if let Some(dd) = subdirs(&d).into_iter().find(|dd| found(dd)) {
            return Some(dd);
        }
    }
    None
}
