//! MindSpore's on-disk layout: directory tree and tensor file names.

mod names;
mod paths;

pub use names::{DTypeSpelling, Io, NAME_MAX, TensorFileName, sanitize, short_name};
pub use paths::{DumpTree, create_dir_nofollow};
