//! A tract [`Tensor`] handed to the Dumper without a copy.

use dump_host::TensorRef;
use tract_onnx::prelude::{DatumType, TValue, Tensor};

use crate::dtype::dtype_of;

/// Why a tensor is not dumped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    /// No MindSpore dump type for this datum type.
    Type(DatumType),
    /// The bytes are not plain host memory (block-quantized or device-resident storage).
    NotPlain,
}

impl Skip {
    /// One key per kind of problem, so each is reported once.
    pub(crate) fn key(self) -> String {
        match self {
            Skip::Type(dt) if dt.is_quantized() => "quantized".to_owned(),
            Skip::Type(dt) => format!("{dt:?}"),
            Skip::NotPlain => "not plain".to_owned(),
        }
    }

    /// What is skipped and why.
    pub(crate) fn describe(self) -> String {
        match self {
            Skip::Type(dt) => format!(
                "tract type {dt:?} has no MindSpore dump type (supported: bool, u8-u64, i8-i64, \
                 f16, f32, f64)"
            ),
            Skip::NotPlain => "storage is not plain host memory (exotic or device tensor)".into(),
        }
    }
}

/// `t` as a host [`TensorRef`] over tract's own buffer (tract tensors are dense, C order).
pub(crate) fn tensor_ref(t: &Tensor) -> Result<TensorRef<'_>, Skip> {
    let dt = dtype_of(t.datum_type()).ok_or(Skip::Type(t.datum_type()))?;
    let view = t.as_plain_ram().ok_or(Skip::NotPlain)?;
    Ok(TensorRef::host(dt, t.shape(), view.as_bytes()))
}

/// A watched output's handle (watcher mode): a clone of the node's [`TValue`], which shares
/// the tensor's buffer, read in place every time.
pub(crate) struct Watched(pub(crate) TValue);

impl dump_host::watcher::WatchedTensor for Watched {
    fn read(&self, f: &mut dyn FnMut(TensorRef<'_>)) {
        // A tensor with no dump view is reported unreadable by the watcher (no call back).
        if let Ok(r) = tensor_ref(&self.0) {
            f(r)
        }
    }
}

/// A tract tensor from C-order little-endian host bytes (an `.npy` file's data), or why not.
pub fn host_tensor(
    dtype: dump_core::DType,
    shape: &[usize],
    bytes: &[u8],
) -> Result<Tensor, crate::Error> {
    use dump_core::DType as D;
    use tract_onnx::prelude::f16;
    fn le<T: tract_onnx::prelude::Datum + Copy, const N: usize>(
        shape: &[usize],
        bytes: &[u8],
        f: fn([u8; N]) -> T,
    ) -> Result<Tensor, String> {
        let want = shape.iter().product::<usize>() * N;
        if bytes.len() != want {
            return Err(format!(
                "{} bytes of data, shape {shape:?} needs {want}",
                bytes.len()
            ));
        }
        let v: Vec<T> = bytes
            .chunks_exact(N)
            .map(|c| f(c.try_into().unwrap_or([0; N])))
            .collect();
        Tensor::from_shape(shape, &v).map_err(|e| format!("{e:#}"))
    }
    let t = match dtype {
        D::Bool => le(shape, bytes, |[b]: [u8; 1]| b != 0),
        D::Int8 => le(shape, bytes, i8::from_le_bytes),
        D::Int16 => le(shape, bytes, i16::from_le_bytes),
        D::Int32 => le(shape, bytes, i32::from_le_bytes),
        D::Int64 => le(shape, bytes, i64::from_le_bytes),
        D::UInt8 => le(shape, bytes, u8::from_le_bytes),
        D::UInt16 => le(shape, bytes, u16::from_le_bytes),
        D::UInt32 => le(shape, bytes, u32::from_le_bytes),
        D::UInt64 => le(shape, bytes, u64::from_le_bytes),
        D::Float16 => le(shape, bytes, f16::from_le_bytes),
        D::Float32 => le(shape, bytes, f32::from_le_bytes),
        D::Float64 => le(shape, bytes, f64::from_le_bytes),
        other => Err(format!("tract has no {other} tensors")),
    };
    t.map_err(|message| crate::Error::Tensor { message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dump_core::DType;

    #[test]
    fn host_bytes_round_trip_through_a_tract_tensor_without_change() {
        let v = [1.5f32, -2.0, 3.25, 0.0];
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let t = host_tensor(DType::Float32, &[2, 2], &bytes).unwrap();
        let r = tensor_ref(&t).unwrap();
        assert_eq!(
            format!("{r:?}"),
            format!("{:?}", TensorRef::host(DType::Float32, &[2, 2], &bytes))
        );
        assert_eq!(t.as_plain_ram().unwrap().as_bytes(), &bytes[..]);
        let e = host_tensor(DType::Float32, &[3], &bytes)
            .unwrap_err()
            .to_string();
        assert!(e.contains("16 bytes") && e.contains("needs 12"), "{e}");
        let e = host_tensor(DType::BFloat16, &[1], &[0, 0]).unwrap_err();
        assert!(e.to_string().contains("bfloat16"), "{e}");
        let t = tract_onnx::prelude::Tensor::from(tract_onnx::prelude::TDim::from(3));
        assert_eq!(
            tensor_ref(&t).unwrap_err(),
            Skip::Type(tract_onnx::prelude::DatumType::TDim)
        );
    }
}
