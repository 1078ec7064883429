//! `NDC1HWC0` ↔ `NCDHW`: [`nc1hwc0`](super::nc1hwc0) with a depth axis.
//!
//! Device shape `(N, D, C1, H, W, C0)` (C1 = ⌈C / C0⌉, the last block padded); element
//! `(n, c, d, h, w)` of the NCDHW host tensor is at
//! `((((n·D + d)·C1 + c / C0)·H + h)·W + w)·C0 + c mod C0`. msaccucmp converts it to NCDHW by
//! the transpose `(0, 2, 5, 1, 3, 4)` and a slice of C (spec `cann-dump.md` §6); CANN's
//! `aclFormat` documentation: "6-D, NC1HWC0 with an additional depth (D) dimension".

use super::transpose::{Mat, by_elem_size, transpose};
use super::{blocks, bytes_of, check_elem, prepare};
use crate::Error;

/// The NDC1HWC0 shape `(N, D, C1, H, W, C0)` of an NCDHW shape.
pub fn ndc1hwc0_shape([n, c, d, h, w]: [usize; 5], c0: usize) -> Result<[usize; 6], Error> {
    if c0 == 0 {
        return Err(Error::ZeroBlock { block: "C0" });
    }
    Ok([n, d, blocks(c, c0), h, w, c0])
}

/// Converts NDC1HWC0 data to NCDHW. `ncdhw` is the host shape; `src` holds the elements of
/// [`ndc1hwc0_shape`]`(ncdhw, c0)`. Returns the bytes written to `dst`.
pub fn ndc1hwc0_to_ncdhw(
    src: &[u8],
    elem: usize,
    ncdhw: [usize; 5],
    c0: usize,
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, ncdhw, c0, dst, true)
}

/// Converts NCDHW data to NDC1HWC0, zero-filling the channel padding. Returns the bytes
/// written (the whole device tensor).
pub fn ncdhw_to_ndc1hwc0(
    src: &[u8],
    elem: usize,
    ncdhw: [usize; 5],
    c0: usize,
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, ncdhw, c0, dst, false)
}

fn run(
    src: &[u8],
    elem: usize,
    ncdhw: [usize; 5],
    c0: usize,
    dst: &mut [u8],
    to_host: bool,
) -> Result<usize, Error> {
    check_elem(elem)?;
    let dev = ndc1hwc0_shape(ncdhw, c0)?;
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
    by_elem_size!(
        elem,
        blocks_nd(src, dst, [n, c, d, dev[2], c0], hw, to_host)
    );
    Ok(written)
}

/// Per `(n, d, c1)` block: the device block is `hw` rows of C0 lanes; on the host side its
/// `valid` channels are planes of `hw` elements, `D·hw` apart (one depth slice of each).
fn blocks_nd<const N: usize>(
    src: &[u8],
    dst: &mut [u8],
    [n, c, d, c1, c0]: [usize; 5],
    hw: usize,
    to_host: bool,
) {
    let (s, _) = src.as_chunks::<N>();
    let (t, _) = dst.as_chunks_mut::<N>();
    for ni in 0..n {
        for di in 0..d {
            for b in 0..c1 {
                let valid = c0.min(c - b * c0);
                let dev = Mat {
                    off: ((ni * d + di) * c1 + b) * hw * c0,
                    stride: c0,
                };
                let host = Mat {
                    off: ((ni * c + b * c0) * d + di) * hw,
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
    fn padding_is_dropped_and_depth_slices_interleave() {
        // N=1, C=3, D=2, H=W=1, C0=4: device [d0: c0 c1 c2 pad][d1: c0 c1 c2 pad].
        let src = [1u8, 2, 3, 0xEE, 4, 5, 6, 0xEE];
        let mut dst = [0u8; 6];
        assert_eq!(
            ndc1hwc0_to_ncdhw(&src, 1, [1, 3, 2, 1, 1], 4, &mut dst),
            Ok(6)
        );
        // NCDHW: channel-major, depth inside.
        assert_eq!(dst, [1, 4, 2, 5, 3, 6]);
        let mut back = [0xFFu8; 8];
        assert_eq!(
            ncdhw_to_ndc1hwc0(&dst, 1, [1, 3, 2, 1, 1], 4, &mut back),
            Ok(8)
        );
        assert_eq!(back, [1, 2, 3, 0, 4, 5, 6, 0]);
    }

    #[test]
    fn shapes_and_bad_lengths() {
        assert_eq!(
            ndc1hwc0_shape([2, 33, 3, 4, 5], 16),
            Ok([2, 3, 3, 4, 5, 16])
        );
        assert_eq!(
            ndc1hwc0_shape([1, 1, 1, 1, 1], 0),
            Err(Error::ZeroBlock { block: "C0" })
        );
        let mut dst = [0u8; 8];
        assert_eq!(
            ndc1hwc0_to_ncdhw(&[0; 7], 1, [1, 3, 2, 1, 1], 4, &mut dst),
            Err(Error::LengthMismatch {
                expected: 8,
                actual: 7
            })
        );
    }

    proptest! {
        #[test]
        fn matches_index_math_and_round_trips(
            n in 0usize..3, c in 0usize..36, d in 0usize..4, h in 0usize..4, w in 0usize..4,
            c0 in prop::sample::select(vec![1usize, 4, 16, 32]),
            elem in prop::sample::select(vec![1usize, 2, 4, 16]),
        ) {
            let host = [n, c, d, h, w];
            let dev = ndc1hwc0_shape(host, c0)?;
            let host_count: usize = host.iter().product();
            let dev_count: usize = dev.iter().product();
            let src = elems(dev_count, elem);
            let mut out = vec![0u8; host_count * elem];
            prop_assert_eq!(ndc1hwc0_to_ncdhw(&src, elem, host, c0, &mut out)?, host_count * elem);
            for i in 0..host_count {
                let [ni, ci, di, hi, wi] = unravel::<5>(i, &host);
                let s = ((((ni * d + di) * dev[2] + ci / c0) * h + hi) * w + wi) * c0 + ci % c0;
                prop_assert_eq!(&out[i * elem..][..elem], &src[s * elem..][..elem]);
            }
            let mut fwd = vec![0xAAu8; dev_count * elem];
            prop_assert_eq!(ncdhw_to_ndc1hwc0(&out, elem, host, c0, &mut fwd)?, dev_count * elem);
            for j in 0..dev_count {
                let [_, _, b, _, _, k] = unravel::<6>(j, &dev);
                let want: &[u8] = if b * c0 + k < c { &src[j * elem..][..elem] } else { &[0; 16][..elem] };
                prop_assert_eq!(&fwd[j * elem..][..elem], want);
            }
        }
    }
}
