//! x86-64 SHA-1 lane kernels: AVX2 (16 lanes in two interleaved `ymm` registers) and
//! AVX-512F + VL (16 lanes in one `zmm` register, round functions in one `vpternlogd`,
//! rotations in one `vprold`).
//!
//! Per block, each lane's 64 bytes are loaded as two 32-byte rows, transposed in registers
//! (two 8x8 transposes of `u32` per 8 lanes, shared with MD5) and byte-swapped, since SHA-1's
//! words are big-endian, so that vector `w[j]` holds message word `j` of every lane. A round
//! is FIPS 180-4's `e += rotl5(a) + f(b, c, d) + k + w`, `b = rotl30(b)` on whole vectors,
//! with the message schedule in a ring of 16 vectors. Only `a`'s rotation and the last
//! addition lie on the chain from one round to the next; the rest of a round overlaps.
//!
//! Measured on the benchmark set (AMD EPYC Zen 5, `cargo xtask bench-stats --only md5
//! --quick`, rows `sha1mb-*`, 2026-11-28): AVX-512 on one `zmm` register 7.3 GB/s (6.5 before
//! the block load was expanded in the kernel instead of called), against 4.8 GB/s for two
//! interleaved `ymm` groups with AVX-512VL, 3.6 for AVX2 and 2.1 for one SHA-NI stream. Unlike
//! MD5 on the Zen 4 (see the MD5 kernel module), SHA-1 is not bound by its round chain (two
//! operations per round), so one wide register beats two narrow ones.

use core::arch::x86_64::*;

use super::{
    MD5_MAX_LANES, State,
    sha1_rounds::sha1_rounds,
    transpose::{load_row8, load_transposed, prefetch_ahead, store_row8},
};

/// Lanes of both kernels (`MultiBackend::lanes` of `Avx2` and `Avx512`).
const LANES: usize = 16;
const _: () = assert!(LANES <= MD5_MAX_LANES);

/// The 16 message words of block `blk` of each of 16 lanes, as two groups of 8 lanes:
/// element `l` of `w[j][g]` is big-endian word `j` of lane `8 g + l`'s block. A macro, not a
/// function, so that it is expanded in each kernel (LLVM did not inline the function into the
/// AVX-512 kernel, whose block load then went through the stack).
macro_rules! load_words {
    ($blocks:expr, $blk:expr) => {{
        // Reverses the bytes of every 32-bit word.
        let swap = _mm256_setr_epi8(
            3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 3, 2, 1, 0, 7, 6, 5, 4, 11, 10,
            9, 8, 15, 14, 13, 12,
        );
        let mut w = [[_mm256_setzero_si256(); 2]; 16];
        for g in 0..2 {
            let at: [&[u8]; 8] = core::array::from_fn(|l| &$blocks[8 * g + l][64 * $blk..]);
            prefetch_ahead(&at);
            let lo = load_transposed(&at, 0);
            let hi = load_transposed(&at, 32);
            for j in 0..8 {
                w[j][g] = _mm256_shuffle_epi8(lo[j], swap);
                w[8 + j][g] = _mm256_shuffle_epi8(hi[j], swap);
            }
        }
        w
    }};
}

/// The kernel body, shared by both builds: `$ops` is the module with the vector type `V`,
/// `GROUPS` (vectors per 16 lanes), state and block loads, and the round operations.
macro_rules! kernel {
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
            let mut s: [[V; GROUPS]; 5] =
                core::array::from_fn(|r| core::array::from_fn(|g| load_row(&st[r], g)));
            for blk in 0..n {
                let mut w = block_words(&blocks, blk);
                let [mut a, mut b, mut c, mut d, mut e] = s;
                macro_rules! round {
                    ($f:ident, $a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $k:expr, $w:ident, $t:expr) => {
                        let i = $t % 16;
                        if $t >= 16 {
                            let (x, y, z) = (($t + 13) % 16, ($t + 8) % 16, ($t + 2) % 16);
                            for g in 0..GROUPS {
                                $w[i][g] = rotl::<1, 31>(xor4($w[x][g], $w[y][g], $w[z][g], $w[i][g]));
                            }
                        }
                        for g in 0..GROUPS {
                            let t = add($e[g], add(splat($k), $w[i][g]));
                            let t = add(t, $f($b[g], $c[g], $d[g]));
                            $e[g] = add(t, rotl::<5, 27>($a[g]));
                            $b[g] = rotl::<30, 2>($b[g]);
                        }
                    };
                }
                sha1_rounds!(round, a, b, c, d, e, w);
                for (acc, new) in s.iter_mut().zip([a, b, c, d, e]) {
                    for (x, y) in acc.iter_mut().zip(new) {
                        *x = add(*x, y);
                    }
                }
            }
            for (row, v) in st.iter_mut().zip(s) {
                for (g, v) in v.into_iter().enumerate() {
                    store_row(row, g, v);
                }
            }
        }
    };
}

/// AVX2: two groups of 8 lanes in `ymm` registers.
mod avx2 {
    use super::*;

    pub(super) type V = __m256i;
    pub(super) const GROUPS: usize = 2;

    pub(super) use super::{load_row8 as load_row, store_row8 as store_row};

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn block_words(blocks: &[&[u8]; LANES], blk: usize) -> [[V; GROUPS]; 16] {
        load_words!(blocks, blk)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn splat(k: u32) -> V {
        _mm256_set1_epi32(k as i32)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn add(x: V, y: V) -> V {
        _mm256_add_epi32(x, y)
    }

    /// Rotation left by `S` (`R` is `32 - S`).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn rotl<const S: i32, const R: i32>(x: V) -> V {
        _mm256_or_si256(_mm256_slli_epi32::<S>(x), _mm256_srli_epi32::<R>(x))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn xor4(a: V, b: V, c: V, d: V) -> V {
        _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn ch(b: V, c: V, d: V) -> V {
        _mm256_xor_si256(d, _mm256_and_si256(b, _mm256_xor_si256(c, d)))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn parity(b: V, c: V, d: V) -> V {
        _mm256_xor_si256(_mm256_xor_si256(b, c), d)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn maj(b: V, c: V, d: V) -> V {
        _mm256_or_si256(
            _mm256_and_si256(b, c),
            _mm256_and_si256(d, _mm256_or_si256(b, c)),
        )
    }
}

/// AVX-512F + VL: 16 lanes in one `zmm` register.
mod avx512 {
    use super::*;

    pub(super) type V = __m512i;
    pub(super) const GROUPS: usize = 1;

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn load_row(row: &[u32; MD5_MAX_LANES], _: usize) -> V {
        // SAFETY: `row` is 16 `u32` (64 bytes), all read; no alignment needed.
        unsafe { _mm512_loadu_si512(row.as_ptr().cast()) }
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn store_row(row: &mut [u32; MD5_MAX_LANES], _: usize, v: V) {
        // SAFETY: `row` is 16 `u32` (64 bytes), all written; no alignment needed.
        unsafe { _mm512_storeu_si512(row.as_mut_ptr().cast(), v) }
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn block_words(blocks: &[&[u8]; LANES], blk: usize) -> [[V; GROUPS]; 16] {
        let w: [[__m256i; 2]; 16] = load_words!(blocks, blk);
        core::array::from_fn(|j| {
            [_mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(w[j][0]),
                w[j][1],
            )]
        })
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn splat(k: u32) -> V {
        _mm512_set1_epi32(k as i32)
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn add(x: V, y: V) -> V {
        _mm512_add_epi32(x, y)
    }

    /// Rotation left by `S` (`R`, `32 - S`, is implied by `vprold`).
    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn rotl<const S: i32, const R: i32>(x: V) -> V {
        _mm512_rol_epi32::<S>(x)
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn xor4(a: V, b: V, c: V, d: V) -> V {
        _mm512_xor_si512(_mm512_ternarylogic_epi32::<0x96>(a, b, c), d)
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn ch(b: V, c: V, d: V) -> V {
        // b ? c : d
        _mm512_ternarylogic_epi32::<0xCA>(b, c, d)
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn parity(b: V, c: V, d: V) -> V {
        _mm512_ternarylogic_epi32::<0x96>(b, c, d)
    }

    #[inline]
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub(super) fn maj(b: V, c: V, d: V) -> V {
        _mm512_ternarylogic_epi32::<0xE8>(b, c, d)
    }
}

kernel!(
    /// AVX2 kernel: compresses `n` blocks of `src[lane]` into lanes `0..16` of `st`.
    compress_avx2,
    "avx2",
    avx2
);

kernel!(
    /// AVX-512F + VL kernel: compresses `n` blocks of `src[lane]` into lanes `0..16` of `st`.
    compress_avx512,
    "avx2,avx512f,avx512vl",
    avx512
);
