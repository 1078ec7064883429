//! Pair metrics for comparing two dumps of the same tensor: one fused pass over both tensors'
//! bytes gives every number `opdump compare` reports.
//!
//! [`PairAccumulator`] is fed the two tensors chunk by chunk (element-aligned, equal lengths)
//! and produces [`PairMetrics`]: the dot product and both squared norms (cosine similarity),
//! max absolute and relative error, the number of elements whose relative error exceeds
//! 0.001 and 0.005 (msprobe's one-thousandth and five-thousandths ratios), the number outside
//! numpy's `allclose` rule `|a - b| <= atol + rtol * |b|`, the largest ULP distance, and the
//! number of positions where the non-finite values differ.
//!
//! Definitions (`a` is the first tensor, `b` the reference):
//! - Elements where both values are finite feed every error metric; the others only count in
//!   [`nonfinite_mismatch`](PairMetrics::nonfinite_mismatch), unless they are equal (the same
//!   infinity) or both NaN.
//! - Relative error is `|a - b| / |b|`; `0` when `a == b`, `+inf` when `b == 0 != a`.
//! - ULP distance is counted in the tensor's own dtype (`f16`, `bf16`, `f32`, `f64`: the
//!   number of representable values between `a` and `b`, `±0` equal); for integers and bool
//!   it is `|a - b|`.
//! - Errors are computed in `f64` from the exact element values; the AVX2 and AVX-512
//!   kernels for `f32` round only the maximum relative error to `f32` (the counts are exact).
//!
//! The same runtime CPU dispatch as the statistics kernels ([`Backend`]) picks the AVX-512
//! kernel (16 pairs per step) or the AVX2 kernel (8) for `f32` data; every other dtype, and
//! CPUs without AVX2/FMA/F16C, use the portable kernel.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod portable;
#[cfg(test)]
mod tests;

use crate::{DType, Error, stats::Backend};

/// The `allclose` tolerance: an element pair is close when `|a - b| <= atol + rtol * |b|`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Tolerance {
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

impl Tolerance {
    /// opdump's default tolerance for `dtype`: tight enough that a 0.1% change of a value of
    /// ordinary size is a divergence in `f32`/`f64`, loose enough for the rounding of the
    /// narrow float types. Integers and bool must be equal.
    ///
    /// | dtype | rtol | atol |
    /// |---|---|---|
    /// | float64 | 1e-7 | 1e-10 |
    /// | float32 | 1e-4 | 1e-6 |
    /// | float16 | 1e-3 | 1e-5 |
    /// | bfloat16 | 8e-3 | 1e-5 |
    /// | float8_e4m3fn | 0.125 | 2^-9 (its smallest subnormal) |
    /// | float8_e5m2 | 0.25 | 2^-16 (its smallest subnormal) |
    /// | float8_e4m3fnuz | 0.125 | 2^-10 (its smallest subnormal) |
    /// | float8_e5m2fnuz | 0.25 | 2^-17 (its smallest subnormal) |
    /// | integers, bool | 0 | 0 |
    ///
    /// The float8 tolerances allow one rounding step (one unit in the last place is at most
    /// 2^-3 of the value in e4m3fn and e4m3fnuz, 2^-2 in e5m2 and e5m2fnuz).
    pub const fn default_for(dtype: DType) -> Tolerance {
        let (rtol, atol) = match dtype {
            DType::Float64 => (1e-7, 1e-10),
            DType::Float32 | DType::Complex64 | DType::Complex128 => (1e-4, 1e-6),
            DType::Float16 => (1e-3, 1e-5),
            DType::BFloat16 => (8e-3, 1e-5),
            DType::Float8E4M3FN => (0.125, 1.0 / 512.0),
            DType::Float8E5M2 => (0.25, 1.0 / 65536.0),
            DType::Float8E4M3FNUZ => (0.125, 1.0 / 1024.0),
            DType::Float8E5M2FNUZ => (0.25, 1.0 / 131072.0),
            _ => (0.0, 0.0),
        };
        Tolerance { rtol, atol }
    }
}

/// Everything one pass over a pair of tensors measures. Partials [`merge`](PairMetrics::merge).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PairMetrics {
    /// Element pairs seen.
    pub count: u64,
    /// Pairs where both values are finite (the error metrics cover these).
    pub finite: u64,
    /// Sum of `a * b` over finite pairs.
    pub dot: f64,
    /// Sum of `a * a` over finite pairs.
    pub sq_a: f64,
    /// Sum of `b * b` over finite pairs.
    pub sq_b: f64,
    /// Largest `|a - b|` (`0` when there is no finite pair).
    pub max_abs: f64,
    /// Largest `|a - b| / |b|`.
    pub max_rel: f64,
    /// Pairs whose relative error exceeds 0.001.
    pub rel_over_1e3: u64,
    /// Pairs whose relative error exceeds 0.005.
    pub rel_over_5e3: u64,
    /// Pairs outside the tolerance (`|a - b| > atol + rtol * |b|`).
    pub not_close: u64,
    /// Largest ULP distance.
    pub max_ulp: u64,
    /// Positions where a NaN or infinity of one side is not matched by the same value (or a
    /// NaN) on the other.
    pub nonfinite_mismatch: u64,
}

impl Default for PairMetrics {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl PairMetrics {
    /// No pairs: the identity of [`merge`](PairMetrics::merge).
    pub const EMPTY: PairMetrics = PairMetrics {
        count: 0,
        finite: 0,
        dot: 0.0,
        sq_a: 0.0,
        sq_b: 0.0,
        max_abs: 0.0,
        max_rel: 0.0,
        rel_over_1e3: 0,
        rel_over_5e3: 0,
        not_close: 0,
        max_ulp: 0,
        nonfinite_mismatch: 0,
    };

    /// Adds a partial over other elements.
    pub fn merge(&mut self, o: &PairMetrics) {
        self.count += o.count;
        self.finite += o.finite;
        self.dot += o.dot;
        self.sq_a += o.sq_a;
        self.sq_b += o.sq_b;
        self.max_abs = self.max_abs.max(o.max_abs);
        self.max_rel = self.max_rel.max(o.max_rel);
        self.rel_over_1e3 += o.rel_over_1e3;
        self.rel_over_5e3 += o.rel_over_5e3;
        self.not_close += o.not_close;
        self.max_ulp = self.max_ulp.max(o.max_ulp);
        self.nonfinite_mismatch += o.nonfinite_mismatch;
    }

    /// Cosine similarity over the finite pairs: `1` when both are all zeros, `0` when only
    /// one is, NaN when there is no finite pair.
    pub fn cosine(&self) -> f64 {
        if self.finite == 0 {
            return f64::NAN;
        }
        match (self.sq_a == 0.0, self.sq_b == 0.0) {
            (true, true) => 1.0,
            (true, false) | (false, true) => 0.0,
            _ => self.dot / libm::sqrt(self.sq_a * self.sq_b),
        }
    }

    /// Share of pairs whose relative error exceeds 0.001 (`0` for an empty pair).
    pub fn ratio_over_1e3(&self) -> f64 {
        share(self.rel_over_1e3, self.count)
    }

    /// Share of pairs whose relative error exceeds 0.005.
    pub fn ratio_over_5e3(&self) -> f64 {
        share(self.rel_over_5e3, self.count)
    }

    /// `true` when every pair is within the tolerance and the non-finite values agree.
    pub fn within_tolerance(&self) -> bool {
        self.not_close == 0 && self.nonfinite_mismatch == 0
    }
}

fn share(n: u64, of: u64) -> f64 {
    if of == 0 { 0.0 } else { n as f64 / of as f64 }
}

/// Bytes per kernel call: both inputs' chunks stay in L2 while the statistics kernels read
/// them too. A multiple of 8, so it cuts every dtype at an element boundary.
pub const PAIR_CHUNK: usize = 256 << 10;

/// Streaming pair metrics of two tensors of the same dtype and element count, fed in chunks.
///
/// ```
/// use dump_core::{DType, compare::{PairAccumulator, Tolerance}};
///
/// let a: Vec<u8> = [1.0f32, 2.0, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect();
/// let b: Vec<u8> = [1.0f32, 2.002, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect();
/// let mut acc = PairAccumulator::new(DType::Float32, 3, Tolerance::default_for(DType::Float32)).unwrap();
/// acc.update(&a, &b).unwrap();
/// let m = acc.finish().unwrap();
/// assert_eq!((m.count, m.rel_over_1e3, m.not_close), (3, 0, 1));
/// assert!((m.max_abs - 0.002).abs() < 1e-6 && m.cosine() > 0.99999);
/// ```
#[derive(Clone, Debug)]
pub struct PairAccumulator {
    dtype: DType,
    elems: usize,
    seen: usize,
    backend: Backend,
    tol: Tolerance,
    metrics: PairMetrics,
}

impl PairAccumulator {
    /// An accumulator for two tensors of `elems` elements of `dtype`, with the fastest backend.
    /// Complex dtypes give [`Error::Unsupported`].
    pub fn new(dtype: DType, elems: usize, tol: Tolerance) -> Result<PairAccumulator, Error> {
        PairAccumulator::with_backend(dtype, elems, tol, Backend::detect())
    }

    /// Like [`new`](PairAccumulator::new) with an explicit backend (tests, benchmarks).
    pub fn with_backend(
        dtype: DType,
        elems: usize,
        tol: Tolerance,
        backend: Backend,
    ) -> Result<PairAccumulator, Error> {
        if dtype.is_complex() || !backend.available() {
            return Err(Error::Unsupported(dtype));
        }
        dtype.storage_bytes(elems).ok_or(Error::Overflow)?;
        Ok(PairAccumulator {
            dtype,
            elems,
            seen: 0,
            backend,
            tol,
            metrics: PairMetrics::EMPTY,
        })
    }

    /// Adds the next chunk of both tensors: equal lengths, whole elements (whole bytes for
    /// `int4`/`uint1`, the last chunk may end in a partly used byte).
    pub fn update(&mut self, a: &[u8], b: &[u8]) -> Result<(), Error> {
        if a.len() != b.len() {
            return Err(Error::LengthMismatch {
                expected: a.len(),
                actual: b.len(),
            });
        }
        let remaining = self.elems - self.seen;
        let n = match self.dtype.size() {
            Some(size) => {
                if !a.len().is_multiple_of(size) {
                    return Err(Error::Misaligned {
                        len: a.len(),
                        multiple: size,
                    });
                }
                a.len() / size
            }
            None => (a.len() * (8 / self.dtype.bits() as usize)).min(remaining),
        };
        if n > remaining {
            return Err(Error::LengthMismatch {
                expected: self.dtype.storage_bytes(self.elems).unwrap_or(usize::MAX),
                actual: self
                    .dtype
                    .storage_bytes(self.seen)
                    .unwrap_or(usize::MAX)
                    .saturating_add(a.len()),
            });
        }
        let step = match self.dtype.size() {
            Some(_) => PAIR_CHUNK,
            None => a.len().max(1),
        };
        let mut done = 0;
        for (ca, cb) in a.chunks(step).zip(b.chunks(step)) {
            let m = match self.dtype.size() {
                Some(size) => ca.len() / size,
                None => n - done,
            };
            let part = self.kernel(ca, cb, m);
            self.metrics.merge(&part);
            done += m;
        }
        self.seen += n;
        Ok(())
    }

    fn kernel(&self, a: &[u8], b: &[u8], n: usize) -> PairMetrics {
        match (self.backend, self.dtype) {
            #[cfg(target_arch = "x86_64")]
            (Backend::Avx512, DType::Float32) if popcnt() => {
                // SAFETY: an `Avx512` accumulator exists only when `Backend::available`
                // confirmed AVX-512F/BW/VL, AVX2, FMA and F16C on this CPU, and `popcnt()`
                // confirmed POPCNT.
                unsafe { avx512::f32_pair(a, b, self.tol) }
            }
            #[cfg(target_arch = "x86_64")]
            (Backend::Avx2, DType::Float32) if popcnt() => {
                // SAFETY: an `Avx2` accumulator exists only when `Backend::available` confirmed
                // AVX2, FMA and F16C on this CPU, and `popcnt()` confirmed POPCNT.
                unsafe { avx2::f32_pair(a, b, self.tol) }
            }
            _ => portable::pair(self.dtype, a, b, n, self.tol),
        }
    }

    /// The metrics; [`Error::LengthMismatch`] if fewer elements than announced were fed.
    pub fn finish(self) -> Result<PairMetrics, Error> {
        if self.seen != self.elems {
            let need = |e: usize| self.dtype.storage_bytes(e).unwrap_or(usize::MAX);
            return Err(Error::LengthMismatch {
                expected: need(self.elems),
                actual: need(self.seen),
            });
        }
        Ok(self.metrics)
    }
}

/// Whether the CPU has POPCNT (every AVX2 CPU does; checked anyway, at run time with `std`).
#[cfg(target_arch = "x86_64")]
fn popcnt() -> bool {
    #[cfg(feature = "std")]
    {
        std::is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(target_feature = "popcnt")
    }
}

/// Pair metrics of two whole tensors (see [`PairAccumulator`]).
pub fn compare_pair(
    dtype: DType,
    a: &[u8],
    b: &[u8],
    elems: usize,
    tol: Tolerance,
) -> Result<PairMetrics, Error> {
    dtype.check_len(a.len(), elems)?;
    dtype.check_len(b.len(), elems)?;
    let mut acc = PairAccumulator::new(dtype, elems, tol)?;
    acc.update(a, b)?;
    acc.finish()
}
