//! `NHWC` ↔ `NCHW`: moving the channel axis.
//!
//! Element `(n, c, h, w)` is at `((n·H + h)·W + w)·C + c` in NHWC and at
//! `((n·C + c)·H + h)·W + w` in NCHW.

use super::transpose::{Mat, by_elem_size, transpose};
use super::{bytes_of, check_bufs, check_elem};
use crate::Error;

/// Converts NHWC data to NCHW. `nchw` is the host (NCHW) shape `[N, C, H, W]`; `src` holds
/// `N·H·W·C` elements of `elem` bytes. Returns the bytes written to `dst`.
pub fn nhwc_to_nchw(
    src: &[u8],
    elem: usize,
    nchw: [usize; 4],
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, nchw, dst, true)
}

/// Converts NCHW data to NHWC (the inverse of [`nhwc_to_nchw`]). Returns the bytes written.
pub fn nchw_to_nhwc(
    src: &[u8],
    elem: usize,
    nchw: [usize; 4],
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, nchw, dst, false)
}

fn run(
    src: &[u8],
    elem: usize,
    [n, c, h, w]: [usize; 4],
    dst: &mut [u8],
    to_nchw: bool,
) -> Result<usize, Error> {
    check_elem(elem)?;
    let len = bytes_of(&[n, c, h, w], elem)?;
    check_bufs(src, len, dst, len)?;
    if len == 0 {
        return Ok(0); // nothing to move, however large the other dimensions
    }
    let hw = h.checked_mul(w).ok_or(Error::Overflow)?;
    by_elem_size!(elem, planes_n(src, dst, [n, c], hw, to_nchw));
    Ok(len)
}

/// Per image: NHWC is an `hw × c` matrix, NCHW its transpose.
fn planes_n<const N: usize>(
    src: &[u8],
    dst: &mut [u8],
    [n, c]: [usize; 2],
    hw: usize,
    to_nchw: bool,
) {
    let (s, _) = src.as_chunks::<N>();
    let (d, _) = dst.as_chunks_mut::<N>();
    for ni in 0..n {
        let off = ni * c * hw;
        let nhwc = Mat { off, stride: c };
        let nchw = Mat { off, stride: hw };
        if to_nchw {
            transpose(s, nhwc, hw, c, d, nchw);
        } else {
            transpose(s, nchw, c, hw, d, nhwc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::testutil::{elems, unravel};
    use proptest::prelude::*;

    #[test]
    fn small_example() {
        // N=1, C=2, H=1, W=3: NHWC [a0 b0 a1 b1 a2 b2] -> NCHW [a0 a1 a2 b0 b1 b2].
        let src = [0u8, 10, 1, 11, 2, 12];
        let mut dst = [0u8; 6];
        assert_eq!(nhwc_to_nchw(&src, 1, [1, 2, 1, 3], &mut dst), Ok(6));
        assert_eq!(dst, [0, 1, 2, 10, 11, 12]);
    }

    #[test]
    fn bad_lengths() {
        let mut dst = [0u8; 4];
        assert_eq!(
            nhwc_to_nchw(&[0; 5], 1, [1, 1, 2, 3], &mut dst),
            Err(Error::LengthMismatch {
                expected: 6,
                actual: 5
            })
        );
        assert_eq!(
            nhwc_to_nchw(&[0; 6], 1, [1, 1, 2, 3], &mut dst),
            Err(Error::BufferTooSmall {
                needed: 6,
                available: 4
            })
        );
        assert_eq!(
            nhwc_to_nchw(&[], 0, [1, 1, 1, 1], &mut dst),
            Err(Error::ElementSize(0))
        );
        assert_eq!(
            nhwc_to_nchw(&[], 4, [usize::MAX, 2, 1, 1], &mut dst),
            Err(Error::Overflow)
        );
    }

    proptest! {
        #[test]
        fn matches_index_math_and_round_trips(
            n in 0usize..4, c in 0usize..20, h in 0usize..5, w in 0usize..5,
            elem in prop::sample::select(vec![1usize, 2, 4, 8, 16]),
        ) {
            let shape = [n, c, h, w];
            let count = n * c * h * w;
            let src = elems(count, elem);
            let mut nchw = vec![0xAAu8; count * elem];
            prop_assert_eq!(nhwc_to_nchw(&src, elem, shape, &mut nchw)?, count * elem);
            for i in 0..count {
                let [ni, ci, hi, wi] = unravel::<4>(i, &shape);
                let s = ((ni * h + hi) * w + wi) * c + ci;
                prop_assert_eq!(&nchw[i * elem..][..elem], &src[s * elem..][..elem]);
            }
            let mut back = vec![0u8; count * elem];
            nchw_to_nhwc(&nchw, elem, shape, &mut back)?;
            prop_assert_eq!(back, src);
        }
    }
}
