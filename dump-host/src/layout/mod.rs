//! MindSpore's on-disk layout: directory tree and tensor file names.

mod names;
mod paths;

pub use names::{
    DTypeSpelling, DumpFileName, Io, NAME_MAX, TensorFileName, parse_file_name, sanitize,
    short_name,
};
pub use paths::{DumpTree, create_dir_nofollow};
