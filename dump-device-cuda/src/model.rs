//! A CPU model of the statistics kernels: the same element assignment, the same shuffle
//! tree, the same block and host combination order and the same roundings, so it gives the
//! **same bits** as a GPU. It documents what users see on a device, and tests the host
//! combination and the precision policy without a GPU (GPU tests compare it with the kernel).
//!
//! # The order of a kernel run
//!
//! For `n` elements of `s` bytes, a unit is `16 / s` consecutive elements; there are
//! `U = ceil(n / unit)` units, `B = 256` threads per block and
//! `G = clamp(ceil(U / B), 1, 1024)` blocks ([`grid_for`]).
//!
//! 1. Thread `g = b·B + t` takes units `g, g + G·B, g + 2·G·B, ...` and pushes each unit's
//!    elements in index order into its state: NaNs are counted (first/last kept by index and
//!    raw bits) and skipped; other values update `sum = add(sum, v)`, `sq = add(sq, sq(v))`,
//!    extrema and counts.
//! 2. Warp tree: for `off = 16, 8, 4, 2, 1`, lane `l` merges lane `l + off` into itself
//!    (`merge(s[l], s[l + off])`, left operand first).
//! 3. Lane 0 of each of the 8 warps stores its state to shared memory; warp 0 loads them
//!    (lanes 8..31 start empty) and runs the same tree. Lane 0 writes the block's
//!    [`Partial`].
//! 4. The host adds the partials in block order ([`combine`]).
//!
//! `add` and `sq` are the kernel's [`crate::arith::Accum`]: f64 for `high`; for `low`
//! f32 arithmetic rounded after every step to the source dtype (f16, bf16, f32; f64 inputs
//! stay f64). Integers sum exactly in 128 bits.
//!
//! # What users see on a device (tested in `tests/model.rs`)
//!
//! - Counts, max, min and the NaN that decides `nan`/`-nan` are exactly the host's, for every
//!   dtype. (One deliberate rule: when the maximum is zero and both `+0` and `-0` occur the
//!   device reports `+0`; for the minimum `-0`. The host reports the first one seen.)
//! - Results are bitwise reproducible run to run and across GPUs: the grid depends only on
//!   the tensor size, there are no atomics, and every combination has a fixed order.
//! - `high`: avg and l2norm equal the precision policy's (sequential f64, rounded once to
//!   f32) whenever the f64 sums are exact — for example f16/bf16 data of moderate range, or
//!   integers below 2^53; otherwise they can differ from it by the double rounding of an f64
//!   sum, at most one f32 ulp, rarely.
//! - `low`: the source-dtype accumulation runs over a tree, not sequentially. Whenever the
//!   sequential accumulator would round (for example f16 sums beyond 2048), a device result
//!   is generally closer to the exact value than the policy's sequential model: 4096 f16
//!   ones give a device mean of 1 where a sequential f16 sum stalls at 2048 (mean 0.5).
//!   Overflow to `inf` (fp16 40000 + 40000) happens on the device too, as soon as a partial
//!   sum overflows.

use crate::arith::{Accum, raw_is_nan, raw_to_f64, raw_to_i64, vmax, vmin};
use crate::combine::{DeviceSummary, combine};
use crate::kernel_source::{BLOCK, grid_for, unit_elems};
use crate::{Error, KernelId, Partial, Precision};
use dump_core::DType;

/// One thread's (then warp's, then block's) state, as the kernel's `St`.
#[derive(Clone, Copy, Debug)]
struct St {
    sum: f64,
    sq: f64,
    mx: f64,
    mn: f64,
    imx: i64,
    imn: i64,
    isum: i128,
    nan: u64,
    pinf: u64,
    ninf: u64,
    zero: u64,
    pos: u64,
    neg: u64,
    fidx: u64,
    fraw: u64,
    lidx: u64,
    lraw: u64,
}

impl St {
    const EMPTY: St = St {
        sum: 0.0,
        sq: 0.0,
        mx: f64::NEG_INFINITY,
        mn: f64::INFINITY,
        imx: i64::MIN,
        imn: i64::MAX,
        isum: 0,
        nan: 0,
        pinf: 0,
        ninf: 0,
        zero: 0,
        pos: 0,
        neg: 0,
        fidx: 0,
        fraw: 0,
        lidx: 0,
        lraw: 0,
    };

    #[inline]
    fn push(&mut self, dtype: DType, acc: Accum, raw: u64, i: u64) {
        if raw_is_nan(dtype, raw) {
            if self.nan == 0 {
                self.fidx = i;
                self.fraw = raw;
            }
            self.lidx = i;
            self.lraw = raw;
            self.nan += 1;
            return;
        }
        let (v, is_int) = if dtype.is_float() {
            (raw_to_f64(dtype, raw), false)
        } else {
            let iv = raw_to_i64(dtype, raw);
            self.imx = self.imx.max(iv);
            self.imn = self.imn.min(iv);
            self.isum += i128::from(iv);
            (iv as f64, true)
        };
        if !is_int {
            self.sum = acc.add(self.sum, v);
            self.mx = vmax(self.mx, v);
            self.mn = vmin(self.mn, v);
        }
        self.sq = acc.add(self.sq, acc.sq(v));
        if v == 0.0 {
            self.zero += 1;
        } else if v > 0.0 {
            self.pos += 1;
            self.pinf += u64::from(v == f64::INFINITY);
        } else {
            self.neg += 1;
            self.ninf += u64::from(v == f64::NEG_INFINITY);
        }
    }

    #[inline]
    fn merge(&mut self, o: &St, acc: Accum) {
        self.sum = acc.add(self.sum, o.sum);
        self.sq = acc.add(self.sq, o.sq);
        self.mx = vmax(self.mx, o.mx);
        self.mn = vmin(self.mn, o.mn);
        self.imx = self.imx.max(o.imx);
        self.imn = self.imn.min(o.imn);
        self.isum += o.isum;
        if o.nan != 0 {
            if self.nan == 0 || o.fidx < self.fidx {
                self.fidx = o.fidx;
                self.fraw = o.fraw;
            }
            if self.nan == 0 || o.lidx > self.lidx {
                self.lidx = o.lidx;
                self.lraw = o.lraw;
            }
        }
        self.nan += o.nan;
        self.pinf += o.pinf;
        self.ninf += o.ninf;
        self.zero += o.zero;
        self.pos += o.pos;
        self.neg += o.neg;
    }

    /// The warp shuffle tree: lane 0 ends with the warp's state.
    fn warp_reduce(lanes: &mut [St; 32], acc: Accum) {
        let mut off = 16;
        while off > 0 {
            // Lanes >= off only feed lanes < off from here on; lane l + off is read before
            // this step writes it, as in the simultaneous shuffle.
            for l in 0..off {
                let o = lanes[l + off];
                lanes[l].merge(&o, acc);
            }
            off >>= 1;
        }
    }

    fn to_partial(self, is_int: bool) -> Partial {
        Partial {
            max: if is_int { self.imx as f64 } else { self.mx },
            min: if is_int { self.imn as f64 } else { self.mn },
            sum: if is_int { 0.0 } else { self.sum },
            sum_sq: self.sq,
            imax: if is_int { self.imx } else { 0 },
            imin: if is_int { self.imn } else { 0 },
            isum_lo: self.isum as u64,
            isum_hi: (self.isum >> 64) as i64,
            nan: self.nan,
            pos_inf: self.pinf,
            neg_inf: self.ninf,
            zero: self.zero,
            pos: self.pos,
            neg: self.neg,
            first_nan_idx: self.fidx,
            first_nan_raw: self.fraw,
            last_nan_idx: self.lidx,
            last_nan_raw: self.lraw,
        }
    }
}

/// Raw bits of element `i` (little-endian).
#[inline]
fn raw_at(data: &[u8], size: usize, i: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..size].copy_from_slice(&data[i * size..i * size + size]);
    u64::from_le_bytes(b)
}

/// The block partials kernel `kernel` writes for `elems` little-endian elements in `data`.
pub fn partials(kernel: KernelId, data: &[u8], elems: usize) -> Result<Vec<Partial>, Error> {
    let dtype = kernel.dtype;
    let size = dtype.size().ok_or(Error::Unsupported(dtype))?;
    dtype.check_len(data.len(), elems)?;
    let acc = Accum::of(kernel);
    let is_int = !dtype.is_float();
    let n = elems as u64;
    let unit = unit_elems(size);
    let units = n.div_ceil(unit);
    let grid = u64::from(grid_for(size, n));
    let block = u64::from(BLOCK);
    let stride = grid * block;
    let mut out = Vec::with_capacity(grid as usize);
    for b in 0..grid {
        let mut warps = [St::EMPTY; 32];
        for w in 0..(block / 32) {
            let mut lanes = [St::EMPTY; 32];
            for (l, st) in lanes.iter_mut().enumerate() {
                let g = b * block + w * 32 + l as u64;
                let mut u = g;
                while u < units {
                    let base = u * unit;
                    for i in base..(base + unit).min(n) {
                        st.push(dtype, acc, raw_at(data, size, i as usize), i);
                    }
                    u += stride;
                }
            }
            St::warp_reduce(&mut lanes, acc);
            warps[w as usize] = lanes[0];
        }
        St::warp_reduce(&mut warps, acc);
        out.push(warps[0].to_partial(is_int));
    }
    Ok(out)
}

/// What the device reports for a tensor: [`partials`] combined by [`combine`], exactly as
/// `CudaStats::summarize` combines the partials a GPU wrote.
///
/// Unsupported dtypes give [`Error::Unsupported`]; an empty tensor gives `Ok(None)`.
pub fn summarize(
    dtype: DType,
    data: &[u8],
    elems: usize,
    precision: Precision,
) -> Result<Option<DeviceSummary>, Error> {
    let kernel = KernelId::for_dtype(dtype, precision).ok_or(Error::Unsupported(dtype))?;
    let parts = partials(kernel, data, elems)?;
    combine(kernel, precision, elems as u64, &parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn one_partial_per_block_and_counts_cover_every_element() {
        let n = 3 * 1024 + 5; // four blocks of 256 threads x 4 f32
        let data = f32s(&(0..n).map(|i| i as f32 - 100.0).collect::<Vec<_>>());
        let k = KernelId::for_dtype(DType::Float32, Precision::High).unwrap();
        let p = partials(k, &data, n).unwrap();
        assert_eq!(p.len(), 4);
        let total: u64 = p.iter().map(|p| p.zero + p.pos + p.neg + p.nan).sum();
        assert_eq!(total, n as u64);
        // Block 0 holds elements 0..1024 (values -100..923), block 3 the 5 tail elements.
        assert_eq!((p[0].min, p[0].max), (-100.0, 923.0));
        assert_eq!(p[3].pos, 5);
    }

    #[test]
    fn grid_stride_wraps_beyond_the_largest_grid() {
        // More units than 1024 blocks x 256 threads: thread 0 also takes unit G*B.
        let n = 1024 * 256 * 16 + 16; // u8: 16 per unit
        let mut data = vec![1u8; n];
        data[n - 1] = 200;
        let k = KernelId::for_dtype(DType::UInt8, Precision::High).unwrap();
        let p = partials(k, &data, n).unwrap();
        assert_eq!(p.len(), 1024);
        assert_eq!(p[0].imax, 200);
        assert_eq!(p[1].imax, 1);
    }

    #[test]
    fn unsupported_and_bad_lengths_are_errors() {
        assert_eq!(
            summarize(DType::UInt32, &[0; 4], 1, Precision::High),
            Err(Error::Unsupported(DType::UInt32))
        );
        assert!(matches!(
            summarize(DType::Float32, &[0; 5], 2, Precision::High),
            Err(Error::Core(_))
        ));
        assert_eq!(summarize(DType::Float32, &[], 0, Precision::Low), Ok(None));
    }
}
