//! Output layouts: what the Dumper writes where ([`OutputLayout`], MindSpore's layout first),
//! MindSpore's directory tree and the tensor file-name codec (from `dump-stats`).

mod msprobe;
mod output;
mod paths;

pub use dump_stats::{
    Io, TensorId,
    names::{DTypeSpelling, NAME_MAX, TensorFileName, sanitize, short_name},
};
pub use msprobe::{MsprobeLayout, torch_dtype};
pub use output::{
    LayoutKind, MindSporeLayout, OutputLayout, RowTensor, RowValues, open as open_layout,
};
pub use paths::{DumpTree, create_dir_nofollow};
