//! One-pass statistics: [`Summary`] and the kernels that produce it from tensor bytes.
//!
//! - [`summarize`]: the statistics of a whole tensor in one pass over its bytes.
//! - [`Accumulator`]: the same, fed chunk by chunk (callers fuse other work per chunk; partials
//!   merge, so tiles, threads and devices combine with [`Summary::merge`]).
//! - [`summarize_reference`]: the slow scalar oracle.
//!
//! The kernels give exactly the reference's counts, extrema and NaN bits; `sum` and `sum_sq`
//! differ only by summation order.
//!
//! Accuracy design: both `sum` and `sum_sq` accumulate in `f64` lanes (each `f32` widened in
//! registers, squares by FMA). The cheaper alternative, `f32` lane sums flushed into `f64`
//! every 64 steps, was measured over 10^4 random f32 tensors (1..3000 elements, half of them
//! zero-mean) against a compensated `f64` reference: 0.70% of avg and 0.37% of l2norm cells
//! printed with `%g` (6 digits) differed, above the 0.1% budget. With `f64` lanes the
//! `accuracy` test finds 0 of 20,000 cells differing, and the kernel still runs at about one
//! element per cycle (the `f64` work is 4 of about 9 vector operations per 8 elements).
//!
//! Speed design (AVX2 backend, `avx2.rs`): independent lane accumulators kept in registers,
//! branch-free counting (compare masks subtracted from `u32` lanes; `zero` and the infinity
//! counts are derived, see `accumulate.rs`), `bf16`/`f16` widened in registers, software
//! prefetch 8 KiB ahead, from 32 KiB of data on (none past the end of small tensors).
//!
//! AVX-512 backend (`avx512.rs`, f32/f16/bf16 and the integers up to 32 bits): the same
//! accumulation (`f64` lane sums, so the same accuracy) in fewer instructions: compares into
//! mask registers and merge-masked counter adds, masked tail loads instead of a scalar tail,
//! `f16`/`bf16` signs counted on their 16-bit bits, 32 at a time; the first pass does not
//! count NaN at all (a NaN leaves `sum` NaN, and only such a chunk is redone exactly);
//! `f16`/`bf16` extrema taken on the 16-bit bits by integer max/min; two steps per loop
//! iteration; prefetch 8 KiB ahead. On a Zen 5 EPYC it runs about 2x the AVX2 kernels in
//! cache (BENCHMARKS.md, "Issue 28 item 3: AVX-512 against AVX2").
//!
//! With `std` the fastest [`Backend`] for the running CPU is chosen at run time on x86-64:
//! AVX-512F/BW/VL (with AVX2 + FMA + F16C), else AVX2 + FMA + F16C, else portable; without
//! `std`, from the build's target features.

mod accumulate;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod portable;
mod reference;
mod summary;

pub use accumulate::{Accumulator, Backend};
pub(crate) use reference::element_f64;
pub use reference::summarize_reference;
pub use summary::{GENERATED_NAN, Summary, pin_generated_nan};

use crate::{
    DType, Error,
    hash::{Md5Stream, MsSha1},
};

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
    // Chunked, so that the rare second look at a chunk (counting infinities, locating NaNs)
    // reads it from L2 instead of from memory.
    for chunk in data.chunks(FUSE_CHUNK) {
        acc.update(chunk)?;
    }
    acc.finish()
}

/// Bytes per chunk of [`summarize_fused`]: small enough that the chunk is still in L2 when the
/// second consumer (a hash, a writer) reads it, large enough to amortise the per-chunk work.
/// A multiple of 8, so every chunk holds whole elements of every dtype.
pub const FUSE_CHUNK: usize = 256 << 10;

/// [`summarize`] that hands every [`FUSE_CHUNK`]-byte chunk of `data`, in order, to `each_chunk`
/// right after the statistics kernel has read it, so both passes share one trip from memory
/// (for example `|c| md5.update(c)`). Same results and errors as [`summarize`]; on an error
/// `each_chunk` has not been called.
pub fn summarize_fused(
    dtype: DType,
    data: &[u8],
    elems: usize,
    mut each_chunk: impl FnMut(&[u8]),
) -> Result<Option<Summary>, Error> {
    let mut acc = Accumulator::new(dtype, elems)?;
    dtype.check_len(data.len(), elems)?;
    for chunk in data.chunks(FUSE_CHUNK) {
        acc.update(chunk)?;
        each_chunk(chunk);
    }
    acc.finish()
}

/// Statistics plus MD5 and/or MindSpore's SHA-1 of the same bytes in one trip over memory:
/// each [`FUSE_CHUNK`] chunk is hashed right after the statistics kernel read it, while it is
/// still in L2. The hash states are updated in place (the caller calls `finish`); pass `None`
/// for a hash that is not wanted. Same results and errors as [`summarize`]; on an error the
/// hashes have not been fed.
///
/// ```
/// use dump_core::{DType, hash::Md5Stream, stats::summarize_hashed};
///
/// let data = [0u8, 0, 128, 63]; // one f32 1.0
/// let mut md5 = Md5Stream::new();
/// let s = summarize_hashed(DType::Float32, &data, 1, Some(&mut md5), None).unwrap();
/// assert_eq!(s.map(|s| s.sum), Some(1.0));
/// assert_eq!(md5.finish(), dump_core::hash::md5(&data));
/// ```
pub fn summarize_hashed(
    dtype: DType,
    data: &[u8],
    elems: usize,
    mut md5: Option<&mut Md5Stream>,
    mut sha1: Option<&mut MsSha1>,
) -> Result<Option<Summary>, Error> {
    summarize_fused(dtype, data, elems, |chunk| {
        if let Some(m) = md5.as_deref_mut() {
            m.update(chunk);
        }
        if let Some(s) = sha1.as_deref_mut() {
            s.update(chunk);
        }
    })
}

#[cfg(test)]
mod tests;
