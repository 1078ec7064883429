//! `NC1HWC0` ("5HD") ↔ `NCHW`.
//!
//! The channel axis is split into C1 = ⌈C / C0⌉ blocks of C0 channels that move innermost:
//! device shape `(N, C1, H, W, C0)`, element `(n, c, h, w)` at
//! `(((n·C1 + c / C0)·H + h)·W + w)·C0 + c mod C0`. When C is not a multiple of C0 the last
//! block is padded (CANN `aclFormat`: "the last data segment is padded to C0"); the padding is
//! dropped on the way to NCHW and written as zeros on the way back.

use super::transpose::{Mat, Tiles, by_elem_size, transpose_in};
use super::{blocks, bytes_of, check_elem, prepare};
use crate::Error;

/// The NC1HWC0 shape `(N, C1, H, W, C0)` of an NCHW shape.
pub fn nc1hwc0_shape([n, c, h, w]: [usize; 4], c0: usize) -> Result<[usize; 5], Error> {
    if c0 == 0 {
        return Err(Error::ZeroBlock { block: "C0" });
    }
    Ok([n, blocks(c, c0), h, w, c0])
}

/// Converts NC1HWC0 data to NCHW. `nchw` is the host shape; `src` holds the elements of
/// [`nc1hwc0_shape`]`(nchw, c0)`. Returns the bytes written to `dst` (`N·C·H·W·elem`).
pub fn nc1hwc0_to_nchw(
    src: &[u8],
    elem: usize,
    nchw: [usize; 4],
    c0: usize,
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, nchw, c0, dst, true)
}

/// Converts NCHW data to NC1HWC0, zero-filling the channel padding. Returns the bytes written
/// (the whole device tensor).
pub fn nchw_to_nc1hwc0(
    src: &[u8],
    elem: usize,
    nchw: [usize; 4],
    c0: usize,
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, nchw, c0, dst, false)
}

fn run(
    src: &[u8],
    elem: usize,
    nchw: [usize; 4],
    c0: usize,
    dst: &mut [u8],
    to_nchw: bool,
) -> Result<usize, Error> {
    check_elem(elem)?;
    let dev = nc1hwc0_shape(nchw, c0)?;
    let host_len = bytes_of(&nchw, elem)?;
    let dev_len = bytes_of(&dev, elem)?;
    let [n, c, h, w] = nchw;
    let c1 = dev[1];
    let hw = h.checked_mul(w).ok_or(Error::Overflow)?;
    let written = prepare(src, dst, host_len, dev_len, to_nchw)?;
    // An empty tensor has nothing to move (the device side's padding is zeroed by `prepare`),
    // however large its other dimensions: no loop over them.
    if host_len == 0 {
        return Ok(written);
    }
    by_elem_size!(elem, blocks_n(src, dst, [n, c, c1, c0], hw, to_nchw));
    Ok(written)
}

/// Per `(n, c1)` block: the device block is `hw` rows of C0 lanes, the host side `valid`
/// planes of `hw` elements; one is the transpose of the other.
fn blocks_n<const N: usize>(
    src: &[u8],
    dst: &mut [u8],
    [n, c, c1, c0]: [usize; 4],
    hw: usize,
    to_nchw: bool,
) {
    let (s, _) = src.as_chunks::<N>();
    let (d, _) = dst.as_chunks_mut::<N>();
    let mut tiles = Tiles::new();
    for ni in 0..n {
        for b in 0..c1 {
            let valid = c0.min(c - b * c0);
            let dev = Mat {
                off: (ni * c1 + b) * hw * c0,
                stride: c0,
            };
            let host = Mat {
                off: (ni * c + b * c0) * hw,
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
    fn padding_is_dropped() {
        // N=1, C=3, H=W=1, C0=4: device [c0 c1 c2 pad].
        let src = [7u8, 8, 9, 0xEE];
        let mut dst = [0u8; 3];
        assert_eq!(nc1hwc0_to_nchw(&src, 1, [1, 3, 1, 1], 4, &mut dst), Ok(3));
        assert_eq!(dst, [7, 8, 9]);
        let mut back = [0xFFu8; 4];
        assert_eq!(nchw_to_nc1hwc0(&dst, 1, [1, 3, 1, 1], 4, &mut back), Ok(4));
        assert_eq!(back, [7, 8, 9, 0]);
    }

    /// spec §10 (test_dump_format): an fp32 (1,3,3,3) Conv2D input dumped without trans_flag
    /// has NC1HWC0 shape (1,1,3,3,16).
    #[test]
    fn mindspore_shape_example() {
        assert_eq!(nc1hwc0_shape([1, 3, 3, 3], 16), Ok([1, 1, 3, 3, 16]));
        assert_eq!(nc1hwc0_shape([2, 33, 4, 5], 16), Ok([2, 3, 4, 5, 16]));
        assert_eq!(
            nc1hwc0_shape([1, 1, 1, 1], 0),
            Err(Error::ZeroBlock { block: "C0" })
        );
    }

    #[test]
    fn bad_lengths() {
        let mut dst = [0u8; 8];
        assert_eq!(
            nc1hwc0_to_nchw(&[0; 3], 1, [1, 3, 1, 1], 4, &mut dst),
            Err(Error::LengthMismatch {
                expected: 4,
                actual: 3
            })
        );
        assert_eq!(
            nc1hwc0_to_nchw(&[0; 32], 2, [1, 3, 1, 1], 16, &mut dst[..5]),
            Err(Error::BufferTooSmall {
                needed: 6,
                available: 5
            })
        );
    }

    proptest! {
        #[test]
        fn matches_index_math_and_round_trips(
            n in 0usize..3, c in 0usize..40, h in 0usize..4, w in 0usize..4,
            c0 in prop::sample::select(vec![1usize, 4, 8, 16, 32]),
            elem in prop::sample::select(vec![1usize, 2, 4, 8, 16]),
        ) {
            let host = [n, c, h, w];
            let dev = nc1hwc0_shape(host, c0)?;
            let host_count = n * c * h * w;
            let dev_count: usize = dev.iter().product();
            let src = elems(dev_count, elem);
            let mut out = vec![0u8; host_count * elem];
            prop_assert_eq!(nc1hwc0_to_nchw(&src, elem, host, c0, &mut out)?, host_count * elem);
            for i in 0..host_count {
                let [ni, ci, hi, wi] = unravel::<4>(i, &host);
                let s = (((ni * dev[1] + ci / c0) * h + hi) * w + wi) * c0 + ci % c0;
                prop_assert_eq!(&out[i * elem..][..elem], &src[s * elem..][..elem]);
            }
            // Forward again: equal to the source except the padding, which is zero.
            let mut fwd = vec![0xAAu8; dev_count * elem];
            prop_assert_eq!(nchw_to_nc1hwc0(&out, elem, host, c0, &mut fwd)?, dev_count * elem);
            for j in 0..dev_count {
                let [_, b, _, _, k] = unravel::<5>(j, &dev);
                let want: &[u8] = if b * c0 + k < c { &src[j * elem..][..elem] } else { &[0; 16][..elem] };
                prop_assert_eq!(&fwd[j * elem..][..elem], want);
            }
        }
    }
}
