//! The AVX-512 pair kernel for `f32`: 16 element pairs per step, the AVX2 kernel's method
//! (see `avx2.rs`) on `zmm` registers, with compares into mask registers counted by
//! `popcnt` of the mask. Reached only after the caller verified AVX-512F/BW/VL, AVX2, FMA,
//! F16C and POPCNT.

use core::arch::x86_64::*;

use super::avx2::{FAR_MIN_Y, far_test};
use super::{PairMetrics, Tolerance};

/// Pair metrics of `a` and `b` (equal lengths, whole `f32` elements).
///
/// # Safety
/// The CPU must support AVX-512F, AVX-512BW, AVX-512VL, AVX2, FMA, F16C and POPCNT.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c,popcnt")]
pub(super) unsafe fn f32_pair(a: &[u8], b: &[u8], tol: Tolerance) -> PairMetrics {
    let n = a.len().min(b.len()) / 4;
    let steps = n / 16;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let inf = _mm512_set1_ps(f32::INFINITY);
    let top = _mm512_set1_epi32(i32::MIN);
    let (t1, t5) = (_mm512_set1_pd(0.001), _mm512_set1_pd(0.005));
    let (rtol, atol) = (_mm512_set1_pd(tol.rtol), _mm512_set1_pd(tol.atol));
    let zd = _mm512_setzero_pd();
    let (mut dot, mut sa, mut sb, mut mabs) = (zd, zd, zd, zd);
    let mut mrel = _mm512_setzero_ps();
    let mut ulp = _mm512_setzero_si512();
    let (mut c1, mut c5, mut cnc, mut fin_n, mut agree_n) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let (fast, far_t, far_c) = far_test(tol);
    let (far_t, far_c) = (_mm512_set1_ps(far_t), _mm512_set1_ps(far_c));
    let far_ay = _mm512_set1_ps(FAR_MIN_Y);
    let zs = _mm512_setzero_ps();
    let halves = |v: __m512| {
        (
            _mm512_cvtps_pd(_mm512_castps512_ps256(v)),
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(
                _mm512_castps_pd(v),
            ))),
        )
    };
    let ones = |k: u16| u64::from(k.count_ones());
    let pair = |l: __mmask8, h: __mmask8| u64::from(l.count_ones() + h.count_ones());
    for s in 0..steps {
        // SAFETY: `s < steps` so bytes `64 s .. 64 s + 64` of both slices are in bounds; the
        // loads have no alignment requirement.
        let (x, y) = unsafe {
            (
                _mm512_loadu_ps(pa.add(s * 64) as *const f32),
                _mm512_loadu_ps(pb.add(s * 64) as *const f32),
            )
        };
        let fin = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(_mm512_abs_ps(x), inf)
            & _mm512_cmp_ps_mask::<_CMP_LT_OQ>(_mm512_abs_ps(y), inf);
        let eq = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(x, y);
        let both_nan =
            _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x) & _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(y, y);
        // Lanes that agree: equal, both NaN, or both finite (measured below).
        agree_n += ones(eq | both_nan | fin);
        fin_n += ones(fin);
        let x = _mm512_maskz_mov_ps(fin, x);
        let y = _mm512_maskz_mov_ps(fin, y);
        // ULP distance on the number line, 0 for equal values (±0 included).
        let (kx, ky) = (key(x, top), key(y, top));
        let d = _mm512_sub_epi32(_mm512_max_epu32(kx, ky), _mm512_min_epu32(kx, ky));
        ulp = _mm512_max_epu32(ulp, _mm512_maskz_mov_epi32(!eq, d));
        let (xl, xh) = halves(x);
        let (yl, yh) = halves(y);
        dot = _mm512_fmadd_pd(xh, yh, _mm512_fmadd_pd(xl, yl, dot));
        sa = _mm512_fmadd_pd(xh, xh, _mm512_fmadd_pd(xl, xl, sa));
        sb = _mm512_fmadd_pd(yh, yh, _mm512_fmadd_pd(yl, yl, sb));
        let adl = _mm512_abs_pd(_mm512_sub_pd(xl, yl));
        let adh = _mm512_abs_pd(_mm512_sub_pd(xh, yh));
        let (ayl, ayh) = (_mm512_abs_pd(yl), _mm512_abs_pd(yh));
        mabs = _mm512_max_pd(_mm512_max_pd(adl, adh), mabs);
        // |x - y| rounded to f32 (the exact f64 difference rounded once).
        let ad = _mm512_abs_ps(_mm512_sub_ps(x, y));
        let ay32 = _mm512_abs_ps(y);
        // 0/0 is NaN: maxps returns its second operand then, so equal pairs add nothing.
        mrel = _mm512_max_ps(_mm512_div_ps(ad, ay32), mrel);
        // Every lane far below every threshold (or equal): the three counts get nothing from
        // this step, and their f64 compares are skipped.
        let far = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(ad, zs)
            | (_mm512_cmp_ps_mask::<_CMP_LT_OQ>(
                _mm512_mul_ps(ad, far_c),
                _mm512_mul_ps(ay32, far_t),
            ) & _mm512_cmp_ps_mask::<_CMP_GE_OQ>(ay32, far_ay));
        if fast && far == 0xFFFF {
            continue;
        }
        c1 += pair(
            _mm512_cmp_pd_mask::<_CMP_GT_OQ>(adl, _mm512_mul_pd(ayl, t1)),
            _mm512_cmp_pd_mask::<_CMP_GT_OQ>(adh, _mm512_mul_pd(ayh, t1)),
        );
        c5 += pair(
            _mm512_cmp_pd_mask::<_CMP_GT_OQ>(adl, _mm512_mul_pd(ayl, t5)),
            _mm512_cmp_pd_mask::<_CMP_GT_OQ>(adh, _mm512_mul_pd(ayh, t5)),
        );
        cnc += pair(
            _mm512_cmp_pd_mask::<_CMP_GT_OQ>(adl, _mm512_fmadd_pd(ayl, rtol, atol)),
            _mm512_cmp_pd_mask::<_CMP_GT_OQ>(adh, _mm512_fmadd_pd(ayh, rtol, atol)),
        );
    }
    let mut m = PairMetrics {
        count: (steps * 16) as u64,
        finite: fin_n,
        dot: lanes_pd(dot).iter().sum(),
        sq_a: lanes_pd(sa).iter().sum(),
        sq_b: lanes_pd(sb).iter().sum(),
        max_abs: lanes_pd(mabs).iter().fold(0.0, |m, v| v.max(m)),
        max_rel: lanes_ps(mrel)
            .iter()
            .fold(0.0, |m: f64, v| (*v as f64).max(m)),
        rel_over_1e3: c1,
        rel_over_5e3: c5,
        not_close: cnc,
        max_ulp: lanes_u32(ulp).iter().copied().max().unwrap_or(0) as u64,
        nonfinite_mismatch: (steps * 16) as u64 - agree_n,
    };
    // The rest (fewer than 16 pairs) through the AVX2 kernel, which hands its own rest to
    // the portable one.
    let done = steps * 64;
    // SAFETY: this function's own requirements include the AVX2 kernel's.
    let tail = unsafe { super::avx2::f32_pair(&a[done..], &b[done..], tol) };
    m.merge(&tail);
    m
}

/// The bit pattern of `x` mapped onto the number line: `2^31 + |x|` for positive, `2^31 - |x|`
/// for negative values (so `±0` meet and adjacent floats differ by 1).
#[inline]
#[target_feature(enable = "avx512f")]
fn key(x: __m512, top: __m512i) -> __m512i {
    let bits = _mm512_castps_si512(x);
    let mag = _mm512_andnot_si512(top, bits);
    let negative = _mm512_cmplt_epi32_mask(bits, _mm512_setzero_si512());
    _mm512_mask_blend_epi32(
        negative,
        _mm512_add_epi32(top, mag),
        _mm512_sub_epi32(top, mag),
    )
}

#[inline]
#[target_feature(enable = "avx512f")]
fn lanes_u32(v: __m512i) -> [u32; 16] {
    // SAFETY: __m512i and [u32; 16] have the same size and every bit pattern is valid for both.
    unsafe { core::mem::transmute(v) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn lanes_ps(v: __m512) -> [f32; 16] {
    // SAFETY: __m512 and [f32; 16] have the same size and every bit pattern is valid for both.
    unsafe { core::mem::transmute(v) }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn lanes_pd(v: __m512d) -> [f64; 8] {
    // SAFETY: __m512d and [f64; 8] have the same size and every bit pattern is valid for both.
    unsafe { core::mem::transmute(v) }
}
