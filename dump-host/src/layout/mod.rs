//! Output layouts: what the Dumper writes where ([`OutputLayout`], MindSpore's layout first;
//! msprobe's; CANN's GE layout), MindSpore's directory tree and the tensor file-name codec
//! (from `dump-stats`).

mod ge;
mod msprobe;
mod output;
mod paths;

pub use dump_stats::{
    Io, TensorId,
    names::{DTypeSpelling, NAME_MAX, TensorFileName, sanitize, short_name},
};
pub use ge::{
    DEFAULT_MODEL_NAME, GeLayout, GeSettings, GeStat, GeStats, ge_file_name, ge_sanitize, now_us,
    time_dir, utc_fields,
};
pub use msprobe::{MsprobeLayout, torch_dtype};
pub use output::{
    LayoutKind, MindSporeLayout, OutputLayout, RowTensor, RowValues, open as open_layout,
};
pub use paths::{DumpTree, create_dir_nofollow};
