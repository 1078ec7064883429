//! The portable pair kernel: one element pair at a time in `f64`, for every real dtype (and
//! the oracle of the AVX2 kernel).

use super::{PairMetrics, Tolerance};
use crate::{DType, stats::element_f64};

/// The position of a float's bit pattern `bits` (of `width` bits, sign bit on top) on the
/// number line of that format: adjacent representable values differ by 1.
fn ordered(bits: u64, width: u32) -> i128 {
    let sign = 1u64 << (width - 1);
    if bits & sign != 0 {
        -((bits & !sign) as i128)
    } else {
        bits as i128
    }
}

/// The raw bits of element `i` of a float dtype, `None` for other dtypes.
fn float_bits(dtype: DType, data: &[u8], i: usize) -> Option<(u64, u32)> {
    let le = |n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&data[i * n..i * n + n]);
        u64::from_le_bytes(b)
    };
    match dtype {
        DType::Float8E4M3FN | DType::Float8E5M2 | DType::Float8E4M3FNUZ | DType::Float8E5M2FNUZ => {
            Some((le(1), 8))
        }
        DType::Float16 | DType::BFloat16 => Some((le(2), 16)),
        DType::Float32 => Some((le(4), 32)),
        DType::Float64 => Some((le(8), 64)),
        _ => None,
    }
}

/// The exact integer value of element `i` of an integer or bool dtype.
fn int_value(dtype: DType, data: &[u8], i: usize) -> i128 {
    let le = |n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&data[i * n..i * n + n]);
        u64::from_le_bytes(b)
    };
    match dtype {
        DType::Int16 => le(2) as u16 as i16 as i128,
        DType::Int32 => le(4) as u32 as i32 as i128,
        DType::Int64 => le(8) as i64 as i128,
        DType::UInt16 | DType::UInt32 | DType::UInt64 => le(dtype.size().unwrap_or(8)) as i128,
        // Bool, int4, uint4, int8, uint1, uint8: exact in f64.
        _ => element_f64(dtype, data, i) as i128,
    }
}

/// Pair metrics of the first `n` elements of `a` and `b`.
pub(super) fn pair(dtype: DType, a: &[u8], b: &[u8], n: usize, tol: Tolerance) -> PairMetrics {
    let mut m = PairMetrics::EMPTY;
    m.count = n as u64;
    for i in 0..n {
        let x = element_f64(dtype, a, i);
        let y = element_f64(dtype, b, i);
        if !(x.is_finite() && y.is_finite()) {
            if !(x == y || (x.is_nan() && y.is_nan())) {
                m.nonfinite_mismatch += 1;
            }
            continue;
        }
        m.finite += 1;
        m.dot += x * y;
        m.sq_a += x * x;
        m.sq_b += y * y;
        let d = (x - y).abs();
        let ay = y.abs();
        m.max_abs = m.max_abs.max(d);
        if d != 0.0 {
            m.max_rel = m.max_rel.max(d / ay);
        }
        m.rel_over_1e3 += (d > 0.001 * ay) as u64;
        m.rel_over_5e3 += (d > 0.005 * ay) as u64;
        m.not_close += (d > tol.atol + tol.rtol * ay) as u64;
        let ulp = if x == y {
            0
        } else if let (Some((ba, w)), Some((bb, _))) =
            (float_bits(dtype, a, i), float_bits(dtype, b, i))
        {
            (ordered(ba, w) - ordered(bb, w)).unsigned_abs()
        } else {
            (int_value(dtype, a, i) - int_value(dtype, b, i)).unsigned_abs()
        };
        m.max_ulp = m.max_ulp.max(u64::try_from(ulp).unwrap_or(u64::MAX));
    }
    m
}
