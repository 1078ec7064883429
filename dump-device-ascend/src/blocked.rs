//! Device-format tensors converted to the host layout **block by block**, for readers that
//! stream a tensor from a file (CANN dump files, `opdump convert`) and must not hold it whole.
//!
//! [`HostBlocks::new`] checks the device shape against the host shape (as [`to_host`] does)
//! and cuts the device bytes into consecutive blocks whose conversions, written one after the
//! other, are the host tensor in row-major order:
//!
//! | device format | one block | converted block |
//! |---|---|---|
//! | host layouts (`ND`, `NCHW`, `DefaultFormat`) | up to [`COPY_BLOCK`] bytes | the same bytes |
//! | `NHWC` | one image `(H, W, C)` | `(C, H, W)` |
//! | `NC1HWC0` | one `(n, c1)`: `(H, W, C0)` | the `min(C0, C − c1·C0)` channel planes |
//! | `FRACTAL_NZ` | one matrix of the batch: `(N1, M1, M0, N0)` | `(M, N)` |
//! | `NC1HWC0_C04` | as `NC1HWC0`, C0 = 4 | as `NC1HWC0` |
//! | `NDC1HWC0` | one image `(D, C1, H, W, C0)` | `(C, D, H, W)` |
//! | `FRACTAL_Z` | a band of `g` output-channel blocks: `g·N0·C0` lanes of every one of its `C1·H·W` rows (a gather, see [`Span`]); the whole tensor when it fits the band size | `min(g·N0, N − n)` output channels `(C, H, W)` |
//! | `FRACTAL_Z_3D` | the whole tensor (each output channel draws on every block row) | NCDHW |
//! | `C1HWNCoC0`, N = 1 | one `c1`: `(H, W, 1, C0, C0)` | the `min(C0, C − c1·C0)` channel planes |
//! | `C1HWNCoC0`, N > 1 | the whole tensor (each image draws on every `c1`) | NCHW |
//!
//! Every block but a `FRACTAL_Z` band is one run of device bytes that follows the previous
//! block's; a band is `C1·H·W` pieces of `g·N0·C0` elements, one per block row, a row apart
//! ([`HostBlocks::src_span`]), so a reader gathers it with one positioned read per row and
//! the weight's output channels come out in order without the whole tensor in memory.
//!
//! A block larger than the caller's limit is [`Error::BlockTooLarge`] (only the whole-tensor
//! formats, or an absurd image / matrix, get there). `C1HWNCoC0` is C0 times the size of its
//! host tensor (all but the diagonal of each `C0 × C0` block is padding), so its N = 1 case (a
//! depthwise convolution's weights) goes one `c1` at a time.
//!
//! ```
//! use dump_core::DType;
//! use dump_device_ascend::{Format, blocked::HostBlocks, convert::nc1hwc0};
//!
//! // f16 NCHW (2, 3, 2, 2) held as NC1HWC0 (2, 1, 2, 2, 16).
//! let host: Vec<u8> = (0..24u16).flat_map(|v| v.to_le_bytes()).collect();
//! let mut dev = vec![0u8; 2 * 2 * 2 * 16 * 2];
//! nc1hwc0::nchw_to_nc1hwc0(&host, 2, [2, 3, 2, 2], 16, &mut dev)?;
//! let plan = HostBlocks::new(Format::Nc1hwc0, DType::Float16, &[2, 1, 2, 2, 16], &[2, 3, 2, 2], 1 << 20)?;
//! assert_eq!((plan.count(), plan.host_shape()), (2, &[2, 3, 2, 2][..]));
//! let (mut out, mut at, mut buf) = (Vec::new(), 0, vec![0u8; plan.max_dst_bytes()]);
//! for i in 0..plan.count() {
//!     let len = plan.src_bytes(i);
//!     let n = plan.convert(i, &dev[at..at + len], &mut buf)?;
//!     out.extend_from_slice(&buf[..n]);
//!     at += len;
//! }
//! assert_eq!(out, host);
//! # Ok::<(), dump_device_ascend::Error>(())
//! ```
//!
//! [`to_host`]: crate::to_host()

use dump_core::DType;

use crate::convert::{
    Shape, bytes_of, c1hwncoc0, fractal_nz, fractal_nz::fractal_nz_shape, fractal_z,
    fractal_z::fractal_z_shape, fractal_z_3d, nc1hwc0, nc1hwc0::nc1hwc0_shape, ndc1hwc0,
    ndc1hwc0::ndc1hwc0_shape, nhwc,
};
use crate::to_host::{
    c0_of, check_c1hwncoc0, check_fractal_z_3d, exact5, expect_dims, last_dims, pad4, rank_err,
};
use crate::{Blocks, Error, Format};

/// Block size for host layouts (plain copies): 1 MiB.
pub const COPY_BLOCK: usize = 1 << 20;

/// The device bytes of one `FRACTAL_Z` band by default ([`HostBlocks::new`]): a weight of up
/// to this size is one block, a larger one goes a band of output-channel blocks at a time.
pub const FRACTAL_Z_BAND: usize = 4 << 20;

/// Where the device bytes of one block are: `pieces` runs of `piece` bytes, the first at byte
/// `offset` of the device tensor and each next one `stride` bytes further, concatenated in
/// that order. `pieces` is 1 for every format but a banded `FRACTAL_Z`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Byte offset of the first piece in the device tensor.
    pub offset: usize,
    /// Bytes of each piece.
    pub piece: usize,
    /// Number of pieces.
    pub pieces: usize,
    /// Bytes from the start of one piece to the start of the next.
    pub stride: usize,
}

impl Span {
    /// The block's bytes: `piece · pieces`.
    pub fn len(&self) -> usize {
        self.piece * self.pieces
    }

    /// Whether the block has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Copy {
        total: usize,
    },
    Nhwc {
        h: usize,
        w: usize,
        c: usize,
    },
    Nc1hwc0 {
        c: usize,
        c1: usize,
        hw: [usize; 2],
        c0: usize,
    },
    FractalNz {
        b: Blocks,
    },
    /// `band` output-channel blocks (of N0) per block; `n1` blocks in all, `rows` = C1·H·W.
    FractalZ {
        host: [usize; 4],
        b: Blocks,
        band: usize,
        n1: usize,
        rows: usize,
    },
    /// One block per image: its `D·C1·H·W·C0` device elements become `C·D·H·W` host ones.
    Ndc1hwc0 {
        cdhw: [usize; 4],
        c0: usize,
    },
    FractalZ3d {
        host: [usize; 5],
        b: Blocks,
    },
    /// N = 1: one block per `c1`, its `valid` channels; N > 1: one block, the whole tensor.
    C1hwncoc0 {
        host: [usize; 4],
        c0: usize,
        per_c1: bool,
    },
}

/// A device tensor's conversion to its host layout, cut into blocks (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostBlocks {
    format: Format,
    elem: usize,
    kind: Kind,
    host: Shape,
    count: usize,
    src: usize,
    dst_max: usize,
}

impl HostBlocks {
    /// Plans the conversion of a `format` tensor of `dtype` with `device_shape` to
    /// `host_shape` (for `NHWC`, the NCHW shape it becomes; for `NC1HWC0` and `FRACTAL_Z` a
    /// host shape of rank below 4 is padded to NCHW as [`to_host`](crate::to_host()) does).
    /// `max_block` bounds the bytes of one block (source or converted). A `FRACTAL_Z`
    /// weight larger than [`FRACTAL_Z_BAND`] goes in bands of output channels
    /// ([`with_band`](Self::with_band) sets another band size).
    pub fn new(
        format: Format,
        dtype: DType,
        device_shape: &[usize],
        host_shape: &[usize],
        max_block: usize,
    ) -> Result<HostBlocks, Error> {
        HostBlocks::with_band(
            format,
            dtype,
            device_shape,
            host_shape,
            max_block,
            FRACTAL_Z_BAND,
        )
    }

    /// [`new`](Self::new) with `band` as the device bytes of one `FRACTAL_Z` band: a weight of
    /// at most `band` bytes is one block, a larger one goes as many output-channel blocks (N0
    /// channels each) at a time as fit in `band` bytes, at least one.
    pub fn with_band(
        format: Format,
        dtype: DType,
        device_shape: &[usize],
        host_shape: &[usize],
        max_block: usize,
        band: usize,
    ) -> Result<HostBlocks, Error> {
        let dev = device_shape;
        let plan = |kind: Kind,
                    host: &[usize],
                    count: usize,
                    src: usize,
                    dst_max: usize|
         -> Result<HostBlocks, Error> {
            if src > max_block || dst_max > max_block {
                return Err(Error::BlockTooLarge {
                    format,
                    bytes: src.max(dst_max),
                    limit: max_block,
                });
            }
            // Empty blocks (a zero among the inner dimensions) hold no element, whatever the
            // outer ones declare: no blocks, so no reader loops over 2^40 empty images.
            let count = if src == 0 { 0 } else { count };
            // Every block's offset and end fit in usize (`src_span`, `src_extent`).
            count.checked_mul(src).ok_or(Error::Overflow)?;
            Ok(HostBlocks {
                format,
                elem: dtype.size().unwrap_or(1),
                kind,
                host: Shape::new(host)?,
                count,
                src,
                dst_max,
            })
        };
        if format.is_host_layout() {
            let count = bytes_of(host_shape, 1)?;
            let total = dtype.storage_bytes(count).ok_or(Error::Overflow)?;
            let block = total.min(COPY_BLOCK.min(max_block).max(1));
            let blocks = if total == 0 { 0 } else { total.div_ceil(block) };
            return plan(Kind::Copy { total }, host_shape, blocks, block, block);
        }
        let elem = dtype.size().ok_or(Error::PackedDType(dtype))?;
        match format {
            Format::Nhwc => {
                let host: [usize; 4] = host_shape
                    .try_into()
                    .map_err(|_| rank_err(format, "host", 4, host_shape.len()))?;
                let [n, c, h, w] = host;
                expect_dims(format, &[n, h, w, c], dev)?;
                let img = bytes_of(&[h, w, c], elem)?;
                plan(Kind::Nhwc { h, w, c }, &host, n, img, img)
            }
            Format::Nc1hwc0 | Format::Nc1hwc0C04 => {
                let host = pad4(format, host_shape)?;
                let c0 = c0_of(format, dev)?;
                let want = nc1hwc0_shape(host, c0)?;
                expect_dims(format, &want, dev)?;
                let [n, c, h, w] = host;
                let c1 = want[1];
                let src = bytes_of(&[h, w, c0], elem)?;
                let count = n.checked_mul(c1).ok_or(Error::Overflow)?;
                let kind = Kind::Nc1hwc0 {
                    c,
                    c1,
                    hw: [h, w],
                    c0,
                };
                plan(kind, &host, count, src, src)
            }
            Format::FractalNz => {
                let rank = host_shape.len();
                let batch = rank.saturating_sub(2);
                let [m0, c0] = last_dims::<2>(format, dev, batch + 4)?;
                let b = Blocks { c0, cube: m0 };
                let want = fractal_nz_shape(host_shape, b)?;
                expect_dims(format, &want, dev)?;
                let count = bytes_of(&host_shape[..batch], 1)?;
                let src = bytes_of(&dev[batch..], elem)?;
                let dst = bytes_of(&host_shape[batch..], elem)?;
                plan(Kind::FractalNz { b }, host_shape, count, src, dst)
            }
            Format::FractalZ => {
                let host = pad4(format, host_shape)?;
                let [n0, c0] = last_dims::<2>(format, dev, 4)?;
                let b = Blocks { c0, cube: n0 };
                let want = fractal_z_shape(host, b)?;
                expect_dims(format, &want, dev)?;
                let [rows, n1, ..] = want;
                let whole = bytes_of(dev, elem)?;
                // Device bytes of one output-channel block over every row.
                let per_n1 = bytes_of(&[rows, n0, c0], elem)?;
                let g = if whole <= band || per_n1 == 0 {
                    n1.max(1)
                } else {
                    (band / per_n1).clamp(1, n1)
                };
                let count = n1.div_ceil(g).max(1);
                let src = per_n1.checked_mul(g.min(n1)).ok_or(Error::Overflow)?;
                let [n, c, h, w] = host;
                let dst = bytes_of(&[(g * n0).min(n), c, h, w], elem)?;
                let kind = Kind::FractalZ {
                    host,
                    b,
                    band: g,
                    n1,
                    rows,
                };
                plan(kind, &host, count, src, dst)
            }
            Format::Ndc1hwc0 => {
                let host = exact5(format, host_shape)?;
                let c0 = last_dims::<1>(format, dev, 6)?[0];
                let want = ndc1hwc0_shape(host, c0)?;
                expect_dims(format, &want, dev)?;
                let [n, c, d, h, w] = host;
                let src = bytes_of(&want[1..], elem)?;
                let dst = bytes_of(&host[1..], elem)?;
                plan(
                    Kind::Ndc1hwc0 {
                        cdhw: [c, d, h, w],
                        c0,
                    },
                    &host,
                    n,
                    src,
                    dst,
                )
            }
            Format::FractalZ3d => {
                let host = exact5(format, host_shape)?;
                let b = check_fractal_z_3d(format, host, dev)?;
                let src = bytes_of(dev, elem)?;
                let dst = bytes_of(&host, elem)?;
                plan(Kind::FractalZ3d { host, b }, &host, 1, src, dst)
            }
            Format::C1hwncoc0 => {
                let host = pad4(format, host_shape)?;
                let c0 = check_c1hwncoc0(format, host, dev)?;
                let [n, c, h, w] = host;
                let per_c1 = n == 1;
                let (count, src, dst) = if per_c1 {
                    let c1 = c.div_ceil(c0);
                    let src = bytes_of(&[h, w, c0, c0], elem)?;
                    let dst = bytes_of(&[c0.min(c), h, w], elem)?;
                    (c1, src, dst)
                } else {
                    (1, bytes_of(dev, elem)?, bytes_of(&host, elem)?)
                };
                let kind = Kind::C1hwncoc0 { host, c0, per_c1 };
                plan(kind, &host, count, src, dst)
            }
            // The host layouts returned above.
            other => Err(Error::UnsupportedFormat(other)),
        }
    }

    /// The device format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The shape of the converted tensor.
    pub fn host_shape(&self) -> &[usize] {
        self.host.as_slice()
    }

    /// Number of blocks.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Device bytes of block `i`: [`src_span`](Self::src_span)`(i).len()`.
    pub fn src_bytes(&self, i: usize) -> usize {
        self.src_span(i).len()
    }

    /// Where block `i`'s device bytes are (for every format but a banded `FRACTAL_Z`, one run
    /// that follows block `i − 1`'s).
    pub fn src_span(&self, i: usize) -> Span {
        let one = |offset: usize, len: usize| Span {
            offset,
            piece: len,
            pieces: 1,
            stride: len,
        };
        match self.kind {
            Kind::Copy { total } => {
                let at = (i * self.src).min(total);
                one(at, (total - at).min(self.src))
            }
            Kind::FractalZ {
                b, band, n1, rows, ..
            } if band < n1 => {
                let lane = b.cube * b.c0 * self.elem;
                let first = (i * band).min(n1);
                let g = (n1 - first).min(band);
                Span {
                    offset: first * lane,
                    piece: g * lane,
                    pieces: rows,
                    stride: n1 * lane,
                }
            }
            _ => one(i * self.src, self.src),
        }
    }

    /// The device bytes the blocks reach, from the tensor's first byte to the furthest byte
    /// any block reads: the device tensor's size (0 when there are no blocks). Found from the
    /// last block alone (every block ends before the next one does), so a reader checks a
    /// payload against its file without walking the blocks.
    pub fn src_extent(&self) -> usize {
        match self.count.checked_sub(1) {
            None => 0,
            Some(last) => {
                let s = self.src_span(last);
                s.offset + (s.pieces - 1) * s.stride + s.piece
            }
        }
    }

    /// Converted bytes of block `i` (what [`convert`](Self::convert) returns for it), so a
    /// writer knows where each block's output starts without converting the ones before.
    pub fn dst_bytes(&self, i: usize) -> usize {
        let elem = self.elem;
        match self.kind {
            Kind::Copy { .. } => self.src_bytes(i),
            Kind::Nc1hwc0 { c, c1, hw, c0 } => {
                let k = i % c1.max(1);
                c.saturating_sub(k * c0).min(c0) * hw[0] * hw[1] * elem
            }
            Kind::FractalZ {
                host: [n, c, h, w],
                b,
                band,
                ..
            } => {
                let first = i.saturating_mul(band).saturating_mul(b.cube).min(n);
                (n - first).min(band.saturating_mul(b.cube)) * c * h * w * elem
            }
            Kind::C1hwncoc0 {
                host: [_, c, h, w],
                c0,
                per_c1: true,
            } => c.saturating_sub(i * c0).min(c0) * h * w * elem,
            _ => self.dst_max,
        }
    }

    /// Whether the blocks are plain copies (a host layout): the device bytes are the
    /// converted ones, so a reader may skip [`convert`](Self::convert).
    pub fn is_copy(&self) -> bool {
        matches!(self.kind, Kind::Copy { .. })
    }

    /// The largest converted block: the size of the buffer [`convert`](Self::convert) needs.
    pub fn max_dst_bytes(&self) -> usize {
        self.dst_max
    }

    /// Converts block `i` (`src`: exactly [`src_bytes`](Self::src_bytes)`(i)` device bytes)
    /// into `dst`; returns the bytes written.
    pub fn convert(&self, i: usize, src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
        let elem = self.elem;
        match self.kind {
            Kind::Copy { .. } => {
                let n = src.len();
                if n != self.src_bytes(i) {
                    return Err(Error::LengthMismatch {
                        expected: self.src_bytes(i),
                        actual: n,
                    });
                }
                let available = dst.len();
                let out = dst.get_mut(..n).ok_or(Error::BufferTooSmall {
                    needed: n,
                    available,
                })?;
                out.copy_from_slice(src);
                Ok(n)
            }
            Kind::Nhwc { h, w, c } => nhwc::nhwc_to_nchw(src, elem, [1, c, h, w], dst),
            Kind::Nc1hwc0 { c, c1, hw, c0 } => {
                let k = i % c1.max(1);
                let valid = (c - k * c0).min(c0);
                nc1hwc0::nc1hwc0_to_nchw(src, elem, [1, valid, hw[0], hw[1]], c0, dst)
            }
            Kind::FractalNz { b } => {
                let host = self.host.as_slice();
                let mn = &host[host.len().saturating_sub(2)..];
                fractal_nz::fractal_nz_to_nd(src, elem, mn, b, dst)
            }
            Kind::FractalZ {
                host: [n, c, h, w],
                b,
                band,
                ..
            } => {
                // Band i: output channels from i·band·N0, its gathered rows a FRACTAL_Z
                // tensor of its own (N1 = the band's blocks).
                let first = i.saturating_mul(band).saturating_mul(b.cube).min(n);
                let valid = (n - first).min(band.saturating_mul(b.cube));
                fractal_z::fractal_z_to_nchw(src, elem, [valid, c, h, w], b, dst)
            }
            Kind::Ndc1hwc0 {
                cdhw: [c, d, h, w],
                c0,
            } => ndc1hwc0::ndc1hwc0_to_ncdhw(src, elem, [1, c, d, h, w], c0, dst),
            Kind::FractalZ3d { host, b } => {
                fractal_z_3d::fractal_z_3d_to_ncdhw(src, elem, host, b, dst)
            }
            Kind::C1hwncoc0 {
                host: [_, c, h, w],
                c0,
                per_c1: true,
            } => {
                let valid = c.saturating_sub(i * c0).min(c0);
                c1hwncoc0::c1hwncoc0_to_nchw(src, elem, [1, valid, h, w], c0, dst)
            }
            Kind::C1hwncoc0 { host, c0, .. } => {
                c1hwncoc0::c1hwncoc0_to_nchw(src, elem, host, c0, dst)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::c1hwncoc0::{c1hwncoc0_shape, nchw_to_c1hwncoc0};
    use crate::convert::fractal_nz::nd_to_fractal_nz;
    use crate::convert::fractal_z::nchw_to_fractal_z;
    use crate::convert::fractal_z_3d::{fractal_z_3d_shape, ncdhw_to_fractal_z_3d};
    use crate::convert::nc1hwc0::nchw_to_nc1hwc0;
    use crate::convert::ndc1hwc0::ncdhw_to_ndc1hwc0;
    use crate::convert::nhwc::nchw_to_nhwc;
    use crate::convert::testutil::elems;
    use crate::{DeviceTensor, to_host};

    /// Block by block gives the bytes `to_host` gives in one go, for every format, odd channel
    /// counts (a partial last C0 block) and a batched FRACTAL_NZ.
    #[test]
    fn blocks_concatenate_to_what_to_host_gives() {
        let b = Blocks::default_for(DType::Float16).unwrap();
        let cases: [(Format, &[usize]); 11] = [
            (Format::Nhwc, &[2, 5, 3, 2]),
            (Format::Nc1hwc0, &[2, 35, 3, 2]),
            (Format::FractalZ, &[17, 5, 3, 2]),
            (Format::FractalNz, &[3, 2, 19, 33]),
            (Format::Nd, &[3, 7]),
            (Format::Nc1hwc0C04, &[2, 7, 3, 2]),
            (Format::Ndc1hwc0, &[2, 19, 3, 2, 2]),
            (Format::FractalZ3d, &[17, 5, 2, 3, 2]),
            (Format::C1hwncoc0, &[1, 35, 3, 2]),
            (Format::C1hwncoc0, &[3, 19, 3, 2]),
            (Format::C1hwncoc0, &[1, 16, 2, 1]),
        ];
        for (format, host) in cases {
            let count: usize = host.iter().product();
            let src = elems(count, 2);
            let mut dev = vec![0u8; 1 << 16];
            let h4 = |s: &[usize]| -> [usize; 4] { s.try_into().unwrap() };
            let (n, dshape): (usize, Shape) = match format {
                Format::Nhwc => (
                    nchw_to_nhwc(&src, 2, h4(host), &mut dev).unwrap(),
                    Shape::new(&[host[0], host[2], host[3], host[1]]).unwrap(),
                ),
                Format::Nc1hwc0 => (
                    nchw_to_nc1hwc0(&src, 2, h4(host), 16, &mut dev).unwrap(),
                    Shape::new(&nc1hwc0_shape(h4(host), 16).unwrap()).unwrap(),
                ),
                Format::FractalZ => (
                    nchw_to_fractal_z(&src, 2, h4(host), b, &mut dev).unwrap(),
                    Shape::new(&fractal_z_shape(h4(host), b).unwrap()).unwrap(),
                ),
                Format::FractalNz => (
                    nd_to_fractal_nz(&src, 2, host, b, &mut dev).unwrap(),
                    fractal_nz_shape(host, b).unwrap(),
                ),
                Format::Nc1hwc0C04 => (
                    nchw_to_nc1hwc0(&src, 2, h4(host), 4, &mut dev).unwrap(),
                    Shape::new(&nc1hwc0_shape(h4(host), 4).unwrap()).unwrap(),
                ),
                Format::Ndc1hwc0 => (
                    ncdhw_to_ndc1hwc0(&src, 2, host.try_into().unwrap(), 16, &mut dev).unwrap(),
                    Shape::new(&ndc1hwc0_shape(host.try_into().unwrap(), 16).unwrap()).unwrap(),
                ),
                Format::FractalZ3d => (
                    ncdhw_to_fractal_z_3d(&src, 2, host.try_into().unwrap(), b, &mut dev).unwrap(),
                    Shape::new(&fractal_z_3d_shape(host.try_into().unwrap(), b).unwrap()).unwrap(),
                ),
                Format::C1hwncoc0 => (
                    nchw_to_c1hwncoc0(&src, 2, h4(host), 16, &mut dev).unwrap(),
                    Shape::new(&c1hwncoc0_shape(h4(host), 16).unwrap()).unwrap(),
                ),
                _ => {
                    dev[..src.len()].copy_from_slice(&src);
                    (src.len(), Shape::new(host).unwrap())
                }
            };
            let t = DeviceTensor {
                format,
                dtype: DType::Float16,
                device_shape: &dshape,
                host_shape: host,
                data: &dev[..n],
            };
            let mut whole = vec![0u8; t.host_bytes().unwrap()];
            let want = to_host(&t, &mut whole).unwrap().data.to_vec();
            assert_eq!(want, src, "{format}");
            let p = HostBlocks::new(format, DType::Float16, &dshape, host, 1 << 20).unwrap();
            let (mut got, mut at) = (Vec::new(), 0);
            let mut buf = vec![0u8; p.max_dst_bytes()];
            for i in 0..p.count() {
                let len = p.src_bytes(i);
                let k = p.convert(i, &dev[at..at + len], &mut buf).unwrap();
                assert_eq!(k, p.dst_bytes(i), "{format}: block {i}");
                got.extend_from_slice(&buf[..k]);
                at += len;
            }
            assert_eq!(at, n, "{format}: blocks cover the device bytes");
            assert_eq!(
                p.src_extent(),
                n,
                "{format}: the extent is the device bytes"
            );
            assert_eq!(got, want, "{format}");
            if format == Format::C1hwncoc0 {
                // N = 1 goes one c1 at a time; N > 1 needs the whole tensor.
                let c1 = host[1].div_ceil(16);
                let want = if host[0] == 1 { c1 } else { 1 };
                assert_eq!(p.count(), want, "{host:?}");
            }
        }
    }

    /// The device bytes of block `i`, gathered from the whole device tensor as its span says.
    fn gather(p: &HostBlocks, i: usize, dev: &[u8]) -> Vec<u8> {
        let s = p.src_span(i);
        (0..s.pieces)
            .flat_map(|q| dev[s.offset + q * s.stride..][..s.piece].iter().copied())
            .collect()
    }

    /// FRACTAL_Z in bands of output channels gives, band after band, what `to_host` gives in
    /// one go: N not a multiple of N0 (a partial last band and a partial last N0 block), C not
    /// a multiple of C0, a band that does not divide N1, one block per band, a band of the
    /// whole tensor, 1-element and empty weights, 1-, 2- and 4-byte elements.
    #[test]
    fn fractal_z_bands_concatenate_to_what_to_host_gives() {
        let hosts: [[usize; 4]; 8] = [
            [17, 5, 3, 2],
            [33, 35, 1, 1],
            [64, 16, 3, 3],
            [100, 33, 2, 3],
            [1, 1, 1, 1],
            [16, 1, 1, 1],
            [0, 3, 2, 2],
            [48, 0, 2, 2],
        ];
        for (dtype, elem) in [(DType::Float16, 2), (DType::Float32, 4), (DType::Int8, 1)] {
            let b = Blocks::default_for(dtype).unwrap();
            for host in hosts {
                let dshape = fractal_z_shape(host, b).unwrap();
                let count: usize = host.iter().product();
                let src = elems(count, elem);
                let mut dev = vec![0u8; dshape.iter().product::<usize>() * elem];
                nchw_to_fractal_z(&src, elem, host, b, &mut dev).unwrap();
                let per_n1 = dshape[0] * b.cube * b.c0 * elem;
                // Bands of 1, 2 and 3 N0 blocks, and one over the whole tensor.
                for band in [per_n1, 2 * per_n1, 3 * per_n1 + 1, dev.len().max(1)] {
                    let p = HostBlocks::with_band(
                        Format::FractalZ,
                        dtype,
                        &dshape,
                        &host,
                        1 << 20,
                        band,
                    )
                    .unwrap();
                    let n1 = dshape[1];
                    let g = if dev.len() <= band || per_n1 == 0 {
                        n1.max(1)
                    } else {
                        (band / per_n1).clamp(1, n1)
                    };
                    // An empty weight has no blocks.
                    let want = if dev.is_empty() {
                        0
                    } else {
                        n1.div_ceil(g).max(1)
                    };
                    assert_eq!(p.count(), want, "{host:?} band {band}");
                    assert_eq!(p.src_extent(), dev.len(), "{host:?} band {band}");
                    let mut buf = vec![0u8; p.max_dst_bytes()];
                    let mut got = Vec::new();
                    let mut covered = vec![false; dev.len()];
                    for i in 0..p.count() {
                        let bytes = gather(&p, i, &dev);
                        assert_eq!(bytes.len(), p.src_bytes(i));
                        let s = p.src_span(i);
                        for q in 0..s.pieces {
                            for k in 0..s.piece {
                                let at = s.offset + q * s.stride + k;
                                assert!(!covered[at], "{host:?}: byte {at} read twice");
                                covered[at] = true;
                            }
                        }
                        let k = p.convert(i, &bytes, &mut buf).unwrap();
                        assert_eq!(k, p.dst_bytes(i), "{host:?} band {band}: block {i}");
                        got.extend_from_slice(&buf[..k]);
                    }
                    assert!(
                        covered.iter().all(|&c| c),
                        "{host:?}: every device byte read"
                    );
                    assert_eq!(got, src, "{host:?} {dtype} band {band}");
                }
            }
        }
    }

    /// A tensor with a zero among its inner dimensions has no blocks, however many images,
    /// matrices or channel blocks its outer dimensions declare (a hostile file's 2^40 empty
    /// images are not walked one by one), and converting it in one go returns at once too.
    /// Outer dimensions whose blocks would not fit in memory are an overflow.
    #[test]
    fn empty_blocks_are_no_blocks_whatever_the_outer_dimensions() {
        const B: usize = 1 << 40;
        let cases: [(Format, &[usize], &[usize]); 7] = [
            (Format::Nhwc, &[B, 0, 1, 1], &[B, 1, 0, 1]),
            (Format::Nc1hwc0, &[B, 1, 0, 1, 16], &[B, 3, 0, 1]),
            (Format::FractalNz, &[B, 0, 1, 16, 16], &[B, 3, 0]),
            (Format::Ndc1hwc0, &[B, 1, 1, 0, 1, 16], &[B, 3, 1, 0, 1]),
            (Format::C1hwncoc0, &[B, 0, 1, 1, 16, 16], &[1, B * 16, 0, 1]),
            (Format::FractalZ, &[0, B, 16, 16], &[B * 16, 16, 0, 1]),
            (Format::Nd, &[B, 0], &[B, 0]),
        ];
        for (format, dev, host) in cases {
            let p = HostBlocks::new(format, DType::Float16, dev, host, 1 << 20).unwrap();
            assert_eq!((p.count(), p.src_extent()), (0, 0), "{format}");
            assert_eq!(p.host_shape(), host, "{format}");
            let t = DeviceTensor {
                format,
                dtype: DType::Float16,
                device_shape: dev,
                host_shape: host,
                data: &[],
            };
            let v = to_host(&t, &mut []).unwrap();
            assert_eq!((v.data.len(), v.shape), (0, host), "{format}");
        }
        // 2^62 images of 16 bytes: their offsets would not fit in usize.
        let huge = HostBlocks::new(
            Format::Nhwc,
            DType::Float16,
            &[1 << 62, 2, 2, 2],
            &[1 << 62, 2, 2, 2],
            1 << 20,
        );
        assert!(matches!(huge, Err(Error::Overflow)), "{huge:?}");
    }

    /// The default band: a weight over [`FRACTAL_Z_BAND`] is cut, each block under it.
    #[test]
    fn a_large_fractal_z_weight_goes_in_bands_under_the_band_size() {
        // (4096, 500, 3, 3) fp16: 288 rows × 256 N0 blocks × 512 bytes = 36 MiB.
        let p = HostBlocks::new(
            Format::FractalZ,
            DType::Float16,
            &[288, 256, 16, 16],
            &[4096, 500, 3, 3],
            1 << 26,
        )
        .unwrap();
        assert!(p.count() > 1);
        let biggest = (0..p.count()).map(|i| p.src_bytes(i)).max().unwrap();
        assert!(biggest <= FRACTAL_Z_BAND, "{biggest}");
        assert!(p.max_dst_bytes() <= FRACTAL_Z_BAND, "{}", p.max_dst_bytes());
        let total: usize = (0..p.count()).map(|i| p.src_bytes(i)).sum();
        assert_eq!(total, 288 * 256 * 512);
    }

    /// A C1HWNCoC0 tensor whose one block exceeds the limit is refused (N > 1: the whole
    /// tensor), while with N = 1 only one c1 slice has to fit.
    #[test]
    fn c1hwncoc0_blocks_under_a_limit() {
        // N = 2, C = 40, H = W = 4, f16: the device tensor is 3·16·2·256·2 = 49152 bytes.
        let e = HostBlocks::new(
            Format::C1hwncoc0,
            DType::Float16,
            &[3, 4, 4, 2, 16, 16],
            &[2, 40, 4, 4],
            40_000,
        )
        .unwrap_err();
        assert_eq!(
            e,
            Error::BlockTooLarge {
                format: Format::C1hwncoc0,
                bytes: 49152,
                limit: 40_000
            }
        );
        // N = 1: one c1 is 16·256·2 = 8192 bytes.
        let p = HostBlocks::new(
            Format::C1hwncoc0,
            DType::Float16,
            &[3, 4, 4, 1, 16, 16],
            &[1, 40, 4, 4],
            8192,
        )
        .unwrap();
        assert_eq!(
            (p.count(), p.src_bytes(2), p.max_dst_bytes()),
            (3, 8192, 512)
        );
        let e = HostBlocks::new(
            Format::C1hwncoc0,
            DType::Float16,
            &[3, 4, 4, 1, 8, 16],
            &[1, 40, 4, 4],
            1 << 20,
        )
        .unwrap_err();
        assert_eq!(
            e,
            Error::DiagonalBlock {
                format: Format::C1hwncoc0,
                co: 8,
                c0: 16
            }
        );
    }

    #[test]
    fn a_whole_tensor_block_over_the_limit_and_wrong_shapes_are_refused() {
        let e = HostBlocks::new(
            Format::FractalZ,
            DType::Float16,
            &[4, 1, 16, 16],
            &[16, 16, 2, 2],
            1000,
        )
        .unwrap_err();
        assert!(matches!(e, Error::BlockTooLarge { limit: 1000, .. }), "{e}");
        let e = HostBlocks::new(
            Format::Nc1hwc0,
            DType::Float16,
            &[1, 2, 2, 2, 16],
            &[1, 3, 2, 2],
            1 << 20,
        )
        .unwrap_err();
        assert!(matches!(e, Error::Dim { axis: 1, .. }), "{e}");
        let e = HostBlocks::new(Format::Nc1hwc0, DType::Int4, &[1], &[1], 1 << 20).unwrap_err();
        assert_eq!(e, Error::PackedDType(DType::Int4));
    }
}
