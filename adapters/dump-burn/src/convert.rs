//! burn tensors as [`TensorRef`]s: the tensor's data is read to the host once
//! ([`Tensor::try_to_data`], a copy on every backend) and its bytes handed to the Dumper.

use burn::tensor::{BoolStore, DType as BurnDType, Tensor, TensorData, kind::Basic};
use dump_core::DType;
use dump_host::TensorRef;

/// The MindSpore dtype of a burn dtype; `None` for quantized tensors (no element type the
/// dump layout knows).
pub fn dtype_of(d: BurnDType) -> Option<DType> {
    Some(match d {
        BurnDType::F64 => DType::Float64,
        // Flex32: f32 storage with relaxed precision on some GPU backends.
        BurnDType::F32 | BurnDType::Flex32 => DType::Float32,
        BurnDType::F16 => DType::Float16,
        BurnDType::BF16 => DType::BFloat16,
        BurnDType::I64 => DType::Int64,
        BurnDType::I32 => DType::Int32,
        BurnDType::I16 => DType::Int16,
        BurnDType::I8 => DType::Int8,
        BurnDType::U64 => DType::UInt64,
        BurnDType::U32 => DType::UInt32,
        BurnDType::U16 => DType::UInt16,
        BurnDType::U8 | BurnDType::Bool(BoolStore::U8) => DType::UInt8,
        BurnDType::Bool(BoolStore::Native) => DType::Bool,
        BurnDType::Bool(BoolStore::U32) => DType::UInt32,
        BurnDType::QFloat(_) => return None,
    })
}

/// Calls `f` with `data` as a host [`TensorRef`], or says why it cannot (a dtype with no
/// MindSpore dtype).
pub fn data_ref<R>(data: &TensorData, f: impl FnOnce(TensorRef<'_>) -> R) -> Result<R, String> {
    let dtype = dtype_of(data.dtype()).ok_or_else(|| {
        format!(
            "burn dtype {:?} has no MindSpore dtype (float, int, uint and bool tensors do); \
             its tensors are skipped",
            data.dtype()
        )
    })?;
    Ok(f(TensorRef::host(
        dtype,
        data.shape().as_slice(),
        data.as_bytes(),
    )))
}

/// Calls `f` with `t` as a [`TensorRef`]: its data is read to the host first (one copy; on a
/// GPU backend a device-to-host transfer). The reason is returned when the tensor cannot be
/// read or has no MindSpore dtype.
pub fn with_tensor_ref<const D: usize, K: Basic, R>(
    t: &Tensor<D, K>,
    f: impl FnOnce(TensorRef<'_>) -> R,
) -> Result<R, String> {
    let data = t
        .try_to_data()
        .map_err(|e| format!("a burn tensor could not be read to the host: {e}"))?;
    data_ref(&data, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_dtype_maps_and_quantized_does_not() {
        assert_eq!(dtype_of(BurnDType::F32), Some(DType::Float32));
        assert_eq!(dtype_of(BurnDType::BF16), Some(DType::BFloat16));
        assert_eq!(
            dtype_of(BurnDType::Bool(BoolStore::Native)),
            Some(DType::Bool)
        );
        assert_eq!(dtype_of(BurnDType::I64), Some(DType::Int64));
    }

    #[test]
    fn host_data_keeps_its_bytes_and_shape() {
        let data = TensorData::new(vec![1f32, -2.0, 3.5, 0.0], [2, 2]);
        let (dtype, shape, bytes) = data_ref(&data, |r| {
            (
                r.dtype(),
                r.shape().to_vec(),
                r.host_bytes().map(<[u8]>::to_vec),
            )
        })
        .unwrap();
        assert_eq!((dtype, shape), (DType::Float32, vec![2, 2]));
        assert_eq!(bytes.unwrap(), data.as_bytes());
    }
}
