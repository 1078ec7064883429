//! `FRACTAL_NZ` ↔ ND: the layout of matrices (the last two axes), with any batch axes in front.
//!
//! CANN ("Data Layout Formats", Ascend C guide `atlas_ascendc_10_0099`): `(…, M, N)` → pad →
//! `(…, M1·M0, N1·N0)` → reshape `(…, M1, M0, N1, N0)` → transpose `(…, N1, M1, M0, N0)`. The
//! fractals are ordered column-major ("N"), the elements inside one row-major ("Z"). M0 is the
//! cube size 16; N0 is C0 (16 for fp16, 32 for int8; ATB `TransdataOperation`: ND
//! `{8, 100, 30}` ↔ NZ `{8, 2, 112, 16}`). Element `(b, m, n)` is at
//! `(((b·N1 + n / N0)·M1 + m / M0)·M0 + m mod M0)·N0 + n mod N0`.
//!
//! A rank-1 host shape `(N)` is treated as `(1, N)`. Padding rows and columns are dropped on the
//! way to ND and zero-filled on the way back.

use super::{Shape, blocks, bytes_of, check_elem, prepare};
use crate::{Blocks, Error, Format};

/// Splits a host shape into (batch dims, M, N); rank 1 is `(1, N)`.
fn split(nd: &[usize]) -> Result<(&[usize], usize, usize), Error> {
    match nd.len() {
        0 => Err(Error::Rank {
            format: Format::FractalNz,
            shape: "host",
            expected: 1,
            at_least: true,
            actual: 0,
        }),
        1 => Ok((&[], 1, nd[0])),
        r => Ok((&nd[..r - 2], nd[r - 2], nd[r - 1])),
    }
}

/// The FRACTAL_NZ shape `(…, N1, M1, M0, N0)` of an ND shape `(…, M, N)`; N0 = `b.c0`,
/// M0 = `b.cube`.
pub fn fractal_nz_shape(nd: &[usize], b: Blocks) -> Result<Shape, Error> {
    let b = b.check()?;
    let (batch, m, n) = split(nd)?;
    let mut s = Shape::new(batch)?;
    for d in [blocks(n, b.c0), blocks(m, b.cube), b.cube, b.c0] {
        s.push(d)?;
    }
    Ok(s)
}

/// Converts FRACTAL_NZ data to ND. `nd` is the host shape `(…, M, N)`; `src` holds the elements
/// of [`fractal_nz_shape`]`(nd, b)`. Returns the bytes written to `dst`.
pub fn fractal_nz_to_nd(
    src: &[u8],
    elem: usize,
    nd: &[usize],
    b: Blocks,
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, nd, b, dst, true)
}

/// Converts ND data to FRACTAL_NZ, zero-filling the padding. Returns the bytes written.
pub fn nd_to_fractal_nz(
    src: &[u8],
    elem: usize,
    nd: &[usize],
    b: Blocks,
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, nd, b, dst, false)
}

fn run(
    src: &[u8],
    elem: usize,
    nd: &[usize],
    b: Blocks,
    dst: &mut [u8],
    to_nd: bool,
) -> Result<usize, Error> {
    check_elem(elem)?;
    let dev = fractal_nz_shape(nd, b)?;
    let host_len = bytes_of(nd, elem)?;
    let dev_len = bytes_of(&dev, elem)?;
    let written = prepare(src, dst, host_len, dev_len, to_nd)?;
    // An empty tensor has nothing to move (the device side's padding is zeroed by `prepare`),
    // however large its other dimensions: no loop over them.
    if host_len == 0 {
        return Ok(written);
    }
    let (batch, m, n) = split(nd)?;
    let batches = bytes_of(batch, 1)?;
    let r = dev.len();
    let (n1, m1, m0, n0) = (dev[r - 4], dev[r - 3], dev[r - 2], dev[r - 1]);
    for bi in 0..batches {
        for mi in 0..m {
            let (mb, mk) = (mi / m0, mi % m0);
            for nb in 0..n1 {
                // One fractal row: up to N0 contiguous elements in both layouts.
                let run_len = n0.min(n - nb * n0) * elem;
                let d = ((((bi * n1 + nb) * m1 + mb) * m0 + mk) * n0) * elem;
                let h = ((bi * m + mi) * n + nb * n0) * elem;
                if to_nd {
                    dst[h..h + run_len].copy_from_slice(&src[d..d + run_len]);
                } else {
                    dst[d..d + run_len].copy_from_slice(&src[h..h + run_len]);
                }
            }
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::testutil::{elems, unravel};
    use proptest::prelude::*;

    const F16: Blocks = Blocks { c0: 16, cube: 16 };

    #[test]
    fn atb_shape_example() {
        assert_eq!(
            &*fractal_nz_shape(&[8, 100, 30], F16).unwrap(),
            &[8, 2, 7, 16, 16]
        );
        assert_eq!(&*fractal_nz_shape(&[5], F16).unwrap(), &[1, 1, 16, 16]);
        assert_eq!(
            fractal_nz_shape(&[], F16),
            Err(Error::Rank {
                format: Format::FractalNz,
                shape: "host",
                expected: 1,
                at_least: true,
                actual: 0
            })
        );
    }

    #[test]
    fn small_by_hand() {
        // M=3, N=3, M0=2, N0=2: fractals (n1=0,m1=0) (n1=0,m1=1) (n1=1,m1=0) (n1=1,m1=1).
        let b = Blocks { c0: 2, cube: 2 };
        #[rustfmt::skip]
        let dev = [
            1, 2, 4, 5,   7, 8, 0, 0,   // n1 = 0: rows 0-1, rows 2-3 (row 3 padding)
            3, 0, 6, 0,   9, 0, 0, 0,   // n1 = 1: column 2 and padding
        ];
        let mut out = [0u8; 9];
        assert_eq!(fractal_nz_to_nd(&dev, 1, &[3, 3], b, &mut out), Ok(9));
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let mut back = [0xFFu8; 16];
        assert_eq!(nd_to_fractal_nz(&out, 1, &[3, 3], b, &mut back), Ok(16));
        assert_eq!(back, dev);
    }

    proptest! {
        #[test]
        fn matches_index_math_and_round_trips(
            batch in prop::collection::vec(0usize..3, 0..3),
            m in 1usize..40, n in 1usize..40,
            c0 in prop::sample::select(vec![8usize, 16, 32]),
            m0 in prop::sample::select(vec![1usize, 16]),
            elem in prop::sample::select(vec![1usize, 2, 4, 8, 16]),
        ) {
            let b = Blocks { c0, cube: m0 };
            let mut nd = batch.clone();
            nd.extend([m, n]);
            let dev = fractal_nz_shape(&nd, b)?;
            let host_count: usize = nd.iter().product();
            let dev_count: usize = dev.iter().product();
            let src = elems(dev_count, elem);
            let mut out = vec![0u8; host_count * elem];
            prop_assert_eq!(fractal_nz_to_nd(&src, elem, &nd, b, &mut out)?, host_count * elem);
            let (n1, m1) = (n.div_ceil(c0), m.div_ceil(m0));
            for i in 0..host_count {
                let bi = i / (m * n);
                let [mi, ni] = unravel::<2>(i % (m * n), &[m, n]);
                let s = (((bi * n1 + ni / c0) * m1 + mi / m0) * m0 + mi % m0) * c0 + ni % c0;
                prop_assert_eq!(&out[i * elem..][..elem], &src[s * elem..][..elem]);
            }
            let mut fwd = vec![0xAAu8; dev_count * elem];
            nd_to_fractal_nz(&out, elem, &nd, b, &mut fwd)?;
            let tail = [dev[dev.len() - 4], m1, m0, c0];
            for j in 0..dev_count {
                let [nb, mb, mk, nk] = unravel::<4>(j % (n1 * m1 * m0 * c0), &tail);
                let real = mb * m0 + mk < m && nb * c0 + nk < n;
                let want: &[u8] = if real { &src[j * elem..][..elem] } else { &[0; 16][..elem] };
                prop_assert_eq!(&fwd[j * elem..][..elem], want);
            }
        }
    }
}
