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

/// `dst(j, i) = src(i, j)` for `i < rows`, `j < cols`, tile by tile so that both sides stay in
/// cache whatever the strides.
#[inline]
pub(crate) fn transpose<T: Copy>(
    src: &[T],
    s: Mat,
    rows: usize,
    cols: usize,
    dst: &mut [T],
    d: Mat,
) {
    for i0 in (0..rows).step_by(TILE) {
        let i1 = (i0 + TILE).min(rows);
        for j0 in (0..cols).step_by(TILE) {
            let j1 = (j0 + TILE).min(cols);
            for j in j0..j1 {
                let drow = d.off + j * d.stride;
                for i in i0..i1 {
                    dst[drow + i] = src[s.off + i * s.stride + j];
                }
            }
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

    #[test]
    fn strided_transpose() {
        // A 3 × 20 block (row stride 21) into a 20 × 3 block (row stride 4).
        let src: Vec<u32> = (0..3 * 21 + 5).collect();
        let mut dst = vec![u32::MAX; 2 + 20 * 4];
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
            // Column 3 of each destination row is untouched.
        }
        assert!((0..20).all(|j| dst[2 + j * 4 + 3] == u32::MAX));
    }
}
