//! [`StreamStats`] (feature `alloc`): statistics plus MD5 / SHA-1 of one tensor whose bytes
//! arrive in chunks of any length — the one place where "statistics and digests over chunks"
//! is computed. The host [`engine`](crate::engine) feeds a whole tensor in one call; the
//! Dumper feeds a device tensor's copy chunk by chunk.
//!
//! # Same bits however the bytes are cut
//!
//! The statistics kernels merge one partial per [`FUSE_CHUNK`] bytes, and floating-point sums
//! depend on where partials start. So the bytes are re-cut at fixed [`FUSE_CHUNK`] offsets of
//! the tensor, whatever the chunks handed in: a chunk that ends inside a piece is kept (copied)
//! until the piece is complete or the tensor ends. A tensor handed over whole, or in chunks that
//! are multiples of [`FUSE_CHUNK`], is never copied. The result is bit-identical to
//! [`dump_core::stats::summarize`] and [`Engine::summarize`](crate::engine::Engine::summarize)
//! for every cut, including cuts inside an element or inside an `int4`/`uint1` byte.
//!
//! ```
//! use dump_core::DType;
//! use dump_stats::{Hashes, StreamStats};
//!
//! let data: Vec<u8> = (0..1000u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
//! let mut s = StreamStats::new(DType::Float32, 1000, Hashes { md5: true, sha1: false })?;
//! for chunk in data.chunks(333) {
//!     s.update(chunk)?; // 333 bytes: chunks end inside elements
//! }
//! let stats = s.finish()?;
//! assert_eq!(stats.summary.unwrap().max_value(), 999.0);
//! assert_eq!(stats.md5, Some(dump_core::hash::md5(&data)));
//! # Ok::<(), dump_stats::Error>(())
//! ```

use alloc::vec::Vec;

use dump_core::{
    DType,
    hash::{Md5Stream, MsSha1},
    stats::{Accumulator, FUSE_CHUNK},
};

use crate::{Error, Hashes, TensorStats};

/// Streaming statistics and digests of one tensor (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct StreamStats {
    acc: Accumulator,
    md5: Option<Md5Stream>,
    sha1: Option<MsSha1>,
    /// Storage bytes of the whole tensor.
    total: usize,
    /// Bytes handed in so far (fed or waiting in `carry`).
    received: usize,
    /// The start of a [`FUSE_CHUNK`] piece that is not complete yet.
    carry: Vec<u8>,
}

impl StreamStats {
    /// A stream for a tensor of `elems` elements of `dtype`, computing the digests `hashes`
    /// asks for. Complex dtypes and element counts whose storage overflows are errors.
    pub fn new(dtype: DType, elems: usize, hashes: Hashes) -> Result<StreamStats, Error> {
        let acc = Accumulator::new(dtype, elems)?;
        let total = dtype
            .storage_bytes(elems)
            .ok_or(Error::Core(dump_core::Error::Overflow))?;
        Ok(StreamStats {
            acc,
            md5: hashes.md5.then(Md5Stream::new),
            sha1: hashes.sha1.then(|| MsSha1::new(dtype, elems)),
            total,
            received: 0,
            carry: Vec::new(),
        })
    }

    /// Storage bytes of the whole tensor (what [`update`](StreamStats::update) must be given
    /// in total).
    pub fn total_bytes(&self) -> usize {
        self.total
    }

    /// The next bytes of the tensor, any length. More bytes than the tensor holds give
    /// [`Error::Core`]`(LengthMismatch)`.
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), Error> {
        let received = self.received.saturating_add(chunk.len());
        if received > self.total {
            return Err(Error::Core(dump_core::Error::LengthMismatch {
                expected: self.total,
                actual: received,
            }));
        }
        self.received = received;
        let mut rest = chunk;
        if !self.carry.is_empty() {
            let take = (FUSE_CHUNK - self.carry.len()).min(rest.len());
            self.carry.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.carry.len() < FUSE_CHUNK && self.received < self.total {
                return Ok(());
            }
            let piece = core::mem::take(&mut self.carry);
            self.piece(&piece)?;
            self.carry = piece;
            self.carry.clear();
        }
        while rest.len() >= FUSE_CHUNK {
            let (piece, tail) = rest.split_at(FUSE_CHUNK);
            self.piece(piece)?;
            rest = tail;
        }
        if rest.is_empty() {
            Ok(())
        } else if self.received == self.total {
            self.piece(rest)
        } else {
            self.carry.reserve_exact(FUSE_CHUNK);
            self.carry.extend_from_slice(rest);
            Ok(())
        }
    }

    /// One piece at a fixed [`FUSE_CHUNK`] offset: statistics, then the digests while the
    /// bytes are still in cache.
    fn piece(&mut self, piece: &[u8]) -> Result<(), Error> {
        self.acc.update(piece)?;
        if let Some(m) = self.md5.as_mut() {
            m.update(piece);
        }
        if let Some(s) = self.sha1.as_mut() {
            s.update(piece);
        }
        Ok(())
    }

    /// The statistics and digests. Fewer bytes than the tensor holds give
    /// [`Error::Core`]`(LengthMismatch)`.
    pub fn finish(self) -> Result<TensorStats, Error> {
        if self.received != self.total {
            return Err(Error::Core(dump_core::Error::LengthMismatch {
                expected: self.total,
                actual: self.received,
            }));
        }
        Ok(TensorStats {
            summary: self.acc.finish()?,
            md5: self.md5.map(Md5Stream::finish),
            sha1: self.sha1.map(MsSha1::finish),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dump_core::stats::summarize;
    use proptest::prelude::*;

    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    const BOTH: Hashes = Hashes {
        md5: true,
        sha1: true,
    };

    /// The one-shot answer: `summarize` plus one-call digests.
    fn one_shot(dtype: DType, data: &[u8], elems: usize) -> TensorStats {
        TensorStats {
            summary: summarize(dtype, data, elems).unwrap(),
            md5: Some(dump_core::hash::md5(data)),
            sha1: Some(dump_core::hash::ms_sha1(dtype, data, elems)),
        }
    }

    /// Bit patterns of a result, so NaN sums and signed zeros compare exactly.
    fn bits(t: &TensorStats) -> impl PartialEq + core::fmt::Debug + use<> {
        let s = t.summary.unwrap_or(dump_core::Summary::EMPTY);
        (
            [s.max, s.min, s.sum, s.sum_sq, s.first_nan, s.last_nan].map(f64::to_bits),
            [s.count, s.nan, s.pos_inf, s.neg_inf, s.zero, s.pos, s.neg],
            t.md5,
            t.sha1,
        )
    }

    fn streamed(dtype: DType, data: &[u8], elems: usize, cuts: &[usize]) -> TensorStats {
        let mut s = StreamStats::new(dtype, elems, BOTH).unwrap();
        let mut at = 0;
        for &c in cuts {
            let end = (at + c).min(data.len());
            s.update(&data[at..end]).unwrap();
            at = end;
        }
        s.update(&data[at..]).unwrap();
        s.finish().unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Any cut of any dtype's bytes (inside elements and packed bytes too) gives the bits
        /// of the one-shot computation. Tensors span several FUSE_CHUNK pieces.
        #[test]
        fn any_cut_gives_the_one_shot_bits(
            dtype in prop::sample::select(vec![
                DType::Float32, DType::Float16, DType::BFloat16, DType::Float64, DType::Int4,
                DType::UInt1, DType::Int8, DType::UInt64, DType::Bool,
            ]),
            seed in any::<u64>(),
            extra in 0usize..3000,
            cuts in prop::collection::vec(0usize..(FUSE_CHUNK + 5000), 0..8),
        ) {
            let total = FUSE_CHUNK * 2 + extra;
            let bits_per = dtype.bits() as usize;
            let elems = total * 8 / bits_per - usize::from(dtype == DType::Int4 && extra % 2 == 1);
            let len = dtype.storage_bytes(elems).unwrap();
            let mut data = bytes(seed, len);
            if dtype == DType::Bool {
                data.iter_mut().for_each(|b| *b &= 1);
            }
            let want = one_shot(dtype, &data, elems);
            prop_assert_eq!(bits(&streamed(dtype, &data, elems, &cuts)), bits(&want));
        }
    }

    #[test]
    fn single_bytes_and_whole_tensors_agree() {
        let n = FUSE_CHUNK / 4 + 77;
        let data = bytes(7, n * 4);
        let want = one_shot(DType::Float32, &data, n);
        let ones = vec![1; data.len()];
        assert_eq!(
            bits(&streamed(DType::Float32, &data, n, &ones)),
            bits(&want)
        );
        assert_eq!(bits(&streamed(DType::Float32, &data, n, &[])), bits(&want));
    }

    #[test]
    fn too_many_or_too_few_bytes_are_errors() {
        let mut s = StreamStats::new(DType::Float32, 2, Hashes::NONE).unwrap();
        assert_eq!(s.total_bytes(), 8);
        s.update(&[0; 6]).unwrap();
        assert_eq!(
            s.clone().update(&[0; 3]),
            Err(Error::Core(dump_core::Error::LengthMismatch {
                expected: 8,
                actual: 9
            }))
        );
        assert_eq!(
            s.finish(),
            Err(Error::Core(dump_core::Error::LengthMismatch {
                expected: 8,
                actual: 6
            }))
        );
        assert!(StreamStats::new(DType::Complex64, 1, Hashes::NONE).is_err());
        let empty = StreamStats::new(DType::Float32, 0, Hashes::NONE).unwrap();
        assert_eq!(empty.finish().unwrap().summary, None);
    }
}
