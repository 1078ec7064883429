//! tract's [`DatumType`] as opdump's [`DType`].

use dump_core::DType;
use tract_onnx::prelude::DatumType;

/// The [`DType`] of a tract datum type; `None` for the types MindSpore's dump cannot hold
/// (symbolic `TDim`, `String`, `Blob`, quantized and complex-integer types).
pub fn dtype_of(dt: DatumType) -> Option<DType> {
    Some(match dt {
        DatumType::Bool => DType::Bool,
        DatumType::U8 => DType::UInt8,
        DatumType::U16 => DType::UInt16,
        DatumType::U32 => DType::UInt32,
        DatumType::U64 => DType::UInt64,
        DatumType::I8 => DType::Int8,
        DatumType::I16 => DType::Int16,
        DatumType::I32 => DType::Int32,
        DatumType::I64 => DType::Int64,
        DatumType::F16 => DType::Float16,
        DatumType::F32 => DType::Float32,
        DatumType::F64 => DType::Float64,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_types_map_and_symbolic_string_and_quantized_do_not() {
        assert_eq!(dtype_of(DatumType::F16), Some(DType::Float16));
        assert_eq!(dtype_of(DatumType::I64), Some(DType::Int64));
        assert_eq!(dtype_of(DatumType::Bool), Some(DType::Bool));
        assert_eq!(dtype_of(DatumType::U8), Some(DType::UInt8));
        assert_eq!(dtype_of(DatumType::TDim), None);
        assert_eq!(dtype_of(DatumType::String), None);
        let q = DatumType::QI8(tract_onnx::prelude::QParams::ZpScale {
            zero_point: 0,
            scale: 0.5,
        });
        assert_eq!(dtype_of(q), None);
    }
}
