//! candle tensors as [`TensorRef`]s: CPU storage is borrowed in place (contiguous views as
//! host bytes, other layouts as strided views the Dumper gathers), never copied here.

use candle_core::{CpuStorage, Layout, Storage, Tensor};
use dump_core::DType;
use dump_host::TensorRef;

pub use crate::dtype::{candle_dtype, dtype_of};

/// A CPU tensor from little-endian bytes in C order (one copy, into candle's storage).
pub fn host_tensor(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor, crate::Error> {
    let c = candle_dtype(dtype).ok_or_else(|| {
        crate::Error::Model(format!(
            "{dtype} tensors are not supported by candle (u8 u32 i16 i32 i64 bf16 f16 f32 f64 \
             f8e4m3 are)"
        ))
    })?;
    Ok(Tensor::from_raw_buffer(
        bytes,
        c,
        shape,
        &candle_core::Device::Cpu,
    )?)
}

/// A watched output's handle (watcher mode): a clone of the candle tensor, which shares its
/// storage, read in place (read-locked for the read) every time.
pub(crate) struct Watched(pub(crate) Tensor);

impl dump_host::watcher::WatchedTensor for Watched {
    fn read(&self, f: &mut dyn FnMut(TensorRef<'_>)) {
        // A tensor with no dump view is reported unreadable by the watcher (no call back).
        let _ = with_tensor_ref(&self.0, f);
    }
}

/// Why a tensor cannot be handed over (one diagnostic per distinct reason).
pub(crate) fn unsupported_reason(t: &Tensor) -> Option<String> {
    if dtype_of(t.dtype()).is_none() {
        return Some(format!(
            "candle dtype {:?} has no MindSpore dtype (supported: u8 u32 i16 i32 i64 bf16 f16 \
             f32 f64 f8e4m3); its tensors are skipped",
            t.dtype()
        ));
    }
    match t.device() {
        candle_core::Device::Cpu => None,
        #[cfg(feature = "cuda")]
        candle_core::Device::Cuda(_) => None,
        d => Some(format!(
            "tensors on {:?} cannot be dumped (supported: CPU{}); they are skipped",
            d.location(),
            if cfg!(feature = "cuda") {
                ", CUDA"
            } else {
                "; CUDA with dump-candle's `cuda` feature"
            }
        )),
    }
}

/// Calls `f` with `t` as a [`TensorRef`] borrowing candle's storage (held read-locked for
/// the call; a non-contiguous CUDA tensor is first copied to a contiguous one on the
/// device), or says why it cannot ([`Error::Unsupported`](crate::Error::Unsupported): a
/// dtype or device with no dump mapping).
pub fn with_tensor_ref<R>(
    t: &Tensor,
    f: impl FnOnce(TensorRef<'_>) -> R,
) -> Result<R, crate::Error> {
    if let Some(why) = unsupported_reason(t) {
        return Err(crate::Error::Unsupported(why));
    }
    // A non-contiguous CUDA tensor (a transpose, a strided narrow) has no in-place device
    // view: dump a contiguous copy made on the device, on candle's stream (one copy kernel,
    // no host round trip); the copy lives for the call.
    #[cfg(feature = "cuda")]
    let copy;
    #[cfg(feature = "cuda")]
    let t = if t.device().is_cuda() && !t.is_contiguous() {
        copy = t.contiguous()?;
        &copy
    } else {
        t
    };
    tensor_view(t, f).ok_or_else(|| {
        crate::Error::Unsupported(format!(
            "a candle {:?} tensor of shape {:?} whose storage has no dump view is skipped",
            t.dtype(),
            t.dims()
        ))
    })
}

/// `f` over `t`'s storage; `None` when there is no view of it.
fn tensor_view<R>(t: &Tensor, f: impl FnOnce(TensorRef<'_>) -> R) -> Option<R> {
    let (storage, layout) = t.storage_and_layout();
    match &*storage {
        Storage::Cpu(cpu) => {
            let (dtype, bytes) = cpu_bytes(cpu)?;
            host_view(dtype, bytes, layout, f)
        }
        #[cfg(feature = "cuda")]
        Storage::Cuda(cuda) => crate::cuda::with_cuda_ref(cuda, layout, f),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

fn cpu_bytes(s: &CpuStorage) -> Option<(DType, &[u8])> {
    use bytemuck::cast_slice as b;
    Some(match s {
        CpuStorage::U8(v) => (DType::UInt8, v.as_slice()),
        CpuStorage::U32(v) => (DType::UInt32, b(v)),
        CpuStorage::I16(v) => (DType::Int16, b(v)),
        CpuStorage::I32(v) => (DType::Int32, b(v)),
        CpuStorage::I64(v) => (DType::Int64, b(v)),
        CpuStorage::BF16(v) => (DType::BFloat16, b(v)),
        CpuStorage::F16(v) => (DType::Float16, b(v)),
        CpuStorage::F32(v) => (DType::Float32, b(v)),
        CpuStorage::F64(v) => (DType::Float64, b(v)),
        CpuStorage::F8E4M3(v) => (DType::Float8E4M3FN, one_byte(v)?),
        _ => return None,
    })
}

/// The bytes of a slice of a one-byte element type (candle's `F8E4M3`, a transparent `u8`);
/// `None` if `T` is not one byte.
fn one_byte<T: Copy>(v: &[T]) -> Option<&[u8]> {
    if size_of::<T>() != 1 || align_of::<T>() != 1 {
        return None;
    }
    // SAFETY: `T` is one byte with alignment 1 (checked above), so `v` covers exactly
    // `v.len()` initialised bytes (a one-byte `Copy` value has no padding); the returned
    // slice borrows `v` and lives no longer than it.
    Some(unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len()) })
}

/// Dumps `t` as input or output `slot` of kernel `k`. A tensor without a dump mapping is
/// skipped and its reason added to `diagnostics` (once per reason).
pub(crate) fn dump_tensor(
    k: &dump_host::Kernel<'_>,
    is_input: bool,
    slot: u32,
    t: &Tensor,
    diagnostics: &mut std::collections::BTreeSet<String>,
) -> Result<(), dump_host::Error> {
    let done = with_tensor_ref(t, |r| {
        if is_input {
            k.input(slot, r)
        } else {
            k.output(slot, r)
        }
    });
    match done {
        Ok(r) => r,
        Err(why) => {
            diagnostics.insert(why.to_string());
            Ok(())
        }
    }
}

/// Most layouts have few dimensions; strides of up to this rank live on the stack.
const STACK_RANK: usize = 8;

fn host_view<R>(
    dtype: DType,
    bytes: &[u8],
    layout: &Layout,
    f: impl FnOnce(TensorRef<'_>) -> R,
) -> Option<R> {
    let dims = layout.dims();
    let size = dtype.size()?;
    let offset = layout.start_offset();
    if layout.is_contiguous() {
        let n = layout.shape().elem_count();
        let view = bytes.get(offset * size..(offset + n) * size)?;
        return Some(f(TensorRef::host(dtype, dims, view)));
    }
    // candle strides are element counts (never negative).
    let mut stack = [0isize; STACK_RANK];
    let heap: Vec<isize>;
    let strides: &[isize] = if dims.len() <= STACK_RANK {
        for (s, &d) in stack.iter_mut().zip(layout.stride()) {
            *s = d as isize;
        }
        &stack[..dims.len()]
    } else {
        heap = layout.stride().iter().map(|&s| s as isize).collect();
        &heap
    };
    Some(f(TensorRef::strided(dtype, dims, bytes, strides, offset)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn contiguous_bytes(t: &Tensor) -> Vec<u8> {
        let v: Vec<f32> = t.flatten_all().unwrap().to_vec1().unwrap();
        bytemuck::cast_slice(&v).to_vec()
    }

    #[test]
    fn contiguous_tensors_are_borrowed_not_copied() {
        let t = Tensor::arange(0f32, 12., &Device::Cpu)
            .unwrap()
            .reshape((3, 4))
            .unwrap();
        let (storage, _) = t.storage_and_layout();
        let Storage::Cpu(CpuStorage::F32(v)) = &*storage else {
            panic!("cpu f32 storage expected")
        };
        let base = v.as_ptr() as usize;
        drop(storage);
        // A row slice is contiguous with an offset: the view must point into candle's buffer.
        let row = t.narrow(0, 1, 1).unwrap();
        let got = with_tensor_ref(&row, |r| {
            assert_eq!(r.shape(), &[1, 4]);
            format!("{r:?}")
        })
        .unwrap();
        assert!(got.contains("host"), "{got}");
        let ptr = with_tensor_ref(&row, |r| r.host_bytes().map(|b| b.as_ptr() as usize)).unwrap();
        assert_eq!(ptr, Some(base + 4 * 4));
    }

    #[test]
    fn transposed_tensors_are_strided_views() {
        let t = Tensor::arange(0f32, 6., &Device::Cpu)
            .unwrap()
            .reshape((2, 3))
            .unwrap()
            .t()
            .unwrap();
        let kind = with_tensor_ref(&t, |r| format!("{r:?}")).unwrap();
        assert!(kind.contains("strided"), "{kind}");
        assert_eq!(contiguous_bytes(&t).len(), 24);
    }

    /// candle's F8E4M3 is dumped as float8_e4m3fn: its own bytes, which widen to the values
    /// candle's cast to f32 gives; its E8M0, F6 and F4 types still have no dump dtype.
    #[test]
    fn f8e4m3_is_float8_e4m3fn_and_other_small_floats_are_unsupported() {
        let vals = [1.0f32, -2.5, 448.0, 0.001_953_125, -0.0, 96.0];
        let t = Tensor::new(&vals, &Device::Cpu)
            .unwrap()
            .to_dtype(candle_core::DType::F8E4M3)
            .unwrap();
        let (dtype, bytes) =
            with_tensor_ref(&t, |r| (r.dtype(), r.host_bytes().unwrap().to_vec())).unwrap();
        assert_eq!(dtype, DType::Float8E4M3FN);
        assert_eq!(bytes, [0x38, 0xc2, 0x7e, 0x01, 0x80, 0x6c]);
        let mut wide = vec![0u8; 4 * bytes.len()];
        dump_core::widen::f8e4m3fn_to_f32(&bytes, &mut wide).unwrap();
        let back: Vec<f32> = t
            .to_dtype(candle_core::DType::F32)
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(back, vals);
        assert_eq!(wide, bytemuck::cast_slice::<f32, u8>(&back));
        assert_eq!(unsupported_reason(&t), None);
        assert_eq!(
            candle_dtype(DType::Float8E4M3FN),
            Some(candle_core::DType::F8E4M3)
        );
        assert_eq!(candle_dtype(DType::Float8E5M2), None);
        assert_eq!(
            candle_dtype(DType::Float8E4M3FNUZ),
            None,
            "candle has no FNUZ type"
        );
        assert_eq!(
            candle_dtype(DType::Float8E5M2FNUZ),
            None,
            "candle has no FNUZ type"
        );

        // candle makes no CPU tensors of its other sub-16-bit floats; their dtypes map to none.
        for d in [
            candle_core::DType::F8E8M0,
            candle_core::DType::F6E2M3,
            candle_core::DType::F6E3M2,
            candle_core::DType::F4,
        ] {
            assert_eq!(dtype_of(d), None, "{d:?}");
        }
        let t = Tensor::new(&[1u8, 2], &Device::Cpu).unwrap();
        assert!(unsupported_reason(&t).is_none());
        let e = host_tensor(DType::Float8E5M2, &[1], &[0x3c])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("float8_e5m2 tensors are not supported by candle"),
            "{e}"
        );
    }
}
