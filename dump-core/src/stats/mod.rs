//! One-pass statistics: [`Summary`] and the kernels that produce it from tensor bytes.

mod reference;
mod summary;

pub use reference::summarize_reference;
pub use summary::Summary;

use crate::{DType, Error};

/// Statistics of `elems` elements of `dtype` stored in `data` (little-endian, C order).
///
/// Returns `Ok(None)` for an empty tensor: it has no statistics (not zeros). Complex dtypes
/// give [`Error::Unsupported`]; a `data` length that is not the storage of `elems` elements
/// gives [`Error::LengthMismatch`].
pub fn summarize(dtype: DType, data: &[u8], elems: usize) -> Result<Option<Summary>, Error> {
    summarize_reference(dtype, data, elems)
}
