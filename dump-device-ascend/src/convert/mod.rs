//! Device-format conversions, allocation-free into caller buffers.
//!
//! Every conversion works on raw little-endian element bytes and is generic over the element
//! size (`elem`: 1, 2, 4, 8 or 16 bytes, the sizes of every whole-byte
//! [`DType`](dump_core::DType)), so one routine
//! serves all dtypes. Host shapes are row-major (C order). Converting *to* the host layout
//! drops the padding of the last C0 / N0 / M0 block (and C1HWNCoC0's off-diagonal elements); converting *from* it (the forward
//! direction, which tests and simulators use to make device data) writes zeros there.
//!
//! | device format | host layout | module |
//! |---|---|---|
//! | `NHWC` | `NCHW` | [`nhwc`] |
//! | `NC1HWC0` | `NCHW` | [`nc1hwc0`] |
//! | `FRACTAL_Z` | `NCHW` (weights: N = out channels, C = in channels) | [`fractal_z`] |
//! | `FRACTAL_NZ` | `(…, M, N)` | [`fractal_nz`] |
//! | `NC1HWC0_C04` | `NCHW` | [`nc1hwc0`] with C0 = 4 |
//! | `NDC1HWC0` | `NCDHW` | [`ndc1hwc0`] |
//! | `FRACTAL_Z_3D` | `NCDHW` (3-D weights) | [`fractal_z_3d`] |
//! | `C1HWNCoC0` | `NCHW` (each channel on the diagonal of a `C0 × C0` block) | [`c1hwncoc0`] |
//!
//! Each function checks the source length against the shape (exactly) and the destination
//! length (at least), and returns the number of bytes written. Shape products that overflow
//! `usize` give [`Error::Overflow`]; nothing panics.
//!
//! [`to_host()`](crate::to_host()) picks the right conversion for the Dumper from a device format,
//! a device shape and a host shape.

pub mod c1hwncoc0;
pub mod fractal_nz;
pub mod fractal_z;
pub mod fractal_z_3d;
pub mod nc1hwc0;
pub mod ndc1hwc0;
pub mod nhwc;
mod shape;
#[cfg(test)]
pub(crate) mod testutil;
mod transpose;

pub use shape::{MAX_RANK, Shape};

use crate::Error;

/// Product of `dims` times `elem`, or [`Error::Overflow`].
pub(crate) fn bytes_of(dims: &[usize], elem: usize) -> Result<usize, Error> {
    dims.iter()
        .try_fold(elem, |acc, &d| acc.checked_mul(d))
        .ok_or(Error::Overflow)
}

/// Checks the element size: 1, 2, 4, 8 or 16 bytes.
pub(crate) fn check_elem(elem: usize) -> Result<(), Error> {
    if !matches!(elem, 1 | 2 | 4 | 8 | 16) {
        return Err(Error::ElementSize(elem));
    }
    Ok(())
}

/// Checks `src` is exactly `expected` bytes and `dst` at least `needed`.
pub(crate) fn check_bufs(
    src: &[u8],
    expected: usize,
    dst: &[u8],
    needed: usize,
) -> Result<(), Error> {
    if src.len() != expected {
        return Err(Error::LengthMismatch {
            expected,
            actual: src.len(),
        });
    }
    if dst.len() < needed {
        return Err(Error::BufferTooSmall {
            needed,
            available: dst.len(),
        });
    }
    Ok(())
}

/// The buffer checks every conversion between a host tensor of `host_len` bytes and its
/// device layout of `dev_len` bytes shares: `src` exactly the side read, `dst` at least the
/// side written, and the device side zeroed first when it is written (its padding). Returns
/// the bytes the conversion writes.
pub(crate) fn prepare(
    src: &[u8],
    dst: &mut [u8],
    host_len: usize,
    dev_len: usize,
    to_host: bool,
) -> Result<usize, Error> {
    if to_host {
        check_bufs(src, dev_len, dst, host_len)?;
        Ok(host_len)
    } else {
        check_bufs(src, host_len, dst, dev_len)?;
        dst[..dev_len].fill(0);
        Ok(dev_len)
    }
}

/// `ceil(a / b)` for `b > 0`.
#[inline]
pub(crate) const fn blocks(a: usize, b: usize) -> usize {
    a.div_ceil(b)
}
