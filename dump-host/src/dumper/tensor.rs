//! [`TensorRef`]: what a runtime hands the Dumper — host bytes (contiguous or strided) or a
//! device tensor behind the one device-tensor contract, [`DeviceTensor`] (from `dump-stats`;
//! implemented by `dump-device-cuda`, `dump-device-ascend` and any runtime's own type).

use std::borrow::Cow;

use dump_core::DType;
pub use dump_stats::device::DeviceTensor;

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
        }
    }

    /// A device tensor.
    pub fn device(t: &'a dyn DeviceTensor) -> Self {
        TensorRef {
            dtype: t.dtype(),
            shape: t.shape(),
            source: Source::Device(t),
            format: "DefaultFormat",
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

    /// The bytes of a host tensor handed over contiguously ([`host`](TensorRef::host));
    /// `None` for strided and device tensors.
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

    /// A host tensor as contiguous bytes: borrowed when it already is, gathered otherwise.
    /// Errors describe what is wrong with the tensor.
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
            // Device tensors are copied (or streamed) through their view in `emit`.
            Source::Device(_) => {
                Err("a device tensor is copied through its device view".to_owned())
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
