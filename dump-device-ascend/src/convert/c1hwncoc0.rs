//! `C1HWNCoC0` ↔ `NCHW`: channels in blocks of C0, each channel on the diagonal of a
//! `Co × C0` block (Co = C0), so the device tensor holds C0 times the host's elements.
//!
//! For an NCHW host shape `(N, C, H, W)` the device shape is `(C1, H, W, N, Co, C0)` with
//! C1 = ⌈C / C0⌉ and Co = C0. Host element `(n, c, h, w)` is at
//! `((((c1·H + h)·W + w)·N + n)·Co + co)·C0 + c0` with c1 = c / C0, c0 = c mod C0 and
//! co = c0: the diagonal of the `(h, w, n)` block. Every other element (`co ≠ c0`, and the
//! diagonal of the channels `c ≥ C` of the last block) is padding: zero on the way in, and
//! never read on the way out, whatever it holds.
//!
//! Source: MindSpore's `mindspore/ccsrc/common/trans.cc` (`NchwToC1hwncoc0` and
//! `C1hwncoc0ToNchw`), read for the layout only. MindSpore takes C0 from the dtype's cube
//! size (16 for float16 and float32); here C0 and Co come from the device shape, which must
//! have Co = C0 ([`Error::DiagonalBlock`] otherwise). msaccucmp has no converter for this
//! format (spec `cann-dump.md` §6).
//!
//! ```
//! use dump_device_ascend::convert::c1hwncoc0::{c1hwncoc0_shape, c1hwncoc0_to_nchw};
//!
//! // int8 NCHW (2, 3, 1, 1) with C0 = 4: two 4 × 4 blocks, (n = 0) then (n = 1), each with
//! // its three channels on the diagonal; 9 marks padding, which is never read.
//! assert_eq!(c1hwncoc0_shape([2, 3, 1, 1], 4)?, [1, 1, 1, 2, 4, 4]);
//! #[rustfmt::skip]
//! let device = [
//!     1, 9, 9, 9,  9, 2, 9, 9,  9, 9, 3, 9,  9, 9, 9, 9,
//!     4, 9, 9, 9,  9, 5, 9, 9,  9, 9, 6, 9,  9, 9, 9, 9u8,
//! ];
//! let mut nchw = [0u8; 6];
//! assert_eq!(c1hwncoc0_to_nchw(&device, 1, [2, 3, 1, 1], 4, &mut nchw)?, 6);
//! assert_eq!(nchw, [1, 2, 3, 4, 5, 6]);
//! # Ok::<(), dump_device_ascend::Error>(())
//! ```

use super::transpose::by_elem_size;
use super::{blocks, bytes_of, check_elem, prepare};
use crate::Error;

/// The C1HWNCoC0 shape `(C1, H, W, N, Co, C0)` of an NCHW shape, with Co = C0.
pub fn c1hwncoc0_shape([n, c, h, w]: [usize; 4], c0: usize) -> Result<[usize; 6], Error> {
    if c0 == 0 {
        return Err(Error::ZeroBlock { block: "C0" });
    }
    Ok([blocks(c, c0), h, w, n, c0, c0])
}

/// Converts C1HWNCoC0 data to NCHW. `nchw` is the host shape; `src` holds the elements of
/// [`c1hwncoc0_shape`]`(nchw, c0)`. Only the diagonal of each `Co × C0` block is read.
/// Returns the bytes written to `dst`.
pub fn c1hwncoc0_to_nchw(
    src: &[u8],
    elem: usize,
    nchw: [usize; 4],
    c0: usize,
    dst: &mut [u8],
) -> Result<usize, Error> {
    run(src, elem, nchw, c0, dst, true)
}

/// Converts NCHW data to C1HWNCoC0, zero-filling everything off the diagonal and the channel
/// padding of the last block. Returns the bytes written (the whole device tensor).
pub fn nchw_to_c1hwncoc0(
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
    to_host: bool,
) -> Result<usize, Error> {
    check_elem(elem)?;
    let dev = c1hwncoc0_shape(nchw, c0)?;
    let host_len = bytes_of(&nchw, elem)?;
    let dev_len = bytes_of(&dev, elem)?;
    let written = prepare(src, dst, host_len, dev_len, to_host)?;
    let [n, c, h, w] = nchw;
    // Both lengths fit in usize, so these products do too once the tensor is non-empty; an
    // empty tensor has nothing to move.
    if host_len == 0 {
        return Ok(written);
    }
    by_elem_size!(elem, diagonal(src, dst, [n, c, h * w], c0, to_host));
    Ok(written)
}

/// Walks the device tensor in its own order, `(c1, hw, n)` blocks of `C0 × C0`, and moves the
/// `valid` diagonal elements of each: lane `k` of block `(c1, p, n)` is at `k·(C0 + 1)` in the
/// block and is host element `((n·C + c1·C0 + k)·HW + p)`.
fn diagonal<const N: usize>(
    src: &[u8],
    dst: &mut [u8],
    [n, c, hw]: [usize; 3],
    c0: usize,
    to_host: bool,
) {
    let (s, _) = src.as_chunks::<N>();
    let (t, _) = dst.as_chunks_mut::<N>();
    let block = c0 * c0;
    for cb in 0..c.div_ceil(c0) {
        let valid = c0.min(c - cb * c0);
        for p in 0..hw {
            for ni in 0..n {
                let dev = ((cb * hw + p) * n + ni) * block;
                let host = (ni * c + cb * c0) * hw + p;
                for k in 0..valid {
                    let (d, h) = (dev + k * (c0 + 1), host + k * hw);
                    if to_host {
                        t[h] = s[d];
                    } else {
                        t[d] = s[h];
                    }
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
    fn one_block_by_hand() {
        // N=1, C=3, H=W=1, C0=4: one 4 × 4 block, channels on its diagonal, lane 3 padding.
        #[rustfmt::skip]
        let dev = [
            1u8, 9, 9, 9,
            9, 2, 9, 9,
            9, 9, 3, 9,
            9, 9, 9, 9,
        ];
        let mut out = [0u8; 3];
        assert_eq!(c1hwncoc0_to_nchw(&dev, 1, [1, 3, 1, 1], 4, &mut out), Ok(3));
        assert_eq!(out, [1, 2, 3]);
        let mut back = [0xFFu8; 16];
        assert_eq!(
            nchw_to_c1hwncoc0(&out, 1, [1, 3, 1, 1], 4, &mut back),
            Ok(16)
        );
        #[rustfmt::skip]
        let want = [
            1u8, 0, 0, 0,
            0, 2, 0, 0,
            0, 0, 3, 0,
            0, 0, 0, 0,
        ];
        assert_eq!(back, want);
    }

    #[test]
    fn n_sits_inside_h_and_w() {
        // N=2, C=2, H=1, W=2, C0=2: blocks ordered (w, n); host (n, c, w).
        let host = [10u8, 11, 20, 21, 30, 31, 40, 41];
        let mut dev = [0xFFu8; 16];
        assert_eq!(
            nchw_to_c1hwncoc0(&host, 1, [2, 2, 1, 2], 2, &mut dev),
            Ok(16)
        );
        // (w=0, n=0): c0 = 10, c1 = 20; (w=0, n=1): 30, 40; (w=1, n=0): 11, 21; (w=1, n=1): 31, 41.
        assert_eq!(
            dev,
            [10, 0, 0, 20, 30, 0, 0, 40, 11, 0, 0, 21, 31, 0, 0, 41]
        );
        let mut out = [0u8; 8];
        assert_eq!(c1hwncoc0_to_nchw(&dev, 1, [2, 2, 1, 2], 2, &mut out), Ok(8));
        assert_eq!(out, host);
    }

    /// Off the diagonal and past C is padding: whatever a device tensor holds there (a
    /// corrupted or uninitialised value, NaN bits) never reaches the host tensor.
    #[test]
    fn corrupted_padding_is_ignored() {
        let host = [2usize, 5, 3, 2];
        let c0 = 4;
        let src = elems(60, 2);
        let dshape = c1hwncoc0_shape(host, c0).unwrap();
        let count: usize = dshape.iter().product();
        let mut dev = vec![0u8; count * 2];
        nchw_to_c1hwncoc0(&src, 2, host, c0, &mut dev).unwrap();
        for j in 0..count {
            let [c1, _, _, _, co, k] = unravel::<6>(j, &dshape);
            if co != k || c1 * c0 + k >= host[1] {
                // f16 NaN, 0x7E01.
                dev[2 * j..2 * j + 2].copy_from_slice(&[0x01, 0x7E]);
            }
        }
        let mut out = vec![0u8; 120];
        assert_eq!(c1hwncoc0_to_nchw(&dev, 2, host, c0, &mut out), Ok(120));
        assert_eq!(out, src);
    }

    #[test]
    fn shapes_and_bad_lengths() {
        assert_eq!(c1hwncoc0_shape([3, 17, 2, 5], 16), Ok([2, 2, 5, 3, 16, 16]));
        assert_eq!(
            c1hwncoc0_shape([1, 1, 1, 1], 0),
            Err(Error::ZeroBlock { block: "C0" })
        );
        let mut dst = [0u8; 16];
        assert_eq!(
            c1hwncoc0_to_nchw(&[0; 15], 1, [1, 3, 1, 1], 4, &mut dst),
            Err(Error::LengthMismatch {
                expected: 16,
                actual: 15
            })
        );
        assert_eq!(
            nchw_to_c1hwncoc0(&[0; 3], 1, [1, 3, 1, 1], 4, &mut dst[..15]),
            Err(Error::BufferTooSmall {
                needed: 16,
                available: 15
            })
        );
        assert_eq!(
            c1hwncoc0_to_nchw(&[0; 48], 3, [1, 3, 1, 1], 4, &mut dst),
            Err(Error::ElementSize(3))
        );
        // Empty tensors with huge other axes: nothing moved or an overflow, never a panic.
        let big = 1usize << 40;
        for host in [[0, 3, big, big], [big, 0, big, 1], [3, big, 0, 2]] {
            let r = c1hwncoc0_to_nchw(&[], 2, host, 16, &mut []);
            assert!(matches!(r, Ok(0) | Err(Error::Overflow)), "{host:?}: {r:?}");
        }
    }

    proptest! {
        #[test]
        fn matches_index_math_and_round_trips(
            n in 0usize..4, c in 0usize..36, h in 0usize..4, w in 0usize..4,
            c0 in prop::sample::select(vec![1usize, 4, 16, 32]),
            elem in prop::sample::select(vec![1usize, 2, 4, 8, 16]),
        ) {
            let host = [n, c, h, w];
            let dev = c1hwncoc0_shape(host, c0)?;
            let host_count: usize = host.iter().product();
            let dev_count: usize = dev.iter().product();
            let src = elems(dev_count, elem);
            let mut out = vec![0u8; host_count * elem];
            prop_assert_eq!(c1hwncoc0_to_nchw(&src, elem, host, c0, &mut out)?, host_count * elem);
            for i in 0..host_count {
                let [ni, ci, hi, wi] = unravel::<4>(i, &host);
                let (c1, k) = (ci / c0, ci % c0);
                let s = (((((c1 * h + hi) * w + wi) * n + ni) * c0 + k) * c0) + k;
                prop_assert_eq!(&out[i * elem..][..elem], &src[s * elem..][..elem]);
            }
            let mut fwd = vec![0xAAu8; dev_count * elem];
            prop_assert_eq!(nchw_to_c1hwncoc0(&out, elem, host, c0, &mut fwd)?, dev_count * elem);
            for j in 0..dev_count {
                let [c1, _, _, _, co, k] = unravel::<6>(j, &dev);
                let real = co == k && c1 * c0 + k < c;
                let want: &[u8] = if real { &src[j * elem..][..elem] } else { &[0; 16][..elem] };
                prop_assert_eq!(&fwd[j * elem..][..elem], want);
            }
        }
    }
}
