//! One-pass statistics: [`Summary`] and the kernels that produce it from tensor bytes.
//!
//! - [`summarize`]: the statistics of a whole tensor in one pass over its bytes.
//! - [`Accumulator`]: the same, fed chunk by chunk (callers fuse other work per chunk; partials
//!   merge, so tiles, threads and devices combine with [`Summary::merge`]).
//! - [`summarize_reference`]: the slow scalar oracle.
//!
//! The kernels give exactly the reference's counts, extrema and NaN bits; `sum` and `sum_sq`
//! differ only by summation order (both accumulate in `f64`: f32 partial sums were measured
//! to lose `%g` digits of avg on zero-mean data, see the `accuracy` test).
//! With `std` the fastest [`Backend`] for the running CPU is chosen at run time (AVX2 + FMA +
//! F16C on x86-64); without `std`, from the build's target features.

mod accumulate;
#[cfg(target_arch = "x86_64")]
mod avx2;
mod portable;
mod reference;
mod summary;

pub use accumulate::{Accumulator, Backend};
pub use reference::summarize_reference;
pub use summary::Summary;

use crate::{DType, Error};

/// Statistics of `elems` elements of `dtype` stored in `data` (little-endian, C order).
///
/// Returns `Ok(None)` for an empty tensor: it has no statistics (not zeros). Complex dtypes
/// give [`Error::Unsupported`]; a `data` length that is not the storage of `elems` elements
/// gives [`Error::LengthMismatch`]. `data` needs no alignment.
pub fn summarize(dtype: DType, data: &[u8], elems: usize) -> Result<Option<Summary>, Error> {
    summarize_with(Backend::detect(), dtype, data, elems)
}

/// [`summarize`] with an explicit [`Backend`] (tests and benchmarks compare backends).
/// A backend this CPU lacks gives [`Error::Unsupported`].
pub fn summarize_with(
    backend: Backend,
    dtype: DType,
    data: &[u8],
    elems: usize,
) -> Result<Option<Summary>, Error> {
    let mut acc = Accumulator::with_backend(dtype, elems, backend)?;
    dtype.check_len(data.len(), elems)?;
    acc.update(data)?;
    acc.finish()
}

#[cfg(test)]
mod tests;
