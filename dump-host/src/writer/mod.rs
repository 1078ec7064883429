//! Writing without slowing, crashing or corrupting the dumped run: a byte-bounded background
//! writer, crash-consistent files (temporary name + rename) and interleave-free csv appends.

mod atomic_file;
mod budget;
mod csv_append;
mod engine;
mod errors;
mod pool;

pub use atomic_file::{TMP_PREFIX, write_atomic, write_bytes_atomic};
pub use budget::Budget;
pub use csv_append::CsvAppender;
pub use engine::{Job, WriteErrors, Writer, WriterConfig};
pub use errors::{ErrorLog, WriteFailure};
pub use pool::BufferPool;
