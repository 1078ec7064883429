//! Writing without slowing, crashing or corrupting the dumped run: a byte-bounded background
//! writer (large tensors written directly on the caller's thread instead of copied, see
//! [`WriterConfig::direct_write_bytes`]), crash-consistent files (unnamed, then linked into
//! place; a temporary name + rename where the file system refuses unnamed files),
//! whole-row csv appends with a bounded number of open files, a memory budget that also covers
//! idle copy buffers, and a fault-injection seam ([`faults`]) through which every filesystem
//! call of the writer can be made to fail in tests.

mod atomic_file;
mod budget;
mod copy_buf;
mod csv_append;
mod digest;
mod engine;
mod errors;
pub mod faults;
mod pool;
mod row_batch;
mod tally;

pub(crate) use atomic_file::{FILE_MODE, create_scratch, write_atomic, write_bytes_atomic};
pub use atomic_file::{NAMED_TEMPORARIES_ENV, TMP_PREFIX, WholeFile};
pub(crate) use budget::Budget;
pub(crate) use copy_buf::CopyBuf;
pub(crate) use csv_append::CsvAppender;
pub use csv_append::OPEN_FILES;
pub(crate) use digest::{DigestPromise, DigestSlot, Digests};
pub(crate) use engine::Writer;
pub use engine::{DEFAULT_DIRECT_WRITE_BYTES, DEFAULT_WRITER_NICE, WriteErrors, WriterConfig};
pub(crate) use errors::ErrorLog;
pub use errors::WriteFailure;
pub(crate) use pool::BufferPool;
#[cfg(test)]
pub(crate) use row_batch::BATCH_BYTES;
pub(crate) use row_batch::{Deferred, DeferredRow, DigestRow, RowBatch};
pub(crate) use tally::Tally;
