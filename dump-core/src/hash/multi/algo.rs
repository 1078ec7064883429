//! The hashes a [`Multi`](super::Multi) engine runs: [`Md5`] and [`Sha1`], behind the sealed
//! trait [`LaneHash`] that tells the engine each one's initial state, byte order, digest and
//! kernels.

use super::{MD5_MAX_LANES, MultiBackend, State};

mod sealed {
    use super::{MD5_MAX_LANES, MultiBackend, State};

    /// What the engine needs of a hash; outside this crate [`LaneHash`](super::LaneHash) is
    /// only a name.
    #[allow(unreachable_pub)]
    pub trait Sealed {
        /// State words per lane (4 or 5); rows `ROWS..5` of the state are unused.
        const ROWS: usize;
        /// The initial state (unused words 0).
        const IV: [u32; 5];
        /// Message words, the length field and the digest are big-endian (SHA-1), not
        /// little-endian (MD5).
        const BIG_ENDIAN: bool;
        /// Busy lanes up to this count are hashed as scalar streams one after another rather
        /// than in the vector kernel.
        fn scalar_lanes(backend: MultiBackend) -> u32;
        /// Compresses `n` blocks of `src[lane]` into `st[..][lane]` for every lane of
        /// `backend`. Every `src[lane]` holds at least `64 * n` bytes.
        fn compress(backend: MultiBackend, st: &mut State, src: &[&[u8]; MD5_MAX_LANES], n: usize);
        /// One stream: compresses `blocks` into `st[..ROWS]`.
        fn compress_one(st: &mut [u32; 5], blocks: &[[u8; 64]]);
    }
}

pub(super) use sealed::Sealed;

/// A hash that runs in the lanes of a [`Multi`](super::Multi) engine: [`Md5`] or [`Sha1`]
/// (sealed: no other type can implement it).
pub trait LaneHash: Sealed + Copy + core::fmt::Debug + 'static {
    /// The digest, `[u8; 16]` or `[u8; 20]`.
    type Digest: Copy + Default + Eq + core::fmt::Debug + AsRef<[u8]> + AsMut<[u8]>;
    /// Short name for reports (`md5`, `sha1`).
    const NAME: &'static str;
}

/// MD5 (RFC 1321) for [`Multi`](super::Multi): [`Md5Multi`](super::Md5Multi),
/// [`md5_many`](super::md5_many).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Md5;

/// SHA-1 (FIPS 180-4) for [`Multi`](super::Multi): [`Sha1Multi`](super::Sha1Multi),
/// [`sha1_many`](super::sha1_many).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Sha1;

impl LaneHash for Md5 {
    type Digest = [u8; 16];
    const NAME: &'static str = "md5";
}

impl LaneHash for Sha1 {
    type Digest = [u8; 20];
    const NAME: &'static str = "sha1";
}

impl Sealed for Md5 {
    const ROWS: usize = 4;
    // RFC 1321, section 3.3.
    const IV: [u32; 5] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476, 0];
    const BIG_ENDIAN: bool = false;

    fn scalar_lanes(_: MultiBackend) -> u32 {
        // One scalar MD5 stream (0.63 GB/s on the benchmark machine) beats one busy lane of
        // the AVX-512 kernel (0.41 GB/s), two do not.
        1
    }

    fn compress(backend: MultiBackend, st: &mut State, src: &[&[u8]; MD5_MAX_LANES], n: usize) {
        match backend {
            MultiBackend::Portable => super::md5_portable::compress(st, src, n),
            #[cfg(target_arch = "x86_64")]
            MultiBackend::Avx2 => {
                debug_assert!(backend.available());
                // SAFETY: an engine holds this backend only after `available()` confirmed
                // AVX2 on this CPU (`with_backend` checks; `detect` picks only what it found).
                unsafe { super::md5_x86::compress_avx2(st, src, n) }
            }
            #[cfg(target_arch = "x86_64")]
            MultiBackend::Avx512 => {
                debug_assert!(backend.available());
                // SAFETY: as above, AVX2, AVX-512F and AVX-512VL were confirmed before the
                // backend was chosen.
                unsafe { super::md5_x86::compress_avx512(st, src, n) }
            }
            #[cfg(not(target_arch = "x86_64"))]
            MultiBackend::Avx2 | MultiBackend::Avx512 => super::md5_portable::compress(st, src, n),
        }
    }

    fn compress_one(st: &mut [u32; 5], blocks: &[[u8; 64]]) {
        let mut s = [st[0], st[1], st[2], st[3]];
        md5::block_api::compress(&mut s, blocks);
        st[..4].copy_from_slice(&s);
    }
}

impl Sealed for Sha1 {
    const ROWS: usize = 5;
    // FIPS 180-4, section 5.3.1.
    const IV: [u32; 5] = [
        0x6745_2301,
        0xefcd_ab89,
        0x98ba_dcfe,
        0x1032_5476,
        0xc3d2_e1f0,
    ];
    const BIG_ENDIAN: bool = true;

    fn scalar_lanes(backend: MultiBackend) -> u32 {
        if !sha_ni() {
            return 1;
        }
        // With SHA-NI one stream runs at 2.1 GB/s (Zen 5); the AVX-512 kernel hashes 16 lanes
        // at 7.8 GB/s, AVX2 at 3.7 (`bench-stats --only md5`, BENCHMARKS.md). `k` busy lanes
        // take k / 2.1 on SHA-NI against 16 / 7.8 and 16 / 3.7 in the kernels, so up to 4
        // (AVX-512) and 8 (AVX2) busy lanes go faster one after another on SHA-NI; the
        // portable kernel (4 lanes at 2.0 GB/s) never wins.
        match backend {
            MultiBackend::Avx512 => 4,
            MultiBackend::Avx2 => 8,
            MultiBackend::Portable => 4,
        }
    }

    fn compress(backend: MultiBackend, st: &mut State, src: &[&[u8]; MD5_MAX_LANES], n: usize) {
        match backend {
            MultiBackend::Portable => super::sha1_portable::compress(st, src, n),
            #[cfg(target_arch = "x86_64")]
            MultiBackend::Avx2 => {
                debug_assert!(backend.available());
                // SAFETY: an engine holds this backend only after `available()` confirmed
                // AVX2 on this CPU (`with_backend` checks; `detect` picks only what it found).
                unsafe { super::sha1_x86::compress_avx2(st, src, n) }
            }
            #[cfg(target_arch = "x86_64")]
            MultiBackend::Avx512 => {
                debug_assert!(backend.available());
                // SAFETY: as above, AVX2, AVX-512F and AVX-512VL were confirmed before the
                // backend was chosen.
                unsafe { super::sha1_x86::compress_avx512(st, src, n) }
            }
            #[cfg(not(target_arch = "x86_64"))]
            MultiBackend::Avx2 | MultiBackend::Avx512 => super::sha1_portable::compress(st, src, n),
        }
    }

    fn compress_one(st: &mut [u32; 5], blocks: &[[u8; 64]]) {
        sha1::block_api::compress(st, blocks);
    }
}

/// The CPU has the SHA extensions that the sha1 crate's one-stream `compress` uses.
fn sha_ni() -> bool {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        std::is_x86_feature_detected!("sha")
            && std::is_x86_feature_detected!("sse4.1")
            && std::is_x86_feature_detected!("ssse3")
    }
    #[cfg(not(all(feature = "std", target_arch = "x86_64")))]
    {
        cfg!(all(target_arch = "x86_64", target_feature = "sha"))
    }
}
