//! CRC-32 (ISO-HDLC, the zlib/Ethernet CRC) of wire frames and of msprobe's `md5` values,
//! without `std` and without tables built at run time: the 256-entry table is computed by a
//! `const fn` at compile time (1 KiB of flash on a microcontroller). With the `std` feature
//! (a host) it reads sixteen bytes per step through sixteen such tables ("slicing by 16",
//! 16 KiB, also built at compile time), then eight, then bytewise; the result is the same.
//!
//! Parameters: polynomial `0x04C11DB7` (reflected `0xEDB88320`), initial value `0xFFFFFFFF`,
//! input and output reflected, final XOR `0xFFFFFFFF`; check value of `b"123456789"` is
//! `0xCBF43926`. For frames up to `wire::MAX_FRAME_LEN` bytes it detects every error of
//! one or two bits, every odd number of flipped bits and every burst of up to 32 bits; any
//! other corruption passes unnoticed with probability 2^-32.

/// The reflected polynomial.
const POLY: u32 = 0xEDB8_8320;

/// `TABLE[b]`: the CRC register update for byte value `b`.
const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// `SLICES[k][b]`: the register update for byte `b` followed by `k` zero bytes, so sixteen
/// bytes fold in with sixteen independent lookups.
#[cfg(feature = "std")]
const SLICES: [[u32; 256]; 16] = {
    let mut t = [[0u32; 256]; 16];
    t[0] = TABLE;
    let mut k = 1;
    while k < 16 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ TABLE[(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
};

/// Folds `bytes` into the register `c` one byte at a time.
fn bytewise(mut c: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        c = TABLE[usize::from((c as u8) ^ b)] ^ (c >> 8);
    }
    c
}

/// Folds `bytes` into `c` sixteen bytes per step, then eight, the tail bytewise.
#[cfg(feature = "std")]
fn sliced(mut c: u32, bytes: &[u8]) -> u32 {
    let t = &SLICES;
    let word = |w: &[u8]| u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
    let mut wide = bytes.chunks_exact(16);
    for w in &mut wide {
        let a = c ^ word(&w[..4]);
        let (b, d, e) = (word(&w[4..8]), word(&w[8..12]), word(&w[12..16]));
        let lane = |v: u32, k: usize| {
            t[k + 3][(v & 0xff) as usize]
                ^ t[k + 2][((v >> 8) & 0xff) as usize]
                ^ t[k + 1][((v >> 16) & 0xff) as usize]
                ^ t[k][(v >> 24) as usize]
        };
        c = lane(a, 12) ^ lane(b, 8) ^ lane(d, 4) ^ lane(e, 0);
    }
    let mut chunks = wide.remainder().chunks_exact(8);
    for w in &mut chunks {
        let lo = c ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let hi = u32::from_le_bytes([w[4], w[5], w[6], w[7]]);
        c = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xff) as usize]
            ^ t[2][((hi >> 8) & 0xff) as usize]
            ^ t[1][((hi >> 16) & 0xff) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    bytewise(c, chunks.remainder())
}

/// Carry-less multiplication (PCLMULQDQ) folding, on x86-64 hosts that have it: sixteen
/// bytes per step with two multiplications and no table lookups.
///
/// The bytes are read as polynomials over GF(2), the first bit the highest power (the
/// reflected CRC's convention: bit 0 of byte 0 first). The CRC of a message depends only on
/// the message modulo `P`, so the message's first whole sixteen-byte blocks are folded into one
/// 128-bit block congruent to them: with `X = X_hi·x^64 + X_lo` the blocks folded so far and
/// `B` the next block, `X·x^128 + B ≡ X_hi·(x^192 mod P) + X_lo·(x^128 mod P) + B`, each
/// product under 128 bits. The folded block and the tail then go through the table CRC, from
/// a zero register (the running register was added into the first four bytes instead, which
/// is the same thing for a reflected CRC).
///
/// In the register, a block's bit `i` is the coefficient of `x^(127 - i)`. `pclmulqdq` of a
/// 64-bit lane (bit `i` = coefficient of `x^(63 - i)`) with the 33-bit constant
/// `reverse32(x^(n - 32) mod P) << 1` leaves the product `a·x^n (mod P)` at that same
/// alignment, which is why the constants are taken 32 powers lower.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod clmul {
    use core::arch::x86_64::{
        __m128i, _mm_clmulepi64_si128, _mm_loadu_si128, _mm_set_epi64x, _mm_storeu_si128,
        _mm_xor_si128,
    };

    /// The generator polynomial, not reflected, with its `x^32` term.
    const P: u64 = 0x1_04C1_1DB7;

    /// `x^n mod P`, not reflected (bit `k` = coefficient of `x^k`).
    const fn x_pow_mod(n: u32) -> u32 {
        let mut r: u64 = 1;
        let mut i = 0;
        while i < n {
            r <<= 1;
            if r & (1 << 32) != 0 {
                r ^= P;
            }
            i += 1;
        }
        r as u32
    }

    /// The lane constant that multiplies by `x^n` modulo `P` (see the module's docs).
    pub(super) const fn fold_constant(n: u32) -> u64 {
        (x_pow_mod(n - 32).reverse_bits() as u64) << 1
    }

    /// For the block's low lane (`X_hi`: moved by 192 powers) and high lane (`X_lo`: 128).
    pub(super) const FOLD_LO: u64 = fold_constant(192);
    pub(super) const FOLD_HI: u64 = fold_constant(128);

    /// Folds `bytes` (at least 16) into the running register `c`.
    ///
    /// # Safety
    /// The CPU must support PCLMULQDQ (SSE2 is part of x86-64).
    #[target_feature(enable = "pclmulqdq,sse2")]
    pub(super) unsafe fn update(c: u32, bytes: &[u8]) -> u32 {
        let blocks = bytes.len() / 16;
        let mut first = [0u8; 16];
        first.copy_from_slice(&bytes[..16]);
        let w = u32::from_le_bytes([first[0], first[1], first[2], first[3]]) ^ c;
        first[..4].copy_from_slice(&w.to_le_bytes());
        // SAFETY: `first` is 16 bytes; unaligned loads are allowed.
        let mut x = unsafe { _mm_loadu_si128(first.as_ptr() as *const __m128i) };
        let k = _mm_set_epi64x(FOLD_HI as i64, FOLD_LO as i64);
        for b in 1..blocks {
            // SAFETY: `b < blocks = len / 16`, so bytes `16 b .. 16 b + 16` are in bounds.
            let d = unsafe { _mm_loadu_si128(bytes.as_ptr().add(16 * b) as *const __m128i) };
            let lo = _mm_clmulepi64_si128::<0x00>(x, k);
            let hi = _mm_clmulepi64_si128::<0x11>(x, k);
            x = _mm_xor_si128(_mm_xor_si128(lo, hi), d);
        }
        let mut folded = [0u8; 16];
        // SAFETY: `folded` is 16 bytes; unaligned stores are allowed.
        unsafe { _mm_storeu_si128(folded.as_mut_ptr() as *mut __m128i, x) };
        let c = super::sliced(0, &folded);
        super::sliced(c, &bytes[16 * blocks..])
    }
}

/// Below this many bytes the tables beat the folding's fixed cost.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
const CLMUL_MIN: usize = 48;

/// A running CRC-32, fed in pieces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crc32 {
    state: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// A CRC over no bytes yet.
    pub const fn new() -> Crc32 {
        Crc32 { state: !0 }
    }

    /// Feeds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        if bytes.len() >= CLMUL_MIN && std::is_x86_feature_detected!("pclmulqdq") {
            // SAFETY: PCLMULQDQ was detected just above; `bytes` has at least 16 bytes.
            self.state = unsafe { clmul::update(self.state, bytes) };
            return;
        }
        #[cfg(feature = "std")]
        {
            self.state = sliced(self.state, bytes);
        }
        #[cfg(not(feature = "std"))]
        {
            self.state = bytewise(self.state, bytes);
        }
    }

    /// The CRC of everything fed.
    pub const fn finish(self) -> u32 {
        !self.state
    }
}

/// CRC-32 of `bytes` in one call.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(bytes);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit-at-a-time oracle, written from the parameters above.
    fn slow(bytes: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in bytes {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 == 1 { (c >> 1) ^ POLY } else { c >> 1 };
            }
        }
        !c
    }

    #[test]
    fn check_values() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        // python3 -c "import zlib; print(hex(zlib.crc32(b'The quick brown fox jumps over the lazy dog')))"
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
    }

    #[test]
    fn matches_bitwise_oracle_and_any_split() {
        let data: std::vec::Vec<u8> = (0..600u32).map(|i| (i * 7 + i / 5) as u8).collect();
        for n in [0, 1, 3, 64, 255, 600] {
            assert_eq!(crc32(&data[..n]), slow(&data[..n]));
        }
        // Every length around the eight-byte steps, at every alignment, both ways.
        for start in 0..16 {
            for n in 0..80 {
                let d = &data[start..start + n];
                assert_eq!(crc32(d), slow(d), "start {start} len {n}");
                assert_eq!(!bytewise(!0, d), slow(d), "bytewise start {start} len {n}");
            }
        }
        for cut in [0, 1, 17, 300, 600] {
            let mut c = Crc32::new();
            c.update(&data[..cut]);
            c.update(&data[cut..]);
            assert_eq!(c.finish(), crc32(&data));
        }
    }

    /// The folding constants equal the published ones for this polynomial (Intel's
    /// "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ", reflected k3 and k4),
    /// and the folding path agrees with the tables at every length and split around it.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn folding_matches_the_tables() {
        assert_eq!(clmul::FOLD_LO, 0x1_7519_97D0);
        assert_eq!(clmul::FOLD_HI, 0x0_CCAA_009E);
        if !std::is_x86_feature_detected!("pclmulqdq") {
            return;
        }
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let data: std::vec::Vec<u8> = (0..4200)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        for start in 0..16 {
            for n in (16..300).chain([1000, 4096, 4100]) {
                let d = &data[start..start + n];
                for c in [0u32, !0, 0x1234_5678] {
                    // SAFETY: checked above; `d` has at least 16 bytes.
                    let f = unsafe { clmul::update(c, d) };
                    assert_eq!(f, sliced(c, d), "start {start} len {n} register {c:x}");
                }
                assert_eq!(crc32(d), slow(d));
            }
        }
        for zeros in [16usize, 64, 1000] {
            let z = std::vec![0u8; zeros];
            assert_eq!(crc32(&z), slow(&z));
        }
    }

    #[test]
    fn every_single_and_double_bit_flip_is_detected() {
        let data: std::vec::Vec<u8> = (0..120u32).map(|i| (i * 31) as u8).collect();
        let good = crc32(&data);
        let bits = data.len() * 8;
        let mut d = data.clone();
        for i in 0..bits {
            d[i / 8] ^= 1 << (i % 8);
            assert_ne!(crc32(&d), good, "bit {i}");
            for j in (i + 1..bits).step_by(7) {
                d[j / 8] ^= 1 << (j % 8);
                assert_ne!(crc32(&d), good, "bits {i} {j}");
                d[j / 8] ^= 1 << (j % 8);
            }
            d[i / 8] ^= 1 << (i % 8);
        }
    }
}
