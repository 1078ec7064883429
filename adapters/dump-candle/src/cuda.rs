//! Tensors in candle's CUDA storage (feature `cuda`): viewed in place as a
//! `dump_device_cuda::DeviceTensor` on candle's own stream, so statistics are computed on the
//! GPU and `.npy` bytes are copied (streamed) only when the config asks for tensors.
//!
//! Only contiguous layouts are viewed in place; `convert::with_tensor_ref` hands other
//! layouts over as a contiguous copy that candle makes on the device first.

use std::sync::{Arc, Mutex};

use candle_core::{CudaStorage, Layout, backend::BackendStorage};
use dump_device_cuda::{CudaStats, CudaTensor, DeviceTensor};
use dump_host::TensorRef;

/// One statistics backend per CUDA context, created at the first CUDA tensor.
static BACKENDS: Mutex<Vec<(usize, Arc<CudaStats>)>> = Mutex::new(Vec::new());

fn backend(ordinal: usize) -> Option<Arc<CudaStats>> {
    let mut all = BACKENDS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, b)) = all.iter().find(|(o, _)| *o == ordinal) {
        return Some(b.clone());
    }
    let b = Arc::new(CudaStats::new(ordinal).ok()?);
    all.push((ordinal, b.clone()));
    Some(b)
}

/// Calls `f` with a CUDA storage's contiguous view as a device [`TensorRef`].
pub(crate) fn with_cuda_ref<R>(
    storage: &CudaStorage,
    layout: &Layout,
    f: impl FnOnce(TensorRef<'_>) -> R,
) -> Option<R> {
    if !layout.is_contiguous() {
        return None;
    }
    let dtype = crate::dtype::dtype_of(storage.dtype())?;
    let size = dtype.size()?;
    let elems = layout.shape().elem_count();
    let stream = storage.device.cuda_stream();
    let stats = backend(stream.context().ordinal())?;
    let base = raw_ptr(storage)?;
    let ptr = base.checked_add((layout.start_offset() * size) as u64)?;
    // SAFETY: `ptr` lies inside the CudaSlice of `storage` (offset and element count come
    // from candle's layout of that storage), which stays allocated and unwritten while
    // `storage` is read-locked for this call; reads are ordered on candle's own stream.
    let view = unsafe { DeviceTensor::from_raw(ptr, dtype, elems) }.ok()?;
    // The precision comes from the config, through the Dumper's statistics request.
    let t = CudaTensor::new(&stats, view, layout.dims(), &stream).ok()?;
    Some(f(TensorRef::device(&t)))
}

/// The device address of a CUDA storage's buffer.
fn raw_ptr(storage: &CudaStorage) -> Option<u64> {
    use candle_core::cuda::CudaStorageSlice as S;
    use cudarc::driver::DevicePtr;
    let stream = storage.device.cuda_stream();
    macro_rules! ptr {
        ($s:expr) => {{
            let (p, _sync) = $s.device_ptr(&stream);
            p
        }};
    }
    Some(match &storage.slice {
        S::U8(s) => ptr!(s),
        S::U32(s) => ptr!(s),
        S::I16(s) => ptr!(s),
        S::I32(s) => ptr!(s),
        S::I64(s) => ptr!(s),
        S::BF16(s) => ptr!(s),
        S::F16(s) => ptr!(s),
        S::F32(s) => ptr!(s),
        S::F64(s) => ptr!(s),
        _ => return None,
    })
}
