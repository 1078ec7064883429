//! The kernel shared by the NHWC, NC1HWC0 and FRACTAL_Z conversions: a tiled, strided 2-D
//! transpose over fixed-size elements, and the dispatch from a runtime element size to it.

/// A strided 2-D view into a flat element slice: element `(i, j)` is at `off + i·stride + j`.
#[derive(Clone, Copy)]
pub(crate) struct Mat {
    pub(crate) off: usize,
    pub(crate) stride: usize,
}

/// Tile edge in elements: a 16 × 16 tile of 16-byte elements is 4 KiB, within L1.
const TILE: usize = 16;

/// Two tiles of scratch for [`transpose_in`]: the source tile and its transpose.
pub(crate) struct Tiles<const N: usize> {
    a: [[[u8; N]; TILE]; TILE],
    t: [[[u8; N]; TILE]; TILE],
}

impl<const N: usize> Tiles<N> {
    /// Zeroed tiles (made once per conversion, not per transpose).
    pub(crate) fn new() -> Self {
        Tiles {
            a: [[[0; N]; TILE]; TILE],
            t: [[[0; N]; TILE]; TILE],
        }
    }
}

/// `dst(j, i) = src(i, j)` for `i < rows`, `j < cols`, tile by tile so that both sides stay in
/// cache whatever the strides ([`transpose_in`] with fresh scratch tiles).
#[inline]
pub(crate) fn transpose<const N: usize>(
    src: &[[u8; N]],
    s: Mat,
    rows: usize,
    cols: usize,
    dst: &mut [[u8; N]],
    d: Mat,
) {
    transpose_in(&mut Tiles::new(), src, s, rows, cols, dst, d);
}

/// [`transpose`] with the caller's scratch tiles (for callers that transpose many small
/// blocks). Each tile of up to 16 × 16 elements is copied row by row (fixed-size moves) into
/// a local array, transposed there with constant indices (SSE2 unpacks for 2- and 4-byte
/// elements, see [`transpose_tile`]), and written out row by row: no index computation and
/// bounds checks per element as in an element-wise loop.
#[inline]
pub(crate) fn transpose_in<const N: usize>(
    tiles: &mut Tiles<N>,
    src: &[[u8; N]],
    s: Mat,
    rows: usize,
    cols: usize,
    dst: &mut [[u8; N]],
    d: Mat,
) {
    let Tiles { a, t } = tiles;
    for i0 in (0..rows).step_by(TILE) {
        let ni = (rows - i0).min(TILE);
        for j0 in (0..cols).step_by(TILE) {
            let nj = (cols - j0).min(TILE);
            for (q, row) in a.iter_mut().enumerate().take(ni) {
                let at = s.off + (i0 + q) * s.stride + j0;
                copy_short(&mut row[..nj], &src[at..at + nj]);
            }
            transpose_tile(a, t);
            for (q, row) in t.iter().enumerate().take(nj) {
                let at = d.off + (j0 + q) * d.stride + i0;
                copy_short(&mut dst[at..at + ni], &row[..ni]);
            }
        }
    }
}

/// `to = from` for runs of at most [`TILE`] elements (equal lengths), as one or two
/// fixed-size moves (overlapping for lengths between the powers of two): inlined, no `memcpy`
/// call or element loop for a few dozen bytes.
#[inline(always)]
fn copy_short<T: Copy>(to: &mut [T], from: &[T]) {
    let n = to.len().min(from.len());
    match n {
        TILE => mv::<T, TILE>(to, from),
        8.. => {
            mv::<T, 8>(&mut to[..8], &from[..8]);
            mv::<T, 8>(&mut to[n - 8..n], &from[n - 8..n]);
        }
        4.. => {
            mv::<T, 4>(&mut to[..4], &from[..4]);
            mv::<T, 4>(&mut to[n - 4..n], &from[n - 4..n]);
        }
        2.. => {
            mv::<T, 2>(&mut to[..2], &from[..2]);
            mv::<T, 2>(&mut to[n - 2..n], &from[n - 2..n]);
        }
        1 => to[0] = from[0],
        _ => {}
    }
}

/// `to = from` as one `[T; K]` move when both are `K` long (they always are here).
#[inline(always)]
fn mv<T: Copy, const K: usize>(to: &mut [T], from: &[T]) {
    if let (Ok(t), Ok(f)) = (<&mut [T; K]>::try_from(to), <&[T; K]>::try_from(from)) {
        *t = *f;
    }
}

/// `t[j][i] = a[i][j]` over a whole tile (unused rows and columns carry stale values that the
/// caller never writes out). 2- and 4-byte elements go through SSE2 unpacks on x86-64 (part of
/// the x86-64 baseline, so no runtime detection is needed); other sizes and targets element
/// by element.
#[inline(always)]
fn transpose_tile<const N: usize>(a: &[[[u8; N]; TILE]; TILE], t: &mut [[[u8; N]; TILE]; TILE]) {
    #[cfg(target_arch = "x86_64")]
    {
        if N == 2 {
            // SAFETY: both tiles are TILE × TILE × 2 = 512 contiguous initialized bytes
            // (arrays of `u8` have no padding), read and written only inside those bounds.
            unsafe { sse2::tile16(a.as_ptr().cast(), t.as_mut_ptr().cast()) };
            return;
        }
        if N == 4 {
            // SAFETY: as above, TILE × TILE × 4 = 1024 bytes each.
            unsafe { sse2::tile32(a.as_ptr().cast(), t.as_mut_ptr().cast()) };
            return;
        }
    }
    for (i, row) in a.iter().enumerate() {
        for (j, &x) in row.iter().enumerate() {
            t[j][i] = x;
        }
    }
}

/// The 16 × 16 tile transposes with SSE2 (baseline on x86-64).
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use core::arch::x86_64::{
        __m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_unpackhi_epi16, _mm_unpackhi_epi32,
        _mm_unpackhi_epi64, _mm_unpacklo_epi16, _mm_unpacklo_epi32, _mm_unpacklo_epi64,
    };

    use super::TILE;

    /// A 16 × 16 tile of 2-byte elements (rows of 32 bytes) transposed from `a` into `t`, as
    /// four 8 × 8 blocks of three unpack rounds each.
    ///
    /// # Safety
    /// `a` must be readable and `t` writable for 512 bytes each; they must not overlap.
    #[inline(always)]
    pub(super) unsafe fn tile16(a: *const u8, t: *mut u8) {
        const ROW: usize = TILE * 2;
        for bi in 0..2 {
            for bj in 0..2 {
                let mut r = [zero(); 8];
                for (q, v) in r.iter_mut().enumerate() {
                    // SAFETY: row bi·8 + q < 16, bytes bj·16 .. bj·16 + 16 < 32: inside `a`.
                    *v = unsafe { _mm_loadu_si128(a.add((bi * 8 + q) * ROW + bj * 16).cast()) };
                }
                let o = t8x8(r);
                for (q, v) in o.iter().enumerate() {
                    // SAFETY: row bj·8 + q < 16, bytes bi·16 .. bi·16 + 16 < 32: inside `t`.
                    unsafe { _mm_storeu_si128(t.add((bj * 8 + q) * ROW + bi * 16).cast(), *v) };
                }
            }
        }
    }

    /// A 16 × 16 tile of 4-byte elements (rows of 64 bytes), as sixteen 4 × 4 blocks.
    ///
    /// # Safety
    /// `a` must be readable and `t` writable for 1024 bytes each; they must not overlap.
    #[inline(always)]
    pub(super) unsafe fn tile32(a: *const u8, t: *mut u8) {
        const ROW: usize = TILE * 4;
        for bi in 0..4 {
            for bj in 0..4 {
                let mut r = [zero(); 4];
                for (q, v) in r.iter_mut().enumerate() {
                    // SAFETY: row bi·4 + q < 16, bytes bj·16 .. bj·16 + 16 < 64: inside `a`.
                    *v = unsafe { _mm_loadu_si128(a.add((bi * 4 + q) * ROW + bj * 16).cast()) };
                }
                // SAFETY: register-only SSE2 operations; SSE2 is part of the x86-64 baseline.
                let o = unsafe {
                    let t0 = _mm_unpacklo_epi32(r[0], r[1]);
                    let t1 = _mm_unpackhi_epi32(r[0], r[1]);
                    let t2 = _mm_unpacklo_epi32(r[2], r[3]);
                    let t3 = _mm_unpackhi_epi32(r[2], r[3]);
                    [
                        _mm_unpacklo_epi64(t0, t2),
                        _mm_unpackhi_epi64(t0, t2),
                        _mm_unpacklo_epi64(t1, t3),
                        _mm_unpackhi_epi64(t1, t3),
                    ]
                };
                for (q, v) in o.iter().enumerate() {
                    // SAFETY: row bj·4 + q < 16, bytes bi·16 .. bi·16 + 16 < 64: inside `t`.
                    unsafe { _mm_storeu_si128(t.add((bj * 4 + q) * ROW + bi * 16).cast(), *v) };
                }
            }
        }
    }

    /// An all-zero vector.
    #[inline(always)]
    fn zero() -> __m128i {
        // SAFETY: a register-only SSE2 operation; SSE2 is part of the x86-64 baseline.
        unsafe { core::arch::x86_64::_mm_setzero_si128() }
    }

    /// The 8 × 8 transpose of 2-byte lanes: rows `r` in, columns out.
    #[inline(always)]
    fn t8x8(r: [__m128i; 8]) -> [__m128i; 8] {
        // SAFETY: register-only SSE2 operations; SSE2 is part of the x86-64 baseline.
        unsafe {
            let t0 = _mm_unpacklo_epi16(r[0], r[1]);
            let t1 = _mm_unpackhi_epi16(r[0], r[1]);
            let t2 = _mm_unpacklo_epi16(r[2], r[3]);
            let t3 = _mm_unpackhi_epi16(r[2], r[3]);
            let t4 = _mm_unpacklo_epi16(r[4], r[5]);
            let t5 = _mm_unpackhi_epi16(r[4], r[5]);
            let t6 = _mm_unpacklo_epi16(r[6], r[7]);
            let t7 = _mm_unpackhi_epi16(r[6], r[7]);
            let u0 = _mm_unpacklo_epi32(t0, t2);
            let u1 = _mm_unpackhi_epi32(t0, t2);
            let u2 = _mm_unpacklo_epi32(t1, t3);
            let u3 = _mm_unpackhi_epi32(t1, t3);
            let u4 = _mm_unpacklo_epi32(t4, t6);
            let u5 = _mm_unpackhi_epi32(t4, t6);
            let u6 = _mm_unpacklo_epi32(t5, t7);
            let u7 = _mm_unpackhi_epi32(t5, t7);
            [
                _mm_unpacklo_epi64(u0, u4),
                _mm_unpackhi_epi64(u0, u4),
                _mm_unpacklo_epi64(u1, u5),
                _mm_unpackhi_epi64(u1, u5),
                _mm_unpacklo_epi64(u2, u6),
                _mm_unpackhi_epi64(u2, u6),
                _mm_unpacklo_epi64(u3, u7),
                _mm_unpackhi_epi64(u3, u7),
            ]
        }
    }
}

/// Calls `f::<N>(args…)` with `N` = the runtime element size `elem` (1, 2, 4, 8 or 16 bytes:
/// every whole-byte dtype), returning [`Error::ElementSize`](crate::Error::ElementSize) from
/// the enclosing function for any other size.
macro_rules! by_elem_size {
    ($elem:expr, $f:ident ( $($arg:expr),* $(,)? )) => {
        match $elem {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            4 => $f::<4>($($arg),*),
            8 => $f::<8>($($arg),*),
            16 => $f::<16>($($arg),*),
            other => return Err($crate::Error::ElementSize(other)),
        }
    };
}
pub(crate) use by_elem_size;

#[cfg(test)]
mod tests {
    use super::*;

    /// Element `k` of `N` bytes: distinct for every `k` (and every byte of it differs).
    fn el<const N: usize>(k: usize) -> [u8; N] {
        core::array::from_fn(|b| {
            (k.wrapping_mul(7).wrapping_add(b * 131 + 1) % 251) as u8 ^ (k >> 8) as u8
        })
    }

    #[test]
    fn strided_transpose() {
        // A 3 × 20 block (row stride 21) into a 20 × 3 block (row stride 4).
        let src: Vec<[u8; 4]> = (0..3 * 21 + 5u32).map(u32::to_le_bytes).collect();
        let mut dst = vec![[0xFF; 4]; 2 + 20 * 4];
        transpose(
            &src,
            Mat { off: 5, stride: 21 },
            3,
            20,
            &mut dst,
            Mat { off: 2, stride: 4 },
        );
        for i in 0..3 {
            for j in 0..20 {
                assert_eq!(dst[2 + j * 4 + i], src[5 + i * 21 + j]);
            }
        }
        // Column 3 of each destination row is untouched.
        assert!((0..20).all(|j| dst[2 + j * 4 + 3] == [0xFF; 4]));
    }

    /// Every tile shape against the element-wise definition, for every element size (the
    /// SSE2 tiles of 2- and 4-byte elements and the plain one): full tiles, partial rows and
    /// columns at both edges, one element, strides wider than the block.
    fn tiles_of_every_shape<const N: usize>() {
        for rows in [1usize, 2, 7, 8, 9, 15, 16, 17, 33, 48] {
            for cols in [1usize, 3, 4, 5, 12, 16, 17, 40] {
                let (ss, ds) = (cols + 3, rows + 5);
                let src: Vec<[u8; N]> = (0..7 + rows * ss).map(el::<N>).collect();
                let mut dst = vec![[0xEE; N]; 1 + cols * ds];
                transpose(
                    &src,
                    Mat { off: 7, stride: ss },
                    rows,
                    cols,
                    &mut dst,
                    Mat { off: 1, stride: ds },
                );
                for j in 0..cols {
                    for i in 0..ds {
                        let want = if i < rows {
                            src[7 + i * ss + j]
                        } else {
                            [0xEE; N]
                        };
                        assert_eq!(
                            dst[1 + j * ds + i],
                            want,
                            "{N}: {rows}x{cols} at ({i}, {j})"
                        );
                    }
                }
                assert_eq!(dst[0], [0xEE; N]);
            }
        }
    }

    #[test]
    fn tiles_of_every_shape_and_element_size() {
        tiles_of_every_shape::<1>();
        tiles_of_every_shape::<2>();
        tiles_of_every_shape::<4>();
        tiles_of_every_shape::<8>();
        tiles_of_every_shape::<16>();
    }

    /// The SSE2 tiles against the plain element-wise transpose on one full tile.
    #[test]
    fn whole_tile_matches_element_wise() {
        fn check<const N: usize>() {
            let a: [[[u8; N]; TILE]; TILE] =
                core::array::from_fn(|i| core::array::from_fn(|j| el::<N>(i * TILE + j)));
            let mut t = [[[0u8; N]; TILE]; TILE];
            transpose_tile(&a, &mut t);
            for i in 0..TILE {
                for j in 0..TILE {
                    assert_eq!(t[j][i], a[i][j], "{N}: ({i}, {j})");
                }
            }
        }
        check::<2>();
        check::<4>();
        check::<1>();
    }
}
