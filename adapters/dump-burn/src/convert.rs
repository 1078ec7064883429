//! burn tensors as [`TensorRef`]s: the tensor's data is read to the host once ([`HostData`],
//! a copy on every backend) and its bytes handed to the Dumper.

use burn::tensor::{Bool, BoolStore, DType as BurnDType, Int, Tensor, TensorData};
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

/// A burn tensor read to the host for the dump: its data in C order.
pub trait HostData {
    /// The tensor's values on the host, or why they cannot be read.
    fn host_data(&self) -> Result<TensorData, String>;
}

fn unreadable(e: impl std::fmt::Display) -> String {
    format!("a burn tensor could not be read to the host: {e}")
}

impl<const D: usize> HostData for Tensor<D> {
    /// A product by 1, then the result's data. burn 0.22.1's `Tensor::to_data` on a tensor
    /// that is still shared (every tensor the model goes on using) walks it element by element
    /// on the ndarray backend (≈ 4.8–10 ms for 173k f32 in the `burn` bench); the product is a
    /// fresh buffer that `into_data` moves out (0.075 ms, product included). `x * 1` is `x`
    /// bit for bit for every value (signed zeros and infinities included; a NaN stays a NaN),
    /// and it runs on the inner backend, outside autodiff's graph.
    fn host_data(&self) -> Result<TensorData, String> {
        (self.clone().without_autodiff() * 1.0)
            .try_into_data()
            .map_err(unreadable)
    }
}

impl<const D: usize> HostData for Tensor<D, Int> {
    fn host_data(&self) -> Result<TensorData, String> {
        self.try_to_data().map_err(unreadable)
    }
}

impl<const D: usize> HostData for Tensor<D, Bool> {
    fn host_data(&self) -> Result<TensorData, String> {
        self.try_to_data().map_err(unreadable)
    }
}

/// Calls `f` with `t` as a [`TensorRef`]: its data is read to the host first ([`HostData`]:
/// one copy; on a GPU backend a device-to-host transfer). The reason is returned when the
/// tensor cannot be read or has no MindSpore dtype.
pub fn with_tensor_ref<T: HostData + ?Sized, R>(
    t: &T,
    f: impl FnOnce(TensorRef<'_>) -> R,
) -> Result<R, String> {
    data_ref(&t.host_data()?, f)
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
    fn a_float_tensor_reads_back_bit_for_bit() {
        let v = [
            0.0f32,
            -0.0,
            1.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE / 4.0,
        ];
        let t = Tensor::<1>::from_data(TensorData::new(v.to_vec(), [6]), &Default::default());
        let keep = t.clone(); // shared, as a model's tensors are
        let got = t.host_data().unwrap();
        let want: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(got.as_bytes(), want.as_slice());
        assert_eq!(keep.host_data().unwrap().shape().as_slice(), [6]);
        let nan = Tensor::<1>::from_data(TensorData::new(vec![f32::NAN], [1]), &Default::default());
        assert!(nan.host_data().unwrap().as_slice::<f32>().unwrap()[0].is_nan());
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
