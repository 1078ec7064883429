//! [`Accumulator`]: the chunked driver of the statistics kernels.
//!
//! A kernel pass yields a raw partial (extrema, sums, `nan`/`pos`/`neg` counts). This module
//! completes it from facts the pass already knows, touching the chunk again only when a rare
//! value is present:
//! - `zero = count − pos − neg − nan` (−0.0 is neither `> 0` nor `< 0`);
//! - `pos_inf` is counted only if the chunk's max is `+inf`, `neg_inf` only if its min is
//!   `−inf` (a compare-only rescan of a chunk that is still in cache);
//! - a zero max or min takes the sign of the chunk's first zero (rescan only when an extremum
//!   is exactly zero), as the reference's first-of-equals rule does;
//! - `first_nan`/`last_nan` are found by scanning from the front and from the back only when
//!   the chunk holds a NaN, converting exactly as [`summarize_reference`](super::summarize_reference)
//!   does, so their bits are identical to the reference's.

use super::{Summary, portable, reference::element_f64};
use crate::{DType, Error};

/// Which implementation runs the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Backend {
    /// Plain Rust lane kernels, compiled for the build's baseline target features.
    Portable,
    /// x86-64 AVX2 + FMA + F16C kernels (explicit intrinsics for f32/f16/bf16).
    Avx2,
    /// x86-64 AVX-512F/BW/VL kernels for f32/f16/bf16 and the integers of at most 32 bits
    /// but `uint32` (mask-register compares and counters, masked tails); the other dtypes run
    /// the [`Avx2`](Backend::Avx2) kernels, so the CPU needs AVX2, FMA and F16C too.
    Avx512,
}

/// The CPU features each x86-64 backend needs, detected at run time (`std`).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
fn has(backend: Backend) -> bool {
    let avx2 = || {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
            && std::is_x86_feature_detected!("f16c")
    };
    match backend {
        Backend::Portable => true,
        Backend::Avx2 => avx2(),
        Backend::Avx512 => {
            avx2()
                && std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vl")
        }
    }
}

/// The CPU features each x86-64 backend needs, from the build's target features (no `std`).
#[cfg(all(not(feature = "std"), target_arch = "x86_64"))]
fn has(backend: Backend) -> bool {
    let avx2 = cfg!(all(
        target_feature = "avx2",
        target_feature = "fma",
        target_feature = "f16c"
    ));
    match backend {
        Backend::Portable => true,
        Backend::Avx2 => avx2,
        Backend::Avx512 => {
            avx2 && cfg!(all(
                target_feature = "avx512f",
                target_feature = "avx512bw",
                target_feature = "avx512vl"
            ))
        }
    }
}

/// Only the portable backend exists off x86-64.
#[cfg(not(target_arch = "x86_64"))]
fn has(backend: Backend) -> bool {
    backend == Backend::Portable
}

impl Backend {
    /// Every backend, slowest first (those this CPU lacks included: see
    /// [`available`](Backend::available)).
    pub const ALL: [Backend; 3] = [Backend::Portable, Backend::Avx2, Backend::Avx512];

    /// The fastest backend this CPU supports: detected at run time with the `std` feature,
    /// from the compile-time target features without it.
    pub fn detect() -> Backend {
        if has(Backend::Avx512) {
            Backend::Avx512
        } else if has(Backend::Avx2) {
            Backend::Avx2
        } else {
            Backend::Portable
        }
    }

    /// `true` if this backend can run on this CPU.
    pub fn available(self) -> bool {
        has(self)
    }

    /// Short name for reports (`portable`, `avx2`, `avx512`).
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Portable => "portable",
            Backend::Avx2 => "avx2",
            Backend::Avx512 => "avx512",
        }
    }
}

/// Elements unpacked per stack block for `Int4`/`UInt4`/`UInt1`.
const UNPACK_BLOCK: usize = 4096;

/// Streaming statistics of one tensor fed in element-aligned chunks.
///
/// ```
/// use dump_core::{DType, stats::Accumulator};
///
/// let data: Vec<u8> = (1..=6).flat_map(|v| (v as f32).to_le_bytes()).collect();
/// let mut acc = Accumulator::new(DType::Float32, 6).unwrap();
/// acc.update(&data[..8]).unwrap(); // two elements
/// acc.update(&data[8..]).unwrap(); // four more
/// let s = acc.finish().unwrap().expect("six elements");
/// assert_eq!((s.min, s.max, s.sum), (1.0, 6.0, 21.0));
/// ```
#[derive(Clone, Debug)]
pub struct Accumulator {
    dtype: DType,
    elems: usize,
    seen: usize,
    backend: Backend,
    summary: Summary,
}

impl Accumulator {
    /// An accumulator for a tensor of `elems` elements of `dtype`, using the fastest backend.
    ///
    /// Complex dtypes give [`Error::Unsupported`]; an element count whose storage overflows
    /// `usize` gives [`Error::Overflow`].
    pub fn new(dtype: DType, elems: usize) -> Result<Accumulator, Error> {
        Accumulator::with_backend(dtype, elems, Backend::detect())
    }

    /// Like [`new`](Accumulator::new) with an explicit backend (tests and benchmarks).
    /// A backend this CPU lacks gives [`Error::Unsupported`] naming the dtype.
    pub fn with_backend(
        dtype: DType,
        elems: usize,
        backend: Backend,
    ) -> Result<Accumulator, Error> {
        if dtype.is_complex() || !backend.available() {
            return Err(Error::Unsupported(dtype));
        }
        dtype.storage_bytes(elems).ok_or(Error::Overflow)?;
        Ok(Accumulator {
            dtype,
            elems,
            seen: 0,
            backend,
            summary: Summary::EMPTY,
        })
    }

    /// Elements consumed so far.
    pub fn elems_seen(&self) -> usize {
        self.seen
    }

    /// Adds the next chunk of the tensor's bytes.
    ///
    /// The chunk must hold whole elements (whole bytes for `Int4`/`UInt4`/`UInt1`; the last chunk may
    /// end in a partly used byte), else [`Error::Misaligned`]; more elements than the
    /// tensor has give [`Error::LengthMismatch`].
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), Error> {
        let dtype = self.dtype;
        let remaining = self.elems - self.seen;
        let n = match dtype.size() {
            Some(size) => {
                if !chunk.len().is_multiple_of(size) {
                    return Err(Error::Misaligned {
                        len: chunk.len(),
                        multiple: size,
                    });
                }
                chunk.len() / size
            }
            None => {
                let per_byte = 8 / dtype.bits() as usize;
                let max = chunk.len().saturating_mul(per_byte);
                // The final byte may be only partly used.
                if max >= remaining && max - remaining < per_byte {
                    remaining
                } else {
                    max
                }
            }
        };
        if n > remaining {
            let expected = dtype.storage_bytes(self.elems).unwrap_or(usize::MAX);
            let before = dtype.storage_bytes(self.seen).unwrap_or(usize::MAX);
            return Err(Error::LengthMismatch {
                expected,
                actual: before.saturating_add(chunk.len()),
            });
        }
        if n == 0 {
            return Ok(());
        }
        let part = match dtype {
            DType::Int4 | DType::UInt4 | DType::UInt1 => self.packed(chunk, n),
            _ => {
                let mut p = raw(self.backend, dtype, chunk);
                complete(dtype, chunk, n, &mut p);
                p
            }
        };
        self.summary.merge(&part);
        self.seen += n;
        Ok(())
    }

    /// The statistics: `None` for an empty tensor, [`Error::LengthMismatch`] if fewer
    /// elements than announced were fed.
    pub fn finish(self) -> Result<Option<Summary>, Error> {
        if self.seen != self.elems {
            let need = |e: usize| self.dtype.storage_bytes(e).unwrap_or(usize::MAX);
            return Err(Error::LengthMismatch {
                expected: need(self.elems),
                actual: need(self.seen),
            });
        }
        Ok((self.elems != 0).then_some(self.summary))
    }

    /// Partial of `n` packed elements: unpacked through a stack block to `i8`/`u8`.
    ///
    /// Never inlined, so that the 4 KiB block is reserved only on this path, not in the
    /// frame of every `update` (it was most of a device agent's stack).
    #[inline(never)]
    fn packed(&self, chunk: &[u8], n: usize) -> Summary {
        let (wide, per_byte, signed) = match self.dtype {
            DType::Int4 => (DType::Int8, 2, true),
            DType::UInt4 => (DType::UInt8, 2, false),
            _ => (DType::UInt8, 8, false),
        };
        let mut out = Summary::EMPTY;
        let mut block = [0u8; UNPACK_BLOCK];
        let mut done = 0;
        for bytes in chunk.chunks(UNPACK_BLOCK / per_byte) {
            let m = (bytes.len() * per_byte).min(n - done);
            if per_byte == 2 {
                for (i, b) in block[..m].iter_mut().enumerate() {
                    let byte = bytes[i / 2];
                    let nib = if i % 2 == 0 { byte << 4 } else { byte & 0xf0 };
                    *b = if signed {
                        ((nib as i8) >> 4) as u8
                    } else {
                        nib >> 4
                    };
                }
            } else {
                for (i, b) in block[..m].iter_mut().enumerate() {
                    *b = (bytes[i / 8] >> (7 - i % 8)) & 1;
                }
            }
            let mut p = raw(self.backend, wide, &block[..m]);
            p.count = m as u64;
            p.zero = p.count - p.pos - p.neg;
            out.merge(&p);
            done += m;
        }
        out
    }
}

/// A raw kernel of `avx2.rs` or `avx512.rs` (callable only once the CPU features of its
/// backend are known to be present).
#[cfg(target_arch = "x86_64")]
type RawFn = unsafe fn(&[u8]) -> Summary;

/// The kernel pass for whole elements of a byte-addressable real dtype.
fn raw(backend: Backend, dtype: DType, data: &[u8]) -> Summary {
    match backend {
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 => {
            // SAFETY: an `Avx2` accumulator exists only when `Backend::available` confirmed
            // AVX2, FMA and F16C on this CPU (or the build enables them at compile time).
            unsafe {
                use super::avx2::{bf16_raw, f16_raw, f32_raw};
                // The unmasked pass lets NaN into the sums; a chunk that holds NaN (rare, and
                // still in cache) is redone with NaN masked out of them.
                let (fast, masked): (RawFn, RawFn) = match dtype {
                    DType::Float32 => (f32_raw::<false>, f32_raw::<true>),
                    DType::BFloat16 => (bf16_raw::<false>, bf16_raw::<true>),
                    DType::Float16 => (f16_raw::<false>, f16_raw::<true>),
                    _ => return super::avx2::other_raw(dtype, data),
                };
                let p = fast(data);
                if p.nan == 0 { p } else { masked(data) }
            }
        }
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512 => {
            // SAFETY: an `Avx512` accumulator exists only when `Backend::available` confirmed
            // AVX-512F/BW/VL, AVX2, FMA and F16C on this CPU (or the build enables them at
            // compile time); the AVX2 kernels need a subset of those.
            unsafe {
                use super::avx512::{bf16_raw, f16_raw, f32_raw};
                // The unmasked pass neither counts NaN nor keeps it out of the sums: a NaN
                // leaves `sum` NaN (so might +inf with -inf), and only then is the chunk (still
                // in cache) redone with NaN counted and masked out.
                let (fast, masked): (RawFn, RawFn) = match dtype {
                    DType::Float32 => (f32_raw::<false>, f32_raw::<true>),
                    DType::BFloat16 => (bf16_raw::<false>, bf16_raw::<true>),
                    DType::Float16 => (f16_raw::<false>, f16_raw::<true>),
                    _ => return super::avx512::other_raw(dtype, data),
                };
                let p = fast(data);
                if p.sum.is_nan() { masked(data) } else { p }
            }
        }
        _ => portable::raw(dtype, data),
    }
}

/// Completes a raw partial of `n` elements (see the module docs).
fn complete(dtype: DType, data: &[u8], n: usize, p: &mut Summary) {
    p.count = n as u64;
    p.zero = p.count - p.pos - p.neg - p.nan;
    if !dtype.is_float() {
        return;
    }
    if p.max == f64::INFINITY {
        p.pos_inf = count_inf(dtype, data, false);
    }
    if p.min == f64::NEG_INFINITY {
        p.neg_inf = count_inf(dtype, data, true);
    }
    let at = |i: usize| element_f64(dtype, data, i);
    if p.zero != 0 && (p.max == 0.0 || p.min == 0.0) {
        // The reference keeps the first of equal extrema (`v > max`), so a zero extremum has
        // the sign of the chunk's first zero; the vector kernels may have kept another lane's.
        if let Some(z) = (0..n).map(at).find(|v| *v == 0.0) {
            if p.max == 0.0 {
                p.max = z;
            }
            if p.min == 0.0 {
                p.min = z;
            }
        }
    }
    if p.nan != 0 {
        if let Some(v) = (0..n).map(at).find(|v| v.is_nan()) {
            p.first_nan = v;
        }
        if let Some(v) = (0..n).rev().map(at).find(|v| v.is_nan()) {
            p.last_nan = v;
        }
    }
}

/// Elements of a float dtype equal to `+inf` (or `-inf` if `negative`), by bit pattern
/// (float8 E4M3FN and the FNUZ types have no infinities).
fn count_inf(dtype: DType, data: &[u8], negative: bool) -> u64 {
    fn count<const S: usize>(data: &[u8], pat: [u8; S]) -> u64 {
        data.chunks_exact(S).filter(|c| *c == pat).count() as u64
    }
    let sign = if negative { 0x80 } else { 0 };
    match dtype {
        DType::Float8E5M2 => count(data, [0x7c | sign]),
        DType::Float16 => count(data, [0x00, 0x7c | sign]),
        DType::BFloat16 => count(data, [0x80, 0x7f | sign]),
        DType::Float32 => count(data, [0, 0, 0x80, 0x7f | sign]),
        DType::Float64 => count(data, [0, 0, 0, 0, 0, 0, 0xf0, 0x7f | sign]),
        _ => 0,
    }
}
