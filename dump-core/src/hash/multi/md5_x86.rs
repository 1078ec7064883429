//! x86-64 lane kernels on `ymm` registers: AVX2, and AVX-512F + VL (`vpternlogd`, `vprold`).
//!
//! Both hash 16 lanes as two groups of 8 whose steps interleave: one group alone is bound by
//! the latency of MD5's step chain (each step needs the previous one's result), two keep the
//! vector units busy. Per block, each lane's 64 bytes are loaded as two 32-byte rows and
//! transposed in registers (two 8x8 transposes of `u32`, 24 shuffles each) so that vector
//! `w[j]` holds message word `j` of every lane. A step is the RFC's
//! `a = b + ((a + f(b, c, d) + w + k) <<< s)` on whole vectors; AVX-512 computes `f` with one
//! `vpternlogd` and the rotation with one `vprold`, where AVX2 needs three operations each.
//!
//! Measured alternatives on the benchmark set (AMD EPYC, `cargo xtask bench-stats --only
//! md5`): AVX2 with one group 4.4 GB/s (two: 5.3); AVX-512 on `zmm` registers (16 lanes per
//! register) 5.6 GB/s with one group and 3.3 with two, AVX-512VL on `ymm` with three groups
//! 4.2, against 6.4 for the two `ymm` groups used here. On the Zen 5 (full-width 512-bit
//! units, 2026-11-28, with the prefetch) one `zmm` group of 16 lanes was still slower: 5.55
//! against 6.39 GB/s on the large set, 4.93 against 5.46 on the small one. MD5's step chain
//! (four dependent operations per step) needs two interleaved groups to fill the units, where
//! SHA-1 (two per round) runs best on one `zmm` register.

use core::arch::x86_64::*;

use super::{
    MD5_MAX_LANES, State,
    md5_steps::md5_steps,
    transpose::{load_row8, load_transposed, prefetch_ahead, store_row8},
};

/// Registers of 8 lanes interleaved by both kernels.
const GROUPS: usize = 2;

/// Lanes of both kernels (`Md5Backend::lanes` of `Avx2` and `Avx512`).
const LANES: usize = 8 * GROUPS;
const _: () = assert!(LANES == 16 && LANES <= MD5_MAX_LANES);

/// The kernel body, shared by the AVX2 and AVX-512 builds: `$ops` is the module with the
/// round functions `ff`, `gg`, `hh`, `ii` and `rotl::<S, 32 - S>` for that instruction set.
macro_rules! ymm_kernel {
    ($(#[$doc:meta])* $name:ident, $features:literal, $ops:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The CPU must support the kernel's target features. (Every `src[lane]` of lanes
        /// `0..16` must hold `64 * n` bytes; this is checked.)
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name(st: &mut State, src: &[&[u8]; MD5_MAX_LANES], n: usize) {
            use $ops::*;
            let blocks: [&[u8]; LANES] = core::array::from_fn(|l| &src[l][..64 * n]);
            let mut s: [[__m256i; GROUPS]; 4] =
                core::array::from_fn(|r| core::array::from_fn(|g| load_row8(&st[r], g)));
            for blk in 0..n {
                let mut w = [[_mm256_setzero_si256(); GROUPS]; 16];
                for g in 0..GROUPS {
                    let at: [&[u8]; 8] =
                        core::array::from_fn(|l| &blocks[8 * g + l][64 * blk..]);
                    prefetch_ahead(&at);
                    let lo = load_transposed(&at, 0);
                    let hi = load_transposed(&at, 32);
                    for j in 0..8 {
                        w[j][g] = lo[j];
                        w[8 + j][g] = hi[j];
                    }
                }
                let [mut a, mut b, mut c, mut d] = s;
                macro_rules! step {
                    ($f:ident, $a:ident, $b:ident, $c:ident, $d:ident, $w:expr, $s:literal, $k:literal) => {
                        for g in 0..GROUPS {
                            let k = _mm256_set1_epi32($k as i32);
                            let t = _mm256_add_epi32($a[g], _mm256_add_epi32($w[g], k));
                            let t = _mm256_add_epi32(t, $f($b[g], $c[g], $d[g]));
                            $a[g] = _mm256_add_epi32($b[g], rotl::<$s, { 32 - $s }>(t));
                        }
                    };
                }
                md5_steps!(step, a, b, c, d, w);
                for (acc, new) in s.iter_mut().zip([a, b, c, d]) {
                    for (x, y) in acc.iter_mut().zip(new) {
                        *x = _mm256_add_epi32(*x, y);
                    }
                }
            }
            for (row, v) in st.iter_mut().zip(s) {
                for (g, v) in v.into_iter().enumerate() {
                    store_row8(row, g, v);
                }
            }
        }
    };
}

/// AVX2 round functions and rotation.
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

    /// Rotation left by `S` (`R` is `32 - S`).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn rotl<const S: i32, const R: i32>(x: __m256i) -> __m256i {
        _mm256_or_si256(_mm256_slli_epi32::<S>(x), _mm256_srli_epi32::<R>(x))
    }
}

/// AVX-512F + VL round functions (one `vpternlogd` each) and rotation (`vprold`).
mod avx512 {
    use super::*;

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn ff(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        // b ? c : d
        _mm256_ternarylogic_epi32::<0xCA>(b, c, d)
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn gg(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        // d ? b : c
        _mm256_ternarylogic_epi32::<0xE4>(b, c, d)
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn hh(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        // b ^ c ^ d
        _mm256_ternarylogic_epi32::<0x96>(b, c, d)
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn ii(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        // c ^ (b | !d)
        _mm256_ternarylogic_epi32::<0x39>(b, c, d)
    }

    /// Rotation left by `S` (`R`, `32 - S`, is implied by `vprold`).
    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn rotl<const S: i32, const R: i32>(x: __m256i) -> __m256i {
        _mm256_rol_epi32::<S>(x)
    }
}

ymm_kernel!(
    /// AVX2 kernel: compresses `n` blocks of `src[lane]` into lanes `0..16` of `st`.
    compress_avx2,
    "avx2",
    avx2
);

ymm_kernel!(
    /// AVX-512F + VL kernel: compresses `n` blocks of `src[lane]` into lanes `0..16` of `st`.
    compress_avx512,
    "avx2,avx512f,avx512vl",
    avx512
);
