//! The device-tensor contract (feature `std`): an Ascend tensor ([`DeviceTensor`], its bytes
//! fetched from the NPU in its device format) is a [`dump_stats::DeviceTensor`], so the Dumper
//! dumps it without naming Ascend: its layout carries the device format and host shape,
//! [`copy_host_layout`](dump_stats::DeviceTensor::copy_host_layout) converts it for
//! `trans_flag`, and statistics follow the request (Ascend device semantics, spec §7, under
//! the configured precision, or host semantics).
//!
//! ```
//! use dump_core::DType;
//! use dump_device_ascend::{DeviceTensor, Format};
//! use dump_stats::{CategorySet, Precision, device::{self, DeviceStatistics, Layout, StatsKind, StatsRequest}};
//! use dump_stats::DeviceTensor as _;
//!
//! // A (1, 3, 1, 1) f32 tensor held as NC1HWC0 (1, 1, 1, 1, 16).
//! let mut bytes = vec![0u8; 16 * 4];
//! for (c, v) in [1.0f32, 2.0, 3.0].iter().enumerate() {
//!     bytes[c * 4..c * 4 + 4].copy_from_slice(&v.to_le_bytes());
//! }
//! let t = DeviceTensor {
//!     format: Format::Nc1hwc0,
//!     dtype: DType::Float32,
//!     device_shape: &[1, 1, 1, 1, 16],
//!     host_shape: &[1, 3, 1, 1],
//!     data: &bytes,
//! };
//! assert_eq!(t.layout(), Layout::Device { format: "NC1HWC0", host_shape: &[1, 3, 1, 1] });
//! let mut host = [0u8; 12];
//! t.copy_host_layout(&mut host)?;
//! assert_eq!(&host[8..], &3.0f32.to_le_bytes());
//!
//! let cats = CategorySet::parse(["max", "avg"])?;
//! let req = StatsRequest { precision: Precision::High, categories: &cats, kind: StatsKind::Device };
//! let Some(DeviceStatistics::Device(s)) = t.statistics(&req)? else { unreachable!() };
//! assert_eq!(s.max.to_string(), "3"); // over the stored bytes, padding included
//! # Ok::<(), device::DeviceError>(())
//! ```

use dump_core::DType;
use dump_stats::{
    Hashes,
    device::{DeviceError, DeviceStatistics, Layout, StatsKind, StatsRequest},
    engine::{Engine, TensorRef},
};

use crate::{DeviceTensor, Error, device_stats::Simulated, to_host};

impl dump_stats::DeviceTensor for DeviceTensor<'_> {
    fn dtype(&self) -> DType {
        self.dtype
    }

    fn shape(&self) -> &[usize] {
        self.device_shape
    }

    fn layout(&self) -> Layout<'_> {
        Layout::Device {
            format: self.format.name(),
            host_shape: self.host_shape,
        }
    }

    /// Over the stored (device-layout) bytes: Ascend device semantics through the simulated
    /// backend under `request.precision`, or host semantics through the host engine.
    fn statistics(
        &self,
        request: &StatsRequest<'_>,
    ) -> Result<Option<DeviceStatistics>, DeviceError> {
        let elems = self.elems()?;
        self.check_len(elems)?;
        Ok(match request.kind {
            StatsKind::Device => Simulated::new(request.precision)
                .statistics(self.dtype, self.data, elems)?
                .map(DeviceStatistics::Device),
            StatsKind::Host => Engine::new(1)
                .summarize(TensorRef::new(self.dtype, self.data, elems), Hashes::NONE)?
                .summary
                .map(DeviceStatistics::Host),
        })
    }

    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), DeviceError> {
        self.check_len(self.elems()?)?;
        if dst.len() != self.data.len() {
            return Err(Error::LengthMismatch {
                expected: self.data.len(),
                actual: dst.len(),
            }
            .into());
        }
        dst.copy_from_slice(self.data);
        Ok(())
    }

    /// [`to_host()`]: converted into `dst`, which must hold [`DeviceTensor::host_bytes`].
    fn copy_host_layout(&self, dst: &mut [u8]) -> Result<(), DeviceError> {
        let want = self.host_bytes()?;
        if dst.len() != want {
            return Err(Error::LengthMismatch {
                expected: want,
                actual: dst.len(),
            }
            .into());
        }
        let mut scratch = vec![
            0u8;
            if self.format.is_host_layout() {
                0
            } else {
                want
            }
        ];
        let view = to_host(self, &mut scratch)?;
        dst.copy_from_slice(view.data);
        Ok(())
    }

    /// The bytes are in host memory already: handed over as one chunk, without a copy.
    fn copy_chunks(
        &self,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), DeviceError>,
    ) -> Result<(), DeviceError> {
        self.check_len(self.elems()?)?;
        sink(self.data)
    }
}

impl DeviceTensor<'_> {
    /// Elements of the device shape.
    fn elems(&self) -> Result<usize, Error> {
        crate::convert::bytes_of(self.device_shape, 1)
    }

    /// The stored bytes must be the storage of the device shape.
    fn check_len(&self, elems: usize) -> Result<(), Error> {
        let expected = self.dtype.storage_bytes(elems).ok_or(Error::Overflow)?;
        if self.data.len() != expected {
            return Err(Error::LengthMismatch {
                expected,
                actual: self.data.len(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Format;
    use dump_stats::{CategorySet, DeviceTensor as _, Precision};

    #[test]
    fn short_data_and_wrong_buffers_are_errors_not_panics() {
        let data = [0u8; 10];
        let t = DeviceTensor {
            format: Format::Nhwc,
            dtype: DType::Float32,
            device_shape: &[1, 1, 1, 3],
            host_shape: &[1, 3, 1, 1],
            data: &data,
        };
        let cats = CategorySet::parse(["max"]).unwrap();
        let req = StatsRequest {
            precision: Precision::Low,
            categories: &cats,
            kind: StatsKind::Host,
        };
        assert!(t.statistics(&req).unwrap_err().to_string().contains("12"));
        assert!(t.copy_to_host(&mut [0; 10]).is_err());
        assert!(t.copy_chunks(&mut |_| Ok(())).is_err());
        let ok = [0u8; 12];
        let t = DeviceTensor { data: &ok, ..t };
        assert!(t.copy_host_layout(&mut [0; 8]).is_err());
        let mut host = [1u8; 12];
        t.copy_host_layout(&mut host).unwrap();
        assert_eq!(host, [0; 12]);
        let Some(DeviceStatistics::Host(s)) = t.statistics(&req).unwrap() else {
            panic!("host semantics asked for")
        };
        assert_eq!(s.zero, 3);
    }
}
