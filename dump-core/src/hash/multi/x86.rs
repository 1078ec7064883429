//! x86-64 lane kernels: AVX2 (8 lanes per `ymm`) and AVX-512F (16 lanes per `zmm`).
//!
//! Per block, each lane's 64 bytes are loaded as rows and transposed in registers so that
//! vector `w[j]` holds message word `j` of every lane (AVX2: two 8x8 transposes of `u32`, 24
//! shuffles each; AVX-512: one 16x16 transpose, 64 shuffles). A step is then the RFC's
//! `a = b + ((a + f(b, c, d) + w + k) <<< s)` on whole vectors; AVX-512 computes `f` with one
//! `vpternlogd` and the rotation with one `vprold`, AVX2 needs three operations for each.

use core::arch::x86_64::*;

use super::{MD5_MAX_LANES, State, steps::md5_steps};

mod avx2 {
    use super::*;

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn ff(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        _mm256_xor_si256(d, _mm256_and_si256(b, _mm256_xor_si256(c, d)))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn gg(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        _mm256_xor_si256(c, _mm256_and_si256(d, _mm256_xor_si256(b, c)))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn hh(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        _mm256_xor_si256(_mm256_xor_si256(b, c), d)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn ii(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        let not_d = _mm256_xor_si256(d, _mm256_set1_epi32(-1));
        _mm256_xor_si256(c, _mm256_or_si256(b, not_d))
    }

    /// Loads 32 bytes at `offset` of each lane's block as rows and returns the columns:
    /// element `l` of result `j` is word `j` of lane `l`'s 32 bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn load_transposed(blocks: &[&[u8]; 8], offset: usize) -> [__m256i; 8] {
        let r: [__m256i; 8] = core::array::from_fn(|l| {
            let row: &[u8; 32] = blocks[l][offset..offset + 32]
                .try_into()
                .expect("32-byte row");
            // SAFETY: `row` is 32 readable bytes; `loadu` has no alignment requirement.
            unsafe { _mm256_loadu_si256(row.as_ptr().cast()) }
        });
        // Within each 128-bit half k: t[2p] = r[2p][4k], r[2p+1][4k], r[2p][4k+1], r[2p+1][4k+1].
        let t0 = _mm256_unpacklo_epi32(r[0], r[1]);
        let t1 = _mm256_unpackhi_epi32(r[0], r[1]);
        let t2 = _mm256_unpacklo_epi32(r[2], r[3]);
        let t3 = _mm256_unpackhi_epi32(r[2], r[3]);
        let t4 = _mm256_unpacklo_epi32(r[4], r[5]);
        let t5 = _mm256_unpackhi_epi32(r[4], r[5]);
        let t6 = _mm256_unpacklo_epi32(r[6], r[7]);
        let t7 = _mm256_unpackhi_epi32(r[6], r[7]);
        // u[j] (rows 0-3) and u[4 + j] (rows 4-7): half k holds word 4k + j of four rows.
        let u = [
            _mm256_unpacklo_epi64(t0, t2),
            _mm256_unpackhi_epi64(t0, t2),
            _mm256_unpacklo_epi64(t1, t3),
            _mm256_unpackhi_epi64(t1, t3),
            _mm256_unpacklo_epi64(t4, t6),
            _mm256_unpackhi_epi64(t4, t6),
            _mm256_unpacklo_epi64(t5, t7),
            _mm256_unpackhi_epi64(t5, t7),
        ];
        core::array::from_fn(|w| {
            let j = w % 4;
            if w < 4 {
                _mm256_permute2x128_si256::<0x20>(u[j], u[4 + j])
            } else {
                _mm256_permute2x128_si256::<0x31>(u[j], u[4 + j])
            }
        })
    }
}

/// AVX2 kernel: compresses `n` blocks of `src[lane]` into lanes `0..8` of `st`.
///
/// # Safety
/// The CPU must support AVX2. (Every `src[lane]` must hold `64 * n` bytes; this is checked.)
#[target_feature(enable = "avx2")]
pub(super) unsafe fn compress_avx2(st: &mut State, src: &[&[u8]; MD5_MAX_LANES], n: usize) {
    use avx2::*;
    let blocks: [&[u8]; 8] = core::array::from_fn(|l| &src[l][..64 * n]);
    let load = |row: &[u32; MD5_MAX_LANES]| {
        // SAFETY: `row` holds 16 `u32`, of which the first 8 (32 bytes) are read.
        unsafe { _mm256_loadu_si256(row.as_ptr().cast()) }
    };
    let mut s = [load(&st[0]), load(&st[1]), load(&st[2]), load(&st[3])];
    for blk in 0..n {
        let at: [&[u8]; 8] = core::array::from_fn(|l| &blocks[l][64 * blk..]);
        let lo = load_transposed(&at, 0);
        let hi = load_transposed(&at, 32);
        let w: [__m256i; 16] = core::array::from_fn(|j| if j < 8 { lo[j] } else { hi[j - 8] });
        let [mut a, mut b, mut c, mut d] = s;
        macro_rules! step {
            ($f:ident, $a:ident, $b:ident, $c:ident, $d:ident, $w:expr, $s:literal, $k:literal) => {
                let t = _mm256_add_epi32($a, _mm256_add_epi32($w, _mm256_set1_epi32($k as i32)));
                let t = _mm256_add_epi32(t, $f($b, $c, $d));
                let t = _mm256_or_si256(
                    _mm256_slli_epi32::<$s>(t),
                    _mm256_srli_epi32::<{ 32 - $s }>(t),
                );
                $a = _mm256_add_epi32($b, t);
            };
        }
        md5_steps!(step, a, b, c, d, w);
        s = [
            _mm256_add_epi32(s[0], a),
            _mm256_add_epi32(s[1], b),
            _mm256_add_epi32(s[2], c),
            _mm256_add_epi32(s[3], d),
        ];
    }
    for (row, v) in st.iter_mut().zip(s) {
        // SAFETY: `row` holds 16 `u32`; the first 8 (32 bytes) are written.
        unsafe { _mm256_storeu_si256(row.as_mut_ptr().cast(), v) };
    }
}

mod avx512 {
    use super::*;

    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) fn ff(b: __m512i, c: __m512i, d: __m512i) -> __m512i {
        // b ? c : d
        _mm512_ternarylogic_epi32::<0xCA>(b, c, d)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) fn gg(b: __m512i, c: __m512i, d: __m512i) -> __m512i {
        // d ? b : c
        _mm512_ternarylogic_epi32::<0xE4>(b, c, d)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) fn hh(b: __m512i, c: __m512i, d: __m512i) -> __m512i {
        _mm512_ternarylogic_epi32::<0x96>(b, c, d)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) fn ii(b: __m512i, c: __m512i, d: __m512i) -> __m512i {
        // c ^ (b | !d)
        _mm512_ternarylogic_epi32::<0x39>(b, c, d)
    }

    /// Loads each lane's 64-byte block as a row and returns the columns: element `l` of
    /// result `j` is word `j` of lane `l`'s block.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) fn load_transposed(blocks: &[&[u8]; 16]) -> [__m512i; 16] {
        let r: [__m512i; 16] = core::array::from_fn(|l| {
            let row: &[u8; 64] = blocks[l][..64].try_into().expect("64-byte block");
            // SAFETY: `row` is 64 readable bytes; `loadu` has no alignment requirement.
            unsafe { _mm512_loadu_si512(row.as_ptr().cast()) }
        });
        // Within each 128-bit quarter k: t[2p] = r[2p][4k], r[2p+1][4k], r[2p][4k+1], ...
        let t: [__m512i; 16] = core::array::from_fn(|i| {
            let p = i / 2;
            if i % 2 == 0 {
                _mm512_unpacklo_epi32(r[2 * p], r[2 * p + 1])
            } else {
                _mm512_unpackhi_epi32(r[2 * p], r[2 * p + 1])
            }
        });
        // v[4g + j]: quarter k holds word 4k + j of rows 4g..4g+4.
        let v: [__m512i; 16] = core::array::from_fn(|i| {
            let (g, j) = (i / 4, i % 4);
            let (x, y) = (t[4 * g + j / 2], t[4 * g + 2 + j / 2]);
            if j % 2 == 0 {
                _mm512_unpacklo_epi64(x, y)
            } else {
                _mm512_unpackhi_epi64(x, y)
            }
        });
        // A 4x4 transpose of 128-bit quarters across v[j], v[4 + j], v[8 + j], v[12 + j].
        let mut w = [_mm512_setzero_si512(); 16];
        for j in 0..4 {
            let (a, b, c, d) = (v[j], v[4 + j], v[8 + j], v[12 + j]);
            let x0 = _mm512_shuffle_i32x4::<0x44>(a, b);
            let x1 = _mm512_shuffle_i32x4::<0xEE>(a, b);
            let y0 = _mm512_shuffle_i32x4::<0x44>(c, d);
            let y1 = _mm512_shuffle_i32x4::<0xEE>(c, d);
            w[j] = _mm512_shuffle_i32x4::<0x88>(x0, y0);
            w[4 + j] = _mm512_shuffle_i32x4::<0xDD>(x0, y0);
            w[8 + j] = _mm512_shuffle_i32x4::<0x88>(x1, y1);
            w[12 + j] = _mm512_shuffle_i32x4::<0xDD>(x1, y1);
        }
        w
    }
}

/// AVX-512F kernel: compresses `n` blocks of `src[lane]` into lanes `0..16` of `st`.
///
/// # Safety
/// The CPU must support AVX-512F. (Every `src[lane]` must hold `64 * n` bytes; this is
/// checked.)
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn compress_avx512(st: &mut State, src: &[&[u8]; MD5_MAX_LANES], n: usize) {
    use avx512::*;
    let blocks: [&[u8]; 16] = core::array::from_fn(|l| &src[l][..64 * n]);
    let load = |row: &[u32; MD5_MAX_LANES]| {
        // SAFETY: `row` holds 16 `u32` (64 bytes), all read.
        unsafe { _mm512_loadu_si512(row.as_ptr().cast()) }
    };
    let mut s = [load(&st[0]), load(&st[1]), load(&st[2]), load(&st[3])];
    for blk in 0..n {
        let at: [&[u8]; 16] = core::array::from_fn(|l| &blocks[l][64 * blk..]);
        let w = load_transposed(&at);
        let [mut a, mut b, mut c, mut d] = s;
        macro_rules! step {
            ($f:ident, $a:ident, $b:ident, $c:ident, $d:ident, $w:expr, $s:literal, $k:literal) => {
                let t = _mm512_add_epi32($a, _mm512_add_epi32($w, _mm512_set1_epi32($k as i32)));
                let t = _mm512_add_epi32(t, $f($b, $c, $d));
                $a = _mm512_add_epi32($b, _mm512_rol_epi32::<$s>(t));
            };
        }
        md5_steps!(step, a, b, c, d, w);
        s = [
            _mm512_add_epi32(s[0], a),
            _mm512_add_epi32(s[1], b),
            _mm512_add_epi32(s[2], c),
            _mm512_add_epi32(s[3], d),
        ];
    }
    for (row, v) in st.iter_mut().zip(s) {
        // SAFETY: `row` holds 16 `u32` (64 bytes), all written.
        unsafe { _mm512_storeu_si512(row.as_mut_ptr().cast(), v) };
    }
}
