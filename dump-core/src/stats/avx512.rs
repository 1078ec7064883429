//! AVX-512 (F + BW + VL) kernels for `float32`, `bfloat16` and `float16`, and for the integers
//! of at most 32 bits but `uint32` (`bool`, `int8`, `uint8`, `int16`, `uint16`, `int32`).
//!
//! Same raw partial and the same accumulation as the AVX2 kernels (`avx2.rs`): `u32` lane
//! counters for `nan`/`pos`/`neg`, `f32` extrema, `sum` and `sum_sq` in `f64` lanes (each
//! value widened in registers, squares by FMA). What AVX-512 changes is the instruction count
//! per 16 values:
//! - compares write `k` masks, and a counter is one merge-masked add (`vpaddd zmm{k}`) instead
//!   of a compare into a vector plus a subtract;
//! - one `vcvtps2pd zmm` widens 8 values (two per 16), one `vcvtph2ps zmm` 16 halves;
//! - the fast pass does not count NaN at all: a NaN that was let into the `f64` sums leaves
//!   `sum` NaN, and only then (rare; the chunk is still in cache) is the chunk redone with NaN
//!   counted and masked out of the conversion (`vcvtps2pd zmm{k}{z}`, no extra operation);
//!   that is worth 7-10% in cache over counting NaN in every pass as the AVX2 kernel does;
//! - the fast pass of `f16`/`bf16` counts `pos`/`neg` on the 16-bit bits, 32 values per
//!   compare (sign clear and magnitude nonzero; sign set and magnitude nonzero: a NaN would be
//!   miscounted, but a NaN sends the chunk to the exact pass anyway), +10-15% in cache;
//! - the fast pass of `f16`/`bf16` also takes the extrema on the bits: a signed maximum and
//!   an unsigned maximum and minimum of the 16-bit patterns, three integer operations per 32
//!   values (on the integer pipes) instead of `maxps`/`minps` on 32 widened values (on the
//!   pipes that also convert and add), decoded once per chunk (`extrema_of_bits`); and it
//!   widens for the sums 8 values at a time (`vcvtph2ps ymm` from memory; for `bf16`, `ymm`
//!   unpacks), so that every `vcvtps2pd` gets its `ymm` with no `vextractf64x4`: together
//!   f16 24 -> 30 GB/s and bf16 29 -> 33 GB/s in cache on the Zen 5;
//! - tails are masked loads (no scalar loop), their lanes masked out of compares and extrema.
//!
//! Where the time goes for `f16` (Zen 5, 1 MiB, 2026-11-28): each `vcvtph2ps`/`vcvtps2pd`
//! takes about 0.8 cycles of a shared conversion unit whatever its width, so the 16
//! conversions of a 64-value step bound the kernel near 39 GB/s (measured 38.7 with counting
//! and extrema left out); the `pos`/`neg` counts (compare, `vpmovm2w`, subtract) cost 13%
//! more, the extrema 5%. Not kept: the magnitude shifted into `f32` bits by integer
//! operations (`x * 2^-112` exactly, no `vcvtph2ps`): 24-25 GB/s, slower than converting;
//! the upper half stored and reloaded instead of extracted: 27.5; counts by popcount of the
//! masks: 27.3; by `min`/`max` on the bits: no gain.
//!
//! Loops run two steps per iteration (see [`drive`]).
//!
//! `bfloat16` widens in-register by interleaving zero low halves (element order inside a step
//! does not matter for statistics); the masked tail widens in element order instead
//! (`vpmovzxwd` + shift) so that its mask stays in element order.
//!
//! Integers widen to `i32` lanes (`vpmovsx`/`vpmovzx`) and sum exactly converted `f64`, like
//! the AVX2 integer kernel; `uint32` and the 64-bit types run the AVX2 build of the portable
//! kernels.
//!
//! Everything here is only reached after the caller has verified AVX-512F/BW/VL (and AVX2,
//! FMA and F16C, which the backend's other dtypes use): runtime detection with `std`,
//! `cfg(target_feature)` without.

use core::arch::x86_64::*;

use super::Summary;
use crate::DType;

/// Bytes per step: two `zmm` loads.
const STEP: usize = 128;
/// Prefetch distance in bytes, one prefetch per 64-byte line of a step (the AVX2 kernels'
/// too since 2026-11-28; they had 2 KiB): on the Zen 5 EPYC beyond the caches 8 KiB ahead
/// measured f32 at 1.2-1.3x the read against 0.95-1.08x with 2 KiB (4 KiB in between,
/// 16 KiB no better); for int32, 4 KiB, 16 KiB, `prefetcht1`/`t2` and one prefetch per
/// step were no better either, `prefetchnta` within the noise (same process, 2026-11-28).
const PREFETCH: usize = 8192;
/// Data of fewer bytes is not prefetched at all (see [`drive`]).
const PREFETCH_MIN: usize = 4 * PREFETCH;
/// Steps between flushes of the lane counters: a `u16` lane of `count16` counts at most twice
/// a step and a `u32` lane at most 8 times (`int8`), so 2^14 steps stay far below `u16::MAX`.
const FLUSH_STEPS: usize = 1 << 14;

/// Accumulators: two extrema pairs and four `f64` sum/square pairs, so that no add or FMA
/// waits for the previous one of its chain within a step (AVX-512 has 32 vector registers).
/// The fast pass of `f16`/`bf16` keeps its extrema on the 16-bit bits instead (`smax16`,
/// `umax16`, `umin16`: see [`extrema16`](Acc::extrema16)), read back as `half` says.
struct Acc {
    mx: [__m512; 2],
    mn: [__m512; 2],
    s: [__m512d; 4],
    q: [__m512d; 4],
    nan: __m512i,
    pos: __m512i,
    neg: __m512i,
    pos16: __m512i,
    neg16: __m512i,
    smax16: [__m512i; 2],
    umax16: [__m512i; 2],
    umin16: [__m512i; 2],
    half: Option<Half>,
}

/// The 16-bit float format whose bits [`Acc::extrema16`] saw.
#[derive(Clone, Copy)]
enum Half {
    F16,
    Bf16,
}

impl Half {
    fn to_f64(self, bits: u16) -> f64 {
        match self {
            Half::F16 => half::f16::from_bits(bits).to_f64(),
            Half::Bf16 => half::bf16::from_bits(bits).to_f64(),
        }
    }
}

impl Acc {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn new(half: Option<Half>) -> Acc {
        let inf = _mm512_set1_ps(f32::INFINITY);
        let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
        let z = _mm512_setzero_pd();
        Acc {
            mx: [ninf; 2],
            mn: [inf; 2],
            s: [z; 4],
            q: [z; 4],
            nan: _mm512_setzero_si512(),
            pos: _mm512_setzero_si512(),
            neg: _mm512_setzero_si512(),
            pos16: _mm512_setzero_si512(),
            neg16: _mm512_setzero_si512(),
            smax16: [_mm512_set1_epi16(i16::MIN); 2],
            umax16: [_mm512_setzero_si512(); 2],
            umin16: [_mm512_set1_epi16(-1); 2],
            half,
        }
    }

    /// Counts `pos`/`neg` of 32 `f16`/`bf16` values from their bits (sign and magnitude): a
    /// NaN counts as one of them, so only the unmasked pass may use this.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn count16(&mut self, h: __m512i) {
        let one = _mm512_set1_epi16(1);
        let gt = _mm512_cmpgt_epi16_mask(h, _mm512_setzero_si512());
        self.pos16 = _mm512_mask_add_epi16(self.pos16, gt, self.pos16, one);
        let lt = _mm512_cmpgt_epu16_mask(h, _mm512_set1_epi16(i16::MIN));
        self.neg16 = _mm512_mask_add_epi16(self.neg16, lt, self.neg16, one);
    }

    /// Extrema of 32 `f16`/`bf16` values taken on their bits (the unmasked pass), into set
    /// `j` (0 or 1): three 16-bit integer operations instead of four float ones on 32 widened
    /// values, on the integer pipes. Both formats are sign and magnitude, so:
    /// - the signed maximum of the bits is the largest non-negative value if there is one
    ///   (sign clear: a non-negative `i16`; sign set: a negative one);
    /// - the unsigned maximum is the largest-magnitude negative value if there is one;
    /// - the unsigned minimum is the smallest-magnitude negative value when all are negative
    ///   (else it is a non-negative one, which the first rule already answers).
    ///
    /// [`finish`](Acc::finish) combines them (see [`extrema_of_bits`]). A NaN is ordered
    /// among the magnitudes, but a NaN sends the chunk to the exact pass anyway.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn extrema16(&mut self, j: usize, h: __m512i) {
        self.smax16[j] = _mm512_max_epi16(self.smax16[j], h);
        self.umax16[j] = _mm512_max_epu16(self.umax16[j], h);
        self.umin16[j] = _mm512_min_epu16(self.umin16[j], h);
    }

    /// Sums of 16 values given as two groups of 8 `f32` (the unmasked `f16`/`bf16` pass,
    /// whose counts and extrema come from [`count16`](Acc::count16) and
    /// [`extrema16`](Acc::extrema16)), into sum set `j` (0 or 1).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn sums(&mut self, j: usize, lo: __m256, hi: __m256) {
        self.add_sums(2 * j, _mm512_cvtps_pd(lo), _mm512_cvtps_pd(hi));
    }

    /// Adds 16 values into accumulator set `j` (0 or 1).
    ///
    /// Without `MASK`, NaN is neither counted nor kept out of `sum`/`sum_sq`: it makes `sum`
    /// NaN, which is how the caller learns to rerun the chunk with `MASK`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn lane<const MASK: bool>(&mut self, j: usize, x: __m512) {
        let zero = _mm512_setzero_ps();
        let one = _mm512_set1_epi32(1);
        let gt = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x, zero);
        self.pos = _mm512_mask_add_epi32(self.pos, gt, self.pos, one);
        let lt = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, zero);
        self.neg = _mm512_mask_add_epi32(self.neg, lt, self.neg, one);
        // maxps/minps return the second operand when either is NaN: NaN x keeps the old value.
        self.mx[j] = _mm512_max_ps(x, self.mx[j]);
        self.mn[j] = _mm512_min_ps(x, self.mn[j]);
        let lo = _mm512_castps512_ps256(x);
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(x)));
        let (lo, hi) = if MASK {
            let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
            self.nan = _mm512_mask_add_epi32(self.nan, nan, self.nan, one);
            let keep = !nan;
            (
                _mm512_maskz_cvtps_pd(keep as u8, lo),
                _mm512_maskz_cvtps_pd((keep >> 8) as u8, hi),
            )
        } else {
            (_mm512_cvtps_pd(lo), _mm512_cvtps_pd(hi))
        };
        self.add_sums(2 * j, lo, hi);
    }

    /// [`lane`](Acc::lane) for the lanes of `k` only (a tail): the other lanes of `x` must be
    /// `+0.0` (a zero-masking load), and neither count nor reach the extrema.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn lane_part<const MASK: bool>(&mut self, k: __mmask16, x: __m512) {
        let zero = _mm512_setzero_ps();
        let one = _mm512_set1_epi32(1);
        let gt = _mm512_mask_cmp_ps_mask::<_CMP_GT_OQ>(k, x, zero);
        self.pos = _mm512_mask_add_epi32(self.pos, gt, self.pos, one);
        let lt = _mm512_mask_cmp_ps_mask::<_CMP_LT_OQ>(k, x, zero);
        self.neg = _mm512_mask_add_epi32(self.neg, lt, self.neg, one);
        self.mx[0] = _mm512_mask_max_ps(self.mx[0], k, x, self.mx[0]);
        self.mn[0] = _mm512_mask_min_ps(self.mn[0], k, x, self.mn[0]);
        // The lanes outside `k` hold +0.0 and add nothing to the sums.
        let lo = _mm512_castps512_ps256(x);
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(x)));
        let (lo, hi) = if MASK {
            let nan = _mm512_mask_cmp_ps_mask::<_CMP_UNORD_Q>(k, x, x);
            self.nan = _mm512_mask_add_epi32(self.nan, nan, self.nan, one);
            let keep = !nan;
            (
                _mm512_maskz_cvtps_pd(keep as u8, lo),
                _mm512_maskz_cvtps_pd((keep >> 8) as u8, hi),
            )
        } else {
            (_mm512_cvtps_pd(lo), _mm512_cvtps_pd(hi))
        };
        self.add_sums(0, lo, hi);
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn add_sums(&mut self, i: usize, lo: __m512d, hi: __m512d) {
        self.s[i] = _mm512_add_pd(self.s[i], lo);
        self.s[i + 1] = _mm512_add_pd(self.s[i + 1], hi);
        self.q[i] = _mm512_fmadd_pd(lo, lo, self.q[i]);
        self.q[i + 1] = _mm512_fmadd_pd(hi, hi, self.q[i + 1]);
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn flush_counts(&mut self, s: &mut Summary) {
        s.nan += hsum_u32(self.nan);
        s.pos += hsum_u32(self.pos);
        s.neg += hsum_u32(self.neg);
        s.pos += hsum_u16(self.pos16);
        s.neg += hsum_u16(self.neg16);
        self.pos16 = _mm512_setzero_si512();
        self.neg16 = _mm512_setzero_si512();
        self.nan = _mm512_setzero_si512();
        self.pos = _mm512_setzero_si512();
        self.neg = _mm512_setzero_si512();
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn finish(mut self, s: &mut Summary) {
        self.flush_counts(s);
        // The extrema lanes hold no NaN (see `lane`), so the reductions are plain.
        let mx = _mm512_reduce_max_ps(_mm512_max_ps(self.mx[0], self.mx[1])) as f64;
        let mn = _mm512_reduce_min_ps(_mm512_min_ps(self.mn[0], self.mn[1])) as f64;
        if mx > s.max {
            s.max = mx;
        }
        if mn < s.min {
            s.min = mn;
        }
        if let Some(half) = self.half {
            let smax = lanes_u16(_mm512_max_epi16(self.smax16[0], self.smax16[1]));
            let umax = lanes_u16(_mm512_max_epu16(self.umax16[0], self.umax16[1]));
            let umin = lanes_u16(_mm512_min_epu16(self.umin16[0], self.umin16[1]));
            let smax = smax.iter().map(|&b| b as i16).max().unwrap_or(i16::MIN);
            let umax = umax.iter().copied().max().unwrap_or(0);
            let umin = umin.iter().copied().min().unwrap_or(u16::MAX);
            if let Some((max, min)) = extrema_of_bits(smax, umax, umin) {
                let (max, min) = (half.to_f64(max), half.to_f64(min));
                if max > s.max {
                    s.max = max;
                }
                if min < s.min {
                    s.min = min;
                }
            }
        }
        let add =
            |v: [__m512d; 4]| _mm512_add_pd(_mm512_add_pd(v[0], v[1]), _mm512_add_pd(v[2], v[3]));
        s.sum += _mm512_reduce_add_pd(add(self.s));
        s.sum_sq += _mm512_reduce_add_pd(add(self.q));
    }
}

/// The bits of the largest and the smallest of a set of sign-and-magnitude 16-bit floats
/// (`f16`, `bf16`; no NaN) from the signed maximum, unsigned maximum and unsigned minimum of
/// their bits (see [`Acc::extrema16`]); `None` if the set is empty (the minimum above the
/// maximum: the accumulators' initial values).
fn extrema_of_bits(smax: i16, umax: u16, umin: u16) -> Option<(u16, u16)> {
    if umin > umax {
        return None;
    }
    // A non-negative signed maximum is the largest value; else all are negative, and the
    // smallest magnitude (the unsigned minimum) is the largest.
    let max = if smax >= 0 { smax as u16 } else { umin };
    // A sign bit in the unsigned maximum: the largest-magnitude negative value is the
    // smallest; else none is negative, and the smallest bits are the smallest value.
    let min = if umax & 0x8000 != 0 { umax } else { umin };
    Some((max, min))
}

#[inline]
#[target_feature(enable = "avx512f")]
fn hsum_u32(v: __m512i) -> u64 {
    // SAFETY: __m512i and [u32; 16] have the same size and every bit pattern is valid for both.
    let a: [u32; 16] = unsafe { core::mem::transmute(v) };
    a.iter().map(|&x| x as u64).sum()
}

#[inline]
#[target_feature(enable = "avx512f")]
fn lanes_u16(v: __m512i) -> [u16; 32] {
    // SAFETY: __m512i and [u16; 32] have the same size and every bit pattern is valid for both.
    unsafe { core::mem::transmute(v) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn hsum_u16(v: __m512i) -> u64 {
    // SAFETY: __m512i and [u16; 32] have the same size and every bit pattern is valid for both.
    let a: [u16; 32] = unsafe { core::mem::transmute(v) };
    a.iter().map(|&x| x as u64).sum()
}

/// The mask of the first `n` of 16 lanes (`n <= 16`).
#[inline]
fn first(n: usize) -> __mmask16 {
    (((1u32 << n) - 1) & 0xffff) as __mmask16
}

/// The rest of a pass, the `len / size` whole elements of `size` bytes at `q` (fewer than
/// [`STEP`] bytes), 16 at a time: `each` gets the mask of the lanes that hold elements (the
/// first `min(16, left)`) and the pointer to the first of them. Loading through that mask
/// reads only those elements, so nothing past the data is accessed.
#[inline]
fn masked_rest(q: *const u8, len: usize, size: usize, mut each: impl FnMut(__mmask16, *const u8)) {
    let n = len / size;
    let mut o = 0;
    while o < n {
        each(first((n - o).min(16)), q.wrapping_add(o * size));
        o += 16;
    }
}

/// Prefetches the two lines [`PREFETCH`] bytes ahead of the step at `q` (never faults).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn prefetch_step(q: *const u8) {
    _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(PREFETCH) as *const i8);
    _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(PREFETCH + 64) as *const i8);
}

/// The common driver: whole `STEP`-byte steps of `data` through `body` (a pointer to each),
/// two steps per loop iteration, the counters flushed every [`FLUSH_STEPS`] steps, a last
/// odd step, then the rest (fewer than `STEP` bytes) through `tail`, which gets the rest's
/// pointer and length in bytes. `half` tells [`Acc::finish`] how to read the extrema that a
/// `f16`/`bf16` fast pass keeps on the bits (`None` for every other pass).
///
/// From [`PREFETCH_MIN`] bytes on, every step prefetches the lines [`PREFETCH`] bytes ahead,
/// unconditionally: prefetches never fault, and each guard tried to keep them inside the data
/// (a branch per step, a clamped address, a second loop for the last steps) cost 10-25%
/// beyond the caches. Below it no step prefetches: prefetching past the end of a 4 KiB tensor
/// made about one run in sixteen 3x slower (addresses beyond the buffer: page walks).
///
/// Two steps per iteration (same prefetches, half the loop overhead): `int32` beyond the
/// caches 1.11-1.23x the read against 1.00-1.07x with one step per iteration, in the same
/// process (BENCHMARKS.md, "2026-11-28: int32 and f16 beyond the caches"); no change in cache.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn drive(
    data: &[u8],
    half: Option<Half>,
    body: impl Fn(&mut Acc, *const u8),
    tail: impl Fn(&mut Acc, *const u8, usize),
) -> Summary {
    let mut s = Summary::EMPTY;
    let mut acc = Acc::new(half);
    let pairs = data.len() / (2 * STEP);
    let p = data.as_ptr();
    let prefetch = data.len() >= PREFETCH_MIN;
    let mut i = 0;
    while i < pairs {
        let end = pairs.min(i + FLUSH_STEPS / 2);
        // Two loops rather than a test in one: LLVM kept the test inside the loop, a branch
        // per step, which cost as much as the guards above.
        if prefetch {
            while i < end {
                let q = p.wrapping_add(i * 2 * STEP);
                prefetch_step(q);
                body(&mut acc, q);
                prefetch_step(q.wrapping_add(STEP));
                body(&mut acc, q.wrapping_add(STEP));
                i += 1;
            }
        } else {
            while i < end {
                let q = p.wrapping_add(i * 2 * STEP);
                body(&mut acc, q);
                body(&mut acc, q.wrapping_add(STEP));
                i += 1;
            }
        }
        acc.flush_counts(&mut s);
    }
    let mut done = pairs * 2 * STEP;
    if data.len() - done >= STEP {
        body(&mut acc, p.wrapping_add(done));
        done += STEP;
    }
    tail(&mut acc, p.wrapping_add(done), data.len() - done);
    acc.finish(&mut s);
    s
}

/// Raw partial (see `portable.rs`) of little-endian `f32` data; `data.len() % 4 == 0`.
///
/// Without `MASK` the partial's `nan` is 0 and a NaN in `data` leaves `sum` NaN (see
/// [`Acc::lane`]); with `MASK` it is exact.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn f32_raw<const MASK: bool>(data: &[u8]) -> Summary {
    drive(
        data,
        None,
        |acc, q| {
            // SAFETY: `drive` only passes pointers with STEP (128) readable bytes of `data`
            // behind them; loadu has no alignment requirement.
            let (x0, x1) = unsafe {
                (
                    _mm512_loadu_ps(q as *const f32),
                    _mm512_loadu_ps(q.add(64) as *const f32),
                )
            };
            acc.lane::<MASK>(0, x0);
            acc.lane::<MASK>(1, x1);
        },
        |acc, q, len| {
            masked_rest(q, len, 4, |k, r| {
                // SAFETY: `k` covers only whole elements readable at `r` (`masked_rest`);
                // masked-off lanes are not accessed (no fault).
                let x = unsafe { _mm512_maskz_loadu_ps(k, r as *const f32) };
                acc.lane_part::<MASK>(k, x);
            })
        },
    )
}

/// Raw partial of little-endian `bfloat16` data; `data.len() % 2 == 0`. `MASK` as for
/// [`f32_raw`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn bf16_raw<const MASK: bool>(data: &[u8]) -> Summary {
    drive(
        data,
        (!MASK).then_some(Half::Bf16),
        |acc, q| {
            // SAFETY: `drive` only passes pointers with STEP (128) readable bytes of `data`
            // behind them; loadu has no alignment requirement.
            let (a, b) = unsafe {
                (
                    _mm512_loadu_si512(q as *const __m512i),
                    _mm512_loadu_si512(q.add(64) as *const __m512i),
                )
            };
            // A bf16 is the high half of an f32: interleave zero low halves under each value.
            // This permutes values inside the step, which statistics do not care about.
            if MASK {
                let z = _mm512_setzero_si512();
                let f = _mm512_castsi512_ps;
                acc.lane::<MASK>(0, f(_mm512_unpacklo_epi16(z, a)));
                acc.lane::<MASK>(1, f(_mm512_unpackhi_epi16(z, a)));
                acc.lane::<MASK>(0, f(_mm512_unpacklo_epi16(z, b)));
                acc.lane::<MASK>(1, f(_mm512_unpackhi_epi16(z, b)));
            } else {
                acc.count16(a);
                acc.count16(b);
                acc.extrema16(0, a);
                acc.extrema16(1, b);
                // Sums from 256-bit loads widened in their own halves: each `ymm` of 8 `f32`
                // goes straight into `vcvtps2pd`, with no `vextractf64x4` to reach the upper
                // half of a `zmm` (that shuffle competes with the conversions: +12% in cache).
                let z = _mm256_setzero_si256();
                let f = _mm256_castsi256_ps;
                for (j, o) in [0, 32, 64, 96].into_iter().enumerate() {
                    // SAFETY: as above (`o + 32 <= STEP`).
                    let h = unsafe { _mm256_loadu_si256(q.add(o) as *const __m256i) };
                    let (lo, hi) = (_mm256_unpacklo_epi16(z, h), _mm256_unpackhi_epi16(z, h));
                    acc.sums(j & 1, f(lo), f(hi));
                }
            }
        },
        |acc, q, len| {
            masked_rest(q, len, 2, |k, r| {
                // SAFETY: `k` covers only whole elements readable at `r` (`masked_rest`);
                // masked-off lanes are not accessed (no fault).
                let h = unsafe { _mm256_maskz_loadu_epi16(k, r as *const i16) };
                // Element order (zero-extend, then shift into the high half): the lanes of
                // `k` are the loaded ones, and the others are +0.0.
                let x = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)));
                acc.lane_part::<MASK>(k, x);
            })
        },
    )
}

/// Raw partial of little-endian IEEE `float16` data; `data.len() % 2 == 0`. `MASK` as for
/// [`f32_raw`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn f16_raw<const MASK: bool>(data: &[u8]) -> Summary {
    drive(
        data,
        (!MASK).then_some(Half::F16),
        |acc, q| {
            if MASK {
                // SAFETY: `drive` only passes pointers with STEP (128) readable bytes of
                // `data` behind them; loadu has no alignment requirement.
                let h = unsafe {
                    [
                        _mm256_loadu_si256(q as *const __m256i),
                        _mm256_loadu_si256(q.add(32) as *const __m256i),
                        _mm256_loadu_si256(q.add(64) as *const __m256i),
                        _mm256_loadu_si256(q.add(96) as *const __m256i),
                    ]
                };
                acc.lane::<MASK>(0, _mm512_cvtph_ps(h[0]));
                acc.lane::<MASK>(1, _mm512_cvtph_ps(h[1]));
                acc.lane::<MASK>(0, _mm512_cvtph_ps(h[2]));
                acc.lane::<MASK>(1, _mm512_cvtph_ps(h[3]));
            } else {
                // SAFETY: as above.
                let (a, b) = unsafe {
                    (
                        _mm512_loadu_si512(q as *const __m512i),
                        _mm512_loadu_si512(q.add(64) as *const __m512i),
                    )
                };
                acc.count16(a);
                acc.count16(b);
                acc.extrema16(0, a);
                acc.extrema16(1, b);
                // Sums: 8 halves at a time (`vcvtph2ps ymm, m128`) straight into `vcvtps2pd`,
                // rather than 16 (`zmm`) and a `vextractf64x4` for the upper 8, which competes
                // with the conversions for the same pipes (+12% in cache).
                for (j, o) in (0..STEP).step_by(32).enumerate() {
                    // SAFETY: as above (`o + 32 <= STEP`).
                    let (lo, hi) = unsafe {
                        (
                            _mm_loadu_si128(q.add(o) as *const __m128i),
                            _mm_loadu_si128(q.add(o + 16) as *const __m128i),
                        )
                    };
                    acc.sums(j & 1, _mm256_cvtph_ps(lo), _mm256_cvtph_ps(hi));
                }
            }
        },
        |acc, q, len| {
            masked_rest(q, len, 2, |k, r| {
                // SAFETY: `k` covers only whole elements readable at `r` (`masked_rest`);
                // masked-off lanes are not accessed (no fault).
                let h = unsafe { _mm256_maskz_loadu_epi16(k, r as *const i16) };
                // Masked-off halves are 0 and convert to +0.0.
                acc.lane_part::<MASK>(k, _mm512_cvtph_ps(h));
            })
        },
    )
}

/// Integer accumulators: values widened to `i32` lanes; extrema in `i32`, sums in `f64`
/// (`vcvtdq2pd` is exact), `pos`/`neg` counted as in [`Acc`] (`zero` is derived, there is no
/// NaN).
struct IntAcc {
    mx: [__m512i; 2],
    mn: [__m512i; 2],
    s: [__m512d; 4],
    q: [__m512d; 4],
    pos: __m512i,
    neg: __m512i,
}

impl IntAcc {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn new() -> IntAcc {
        let z = _mm512_setzero_pd();
        IntAcc {
            mx: [_mm512_set1_epi32(i32::MIN); 2],
            mn: [_mm512_set1_epi32(i32::MAX); 2],
            s: [z; 4],
            q: [z; 4],
            pos: _mm512_setzero_si512(),
            neg: _mm512_setzero_si512(),
        }
    }

    /// Adds the 16 values of `x` in the lanes of `k` into accumulator set `j` (0 or 1); the
    /// other lanes must be 0 (a zero-masking load).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn lane(&mut self, j: usize, k: __mmask16, x: __m512i) {
        let z = _mm512_setzero_si512();
        let one = _mm512_set1_epi32(1);
        // Zero lanes are neither > 0 nor < 0, so `k` is needed only for the extrema.
        let gt = _mm512_cmpgt_epi32_mask(x, z);
        self.pos = _mm512_mask_add_epi32(self.pos, gt, self.pos, one);
        let lt = _mm512_cmplt_epi32_mask(x, z);
        self.neg = _mm512_mask_add_epi32(self.neg, lt, self.neg, one);
        self.mx[j] = _mm512_mask_max_epi32(self.mx[j], k, self.mx[j], x);
        self.mn[j] = _mm512_mask_min_epi32(self.mn[j], k, self.mn[j], x);
        let lo = _mm512_cvtepi32_pd(_mm512_castsi512_si256(x));
        let hi = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64::<1>(x));
        let i = 2 * j;
        self.s[i] = _mm512_add_pd(self.s[i], lo);
        self.s[i + 1] = _mm512_add_pd(self.s[i + 1], hi);
        self.q[i] = _mm512_fmadd_pd(lo, lo, self.q[i]);
        self.q[i + 1] = _mm512_fmadd_pd(hi, hi, self.q[i + 1]);
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn flush_counts(&mut self, s: &mut Summary) {
        s.pos += hsum_u32(self.pos);
        s.neg += hsum_u32(self.neg);
        self.pos = _mm512_setzero_si512();
        self.neg = _mm512_setzero_si512();
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    fn finish(mut self, s: &mut Summary) {
        self.flush_counts(s);
        let mx = _mm512_reduce_max_epi32(_mm512_max_epi32(self.mx[0], self.mx[1]));
        let mn = _mm512_reduce_min_epi32(_mm512_min_epi32(self.mn[0], self.mn[1]));
        // With no element seen these are i32::MIN / i32::MAX, which every value of a
        // non-empty partial (all within i32) replaces or equals: no special case.
        if mx as f64 > s.max {
            s.max = mx as f64;
        }
        if (mn as f64) < s.min {
            s.min = mn as f64;
        }
        let add =
            |v: [__m512d; 4]| _mm512_add_pd(_mm512_add_pd(v[0], v[1]), _mm512_add_pd(v[2], v[3]));
        s.sum += _mm512_reduce_add_pd(add(self.s));
        s.sum_sq += _mm512_reduce_add_pd(add(self.q));
    }
}

/// The integer kinds of the integer kernels (const parameters, so that each kind gets a loop of
/// its own, with no dispatch inside).
mod kind {
    pub const INT32: u8 = 0;
    pub const INT16: u8 = 1;
    pub const UINT16: u8 = 2;
    pub const INT8: u8 = 3;
    pub const UINT8: u8 = 4;
    pub const BOOL: u8 = 5;
}

/// Raw partial of integers of kind `K` (see [`kind`]), [`STEP`] bytes a step, the rest
/// through masked loads.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn int_raw<const K: u8>(data: &[u8]) -> Summary {
    let size = match K {
        kind::INT32 => 4,
        kind::INT16 | kind::UINT16 => 2,
        _ => 1,
    };
    let mut s = Summary::EMPTY;
    let mut acc = IntAcc::new();
    // The loops of `drive` (two steps per iteration, prefetch as there): through a shared
    // driver taking a closure the integer loops compiled into code 15-25% slower beyond the
    // caches.
    let pairs = data.len() / (2 * STEP);
    let p = data.as_ptr();
    let prefetch = data.len() >= PREFETCH_MIN;
    let mut i = 0;
    while i < pairs {
        let end = pairs.min(i + FLUSH_STEPS / 2);
        if prefetch {
            while i < end {
                let q = p.wrapping_add(i * 2 * STEP);
                prefetch_step(q);
                // SAFETY: pair `i < pairs` has 2 * STEP readable bytes of `data` at `q`, and
                // `int_step` reads only the STEP bytes at the pointer it gets.
                unsafe { int_step::<K>(&mut acc, q) };
                prefetch_step(q.wrapping_add(STEP));
                // SAFETY: as above.
                unsafe { int_step::<K>(&mut acc, q.wrapping_add(STEP)) };
                i += 1;
            }
        } else {
            while i < end {
                let q = p.wrapping_add(i * 2 * STEP);
                // SAFETY: as above.
                unsafe {
                    int_step::<K>(&mut acc, q);
                    int_step::<K>(&mut acc, q.wrapping_add(STEP));
                }
                i += 1;
            }
        }
        acc.flush_counts(&mut s);
    }
    let mut done = pairs * 2 * STEP;
    if data.len() - done >= STEP {
        // SAFETY: STEP readable bytes of `data` remain at `done`.
        unsafe { int_step::<K>(&mut acc, p.wrapping_add(done)) };
        done += STEP;
    }
    // The rest: fewer than STEP bytes, 16 elements at a time through masked loads.
    masked_rest(p.wrapping_add(done), data.len() - done, size, |k, r| {
        // SAFETY: `k` covers only whole elements readable at `r` (`masked_rest`); masked-off
        // lanes are not accessed (no fault).
        let x = unsafe { int_load::<K>(k, r) };
        acc.lane(0, k, x);
    });
    acc.finish(&mut s);
    s
}

/// One [`STEP`]-byte step of [`int_raw`].
///
/// # Safety
/// `q .. q + STEP` must be readable.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn int_step<const K: u8>(acc: &mut IntAcc, q: *const u8) {
    let all = 0xffff;
    // SAFETY: every load reads `o .. o + width` with `o + width <= STEP` (the caller's range).
    unsafe {
        match K {
            kind::INT32 => {
                acc.lane(0, all, _mm512_loadu_si512(q as *const __m512i));
                acc.lane(1, all, _mm512_loadu_si512(q.add(64) as *const __m512i));
            }
            kind::INT16 | kind::UINT16 => {
                for (j, o) in [0, 32, 64, 96].into_iter().enumerate() {
                    let h = _mm256_loadu_si256(q.add(o) as *const __m256i);
                    acc.lane(j & 1, all, widen16::<K>(h));
                }
            }
            _ => {
                for (j, o) in (0..STEP).step_by(16).enumerate() {
                    let b = _mm_loadu_si128(q.add(o) as *const __m128i);
                    acc.lane(j & 1, all, widen8::<K>(b));
                }
            }
        }
    }
}

/// Up to 16 elements of kind `K` at `q`, those of `k`, widened to `i32` lanes (the others 0).
///
/// # Safety
/// The elements of `k` at `q` must be readable.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn int_load<const K: u8>(k: __mmask16, q: *const u8) -> __m512i {
    // SAFETY: masked loads touch only the lanes of `k`, which the caller guarantees readable.
    unsafe {
        match K {
            kind::INT32 => _mm512_maskz_loadu_epi32(k, q as *const i32),
            kind::INT16 | kind::UINT16 => {
                widen16::<K>(_mm256_maskz_loadu_epi16(k, q as *const i16))
            }
            _ => widen8::<K>(_mm_maskz_loadu_epi8(k, q as *const i8)),
        }
    }
}

/// 16 `int16` / `uint16` values to `i32` lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn widen16<const K: u8>(h: __m256i) -> __m512i {
    if K == kind::INT16 {
        _mm512_cvtepi16_epi32(h)
    } else {
        _mm512_cvtepu16_epi32(h)
    }
}

/// 16 `int8` / `uint8` / `bool` values to `i32` lanes (a nonzero `bool` byte is 1).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn widen8<const K: u8>(b: __m128i) -> __m512i {
    match K {
        kind::INT8 => _mm512_cvtepi8_epi32(b),
        kind::UINT8 => _mm512_cvtepu8_epi32(b),
        _ => _mm512_min_epu32(_mm512_cvtepu8_epi32(b), _mm512_set1_epi32(1)),
    }
}

/// The remaining dtypes: explicit integer kernels where values fit `i32`, else the AVX2
/// build of the portable kernels (`UInt32`, the 64-bit types, float8).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn other_raw(dtype: DType, data: &[u8]) -> Summary {
    match dtype {
        DType::Int32 => int_raw::<{ kind::INT32 }>(data),
        DType::Int16 => int_raw::<{ kind::INT16 }>(data),
        DType::UInt16 => int_raw::<{ kind::UINT16 }>(data),
        DType::Int8 => int_raw::<{ kind::INT8 }>(data),
        DType::UInt8 => int_raw::<{ kind::UINT8 }>(data),
        DType::Bool => int_raw::<{ kind::BOOL }>(data),
        // A safe call: this function's target features include the AVX2 kernels'.
        _ => super::avx2::other_raw(dtype, data),
    }
}
