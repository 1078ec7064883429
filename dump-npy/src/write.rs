//! The streaming `.npy` writer: header, then the tensor bytes, widened on the fly where numpy
//! has no matching type.
//!
//! | dtype | written as | how |
//! |---|---|---|
//! | `bfloat16` | `<f4` (default) or `<E2` ([`Bf16Mode::Raw`]) | exact widening `bits << 16` |
//! | `float8_e4m3fn`, `float8_e5m2`, `float8_e4m3fnuz`, `float8_e5m2fnuz` | `<f4` | exact widening (NaN to a quiet NaN, sign kept) |
//! | `int4` | `|i1` | low nibble first, sign-extended |
//! | `uint4` | `|u1` | low nibble first, zero-extended |
//! | `uint1` | `|u1` | most significant bit first, 0/1 bytes |
//! | others | their own descr | bytes copied as given |
//!
//! Widening goes through a fixed scratch buffer ([`SCRATCH_LEN`] bytes on the stack for
//! [`write_npy`], or the caller's for [`write_npy_with_scratch`]); nothing allocates.

use dump_core::{DType, widen};

use crate::{Bf16Mode, Error, NpySink, WriteOptions, header};

/// Bytes of the stack buffer [`write_npy`] widens through (bf16, float8, int4, uint4, uint1
/// only; other
/// dtypes use no buffer). On small stacks (firmware), widen with [`write_npy_with_scratch`]
/// and a smaller buffer instead.
pub const SCRATCH_LEN: usize = 64 * 1024;

/// The smallest scratch buffer [`write_npy_with_scratch`] accepts.
pub const MIN_SCRATCH_LEN: usize = 8;

/// How the tensor bytes are widened on their way to the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Widening {
    /// bf16 to f32.
    Bf16ToF32,
    /// float8 (E4M3FN or E5M2, the dtype says which) to f32.
    Fp8ToF32(DType),
    /// Packed int4 to one int8 per element.
    Int4ToI8,
    /// Packed uint4 to one uint8 per element.
    UInt4ToU8,
    /// Packed uint1 to one uint8 (0/1) per element.
    UInt1ToU8,
}

/// Everything about a `.npy` file that follows from dtype, shape, data length and options,
/// computed (and validated) before a single byte is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NpyLayout {
    dtype: DType,
    descr: &'static str,
    elems: usize,
    header_len: usize,
    data_len: usize,
    widening: Option<Widening>,
}

impl NpyLayout {
    /// Validates `data_len` bytes of `dtype` with logical `shape` and plans the file.
    ///
    /// Errors: [`Error::ShapeOverflow`] when the element count or the output size overflows,
    /// [`Error::Core`] with `LengthMismatch` when `data_len` is not the storage of the shape,
    /// and the header errors of [`crate::header_len`].
    pub fn new(
        dtype: DType,
        shape: &[usize],
        data_len: usize,
        opts: WriteOptions,
    ) -> Result<Self, Error> {
        let elems = shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or(Error::ShapeOverflow)?;
        match dtype.check_len(data_len, elems) {
            Ok(()) => {}
            Err(dump_core::Error::Overflow) => return Err(Error::ShapeOverflow),
            Err(e) => return Err(Error::Core(e)),
        }
        let (descr, widening, out_size) = match (dtype, opts.bf16) {
            (DType::BFloat16, Bf16Mode::Widen) => ("<f4", Some(Widening::Bf16ToF32), 4),
            (d, _) if d.is_float8() => ("<f4", Some(Widening::Fp8ToF32(dtype)), 4),
            (DType::Int4, _) => ("|i1", Some(Widening::Int4ToI8), 1),
            (DType::UInt4, _) => ("|u1", Some(Widening::UInt4ToU8), 1),
            (DType::UInt1, _) => ("|u1", Some(Widening::UInt1ToU8), 1),
            (d, _) => (
                d.npy_descr().ok_or(Error::NoDescr(d))?,
                None,
                d.size().ok_or(Error::NoDescr(d))?,
            ),
        };
        let data_len = elems.checked_mul(out_size).ok_or(Error::ShapeOverflow)?;
        let header_len = header::header_len(descr, shape)?;
        header_len
            .checked_add(data_len)
            .ok_or(Error::ShapeOverflow)?;
        Ok(NpyLayout {
            dtype,
            descr,
            elems,
            header_len,
            data_len,
            widening,
        })
    }

    /// The descr written into the header (`<f4` for widened bf16, `|i1` for int4, ...).
    pub fn descr(&self) -> &'static str {
        self.descr
    }

    /// The dtype of the input bytes.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements (product of the shape; 1 for a 0-d tensor).
    pub fn elems(&self) -> usize {
        self.elems
    }

    /// Header bytes, i.e. the data offset.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// Data bytes in the file (after widening).
    pub fn data_len(&self) -> usize {
        self.data_len
    }

    /// Size of the whole file (cannot overflow: checked by [`NpyLayout::new`]).
    pub fn file_len(&self) -> usize {
        self.header_len + self.data_len
    }

    /// `true` when the data is converted on the way (bf16 widened, float8, int4, uint4,
    /// uint1).
    pub fn widens(&self) -> bool {
        self.widening.is_some()
    }
}

/// Writes `data` (the storage of a `dtype` tensor with logical `shape`, C order) as a `.npy`
/// file into `sink`, widening through a [`SCRATCH_LEN`]-byte stack buffer. Returns the number
/// of bytes written.
///
/// ```
/// use dump_core::DType;
/// use dump_npy::{write_npy, WriteOptions};
///
/// let bf16: Vec<u8> = [1.0f32, -2.5].iter().flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes()).collect();
/// let mut file = Vec::new();
/// let n = write_npy(&mut file, DType::BFloat16, &[2], &bf16, WriteOptions::default()).unwrap();
/// assert_eq!(n, 128 + 8);
/// assert!(file[10..].starts_with(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"));
/// assert_eq!(&file[128..], [1.0f32.to_le_bytes(), (-2.5f32).to_le_bytes()].concat());
/// ```
pub fn write_npy<S: NpySink + ?Sized>(
    sink: &mut S,
    dtype: DType,
    shape: &[usize],
    data: &[u8],
    opts: WriteOptions,
) -> Result<usize, S::Error> {
    let layout = NpyLayout::new(dtype, shape, data.len(), opts)?;
    header::write_header(sink, layout.descr, shape)?;
    match layout.widening {
        None if data.is_empty() => {}
        None => sink.write_all(data)?,
        Some(w) => widen_on_stack(sink, w, layout.elems, data)?,
    }
    Ok(layout.file_len())
}

/// [`write_widened`] through a [`SCRATCH_LEN`]-byte stack buffer. Kept out of line so that
/// only widening calls reserve it: inlined into [`write_npy`], the buffer made every call's
/// stack frame 64 KiB, widening or not (seen in the thumbv7em firmware build), which
/// overflows a microcontroller's stack.
#[inline(never)]
fn widen_on_stack<S: NpySink + ?Sized>(
    sink: &mut S,
    widening: Widening,
    total: usize,
    data: &[u8],
) -> Result<(), S::Error> {
    write_widened(sink, widening, total, data, &mut [0u8; SCRATCH_LEN])
}

/// [`write_npy`] with a caller-provided scratch buffer (at least [`MIN_SCRATCH_LEN`] bytes).
///
/// Smaller than [`SCRATCH_LEN`] suits small stacks; larger suits files: each chunk is one
/// `write_all`, i.e. one syscall on a `File`, and on the reference VM widened writes need
/// chunks of about 1 MiB to keep up with a plain write (64 KiB chunks reach about half the
/// speed). [`crate::write_file`] uses 1 MiB.
pub fn write_npy_with_scratch<S: NpySink + ?Sized>(
    sink: &mut S,
    dtype: DType,
    shape: &[usize],
    data: &[u8],
    opts: WriteOptions,
    scratch: &mut [u8],
) -> Result<usize, S::Error> {
    let layout = NpyLayout::new(dtype, shape, data.len(), opts)?;
    if layout.widens() && scratch.len() < MIN_SCRATCH_LEN {
        return Err(Error::Core(dump_core::Error::BufferTooSmall {
            needed: MIN_SCRATCH_LEN,
            available: scratch.len(),
        })
        .into());
    }
    header::write_header(sink, layout.descr, shape)?;
    match layout.widening {
        None if data.is_empty() => {}
        None => sink.write_all(data)?,
        Some(w) => write_widened(sink, w, layout.elems, data, scratch)?,
    }
    Ok(layout.file_len())
}

/// Streams the widened data in chunks that respect each kernel's alignment rules: even byte
/// offsets for bf16, even element counts for int4/uint4 and multiples of 8 for uint1 (except
/// the last chunk); float8 may be cut anywhere.
fn write_widened<S: NpySink + ?Sized>(
    sink: &mut S,
    widening: Widening,
    total: usize,
    data: &[u8],
    scratch: &mut [u8],
) -> Result<(), S::Error> {
    let mut done = 0usize;
    while done < total {
        let out_len = match widening {
            Widening::Bf16ToF32 => {
                let n = (total - done).min(scratch.len() / 4);
                let src = &data[done * 2..(done + n) * 2];
                let written =
                    widen::bf16_to_f32(src, &mut scratch[..n * 4]).map_err(Error::Core)?;
                done += n;
                written
            }
            Widening::Fp8ToF32(dtype) => {
                let n = (total - done).min(scratch.len() / 4);
                let src = &data[done..done + n];
                let written = fp8_kernel(dtype)(src, &mut scratch[..n * 4]).map_err(Error::Core)?;
                done += n;
                written
            }
            Widening::Int4ToI8 | Widening::UInt4ToU8 => {
                let n = (total - done).min(scratch.len() & !1);
                let start = done / 2;
                let src = &data[start..start + n.div_ceil(2)];
                let unpack = if widening == Widening::Int4ToI8 {
                    widen::int4_to_int8
                } else {
                    widen::uint4_to_uint8
                };
                let written = unpack(src, n, &mut scratch[..n]).map_err(Error::Core)?;
                done += n;
                written
            }
            Widening::UInt1ToU8 => {
                let n = (total - done).min(scratch.len() & !7);
                let start = done / 8;
                let src = &data[start..start + n.div_ceil(8)];
                let written =
                    widen::uint1_to_uint8(src, n, &mut scratch[..n]).map_err(Error::Core)?;
                done += n;
                written
            }
        };
        sink.write_all(&scratch[..out_len])?;
    }
    Ok(())
}

/// The `dump_core::widen` kernel of a float8 dtype (E4M3FN for any dtype that is not one of
/// the other three float8 dtypes; callers only pass float8 dtypes).
pub(crate) fn fp8_kernel(dtype: DType) -> fn(&[u8], &mut [u8]) -> Result<usize, dump_core::Error> {
    match dtype {
        DType::Float8E5M2 => widen::f8e5m2_to_f32,
        DType::Float8E4M3FNUZ => widen::f8e4m3fnuz_to_f32,
        DType::Float8E5M2FNUZ => widen::f8e5m2fnuz_to_f32,
        _ => widen::f8e4m3fn_to_f32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SliceSink;

    fn bf16_bytes(vals: &[f32]) -> Vec<u8> {
        vals.iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect()
    }

    #[cfg(feature = "std")]
    #[test]
    fn writing_without_widening_needs_no_big_stack() {
        // A 24 KiB stack (firmware-sized): the 64 KiB widening buffer must not be part of
        // write_npy's own frame, or this thread overflows its stack and the test aborts.
        let t = std::thread::Builder::new()
            .stack_size(24 << 10)
            .spawn(|| {
                let data: Vec<u8> = (0..64u8).collect();
                let mut out = Vec::new();
                write_npy(&mut out, DType::Float32, &[16], &data, WriteOptions::new()).unwrap()
            })
            .unwrap();
        assert_eq!(t.join().unwrap(), 128 + 64);
    }

    #[test]
    fn plain_dtypes_are_copied_after_the_header() {
        let data: Vec<u8> = (0..24u8).collect();
        let mut out = Vec::new();
        let n = write_npy(&mut out, DType::Int32, &[2, 3], &data, WriteOptions::new()).unwrap();
        assert_eq!(n, 128 + 24);
        assert_eq!(&out[128..], &data[..]);
        assert!(
            out[10..].starts_with(b"{'descr': '<i4', 'fortran_order': False, 'shape': (2,3,), }")
        );
    }

    #[test]
    fn bf16_raw_and_widened() {
        let vals = [
            1.0f32,
            -0.0,
            f32::INFINITY,
            f32::from_bits(0x7fc1_0000),
            3.140625,
        ];
        let src = bf16_bytes(&vals);
        let mut raw = Vec::new();
        write_npy(
            &mut raw,
            DType::BFloat16,
            &[5],
            &src,
            WriteOptions::MINDSPORE_CPU,
        )
        .unwrap();
        assert!(raw[10..].starts_with(b"{'descr': '<E2'"));
        assert_eq!(&raw[128..], &src[..]);
        // Tiny scratch: many chunks, each even.
        for scratch_len in [8, 9, 12, 64] {
            let mut scratch = vec![0u8; scratch_len];
            let mut wide = Vec::new();
            write_npy_with_scratch(
                &mut wide,
                DType::BFloat16,
                &[5],
                &src,
                WriteOptions::new(),
                &mut scratch,
            )
            .unwrap();
            assert!(wide[10..].starts_with(b"{'descr': '<f4'"));
            let want: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            assert_eq!(&wide[128..], &want[..], "scratch {scratch_len}");
        }
    }

    #[test]
    fn float8_and_uint4_widen() {
        // e4m3fn 1.0 (0x38), -448 (0xfe), NaN (0x7f); e5m2 1.0 (0x3c), -inf (0xfc), 2^-16 (0x01)
        // e4m3fnuz 1.0 (0x40), -240 (0xff), NaN (0x80); e5m2fnuz 1.0 (0x40), 57344 (0x7f),
        // 2^-17 (0x01)
        let cases: [(DType, [u8; 3], [u32; 3]); 4] = [
            (
                DType::Float8E4M3FNUZ,
                [0x40, 0xff, 0x80],
                [1f32.to_bits(), (-240f32).to_bits(), 0xffc0_0000],
            ),
            (
                DType::Float8E5M2FNUZ,
                [0x40, 0x7f, 0x01],
                [1f32.to_bits(), 57344f32.to_bits(), 2f32.powi(-17).to_bits()],
            ),
            (
                DType::Float8E4M3FN,
                [0x38, 0xfe, 0x7f],
                [1f32.to_bits(), (-448f32).to_bits(), 0x7fc0_0000],
            ),
            (
                DType::Float8E5M2,
                [0x3c, 0xfc, 0x01],
                [
                    1f32.to_bits(),
                    f32::NEG_INFINITY.to_bits(),
                    2f32.powi(-16).to_bits(),
                ],
            ),
        ];
        for (dtype, src, want) in cases {
            // Scratch of 8 bytes: two elements per chunk, so the three take two chunks.
            for scratch_len in [8, 9, SCRATCH_LEN] {
                let mut scratch = vec![0u8; scratch_len];
                let mut out = Vec::new();
                let n = write_npy_with_scratch(
                    &mut out,
                    dtype,
                    &[3],
                    &src,
                    WriteOptions::new(),
                    &mut scratch,
                )
                .unwrap();
                assert_eq!(n, 128 + 12);
                assert!(out[10..].starts_with(b"{'descr': '<f4'"), "{dtype}");
                let got: Vec<u32> = out[128..]
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                assert_eq!(got, want, "{dtype} scratch {scratch_len}");
            }
        }
        // uint4 [1, 15, 8, 0, 7] low nibble first; the last byte's high nibble is padding.
        let mut out = Vec::new();
        write_npy(
            &mut out,
            DType::UInt4,
            &[5],
            &[0xF1, 0x08, 0xA7],
            WriteOptions::new(),
        )
        .unwrap();
        assert!(out[10..].starts_with(b"{'descr': '|u1'"));
        assert_eq!(&out[128..], [1, 15, 8, 0, 7]);
    }

    #[test]
    fn int4_and_uint1_widen_with_logical_shape() {
        // int4: elements 1, -1, 7, -8, 0 packed low nibble first.
        let int4 = [0xF1u8, 0x87, 0x00];
        for scratch_len in [8, 10, SCRATCH_LEN] {
            let mut scratch = vec![0u8; scratch_len];
            let mut out = Vec::new();
            write_npy_with_scratch(
                &mut out,
                DType::Int4,
                &[5],
                &int4,
                WriteOptions::new(),
                &mut scratch,
            )
            .unwrap();
            assert!(
                out[10..].starts_with(b"{'descr': '|i1', 'fortran_order': False, 'shape': (5,), }")
            );
            assert_eq!(&out[128..], &[1u8, 0xFF, 7, 0xF8, 0][..]);
        }
        // uint1: 11 elements, MSB first.
        let bits = [0b1010_0001u8, 0b1100_0000];
        let want = [1u8, 0, 1, 0, 0, 0, 0, 1, 1, 1, 0];
        for scratch_len in [8, 15, 16] {
            let mut scratch = vec![0u8; scratch_len];
            let mut out = Vec::new();
            write_npy_with_scratch(
                &mut out,
                DType::UInt1,
                &[11, 1],
                &bits,
                WriteOptions::new(),
                &mut scratch,
            )
            .unwrap();
            assert!(
                out[10..]
                    .starts_with(b"{'descr': '|u1', 'fortran_order': False, 'shape': (11,1,), }")
            );
            assert_eq!(&out[128..], &want[..]);
        }
    }

    #[test]
    fn validation_errors_never_write() {
        let mut buf = [0u8; 512];
        let mut sink = SliceSink::new(&mut buf);
        assert_eq!(
            write_npy(
                &mut sink,
                DType::Float32,
                &[2, 3],
                &[0u8; 23],
                WriteOptions::new()
            ),
            Err(Error::Core(dump_core::Error::LengthMismatch {
                expected: 24,
                actual: 23
            }))
        );
        assert_eq!(
            write_npy(
                &mut sink,
                DType::Float64,
                &[usize::MAX, 2],
                &[],
                WriteOptions::new()
            ),
            Err(Error::ShapeOverflow)
        );
        assert_eq!(
            write_npy(
                &mut sink,
                DType::Float64,
                &[usize::MAX / 4],
                &[],
                WriteOptions::new()
            ),
            Err(Error::ShapeOverflow)
        );
        assert_eq!(
            write_npy(&mut sink, DType::Int4, &[3], &[0u8; 1], WriteOptions::new()),
            Err(Error::Core(dump_core::Error::LengthMismatch {
                expected: 2,
                actual: 1
            }))
        );
        let mut tiny = [0u8; 7];
        assert_eq!(
            write_npy_with_scratch(
                &mut sink,
                DType::UInt1,
                &[8],
                &[1],
                WriteOptions::new(),
                &mut tiny
            ),
            Err(Error::Core(dump_core::Error::BufferTooSmall {
                needed: 8,
                available: 7
            }))
        );
        assert!(sink.is_empty());
        // A sink that is too small reports its own error.
        let mut small = [0u8; 130];
        let mut sink = SliceSink::new(&mut small);
        assert!(matches!(
            write_npy(
                &mut sink,
                DType::Float32,
                &[1, 1],
                &[0u8; 4],
                WriteOptions::new()
            ),
            Err(Error::Core(dump_core::Error::BufferTooSmall { .. }))
        ));
    }

    #[test]
    fn zero_sized_and_scalar() {
        let mut out = Vec::new();
        assert_eq!(
            write_npy(
                &mut out,
                DType::BFloat16,
                &[3, 0, 2],
                &[],
                WriteOptions::new()
            ),
            Ok(128)
        );
        assert!(
            out[10..].starts_with(b"{'descr': '<f4', 'fortran_order': False, 'shape': (3,0,2,), }")
        );
        let mut out = Vec::new();
        assert_eq!(
            write_npy(&mut out, DType::Bool, &[], &[1], WriteOptions::new()),
            Ok(129)
        );
        assert_eq!(out[128], 1);
        let l = NpyLayout::new(DType::UInt1, &[9], 2, WriteOptions::new()).unwrap();
        assert_eq!(
            (l.descr(), l.elems(), l.data_len(), l.file_len()),
            ("|u1", 9, 9, 137)
        );
        assert!(l.widens());
        assert_eq!(l.dtype(), DType::UInt1);
        assert_eq!(l.header_len(), 128);
    }
}
