//! [`DeviceTensor`]: a borrowed view of device memory owned by someone else.

use crate::Error;
use cudarc::driver::{CudaSlice, DevicePtr, sys::CUdeviceptr};
use dump_core::DType;
use std::marker::PhantomData;

/// A tensor in device memory that opdump reads but does not own: a runtime's own buffer
/// (for example the `CudaSlice` inside a candle `CudaStorage`) or any raw `CUdeviceptr`.
///
/// Nothing is freed on drop. The lifetime `'a` ties the view to the owner's borrow.
#[derive(Clone, Copy, Debug)]
pub struct DeviceTensor<'a> {
    ptr: CUdeviceptr,
    dtype: DType,
    elems: usize,
    bytes: usize,
    _owner: PhantomData<&'a [u8]>,
}

impl<'a> DeviceTensor<'a> {
    /// Wraps `elems` elements of `dtype` at device address `ptr`.
    ///
    /// Packed dtypes (`int4`, `uint1`) are byte-addressed: `ceil(elems / 2)` or
    /// `ceil(elems / 8)` bytes, any alignment. They have no statistics kernel (the Dumper
    /// computes their statistics on the host) but copy and stream like any tensor.
    ///
    /// Errors: `ptr` must be aligned to the element size ([`Error::Misaligned`]); the byte size
    /// must not overflow ([`Error::Overflow`]).
    ///
    /// # Safety
    ///
    /// For all of `'a`: `ptr .. ptr + elems * size` is device memory of the CUDA context the
    /// view is used with (the device's primary context, which runtimes such as candle use),
    /// it stays allocated, and nothing writes it while opdump's work on it is in flight
    /// (order it on the writer's stream, or synchronise first).
    pub unsafe fn from_raw(ptr: CUdeviceptr, dtype: DType, elems: usize) -> Result<Self, Error> {
        let size = dtype.size().unwrap_or(1);
        let bytes = dtype.storage_bytes(elems).ok_or(Error::Overflow)?;
        if !ptr.is_multiple_of(size as u64) {
            return Err(Error::Misaligned { ptr, align: size });
        }
        Ok(DeviceTensor {
            ptr,
            dtype,
            elems,
            bytes,
            _owner: PhantomData,
        })
    }

    /// Views a cudarc slice (for example a candle `CudaStorage`'s) as `elems` elements of
    /// `dtype`. The slice's bytes must be at least the tensor's bytes ([`Error::Length`]).
    ///
    /// Use the view on the slice's own stream (`slice.stream()`), so that stream order
    /// keeps opdump's reads after the runtime's writes.
    pub fn from_slice<T>(
        slice: &'a CudaSlice<T>,
        dtype: DType,
        elems: usize,
    ) -> Result<Self, Error> {
        let bytes = dtype.storage_bytes(elems).ok_or(Error::Overflow)?;
        let have = slice
            .len()
            .checked_mul(size_of::<T>())
            .ok_or(Error::Overflow)?;
        if bytes > have {
            return Err(Error::Length {
                what: "device slice bytes",
                expected: bytes,
                actual: have,
            });
        }
        let (ptr, _record) = slice.device_ptr(slice.stream());
        // SAFETY: the pointer comes from a live CudaSlice borrowed for 'a, of at least
        // `bytes` bytes (checked above), in that slice's context; reads are ordered on the
        // slice's stream as documented.
        unsafe { DeviceTensor::from_raw(ptr, dtype, elems) }
    }

    /// The device address.
    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn elems(&self) -> usize {
        self.elems
    }

    /// Number of bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// `true` when the address allows the kernels' 16-byte vector loads.
    pub fn vector_aligned(&self) -> bool {
        self.ptr.is_multiple_of(16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_views_check_alignment_and_dtype() {
        // SAFETY: the views are only inspected, never used on a device.
        unsafe {
            let t = DeviceTensor::from_raw(0x1000, DType::Float32, 10).unwrap();
            assert_eq!((t.bytes(), t.elems(), t.vector_aligned()), (40, 10, true));
            assert!(
                !DeviceTensor::from_raw(0x1004, DType::Float32, 1)
                    .unwrap()
                    .vector_aligned()
            );
            assert_eq!(
                DeviceTensor::from_raw(0x1002, DType::Float32, 1).unwrap_err(),
                Error::Misaligned {
                    ptr: 0x1002,
                    align: 4
                }
            );
            // Packed dtypes are byte-addressed: 5 int4 in 3 bytes, 9 uint1 in 2, any address.
            let t = DeviceTensor::from_raw(0x1001, DType::Int4, 5).unwrap();
            assert_eq!((t.bytes(), t.elems(), t.dtype()), (3, 5, DType::Int4));
            assert_eq!(
                DeviceTensor::from_raw(0x1003, DType::UInt1, 9)
                    .unwrap()
                    .bytes(),
                2
            );
            assert_eq!(
                DeviceTensor::from_raw(0x1000, DType::Float64, usize::MAX).unwrap_err(),
                Error::Overflow
            );
        }
    }
}
