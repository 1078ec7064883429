//! Writing without slowing, crashing or corrupting the dumped run: a byte-bounded background
//! writer (large tensors written directly on the caller's thread instead of copied, see
//! [`WriterConfig::direct_write_bytes`]), crash-consistent files (temporary name + rename) and
//! interleave-free csv appends.

mod atomic_file;
mod budget;
mod csv_append;
mod engine;
mod errors;
pub mod faults;
mod pool;
mod tally;

pub use atomic_file::{TMP_PREFIX, write_atomic, write_bytes_atomic};
pub use budget::Budget;
pub use csv_append::{CsvAppender, OPEN_FILES};
pub use engine::{DEFAULT_DIRECT_WRITE_BYTES, Job, WriteErrors, Writer, WriterConfig};
pub use errors::{ErrorLog, WriteFailure};
pub use pool::BufferPool;
pub use tally::Tally;
