//! [`CudaTensor`]: a device tensor bound to its GPU backend, stream and shape — a
//! [`dump_stats::DeviceTensor`], so the Dumper takes it as it takes any device's tensor
//! (`TensorRef::device(&cuda_tensor)`): statistics computed on the GPU in statistic-only mode
//! (precision from the config's request), a device-to-host copy otherwise, large tensors
//! streamed through pinned double buffers.

use crate::{CudaStats, DeviceTensor, Error, PendingSummary, PipelineError};
use cudarc::driver::CudaStream;
use dump_core::DType;
use dump_stats::{
    Hashes,
    device::{
        DeviceError, DeviceStatistics, PendingCopy, PendingStatistics, StatsKind, StatsRequest,
    },
};
use std::sync::Arc;

/// A GPU tensor ready to hand to the Dumper: the view, the backend that reads it, the stream
/// it is ready on and its shape.
#[derive(Clone, Copy, Debug)]
pub struct CudaTensor<'a> {
    stats: &'a CudaStats,
    tensor: DeviceTensor<'a>,
    shape: &'a [usize],
    stream: &'a Arc<CudaStream>,
}

impl<'a> CudaTensor<'a> {
    /// Binds `tensor` (whose element count must be the product of `shape`) to a backend and
    /// the stream it is ready on.
    pub fn new(
        stats: &'a CudaStats,
        tensor: DeviceTensor<'a>,
        shape: &'a [usize],
        stream: &'a Arc<CudaStream>,
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
        })
    }

    /// The device view.
    pub fn view(&self) -> &DeviceTensor<'a> {
        &self.tensor
    }
}

impl dump_stats::DeviceTensor for CudaTensor<'_> {
    fn dtype(&self) -> DType {
        self.tensor.dtype()
    }

    fn shape(&self) -> &[usize] {
        self.shape
    }

    /// One fused kernel launch under `request.precision`: host semantics
    /// ([`DeviceSummary::summary`](crate::DeviceSummary)) or MindSpore's device row values
    /// ([`DeviceSummary::device_stats`](crate::DeviceSummary::device_stats)). Digests are not
    /// computed on the GPU: a request that needs one is refused ([`Error::Digests`]).
    fn statistics(
        &self,
        request: &StatsRequest<'_>,
    ) -> Result<Option<DeviceStatistics>, DeviceError> {
        if Hashes::for_categories(request.categories).any() {
            return Err(Error::Digests.into());
        }
        let s = self
            .stats
            .summarize(&self.tensor, request.precision, self.stream)?;
        Ok(s.map(|s| match request.kind {
            StatsKind::Host => DeviceStatistics::Host(s.summary),
            StatsKind::Device => DeviceStatistics::Device(s.device_stats()),
        }))
    }

    /// The same kernel queued on the tensor's stream with its partials copied into pinned
    /// memory ([`CudaStats::summarize_deferred`]): nothing waits until the Dumper asks, at the
    /// end of the step. `Ok(None)` when too many are pending (the Dumper then waits now).
    fn statistics_deferred(
        &self,
        request: &StatsRequest<'_>,
    ) -> Result<Option<Box<dyn PendingStatistics>>, DeviceError> {
        if Hashes::for_categories(request.categories).any() {
            return Err(Error::Digests.into());
        }
        let pending =
            self.stats
                .summarize_deferred(&self.tensor, request.precision, self.stream)?;
        Ok(pending.map(|p| {
            Box::new(Deferred {
                pending: p,
                kind: request.kind,
            }) as Box<dyn PendingStatistics>
        }))
    }

    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), DeviceError> {
        Ok(self.stats.copy_to_host(&self.tensor, dst, self.stream)?)
    }

    /// Queued into pinned memory on the tensor's stream ([`CudaStats::copy_to_host_deferred`]):
    /// the flight recorder waits for it at the end of the step. `Ok(None)` when the staging
    /// memory is full (the recorder copies now).
    fn copy_to_host_deferred(&self) -> Result<Option<Box<dyn PendingCopy>>, DeviceError> {
        Ok(self
            .stats
            .copy_to_host_deferred(&self.tensor, self.stream)?
            .map(|p| Box::new(p) as Box<dyn PendingCopy>))
    }

    /// Through a pooled pinned pipeline ([`CudaStats::copy_chunks`]): the next chunk copies
    /// while `sink` handles this one.
    fn copy_chunks(
        &self,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), DeviceError>,
    ) -> Result<(), DeviceError> {
        self.stats
            .copy_chunks(&self.tensor, self.stream, sink)
            .map_err(|e| match e {
                PipelineError::Device(e) => e.into(),
                PipelineError::Consumer(e) => e,
            })
    }
}

/// A [`PendingSummary`] in the semantics the request asked for.
struct Deferred {
    pending: PendingSummary,
    kind: StatsKind,
}

impl PendingStatistics for Deferred {
    fn wait(self: Box<Self>) -> Result<Option<DeviceStatistics>, DeviceError> {
        let s = self.pending.wait()?;
        Ok(Some(match self.kind {
            StatsKind::Host => DeviceStatistics::Host(s.summary),
            StatsKind::Device => DeviceStatistics::Device(s.device_stats()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn can_be_shared_with_writer_threads() {
        // The device-tensor contract requires Sync.
        fn device<T: dump_stats::DeviceTensor>() {}
        device::<CudaTensor<'static>>();
    }
}
