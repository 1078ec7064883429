//! [`CudaTensor`]: a device tensor bound to its GPU backend, stream, shape and precision —
//! everything the Dumper's device-tensor trait asks for, with the same method signatures.

use crate::{CudaStats, DeviceTensor, Error, Precision};
use cudarc::driver::CudaStream;
use dump_core::{DType, Summary};
use dump_stats::precision::DeviceStats;
use std::sync::Arc;

/// A device tensor ready to hand to the Dumper (`dump-host`'s `DeviceTensor` trait is a
/// one-line delegation to each method here).
#[derive(Clone, Copy, Debug)]
pub struct CudaTensor<'a> {
    stats: &'a CudaStats,
    tensor: DeviceTensor<'a>,
    shape: &'a [usize],
    stream: &'a Arc<CudaStream>,
    precision: Precision,
}

impl<'a> CudaTensor<'a> {
    /// Binds `tensor` (whose element count must be the product of `shape`) to a backend,
    /// the stream it is ready on and the configured `device_stat_precision_mode`.
    pub fn new(
        stats: &'a CudaStats,
        tensor: DeviceTensor<'a>,
        shape: &'a [usize],
        stream: &'a Arc<CudaStream>,
        precision: Precision,
    ) -> Result<Self, Error> {
        let elems = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or(Error::Overflow)?;
        if elems != tensor.elems() {
            return Err(Error::Length {
                what: "elements of the shape vs the device tensor",
                expected: tensor.elems(),
                actual: elems,
            });
        }
        Ok(CudaTensor {
            stats,
            tensor,
            shape,
            stream,
            precision,
        })
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.tensor.dtype()
    }

    /// Dimensions.
    pub fn shape(&self) -> &[usize] {
        self.shape
    }

    /// Statistics computed on the device (`Ok(None)` for an empty tensor). `Err(reason)`
    /// when the device cannot (for example an unsupported dtype): the caller copies the
    /// tensor and computes on the host.
    pub fn device_summary(&self) -> Result<Option<Summary>, String> {
        self.stats
            .summarize(&self.tensor, self.precision, self.stream)
            .map(|s| s.map(|s| s.summary))
            .map_err(|e| e.to_string())
    }

    /// MindSpore's device-statistics row values (max, min, mean, norm under the precision
    /// policy), computed on the device.
    pub fn device_stats(&self) -> Result<Option<DeviceStats>, String> {
        self.stats
            .summarize(&self.tensor, self.precision, self.stream)
            .map(|s| s.map(|s| s.device_stats()))
            .map_err(|e| e.to_string())
    }

    /// Hands the tensor's bytes to `sink` in chunks through a pooled pinned pipeline
    /// ([`CudaStats::copy_chunks`]): the next chunk copies while `sink` handles this one.
    pub fn copy_chunks(
        &self,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        self.stats
            .copy_chunks(&self.tensor, self.stream, sink)
            .map_err(|e| match e {
                crate::PipelineError::Device(e) => e.to_string(),
                crate::PipelineError::Consumer(e) => e,
            })
    }

    /// Copies the tensor's bytes (C order) into `dst`, exactly its storage size.
    pub fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), String> {
        self.stats
            .copy_to_host(&self.tensor, dst, self.stream)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn can_be_shared_with_writer_threads() {
        // The Dumper's trait requires Sync.
        fn sync<T: Sync>() {}
        sync::<CudaTensor<'static>>();
    }
}
