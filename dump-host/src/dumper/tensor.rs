//! [`TensorRef`]: what a runtime hands the Dumper — host bytes (contiguous or strided) or a
//! device tensor behind the [`DeviceTensor`] trait.

use std::borrow::Cow;

use dump_core::{DType, Summary};

/// A tensor living on an accelerator. Device crates implement this; the Dumper asks for
/// statistics computed on the device (when the config says `stat_calc_mode: device`) or for a
/// copy of the bytes.
pub trait DeviceTensor: Sync {
    /// Element type.
    fn dtype(&self) -> DType;
    /// Dimensions.
    fn shape(&self) -> &[usize];
    /// Statistics computed on the device, or `Err(reason)` when the device cannot (the Dumper
    /// then copies the tensor and computes them on the host). `Ok(None)` for an empty tensor.
    fn device_summary(&self) -> Result<Option<Summary>, String>;
    /// Copies the tensor's bytes (C order, packed like the host layout) into `dst`, whose length
    /// is the tensor's storage size.
    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), String>;
    /// Hands the tensor's bytes (as [`copy_to_host`](DeviceTensor::copy_to_host) would give
    /// them) to `sink` in order, in chunks whose lengths are multiples of 8 bytes (the last
    /// may be shorter); stops at the first error, from the device or from `sink`.
    ///
    /// The Dumper streams large tensors through this: statistics, hashes and the `.npy` file
    /// are fed chunk by chunk, so no host copy of the whole tensor is held. Devices that can
    /// overlap a chunk's copy with the consumption of the previous one (the CUDA backend:
    /// pinned double buffering) override it; the default copies the whole tensor once and
    /// hands it over as one chunk.
    fn copy_chunks(&self, sink: &mut dyn FnMut(&[u8]) -> Result<(), String>) -> Result<(), String> {
        let bytes = self
            .shape()
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .and_then(|n| self.dtype().storage_bytes(n))
            .ok_or_else(|| format!("{} {:?} overflows", self.dtype(), self.shape()))?;
        let mut v = vec![0u8; bytes];
        self.copy_to_host(&mut v)?;
        sink(&v)
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    Host(&'a [u8]),
    Strided {
        base: &'a [u8],
        strides: &'a [isize],
        offset: usize,
    },
    Device(&'a dyn DeviceTensor),
}

/// A tensor handed to the Dumper: dtype, shape, where the bytes are, and its format name.
#[derive(Clone, Copy)]
pub struct TensorRef<'a> {
    pub(crate) dtype: DType,
    pub(crate) shape: &'a [usize],
    pub(crate) source: Source<'a>,
    pub(crate) format: &'a str,
    /// For tensors in an Ascend device format: the logical (host) shape.
    pub(crate) host_shape: Option<&'a [usize]>,
}

impl std::fmt::Debug for TensorRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.source {
            Source::Host(_) => "host",
            Source::Strided { .. } => "strided",
            Source::Device(_) => "device",
        };
        f.debug_struct("TensorRef")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("source", &kind)
            .field("format", &self.format)
            .finish()
    }
}

impl<'a> TensorRef<'a> {
    /// Contiguous little-endian host bytes in C order (packed for int4/uint1).
    pub fn host(dtype: DType, shape: &'a [usize], bytes: &'a [u8]) -> Self {
        TensorRef {
            dtype,
            shape,
            source: Source::Host(bytes),
            format: "DefaultFormat",
            host_shape: None,
        }
    }

    /// Host bytes of a tensor stored in an Ascend device format (`NC1HWC0`, `FRACTAL_Z`,
    /// `NHWC`, `FRACTAL_NZ`, ...) with `device_shape`, whose logical shape is `host_shape`.
    /// With `trans_flag` true (the default) the Dumper converts it to `host_shape` in C order and
    /// names it `DefaultFormat`; with `trans_flag` false it is written as is, the format name in
    /// the file name.
    pub fn device_format(
        dtype: DType,
        format: &'a str,
        device_shape: &'a [usize],
        host_shape: &'a [usize],
        bytes: &'a [u8],
    ) -> Self {
        TensorRef {
            dtype,
            shape: device_shape,
            source: Source::Host(bytes),
            format,
            host_shape: Some(host_shape),
        }
    }

    /// A non-contiguous host tensor: element `(i0, i1, ...)` is at element index
    /// `offset + Σ i_k · strides[k]` of `base`. The Dumper gathers it into C order. Packed
    /// dtypes (int4, uint1) cannot be strided.
    pub fn strided(
        dtype: DType,
        shape: &'a [usize],
        base: &'a [u8],
        strides: &'a [isize],
        offset: usize,
    ) -> Self {
        TensorRef {
            dtype,
            shape,
            source: Source::Strided {
                base,
                strides,
                offset,
            },
            format: "DefaultFormat",
            host_shape: None,
        }
    }

    /// A device tensor.
    pub fn device(t: &'a dyn DeviceTensor) -> Self {
        TensorRef {
            dtype: t.dtype(),
            shape: t.shape(),
            source: Source::Device(t),
            format: "DefaultFormat",
            host_shape: None,
        }
    }

    /// Sets the data-format name used in the file name (default `DefaultFormat`).
    pub fn with_format(mut self, format: &'a str) -> Self {
        self.format = format;
        self
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Dimensions.
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }

    /// The bytes of a host tensor handed over contiguously ([`host`](TensorRef::host),
    /// [`device_format`](TensorRef::device_format)); `None` for strided and device tensors.
    /// Adapters use it to check that a runtime's buffer is borrowed, not copied.
    pub fn host_bytes(&self) -> Option<&'a [u8]> {
        match self.source {
            Source::Host(b) => Some(b),
            _ => None,
        }
    }

    /// Number of elements, `None` on overflow.
    pub fn elems(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
    }

    pub(crate) fn device_tensor(&self) -> Option<&'a dyn DeviceTensor> {
        match self.source {
            Source::Device(d) => Some(d),
            _ => None,
        }
    }

    /// The tensor as contiguous host bytes: borrowed when it already is, gathered or copied
    /// otherwise. Errors describe what is wrong with the tensor.
    pub(crate) fn contiguous(&self) -> Result<Cow<'a, [u8]>, String> {
        let elems = self
            .elems()
            .ok_or_else(|| format!("shape {:?} overflows the element count", self.shape))?;
        let need = self
            .dtype
            .storage_bytes(elems)
            .ok_or_else(|| format!("shape {:?} overflows the byte size", self.shape))?;
        match self.source {
            Source::Host(b) if b.len() == need => Ok(Cow::Borrowed(b)),
            Source::Host(b) => Err(format!(
                "{} bytes given, but {} {:?} needs {need}",
                b.len(),
                self.dtype,
                self.shape
            )),
            Source::Strided {
                base,
                strides,
                offset,
            } => gather(self.dtype, self.shape, base, strides, offset, need).map(Cow::Owned),
            Source::Device(d) => {
                let mut v = vec![0u8; need];
                d.copy_to_host(&mut v)
                    .map_err(|e| format!("device copy failed: {e}"))?;
                Ok(Cow::Owned(v))
            }
        }
    }
}

fn gather(
    dtype: DType,
    shape: &[usize],
    base: &[u8],
    strides: &[isize],
    offset: usize,
    need: usize,
) -> Result<Vec<u8>, String> {
    let size = dtype
        .size()
        .ok_or_else(|| format!("{dtype} is packed and cannot be strided"))?;
    if strides.len() != shape.len() {
        return Err(format!(
            "{} strides for a rank-{} shape",
            strides.len(),
            shape.len()
        ));
    }
    let base_elems = base.len() / size;
    let mut out = Vec::with_capacity(need);
    if need == 0 {
        return Ok(out);
    }
    // Bounds: the lowest and highest element index reachable must lie inside `base`.
    let (mut lo, mut hi) = (offset as i128, offset as i128);
    for (&d, &s) in shape.iter().zip(strides) {
        let span = (d as i128 - 1) * s as i128;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    if lo < 0 || hi >= base_elems as i128 {
        return Err(format!(
            "strides {strides:?} with offset {offset} reach element {} outside the {base_elems}-element buffer",
            if lo < 0 { lo } else { hi }
        ));
    }
    let mut idx = vec![0usize; shape.len()];
    loop {
        let e = idx
            .iter()
            .zip(strides)
            .fold(offset as isize, |a, (&i, &s)| a + i as isize * s) as usize;
        out.extend_from_slice(&base[e * size..(e + 1) * size]);
        // Next multi-index in C order.
        let mut k = shape.len();
        loop {
            if k == 0 {
                return Ok(out);
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_a_transpose() {
        // 2x3 row-major buffer, viewed transposed as 3x2.
        let data: Vec<u8> = (0u8..6).collect();
        let shape = [3, 2];
        let strides = [1, 3];
        let t = TensorRef::strided(DType::UInt8, &shape, &data, &strides, 0);
        assert_eq!(&*t.contiguous().unwrap(), &[0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn rejects_out_of_bounds_and_bad_lengths() {
        let data = [0u8; 8];
        let t = TensorRef::strided(DType::Float32, &[2], &data, &[2], 0);
        assert!(t.contiguous().unwrap_err().contains("outside"));
        let t = TensorRef::host(DType::Float32, &[3], &data);
        assert!(t.contiguous().unwrap_err().contains("needs 12"));
        let t = TensorRef::strided(DType::Int4, &[2], &data, &[1], 0);
        assert!(t.contiguous().unwrap_err().contains("packed"));
        let t = TensorRef::host(DType::Float32, &[usize::MAX, 2], &data);
        assert!(t.contiguous().is_err());
    }
}
