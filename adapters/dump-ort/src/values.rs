//! ONNX Runtime values as [`TensorRef`]s (CPU tensors borrowed in place) and host tensors as
//! ONNX Runtime inputs.

use dump_core::DType;
use dump_host::TensorRef;
use dump_onnx::{Hand, HostTensor, Lookup};
use ort::{
    memory::Allocator,
    value::{DynTensor, DynTensorValueType, DynValue, TensorElementType, ValueRef, ValueType},
};

use crate::Error;

/// The dump dtype of an ONNX Runtime element type (int4 and uint4: two per byte, low nibble
/// first, as both ONNX Runtime and MindSpore store them; float8 E4M3FN, E5M2, E4M3FNUZ and
/// E5M2FNUZ: one byte per element); `None` for strings and 4-bit floats.
pub fn dtype_of(t: TensorElementType) -> Option<DType> {
    use TensorElementType as T;
    Some(match t {
        T::Float32 => DType::Float32,
        T::Uint8 => DType::UInt8,
        T::Int8 => DType::Int8,
        T::Uint16 => DType::UInt16,
        T::Int16 => DType::Int16,
        T::Int32 => DType::Int32,
        T::Int64 => DType::Int64,
        T::Bool => DType::Bool,
        T::Float16 => DType::Float16,
        T::Float64 => DType::Float64,
        T::Uint32 => DType::UInt32,
        T::Uint64 => DType::UInt64,
        T::Bfloat16 => DType::BFloat16,
        T::Int4 => DType::Int4,
        T::Uint4 => DType::UInt4,
        T::Float8E4M3FN => DType::Float8E4M3FN,
        T::Float8E5M2 => DType::Float8E5M2,
        T::Float8E4M3FNUZ => DType::Float8E4M3FNUZ,
        T::Float8E5M2FNUZ => DType::Float8E5M2FNUZ,
        T::Complex64 => DType::Complex64,
        T::Complex128 => DType::Complex128,
        _ => return None,
    })
}

fn element_type(d: DType) -> Option<TensorElementType> {
    use TensorElementType as T;
    [
        T::Float32,
        T::Uint8,
        T::Int8,
        T::Uint16,
        T::Int16,
        T::Int32,
        T::Int64,
        T::Bool,
        T::Float16,
        T::Float64,
        T::Uint32,
        T::Uint64,
        T::Bfloat16,
        T::Int4,
        T::Uint4,
        T::Float8E4M3FN,
        T::Float8E5M2,
        T::Float8E4M3FNUZ,
        T::Float8E5M2FNUZ,
        T::Complex64,
        T::Complex128,
    ]
    .into_iter()
    .find(|&t| dtype_of(t) == Some(d))
}

/// Calls `f` with `v` as a host [`TensorRef`] borrowing ONNX Runtime's buffer, or says why
/// it cannot ([`Error::Model`]: not a tensor, no MindSpore dtype, not in CPU memory).
pub fn with_tensor_ref<R>(v: &DynValue, f: impl FnOnce(TensorRef<'_>) -> R) -> Result<R, Error> {
    tensor_ref(v, f).map_err(Error::Model)
}

/// [`with_tensor_ref`] with the reason it cannot as text: a diagnostic line, not an error.
fn tensor_ref<R>(v: &DynValue, f: impl FnOnce(TensorRef<'_>) -> R) -> Result<R, String> {
    let ValueType::Tensor { ty, shape, .. } = v.dtype() else {
        return Err(format!(
            "{} values are not tensors and are skipped",
            v.dtype()
        ));
    };
    let dtype = dtype_of(*ty).ok_or_else(|| {
        format!("ONNX Runtime {ty:?} tensors have no MindSpore dtype and are skipped")
    })?;
    let v = v
        .view()
        .downcast::<DynTensorValueType>()
        .map_err(|e| format!("not a tensor: {e}"))?;
    if !v.memory_info().is_cpu_accessible() {
        return Err("tensors outside CPU memory are skipped".to_owned());
    }
    let dims: Vec<usize> = shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<_, _>>()
        .map_err(|_| format!("tensor with negative dims {:?}", &shape[..]))?;
    let elems = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let bytes = elems
        .and_then(|n| dtype.storage_bytes(n))
        .ok_or_else(|| format!("{dtype} {dims:?} overflows"))?;
    let ptr = v.data_ptr().cast::<u8>();
    let data: &[u8] = if bytes == 0 || ptr.is_null() {
        &[]
    } else {
        // SAFETY: `v` is a CPU-accessible tensor (checked above) of `dtype` and `dims`, whose
        // data ONNX Runtime stores contiguously in C order: `bytes` readable bytes at `ptr`,
        // alive and unchanged while `v` is borrowed.
        unsafe { std::slice::from_raw_parts(ptr, bytes) }
    };
    Ok(f(TensorRef::host(dtype, &dims, data)))
}

/// A host tensor (little-endian bytes in C order) as an ONNX Runtime input value (one copy,
/// into memory ONNX Runtime allocates).
pub fn host_tensor(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<DynValue, Error> {
    let ty = element_type(dtype)
        .ok_or_else(|| Error::Model(format!("{dtype} inputs are not supported")))?;
    let need = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .and_then(|n| dtype.storage_bytes(n));
    if need != Some(bytes.len()) {
        return Err(Error::Model(format!(
            "{} bytes given for {dtype} {shape:?}",
            bytes.len()
        )));
    }
    let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let mut t = DynTensor::new(&Allocator::default(), ty, dims)?;
    if !bytes.is_empty() {
        let dst = t.data_ptr_mut().cast::<u8>();
        // SAFETY: `t` was just allocated on the CPU by ONNX Runtime for `shape` elements of
        // `dtype`, i.e. exactly `bytes.len()` bytes (checked above); nothing else aliases it.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
    }
    Ok(t.into_dyn())
}

/// Shows one value of a run to the Dumper (dump-onnx's [`View`](dump_onnx::View)).
pub(crate) fn view(v: &ValueRef<'_>, hand: &mut Hand<'_>) -> Lookup {
    match tensor_ref(v, hand) {
        Ok(r) => Lookup::Done(r),
        Err(why) => Lookup::Unsupported(why),
    }
}

/// Value `name` copied to the host (a CPU tensor of a dtype opdump has).
pub(crate) fn to_host(name: &str, v: &DynValue) -> Result<HostTensor, Error> {
    with_tensor_ref(v, |t| HostTensor {
        name: name.to_owned(),
        dtype: t.dtype(),
        shape: t.shape().to_vec(),
        data: t.host_bytes().unwrap_or_default().to_vec(),
    })
}
