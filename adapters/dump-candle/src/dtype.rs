//! candle's element types and the dump's, both ways.

use dump_core::DType;

/// The dump dtype of a candle dtype (`F8E4M3`, OCP's E4M3 with NaN at `S.1111.111` and 448
/// its largest value: [`DType::Float8E4M3FN`]); `None` for candle's 6/4-bit float formats and
/// its E8M0 scale type, which have no dump dtype.
pub fn dtype_of(d: candle_core::DType) -> Option<DType> {
    use candle_core::DType as C;
    Some(match d {
        C::U8 => DType::UInt8,
        C::U32 => DType::UInt32,
        C::I16 => DType::Int16,
        C::I32 => DType::Int32,
        C::I64 => DType::Int64,
        C::BF16 => DType::BFloat16,
        C::F16 => DType::Float16,
        C::F32 => DType::Float32,
        C::F64 => DType::Float64,
        C::F8E4M3 => DType::Float8E4M3FN,
        _ => return None,
    })
}

/// The candle dtype of a dump dtype (the inverse of [`dtype_of`]).
pub fn candle_dtype(d: DType) -> Option<candle_core::DType> {
    use candle_core::DType as C;
    [
        C::U8,
        C::U32,
        C::I16,
        C::I32,
        C::I64,
        C::BF16,
        C::F16,
        C::F32,
        C::F64,
        C::F8E4M3,
    ]
    .into_iter()
    .find(|&c| dtype_of(c) == Some(d))
}
