//! Streamed hashes of raw tensor bytes, as `statistic.csv` reports them (spec §6).
//!
//! - `md5`: MD5 of the raw host bytes ([`Md5Stream`], [`md5()`]); many tensors at once, side
//!   by side in SIMD lanes: [`md5_many`] and the streaming [`Md5Multi`] (multi-buffer MD5,
//!   bit-identical, about 8x (AVX2) and 10x (AVX-512) one stream per core).
//! - [`crc32`]: CRC-32 (zlib's), what msprobe's dynamic mode calls `md5`, and the wire
//!   format's frame check.
//! - [`xor64`]: msprobe 26's `summary_mode: xor` checksum (the XOR of the bytes' little-endian
//!   `u64` words, zero-padded), streamed without a buffer.
//! - `hash:sha1` (MindSpore 2.10): SHA-1 of the raw bytes for tensors of at most
//!   [`SHA1_SLICE_ELEMS`] (20480) elements; for larger tensors SHA-1 of the concatenated
//!   lowercase hex SHA-1 digests of consecutive 20480-element slices, the last slice holding the
//!   remainder ([`MsSha1`], [`ms_sha1`]); many tensors, or the slices of a large one, side by
//!   side in SIMD lanes: [`sha1_many`], [`Sha1Multi`] and [`MsSha1Multi`].
//!
//! Both streams accept the bytes in pieces with arbitrary boundaries, so they can be fed from
//! the same pass over memory as the statistics kernels. [`hex`] renders a digest as lowercase
//! hex without allocating.
//!
//! ```
//! use dump_core::{DType, hash::{hex, md5, ms_sha1, Md5Stream, MsSha1}};
//!
//! assert_eq!(hex(&md5(b"abc")).as_str(), "900150983cd24fb0d6963f7d28e17f72");
//!
//! let mut m = Md5Stream::new();
//! m.update(b"a");
//! m.update(b"bc");
//! assert_eq!(m.finish(), md5(b"abc"));
//!
//! // Three int8 elements: small tensors hash their bytes directly.
//! assert_eq!(
//!     hex(&ms_sha1(DType::Int8, b"abc", 3)).as_str(),
//!     "a9993e364706816aba3e25717850c26c9cd0d89d"
//! );
//! let mut s = MsSha1::new(DType::Int8, 3);
//! s.update(b"ab");
//! s.update(b"c");
//! assert_eq!(s.finish(), ms_sha1(DType::Int8, b"abc", 3));
//! ```
//!
//! # Choice of MD5 implementation
//!
//! MD5 bounds end-to-end dump speed (about 0.8 GB/s at best on this project's x86-64 machines).
//! Measured here in a plain `cargo build --release` (no `target-cpu`), 1 MiB and 64 MiB inputs,
//! median of 5 runs of thread CPU time on a shared 2-vCPU machine: md-5 0.10 generic 0.50 GB/s,
//! md-5 0.10 with `asm` 0.53 GB/s, md-5 0.11 0.53–0.54 GB/s. md-5 0.11 is as fast as the
//! assembly, is pure Rust (no C toolchain, no x86-only dependency table for thumbv7em builds),
//! so the workspace uses md-5 0.11 (and sha1 0.11, on the same `digest` version).
//!
//! One MD5 stream cannot go faster: each of its 64 steps per block needs the previous one's
//! result. A dump step hashes hundreds of tensors, though, so [`md5_many`] hashes 16 of them
//! at once in the `u32` lanes of vector registers (module `multi`: AVX2, AVX-512F+VL, or 4
//! portable lanes, chosen at run time like the statistics kernels). On the benchmark set of
//! 200 tensors of 4 KiB–4 MiB (`cargo xtask bench-stats --only md5`, AMD EPYC with AVX-512,
//! 2026-11-24): one stream 0.63 GB/s, multi-buffer portable 1.6, AVX2 5.3, AVX-512 6.6 GB/s
//! per core (BENCHMARKS.md).
//!
//! # SHA-1 and SHA-NI
//!
//! sha1 0.11 already uses the x86 SHA extensions when the CPU has them: its `compress`
//! (`src/compress.rs`) checks `sha`, `sse2`, `ssse3` and `sse4.1` at run time through
//! `cpufeatures` and calls its `x86_sha` backend, else the portable `soft` one. Measured on
//! an AMD EPYC (SHA-NI present), plain release build, one 64 MiB buffer, median of 7:
//! 1.81–1.91 GB/s, against 0.81 GB/s with the portable backend forced; about 2.1 GB/s on the
//! Zen 5. That is the speed of one stream. Multi-buffer SHA-1 ([`sha1_many`]) beats it where
//! there are many messages: on the Zen 5's AVX-512, 16 lanes in one `zmm` register hash the
//! benchmark set (200 tensors of 4 KiB–4 MiB) at 7.8 GB/s per core, 3.7x SHA-NI (AVX2: 3.7
//! GB/s, 1.7x). MindSpore's sliced
//! `hash:sha1` makes every large tensor many messages (one per 20480 elements), so
//! [`MsSha1Multi`] hashes the slices of up to 16 tensors side by side. When only a few lanes
//! have input, the engine hashes them one after another on SHA-NI instead.

use crate::DType;
use md5::Digest as _;

pub mod crc32;
mod ms_sha1_multi;
mod multi;
pub mod xor64;

pub use ms_sha1_multi::{MsSha1Multi, ms_sha1_many};
pub use multi::{
    LaneHash, MD5_MAX_LANES, Md5, Md5Backend, Md5Multi, Multi, MultiBackend, Sha1, Sha1Multi,
    md5_many, md5_many_with, sha1_many, sha1_many_with,
};

/// Elements per slice of MindSpore 2.10's SHA-1 hash-of-hashes.
pub const SHA1_SLICE_ELEMS: usize = 20480;

/// Incremental MD5 over raw bytes.
#[derive(Clone, Default)]
pub struct Md5Stream {
    inner: md5::Md5,
}

impl Md5Stream {
    /// A fresh MD5 state.
    pub fn new() -> Md5Stream {
        Md5Stream::default()
    }

    /// Feeds the next bytes; pieces may have any length.
    pub fn update(&mut self, bytes: &[u8]) {
        self.inner.update(bytes);
    }

    /// The 16-byte digest of everything fed.
    pub fn finish(self) -> [u8; 16] {
        self.inner.finalize().into()
    }
}

impl core::fmt::Debug for Md5Stream {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Md5Stream")
    }
}

/// MD5 of `data` in one call.
pub fn md5(data: &[u8]) -> [u8; 16] {
    md5::Md5::digest(data).into()
}

fn sha1_bytes(h: sha1::Sha1) -> [u8; 20] {
    h.finalize().into()
}

/// How [`MsSha1`] combines the bytes.
#[derive(Clone)]
enum Sha1Mode {
    /// At most [`SHA1_SLICE_ELEMS`] elements: SHA-1 of the raw bytes.
    Direct(sha1::Sha1),
    /// More: SHA-1 over the hex digests of consecutive slices.
    Sliced {
        /// SHA-1 of the concatenated hex digests.
        outer: sha1::Sha1,
        /// SHA-1 of the current slice.
        slice: sha1::Sha1,
        /// Bytes of the current slice fed so far (`< slice_bytes`).
        filled: usize,
        /// Bytes per slice: `dtype.storage_bytes(SHA1_SLICE_ELEMS)`.
        slice_bytes: usize,
    },
}

/// Incremental MindSpore 2.10 `hash:sha1` of one tensor's raw bytes.
///
/// The element count decides the scheme up front, so it is given to [`MsSha1::new`]; the bytes
/// may then arrive in pieces of any length. Feed exactly the tensor's storage bytes
/// (`dtype.storage_bytes(elems)`); the slice boundaries are at multiples of
/// `dtype.storage_bytes(20480)` bytes.
#[derive(Clone)]
pub struct MsSha1 {
    mode: Sha1Mode,
}

impl MsSha1 {
    /// A fresh state for a tensor of `elems` elements of `dtype`.
    pub fn new(dtype: DType, elems: usize) -> MsSha1 {
        let mode = if elems <= SHA1_SLICE_ELEMS {
            Sha1Mode::Direct(sha1::Sha1::new())
        } else {
            // 20480 elements of at most 16 bytes never overflow; `max(1)` keeps the slice
            // non-empty whatever `storage_bytes` returns.
            let slice_bytes = dtype
                .storage_bytes(SHA1_SLICE_ELEMS)
                .unwrap_or(usize::MAX)
                .max(1);
            Sha1Mode::Sliced {
                outer: sha1::Sha1::new(),
                slice: sha1::Sha1::new(),
                filled: 0,
                slice_bytes,
            }
        };
        MsSha1 { mode }
    }

    /// Feeds the next bytes; pieces may have any length and need not align with slices.
    pub fn update(&mut self, mut bytes: &[u8]) {
        match &mut self.mode {
            Sha1Mode::Direct(h) => h.update(bytes),
            Sha1Mode::Sliced {
                outer,
                slice,
                filled,
                slice_bytes,
            } => {
                while !bytes.is_empty() {
                    let take = (*slice_bytes - *filled).min(bytes.len());
                    let (now, rest) = bytes.split_at(take);
                    slice.update(now);
                    *filled += take;
                    bytes = rest;
                    if *filled == *slice_bytes {
                        let digest = sha1_bytes(core::mem::take(slice));
                        outer.update(hex(&digest).as_str().as_bytes());
                        *filled = 0;
                    }
                }
            }
        }
    }

    /// The 20-byte digest.
    pub fn finish(self) -> [u8; 20] {
        match self.mode {
            Sha1Mode::Direct(h) => sha1_bytes(h),
            Sha1Mode::Sliced {
                mut outer,
                slice,
                filled,
                ..
            } => {
                if filled > 0 {
                    outer.update(hex(&sha1_bytes(slice)).as_str().as_bytes());
                }
                sha1_bytes(outer)
            }
        }
    }
}

impl core::fmt::Debug for MsSha1 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self.mode {
            Sha1Mode::Direct(_) => "MsSha1(direct)",
            Sha1Mode::Sliced { .. } => "MsSha1(sliced)",
        })
    }
}

/// MindSpore 2.10 `hash:sha1` of a whole tensor in one call (see [`MsSha1`]).
pub fn ms_sha1(dtype: DType, data: &[u8], elems: usize) -> [u8; 20] {
    let mut h = MsSha1::new(dtype, elems);
    h.update(data);
    h.finish()
}

/// Largest digest [`hex`] renders, in bytes.
pub const HEX_MAX_DIGEST: usize = 64;

/// Lowercase hex text of a digest, held inline (up to [`HEX_MAX_DIGEST`] bytes of digest).
#[derive(Clone, Copy)]
pub struct HexBuf {
    buf: [u8; 2 * HEX_MAX_DIGEST],
    len: u8,
}

impl HexBuf {
    /// The hex text.
    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever stored.
        core::str::from_utf8(&self.buf[..usize::from(self.len)]).unwrap_or("")
    }
}

impl core::fmt::Debug for HexBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl core::fmt::Display for HexBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Lowercase hex of a digest of `N <= 64` bytes (checked at compile time), without allocating.
///
/// ```
/// assert_eq!(dump_core::hash::hex(&[0x00, 0xab, 0x7f]).as_str(), "00ab7f");
/// ```
pub fn hex<const N: usize>(digest: &[u8; N]) -> HexBuf {
    const {
        assert!(
            N <= HEX_MAX_DIGEST,
            "hex() renders digests of at most 64 bytes"
        )
    };
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = HexBuf {
        buf: [0; 2 * HEX_MAX_DIGEST],
        len: (2 * N) as u8,
    };
    for (pair, &b) in out.buf.chunks_exact_mut(2).zip(digest) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0xf)];
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn h<const N: usize>(d: [u8; N]) -> String {
        hex(&d).as_str().to_owned()
    }

    #[test]
    fn rfc1321_vectors() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "d41d8cd98f00b204e9800998ecf8427e"),
            (b"a", "0cc175b9c0f1b6a831c399e269772661"),
            (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
            (b"message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                b"abcdefghijklmnopqrstuvwxyz",
                "c3fcd3d76192e4007dfb496cca67e13b",
            ),
            (
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                "d174ab98d277d9f5a5611c2c9f419d9f",
            ),
            (
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for &(input, want) in cases {
            assert_eq!(h(md5(input)), want);
            let mut s = Md5Stream::new();
            for b in input {
                s.update(core::slice::from_ref(b));
            }
            assert_eq!(h(s.finish()), want);
        }
    }

    #[test]
    fn fips180_vectors() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
            (b"abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
            ),
        ];
        for &(input, want) in cases {
            assert_eq!(h(ms_sha1(DType::UInt8, input, input.len())), want);
        }
        // One million 'a': 1e6 > 20480 elements of bool would slice, so use a direct state.
        let million = vec![b'a'; 1_000_000];
        let mut d = sha1::Sha1::new();
        d.update(&million);
        assert_eq!(h(sha1_bytes(d)), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    }

    #[test]
    fn hex_is_lowercase_and_sized() {
        assert_eq!(hex(&[0u8; 0]).as_str(), "");
        assert_eq!(hex(&[0xffu8; 20]).as_str(), "f".repeat(40));
        assert_eq!(hex(&[0x0fu8, 0xa0]).as_str(), "0fa0");
        assert_eq!(hex(&[0x12u8; 64]).as_str(), "12".repeat(64));
        assert_eq!(format!("{:>6}", hex(&[0xabu8])), "    ab");
    }

    /// Non-streaming MindSpore `hash:sha1`, written straight from the spec.
    fn ms_sha1_naive(dtype: DType, data: &[u8], elems: usize) -> [u8; 20] {
        let sha = |b: &[u8]| -> [u8; 20] {
            let mut d = sha1::Sha1::new();
            d.update(b);
            sha1_bytes(d)
        };
        if elems <= 20480 {
            return sha(data);
        }
        let step = dtype.storage_bytes(20480).unwrap();
        let mut cat = String::new();
        for slice in data.chunks(step) {
            cat.push_str(&h(sha(slice)));
        }
        sha(cat.as_bytes())
    }

    /// `n` bytes of a xorshift stream from `seed` (the hash tests' messages).
    pub(crate) fn data(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn slicing_boundaries() {
        for (dtype, elems) in [
            (DType::Float32, 20480),
            (DType::Float32, 20481),
            (DType::Float32, 40960 + 7),
            (DType::Float32, 40960),
            (DType::Float16, 20481),
            (DType::BFloat16, 61440 + 1),
            (DType::Int8, 20480 * 3 + 100),
            (DType::Complex128, 20485),
            (DType::Int4, 20483),
            (DType::UInt1, 41000),
        ] {
            let bytes = dtype.storage_bytes(elems).unwrap();
            let d = data(bytes, elems as u64);
            let want = ms_sha1_naive(dtype, &d, elems);
            assert_eq!(ms_sha1(dtype, &d, elems), want, "{dtype} x {elems}");
            // Small tensors are plain SHA-1; large ones are not.
            let mut plain = sha1::Sha1::new();
            plain.update(&d);
            assert_eq!(
                sha1_bytes(plain) == want,
                elems <= 20480,
                "{dtype} x {elems}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn random_splits_equal_whole(
            pick in 0usize..4,
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
            seed in any::<u64>(),
        ) {
            let (dtype, elems) = [
                (DType::Float32, 20480),
                (DType::Float32, 20481),
                (DType::Float32, 40960 + 7),
                (DType::Float16, 40960 + 7),
            ][pick];
            let bytes = dtype.storage_bytes(elems).unwrap();
            let d = data(bytes, seed);
            let mut pts: Vec<usize> = cuts.iter().map(|c| c % (bytes + 1)).collect();
            pts.extend([0, bytes]);
            pts.sort_unstable();
            let mut s = MsSha1::new(dtype, elems);
            let mut m = Md5Stream::new();
            for w in pts.windows(2) {
                s.update(&d[w[0]..w[1]]);
                m.update(&d[w[0]..w[1]]);
            }
            prop_assert_eq!(s.finish(), ms_sha1_naive(dtype, &d, elems));
            prop_assert_eq!(m.finish(), md5(&d));
        }
    }

    #[test]
    fn equals_python_hashlib() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        // 49156 float32 elements: above the slice threshold.
        let d = data(4 * 49156, 42);
        let script = "import sys,hashlib\n\
            b=sys.stdin.buffer.read()\n\
            s=lambda x: hashlib.sha1(x).hexdigest()\n\
            cat=''.join(s(b[i:i+81920]) for i in range(0,len(b),81920))\n\
            print(hashlib.md5(b).hexdigest(), s(b[:20480]), s(cat.encode()))\n";
        if !opdump_test_support::require(opdump_test_support::Prereq::Python3) {
            return;
        }
        let mut child = Command::new("python3")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start python3");
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(&d)
            .expect("write to python3");
        let out = child.wait_with_output().expect("python3 output");
        assert!(out.status.success(), "python3 failed: {:?}", out.status);
        let text = String::from_utf8(out.stdout).expect("utf-8");
        let words: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(words.len(), 3, "python3 printed {text:?}");
        assert_eq!(words[0], h(md5(&d)));
        assert_eq!(words[1], h(ms_sha1(DType::UInt8, &d[..20480], 20480)));
        assert_eq!(words[2], h(ms_sha1(DType::Float32, &d, 49156)));
    }
}
