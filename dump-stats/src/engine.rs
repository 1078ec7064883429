//! The host engine (feature `std`): the [`Summary`] plus the requested digests of a tensor in
//! one pass over memory, big tensors split across threads, batches of tensors over all cores.
//!
//! # Determinism
//!
//! A tensor is cut into fixed blocks of [`BLOCK_BYTES`] (the cut depends only on the dtype,
//! never on the thread count). Every block gets its own partial [`Summary`] from
//! [`dump_core::stats::summarize`], and the partials are merged **in block order**, starting
//! from [`Summary::EMPTY`]. The single-threaded path folds the same partials in the same order,
//! so 1, 2 or 16 threads give bit-identical results (sums included).
//!
//! # Threads
//!
//! The engine uses `std::thread::scope` per call rather than a persistent pool: scoped threads
//! may borrow the caller's tensor bytes without `unsafe` lifetime erasure or `'static` copies,
//! and their cost (about 300 µs to spawn, wake the idle vCPU and join on the 2-vCPU KVM
//! machines this was measured on; a persistent pool would pay the same vCPU wake-up) is paid
//! only for tensors of at least [`Engine::split_threshold`] bytes, where the work itself takes
//! more than a millisecond. The default threshold ([`DEFAULT_SPLIT_THRESHOLD`]) comes from the
//! `engine` rows of `cargo xtask bench-stats` (see the constant). Smaller tensors run on the
//! calling thread; [`Engine::summarize_many`] spreads many tensors over the threads instead.
//!
//! # Digests
//!
//! MD5 (and MindSpore's SHA-1 scheme) are serial within one digest. On one thread the engine
//! fuses them with the statistics block by block (each 256 KiB block is hashed while it is hot
//! in L2). With more threads each digest gets its own thread running over the tensor while the
//! remaining threads compute the statistics blocks; with as many digests as threads, the
//! calling thread fuses the last digest with the statistics. A digest therefore bounds the
//! speed for one tensor (about 0.75 GB/s for MD5); batches ([`Engine::summarize_many`]) hash
//! different tensors on different cores.

use crate::{Error, Hashes, StreamStats, TensorStats};
use dump_core::{
    DType, Summary,
    hash::{Md5Stream, MsSha1},
    stats::summarize,
};
use std::{
    sync::atomic::{AtomicUsize, Ordering},
    thread,
};

/// Bytes per block: the unit of work of a thread and of the fused stats+hash pass. Fits the
/// 2 MiB L2 of the target machines several times over and amortises the per-call overhead of
/// the kernels (about 15 µs of f32 work per block).
pub const BLOCK_BYTES: usize = 256 << 10;

/// Default [`Engine::split_threshold`]: 16 MiB.
///
/// Chosen from the `engine` rows of `cargo xtask bench-stats` (f32, 1 vs 2 threads, split
/// forced, quiet machine): one thread runs at about 15 GB/s (1 MiB in 68 µs), but a forced
/// split ran at 2.9 / 4.5 / 8.1 GB/s for 1 / 2 / 4 MiB, i.e. spawning, waking the idle second
/// vCPU and joining costs about 300 µs on this KVM machine kind (far more than the 10–30 µs of
/// a bare-metal spawn). The split breaks even near 8 MiB and wins clearly from 16 MiB
/// (64 MiB: 10.5 → 15.2 GB/s; 512 MiB: 11.1 → 21.6 GB/s).
pub const DEFAULT_SPLIT_THRESHOLD: usize = 16 << 20;

/// A borrowed tensor: `elems` little-endian elements of `dtype` in `data` (C order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorRef<'a> {
    /// Element type.
    pub dtype: DType,
    /// The tensor bytes (packed for `int4`/`uint1`).
    pub data: &'a [u8],
    /// Number of elements.
    pub elems: usize,
}

impl<'a> TensorRef<'a> {
    /// A tensor of `elems` elements of `dtype` stored in `data`.
    pub const fn new(dtype: DType, data: &'a [u8], elems: usize) -> TensorRef<'a> {
        TensorRef { dtype, data, elems }
    }
}

/// The fixed block cut of one tensor.
struct Blocks<'a> {
    t: TensorRef<'a>,
    block_elems: usize,
    count: usize,
}

impl<'a> Blocks<'a> {
    fn new(t: TensorRef<'a>) -> Result<Blocks<'a>, Error> {
        if t.dtype.is_complex() {
            return Err(Error::Core(dump_core::Error::Unsupported(t.dtype)));
        }
        t.dtype.check_len(t.data.len(), t.elems)?;
        // A whole number of bytes and of elements for every dtype (bits divides 8 * BLOCK_BYTES).
        let block_elems = BLOCK_BYTES * 8 / t.dtype.bits() as usize;
        Ok(Blocks {
            t,
            block_elems,
            count: t.elems.div_ceil(block_elems),
        })
    }

    /// Bytes and element count of block `i`.
    fn get(&self, i: usize) -> (&'a [u8], usize) {
        let start = i * self.block_elems;
        let n = self.block_elems.min(self.t.elems - start);
        let byte_start = start / 8 * self.t.dtype.bits() as usize;
        let len = self.t.dtype.storage_bytes(n).unwrap_or(0);
        (&self.t.data[byte_start..byte_start + len], n)
    }

    fn partial(&self, i: usize) -> Result<Summary, Error> {
        let (bytes, n) = self.get(i);
        Ok(summarize(self.t.dtype, bytes, n)?.unwrap_or(Summary::EMPTY))
    }
}

/// Folds block partials in order (the one place where partials combine).
fn fold(partials: impl Iterator<Item = Summary>) -> Option<Summary> {
    let mut acc = Summary::EMPTY;
    partials.for_each(|p| acc.merge(&p));
    (!acc.is_empty()).then_some(acc)
}

/// The statistics and digests of one tensor on the calling thread, fused piece by piece: the
/// streaming accumulator, fed the whole tensor at once.
fn sequential(t: TensorRef<'_>, hashes: Hashes) -> Result<TensorStats, Error> {
    let mut s = StreamStats::new(t.dtype, t.elems, hashes)?;
    s.update(t.data)?;
    s.finish()
}

/// Block partials claimed dynamically from `next` until none is left: `(index, partial)`.
fn claim_blocks(b: &Blocks<'_>, next: &AtomicUsize) -> Result<Vec<(usize, Summary)>, Error> {
    let mut out = Vec::new();
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= b.count {
            return Ok(out);
        }
        out.push((i, b.partial(i)?));
    }
}

fn join<T>(h: thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// The host statistics engine. Cheap to create and to clone; holds no threads between calls.
///
/// ```
/// use dump_core::DType;
/// use dump_stats::{Hashes, engine::{Engine, TensorRef}};
///
/// let data: Vec<u8> = (0..1_000_000u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
/// let t = TensorRef::new(DType::Float32, &data, 1_000_000);
/// let one = Engine::new(1).summarize(t, Hashes { md5: true, sha1: false })?;
/// let two = Engine::new(2).with_split_threshold(0).summarize(t, Hashes { md5: true, sha1: false })?;
/// assert_eq!(one, two); // bit-identical, whatever the thread count
/// assert_eq!(one.summary.unwrap().max_value(), 999_999.0);
/// assert!(one.md5.is_some() && one.sha1.is_none());
/// # Ok::<(), dump_stats::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Engine {
    threads: usize,
    split_threshold: usize,
}

impl Default for Engine {
    /// [`Engine::with_available_parallelism`].
    fn default() -> Self {
        Engine::with_available_parallelism()
    }
}

impl Engine {
    /// An engine using at most `threads` threads (including the caller's); 0 counts as 1.
    pub fn new(threads: usize) -> Engine {
        Engine {
            threads: threads.max(1),
            split_threshold: DEFAULT_SPLIT_THRESHOLD,
        }
    }

    /// An engine using every core `std::thread::available_parallelism` reports (1 if unknown).
    pub fn with_available_parallelism() -> Engine {
        Engine::new(thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Tensors of at least `bytes` bytes are split across threads; smaller ones run on the
    /// calling thread. Does not change any result, only the speed.
    pub fn with_split_threshold(mut self, bytes: usize) -> Engine {
        self.split_threshold = bytes;
        self
    }

    /// Maximum number of threads per call.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Tensor size (bytes) from which one tensor is split across threads.
    pub fn split_threshold(&self) -> usize {
        self.split_threshold
    }

    /// The statistics of `t` plus the digests `hashes` asks for.
    ///
    /// Empty tensors give `summary: None` (and the digests of zero bytes). Complex dtypes give
    /// [`Error::Core`]`(Unsupported)`; a byte length that does not match `elems` gives
    /// [`Error::Core`]`(LengthMismatch)`.
    pub fn summarize(&self, t: TensorRef<'_>, hashes: Hashes) -> Result<TensorStats, Error> {
        let b = Blocks::new(t)?;
        if self.threads > 1 && b.count > 1 && t.data.len() >= self.split_threshold {
            self.parallel(&b, hashes)
        } else {
            sequential(t, hashes)
        }
    }

    fn parallel(&self, b: &Blocks<'_>, hashes: Hashes) -> Result<TensorStats, Error> {
        let data = b.t.data;
        let mut md5 = hashes.md5.then(Md5Stream::new);
        if hashes.count() >= self.threads {
            // Two digests on two threads: MD5 alone on a worker, SHA-1 fused with the
            // statistics here.
            let sha1_only = Hashes {
                md5: false,
                ..hashes
            };
            let r = thread::scope(|s| {
                let h = md5.as_mut().map(|m| s.spawn(move || m.update(data)));
                let r = sequential(b.t, sha1_only);
                if let Some(h) = h {
                    join(h);
                }
                r
            });
            return Ok(TensorStats {
                md5: md5.map(Md5Stream::finish),
                ..r?
            });
        }
        let mut sha1 = hashes.sha1.then(|| MsSha1::new(b.t.dtype, b.t.elems));
        let stats_threads = self.threads - hashes.count();
        let next = AtomicUsize::new(0);
        let parts = thread::scope(|s| {
            let hm = md5.as_mut().map(|m| s.spawn(move || m.update(data)));
            let hs = sha1.as_mut().map(|m| s.spawn(move || m.update(data)));
            let workers: Vec<_> = (1..stats_threads)
                .map(|_| s.spawn(|| claim_blocks(b, &next)))
                .collect();
            let mut parts = vec![claim_blocks(b, &next)];
            parts.extend(workers.into_iter().map(join));
            if let Some(h) = hm {
                join(h);
            }
            if let Some(h) = hs {
                join(h);
            }
            parts
        });
        let mut slots = vec![Summary::EMPTY; b.count];
        for part in parts {
            for (i, p) in part? {
                slots[i] = p;
            }
        }
        Ok(TensorStats {
            summary: fold(slots.into_iter()),
            md5: md5.map(Md5Stream::finish),
            sha1: sha1.map(MsSha1::finish),
        })
    }

    /// The statistics and digests of many tensors, results in input order (each identical to
    /// what [`summarize`](Engine::summarize) gives for it).
    ///
    /// Whole tensors are spread over the threads (each thread takes the next unstarted tensor),
    /// so digests of different tensors run in parallel. Stats-only tensors of at least
    /// [`split_threshold`](Engine::split_threshold) bytes are instead split across all
    /// threads one at a time, which finishes them sooner and gives the same result.
    pub fn summarize_many(
        &self,
        jobs: &[(TensorRef<'_>, Hashes)],
    ) -> Vec<Result<TensorStats, Error>> {
        let mut out: Vec<Option<Result<TensorStats, Error>>> = vec![None; jobs.len()];
        let single = Engine {
            threads: 1,
            split_threshold: usize::MAX,
        };
        let mut whole = Vec::new();
        for (i, (t, h)) in jobs.iter().enumerate() {
            if self.threads > 1 && !h.any() && t.data.len() >= self.split_threshold {
                out[i] = Some(self.summarize(*t, *h));
            } else {
                whole.push(i);
            }
        }
        let workers = self.threads.min(whole.len());
        if workers <= 1 {
            for &i in &whole {
                out[i] = Some(single.summarize(jobs[i].0, jobs[i].1));
            }
        } else {
            let next = AtomicUsize::new(0);
            let take = || {
                let mut done = Vec::new();
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&i) = whole.get(k) else {
                        return done;
                    };
                    done.push((i, single.summarize(jobs[i].0, jobs[i].1)));
                }
            };
            let results = thread::scope(|s| {
                let hs: Vec<_> = (1..workers).map(|_| s.spawn(take)).collect();
                let mut all = take();
                for h in hs {
                    all.extend(join(h));
                }
                all
            });
            for (i, r) in results {
                out[i] = Some(r);
            }
        }
        out.into_iter()
            .map(|r| r.expect("every job index is filled exactly once"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dump_core::stats::summarize_reference;

    fn rand_bytes(seed: u64, n: usize) -> Vec<u8> {
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

    /// f32 data with NaNs of both signs, ±inf and −0 sprinkled in.
    fn f32_data(n: usize) -> Vec<u8> {
        let raw = rand_bytes(42, n * 4);
        let mut v: Vec<f32> = raw
            .chunks_exact(4)
            .map(|c| (u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32 / 4e9 - 0.5) * 1e3)
            .collect();
        for (k, i) in [3usize, n / 3, n / 2, n - 2].into_iter().enumerate() {
            v[i] = [f32::INFINITY, -0.0, f32::NEG_INFINITY, 0.0][k % 4];
        }
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn bits(s: &Summary) -> [u64; 13] {
        [
            s.count,
            s.max.to_bits(),
            s.min.to_bits(),
            s.sum.to_bits(),
            s.sum_sq.to_bits(),
            s.nan,
            s.pos_inf,
            s.neg_inf,
            s.zero,
            s.pos,
            s.neg,
            s.first_nan.to_bits(),
            s.last_nan.to_bits(),
        ]
    }

    #[test]
    fn thread_count_never_changes_a_bit() {
        // 7.3 blocks of f32, so the last block is partial.
        let n = BLOCK_BYTES / 4 * 7 + 12345;
        let mut data = f32_data(n);
        // A negative NaN early and a positive one late.
        data[400..404].copy_from_slice(&f32::from_bits(0xffc0_0001).to_le_bytes());
        data[n * 4 - 40..n * 4 - 36].copy_from_slice(&f32::NAN.to_le_bytes());
        let t = TensorRef::new(DType::Float32, &data, n);
        for hashes in [
            Hashes::NONE,
            Hashes {
                md5: true,
                sha1: false,
            },
            Hashes {
                md5: false,
                sha1: true,
            },
            Hashes {
                md5: true,
                sha1: true,
            },
        ] {
            let one = Engine::new(1).summarize(t, hashes).unwrap();
            for threads in [2, 3, 4] {
                let many = Engine::new(threads)
                    .with_split_threshold(0)
                    .summarize(t, hashes)
                    .unwrap();
                assert_eq!(
                    bits(&one.summary.unwrap()),
                    bits(&many.summary.unwrap()),
                    "{threads} threads, {hashes:?}"
                );
                assert_eq!((one.md5, one.sha1), (many.md5, many.sha1));
            }
            assert_eq!(one.md5.is_some(), hashes.md5);
            assert_eq!(one.sha1.is_some(), hashes.sha1);
        }
    }

    #[test]
    fn agrees_with_the_reference_and_the_digest_helpers() {
        for (dtype, n) in [
            (DType::Float32, BLOCK_BYTES / 4 * 2 + 1),
            (DType::Float16, BLOCK_BYTES / 2 + 17),
            (DType::BFloat16, 1000),
            (DType::Int4, BLOCK_BYTES * 2 + 3),
            (DType::UInt1, BLOCK_BYTES * 8 + 9),
            (DType::Int64, BLOCK_BYTES / 8 * 3),
            (DType::Bool, 5),
        ] {
            let len = dtype.storage_bytes(n).unwrap();
            let mut data = rand_bytes(n as u64, len);
            if dtype == DType::Bool {
                data.iter_mut().for_each(|b| *b &= 1);
            }
            let t = TensorRef::new(dtype, &data, n);
            let st = Engine::new(2)
                .with_split_threshold(0)
                .summarize(
                    t,
                    Hashes {
                        md5: true,
                        sha1: true,
                    },
                )
                .unwrap();
            let s = st.summary.unwrap();
            let r = summarize_reference(dtype, &data, n).unwrap().unwrap();
            assert_eq!(
                (s.count, s.nan, s.pos_inf, s.neg_inf, s.zero, s.pos, s.neg),
                (r.count, r.nan, r.pos_inf, r.neg_inf, r.zero, r.pos, r.neg),
                "{dtype}"
            );
            assert_eq!(s.max_value().to_bits(), r.max_value().to_bits(), "{dtype}");
            assert_eq!(s.min_value().to_bits(), r.min_value().to_bits(), "{dtype}");
            let rel = |a: f64, b: f64| ((a - b) / b.abs().max(1e-300)).abs();
            if r.nan == 0 {
                assert!(
                    rel(s.sum, r.sum) < 1e-9 || (s.sum - r.sum).abs() < 1e-6,
                    "{dtype}"
                );
                assert!(rel(s.sum_sq, r.sum_sq) < 1e-9, "{dtype}");
            }
            assert_eq!(st.md5, Some(dump_core::hash::md5(&data)), "{dtype}");
            assert_eq!(
                st.sha1,
                Some(dump_core::hash::ms_sha1(dtype, &data, n)),
                "{dtype}"
            );
        }
    }

    #[test]
    fn zero_extrema_take_the_first_zero_s_sign() {
        for (vals, max, min) in [
            (vec![-1.0f32, -0.0, 0.0, -2.0], -0.0f64, -2.0f64),
            (vec![-1.0, 0.0, -0.0], 0.0, -1.0),
            (vec![3.0, -0.0, 0.0, 1.0], 3.0, -0.0),
            (vec![0.0; 40], 0.0, 0.0),
        ] {
            // Pad with copies so that the vector kernels see many lanes.
            let mut v = vals.clone();
            for _ in 0..5 {
                v.extend(vals.iter().rev());
            }
            let data: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            let s = Engine::new(1)
                .summarize(TensorRef::new(DType::Float32, &data, v.len()), Hashes::NONE)
                .unwrap()
                .summary
                .unwrap();
            assert_eq!(s.max.to_bits(), max.to_bits(), "{vals:?}");
            assert_eq!(s.min.to_bits(), min.to_bits(), "{vals:?}");
            let r = summarize_reference(DType::Float32, &data, v.len())
                .unwrap()
                .unwrap();
            assert_eq!(
                (s.max.to_bits(), s.min.to_bits()),
                (r.max.to_bits(), r.min.to_bits())
            );
        }
    }

    #[test]
    fn empty_and_bad_input() {
        let e = Engine::new(2);
        let st = e
            .summarize(
                TensorRef::new(DType::Float32, &[], 0),
                Hashes {
                    md5: true,
                    sha1: false,
                },
            )
            .unwrap();
        assert_eq!(st.summary, None);
        assert_eq!(st.md5, Some(dump_core::hash::md5(&[])));
        assert_eq!(
            e.summarize(TensorRef::new(DType::Float32, &[0; 7], 2), Hashes::NONE),
            Err(Error::Core(dump_core::Error::LengthMismatch {
                expected: 8,
                actual: 7
            }))
        );
        assert_eq!(
            e.summarize(TensorRef::new(DType::Complex64, &[0; 8], 1), Hashes::NONE),
            Err(Error::Core(dump_core::Error::Unsupported(DType::Complex64)))
        );
        assert_eq!(Engine::new(0).threads(), 1);
        assert!(Engine::default().threads() >= 1);
    }

    #[test]
    fn batch_equals_one_by_one() {
        let big = f32_data(BLOCK_BYTES / 4 * 3 + 5);
        let small = f32_data(1000);
        let bf: Vec<u8> = rand_bytes(9, 2 * 5000);
        let jobs = [
            (
                TensorRef::new(DType::Float32, &big, big.len() / 4),
                Hashes::NONE,
            ),
            (
                TensorRef::new(DType::Float32, &small, 1000),
                Hashes {
                    md5: true,
                    sha1: false,
                },
            ),
            (
                TensorRef::new(DType::BFloat16, &bf, 5000),
                Hashes {
                    md5: false,
                    sha1: true,
                },
            ),
            (
                TensorRef::new(DType::Float32, &big, big.len() / 4),
                Hashes {
                    md5: true,
                    sha1: true,
                },
            ),
            (TensorRef::new(DType::Float32, &small, 999), Hashes::NONE),
            (TensorRef::new(DType::Int8, &[], 0), Hashes::NONE),
        ];
        for threads in [1, 2, 3] {
            let e = Engine::new(threads).with_split_threshold(BLOCK_BYTES);
            let got = e.summarize_many(&jobs);
            assert_eq!(got.len(), jobs.len());
            for ((t, h), g) in jobs.iter().zip(&got) {
                match (g, &Engine::new(1).summarize(*t, *h)) {
                    (Ok(a), Ok(b)) => {
                        assert_eq!(a.summary.map(|s| bits(&s)), b.summary.map(|s| bits(&s)));
                        assert_eq!((a.md5, a.sha1), (b.md5, b.sha1));
                    }
                    (a, b) => assert_eq!(a, b, "{threads} threads"),
                }
            }
            assert!(got[4].is_err(), "length mismatch is reported per job");
            assert_eq!(got[5].as_ref().unwrap().summary, None);
        }
        assert!(Engine::new(2).summarize_many(&[]).is_empty());
    }
}
