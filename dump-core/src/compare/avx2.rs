//! The AVX2 + FMA pair kernel for `f32`: 8 element pairs per step.
//!
//! Per step: finiteness of both sides (`|x| < inf`), non-finite mismatches, and non-finite
//! lanes zeroed so that they add nothing below. Both sides are widened to two `f64` halves,
//! where `|a - b|`, the threshold compares and the `allclose` compare are exact, and the dot
//! product and squared norms accumulate by FMA. The relative error for its maximum is divided
//! in `f32` (one `vdivps` per step instead of two `vdivpd`). ULP distance comes from the bit
//! patterns mapped onto the number line (`2^31 ± magnitude`), `vpmaxud - vpminud`.
//! Reached only after the caller verified AVX2, FMA and F16C.

use core::arch::x86_64::*;

use super::{PairMetrics, Tolerance};

/// Pair metrics of `a` and `b` (equal lengths, whole `f32` elements, at most
/// [`super::PAIR_CHUNK`] bytes so that no `u32` lane counter can overflow).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
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
    let zi = _mm256_setzero_si256();
    let (mut dot, mut sa, mut sb) = ([zd; 2], [zd; 2], [zd; 2]);
    let (mut mabs, mut mrel) = (zd, _mm256_setzero_ps());
    let (mut c1, mut c5, mut cnc) = (zi, zi, zi);
    let (mut fin_n, mut mis_n, mut ulp) = (zi, zi, zi);
    for s in 0..steps {
        // SAFETY: `s < steps` so bytes `32 s .. 32 s + 32` of both slices are in bounds; the
        // loads have no alignment requirement.
        let (x, y) = unsafe {
            (
                _mm256_loadu_ps(pa.add(s * 32) as *const f32),
                _mm256_loadu_ps(pb.add(s * 32) as *const f32),
            )
        };
        let fx = _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(x, abs32), inf);
        let fy = _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(y, abs32), inf);
        let fin = _mm256_and_ps(fx, fy);
        let eq = _mm256_cmp_ps::<_CMP_EQ_OQ>(x, y);
        let both_nan = _mm256_and_ps(
            _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x),
            _mm256_cmp_ps::<_CMP_UNORD_Q>(y, y),
        );
        let agree = _mm256_or_ps(_mm256_or_ps(eq, both_nan), fin);
        // A lane whose values disagree (not equal, not both NaN, not both finite) counts one.
        mis_n = _mm256_sub_epi32(
            mis_n,
            _mm256_andnot_si256(_mm256_castps_si256(agree), _mm256_set1_epi32(-1)),
        );
        fin_n = _mm256_sub_epi32(fin_n, _mm256_castps_si256(fin));
        let x = _mm256_and_ps(x, fin);
        let y = _mm256_and_ps(y, fin);
        // ULP distance on the number line, 0 for equal values (±0 included).
        let kx = key(x, top);
        let ky = key(y, top);
        let d = _mm256_sub_epi32(_mm256_max_epu32(kx, ky), _mm256_min_epu32(kx, ky));
        ulp = _mm256_max_epu32(ulp, _mm256_andnot_si256(_mm256_castps_si256(eq), d));
        let mut ad32 = [zd; 2];
        for h in 0..2 {
            let (xh, yh) = if h == 0 {
                (
                    _mm256_cvtps_pd(_mm256_castps256_ps128(x)),
                    _mm256_cvtps_pd(_mm256_castps256_ps128(y)),
                )
            } else {
                (
                    _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x)),
                    _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(y)),
                )
            };
            dot[h] = _mm256_fmadd_pd(xh, yh, dot[h]);
            sa[h] = _mm256_fmadd_pd(xh, xh, sa[h]);
            sb[h] = _mm256_fmadd_pd(yh, yh, sb[h]);
            let ad = _mm256_and_pd(_mm256_sub_pd(xh, yh), abs64);
            let ay = _mm256_and_pd(yh, abs64);
            mabs = _mm256_max_pd(ad, mabs);
            let o1 = _mm256_cmp_pd::<_CMP_GT_OQ>(ad, _mm256_mul_pd(ay, t1));
            let o5 = _mm256_cmp_pd::<_CMP_GT_OQ>(ad, _mm256_mul_pd(ay, t5));
            let nc = _mm256_cmp_pd::<_CMP_GT_OQ>(ad, _mm256_fmadd_pd(ay, rtol, atol));
            c1 = _mm256_sub_epi64(c1, _mm256_castpd_si256(o1));
            c5 = _mm256_sub_epi64(c5, _mm256_castpd_si256(o5));
            cnc = _mm256_sub_epi64(cnc, _mm256_castpd_si256(nc));
            ad32[h] = ad;
        }
        let ad = _mm256_set_m128(_mm256_cvtpd_ps(ad32[1]), _mm256_cvtpd_ps(ad32[0]));
        // 0/0 is NaN: maxps returns its second operand then, so equal pairs add nothing.
        mrel = _mm256_max_ps(_mm256_div_ps(ad, _mm256_and_ps(y, abs32)), mrel);
    }
    let mut m = PairMetrics {
        count: (steps * 8) as u64,
        finite: hsum_u32(fin_n),
        dot: hsum_pd(_mm256_add_pd(dot[0], dot[1])),
        sq_a: hsum_pd(_mm256_add_pd(sa[0], sa[1])),
        sq_b: hsum_pd(_mm256_add_pd(sb[0], sb[1])),
        max_abs: lanes_pd(mabs).iter().fold(0.0, |m, v| v.max(m)),
        max_rel: lanes_ps(mrel)
            .iter()
            .fold(0.0, |m: f64, v| (*v as f64).max(m)),
        rel_over_1e3: hsum_u64(c1),
        rel_over_5e3: hsum_u64(c5),
        not_close: hsum_u64(cnc),
        max_ulp: lanes_u32(ulp).iter().copied().max().unwrap_or(0) as u64,
        nonfinite_mismatch: hsum_u32(mis_n),
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
fn hsum_u32(v: __m256i) -> u64 {
    lanes_u32(v).iter().map(|&x| x as u64).sum()
}

#[inline]
#[target_feature(enable = "avx2")]
fn hsum_u64(v: __m256i) -> u64 {
    // SAFETY: __m256i and [u64; 4] have the same size and every bit pattern is valid for both.
    let a: [u64; 4] = unsafe { core::mem::transmute(v) };
    a.iter().sum()
}

#[inline]
#[target_feature(enable = "avx2")]
fn hsum_pd(v: __m256d) -> f64 {
    lanes_pd(v).iter().sum()
}
