//! `dump-read`: operator dumps read back, whichever dialect wrote them, and the two questions
//! users ask of them.
//!
//! - [`Dump::open`] detects the dialect under a directory ([`dialect`]: MindSpore's layout,
//!   which opdump writes too, msprobe's `dump.json` tree, Ascend's CANN dump files, and
//!   reference arrays in an `.npz`, a directory of `NAME.npy` or Polygraphy's saved outputs;
//!   each dialect is one module implementing [`dialect::Dialect`]) and yields one
//!   [`TensorRecord`] per dumped tensor, whose [`TensorSource`] says where its data is: a
//!   tensor file ([`TensorFile`]: an `.npy`, a PyTorch `.pt`, an `.npz` member), or a payload
//!   inside a CANN dump file; [`TensorStream`] reads either in the host layout (device formats
//!   converted block by block through `dump-device-ascend`). Files are never
//!   read whole: headers are parsed on their own and data is streamed in
//!   [`dump_npy::CHUNK`]-byte chunks, so memory stays bounded whatever the dump's size.
//!   Problems with single files (a truncated `.npy`, a row without a file, a name not in the
//!   dialect's form) never stop the reading: they are collected in [`Dump::problems`].
//! - [`inspect::inspect`]: per rank and iteration counts, the first operator that went
//!   non-finite, the first non-finite tensor of any role (a NaN weight or graph input is found
//!   even when every output stays finite), the kernels that grow their values most,
//!   suspicious outputs.
//! - [`train`]: the role of each kernel in a training dump (activation, gradient, parameter,
//!   optimizer) and, per parameter, the trend of its gradient norm and update ratio over the
//!   steps (vanishing, exploding, frozen).
//! - [`compare::compare`]: pairs the tensors of two dumps and measures each pair in one fused
//!   pass: the first divergent operator.
//! - [`summarize_npy`] / [`summarize_npy_many`]: `statistic.csv`-ready statistics and digests
//!   of `.npy` files (`opdump stats`); many files are hashed together, their MD5s side by side
//!   in the lanes of a multi-buffer engine.
//!
//! It never prints; `opdump inspect` and `opdump compare` word and render what it returns.
//!
//! ```
//! use dump_read::{Dump, inspect::inspect};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A dump of one Add whose output went infinite: MindSpore's layout, one statistic.csv.
//! let root = std::env::temp_dir().join(format!("dump-read-doc-{}", std::process::id()));
//! let dir = root.join("rank_0/Net/0/0");
//! std::fs::create_dir_all(&dir)?;
//! std::fs::write(
//!     dir.join("statistic.csv"),
//!     "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,\
//!      Max Value,Min Value,L2Norm Value\n\
//!      Add,Default_Add-op0,0,0,1,input,0,8,float32,\"(2)\",2,1,2.23607,\n\
//!      Add,Default_Add-op0,0,0,2,output,0,8,float32,\"(2)\",inf,1,inf,\n",
//! )?;
//! let dump = Dump::open(&root)?;
//! assert_eq!(dump.dialect, "mindspore");
//! assert_eq!(dump.tensors.len(), 2);
//! let report = inspect(&dump, 1, &|_done, _total| {});
//! let first = report.first_nonfinite.expect("the output is infinite");
//! assert_eq!(report.kernels[first.kernel].op_name, "Default_Add-op0");
//! assert_eq!(dump.tensors[first.tensor].io_slot(), "output.0");
//! std::fs::remove_dir_all(&root)?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]
#![deny(unreachable_pub)]
// The library never prints: the CLI words what it returns.
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]

pub mod compare;
mod csv;
pub mod dialect;
mod digests;
mod dump;
mod error;
mod graph;
pub mod inspect;
mod many;
#[cfg(target_os = "linux")]
mod mapped;
mod par;
mod pt;
pub mod source;
mod stats;
mod tensor_file;
pub mod train;

pub use csv::{CsvRow, read_statistic_csv};
pub use dump::{Dump, KernelRef, Problem, TensorRecord};
pub use error::Error;
pub use graph::{GraphNode, OnnxOrigin, parse_ir, parse_origin, torchscript_scope};
pub use many::{LANE_CHUNK, summarize_npy_many};
pub use par::par_map;
pub use source::{CannStream, CannTensor, READ_BATCH, TensorSource, TensorStream};
pub use stats::{FileSummary, Stats, name_dtype_fits, summarize_npy};
pub use tensor_file::TensorFile;
