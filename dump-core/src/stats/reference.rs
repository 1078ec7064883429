//! The scalar reference: one element at a time in `f64`, exactly as MindSpore's host
//! statistics define it. Slow; the oracle for the fast kernels.

use super::Summary;
use crate::{DType, Error};

/// Statistics computed one element at a time in `f64` (the oracle for the fast kernels).
///
/// Same contract as [`super::summarize`].
pub fn summarize_reference(
    dtype: DType,
    data: &[u8],
    elems: usize,
) -> Result<Option<Summary>, Error> {
    if dtype.is_complex() {
        return Err(Error::Unsupported(dtype));
    }
    dtype.check_len(data.len(), elems)?;
    if elems == 0 {
        return Ok(None);
    }
    let mut s = Summary::EMPTY;
    for i in 0..elems {
        s.push(element_f64(dtype, data, i));
    }
    Ok(Some(s))
}

/// Element `i` of a real-typed buffer as `f64` (int4 sign-extended, uint4 zero-extended, uint1 MSB
/// first, float8 widened exactly).
/// The caller guarantees `data` holds at least `i + 1` elements.
pub(crate) fn element_f64(dtype: DType, data: &[u8], i: usize) -> f64 {
    macro_rules! le {
        ($t:ty) => {{
            const N: usize = core::mem::size_of::<$t>();
            let mut b = [0u8; N];
            b.copy_from_slice(&data[i * N..i * N + N]);
            <$t>::from_le_bytes(b)
        }};
    }
    match dtype {
        DType::Bool => (data[i] != 0) as u8 as f64,
        DType::Int4 => {
            let byte = data[i / 2];
            let nib = if i.is_multiple_of(2) {
                byte & 0x0f
            } else {
                byte >> 4
            };
            (((nib << 4) as i8) >> 4) as f64
        }
        DType::UInt4 => {
            let byte = data[i / 2];
            (if i.is_multiple_of(2) {
                byte & 0x0f
            } else {
                byte >> 4
            }) as f64
        }
        DType::UInt1 => ((data[i / 8] >> (7 - i % 8)) & 1) as f64,
        DType::Int8 => data[i] as i8 as f64,
        DType::UInt8 => data[i] as f64,
        DType::Int16 => le!(i16) as f64,
        DType::UInt16 => le!(u16) as f64,
        DType::Int32 => le!(i32) as f64,
        DType::UInt32 => le!(u32) as f64,
        DType::Int64 => le!(i64) as f64,
        DType::UInt64 => le!(u64) as f64,
        DType::Float16 => half::f16::from_bits(le!(u16)).to_f64(),
        DType::BFloat16 => f32::from_bits((le!(u16) as u32) << 16) as f64,
        DType::Float32 => le!(f32) as f64,
        DType::Float64 => le!(f64),
        DType::Float8E4M3FN | DType::Float8E5M2 | DType::Float8E4M3FNUZ | DType::Float8E5M2FNUZ => {
            match crate::widen::fp8_to_f32(dtype, data[i]) {
                Some(v) => v as f64,
                None => f64::NAN,
            }
        }
        DType::Complex64 | DType::Complex128 => f64::NAN,
    }
}
