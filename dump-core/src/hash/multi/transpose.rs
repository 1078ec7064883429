//! The x86-64 kernels' block load: eight lanes' 32-byte rows transposed into eight vectors of
//! one message word each (two 8x8 transposes of `u32` per 64-byte block), and the prefetch of
//! each lane's block a few blocks ahead; the state rows' loads and stores, 8 lanes at a time.

use core::arch::x86_64::*;

use super::MD5_MAX_LANES;

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

/// Bytes ahead of the current block from which each lane's line is prefetched. Sixteen lanes
/// are sixteen streams, more than the hardware prefetcher follows well: on 200 tensors of
/// 4 KiB–4 MiB (beyond the cache) the AVX-512 SHA-1 kernel went from 5.0 to 8.0 GB/s and MD5
/// from 4.6 to 6.4 GB/s (AMD EPYC Zen 5; 256 beat 512, 1024 and 2048 bytes).
const PREFETCH_AHEAD: usize = 256;

/// Prefetches, for each of 8 lanes, the line [`PREFETCH_AHEAD`] bytes after the start of its
/// current block (`blocks[l]` starts at that block); lanes that end sooner are skipped.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn prefetch_ahead(blocks: &[&[u8]; 8]) {
    for lane in blocks {
        if let Some(ahead) = lane.get(PREFETCH_AHEAD) {
            // A hint that never faults; the address is inside `lane`.
            _mm_prefetch::<_MM_HINT_T0>(core::ptr::from_ref(ahead).cast());
        }
    }
}

/// Lanes `8 g..8 g + 8` of a state row as one vector.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn load_row8(row: &[u32; MD5_MAX_LANES], g: usize) -> __m256i {
    let words: &[u32; 8] = row[8 * g..8 * g + 8].try_into().expect("8 lanes");
    // SAFETY: `words` is 8 `u32` (32 bytes), all read; no alignment needed.
    unsafe { _mm256_loadu_si256(words.as_ptr().cast()) }
}

/// Stores `v` into lanes `8 g..8 g + 8` of a state row.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn store_row8(row: &mut [u32; MD5_MAX_LANES], g: usize, v: __m256i) {
    let words: &mut [u32; 8] = (&mut row[8 * g..8 * g + 8]).try_into().expect("8 lanes");
    // SAFETY: `words` is 8 `u32` (32 bytes), all written; no alignment needed.
    unsafe { _mm256_storeu_si256(words.as_mut_ptr().cast(), v) }
}
