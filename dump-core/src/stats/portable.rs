//! Portable lane kernels: plain Rust over fixed-size lane arrays, written so that LLVM turns
//! them into SIMD code for whatever the build (or an enclosing `#[target_feature]` function)
//! enables. They are the fallback on every target and the body of the integer and `float64`
//! kernels of the dispatched AVX2 build (which the AVX-512 backend calls for `uint32`, the
//! 64-bit types and float8).
//!
//! Every kernel returns a *raw partial*: a [`Summary`] whose `max`, `min`, `sum`, `sum_sq`,
//! `nan`, `pos` and `neg` are filled in. `count`, `zero` (= count − pos − neg − nan), the
//! infinity counts and the NaN positions are completed by the caller (see `accumulate.rs`),
//! which keeps the per-element work down to three compares.
//!
//! Branch-free by construction: counts add the result of a compare, extrema are selects,
//! NaN is zeroed by a select before it reaches the sums.

// Lane loops index several parallel arrays with one counter: that is the shape LLVM vectorises.
#![allow(clippy::needless_range_loop)]

use super::Summary;
use crate::DType;

/// `f32` lanes per step of [`fold_f32`]: 8 keeps the accumulators (8 `f64` sums and squares
/// plus `f32` extrema and `u32` counts) within the 16 SIMD registers of SSE2/NEON.
const W32: usize = 8;
/// Lanes per step of the `f64`-valued and integer kernels.
const W64: usize = 8;
/// Steps between flushes of the `u32` lane counters (each lane counts at most once a step).
const FLUSH_STEPS: usize = 1 << 20;
/// Integer-kernel steps per exact `i64` sum block: ≤ 2^16 elements of ≤ 32 bits per lane
/// keeps `|lane sum| ≤ 2^48`, far from `i64` overflow.
const INT_BLOCK_STEPS: usize = 1 << 16;

/// Adds one value to a raw partial (the scalar tail of every kernel). NaN counts only in `nan`.
#[inline(always)]
pub(super) fn push_raw(s: &mut Summary, v: f64) {
    let nan = v.is_nan();
    s.nan += nan as u64;
    s.pos += (v > 0.0) as u64;
    s.neg += (v < 0.0) as u64;
    if v > s.max {
        s.max = v;
    }
    if v < s.min {
        s.min = v;
    }
    let c = if nan { 0.0 } else { v };
    s.sum += c;
    s.sum_sq += c * c;
}

/// Adds raw partial `b` into raw partial `a` (no `count`, so [`Summary::merge`] does not fit).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn merge_raw(a: &mut Summary, b: &Summary) {
    a.nan += b.nan;
    a.pos += b.pos;
    a.neg += b.neg;
    if b.max > a.max {
        a.max = b.max;
    }
    if b.min < a.min {
        a.min = b.min;
    }
    a.sum += b.sum;
    a.sum_sq += b.sum_sq;
}

/// Lane accumulators for values that are exactly representable as `f32` (f32, f16, bf16).
///
/// Extrema and counts work in `f32` (exact: widening is monotonic); `sum` and `sum_sq` work in
/// `f64` lanes so that zero-mean data keeps its digits (see `accuracy` tests in `mod.rs`).
struct F32Lanes {
    max: [f32; W32],
    min: [f32; W32],
    sum: [f64; W32],
    sq: [f64; W32],
    nan: [u32; W32],
    pos: [u32; W32],
    neg: [u32; W32],
}

impl F32Lanes {
    #[inline(always)]
    fn new() -> Self {
        F32Lanes {
            max: [f32::NEG_INFINITY; W32],
            min: [f32::INFINITY; W32],
            sum: [0.0; W32],
            sq: [0.0; W32],
            nan: [0; W32],
            pos: [0; W32],
            neg: [0; W32],
        }
    }

    #[inline(always)]
    fn step(&mut self, x: &[f32; W32]) {
        for i in 0..W32 {
            let v = x[i];
            let nan = v.is_nan();
            self.nan[i] += nan as u32;
            self.pos[i] += (v > 0.0) as u32;
            self.neg[i] += (v < 0.0) as u32;
            self.max[i] = if v > self.max[i] { v } else { self.max[i] };
            self.min[i] = if v < self.min[i] { v } else { self.min[i] };
            // Branch-free NaN → 0: clear all bits where the element is NaN.
            let c = f32::from_bits(v.to_bits() & ((!nan) as u32).wrapping_neg()) as f64;
            self.sum[i] += c;
            self.sq[i] += c * c;
        }
    }

    #[inline(always)]
    fn flush_counts(&mut self, s: &mut Summary) {
        for i in 0..W32 {
            s.nan += self.nan[i] as u64;
            s.pos += self.pos[i] as u64;
            s.neg += self.neg[i] as u64;
        }
        self.nan = [0; W32];
        self.pos = [0; W32];
        self.neg = [0; W32];
    }

    #[inline(always)]
    fn finish(mut self, s: &mut Summary) {
        self.flush_counts(s);
        for i in 0..W32 {
            let (mx, mn) = (self.max[i] as f64, self.min[i] as f64);
            if mx > s.max {
                s.max = mx;
            }
            if mn < s.min {
                s.min = mn;
            }
            s.sum += self.sum[i];
            s.sum_sq += self.sq[i];
        }
    }
}

/// Raw partial of `data` holding `S`-byte elements that `conv` turns into `f32` exactly.
/// `data.len()` must be a multiple of `S` (the caller checked); a remainder is ignored.
#[inline(always)]
pub(super) fn fold_f32<const S: usize>(data: &[u8], conv: impl Fn([u8; S]) -> f32) -> Summary {
    let mut s = Summary::EMPTY;
    let mut lanes = F32Lanes::new();
    let mut chunks = data.chunks_exact(S * W32);
    let mut steps = 0;
    for c in &mut chunks {
        let x: [f32; W32] = core::array::from_fn(|i| conv(core::array::from_fn(|j| c[i * S + j])));
        lanes.step(&x);
        steps += 1;
        if steps == FLUSH_STEPS {
            lanes.flush_counts(&mut s);
            steps = 0;
        }
    }
    lanes.finish(&mut s);
    for e in chunks.remainder().chunks_exact(S) {
        push_raw(&mut s, conv(core::array::from_fn(|j| e[j])) as f64);
    }
    s
}

/// Raw partial of `data` holding `S`-byte elements that `conv` turns into `f64` (float64 and
/// the 64-bit integers, converted exactly as the reference converts them).
#[inline(always)]
pub(super) fn fold_f64<const S: usize>(data: &[u8], conv: impl Fn([u8; S]) -> f64) -> Summary {
    let mut s = Summary::EMPTY;
    let mut max = [f64::NEG_INFINITY; W64];
    let mut min = [f64::INFINITY; W64];
    let mut sum = [0.0f64; W64];
    let mut sq = [0.0f64; W64];
    let mut nan = [0u64; W64];
    let mut pos = [0u64; W64];
    let mut neg = [0u64; W64];
    let mut chunks = data.chunks_exact(S * W64);
    for c in &mut chunks {
        for i in 0..W64 {
            let v = conv(core::array::from_fn(|j| c[i * S + j]));
            let isnan = v.is_nan();
            nan[i] += isnan as u64;
            pos[i] += (v > 0.0) as u64;
            neg[i] += (v < 0.0) as u64;
            max[i] = if v > max[i] { v } else { max[i] };
            min[i] = if v < min[i] { v } else { min[i] };
            let c = f64::from_bits(v.to_bits() & ((!isnan) as u64).wrapping_neg());
            sum[i] += c;
            sq[i] += c * c;
        }
    }
    for i in 0..W64 {
        s.nan += nan[i];
        s.pos += pos[i];
        s.neg += neg[i];
        if max[i] > s.max {
            s.max = max[i];
        }
        if min[i] < s.min {
            s.min = min[i];
        }
        s.sum += sum[i];
        s.sum_sq += sq[i];
    }
    for e in chunks.remainder().chunks_exact(S) {
        push_raw(&mut s, conv(core::array::from_fn(|j| e[j])));
    }
    s
}

/// Raw partial of `data` holding `S`-byte integers of at most 32 bits that `conv` widens to
/// `i64`. Extrema work on the integers; `sum` is exact in `i64` per block (then one rounding
/// into `f64`, more accurate than the reference's running `f64` sum); `sum_sq` sums `f64`
/// squares (exact for ≤ 26-bit values, one rounding each above).
#[inline(always)]
pub(super) fn fold_int<const S: usize>(data: &[u8], conv: impl Fn([u8; S]) -> i64) -> Summary {
    let mut s = Summary::EMPTY;
    let mut max = [i64::MIN; W64];
    let mut min = [i64::MAX; W64];
    let mut sq = [0.0f64; W64];
    let mut pos = [0u64; W64];
    let mut neg = [0u64; W64];
    let mut any = false;
    let mut chunks = data.chunks_exact(S * W64);
    let mut blocks = (&mut chunks).peekable();
    while blocks.peek().is_some() {
        let mut sum = [0i64; W64];
        for c in (&mut blocks).take(INT_BLOCK_STEPS) {
            any = true;
            for i in 0..W64 {
                let v = conv(core::array::from_fn(|j| c[i * S + j]));
                pos[i] += (v > 0) as u64;
                neg[i] += (v < 0) as u64;
                max[i] = max[i].max(v);
                min[i] = min[i].min(v);
                sum[i] += v;
                let f = v as f64;
                sq[i] += f * f;
            }
        }
        s.sum += sum.iter().sum::<i64>() as f64;
    }
    for i in 0..W64 {
        s.pos += pos[i];
        s.neg += neg[i];
        s.sum_sq += sq[i];
    }
    if any {
        s.max = *max.iter().max().unwrap_or(&i64::MIN) as f64;
        s.min = *min.iter().min().unwrap_or(&i64::MAX) as f64;
    }
    for e in chunks.remainder().chunks_exact(S) {
        push_raw(&mut s, conv(core::array::from_fn(|j| e[j])) as f64);
    }
    s
}

/// Raw partial of `data` (whole elements of `dtype`) with the portable kernels.
///
/// Packed `Int4`/`UInt4`/`UInt1` must be unpacked by the caller (to `Int8`/`UInt8`) and complex dtypes
/// never reach here (`accumulate.rs` rejects them); both give the empty partial.
#[inline(always)]
pub(super) fn raw(dtype: DType, data: &[u8]) -> Summary {
    match dtype {
        DType::Bool => fold_int::<1>(data, |b| (b[0] != 0) as i64),
        DType::Int8 => fold_int::<1>(data, |b| b[0] as i8 as i64),
        DType::UInt8 => fold_int::<1>(data, |b| b[0] as i64),
        DType::Int16 => fold_int::<2>(data, |b| i16::from_le_bytes(b) as i64),
        DType::UInt16 => fold_int::<2>(data, |b| u16::from_le_bytes(b) as i64),
        DType::Int32 => fold_int::<4>(data, |b| i32::from_le_bytes(b) as i64),
        DType::UInt32 => fold_int::<4>(data, |b| u32::from_le_bytes(b) as i64),
        DType::Int64 => fold_f64::<8>(data, |b| i64::from_le_bytes(b) as f64),
        DType::UInt64 => fold_f64::<8>(data, |b| u64::from_le_bytes(b) as f64),
        DType::Float64 => fold_f64::<8>(data, f64::from_le_bytes),
        DType::Float32 => fold_f32::<4>(data, f32::from_le_bytes),
        DType::BFloat16 => fold_f32::<2>(data, |b| {
            f32::from_bits((u16::from_le_bytes(b) as u32) << 16)
        }),
        DType::Float16 => fold_f32::<2>(data, |b| {
            half::f16::from_bits(u16::from_le_bytes(b)).to_f32()
        }),
        DType::Float8E4M3FN => fold_f32::<1>(data, |b| {
            f32::from_bits(crate::widen::F8E4M3FN_TO_F32[b[0] as usize])
        }),
        DType::Float8E5M2 => fold_f32::<1>(data, |b| {
            f32::from_bits(crate::widen::F8E5M2_TO_F32[b[0] as usize])
        }),
        DType::Float8E4M3FNUZ => fold_f32::<1>(data, |b| {
            f32::from_bits(crate::widen::F8E4M3FNUZ_TO_F32[b[0] as usize])
        }),
        DType::Float8E5M2FNUZ => fold_f32::<1>(data, |b| {
            f32::from_bits(crate::widen::F8E5M2FNUZ_TO_F32[b[0] as usize])
        }),
        DType::Int4 | DType::UInt4 | DType::UInt1 | DType::Complex64 | DType::Complex128 => {
            Summary::EMPTY
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_f32(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn f32_lanes_and_tail_agree_with_push() {
        let v: Vec<f32> = (0..37).map(|i| (i as f32 - 18.0) * 0.5).collect();
        let s = fold_f32::<4>(&bytes_f32(&v), f32::from_le_bytes);
        let mut r = Summary::EMPTY;
        v.iter().for_each(|&x| push_raw(&mut r, x as f64));
        assert_eq!((s.max, s.min, s.pos, s.neg, s.nan), (9.0, -9.0, 18, 18, 0));
        assert_eq!((s.sum, s.sum_sq), (r.sum, r.sum_sq));
    }

    #[test]
    fn nan_is_counted_not_summed() {
        let mut v = vec![1.0f32; 40];
        v[3] = f32::NAN;
        v[39] = -f32::NAN;
        let s = fold_f32::<4>(&bytes_f32(&v), f32::from_le_bytes);
        assert_eq!((s.nan, s.pos, s.sum, s.max, s.min), (2, 38, 38.0, 1.0, 1.0));
    }

    #[test]
    fn int_extremes_are_exact() {
        let v = [i64::MIN, i64::MAX, 0, -1, 1, 5, 6, 7, 8, 9, 10];
        let d: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let s = fold_f64::<8>(&d, |b| i64::from_le_bytes(b) as f64);
        assert_eq!((s.max, s.min), (i64::MAX as f64, i64::MIN as f64));
        let d32: Vec<u8> = [i32::MIN, i32::MAX, 3, -4, 0, 0, 0, 0, 0, 0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let s = fold_int::<4>(&d32, |b| i32::from_le_bytes(b) as i64);
        assert_eq!((s.max, s.min), (i32::MAX as f64, i32::MIN as f64));
        assert_eq!((s.pos, s.neg, s.sum), (2, 2, -2.0));
    }
}
