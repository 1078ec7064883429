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
