//! msprobe's `summary_mode: xor` checksum (msprobe 26): the tensor's raw bytes zero-padded to
//! a multiple of 8, read as little-endian `u64` words and XORed down to one word, written
//! `0x%016x` ([`hex`]). XOR is associative, so msprobe's pairwise reduction and a running
//! fold give the same word.
//!
//! [`Xor64`] takes the bytes in pieces with arbitrary boundaries and no buffer: the byte at
//! offset `p` always lands in byte lane `p % 8` of the word, so a piece that starts at lane
//! `k` is folded as if aligned and its word rotated left by `8k` bits. The fold reads 64 bytes
//! per step into eight independent accumulators (the compiler vectorises it); it runs at
//! memory speed (BENCHMARKS.md, `cargo xtask bench-stats --only xor64`).
//!
//! ```
//! use dump_core::hash::xor64::{Xor64, hex, xor64};
//!
//! // 1.0f32 and 2.0f32 fill one word; 3.0f32 is zero-padded into the second.
//! let b: Vec<u8> = [1.0f32, 2.0, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect();
//! assert_eq!(xor64(&b), 0x4000_0000_3f80_0000 ^ 0x4040_0000);
//! let mut s = Xor64::new();
//! s.update(&b[..5]);
//! s.update(&b[5..]);
//! assert_eq!(s.finish(), xor64(&b));
//! assert_eq!(hex(xor64(&b)).as_str(), "0x400000007fc00000");
//! ```

/// A running XOR fold of little-endian `u64` words, fed in pieces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Xor64 {
    acc: u64,
    /// Bytes fed so far, modulo 8: the lane the next byte goes to.
    lane: u8,
}

/// The XOR of `bytes` as little-endian words, the last one zero-padded, as if `bytes` started
/// at a word boundary.
#[inline]
fn fold(bytes: &[u8]) -> u64 {
    let mut blocks = bytes.chunks_exact(64);
    let mut a = [0u64; 8];
    for b in &mut blocks {
        for (i, acc) in a.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[8 * i..8 * i + 8]);
            *acc ^= u64::from_le_bytes(w);
        }
    }
    let mut x = a.iter().fold(0, |x, &w| x ^ w);
    let mut words = blocks.remainder().chunks_exact(8);
    for w in &mut words {
        let mut v = [0u8; 8];
        v.copy_from_slice(w);
        x ^= u64::from_le_bytes(v);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let mut v = [0u8; 8];
        v[..tail.len()].copy_from_slice(tail);
        x ^= u64::from_le_bytes(v);
    }
    x
}

impl Xor64 {
    /// The fold of no bytes (0).
    pub const fn new() -> Xor64 {
        Xor64 { acc: 0, lane: 0 }
    }

    /// Feeds the next bytes; pieces may have any length.
    pub fn update(&mut self, bytes: &[u8]) {
        let k = u32::from(self.lane);
        // Byte i of the piece sits in lane (k + i) % 8: a left rotation by 8k bits.
        self.acc ^= fold(bytes).rotate_left(8 * k);
        self.lane = ((usize::from(self.lane) + bytes.len() % 8) % 8) as u8;
    }

    /// The checksum of everything fed (zero-padded to a whole word).
    pub const fn finish(self) -> u64 {
        self.acc
    }
}

/// The checksum of `bytes` in one call.
pub fn xor64(bytes: &[u8]) -> u64 {
    fold(bytes)
}

/// `0x` and 16 lowercase hex digits (Python's `"0x%016x"`), without allocating.
pub fn hex(x: u64) -> super::HexBuf {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = super::HexBuf {
        buf: [0; 2 * super::HEX_MAX_DIGEST],
        len: 18,
    };
    out.buf[0] = b'0';
    out.buf[1] = b'x';
    for i in 0..16 {
        out.buf[2 + i] = DIGITS[((x >> (60 - 4 * i)) & 0xf) as usize];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use proptest::prelude::*;

    /// The rule as peers.md states it: pad to a multiple of 8, then XOR the words pairwise
    /// (a tree), not as a running fold.
    fn pairwise(bytes: &[u8]) -> u64 {
        let mut b = bytes.to_vec();
        while !b.len().is_multiple_of(8) {
            b.push(0);
        }
        let mut words: Vec<u64> = b
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
            .collect();
        if words.is_empty() {
            return 0;
        }
        while words.len() > 1 {
            words = words
                .chunks(2)
                .map(|p| p.iter().fold(0, |x, w| x ^ w))
                .collect();
        }
        words[0]
    }

    #[test]
    fn known_answers() {
        assert_eq!(xor64(&[]), 0, "empty tensor");
        assert_eq!(hex(0).as_str(), "0x0000000000000000");
        assert_eq!(xor64(&[0xab]), 0xab, "one byte, padded");
        assert_eq!(xor64(&[1, 2, 3, 4, 5, 6, 7, 8]), 0x0807_0605_0403_0201);
        // Nine bytes: the ninth is padded into the second word's low lane.
        assert_eq!(
            xor64(&[1, 2, 3, 4, 5, 6, 7, 8, 0xff]),
            0x0807_0605_0403_0201 ^ 0xff
        );
        // f32 [1, 2, 3]: 0x3f800000, 0x40000000 | 0x40400000 (padded).
        let f: Vec<u8> = [1.0f32, 2.0, 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(xor64(&f), 0x4000_0000_7fc0_0000);
        assert_eq!(hex(xor64(&f)).as_str(), "0x400000007fc00000");
        // Identical words cancel.
        assert_eq!(xor64(&[7u8; 16]), 0);
        assert_eq!(hex(u64::MAX).as_str(), "0xffffffffffffffff");
    }

    /// Every dtype: the checksum is of the storage bytes, so it equals the rule applied to
    /// them; known answers for a few whose bytes are easy to write down.
    #[test]
    fn every_dtype() {
        let known: &[(DType, &[u8], u64)] = &[
            (DType::Bool, &[1, 0, 1], 0x01_0001),
            (DType::Int8, &[0xff, 0x01], 0x01ff),
            (DType::UInt8, &[9; 9], 0x0909_0909_0909_0909 ^ 0x09),
            // f16 1.0 = 0x3c00, bf16 1.0 = 0x3f80.
            (DType::Float16, &[0x00, 0x3c, 0x00, 0x3c], 0x3c00_3c00),
            (DType::BFloat16, &[0x80, 0x3f], 0x3f80),
            // i64 -1 and 1 in two words.
            (
                DType::Int64,
                &[
                    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0,
                ],
                0xffff_ffff_ffff_fffe,
            ),
            // f64 1.0 = 0x3ff0000000000000.
            (
                DType::Float64,
                &[0, 0, 0, 0, 0, 0, 0xf0, 0x3f],
                0x3ff0_0000_0000_0000,
            ),
            // int4 nibbles (2 per byte) and uint1 bits (8 per byte) hash their packed bytes.
            (DType::Int4, &[0x21, 0x03], 0x0321),
            (DType::UInt1, &[0b1010_0101], 0xa5),
        ];
        for &(d, bytes, want) in known {
            assert_eq!(xor64(bytes), want, "{d}");
        }
        for d in DType::ALL {
            let n = d.storage_bytes(13).unwrap();
            let b: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            assert_eq!(xor64(&b), pairwise(&b), "{d}");
        }
    }

    /// The same rule written in numpy (pad, view as `<u8`, `bitwise_xor.reduce`) on tensors of
    /// every length 0..=40 bytes and one of 1 MiB + 3 bytes.
    #[test]
    fn equals_numpy() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        if !opdump_test_support::require(opdump_test_support::Prereq::Numpy) {
            return;
        }
        let big: Vec<u8> = (0..(1 << 20) + 3)
            .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut cases: Vec<Vec<u8>> = (0..=40u8)
            .map(|n| (0..n).map(|i| i.wrapping_mul(53) ^ 0xa5).collect())
            .collect();
        cases.push(big);
        let script = "import sys, numpy as np\n\
            data = sys.stdin.buffer.read()\n\
            i = 0\n\
            while i < len(data):\n\
            \x20   n = int.from_bytes(data[i:i+8], 'little'); b = data[i+8:i+8+n]; i += 8 + n\n\
            \x20   b = b + bytes(-len(b) % 8)\n\
            \x20   w = np.frombuffer(b, dtype='<u8')\n\
            \x20   print('0x%016x' % (int(np.bitwise_xor.reduce(w)) if len(w) else 0))\n";
        let mut child = Command::new("python3")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start python3");
        let mut input = Vec::new();
        for c in &cases {
            input.extend_from_slice(&(c.len() as u64).to_le_bytes());
            input.extend_from_slice(c);
        }
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(&input)
            .expect("write to python3");
        let out = child.wait_with_output().expect("python3 output");
        assert!(out.status.success(), "python3 failed: {:?}", out.status);
        let text = String::from_utf8(out.stdout).expect("utf-8");
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got.len(), cases.len(), "{text}");
        for (c, g) in cases.iter().zip(got) {
            assert_eq!(hex(xor64(c)).as_str(), g, "{} bytes", c.len());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn pieces_equal_whole_and_rule(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let mut pts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
            pts.extend([0, data.len()]);
            pts.sort_unstable();
            let mut s = Xor64::new();
            for w in pts.windows(2) {
                s.update(&data[w[0]..w[1]]);
            }
            prop_assert_eq!(s.finish(), pairwise(&data));
            prop_assert_eq!(xor64(&data), pairwise(&data));
        }

        #[test]
        fn a_changed_byte_changes_the_checksum(
            data in proptest::collection::vec(any::<u8>(), 1..300),
            at in any::<usize>(),
            flip in 1u8..=255,
        ) {
            let mut b = data.clone();
            let i = at % b.len();
            b[i] ^= flip;
            prop_assert_ne!(xor64(&b), xor64(&data));
        }
    }
}
