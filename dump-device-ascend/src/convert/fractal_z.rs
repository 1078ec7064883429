//! `FRACTAL_Z` ↔ `NCHW`: the layout of convolution weights.
//!
//! For a weight of NCHW shape `(N, C, H, W)` (N output channels, C input channels), C is split
//! into C1 = ⌈C / C0⌉ blocks and N into N1 = ⌈N / N0⌉ blocks (N0 = 16, the cube size). The device
//! shape is `(C1·H·W, N1, N0, C0)`: fractals of `N0 × C0` elements, row-major inside, ordered
//! by `(c1, h, w, n1)`. Element `(n, c, h, w)` is at
//! `((((c / C0)·H + h)·W + w)·N1 + n / N0)·N0 + n mod N0)·C0 + c mod C0`.
//! Both N and C are padded (zeros on the way in, dropped on the way out).
//!
//! Source: CANN `aclnnCalculateConvolutionWeightSize` (an fp16 `[2, 4, 8, 8]` weight becomes
//! `[64, 1, 16, 16]`) and the Ascend C guide's "Data Layout Formats" (`atlas_ascendc_10_0099`).
//! Grouped convolutions (`FRACTAL_Z` with groups > 1, `FRACTAL_Z_C04`) are not covered.

use super::transpose::{Mat, Tiles, by_elem_size, transpose_in};
use super::{blocks, bytes_of, check_elem, prepare};
use crate::{Blocks, Error};

/// The FRACTAL_Z shape `(C1·H·W, N1, N0, C0)` of an NCHW weight shape.
pub fn fractal_z_shape([n, c, h, w]: [usize; 4], b: Blocks) -> Result<[usize; 4], Error> {
    let b = b.check()?;
    let rows = blocks(c, b.c0)
        .checked_mul(h)
        .and_then(|x| x.checked_mul(w))
        .ok_or(Error::Overflow)?;
    Ok([rows, blocks(n, b.cube), b.cube, b.c0])
}

/// Converts FRACTAL_Z data to NCHW. `nchw` is the host weight shape; `src` holds the elements
/// of [`fractal_z_shape`]`(nchw, b)`. Returns the bytes written to `dst`.
pub fn fractal_z_to_nchw(
    src: &[u8],
    elem: usize,
    nchw: [usize; 4],
    b: Blocks,
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, nchw, b, dst, true)
}

/// Converts NCHW weights to FRACTAL_Z, zero-filling the padding. Returns the bytes written.
pub fn nchw_to_fractal_z(
    src: &[u8],
    elem: usize,
    nchw: [usize; 4],
    b: Blocks,
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, nchw, b, dst, false)
}

fn run(
    src: &[u8],
    elem: usize,
    nchw: [usize; 4],
    b: Blocks,
    dst: &mut [u8],
    to_nchw: bool,
) -> Result<usize, Error> {
    check_elem(elem)?;
    let dev = fractal_z_shape(nchw, b)?;
    let host_len = bytes_of(&nchw, elem)?;
    let dev_len = bytes_of(&dev, elem)?;
    let written = prepare(src, dst, host_len, dev_len, to_nchw)?;
    // An empty tensor has nothing to move (the device side's padding is zeroed by `prepare`),
    // however large its other dimensions: no loop over them.
    if host_len == 0 {
        return Ok(written);
    }
    let [n, c, h, w] = nchw;
    let hw = h.checked_mul(w).ok_or(Error::Overflow)?;
    let n1n0 = dev[1] * b.cube;
    by_elem_size!(elem, weights_n(src, dst, [n, c, b.c0, n1n0], hw, to_nchw));
    Ok(written)
}

/// Per `(c1, n)`: the device side is an `hw × C0` matrix with row stride `N1·N0·C0`
/// (element `(p, k)` at `((c1·hw + p)·N1·N0 + n)·C0 + k`), the host side `valid` planes of
/// `hw` elements; one is the transpose of the other.
fn weights_n<const N: usize>(
    src: &[u8],
    dst: &mut [u8],
    [n, c, c0, n1n0]: [usize; 4],
    hw: usize,
    to_nchw: bool,
) {
    let (s, _) = src.as_chunks::<N>();
    let (d, _) = dst.as_chunks_mut::<N>();
    let mut tiles = Tiles::new();
    // Output channel outer: the host side is then written front to back (one contiguous
    // `C·H·W` run per `ni`), and the device rows it reads (`C1·HW` rows, 1 to 2 cache lines
    // each) stay in cache for the next `ni`, which reads the next lanes of the same lines.
    for ni in 0..n {
        for cb in 0..c.div_ceil(c0) {
            let valid = c0.min(c - cb * c0);
            let dev = Mat {
                off: (cb * hw * n1n0 + ni) * c0,
                stride: n1n0 * c0,
            };
            let host = Mat {
                off: (ni * c + cb * c0) * hw,
                stride: hw,
            };
            if to_nchw {
                transpose_in(&mut tiles, s, dev, hw, valid, d, host);
            } else {
                transpose_in(&mut tiles, s, host, valid, hw, d, dev);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::testutil::{elems, unravel};
    use proptest::prelude::*;

    #[test]
    fn cann_shape_example() {
        let b = Blocks { c0: 16, cube: 16 };
        assert_eq!(fractal_z_shape([2, 4, 8, 8], b), Ok([64, 1, 16, 16]));
        assert_eq!(fractal_z_shape([17, 33, 3, 3], b), Ok([27, 2, 16, 16]));
        assert_eq!(
            fractal_z_shape([1, 1, 1, 1], Blocks { c0: 16, cube: 0 }),
            Err(Error::ZeroBlock { block: "N0/M0" })
        );
    }

    #[test]
    fn single_fractal_by_hand() {
        // N=2, C=3, H=W=1, N0=2, C0=4: one fractal, rows n, columns c (last column padding).
        let b = Blocks { c0: 4, cube: 2 };
        let dev = [1u8, 2, 3, 0, 4, 5, 6, 0];
        let mut out = [0u8; 6];
        assert_eq!(fractal_z_to_nchw(&dev, 1, [2, 3, 1, 1], b, &mut out), Ok(6));
        assert_eq!(out, [1, 2, 3, 4, 5, 6]);
        assert_eq!(
            fractal_z_to_nchw(&dev[..7], 1, [2, 3, 1, 1], b, &mut out),
            Err(Error::LengthMismatch {
                expected: 8,
                actual: 7
            })
        );
    }

    proptest! {
        #[test]
        fn matches_index_math_and_round_trips(
            n in 0usize..40, c in 0usize..40, h in 0usize..4, w in 0usize..4,
            c0 in prop::sample::select(vec![4usize, 8, 16, 32]),
            n0 in prop::sample::select(vec![1usize, 16]),
            elem in prop::sample::select(vec![1usize, 2, 4, 16]),
        ) {
            let b = Blocks { c0, cube: n0 };
            let host = [n, c, h, w];
            let dev = fractal_z_shape(host, b)?;
            let host_count = n * c * h * w;
            let dev_count: usize = dev.iter().product();
            let src = elems(dev_count, elem);
            let mut out = vec![0u8; host_count * elem];
            prop_assert_eq!(fractal_z_to_nchw(&src, elem, host, b, &mut out)?, host_count * elem);
            let n1 = n.div_ceil(n0);
            for i in 0..host_count {
                let [ni, ci, hi, wi] = unravel::<4>(i, &host);
                let row = ((ci / c0) * h + hi) * w + wi;
                let s = ((row * n1 + ni / n0) * n0 + ni % n0) * c0 + ci % c0;
                prop_assert_eq!(&out[i * elem..][..elem], &src[s * elem..][..elem]);
            }
            let mut fwd = vec![0xAAu8; dev_count * elem];
            nchw_to_fractal_z(&out, elem, host, b, &mut fwd)?;
            for j in 0..dev_count {
                let [row, nb, nk, ck] = unravel::<4>(j, &dev);
                let cb = row.checked_div(h * w).unwrap_or(0);
                let real = nb * n0 + nk < n && cb * c0 + ck < c;
                let want: &[u8] = if real { &src[j * elem..][..elem] } else { &[0; 16][..elem] };
                prop_assert_eq!(&fwd[j * elem..][..elem], want);
            }
        }
    }
}
