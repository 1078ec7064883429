//! [`NpyStream`]: the `.npy` writer for a tensor whose bytes arrive in chunks (a device copy
//! handed over piece by piece). Header first, then every chunk as it comes, widened on the fly
//! through the caller's scratch buffer like [`write_npy_with_scratch`](crate::write_npy_with_scratch).
//!
//! Chunks may be cut anywhere: a bf16 element split between two chunks waits in the writer
//! until its second byte arrives; float8 bytes are widened as they come; `int4`/`uint4` nibbles
//! and `uint1` bits are unpacked byte by byte,
//! and the element count decides how many of the last byte's nibbles or bits are written. The
//! file is byte-identical to the one-shot writer's for every cut. Allocation-free, `no_std`.
//!
//! ```
//! use dump_core::DType;
//! use dump_npy::{NpyStream, WriteOptions, write_npy};
//!
//! // Five int4 elements (three bytes, the last half used), handed over one byte at a time.
//! let packed = [0x21u8, 0xf3, 0x07];
//! let mut scratch = [0u8; 64];
//! let mut file = Vec::new();
//! let mut w = NpyStream::new(&mut file, DType::Int4, &[5], 3, WriteOptions::default(), &mut scratch)?;
//! for b in &packed {
//!     w.write(core::slice::from_ref(b))?;
//! }
//! assert_eq!(w.finish()?, file.len());
//! let mut whole = Vec::new();
//! write_npy(&mut whole, DType::Int4, &[5], &packed, WriteOptions::default())?;
//! assert_eq!(file, whole);
//! # Ok::<(), dump_npy::Error>(())
//! ```

use dump_core::{DType, widen};

use crate::{Error, MIN_SCRATCH_LEN, NpyLayout, NpySink, WriteOptions, header};

/// A `dump_core::widen` unpacker of packed elements: `(src, elems, dst) -> written`.
type Unpack = fn(&[u8], usize, &mut [u8]) -> Result<usize, dump_core::Error>;

/// A `.npy` file being written chunk by chunk (see the [module docs](self)).
#[derive(Debug)]
pub struct NpyStream<'s, S: NpySink> {
    sink: S,
    layout: NpyLayout,
    scratch: &'s mut [u8],
    /// Input bytes received so far.
    received: usize,
    /// Total input bytes the layout expects.
    total: usize,
    /// Elements written so far.
    done: usize,
    /// The first byte of a bf16 element whose second byte has not arrived.
    pending: Option<u8>,
}

impl<'s, S: NpySink> NpyStream<'s, S> {
    /// Validates the file for `data_len` bytes of `dtype` with logical `shape` (as
    /// [`NpyLayout::new`]) and writes the header into `sink`. `scratch` must hold at least
    /// [`MIN_SCRATCH_LEN`] bytes when the dtype widens (bf16 with [`Bf16Mode::Widen`](crate::Bf16Mode),
    /// float8, int4, uint4, uint1); about 1 MiB keeps file writes as fast as plain ones.
    pub fn new(
        mut sink: S,
        dtype: DType,
        shape: &[usize],
        data_len: usize,
        opts: WriteOptions,
        scratch: &'s mut [u8],
    ) -> Result<Self, S::Error> {
        let layout = NpyLayout::new(dtype, shape, data_len, opts)?;
        if layout.widens() && scratch.len() < MIN_SCRATCH_LEN {
            return Err(Error::Core(dump_core::Error::BufferTooSmall {
                needed: MIN_SCRATCH_LEN,
                available: scratch.len(),
            })
            .into());
        }
        header::write_header(&mut sink, layout.descr(), shape)?;
        Ok(NpyStream {
            sink,
            layout,
            scratch,
            received: 0,
            total: data_len,
            done: 0,
            pending: None,
        })
    }

    /// The planned file.
    pub fn layout(&self) -> &NpyLayout {
        &self.layout
    }

    /// The next bytes of the tensor, cut anywhere. More bytes than announced give
    /// [`Error::Core`]`(LengthMismatch)` and write nothing.
    pub fn write(&mut self, chunk: &[u8]) -> Result<(), S::Error> {
        let received = self.received.saturating_add(chunk.len());
        if received > self.total {
            return Err(length(self.total, received).into());
        }
        self.received = received;
        if chunk.is_empty() {
            return Ok(());
        }
        match (self.layout.widens(), self.layout.dtype()) {
            (false, _) => self.sink.write_all(chunk),
            (true, DType::BFloat16) => self.bf16(chunk),
            (true, d) if d.is_float8() => self.fp8(chunk),
            (true, DType::Int4) => self.packed(chunk, 2, widen::int4_to_int8),
            (true, DType::UInt4) => self.packed(chunk, 2, widen::uint4_to_uint8),
            (true, _) => self.packed(chunk, 8, widen::uint1_to_uint8),
        }
    }

    /// Checks that every announced byte arrived and returns the file's length.
    pub fn finish(self) -> Result<usize, S::Error> {
        if self.received != self.total {
            return Err(length(self.total, self.received).into());
        }
        Ok(self.layout.file_len())
    }

    /// bf16 widened to f32: a split element waits in `pending`.
    fn bf16(&mut self, mut chunk: &[u8]) -> Result<(), S::Error> {
        if let Some(lo) = self.pending.take() {
            let el = [lo, chunk[0]];
            let n = widen::bf16_to_f32(&el, &mut self.scratch[..4]).map_err(Error::Core)?;
            self.sink.write_all(&self.scratch[..n])?;
            chunk = &chunk[1..];
        }
        let whole = chunk.len() & !1;
        for piece in chunk[..whole].chunks(self.scratch.len() / 4 * 2) {
            let n = widen::bf16_to_f32(piece, &mut self.scratch[..piece.len() * 2])
                .map_err(Error::Core)?;
            self.sink.write_all(&self.scratch[..n])?;
        }
        if whole < chunk.len() {
            self.pending = Some(chunk[whole]);
        }
        Ok(())
    }

    /// float8 widened to f32, one byte per element: cut anywhere.
    fn fp8(&mut self, chunk: &[u8]) -> Result<(), S::Error> {
        let kernel = crate::write::fp8_kernel(self.layout.dtype());
        for piece in chunk.chunks((self.scratch.len() / 4).max(1)) {
            let n = kernel(piece, &mut self.scratch[..piece.len() * 4]).map_err(Error::Core)?;
            self.sink.write_all(&self.scratch[..n])?;
        }
        Ok(())
    }

    /// int4, uint4 (`per_byte` 2) or uint1 (8): whole bytes unpacked; the last byte of the tensor
    /// gives only the elements that remain.
    fn packed(&mut self, chunk: &[u8], per_byte: usize, unpack: Unpack) -> Result<(), S::Error> {
        let step = (self.scratch.len() / per_byte).max(1);
        for piece in chunk.chunks(step) {
            let n = (piece.len() * per_byte).min(self.layout.elems() - self.done);
            let out = unpack(piece, n, &mut self.scratch[..n]).map_err(Error::Core)?;
            self.sink.write_all(&self.scratch[..out])?;
            self.done += n;
        }
        Ok(())
    }
}

fn length(expected: usize, actual: usize) -> Error {
    Error::Core(dump_core::Error::LengthMismatch { expected, actual })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bf16Mode, write_npy};
    use proptest::prelude::*;

    fn streamed(
        dtype: DType,
        shape: &[usize],
        data: &[u8],
        opts: WriteOptions,
        scratch_len: usize,
        cuts: &[usize],
    ) -> Vec<u8> {
        let mut scratch = vec![0u8; scratch_len];
        let mut file = Vec::new();
        let mut w =
            NpyStream::new(&mut file, dtype, shape, data.len(), opts, &mut scratch).unwrap();
        let mut at = 0;
        for &c in cuts {
            let end = (at + c).min(data.len());
            w.write(&data[at..end]).unwrap();
            at = end;
        }
        w.write(&data[at..]).unwrap();
        let len = w.finish().unwrap();
        assert_eq!(len, file.len());
        file
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Any chunking of an int4 / uint4 / uint1 / float8 / bf16 / f32 tensor, through any scratch size, gives
        /// the one-shot writer's bytes.
        #[test]
        fn any_chunking_gives_the_one_shot_file(
            dtype in prop::sample::select(vec![
                DType::Int4, DType::UInt1, DType::BFloat16, DType::Float32, DType::Int8,
                DType::UInt4, DType::Float8E4M3FN, DType::Float8E5M2, DType::Float8E4M3FNUZ,
                DType::Float8E5M2FNUZ,
            ]),
            raw in any::<bool>(),
            elems in 0usize..300,
            seed in prop::collection::vec(any::<u8>(), 1..64),
            scratch_len in 8usize..80,
            cuts in prop::collection::vec(0usize..40, 0..12),
        ) {
            let len = dtype.storage_bytes(elems).unwrap();
            let data: Vec<u8> = (0..len).map(|i| seed[i % seed.len()].wrapping_mul(i as u8 | 1)).collect();
            let opts = WriteOptions::new().with_bf16(if raw { Bf16Mode::Raw } else { Bf16Mode::Widen });
            let mut whole = Vec::new();
            write_npy(&mut whole, dtype, &[elems], &data, opts).unwrap();
            prop_assert_eq!(streamed(dtype, &[elems], &data, opts, scratch_len, &cuts), whole);
        }
    }

    #[test]
    fn lengths_and_scratch_are_checked() {
        let mut file = Vec::new();
        let mut small = [0u8; 4];
        assert!(matches!(
            NpyStream::new(
                &mut file,
                DType::Int4,
                &[3],
                2,
                WriteOptions::default(),
                &mut small
            ),
            Err(Error::Core(dump_core::Error::BufferTooSmall { .. }))
        ));
        assert!(file.is_empty(), "nothing written for a refused stream");
        let mut scratch = [0u8; 8];
        let mut w = NpyStream::new(
            &mut file,
            DType::Float32,
            &[2],
            8,
            WriteOptions::default(),
            &mut scratch,
        )
        .unwrap();
        w.write(&[0; 6]).unwrap();
        assert_eq!(w.write(&[0; 3]), Err(length(8, 9)));
        assert_eq!(w.finish(), Err(length(8, 6)));
        // A plain dtype needs no scratch at all.
        let mut none = [0u8; 0];
        let mut out = Vec::new();
        let w = NpyStream::new(
            &mut out,
            DType::Float32,
            &[0],
            0,
            WriteOptions::default(),
            &mut none,
        )
        .unwrap();
        assert_eq!(w.finish().unwrap(), out.len());
    }
}
