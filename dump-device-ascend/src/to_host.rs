//! The Dumper's entry point for device-format tensors: `trans_flag` semantics (spec §4.2).
//!
//! - `trans_flag: true` → [`to_host`]: the data is converted to the host shape's row-major
//!   layout and the file name says `DefaultFormat`.
//! - `trans_flag: false` → [`keep_device`]: the device bytes and device shape are written as
//!   they are and the file name carries the device format (`NC1HWC0`, `FRACTAL_Z`, …).
//!
//! [`dump_view`] does either from the flag. How the Dumper is meant to use it, for each
//! tensor fetched from an Ascend device:
//!
//! ```
//! use dump_core::DType;
//! use dump_device_ascend::{DeviceTensor, Format, dump_view};
//!
//! // A (1, 3, 1, 1) f32 tensor held as NC1HWC0 (1, 1, 1, 1, 16) on the device.
//! let mut device = vec![0u8; 16 * 4];
//! for (c, v) in [1.0f32, 2.0, 3.0].iter().enumerate() {
//!     device[c * 4..c * 4 + 4].copy_from_slice(&v.to_le_bytes());
//! }
//! let t = DeviceTensor {
//!     format: Format::Nc1hwc0,
//!     dtype: DType::Float32,
//!     device_shape: &[1, 1, 1, 1, 16],
//!     host_shape: &[1, 3, 1, 1],
//!     data: &device,
//! };
//! let mut scratch = vec![0u8; t.host_bytes()?];
//! let view = dump_view(true, &t, &mut scratch)?;
//! assert_eq!(view.format_name, "DefaultFormat");
//! assert_eq!(view.shape, &[1, 3, 1, 1]);
//! assert_eq!(view.data.len(), 12);
//! // The Dumper now writes `view.data` with `view.shape` to
//! // `{op_type}.{op_name}.{task}.{stream}.{ts}.{io}.{slot}.{view.format_name}.{dtype}.npy`
//! // and computes host statistics over `view.data`.
//!
//! let mut unused = [0u8; 0];
//! let raw = dump_view(false, &t, &mut unused)?;
//! assert_eq!((raw.format_name, raw.shape), ("NC1HWC0", &[1, 1, 1, 1, 16][..]));
//! # Ok::<(), dump_device_ascend::Error>(())
//! ```

use crate::convert::{
    Shape, bytes_of, c1hwncoc0, c1hwncoc0::c1hwncoc0_shape, fractal_nz,
    fractal_nz::fractal_nz_shape, fractal_z, fractal_z::fractal_z_shape, fractal_z_3d,
    fractal_z_3d::fractal_z_3d_shape, nc1hwc0, nc1hwc0::nc1hwc0_shape, ndc1hwc0,
    ndc1hwc0::ndc1hwc0_shape, nhwc,
};
use crate::{Blocks, Error, Format};
use dump_core::DType;

/// A tensor fetched from the device: its bytes (in host memory), its device format and both
/// shapes, as the framework's kernel info reports them.
#[derive(Clone, Copy, Debug)]
pub struct DeviceTensor<'a> {
    /// The device format.
    pub format: Format,
    /// Element type.
    pub dtype: DType,
    /// The shape of the device layout (e.g. `(N, C1, H, W, C0)` for `NC1HWC0`).
    pub device_shape: &'a [usize],
    /// The host (origin) shape, e.g. NCHW; what the framework shows the user.
    pub host_shape: &'a [usize],
    /// The device bytes, little-endian, exactly the storage of `device_shape`.
    pub data: &'a [u8],
}

/// What the Dumper writes for a tensor: bytes, `.npy` shape and the file name's format field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DumpView<'a> {
    /// The bytes to write (the device bytes, or the converted ones in the caller's buffer).
    pub data: &'a [u8],
    /// The `.npy` shape and the `Shape` column.
    pub shape: &'a [usize],
    /// `DefaultFormat` when converted, otherwise the device format's name.
    pub format_name: &'static str,
}

impl DeviceTensor<'_> {
    /// Bytes [`to_host`] writes: the storage of the host shape.
    pub fn host_bytes(&self) -> Result<usize, Error> {
        let count = bytes_of(self.host_shape, 1)?;
        self.dtype.storage_bytes(count).ok_or(Error::Overflow)
    }
}

/// [`to_host`] when `trans_flag` is true, [`keep_device`] otherwise (`dst` is not touched
/// then, so an empty slice will do).
pub fn dump_view<'a>(
    trans_flag: bool,
    t: &DeviceTensor<'a>,
    dst: &'a mut [u8],
) -> Result<DumpView<'a>, Error> {
    if trans_flag {
        to_host(t, dst)
    } else {
        keep_device(t)
    }
}

/// The device bytes as they are, named by the device format (`trans_flag: false`).
pub fn keep_device<'a>(t: &DeviceTensor<'a>) -> Result<DumpView<'a>, Error> {
    let count = bytes_of(t.device_shape, 1)?;
    let expected = t.dtype.storage_bytes(count).ok_or(Error::Overflow)?;
    if t.data.len() != expected {
        return Err(Error::LengthMismatch {
            expected,
            actual: t.data.len(),
        });
    }
    Ok(DumpView {
        data: t.data,
        shape: t.device_shape,
        format_name: t.format.name(),
    })
}

/// Converts `t` to the row-major layout of its host shape (`trans_flag: true`).
///
/// Host layouts (`DefaultFormat`, `ND`, `NCHW`) need no conversion: the device bytes are
/// returned as they are (after a length check) and `dst` is not touched. Otherwise the result
/// is written to `dst[..t.host_bytes()]`. Block sizes come from the device shape (C0 is its
/// last axis; N0 / M0 the one before), and the device shape must be exactly what the host
/// shape and those blocks imply ([`Error::Dim`] / [`Error::Rank`] name the axis otherwise).
///
/// `NC1HWC0` and `FRACTAL_Z` host shapes of rank below 4 are padded to NCHW as MindSpore does
/// by default: `(C)` → `(1, C, 1, 1)`, `(N, C)` → `(N, C, 1, 1)`, `(C, H, W)` → `(1, C, H, W)`.
pub fn to_host<'a>(t: &DeviceTensor<'a>, dst: &'a mut [u8]) -> Result<DumpView<'a>, Error> {
    if t.format.is_host_layout() {
        let expected = t.host_bytes()?;
        if t.data.len() != expected {
            return Err(Error::LengthMismatch {
                expected,
                actual: t.data.len(),
            });
        }
        return Ok(DumpView {
            data: t.data,
            shape: t.host_shape,
            format_name: Format::Default.name(),
        });
    }
    let elem = t.dtype.size().ok_or(Error::PackedDType(t.dtype))?;
    let dev = t.device_shape;
    let len = match t.format {
        Format::Nhwc => {
            let host = exact4(t.format, t.host_shape)?;
            let [n, c, h, w] = host;
            expect_dims(t.format, &[n, h, w, c], dev)?;
            nhwc::nhwc_to_nchw(t.data, elem, host, dst)?
        }
        Format::Nc1hwc0 | Format::Nc1hwc0C04 => {
            let host = pad4(t.format, t.host_shape)?;
            let c0 = c0_of(t.format, dev)?;
            expect_dims(t.format, &nc1hwc0_shape(host, c0)?, dev)?;
            nc1hwc0::nc1hwc0_to_nchw(t.data, elem, host, c0, dst)?
        }
        Format::Ndc1hwc0 => {
            let host = exact5(t.format, t.host_shape)?;
            let c0 = last_dims::<1>(t.format, dev, 6)?[0];
            expect_dims(t.format, &ndc1hwc0_shape(host, c0)?, dev)?;
            ndc1hwc0::ndc1hwc0_to_ncdhw(t.data, elem, host, c0, dst)?
        }
        Format::FractalZ3d => {
            let host = exact5(t.format, t.host_shape)?;
            let b = check_fractal_z_3d(t.format, host, dev)?;
            fractal_z_3d::fractal_z_3d_to_ncdhw(t.data, elem, host, b, dst)?
        }
        Format::FractalZ => {
            let host = pad4(t.format, t.host_shape)?;
            let [n0, c0] = last_dims::<2>(t.format, dev, 4)?;
            let b = Blocks { c0, cube: n0 };
            expect_dims(t.format, &fractal_z_shape(host, b)?, dev)?;
            fractal_z::fractal_z_to_nchw(t.data, elem, host, b, dst)?
        }
        Format::FractalNz => {
            let batch = t.host_shape.len().saturating_sub(2);
            let [m0, c0] = last_dims::<2>(t.format, dev, batch + 4)?;
            let b = Blocks { c0, cube: m0 };
            let want: Shape = fractal_nz_shape(t.host_shape, b)?;
            expect_dims(t.format, &want, dev)?;
            fractal_nz::fractal_nz_to_nd(t.data, elem, t.host_shape, b, dst)?
        }
        Format::C1hwncoc0 => {
            let host = pad4(t.format, t.host_shape)?;
            let c0 = check_c1hwncoc0(t.format, host, dev)?;
            c1hwncoc0::c1hwncoc0_to_nchw(t.data, elem, host, c0, dst)?
        }
        // The host layouts returned above.
        other => return Err(Error::UnsupportedFormat(other)),
    };
    let dst: &'a [u8] = dst;
    Ok(DumpView {
        data: &dst[..len],
        shape: t.host_shape,
        format_name: Format::Default.name(),
    })
}

/// The last `K` axes of a device shape that must have rank `rank`.
pub(crate) fn last_dims<const K: usize>(
    format: Format,
    dev: &[usize],
    rank: usize,
) -> Result<[usize; K], Error> {
    if dev.len() != rank {
        return Err(rank_err(format, "device", rank, dev.len()));
    }
    let mut out = [0; K];
    out.copy_from_slice(&dev[rank - K..]);
    Ok(out)
}

pub(crate) fn rank_err(
    format: Format,
    shape: &'static str,
    expected: usize,
    actual: usize,
) -> Error {
    Error::Rank {
        format,
        shape,
        expected,
        at_least: false,
        actual,
    }
}

pub(crate) fn exact4(format: Format, host: &[usize]) -> Result<[usize; 4], Error> {
    host.try_into()
        .map_err(|_| rank_err(format, "host", 4, host.len()))
}

pub(crate) fn exact5(format: Format, host: &[usize]) -> Result<[usize; 5], Error> {
    host.try_into()
        .map_err(|_| rank_err(format, "host", 5, host.len()))
}

/// C0 of an `NC1HWC0` / `NC1HWC0_C04` device shape (its last axis, of 5); `NC1HWC0_C04`
/// requires 4.
pub(crate) fn c0_of(format: Format, dev: &[usize]) -> Result<usize, Error> {
    let c0 = last_dims::<1>(format, dev, 5)?[0];
    if format == Format::Nc1hwc0C04 && c0 != 4 {
        return Err(Error::Dim {
            format,
            axis: 4,
            expected: 4,
            actual: c0,
        });
    }
    Ok(c0)
}

/// Checks a `FRACTAL_Z_3D` device shape against its NCDHW host shape and returns its blocks
/// (N0, C0: the last two axes). The device shape is the 4-D `(D·C1·H·W, N1, N0, C0)` or the
/// 7-D `(D, C1, H, W, N1, N0, C0)` CANN also reports (the same bytes).
pub(crate) fn check_fractal_z_3d(
    format: Format,
    host: [usize; 5],
    dev: &[usize],
) -> Result<Blocks, Error> {
    let rank = if dev.len() == 7 { 7 } else { 4 };
    let [n0, c0] = last_dims::<2>(format, dev, rank)?;
    let b = Blocks { c0, cube: n0 };
    let [rows, n1, n0, c0] = fractal_z_3d_shape(host, b)?;
    if rank == 7 {
        let [_, c, d, h, w] = host;
        expect_dims(format, &[d, c.div_ceil(c0), h, w, n1, n0, c0], dev)?;
    } else {
        expect_dims(format, &[rows, n1, n0, c0], dev)?;
    }
    Ok(b)
}

/// Checks a `C1HWNCoC0` device shape `(C1, H, W, N, Co, C0)` against its NCHW host shape and
/// returns C0 (its last axis); Co (axis 4) must equal it.
pub(crate) fn check_c1hwncoc0(
    format: Format,
    host: [usize; 4],
    dev: &[usize],
) -> Result<usize, Error> {
    let [co, c0] = last_dims::<2>(format, dev, 6)?;
    if co != c0 {
        return Err(Error::DiagonalBlock { format, co, c0 });
    }
    expect_dims(format, &c1hwncoc0_shape(host, c0)?, dev)?;
    Ok(c0)
}

pub(crate) fn pad4(format: Format, host: &[usize]) -> Result<[usize; 4], Error> {
    Ok(match *host {
        [] => [1, 1, 1, 1],
        [c] => [1, c, 1, 1],
        [n, c] => [n, c, 1, 1],
        [c, h, w] => [1, c, h, w],
        [n, c, h, w] => [n, c, h, w],
        _ => return Err(rank_err(format, "host", 4, host.len())),
    })
}

pub(crate) fn expect_dims(format: Format, expected: &[usize], dev: &[usize]) -> Result<(), Error> {
    if expected.len() != dev.len() {
        return Err(rank_err(format, "device", expected.len(), dev.len()));
    }
    for (axis, (&e, &a)) in expected.iter().zip(dev).enumerate() {
        if e != a {
            return Err(Error::Dim {
                format,
                axis,
                expected: e,
                actual: a,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::fractal_nz::nd_to_fractal_nz;
    use crate::convert::fractal_z::nchw_to_fractal_z;
    use crate::convert::nc1hwc0::nchw_to_nc1hwc0;
    use crate::convert::nhwc::nchw_to_nhwc;
    use crate::convert::testutil::elems;

    fn tensor<'a>(
        format: Format,
        dtype: DType,
        device_shape: &'a [usize],
        host_shape: &'a [usize],
        data: &'a [u8],
    ) -> DeviceTensor<'a> {
        DeviceTensor {
            format,
            dtype,
            device_shape,
            host_shape,
            data,
        }
    }

    /// Every format round-trips host → device (forward converters) → host through `to_host`.
    #[test]
    fn every_format_back_to_host() {
        let host = [2usize, 5, 3, 2];
        let src = elems(60, 2);
        let b = Blocks::default_for(DType::Float16).unwrap();
        let mut dev = vec![0u8; 8192];
        let cases: [(Format, Shape); 4] = [
            (Format::Nhwc, Shape::new(&[2, 3, 2, 5]).unwrap()),
            (
                Format::Nc1hwc0,
                Shape::new(&nc1hwc0_shape(host, 16).unwrap()).unwrap(),
            ),
            (
                Format::FractalZ,
                Shape::new(&fractal_z_shape(host, b).unwrap()).unwrap(),
            ),
            (Format::FractalNz, fractal_nz_shape(&host, b).unwrap()),
        ];
        for (format, dshape) in cases {
            let n = match format {
                Format::Nhwc => nchw_to_nhwc(&src, 2, host, &mut dev).unwrap(),
                Format::Nc1hwc0 => nchw_to_nc1hwc0(&src, 2, host, 16, &mut dev).unwrap(),
                Format::FractalZ => nchw_to_fractal_z(&src, 2, host, b, &mut dev).unwrap(),
                _ => nd_to_fractal_nz(&src, 2, &host, b, &mut dev).unwrap(),
            };
            let t = tensor(format, DType::Float16, &dshape, &host, &dev[..n]);
            let mut out = vec![0u8; t.host_bytes().unwrap()];
            let v = to_host(&t, &mut out).unwrap();
            assert_eq!(v.format_name, "DefaultFormat", "{format}");
            assert_eq!(v.shape, &host);
            assert_eq!(v.data, &src[..], "{format}");
            let k = keep_device(&t).unwrap();
            assert_eq!(k.format_name, format.name());
            assert_eq!(k.shape, &*dshape);
            assert_eq!(k.data.len(), n);
        }
    }

    #[test]
    fn host_layouts_pass_through() {
        let data = elems(6, 4);
        let t = tensor(Format::Nd, DType::Float32, &[6], &[2, 3], &data);
        let mut none = [0u8; 0];
        let v = dump_view(true, &t, &mut none).unwrap();
        assert_eq!(v.data.as_ptr(), data.as_ptr());
        assert_eq!((v.shape, v.format_name), (&[2, 3][..], "DefaultFormat"));
        // int4 in a host layout is fine (no element access); in a private one it is not.
        let packed = [0u8; 3];
        let t = tensor(Format::Default, DType::Int4, &[6], &[6], &packed);
        assert!(to_host(&t, &mut none).is_ok());
        let t = tensor(
            Format::Nc1hwc0,
            DType::Int4,
            &[1, 1, 1, 1, 6],
            &[6],
            &packed,
        );
        assert_eq!(to_host(&t, &mut none), Err(Error::PackedDType(DType::Int4)));
    }

    #[test]
    fn low_rank_hosts_are_padded() {
        // A bias of 3 channels in NC1HWC0 (1, 1, 1, 1, 16).
        let mut dev = [0u8; 16];
        dev[..3].copy_from_slice(&[4, 5, 6]);
        let t = tensor(Format::Nc1hwc0, DType::Int8, &[1, 1, 1, 1, 16], &[3], &dev);
        let mut out = [0u8; 3];
        let v = to_host(&t, &mut out).unwrap();
        assert_eq!((v.data, v.shape), (&[4u8, 5, 6][..], &[3usize][..]));
    }

    #[test]
    fn shape_errors_name_the_axis() {
        let dev = [0u8; 64];
        let mut out = [0u8; 64];
        // C1 should be 1 for C = 3, C0 = 16.
        let t = tensor(
            Format::Nc1hwc0,
            DType::Int8,
            &[1, 2, 1, 1, 16],
            &[1, 3, 1, 1],
            &dev[..32],
        );
        assert_eq!(
            to_host(&t, &mut out),
            Err(Error::Dim {
                format: Format::Nc1hwc0,
                axis: 1,
                expected: 1,
                actual: 2
            })
        );
        let t = tensor(
            Format::FractalZ,
            DType::Int8,
            &[1, 1, 16],
            &[1, 3, 1, 1],
            &dev[..16],
        );
        assert_eq!(
            to_host(&t, &mut out),
            Err(Error::Rank {
                format: Format::FractalZ,
                shape: "device",
                expected: 4,
                at_least: false,
                actual: 3
            })
        );
        let t = tensor(Format::Nhwc, DType::Int8, &[1, 1, 1, 3], &[3], &dev[..3]);
        assert!(matches!(
            to_host(&t, &mut out),
            Err(Error::Rank { shape: "host", .. })
        ));
        let t = tensor(
            Format::Nc1hwc0,
            DType::Int8,
            &[1, 1, 1, 1, 16],
            &[1, 3, 1, 1],
            &dev[..15],
        );
        assert_eq!(
            to_host(&t, &mut out),
            Err(Error::LengthMismatch {
                expected: 16,
                actual: 15
            })
        );
        let t = tensor(
            Format::Nc1hwc0,
            DType::Int8,
            &[1, 1, 1, 1, 16],
            &[1, 3, 1, 1],
            &dev[..16],
        );
        assert_eq!(
            to_host(&t, &mut out[..2]),
            Err(Error::BufferTooSmall {
                needed: 3,
                available: 2
            })
        );
        let t = tensor(Format::Nd, DType::Int8, &[4], &[4], &dev[..3]);
        assert!(keep_device(&t).is_err());
        assert!(to_host(&t, &mut out).is_err());
    }

    /// `NC1HWC0_C04` is NC1HWC0 with C0 = 4 (another C0 is refused, naming the axis), and
    /// `FRACTAL_Z_3D` converts from its 4-D or its 7-D device shape alike.
    #[test]
    fn c04_and_the_two_spellings_of_fractal_z_3d() {
        use crate::convert::fractal_z_3d::ncdhw_to_fractal_z_3d;
        let src = elems(2 * 5 * 3, 2);
        let mut dev = vec![0u8; 2 * 2 * 3 * 4 * 2];
        nchw_to_nc1hwc0(&src, 2, [2, 5, 3, 1], 4, &mut dev).unwrap();
        let t = tensor(
            Format::Nc1hwc0C04,
            DType::Float16,
            &[2, 2, 3, 1, 4],
            &[2, 5, 3, 1],
            &dev,
        );
        let mut out = vec![0u8; src.len()];
        assert_eq!(to_host(&t, &mut out).unwrap().data, &src[..]);
        let mut dev16 = vec![0u8; 2 * 3 * 16 * 2];
        nchw_to_nc1hwc0(&src, 2, [2, 5, 3, 1], 16, &mut dev16).unwrap();
        let t = tensor(
            Format::Nc1hwc0C04,
            DType::Float16,
            &[2, 1, 3, 1, 16],
            &[2, 5, 3, 1],
            &dev16,
        );
        assert_eq!(
            to_host(&t, &mut out).unwrap_err(),
            Error::Dim {
                format: Format::Nc1hwc0C04,
                axis: 4,
                expected: 4,
                actual: 16
            }
        );

        let b = Blocks { c0: 16, cube: 16 };
        let host = [17usize, 5, 2, 3, 1];
        let src = elems(host.iter().product(), 2);
        let mut dev = vec![0u8; 2 * 3 * 2 * 16 * 16 * 2];
        ncdhw_to_fractal_z_3d(&src, 2, host, b, &mut dev).unwrap();
        for shape in [&[6usize, 2, 16, 16][..], &[2, 1, 3, 1, 2, 16, 16]] {
            let t = tensor(Format::FractalZ3d, DType::Float16, shape, &host, &dev);
            let mut out = vec![0u8; src.len()];
            assert_eq!(to_host(&t, &mut out).unwrap().data, &src[..], "{shape:?}");
        }
        let t = tensor(
            Format::FractalZ3d,
            DType::Float16,
            &[2, 1, 3, 1, 3, 16, 16],
            &host,
            &dev,
        );
        assert_eq!(
            to_host(&t, &mut out).unwrap_err(),
            Error::Dim {
                format: Format::FractalZ3d,
                axis: 4,
                expected: 2,
                actual: 3
            }
        );
    }

    /// C1HWNCoC0 takes C0 from its device shape (any dtype: fp32 with 16, int8 with 32), pads
    /// a low-rank host shape as NC1HWC0 does, and refuses a device shape whose Co is not C0
    /// (naming both) or whose axes are not what the host shape implies (naming the axis).
    #[test]
    fn c1hwncoc0_shapes_and_refusals() {
        use crate::convert::c1hwncoc0::{c1hwncoc0_shape, nchw_to_c1hwncoc0};
        for (dtype, elem, c0) in [(DType::Float32, 4, 16), (DType::Int8, 1, 32)] {
            let host = [3usize, 21, 2, 3];
            let src = elems(host.iter().product(), elem);
            let dshape = c1hwncoc0_shape(host, c0).unwrap();
            let mut dev = vec![0u8; dshape.iter().product::<usize>() * elem];
            nchw_to_c1hwncoc0(&src, elem, host, c0, &mut dev).unwrap();
            let t = tensor(Format::C1hwncoc0, dtype, &dshape, &host, &dev);
            let mut out = vec![0u8; src.len()];
            let v = dump_view(true, &t, &mut out).unwrap();
            assert_eq!((v.data, v.format_name), (&src[..], "DefaultFormat"));
            let k = keep_device(&t).unwrap();
            assert_eq!((k.format_name, k.shape), ("C1HWNCoC0", &dshape[..]));
        }
        // A depthwise weight's bias-like (C) host shape is (1, C, 1, 1).
        let mut dev = [0u8; 16];
        dev[0] = 7;
        dev[5] = 8;
        dev[3] = 99;
        let t = tensor(
            Format::C1hwncoc0,
            DType::Int8,
            &[1, 1, 1, 1, 4, 4],
            &[2],
            &dev,
        );
        let mut out = [0u8; 2];
        assert_eq!(to_host(&t, &mut out).unwrap().data, &[7, 8]);

        let mut out = vec![0u8; 4096];
        let dev = vec![0u8; 2 * 2 * 3 * 3 * 1024];
        let t = tensor(
            Format::C1hwncoc0,
            DType::Float16,
            &[2, 2, 3, 3, 8, 16],
            &[3, 21, 2, 3],
            &dev[..2 * 2 * 3 * 3 * 8 * 16 * 2],
        );
        let e = to_host(&t, &mut out).unwrap_err();
        assert_eq!(
            e,
            Error::DiagonalBlock {
                format: Format::C1hwncoc0,
                co: 8,
                c0: 16
            }
        );
        assert_eq!(
            e.to_string(),
            "C1HWNCoC0: device shape axis 4 (Co) is 8 but axis 5 (C0) is 16; Co must equal C0 \
             (each channel sits on the diagonal of a C0 x C0 block)"
        );
        // N (axis 3) is 2 where the host shape says 3.
        let t = tensor(
            Format::C1hwncoc0,
            DType::Float16,
            &[2, 2, 3, 2, 16, 16],
            &[3, 21, 2, 3],
            &dev[..2 * 2 * 3 * 2 * 256 * 2],
        );
        assert_eq!(
            to_host(&t, &mut out).unwrap_err(),
            Error::Dim {
                format: Format::C1hwncoc0,
                axis: 3,
                expected: 3,
                actual: 2
            }
        );
        // C1 (axis 0) is 2 where C = 21 and C0 = 32 give 1.
        let t = tensor(
            Format::C1hwncoc0,
            DType::Int8,
            &[2, 2, 3, 3, 32, 32],
            &[3, 21, 2, 3],
            &dev[..2 * 2 * 3 * 3 * 1024],
        );
        assert_eq!(
            to_host(&t, &mut out).unwrap_err(),
            Error::Dim {
                format: Format::C1hwncoc0,
                axis: 0,
                expected: 1,
                actual: 2
            }
        );
        let t = tensor(
            Format::C1hwncoc0,
            DType::Int8,
            &[1, 1, 1, 4, 4],
            &[2],
            &dev[..16],
        );
        assert!(matches!(
            to_host(&t, &mut out),
            Err(Error::Rank {
                shape: "device",
                expected: 6,
                actual: 5,
                ..
            })
        ));
    }

    /// fp32 FRACTAL_NZ with C0 = 8 (the newer `FRACTAL_NZ_C0_8` layout): C0 comes from the
    /// device shape, not from the dtype default.
    #[test]
    fn block_sizes_come_from_the_device_shape() {
        let host = [3usize, 20];
        let b = Blocks { c0: 8, cube: 16 };
        let src = elems(60, 4);
        let dshape = fractal_nz_shape(&host, b).unwrap();
        assert_eq!(&*dshape, &[3, 1, 16, 8]);
        let mut dev = vec![0u8; 3 * 16 * 8 * 4];
        nd_to_fractal_nz(&src, 4, &host, b, &mut dev).unwrap();
        let t = tensor(Format::FractalNz, DType::Float32, &dshape, &host, &dev);
        let mut out = vec![0u8; 240];
        assert_eq!(to_host(&t, &mut out).unwrap().data, &src[..]);
    }

    /// Consistent shapes whose element count is zero but whose other axes overflow when
    /// multiplied: an error or an empty view, never a panic.
    #[test]
    fn empty_tensors_with_huge_axes() {
        let big = 1usize << 40;
        let b = Blocks { c0: 16, cube: 16 };
        let host = [0usize, 3, big, big];
        let nz_host = [0usize, big, big];
        let nc = nc1hwc0_shape(host, 16).unwrap();
        let nhwc_dev = [0, big, big, 3];
        let fz = fractal_z_shape(host, b);
        let nz = fractal_nz_shape(&nz_host, b).unwrap();
        let mut out = [0u8; 0];
        for (format, dev, host) in [
            (Format::Nc1hwc0, &nc[..], &host[..]),
            (Format::Nhwc, &nhwc_dev[..], &host[..]),
            (Format::FractalNz, &nz[..], &nz_host[..]),
        ] {
            let t = tensor(format, DType::Float16, dev, host, &[]);
            match to_host(&t, &mut out) {
                Ok(v) => assert!(v.data.is_empty()),
                Err(e) => assert_eq!(e, Error::Overflow, "{format}"),
            }
        }
        assert_eq!(fz, Err(Error::Overflow));
    }

    proptest::proptest! {
        /// Arbitrary shapes and lengths: `to_host` returns a view of exactly the host bytes or
        /// an error, never panics (also with zero-sized and huge axes).
        #[test]
        fn never_panics(
            fmt in 0usize..Format::ALL.len(),
            dtype in proptest::sample::select(DType::ALL.to_vec()),
            dev in proptest::collection::vec(
                proptest::prop_oneof![0usize..40, proptest::strategy::Just(usize::MAX / 3)], 0..7),
            host in proptest::collection::vec(
                proptest::prop_oneof![0usize..40, proptest::strategy::Just(1usize << 40)], 0..6),
            len in 0usize..5000,
            dst_len in 0usize..5000,
        ) {
            let data = vec![1u8; len];
            let mut dst = vec![0u8; dst_len];
            let t = tensor(Format::ALL[fmt], dtype, &dev, &host, &data);
            if let Ok(v) = to_host(&t, &mut dst) {
                proptest::prop_assert_eq!(v.data.len(), t.host_bytes().unwrap());
                proptest::prop_assert_eq!(v.shape, &host[..]);
            }
            if let Ok(v) = keep_device(&t) {
                proptest::prop_assert_eq!(v.data.len(), len);
            }
        }
    }
}
