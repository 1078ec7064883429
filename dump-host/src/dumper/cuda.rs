//! NVIDIA GPU tensors (feature `cuda`): `dump_device_cuda::CudaTensor` is a [`DeviceTensor`],
//! so `TensorRef::device(&cuda_tensor)` dumps a GPU buffer — statistics computed on the GPU in
//! statistic-only mode, a device-to-host copy otherwise (large tensors streamed through pinned
//! double buffers straight into the `.npy` file).

use dump_core::{DType, Summary};
use dump_device_cuda::CudaTensor;

use super::DeviceTensor;

impl DeviceTensor for CudaTensor<'_> {
    fn dtype(&self) -> DType {
        CudaTensor::dtype(self)
    }

    fn shape(&self) -> &[usize] {
        CudaTensor::shape(self)
    }

    fn device_summary(&self) -> Result<Option<Summary>, String> {
        CudaTensor::device_summary(self)
    }

    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), String> {
        CudaTensor::copy_to_host(self, dst)
    }

    fn copy_chunks(&self, sink: &mut dyn FnMut(&[u8]) -> Result<(), String>) -> Result<(), String> {
        CudaTensor::copy_chunks(self, sink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_tensors_are_device_tensors() {
        fn device<T: DeviceTensor>() {}
        device::<CudaTensor<'static>>();
    }
}
