//! [`DeviceTensor`] (feature `std`): the one contract between the Dumper and every device
//! backend. A backend (NVIDIA GPUs in `dump-device-cuda`, Ascend in `dump-device-ascend`, a
//! runtime's own type) implements it on its tensor type; the Dumper (`dump-host`) only ever
//! sees the trait, so it never names a device.
//!
//! A device tensor says what it is ([`dtype`](DeviceTensor::dtype),
//! [`shape`](DeviceTensor::shape), [`layout`](DeviceTensor::layout)), computes statistics on
//! the device when asked with a [`StatsRequest`] (precision and categories from the config),
//! and copies its bytes to the host, whole or in chunks. Errors are the backend's own types,
//! boxed ([`DeviceError`]).
//!
//! ```
//! use dump_core::{DType, Summary};
//! use dump_stats::{
//!     CategorySet, Precision,
//!     device::{DeviceError, DeviceStatistics, DeviceTensor, StatsKind, StatsRequest},
//! };
//!
//! /// "Device memory" that is a host vector of f32.
//! struct Fake(Vec<u8>, [usize; 1]);
//!
//! impl DeviceTensor for Fake {
//!     fn dtype(&self) -> DType {
//!         DType::Float32
//!     }
//!     fn shape(&self) -> &[usize] {
//!         &self.1
//!     }
//!     fn statistics(&self, req: &StatsRequest<'_>) -> Result<Option<DeviceStatistics>, DeviceError> {
//!         match req.kind {
//!             StatsKind::Host => Ok(dump_core::stats::summarize(DType::Float32, &self.0, self.1[0])?
//!                 .map(DeviceStatistics::Host)),
//!             StatsKind::Device => Err("no device-semantics kernels".into()),
//!         }
//!     }
//!     fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), DeviceError> {
//!         dst.copy_from_slice(&self.0);
//!         Ok(())
//!     }
//! }
//!
//! let t = Fake([1.0f32, 2.0, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect(), [3]);
//! let cats = CategorySet::parse(["max", "min"])?;
//! let req = StatsRequest { precision: Precision::High, categories: &cats, kind: StatsKind::Host };
//! let Some(DeviceStatistics::Host(s)) = t.statistics(&req)? else { unreachable!() };
//! assert_eq!(s.max_value(), 3.0);
//! let mut chunks = Vec::new();
//! t.copy_chunks(&mut |c| Ok(chunks.extend_from_slice(c)))?;
//! assert_eq!(chunks, t.0);
//! assert_eq!(t.storage_bytes()?, 12);
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! ```

use dump_core::{DType, Summary};

use crate::{CategorySet, DeviceStats, Precision};

/// What a device backend reports when it fails: its own error type, boxed.
pub type DeviceError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// How a device tensor's bytes are laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout<'a> {
    /// C order of [`DeviceTensor::shape`] (MindSpore's `DefaultFormat`).
    #[default]
    Default,
    /// An Ascend device format (`NC1HWC0`, `FRACTAL_Z`, `NHWC`, `FRACTAL_NZ`, ...):
    /// [`DeviceTensor::shape`] is the device shape, `host_shape` the logical one the user sees.
    /// With `trans_flag` the Dumper asks for [`DeviceTensor::copy_host_layout`].
    Device {
        /// The format name, as in the `.npy` file name.
        format: &'a str,
        /// The logical (host) shape.
        host_shape: &'a [usize],
    },
}

/// Which statistics a row needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatsKind {
    /// MindSpore's host semantics: a [`Summary`] (every category but the digests).
    Host,
    /// Ascend device semantics (spec §7): max, min, avg and l2norm under the precision policy,
    /// [`DeviceStats`].
    Device,
}

/// What the Dumper asks a device for: the semantics, the configured precision
/// (`device_stat_precision_mode`) and the configured categories.
#[derive(Clone, Copy, Debug)]
pub struct StatsRequest<'a> {
    /// `device_stat_precision_mode`.
    pub precision: Precision,
    /// `statistic_category`, in config order.
    pub categories: &'a CategorySet,
    /// Which statistics the row needs.
    pub kind: StatsKind,
}

/// Statistics a device computed, in the semantics the request asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DeviceStatistics {
    /// Host semantics ([`StatsKind::Host`]).
    Host(Summary),
    /// Ascend device semantics ([`StatsKind::Device`]).
    Device(DeviceStats),
}

/// Statistics a device has started computing and not yet returned (see
/// [`DeviceTensor::statistics_deferred`]): the work is queued on the device, in order after the
/// kernel that wrote the tensor; [`wait`](PendingStatistics::wait) blocks until the result is on
/// the host.
pub trait PendingStatistics: Send {
    /// The statistics, as [`DeviceTensor::statistics`] would have returned them.
    fn wait(self: Box<Self>) -> Result<Option<DeviceStatistics>, DeviceError>;
}

/// A device-to-host copy a device has queued and not yet finished (see
/// [`DeviceTensor::copy_to_host_deferred`]): the copy runs on the device's queue, in order
/// after the kernel that wrote the tensor, into memory the backend owns (pinned host memory on
/// a GPU); [`wait_into`](PendingCopy::wait_into) blocks until it has completed and hands the
/// bytes over. Dropped without waiting, it still waits for its copy before the backend reuses
/// or frees that memory.
pub trait PendingCopy: Send {
    /// Bytes the copy holds: the tensor's [`storage_bytes`](DeviceTensor::storage_bytes).
    fn len(&self) -> usize;

    /// Whether the copy holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Blocks until the copy has completed, then writes its bytes into `dst`, whose length is
    /// [`len`](PendingCopy::len).
    fn wait_into(self: Box<Self>, dst: &mut [u8]) -> Result<(), DeviceError>;
}

/// A tensor living on an accelerator (see the [module docs](self)). `Sync`: the Dumper may hand
/// it to writer threads by reference.
pub trait DeviceTensor: Sync {
    /// Element type.
    fn dtype(&self) -> DType;

    /// Dimensions of the bytes as stored (the device shape for a device format).
    fn shape(&self) -> &[usize];

    /// How the bytes are laid out; [`Layout::Default`] unless overridden.
    fn layout(&self) -> Layout<'_> {
        Layout::Default
    }

    /// Statistics computed on the device over the stored bytes, in the semantics and
    /// precision `request` asks for; `Ok(None)` for an empty tensor. An error when the device
    /// cannot (a dtype without kernels, no driver, digests requested): the Dumper then copies
    /// the tensor and computes on the host.
    fn statistics(
        &self,
        request: &StatsRequest<'_>,
    ) -> Result<Option<DeviceStatistics>, DeviceError>;

    /// Starts [`statistics`](DeviceTensor::statistics) without waiting for them, for
    /// backends whose work is queued (a GPU stream): the Dumper keeps the handle and waits at
    /// the end of the step, so a dumped tensor does not stall the runtime's queue. The
    /// statistics must be those of the bytes as they are now (work ordered after the tensor's
    /// producer and before anything that may overwrite it). `Ok(None)`: this backend does not
    /// defer (the default), or not now (call [`statistics`](DeviceTensor::statistics)); an
    /// error as for `statistics`.
    fn statistics_deferred(
        &self,
        _request: &StatsRequest<'_>,
    ) -> Result<Option<Box<dyn PendingStatistics>>, DeviceError> {
        Ok(None)
    }

    /// Copies the stored bytes (C order of [`shape`](DeviceTensor::shape), packed like the
    /// host layout for `int4`/`uint1`) into `dst`, whose length is
    /// [`storage_bytes`](DeviceTensor::storage_bytes).
    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), DeviceError>;

    /// Starts [`copy_to_host`](DeviceTensor::copy_to_host) without waiting for it, for backends
    /// whose copies are queued (a GPU stream): the flight recorder keeps the handle and waits
    /// at the end of the step, so holding a device tensor in its ring does not stall the
    /// runtime's thread on the bus. The bytes must be those of the tensor as it is now (the copy
    /// ordered after the tensor's producer and before anything that may overwrite it).
    /// `Ok(None)`: this backend does not defer copies (the default), or not now (too many
    /// pending, the tensor too large for its staging memory); the caller then copies with
    /// [`copy_to_host`](DeviceTensor::copy_to_host).
    fn copy_to_host_deferred(&self) -> Result<Option<Box<dyn PendingCopy>>, DeviceError> {
        Ok(None)
    }

    /// Copies the tensor converted to its host layout (C order of the layout's `host_shape`)
    /// into `dst`. Tensors in [`Layout::Default`] copy as stored (the default); backends with
    /// device formats override it.
    fn copy_host_layout(&self, dst: &mut [u8]) -> Result<(), DeviceError> {
        match self.layout() {
            Layout::Default => self.copy_to_host(dst),
            Layout::Device { format, .. } => {
                Err(format!("this backend cannot convert {format} to the host layout").into())
            }
        }
    }

    /// Hands the stored bytes (as [`copy_to_host`](DeviceTensor::copy_to_host) gives them) to
    /// `sink` in order, in chunks of any length; stops at the first error, from the device or
    /// from `sink`.
    ///
    /// The Dumper streams large tensors through this: statistics, digests and the `.npy` file
    /// are fed chunk by chunk, so no host copy of the whole tensor is held. Backends that can
    /// overlap a chunk's copy with the consumption of the previous one (CUDA: pinned double
    /// buffers) override it; the default copies the whole tensor once and hands it over as
    /// one chunk.
    fn copy_chunks(
        &self,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), DeviceError>,
    ) -> Result<(), DeviceError> {
        let mut v = vec![0u8; self.storage_bytes()?];
        self.copy_to_host(&mut v)?;
        sink(&v)
    }

    /// Bytes of the stored tensor: the storage of the product of
    /// [`shape`](DeviceTensor::shape). An error when that overflows.
    fn storage_bytes(&self) -> Result<usize, DeviceError> {
        self.shape()
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .and_then(|n| self.dtype().storage_bytes(n))
            .ok_or_else(|| format!("{} {:?} overflows", self.dtype(), self.shape()).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Packed;

    impl DeviceTensor for Packed {
        fn dtype(&self) -> DType {
            DType::Int4
        }
        fn shape(&self) -> &[usize] {
            &[3, 1]
        }
        fn layout(&self) -> Layout<'_> {
            Layout::Device {
                format: "NHWC",
                host_shape: &[1, 3],
            }
        }
        fn statistics(
            &self,
            _: &StatsRequest<'_>,
        ) -> Result<Option<DeviceStatistics>, DeviceError> {
            Err("none".into())
        }
        fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), DeviceError> {
            dst.copy_from_slice(&[0x21, 0x03]);
            Ok(())
        }
    }

    #[test]
    fn defaults_copy_once_and_refuse_unknown_conversions() {
        assert_eq!(
            Packed.storage_bytes().unwrap(),
            2,
            "three nibbles in two bytes"
        );
        let mut got = Vec::new();
        Packed
            .copy_chunks(&mut |c| {
                got.push(c.to_vec());
                Ok(())
            })
            .unwrap();
        assert_eq!(got, [vec![0x21, 0x03]]);
        let e = Packed.copy_host_layout(&mut [0; 2]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "this backend cannot convert NHWC to the host layout"
        );
        let e = Packed
            .copy_chunks(&mut |_| Err("disk full".into()))
            .unwrap_err();
        assert_eq!(e.to_string(), "disk full");
    }
}
