//! The AVX2 + FMA pair kernel for `f32`: 8 element pairs per step.
//!
//! Per step: finiteness of both sides (`|x| < inf`), non-finite mismatches, and non-finite
//! lanes zeroed so that they add nothing below. Both sides are widened to two `f64` halves,
//! where `|a - b|`, the threshold compares and the `allclose` compare are exact, and the dot
//! product and squared norms accumulate by FMA. The relative error for its maximum is divided
//! in `f32` (one `vdivps` per step instead of two `vdivpd`). A step whose pairs are all far
//! below every threshold (proved in `f32` with a margin, see `FAR_MARGIN`) skips the `f64`
//! threshold compares: for two runs of the same model nearly every step. ULP distance comes
//! from the bit patterns mapped onto the number line (`2^31 ± magnitude`), `vpmaxud - vpminud`.
//! Reached only after the caller verified AVX2, FMA and F16C.

use core::arch::x86_64::*;

use super::{PairMetrics, Tolerance};

/// Pair metrics of `a` and `b` (equal lengths, whole `f32` elements).
///
/// Register budget: six vector accumulators (dot, both squared norms, max abs, max rel, max
/// ULP) plus eight constants stay in the 16 `ymm` registers; every count goes through
/// `movemask` + `popcnt` into a scalar counter, which keeps the counters out of vector
/// registers (with vector lane counters the loop spilled to the stack).
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and POPCNT.
#[target_feature(enable = "avx2,fma,f16c,popcnt")]
pub(super) unsafe fn f32_pair(a: &[u8], b: &[u8], tol: Tolerance) -> PairMetrics {
    let n = a.len().min(b.len()) / 4;
    let steps = n / 8;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let abs32 = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    let abs64 = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fff_ffff_ffff_ffff));
    let inf = _mm256_set1_ps(f32::INFINITY);
    let top = _mm256_set1_epi32(i32::MIN);
    let (t1, t5) = (_mm256_set1_pd(0.001), _mm256_set1_pd(0.005));
    let (rtol, atol) = (_mm256_set1_pd(tol.rtol), _mm256_set1_pd(tol.atol));
    let zd = _mm256_setzero_pd();
    let (mut dot, mut sa, mut sb, mut mabs) = (zd, zd, zd, zd);
    let mut mrel = _mm256_setzero_ps();
    let mut ulp = _mm256_setzero_si256();
    let (mut c1, mut c5, mut cnc, mut fin_n, mut agree_n) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let (fast, far_t, far_c) = far_test(tol);
    let (far_t, far_c) = (_mm256_set1_ps(far_t), _mm256_set1_ps(far_c));
    let far_ay = _mm256_set1_ps(FAR_MIN_Y);
    let zs = _mm256_setzero_ps();
    for s in 0..steps {
        // SAFETY: `s < steps` so bytes `32 s .. 32 s + 32` of both slices are in bounds; the
        // loads have no alignment requirement.
        let (x, y) = unsafe {
            (
                _mm256_loadu_ps(pa.add(s * 32) as *const f32),
                _mm256_loadu_ps(pb.add(s * 32) as *const f32),
            )
        };
        let fin = _mm256_and_ps(
            _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(x, abs32), inf),
            _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(y, abs32), inf),
        );
        let eq = _mm256_cmp_ps::<_CMP_EQ_OQ>(x, y);
        let both_nan = _mm256_and_ps(
            _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x),
            _mm256_cmp_ps::<_CMP_UNORD_Q>(y, y),
        );
        // Lanes that agree: equal, both NaN, or both finite (measured below).
        let agree = _mm256_or_ps(_mm256_or_ps(eq, both_nan), fin);
        agree_n += (_mm256_movemask_ps(agree) as u32).count_ones() as u64;
        fin_n += (_mm256_movemask_ps(fin) as u32).count_ones() as u64;
        let x = _mm256_and_ps(x, fin);
        let y = _mm256_and_ps(y, fin);
        // ULP distance on the number line, 0 for equal values (±0 included).
        let kx = key(x, top);
        let ky = key(y, top);
        let d = _mm256_sub_epi32(_mm256_max_epu32(kx, ky), _mm256_min_epu32(kx, ky));
        ulp = _mm256_max_epu32(ulp, _mm256_andnot_si256(_mm256_castps_si256(eq), d));
        let xl = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
        let yl = _mm256_cvtps_pd(_mm256_castps256_ps128(y));
        let xh = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x));
        let yh = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(y));
        dot = _mm256_fmadd_pd(xh, yh, _mm256_fmadd_pd(xl, yl, dot));
        sa = _mm256_fmadd_pd(xh, xh, _mm256_fmadd_pd(xl, xl, sa));
        sb = _mm256_fmadd_pd(yh, yh, _mm256_fmadd_pd(yl, yl, sb));
        let adl = _mm256_and_pd(_mm256_sub_pd(xl, yl), abs64);
        let adh = _mm256_and_pd(_mm256_sub_pd(xh, yh), abs64);
        let ayl = _mm256_and_pd(yl, abs64);
        let ayh = _mm256_and_pd(yh, abs64);
        mabs = _mm256_max_pd(_mm256_max_pd(adl, adh), mabs);
        // |x - y| rounded to f32 (the exact f64 difference rounded once, as cvtpd_ps would).
        let ad = _mm256_and_ps(_mm256_sub_ps(x, y), abs32);
        let ay32 = _mm256_and_ps(y, abs32);
        // 0/0 is NaN: maxps returns its second operand then, so equal pairs add nothing.
        mrel = _mm256_max_ps(_mm256_div_ps(ad, ay32), mrel);
        // Every lane far below every threshold (or equal): the three counts get nothing from
        // this step, and their f64 compares are skipped.
        let far = _mm256_or_ps(
            _mm256_cmp_ps::<_CMP_EQ_OQ>(ad, zs),
            _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_mul_ps(ad, far_c), _mm256_mul_ps(ay32, far_t)),
                _mm256_cmp_ps::<_CMP_GE_OQ>(ay32, far_ay),
            ),
        );
        if fast && _mm256_movemask_ps(far) == 0xFF {
            continue;
        }
        let count = |l: __m256d, h: __m256d| {
            (_mm256_movemask_pd(l) as u32 | ((_mm256_movemask_pd(h) as u32) << 4)).count_ones()
                as u64
        };
        c1 += count(
            _mm256_cmp_pd::<_CMP_GT_OQ>(adl, _mm256_mul_pd(ayl, t1)),
            _mm256_cmp_pd::<_CMP_GT_OQ>(adh, _mm256_mul_pd(ayh, t1)),
        );
        c5 += count(
            _mm256_cmp_pd::<_CMP_GT_OQ>(adl, _mm256_mul_pd(ayl, t5)),
            _mm256_cmp_pd::<_CMP_GT_OQ>(adh, _mm256_mul_pd(ayh, t5)),
        );
        cnc += count(
            _mm256_cmp_pd::<_CMP_GT_OQ>(adl, _mm256_fmadd_pd(ayl, rtol, atol)),
            _mm256_cmp_pd::<_CMP_GT_OQ>(adh, _mm256_fmadd_pd(ayh, rtol, atol)),
        );
    }
    let mut m = PairMetrics {
        count: (steps * 8) as u64,
        finite: fin_n,
        dot: hsum_pd(dot),
        sq_a: hsum_pd(sa),
        sq_b: hsum_pd(sb),
        max_abs: lanes_pd(mabs).iter().fold(0.0, |m, v| v.max(m)),
        max_rel: lanes_ps(mrel)
            .iter()
            .fold(0.0, |m: f64, v| (*v as f64).max(m)),
        rel_over_1e3: c1,
        rel_over_5e3: c5,
        not_close: cnc,
        max_ulp: lanes_u32(ulp).iter().copied().max().unwrap_or(0) as u64,
        nonfinite_mismatch: (steps * 8) as u64 - agree_n,
    };
    let done = steps * 32;
    let tail = super::portable::pair(
        crate::DType::Float32,
        &a[done..],
        &b[done..],
        n - steps * 8,
        tol,
    );
    m.merge(&tail);
    m
}

/// The fast test's parameters for `tol` (see `FAR_*`): whether it may be used (the tolerance
/// is ordinary), and the `f32` factors it compares with, `t·(1 − margin)` for `t` the least of
/// 0.001 and `rtol`, and `1 + margin`. Shared by the AVX2 and AVX-512 kernels.
pub(super) fn far_test(tol: Tolerance) -> (bool, f32, f32) {
    let t_min = tol.rtol.min(0.001);
    let fast = tol.atol >= 0.0 && t_min >= FAR_MIN_T && t_min.is_finite();
    (
        fast,
        (t_min * (1.0 - FAR_MARGIN)) as f32,
        (1.0 + FAR_MARGIN) as f32,
    )
}

/// The fast test's margin: `|x - y|` rounded to `f32` is within `2^-24` of the exact value
/// and each `f32` product within `2^-24` of its own, so `ad·(1 + 2^-20) < |y|·t·(1 - 2^-20)`
/// in `f32` proves `|x - y| < |y|·t` exactly, hence below the `f64` thresholds `0.001·|y|`,
/// `0.005·|y|` and `atol + rtol·|y|` (for `t` the least of 0.001 and `rtol`, `atol >= 0`).
const FAR_MARGIN: f64 = 1.0 / (1u64 << 20) as f64;
/// The least `t` the test is used with, and the least `|y|` it trusts: their product stays a
/// normal `f32` (no subnormal rounding), so the margin holds.
const FAR_MIN_T: f64 = 1.0 / (1u64 << 20) as f64;
pub(super) const FAR_MIN_Y: f32 = 1.0 / (1u64 << 62) as f32 / (1u64 << 38) as f32;

/// The bit pattern of `x` mapped onto the number line: `2^31 + |x|` for positive, `2^31 - |x|`
/// for negative values (so `±0` meet and adjacent floats differ by 1).
#[inline]
#[target_feature(enable = "avx2")]
fn key(x: __m256, top: __m256i) -> __m256i {
    let bits = _mm256_castps_si256(x);
    let mag = _mm256_andnot_si256(top, bits);
    let pos = _mm256_add_epi32(top, mag);
    let neg = _mm256_sub_epi32(top, mag);
    _mm256_castps_si256(_mm256_blendv_ps(
        _mm256_castsi256_ps(pos),
        _mm256_castsi256_ps(neg),
        x,
    ))
}

#[inline]
#[target_feature(enable = "avx2")]
fn lanes_u32(v: __m256i) -> [u32; 8] {
    // SAFETY: __m256i and [u32; 8] have the same size and every bit pattern is valid for both.
    unsafe { core::mem::transmute(v) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn lanes_ps(v: __m256) -> [f32; 8] {
    // SAFETY: __m256 and [f32; 8] have the same size and every bit pattern is valid for both.
    unsafe { core::mem::transmute(v) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn lanes_pd(v: __m256d) -> [f64; 4] {
    // SAFETY: __m256d and [f64; 4] have the same size and every bit pattern is valid for both.
    unsafe { core::mem::transmute(v) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn hsum_pd(v: __m256d) -> f64 {
    lanes_pd(v).iter().sum()
}
