//! `FRACTAL_Z_3D` ↔ `NCDHW`: the layout of 3-D convolution weights, [`fractal_z`](super::fractal_z)
//! with a depth axis outermost.
//!
//! For a weight of NCDHW shape `(N, C, D, H, W)`, C is split into C1 = ⌈C / C0⌉ blocks and N
//! into N1 = ⌈N / N0⌉ blocks; the device shape is `(D·C1·H·W, N1, N0, C0)` (CANN also writes
//! it as the 7-D `(D, C1, H, W, N1, N0, C0)`), fractals of `N0 × C0` ordered by
//! `(d, c1, h, w, n1)`. Element `(n, c, d, h, w)` is at
//! `(((((d·C1 + c / C0)·H + h)·W + w)·N1 + n / N0)·N0 + n mod N0)·C0 + c mod C0`.
//! Both N and C are padded (zeros on the way in, dropped on the way out).
//!
//! Source: the CANN asc-devkit TransData sample (NCDHW `[16, 16, 1, 3, 5]` ↔ FRACTAL_Z_3D
//! `[D, C1, H, W, N1, N0, C0] = [1, 1, 3, 5, 1, 16, 16]`) and the `aclFormat` docs ("3D
//! convolution weight format"). Grouped weights (groups > 1) are not covered.

use super::transpose::{Mat, by_elem_size, transpose};
use super::{blocks, bytes_of, check_elem, prepare};
use crate::{Blocks, Error};

/// The FRACTAL_Z_3D shape `(D·C1·H·W, N1, N0, C0)` of an NCDHW weight shape.
pub fn fractal_z_3d_shape([n, c, d, h, w]: [usize; 5], b: Blocks) -> Result<[usize; 4], Error> {
    let b = b.check()?;
    let rows = [d, blocks(c, b.c0), h, w]
        .iter()
        .try_fold(1usize, |a, &x| a.checked_mul(x))
        .ok_or(Error::Overflow)?;
    Ok([rows, blocks(n, b.cube), b.cube, b.c0])
}

/// Converts FRACTAL_Z_3D data to NCDHW. `ncdhw` is the host weight shape; `src` holds the
/// elements of [`fractal_z_3d_shape`]`(ncdhw, b)`. Returns the bytes written to `dst`.
pub fn fractal_z_3d_to_ncdhw(
    src: &[u8],
    elem: usize,
    ncdhw: [usize; 5],
    b: Blocks,
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, ncdhw, b, dst, true)
}

/// Converts NCDHW weights to FRACTAL_Z_3D, zero-filling the padding. Returns the bytes written.
pub fn ncdhw_to_fractal_z_3d(
    src: &[u8],
    elem: usize,
    ncdhw: [usize; 5],
    b: Blocks,
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, ncdhw, b, dst, false)
}

fn run(
    src: &[u8],
    elem: usize,
    ncdhw: [usize; 5],
    b: Blocks,
    dst: &mut [u8],
    to_host: bool,
) -> Result<usize, Error> {
    check_elem(elem)?;
    let dev = fractal_z_3d_shape(ncdhw, b)?;
    let host_len = bytes_of(&ncdhw, elem)?;
    let dev_len = bytes_of(&dev, elem)?;
    let written = prepare(src, dst, host_len, dev_len, to_host)?;
    // An empty tensor has nothing to move (the device side's padding is zeroed by `prepare`),
    // however large its other dimensions: no loop over them.
    if host_len == 0 {
        return Ok(written);
    }
    let [n, c, d, h, w] = ncdhw;
    let hw = h.checked_mul(w).ok_or(Error::Overflow)?;
    let n1n0 = dev[1] * b.cube;
    by_elem_size!(
        elem,
        weights_nd(src, dst, [n, c, d, b.c0, n1n0], hw, to_host)
    );
    Ok(written)
}

/// Per `(n, c1, d)`: the device side is an `hw × C0` matrix with row stride `N1·N0·C0`
/// (element `(p, k)` at `(((d·C1 + c1)·hw + p)·N1·N0 + n)·C0 + k`), the host side `valid`
/// planes of `hw` elements, `D·hw` apart; one is the transpose of the other.
fn weights_nd<const N: usize>(
    src: &[u8],
    dst: &mut [u8],
    [n, c, d, c0, n1n0]: [usize; 5],
    hw: usize,
    to_host: bool,
) {
    let (s, _) = src.as_chunks::<N>();
    let (t, _) = dst.as_chunks_mut::<N>();
    let c1 = c.div_ceil(c0);
    // Output channel outer, as in FRACTAL_Z: the host side is written front to back.
    for ni in 0..n {
        for cb in 0..c1 {
            let valid = c0.min(c - cb * c0);
            for di in 0..d {
                let dev = Mat {
                    off: ((di * c1 + cb) * hw * n1n0 + ni) * c0,
                    stride: n1n0 * c0,
                };
                let host = Mat {
                    off: ((ni * c + cb * c0) * d + di) * hw,
                    stride: d * hw,
                };
                if to_host {
                    transpose(s, dev, hw, valid, t, host);
                } else {
                    transpose(s, host, valid, hw, t, dev);
                }
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
    fn the_cann_sample_shape() {
        let b = Blocks { c0: 16, cube: 16 };
        // NCDHW [16, 16, 1, 3, 5] → [D·C1·H·W, N1, N0, C0] = [15, 1, 16, 16].
        assert_eq!(
            fractal_z_3d_shape([16, 16, 1, 3, 5], b),
            Ok([15, 1, 16, 16])
        );
        assert_eq!(
            fractal_z_3d_shape([17, 33, 2, 3, 3], b),
            Ok([54, 2, 16, 16])
        );
    }

    #[test]
    fn one_fractal_per_depth_by_hand() {
        // N=2, C=3, D=2, H=W=1, N0=2, C0=4: two fractals (d = 0, 1), rows n, columns c.
        let b = Blocks { c0: 4, cube: 2 };
        let dev = [1u8, 2, 3, 0, 4, 5, 6, 0, 11, 12, 13, 0, 14, 15, 16, 0];
        let mut out = [0u8; 12];
        assert_eq!(
            fractal_z_3d_to_ncdhw(&dev, 1, [2, 3, 2, 1, 1], b, &mut out),
            Ok(12)
        );
        // NCDHW: (n, c, d).
        assert_eq!(out, [1, 11, 2, 12, 3, 13, 4, 14, 5, 15, 6, 16]);
    }

    proptest! {
        #[test]
        fn matches_index_math_and_round_trips(
            n in 0usize..20, c in 0usize..36, d in 0usize..3, h in 0usize..3, w in 0usize..3,
            c0 in prop::sample::select(vec![4usize, 16]),
            n0 in prop::sample::select(vec![1usize, 16]),
            elem in prop::sample::select(vec![1usize, 2, 4]),
        ) {
            let b = Blocks { c0, cube: n0 };
            let host = [n, c, d, h, w];
            let dev = fractal_z_3d_shape(host, b)?;
            let host_count: usize = host.iter().product();
            let dev_count: usize = dev.iter().product();
            let src = elems(dev_count, elem);
            let mut out = vec![0u8; host_count * elem];
            prop_assert_eq!(fractal_z_3d_to_ncdhw(&src, elem, host, b, &mut out)?, host_count * elem);
            let (n1, c1) = (n.div_ceil(n0), c.div_ceil(c0));
            for i in 0..host_count {
                let [ni, ci, di, hi, wi] = unravel::<5>(i, &host);
                let row = ((di * c1 + ci / c0) * h + hi) * w + wi;
                let s = ((row * n1 + ni / n0) * n0 + ni % n0) * c0 + ci % c0;
                prop_assert_eq!(&out[i * elem..][..elem], &src[s * elem..][..elem]);
            }
            let mut fwd = vec![0xAAu8; dev_count * elem];
            ncdhw_to_fractal_z_3d(&out, elem, host, b, &mut fwd)?;
            for j in 0..dev_count {
                let [row, nb, nk, ck] = unravel::<4>(j, &dev);
                let cb = row.checked_div(h * w).map_or(0, |r| r % c1.max(1));
                let real = nb * n0 + nk < n && cb * c0 + ck < c;
                let want: &[u8] = if real { &src[j * elem..][..elem] } else { &[0; 16][..elem] };
                prop_assert_eq!(&fwd[j * elem..][..elem], want);
            }
        }
    }
}
