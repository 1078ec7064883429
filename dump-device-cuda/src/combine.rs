//! Combining block partials on the host, in block order: the last step of a device reduction,
//! and [`DeviceSummary`], its result.

use crate::arith::{Accum, raw_to_f64, vmax, vmin};
use crate::{Error, KernelId, Partial, Precision};
use dump_core::{DType, Summary};
use dump_stats::precision::{
    DeviceStats, DeviceValue, device_supports_avg, device_supports_l2norm, device_supports_minmax,
};

/// The statistics of a tensor computed on a device.
///
/// [`summary`](DeviceSummary::summary) has host [`Summary`] semantics for counts, extrema
/// and NaN (exactly the host's values, except that a zero extremum has a fixed sign when both
/// `+0` and `-0` occur: `+0` for max, `-0` for min). Its `sum` and `sum_sq` are the device
/// accumulators: f64 in a tree order for `high` (they differ from a sequential host f64 sum
/// only by rounding order), source-dtype values for `low`.
/// [`device_stats`](DeviceSummary::device_stats) gives MindSpore's device-statistics row
/// values under the precision policy of `dump_stats::precision`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceSummary {
    /// The tensor's dtype.
    pub dtype: DType,
    /// The precision the sums were accumulated in.
    pub precision: Precision,
    /// Host-comparable statistics.
    pub summary: Summary,
    /// The exact sum, for integer and bool tensors.
    pub int_sum: Option<i128>,
    /// Largest value exactly, for integer and bool tensors.
    pub int_max: Option<i64>,
    /// Smallest value exactly, for integer and bool tensors.
    pub int_min: Option<i64>,
}

/// Combines the block partials of a kernel run over `elems` elements, in block order.
///
/// Sums add left to right (`((p0 + p1) + p2) + ...`) with the kernel's accumulation
/// rounding, so a fixed grid gives the same bits on every run. Returns `Ok(None)` for an
/// empty tensor. Partials whose counts do not add up to `elems` give [`Error::Length`].
pub fn combine(
    kernel: KernelId,
    precision: Precision,
    elems: u64,
    partials: &[Partial],
) -> Result<Option<DeviceSummary>, Error> {
    if elems == 0 {
        return Ok(None);
    }
    let acc = Accum::of(kernel);
    let is_int = !kernel.dtype.is_float();
    let mut t = Partial {
        max: f64::NEG_INFINITY,
        min: f64::INFINITY,
        imax: i64::MIN,
        imin: i64::MAX,
        ..Partial::default()
    };
    let mut isum = 0i128;
    for p in partials {
        t.sum = acc.add(t.sum, p.sum);
        t.sum_sq = acc.add(t.sum_sq, p.sum_sq);
        t.max = vmax(t.max, p.max);
        t.min = vmin(t.min, p.min);
        t.imax = t.imax.max(p.imax);
        t.imin = t.imin.min(p.imin);
        isum += p.isum();
        if p.nan != 0 {
            if t.nan == 0 || p.first_nan_idx < t.first_nan_idx {
                t.first_nan_idx = p.first_nan_idx;
                t.first_nan_raw = p.first_nan_raw;
            }
            if t.nan == 0 || p.last_nan_idx > t.last_nan_idx {
                t.last_nan_idx = p.last_nan_idx;
                t.last_nan_raw = p.last_nan_raw;
            }
        }
        t.nan += p.nan;
        t.pos_inf += p.pos_inf;
        t.neg_inf += p.neg_inf;
        t.zero += p.zero;
        t.pos += p.pos;
        t.neg += p.neg;
    }
    let counted = t.nan + t.zero + t.pos + t.neg;
    if counted != elems {
        return Err(Error::Length {
            what: "elements counted by the block partials",
            expected: usize::try_from(elems).unwrap_or(usize::MAX),
            actual: usize::try_from(counted).unwrap_or(usize::MAX),
        });
    }
    // A NaN sum (no NaN element is summed: it comes from `inf + -inf`) carries the NaN the
    // hardware made: canonical positive on NVIDIA GPUs, the CPU's default NaN on the host
    // (negative on x86-64). Report the host CPU's, so device and host rows print alike.
    if t.sum.is_nan() {
        t.sum = host_default_nan();
    }
    if t.sum_sq.is_nan() {
        t.sum_sq = host_default_nan();
    }
    let dtype = kernel.dtype;
    let nan_val = |raw| {
        if t.nan != 0 {
            raw_to_f64(dtype, raw)
        } else {
            0.0
        }
    };
    let summary = Summary {
        count: elems,
        max: if is_int { t.imax as f64 } else { t.max },
        min: if is_int { t.imin as f64 } else { t.min },
        sum: if is_int { isum as f64 } else { t.sum },
        sum_sq: t.sum_sq,
        nan: t.nan,
        pos_inf: t.pos_inf,
        neg_inf: t.neg_inf,
        zero: t.zero,
        pos: t.pos,
        neg: t.neg,
        first_nan: nan_val(t.first_nan_raw),
        last_nan: nan_val(t.last_nan_raw),
    };
    Ok(Some(DeviceSummary {
        dtype,
        precision,
        summary,
        int_sum: is_int.then_some(isum),
        int_max: is_int.then_some(t.imax),
        int_min: is_int.then_some(t.imin),
    }))
}

/// The NaN this CPU's `inf + -inf` gives (`-nan` on x86-64, `nan` on AArch64).
pub fn host_default_nan() -> f64 {
    core::hint::black_box(f64::INFINITY) + core::hint::black_box(f64::NEG_INFINITY)
}

impl DeviceSummary {
    /// MindSpore's device-statistics values (`Max`, `Min`, `Mean`, `Norm`) for this tensor
    /// under its precision, with the same final steps as
    /// [`dump_stats::device_statistics`]: `high` rounds `sum / n` and `sqrt(sum_sq)` once to
    /// f32; `low` rounds them to the source dtype (integers: exact sum / n truncated).
    /// Only the summation order differs from the host model of the policy (see
    /// [`crate::model`] for what that changes).
    pub fn device_stats(&self) -> DeviceStats {
        let s = &self.summary;
        let n = s.count as f64;
        let mut out = DeviceStats::NULL;
        if self.dtype.is_float() {
            let low = matches!(self.precision, Precision::Low);
            let acc = Accum::of(KernelId {
                dtype: self.dtype,
                low,
            });
            let (avg, l2) = match (self.precision, self.dtype) {
                (Precision::High, _) => (
                    f64::from((s.sum / n) as f32),
                    f64::from(s.sum_sq.sqrt() as f32),
                ),
                (Precision::Low, DType::Float64) => (s.sum / n, s.sum_sq.sqrt()),
                (Precision::Low, _) => (
                    acc.round(f64::from((s.sum / n) as f32)),
                    acc.round(f64::from((s.sum_sq as f32).sqrt())),
                ),
            };
            // A NaN element as it is; a NaN the sums made (inf + -inf) as x86 makes it.
            let nan_or = |v: f64| {
                DeviceValue::Float(if s.nan != 0 {
                    s.first_nan
                } else {
                    dump_core::stats::pin_generated_nan(v)
                })
            };
            out.max = nan_or(s.max);
            out.min = nan_or(s.min);
            out.avg = nan_or(avg);
            if device_supports_l2norm(self.dtype) {
                out.l2norm = nan_or(l2);
            }
            return out;
        }
        if !device_supports_minmax(self.dtype, self.precision) {
            return out;
        }
        let (max, min, sum) = (
            self.int_max.unwrap_or(0),
            self.int_min.unwrap_or(0),
            self.int_sum.unwrap_or(0),
        );
        if self.dtype == DType::Bool {
            out.max = DeviceValue::Bool(max != 0);
            out.min = DeviceValue::Bool(min != 0);
            return out;
        }
        out.max = DeviceValue::Int(max);
        out.min = DeviceValue::Int(min);
        if device_supports_avg(self.dtype) {
            out.avg = match self.precision {
                Precision::High => DeviceValue::Float(f64::from((sum as f64 / n) as f32)),
                // |sum / n| <= max(|min|, |max|), so the quotient fits i64.
                Precision::Low => DeviceValue::Int((sum / i128::from(s.count)) as i64),
            };
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(dtype: DType) -> KernelId {
        KernelId::for_dtype(dtype, Precision::High).unwrap()
    }

    #[test]
    fn empty_tensor_has_no_statistics() {
        assert_eq!(
            combine(k(DType::Float32), Precision::High, 0, &[]),
            Ok(None)
        );
    }

    #[test]
    fn counts_must_cover_the_tensor() {
        let p = Partial {
            pos: 3,
            ..Partial::default()
        };
        let e = combine(k(DType::Float32), Precision::High, 4, &[p]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "elements counted by the block partials: expected 4, got 3"
        );
    }

    #[test]
    fn nan_resolution_uses_element_indices_not_block_order() {
        // Block 0 saw elements 10 and 50 as NaN, block 1 saw element 3: the first NaN is 3.
        let neg = 0xffc0_0000u64;
        let pos = 0x7fc0_0000u64;
        let a = Partial {
            nan: 2,
            first_nan_idx: 10,
            first_nan_raw: pos,
            last_nan_idx: 50,
            last_nan_raw: pos,
            max: f64::NEG_INFINITY,
            min: f64::INFINITY,
            ..Partial::default()
        };
        let b = Partial {
            nan: 1,
            first_nan_idx: 3,
            first_nan_raw: neg,
            last_nan_idx: 3,
            last_nan_raw: neg,
            ..a
        };
        let s = combine(k(DType::Float32), Precision::High, 3, &[a, b])
            .unwrap()
            .unwrap();
        assert!(s.summary.first_nan.is_sign_negative() && s.summary.first_nan.is_nan());
        assert!(s.summary.last_nan.is_sign_positive() && s.summary.last_nan.is_nan());
        assert_eq!(s.device_stats().max.to_string(), "-nan");
    }

    #[test]
    fn nan_sums_carry_the_host_cpus_nan() {
        // A GPU block summed +inf and -inf into its canonical (positive) NaN.
        let gpu_nan = f64::from_bits(0x7fff_ffff_ffff_ffff);
        let p = Partial {
            sum: gpu_nan,
            sum_sq: f64::INFINITY,
            max: f64::INFINITY,
            min: f64::NEG_INFINITY,
            pos: 1,
            neg: 1,
            pos_inf: 1,
            neg_inf: 1,
            ..Partial::default()
        };
        let s = combine(k(DType::Float32), Precision::High, 2, &[p])
            .unwrap()
            .unwrap();
        let host = dump_core::stats::summarize_reference(
            DType::Float32,
            &[f32::INFINITY.to_le_bytes(), f32::NEG_INFINITY.to_le_bytes()].concat(),
            2,
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.summary.sum.to_bits(), host.sum.to_bits());
        assert_eq!(
            dump_core::fmt::g(s.summary.avg()).as_str(),
            dump_core::fmt::g(host.avg()).as_str()
        );
    }

    #[test]
    fn integer_sums_are_exact_across_blocks() {
        let p = Partial {
            imax: i64::MAX,
            imin: i64::MAX,
            isum_lo: i64::MAX as u64,
            isum_hi: 0,
            pos: 1,
            ..Partial::default()
        };
        let s = combine(k(DType::Int64), Precision::Low, 2, &[p, p])
            .unwrap()
            .unwrap();
        assert_eq!(s.int_sum, Some(2 * i128::from(i64::MAX)));
        // The low-precision mean of two i64::MAX is i64::MAX, with no overflow.
        assert_eq!(s.device_stats().avg, DeviceValue::Int(i64::MAX));
    }
}
