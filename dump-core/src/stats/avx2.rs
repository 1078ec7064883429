//! AVX2 + FMA (+ F16C) kernels for `float32`, `bfloat16` and `float16`, and the AVX2 builds of
//! the portable integer/`float64` kernels.
//!
//! Each step takes 16 values (two `ymm` of `f32`) and does, per 8 values: three compares
//! (unordered, `> 0`, `< 0`) subtracted into `u32` lane counters, `maxps`/`minps` (operand
//! order makes a NaN input return the accumulator, so NaN never enters the extrema), and
//! `vcvtps2pd` into four `f64` lanes for `sum` (add) and `sum_sq` (FMA). The first pass lets
//! NaN into the sums; a chunk whose pass counted a NaN (rare; still in cache) is redone with
//! an `andnot` that zeroes NaN first (`MASK`), which keeps that operation out of the common
//! case (measured +25% on f32 in L2). Eight independent `f64` accumulators hide the add/FMA latency.
//! `bfloat16` widens in-register by interleaving zero low halves (element order inside a step
//! does not matter for statistics); `float16` uses `vcvtph2ps`. A software prefetch
//! [`PREFETCH`] bytes ahead keeps DRAM streams busy for tensors beyond L2; tensors under
//! [`PREFETCH_MIN`] bytes are not prefetched (no prefetch past their end).
//!
//! Everything here is only reached after the caller has verified AVX2, FMA and F16C (runtime
//! detection with `std`, `cfg(target_feature)` without).

use core::arch::x86_64::*;

use super::{Summary, portable};

/// Prefetch distance in bytes (a few KiB ahead; the hardware prefetcher does not cross 4 KiB
/// pages on its own early enough at this per-element cost). 8 KiB rather than the 2 KiB of
/// the Zen 3 measurements: on the Zen 5 EPYC, whose memory read is about twice the Zen 3's,
/// f32 beyond the caches ran 0.99-1.11x the read with 8 KiB against 0.90-1.00x with 2 KiB
/// (same process, BENCHMARKS.md "2026-11-28: int32 and f16 beyond the caches"); in cache
/// no difference.
const PREFETCH: usize = 8192;
/// Data of fewer bytes is not prefetched at all (see [`drive`]).
const PREFETCH_MIN: usize = 4 * PREFETCH;
/// Bytes per step of the integer kernel.
const INT_STEP: usize = 64;
/// 64-byte steps between flushes of the `u32` lane counters: a lane counts at most 8 times a
/// step (int8: 64 values in 8-lane vectors), so 2^24 steps stay far below `u32::MAX`.
const FLUSH_STEPS: usize = 1 << 24;

/// Accumulators: few enough (10 `ymm` plus temporaries) to stay in the 16 registers; spills
/// in the hot loop cost more than the latency chains the extra accumulators would break.
struct Acc {
    mx: __m256,
    mn: __m256,
    s: [__m256d; 2],
    q: [__m256d; 2],
    nan: __m256i,
    pos: __m256i,
    neg: __m256i,
}

impl Acc {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn new() -> Acc {
        let inf = _mm256_set1_ps(f32::INFINITY);
        let ninf = _mm256_set1_ps(f32::NEG_INFINITY);
        let z = _mm256_setzero_pd();
        Acc {
            mx: ninf,
            mn: inf,
            s: [z; 2],
            q: [z; 2],
            nan: _mm256_setzero_si256(),
            pos: _mm256_setzero_si256(),
            neg: _mm256_setzero_si256(),
        }
    }

    /// Adds 8 values. Without `MASK`, NaN flows into `sum`/`sum_sq` (the caller reruns with
    /// `MASK` when the pass counted a NaN, which saves an operation per 8 values otherwise).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn lane<const MASK: bool>(&mut self, x: __m256) {
        let zero = _mm256_setzero_ps();
        let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x);
        self.nan = _mm256_sub_epi32(self.nan, _mm256_castps_si256(nan));
        let gt = _mm256_cmp_ps::<_CMP_GT_OQ>(x, zero);
        self.pos = _mm256_sub_epi32(self.pos, _mm256_castps_si256(gt));
        let lt = _mm256_cmp_ps::<_CMP_LT_OQ>(x, zero);
        self.neg = _mm256_sub_epi32(self.neg, _mm256_castps_si256(lt));
        // maxps/minps return the second operand when either is NaN: NaN x keeps the old value.
        self.mx = _mm256_max_ps(x, self.mx);
        self.mn = _mm256_min_ps(x, self.mn);
        let c = if MASK { _mm256_andnot_ps(nan, x) } else { x };
        let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(c));
        let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(c));
        self.s[0] = _mm256_add_pd(self.s[0], lo);
        self.s[1] = _mm256_add_pd(self.s[1], hi);
        self.q[0] = _mm256_fmadd_pd(lo, lo, self.q[0]);
        self.q[1] = _mm256_fmadd_pd(hi, hi, self.q[1]);
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn step<const MASK: bool>(&mut self, x0: __m256, x1: __m256) {
        self.lane::<MASK>(x0);
        self.lane::<MASK>(x1);
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn flush_counts(&mut self, s: &mut Summary) {
        s.nan += hsum_u32(self.nan);
        s.pos += hsum_u32(self.pos);
        s.neg += hsum_u32(self.neg);
        self.nan = _mm256_setzero_si256();
        self.pos = _mm256_setzero_si256();
        self.neg = _mm256_setzero_si256();
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn finish(mut self, s: &mut Summary) {
        self.flush_counts(s);
        let mx = to_f32s(self.mx);
        let mn = to_f32s(self.mn);
        for (&a, &b) in mx.iter().zip(mn.iter()) {
            if a as f64 > s.max {
                s.max = a as f64;
            }
            if (b as f64) < s.min {
                s.min = b as f64;
            }
        }
        let sum = _mm256_add_pd(self.s[0], self.s[1]);
        let sq = _mm256_add_pd(self.q[0], self.q[1]);
        s.sum += to_f64s(sum).iter().sum::<f64>();
        s.sum_sq += to_f64s(sq).iter().sum::<f64>();
    }
}

#[inline]
#[target_feature(enable = "avx2")]
fn hsum_u32(v: __m256i) -> u64 {
    // SAFETY: __m256i and [u32; 8] have the same size and every bit pattern is valid for both.
    let a: [u32; 8] = unsafe { core::mem::transmute(v) };
    a.iter().map(|&x| x as u64).sum()
}

#[inline]
#[target_feature(enable = "avx2")]
fn to_i32s(v: __m256i) -> [i32; 8] {
    // SAFETY: __m256i and [i32; 8] have the same size and every bit pattern is valid for both.
    unsafe { core::mem::transmute::<__m256i, [i32; 8]>(v) }
}

/// 8 bytes at `q + o` into the low half of an `xmm`.
///
/// # Safety
/// `q + o .. q + o + 8` must be readable.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn b8(q: *const u8, o: usize) -> __m128i {
    // SAFETY: the caller guarantees 8 readable bytes; the load has no alignment requirement.
    unsafe { _mm_loadl_epi64(q.add(o) as *const __m128i) }
}

/// 16 bytes at `q + o`.
///
/// # Safety
/// `q + o .. q + o + 16` must be readable.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn b16(q: *const u8, o: usize) -> __m128i {
    // SAFETY: the caller guarantees 16 readable bytes; the load has no alignment requirement.
    unsafe { _mm_loadu_si128(q.add(o) as *const __m128i) }
}

/// 32 bytes at `q + o`.
///
/// # Safety
/// `q + o .. q + o + 32` must be readable.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn b32(q: *const u8, o: usize) -> __m256i {
    // SAFETY: the caller guarantees 32 readable bytes; the load has no alignment requirement.
    unsafe { _mm256_loadu_si256(q.add(o) as *const __m256i) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn to_f32s(v: __m256) -> [f32; 8] {
    // SAFETY: __m256 and [f32; 8] have the same size and every bit pattern is valid for both.
    unsafe { core::mem::transmute(v) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn to_f64s(v: __m256d) -> [f64; 4] {
    // SAFETY: __m256d and [f64; 4] have the same size and every bit pattern is valid for both.
    unsafe { core::mem::transmute(v) }
}

/// The common driver: `steps` steps of `STEP` bytes each from `data`; `body` loads the bytes
/// behind a pointer and feeds them to the accumulators. Returns the bytes consumed.
///
/// From [`PREFETCH_MIN`] bytes on, every step prefetches [`PREFETCH`] bytes ahead,
/// unconditionally (prefetches never fault); below it none does, so that a small tensor
/// sends no prefetch past its end (the AVX-512 kernels saw 4 KiB tensors run 3x slower in
/// some runs from that; see `avx512.rs`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn drive<const STEP: usize>(
    data: &[u8],
    s: &mut Summary,
    body: impl Fn(&mut Acc, *const u8),
) -> usize {
    let steps = data.len() / STEP;
    let p = data.as_ptr();
    let mut acc = Acc::new();
    let prefetch = data.len() >= PREFETCH_MIN;
    let mut i = 0;
    while i < steps {
        let end = steps.min(i + FLUSH_STEPS);
        // Two loops rather than a test in one (a branch per step).
        if prefetch {
            while i < end {
                let q = p.wrapping_add(i * STEP);
                _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(PREFETCH) as *const i8);
                body(&mut acc, q);
                i += 1;
            }
        } else {
            while i < end {
                body(&mut acc, p.wrapping_add(i * STEP));
                i += 1;
            }
        }
        acc.flush_counts(s);
    }
    acc.finish(s);
    steps * STEP
}

/// Raw partial (see `portable.rs`) of little-endian `f32` data; `data.len() % 4 == 0`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn f32_raw<const MASK: bool>(data: &[u8]) -> Summary {
    let mut s = Summary::EMPTY;
    let done = drive::<64>(data, &mut s, |acc, q| {
        // SAFETY: `drive` only passes pointers with STEP (64) readable bytes of `data` behind
        // them; loadu has no alignment requirement.
        let (x0, x1) = unsafe {
            (
                _mm256_loadu_ps(q as *const f32),
                _mm256_loadu_ps(q.add(32) as *const f32),
            )
        };
        acc.step::<MASK>(x0, x1);
    });
    for e in data[done..].chunks_exact(4) {
        portable::push_raw(&mut s, f32::from_le_bytes([e[0], e[1], e[2], e[3]]) as f64);
    }
    s
}

/// Raw partial of little-endian `bfloat16` data; `data.len() % 2 == 0`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn bf16_raw<const MASK: bool>(data: &[u8]) -> Summary {
    let mut s = Summary::EMPTY;
    let done = drive::<64>(data, &mut s, |acc, q| {
        // SAFETY: `drive` only passes pointers with STEP (64) readable bytes of `data` behind
        // them; loadu has no alignment requirement.
        let (a, b) = unsafe {
            (
                _mm256_loadu_si256(q as *const __m256i),
                _mm256_loadu_si256(q.add(32) as *const __m256i),
            )
        };
        // A bf16 is the high half of an f32: interleave zero low halves under each value.
        // This permutes values inside the step, which statistics do not care about.
        let z = _mm256_setzero_si256();
        let f = |lo: __m256i| _mm256_castsi256_ps(lo);
        acc.step::<MASK>(
            f(_mm256_unpacklo_epi16(z, a)),
            f(_mm256_unpackhi_epi16(z, a)),
        );
        acc.step::<MASK>(
            f(_mm256_unpacklo_epi16(z, b)),
            f(_mm256_unpackhi_epi16(z, b)),
        );
    });
    for e in data[done..].chunks_exact(2) {
        let bits = (u16::from_le_bytes([e[0], e[1]]) as u32) << 16;
        portable::push_raw(&mut s, f32::from_bits(bits) as f64);
    }
    s
}

/// Raw partial of little-endian IEEE `float16` data; `data.len() % 2 == 0`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn f16_raw<const MASK: bool>(data: &[u8]) -> Summary {
    let mut s = Summary::EMPTY;
    let done = drive::<64>(data, &mut s, |acc, q| {
        // SAFETY: `drive` only passes pointers with STEP (64) readable bytes of `data` behind
        // them; loadu has no alignment requirement.
        let h = unsafe {
            [
                _mm_loadu_si128(q as *const __m128i),
                _mm_loadu_si128(q.add(16) as *const __m128i),
                _mm_loadu_si128(q.add(32) as *const __m128i),
                _mm_loadu_si128(q.add(48) as *const __m128i),
            ]
        };
        acc.step::<MASK>(_mm256_cvtph_ps(h[0]), _mm256_cvtph_ps(h[1]));
        acc.step::<MASK>(_mm256_cvtph_ps(h[2]), _mm256_cvtph_ps(h[3]));
    });
    for e in data[done..].chunks_exact(2) {
        let v = half::f16::from_bits(u16::from_le_bytes([e[0], e[1]]));
        portable::push_raw(&mut s, v.to_f64());
    }
    s
}

/// Integer accumulators: values widened to `i32` lanes; extrema in `i32`, sums in `f64`
/// (`vcvtdq2pd` is exact), counts as in [`Acc`] (`zero` is derived, there is no NaN).
struct IntAcc {
    mx: __m256i,
    mn: __m256i,
    s: [__m256d; 2],
    q: [__m256d; 2],
    pos: __m256i,
    neg: __m256i,
}

impl IntAcc {
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn new() -> IntAcc {
        let z = _mm256_setzero_pd();
        IntAcc {
            mx: _mm256_set1_epi32(i32::MIN),
            mn: _mm256_set1_epi32(i32::MAX),
            s: [z; 2],
            q: [z; 2],
            pos: _mm256_setzero_si256(),
            neg: _mm256_setzero_si256(),
        }
    }

    /// Adds 8 values.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn lane(&mut self, x: __m256i) {
        let z = _mm256_setzero_si256();
        self.pos = _mm256_sub_epi32(self.pos, _mm256_cmpgt_epi32(x, z));
        self.neg = _mm256_sub_epi32(self.neg, _mm256_cmpgt_epi32(z, x));
        self.mx = _mm256_max_epi32(self.mx, x);
        self.mn = _mm256_min_epi32(self.mn, x);
        let lo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(x));
        let hi = _mm256_cvtepi32_pd(_mm256_extracti128_si256::<1>(x));
        self.s[0] = _mm256_add_pd(self.s[0], lo);
        self.s[1] = _mm256_add_pd(self.s[1], hi);
        self.q[0] = _mm256_fmadd_pd(lo, lo, self.q[0]);
        self.q[1] = _mm256_fmadd_pd(hi, hi, self.q[1]);
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn flush_counts(&mut self, s: &mut Summary) {
        s.pos += hsum_u32(self.pos);
        s.neg += hsum_u32(self.neg);
        self.pos = _mm256_setzero_si256();
        self.neg = _mm256_setzero_si256();
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn finish(mut self, s: &mut Summary) {
        self.flush_counts(s);
        let (mx, mn) = (to_i32s(self.mx), to_i32s(self.mn));
        for (&a, &b) in mx.iter().zip(mn.iter()) {
            if a as f64 > s.max {
                s.max = a as f64;
            }
            if (b as f64) < s.min {
                s.min = b as f64;
            }
        }
        s.sum += to_f64s(_mm256_add_pd(self.s[0], self.s[1]))
            .iter()
            .sum::<f64>();
        s.sum_sq += to_f64s(_mm256_add_pd(self.q[0], self.q[1]))
            .iter()
            .sum::<f64>();
    }
}

/// Raw partial of integers of at most 32 bits (not `UInt32`) and `Bool`, 64 bytes a step;
/// the tail goes through the portable kernel. `dtype` is a const parameter (a
/// [`crate::DType`] as `u8`, see [`other_raw`]) so that each dtype gets loops of its own with
/// no dispatch inside: in a trial build with two loops (prefetching or not, as in [`drive`])
/// and the dtype matched at run time inside them, int32 ran 14 GB/s in cache instead of 29.
#[target_feature(enable = "avx2,fma,f16c")]
fn int_raw<const D: u8>(data: &[u8]) -> Summary {
    let dtype = int_dtype(D);
    let steps = data.len() / INT_STEP;
    let p = data.as_ptr();
    let mut s = Summary::EMPTY;
    let mut acc = IntAcc::new();
    let one = _mm256_set1_epi32(1);
    let prefetch = data.len() >= PREFETCH_MIN;
    let mut i = 0;
    while i < steps {
        let end = steps.min(i + FLUSH_STEPS);
        if prefetch {
            while i < end {
                let q = p.wrapping_add(i * INT_STEP);
                _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(PREFETCH) as *const i8);
                // SAFETY: step `i < steps` has INT_STEP readable bytes of `data` at `q`, and
                // every load below reads at offsets `o` with `o + width <= STEP`.
                unsafe { int_step(&mut acc, dtype, q, one) };
                i += 1;
            }
        } else {
            while i < end {
                // SAFETY: as above.
                unsafe { int_step(&mut acc, dtype, p.wrapping_add(i * INT_STEP), one) };
                i += 1;
            }
        }
        acc.flush_counts(&mut s);
    }
    acc.finish(&mut s);
    let tail = portable::raw(dtype, &data[steps * INT_STEP..]);
    portable::merge_raw(&mut s, &tail);
    s
}

/// One 64-byte step of [`int_raw`].
///
/// # Safety
/// `q .. q + 64` must be readable.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn int_step(acc: &mut IntAcc, dtype: crate::DType, q: *const u8, one: __m256i) {
    use crate::DType;
    // SAFETY: every load reads `o .. o + width` with `o + width <= 64` (the caller's range).
    unsafe {
        match dtype {
            DType::Int32 => {
                acc.lane(b32(q, 0));
                acc.lane(b32(q, 32));
            }
            DType::Int16 => {
                for o in [0, 16, 32, 48] {
                    acc.lane(_mm256_cvtepi16_epi32(b16(q, o)));
                }
            }
            DType::UInt16 => {
                for o in [0, 16, 32, 48] {
                    acc.lane(_mm256_cvtepu16_epi32(b16(q, o)));
                }
            }
            DType::Int8 => {
                for o in (0..INT_STEP).step_by(8) {
                    acc.lane(_mm256_cvtepi8_epi32(b8(q, o)));
                }
            }
            DType::UInt8 => {
                for o in (0..INT_STEP).step_by(8) {
                    acc.lane(_mm256_cvtepu8_epi32(b8(q, o)));
                }
            }
            _ => {
                // Bool: any nonzero byte is true; min(x, 1) maps it to 1.
                for o in (0..INT_STEP).step_by(8) {
                    acc.lane(_mm256_min_epu32(_mm256_cvtepu8_epi32(b8(q, o)), one));
                }
            }
        }
    }
}

/// The remaining dtypes: explicit integer kernels where values fit `i32`, else the portable
/// kernels compiled for AVX2 + FMA (`UInt32`, the 64-bit types).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn other_raw(dtype: crate::DType, data: &[u8]) -> Summary {
    use crate::DType;
    match dtype {
        DType::Bool => int_raw::<BOOL>(data),
        DType::Int8 => int_raw::<INT8>(data),
        DType::UInt8 => int_raw::<UINT8>(data),
        DType::Int16 => int_raw::<INT16>(data),
        DType::UInt16 => int_raw::<UINT16>(data),
        DType::Int32 => int_raw::<INT32>(data),
        _ => portable::raw(dtype, data),
    }
}

/// The dtypes of [`int_raw`]'s const parameter.
const BOOL: u8 = 0;
const INT8: u8 = 1;
const UINT8: u8 = 2;
const INT16: u8 = 3;
const UINT16: u8 = 4;
const INT32: u8 = 5;

/// The dtype of [`int_raw`]'s const parameter `d`.
const fn int_dtype(d: u8) -> crate::DType {
    use crate::DType;
    match d {
        BOOL => DType::Bool,
        INT8 => DType::Int8,
        UINT8 => DType::UInt8,
        INT16 => DType::Int16,
        UINT16 => DType::UInt16,
        _ => DType::Int32,
    }
}
