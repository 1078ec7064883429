//! [`TensorRef::from_slice`]: a tensor from a typed host slice, for the element types Rust
//! runtimes hold (so an integrator needs no byte casting of its own).

use dump_core::DType;
use half::{bf16, f16};

use super::TensorRef;

mod sealed {
    pub trait Sealed {}
}

/// An element type [`TensorRef::from_slice`] accepts: `f32`, `f64`, [`half::f16`],
/// [`half::bf16`], `i8`..`i64`, `u8`..`u64` and `bool`. Sealed: each is a plain value whose
/// every byte is initialized (no padding), stored as the dump's dtype expects.
pub trait Element: sealed::Sealed + Copy + Sync + 'static {
    /// The dump dtype of this element type.
    const DTYPE: DType;
}

macro_rules! elements {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
        }
    )*};
}

elements! {
    bool => Bool,
    i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64,
    u8 => UInt8, u16 => UInt16, u32 => UInt32, u64 => UInt64,
    f16 => Float16, bf16 => BFloat16, f32 => Float32, f64 => Float64,
}

// The dump's `.npy` files are little-endian and `from_slice` hands over the slice's bytes as
// they are in memory.
#[cfg(not(target_endian = "little"))]
compile_error!("TensorRef::from_slice assumes a little-endian target");

impl<'a> TensorRef<'a> {
    /// A contiguous host tensor of shape `shape` (C order) over `data`, its dtype from `T`:
    /// `TensorRef::from_slice(&[2, 2], &[1.0f32, 2.0, 3.0, 4.0])`. A length that does not match
    /// the shape is reported by the Dumper call that receives the tensor, like
    /// [`TensorRef::host`]'s.
    pub fn from_slice<T: Element>(shape: &'a [usize], data: &'a [T]) -> Self {
        // SAFETY: `T` is one of the sealed `Element` types above: primitive integers, floats,
        // `bool` and half's `f16`/`bf16` (each a struct of one `u16`). None has padding, so
        // all `size_of_val(data)` bytes behind `data.as_ptr()` are initialized and belong to
        // `data`; `u8` has alignment 1; the returned slice borrows `data` for `'a`, so it cannot
        // outlive it, and it is read-only like `data`.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data))
        };
        TensorRef::host(T::DTYPE, shape, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dumper::tensor::Source;

    fn bytes_of<'a>(t: &TensorRef<'a>) -> &'a [u8] {
        match t.source {
            Source::Host(b) => b,
            _ => panic!("from_slice gives host bytes"),
        }
    }

    #[test]
    fn dtype_and_little_endian_bytes_per_element_type() {
        let t = TensorRef::from_slice(&[2], &[1.0f32, -2.5]);
        assert_eq!(t.dtype, DType::Float32);
        assert_eq!(t.shape, &[2]);
        let want: Vec<u8> = [1.0f32, -2.5]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(bytes_of(&t), want.as_slice());

        let t = TensorRef::from_slice(&[3], &[true, false, true]);
        assert_eq!((t.dtype, bytes_of(&t)), (DType::Bool, &[1u8, 0, 1][..]));

        let one = [bf16::from_f32(1.0)];
        let t = TensorRef::from_slice(&[1], &one);
        assert_eq!(
            (t.dtype, bytes_of(&t)),
            (DType::BFloat16, &[0x80u8, 0x3f][..])
        );
        let one = [f16::from_f32(1.0)];
        let t = TensorRef::from_slice(&[1], &one);
        assert_eq!(
            (t.dtype, bytes_of(&t)),
            (DType::Float16, &[0x00u8, 0x3c][..])
        );
        let t = TensorRef::from_slice(&[1], &[-2i64]);
        assert_eq!(
            (t.dtype, bytes_of(&t)),
            (DType::Int64, &(-2i64).to_le_bytes()[..])
        );
        let t = TensorRef::from_slice(&[1], &[0x0102u16]);
        assert_eq!((t.dtype, bytes_of(&t)), (DType::UInt16, &[2u8, 1][..]));

        let cases: [(DType, usize); 13] = [
            (<bool as Element>::DTYPE, 1),
            (<i8 as Element>::DTYPE, 1),
            (<i16 as Element>::DTYPE, 2),
            (<i32 as Element>::DTYPE, 4),
            (<i64 as Element>::DTYPE, 8),
            (<u8 as Element>::DTYPE, 1),
            (<u16 as Element>::DTYPE, 2),
            (<u32 as Element>::DTYPE, 4),
            (<u64 as Element>::DTYPE, 8),
            (<f16 as Element>::DTYPE, 2),
            (<bf16 as Element>::DTYPE, 2),
            (<f32 as Element>::DTYPE, 4),
            (<f64 as Element>::DTYPE, 8),
        ];
        for (d, size) in cases {
            assert_eq!(d.storage_bytes(1), Some(size), "{d:?}");
        }
    }
}
