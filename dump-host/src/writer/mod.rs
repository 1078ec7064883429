//! Writing without slowing, crashing or corrupting the dumped run: a byte-bounded background
//! writer (large tensors written directly on the caller's thread instead of copied, see
//! [`WriterConfig::direct_write_bytes`]), crash-consistent files (temporary name + rename),
//! whole-row csv appends with a bounded number of open files, a memory budget that also covers
//! idle copy buffers, and a fault-injection seam ([`faults`]) through which every filesystem
//! call of the writer can be made to fail in tests.

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
