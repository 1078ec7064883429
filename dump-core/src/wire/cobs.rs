//! Consistent Overhead Byte Stuffing (Cheshire and Baker, 1999): a frame's bytes re-coded so
//! that they hold no `0x00`, which then delimits frames on a byte stream.
//!
//! The encoded form is a sequence of blocks, each a code byte `c` (1..=255) followed by `c - 1`
//! non-zero data bytes; a block with `c < 255` stands for its data followed by one zero, except
//! the last block of the frame. `n` bytes encode to at most `n + n / 254 + 1` bytes
//! ([`max_encoded_len`]).
//!
//! Written for this crate (no dependency): [`write_blocks`] streams the blocks to a sink
//! without a second buffer (the agent's path), [`encode`] fills a slice, and
//! [`decode_in_place`] undoes it and tells a frame cut short ([`CobsError::Torn`]) from one that
//! cannot be COBS at all; [`decode_to`] does the same into a second buffer, faster (the host's
//! frame decoder).

/// Why bytes are not a COBS frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CobsError {
    /// The last code byte promises more data than the frame holds: the frame was cut short.
    Torn,
    /// A `0x00` inside the frame (only a caller that did not split at zeros passes one).
    Zero,
}

/// Most bytes `n` bytes encode to (without delimiters).
pub const fn max_encoded_len(n: usize) -> usize {
    n + n / 254 + 1
}

/// Hands the encoded blocks of `src` to `emit`, code bytes and data slices in order; stops at
/// the first error of `emit`.
pub fn write_blocks<E>(src: &[u8], mut emit: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
    let mut rest = src;
    loop {
        let take = rest.len().min(254);
        let (head, tail) = rest.split_at(take);
        match head.iter().position(|&b| b == 0) {
            Some(i) => {
                emit(&[i as u8 + 1])?;
                emit(&head[..i])?;
                // Skip the zero; an empty remainder still needs its final (empty) block.
                rest = &rest[i + 1..];
            }
            None if take == 254 => {
                emit(&[0xFF])?;
                emit(head)?;
                rest = tail;
                if rest.is_empty() {
                    return Ok(());
                }
            }
            None => {
                emit(&[take as u8 + 1])?;
                return emit(head);
            }
        }
    }
}

/// Encodes `src` into the front of `out` and returns the encoded length; `None` if `out` is
/// shorter than needed ([`max_encoded_len`] always suffices).
pub fn encode(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut n = 0;
    write_blocks(src, |piece| {
        let end = n + piece.len();
        out.get_mut(n..end).ok_or(())?.copy_from_slice(piece);
        n = end;
        Ok::<(), ()>(())
    })
    .ok()?;
    Some(n)
}

/// Decodes the COBS frame `buf` (without delimiters) in place and returns the decoded length;
/// the decoded bytes are `buf[..len]`.
pub fn decode_in_place(buf: &mut [u8]) -> Result<usize, CobsError> {
    let mut read = 0;
    let mut write = 0;
    while read < buf.len() {
        let code = usize::from(buf[read]);
        if code == 0 {
            return Err(CobsError::Zero);
        }
        let start = read + 1;
        let end = start + code - 1;
        if end > buf.len() {
            return Err(CobsError::Torn);
        }
        if buf[start..end].contains(&0) {
            return Err(CobsError::Zero);
        }
        buf.copy_within(start..end, write);
        write += code - 1;
        read = end;
        if code < 0xFF && read < buf.len() {
            buf[write] = 0;
            write += 1;
        }
    }
    Ok(write)
}

/// Bytes [`decode_to`] copies at once for a short block: `dst` needs this many bytes beyond
/// the decoded length for the fast path (it falls back to exact copies without them).
pub const DECODE_SLACK: usize = 16;

/// [`decode_in_place`] from `src` into `dst`: the same result, the same error for the same
/// bytes, the decoded bytes in `dst[..len]` (`dst` must hold `src.len()` bytes, else
/// [`CobsError::Torn`]; with [`DECODE_SLACK`] more it is faster). Blocks of at most 16 data
/// bytes, most of a stat frame's, are copied and checked for zeros as one 16-byte word (the
/// bytes past the block are overwritten later or lie past the decoded length): no call and
/// no loop per block.
pub fn decode_to(src: &[u8], dst: &mut [u8]) -> Result<usize, CobsError> {
    const LO: u128 = u128::from_le_bytes([0x01; 16]);
    const HI: u128 = u128::from_le_bytes([0x80; 16]);
    let n = src.len();
    let (mut read, mut write) = (0, 0);
    while read < n {
        let code = usize::from(src[read]);
        if code == 0 {
            return Err(CobsError::Zero);
        }
        let (start, end) = (read + 1, read + code);
        if end > n {
            return Err(CobsError::Torn);
        }
        let len = code - 1;
        let word = src
            .get(start..start + DECODE_SLACK)
            .zip(dst.get_mut(write..write + DECODE_SLACK))
            .filter(|_| len <= DECODE_SLACK);
        match word {
            Some((from, to)) => {
                let mut bytes = [0u8; DECODE_SLACK];
                bytes.copy_from_slice(from);
                let w = u128::from_le_bytes(bytes);
                // The lowest set bit marks the first zero byte exactly (the borrow of the
                // subtraction only ever marks bytes above a true zero).
                let zeros = w.wrapping_sub(LO) & !w & HI;
                if zeros != 0 && (zeros.trailing_zeros() / 8) < len as u32 {
                    return Err(CobsError::Zero);
                }
                to.copy_from_slice(&bytes);
            }
            None => {
                let data = &src[start..end];
                if data.contains(&0) {
                    return Err(CobsError::Zero);
                }
                dst.get_mut(write..write + len)
                    .ok_or(CobsError::Torn)?
                    .copy_from_slice(data);
            }
        }
        write += len;
        read = end;
        if code < 0xFF && read < n {
            *dst.get_mut(write).ok_or(CobsError::Torn)? = 0;
            write += 1;
        }
    }
    Ok(write)
}

/// Where the first `0x00` of `bytes` is: sixteen bytes per step with SSE2 (part of every
/// x86-64 CPU), eight per step elsewhere.
#[cfg(target_arch = "x86_64")]
pub fn find_zero(bytes: &[u8]) -> Option<usize> {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_setzero_si128,
    };
    let mut chunks = bytes.chunks_exact(16);
    let mut at = 0;
    for c in &mut chunks {
        // SAFETY: SSE2 is part of the x86-64 baseline, so these instructions exist on every
        // CPU this code runs on; `c` is 16 bytes and the load has no alignment requirement.
        let mask = unsafe {
            let v = _mm_loadu_si128(c.as_ptr() as *const __m128i);
            _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128())) as u32
        };
        if mask != 0 {
            return Some(at + mask.trailing_zeros() as usize);
        }
        at += 16;
    }
    find_zero_words(chunks.remainder()).map(|i| at + i)
}

/// Where the first `0x00` of `bytes` is, eight bytes per step.
#[cfg(not(target_arch = "x86_64"))]
pub fn find_zero(bytes: &[u8]) -> Option<usize> {
    find_zero_words(bytes)
}

/// Where the first `0x00` of `bytes` is, eight bytes per step.
fn find_zero_words(bytes: &[u8]) -> Option<usize> {
    const LO: u64 = u64::from_le_bytes([0x01; 8]);
    const HI: u64 = u64::from_le_bytes([0x80; 8]);
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let w = u64::from_le_bytes(w);
        // The lowest set bit marks the first zero byte exactly (see `decode_to`).
        let zeros = w.wrapping_sub(LO) & !w & HI;
        if zeros != 0 {
            return Some(at + (zeros.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == 0)
        .map(|i| at + i)
}

/// The host decoder's fast way with a frame that starts at `src[0]` (a non-zero byte, just
/// after a delimiter) and ends within `src`.
///
/// A frame without a 255-code block decodes to its bytes after the first, each later code
/// byte made `0x00`: a block `c, d1 .. d(c-1)` stands for its data and a zero, and the next
/// code byte sits exactly where that zero goes. So the frame is found with a word-at-a-time
/// zero search, copied whole, and only the chain of code bytes is walked (to zero them and to
/// check that the last block ends at the delimiter), instead of a copy and a zero check per
/// block (a stat frame's blocks are about two bytes long). A frame with a 255 block goes
/// through [`decode_to`].
///
/// Returns `Some((n, decoded))` when the frame ends in `src`: the frame is `src[..n]` (its
/// delimiter at `src[n]`) and `decoded` is exactly what [`decode_to`]`(&src[..n], dst)` gives
/// (a block that runs past the delimiter makes a cut-short frame, [`CobsError::Torn`]).
/// Returns `None` when `src` ends inside the frame, when the frame is longer than `max_len`
/// bytes, or when `dst` is shorter than the frame: the caller then gathers the frame and
/// decodes it the slow way, with the same result.
pub fn decode_frame(
    src: &[u8],
    max_len: usize,
    dst: &mut [u8],
) -> Option<(usize, Result<usize, CobsError>)> {
    let window = src.get(..max_len.saturating_add(1)).unwrap_or(src);
    let n = find_zero(window)?;
    let frame = &src[..n];
    let (&first, body) = frame.split_first()?;
    let out = dst.get_mut(..body.len())?;
    out.copy_from_slice(body);
    // `p`: where the next code byte is; it must land exactly on the delimiter.
    let mut p = usize::from(first);
    let mut code = first;
    while p < n {
        if code == 0xFF {
            break;
        }
        code = frame[p];
        out[p - 1] = 0;
        p += usize::from(code);
    }
    if code == 0xFF {
        // A full block has no implied zero: the output is not the shifted input.
        return Some((n, decode_to(frame, dst)));
    }
    if p > n {
        return Some((n, Err(CobsError::Torn)));
    }
    Some((n, Ok(body.len())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn round_trip(src: &[u8]) -> Vec<u8> {
        let mut enc = vec![0u8; max_encoded_len(src.len())];
        let n = encode(src, &mut enc).unwrap();
        enc.truncate(n);
        assert!(!enc.contains(&0), "{src:?} -> {enc:?}");
        let mut dec = enc.clone();
        let m = decode_in_place(&mut dec).unwrap();
        assert_eq!(&dec[..m], src);
        enc
    }

    #[test]
    fn known_encodings() {
        // Examples from the COBS paper / Wikipedia.
        assert_eq!(round_trip(&[]), [1]);
        assert_eq!(round_trip(&[0]), [1, 1]);
        assert_eq!(round_trip(&[0, 0]), [1, 1, 1]);
        assert_eq!(round_trip(&[0x11, 0x22, 0, 0x33]), [3, 0x11, 0x22, 2, 0x33]);
        assert_eq!(
            round_trip(&[0x11, 0x22, 0x33, 0x44]),
            [5, 0x11, 0x22, 0x33, 0x44]
        );
        let run: Vec<u8> = (1..=254).collect();
        let enc = round_trip(&run);
        assert_eq!((enc[0], enc.len()), (0xFF, 255));
        let mut run2 = run.clone();
        run2.push(0);
        assert_eq!(round_trip(&run2).len(), 257);
    }

    #[test]
    fn every_length_and_zero_pattern_round_trips_within_bound() {
        for len in 0..700usize {
            let src: Vec<u8> = (0..len)
                .map(|i| {
                    if (i * 37 + len) % 11 == 0 {
                        0
                    } else {
                        (i % 255 + 1) as u8
                    }
                })
                .collect();
            let enc = round_trip(&src);
            assert!(enc.len() <= max_encoded_len(len));
            let ones = vec![7u8; len];
            assert!(round_trip(&ones).len() <= max_encoded_len(len));
        }
    }

    /// xorshift64: the tests' reproducible bytes.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn decoding_to_a_buffer_equals_decoding_in_place_on_any_bytes() {
        // Valid encodings, then each cut, with a byte zeroed or changed; and random small
        // bytes (mostly invalid), so that zeros and short blocks are common. Every `dst`
        // size from exact to roomy.
        let mut rng = Rng(0x0c0b_5dec_0de0_2026);
        let check = |bytes: &[u8]| {
            let mut inplace = bytes.to_vec();
            let want = decode_in_place(&mut inplace);
            for slack in [0, 1, DECODE_SLACK - 1, DECODE_SLACK, 40] {
                let mut dst = vec![0xAAu8; bytes.len() + slack];
                let got = decode_to(bytes, &mut dst);
                assert_eq!(got, want, "{bytes:?} slack {slack}");
                if let Ok(n) = got {
                    assert_eq!(dst[..n], inplace[..n], "{bytes:?} slack {slack}");
                }
            }
        };
        for len in 0..600usize {
            let src: Vec<u8> = (0..len)
                .map(|_| match rng.next() % 4 {
                    0 => 0,
                    _ => (rng.next() % 256) as u8,
                })
                .collect();
            let mut enc = vec![0u8; max_encoded_len(len)];
            let m = encode(&src, &mut enc).unwrap();
            enc.truncate(m);
            check(&enc);
            let mut dst = vec![0u8; m + DECODE_SLACK];
            let k = decode_to(&enc, &mut dst).unwrap();
            assert_eq!(&dst[..k], &src[..]);
            for _ in 0..4 {
                let cut = (rng.next() as usize) % (m + 1);
                check(&enc[..cut]);
                let mut z = enc.clone();
                z[(rng.next() as usize) % m] = 0;
                check(&z);
                let mut c = enc.clone();
                c[(rng.next() as usize) % m] = (rng.next() % 256) as u8;
                check(&c);
            }
            let noise: Vec<u8> = (0..len).map(|_| (rng.next() % 8) as u8).collect();
            check(&noise);
        }
        // A `dst` shorter than the decoded bytes is an error, never a panic.
        let mut enc = [0u8; 8];
        let m = encode(&[1, 2, 3, 4, 5], &mut enc).unwrap();
        assert_eq!(decode_to(&enc[..m], &mut [0u8; 3]), Err(CobsError::Torn));
    }

    /// The reference for [`decode_frame`]: the frame is everything before the first zero,
    /// decoded by [`decode_to`]; `None` when there is no zero or the frame is over `max`.
    fn split_then_decode(
        src: &[u8],
        max: usize,
    ) -> Option<(usize, Result<usize, CobsError>, Vec<u8>)> {
        let n = src.iter().position(|&b| b == 0)?;
        if n > max {
            return None;
        }
        let mut dst = vec![0u8; n + DECODE_SLACK];
        let r = decode_to(&src[..n], &mut dst);
        let bytes = r.map(|m| dst[..m].to_vec()).unwrap_or_default();
        Some((n, r, bytes))
    }

    #[test]
    fn decoding_a_frame_in_one_pass_equals_splitting_then_decoding() {
        // Valid frames followed by their delimiter and more bytes, then cut, with a byte
        // zeroed or changed, and noise with many zeros and short blocks; every frame-length
        // bound around the frame's length. `None` is allowed only where the reference has no
        // complete frame within the bound (the slow path then handles it).
        let mut rng = Rng(0x0fa5_7c0b_5000_2026);
        let check = |src: &[u8]| {
            if src.first() == Some(&0) {
                return;
            }
            let frame_len = src.iter().position(|&b| b == 0).unwrap_or(src.len());
            for max in [frame_len.saturating_sub(1), frame_len, frame_len + 1, 1300] {
                let want = split_then_decode(src, max);
                let mut dst = vec![0x55u8; max + DECODE_SLACK];
                let got = decode_frame(src, max, &mut dst);
                match (&want, got) {
                    (Some((n, r, bytes)), Some((gn, gr))) => {
                        assert_eq!((gn, gr), (*n, *r), "{src:?} max {max}");
                        if let Ok(m) = gr {
                            assert_eq!(&dst[..m], &bytes[..], "{src:?} max {max}");
                        }
                    }
                    (None, None) => {}
                    (Some(w), None) => panic!("{src:?} max {max}: no answer, expected {w:?}"),
                    (None, Some(g)) => panic!("{src:?} max {max}: {g:?} without a whole frame"),
                }
            }
        };
        for len in 0..1200usize {
            // Short blocks (a zero in four bytes), or long ones with 255-code blocks.
            let zero_one_in = if len % 2 == 0 { 4 } else { 400 };
            let src: Vec<u8> = (0..len)
                .map(|_| match rng.next() % zero_one_in {
                    0 => 0,
                    _ => 1 + (rng.next() % 255) as u8,
                })
                .collect();
            let mut enc = vec![0u8; max_encoded_len(len)];
            let m = encode(&src, &mut enc).unwrap();
            enc.truncate(m);
            let mut wire = enc.clone();
            wire.push(0);
            wire.extend((0..rng.next() % 40).map(|_| (rng.next() % 3) as u8));
            check(&wire);
            let mut dst = vec![0u8; m + DECODE_SLACK];
            assert_eq!(decode_frame(&wire, m, &mut dst).map(|r| r.0), Some(m));
            for _ in 0..6 {
                let cut = (rng.next() as usize) % (wire.len() + 1);
                check(&wire[..cut]);
                let mut z = wire.clone();
                z[(rng.next() as usize) % m.max(1)] = 0;
                check(&z);
                let mut c = wire.clone();
                c[(rng.next() as usize) % m.max(1)] = (rng.next() % 256) as u8;
                check(&c);
            }
            let noise: Vec<u8> = (0..len).map(|_| (rng.next() % 8) as u8).collect();
            check(&noise);
            let long: Vec<u8> = (0..len).map(|_| (rng.next() % 256) as u8).collect();
            check(&long);
        }
        // A `dst` too short gives no answer, never a panic.
        assert_eq!(
            decode_frame(&[6, 1, 2, 3, 4, 5, 0], 10, &mut [0u8; 3]),
            None
        );
        assert_eq!(find_zero(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 0]), Some(9));
        assert_eq!(find_zero(&[1, 2, 0, 4, 5, 6, 7, 8, 9, 0]), Some(2));
        assert_eq!(find_zero(&[1; 17]), None);
        // Every zero position at every length, with and without a second zero later, and
        // bytes with the high bit set (the word-at-a-time trick's corner).
        for len in 0..70usize {
            for z in 0..=len {
                let mut v: Vec<u8> = (0..len).map(|i| 0x80 | (i as u8 % 127 + 1)).collect();
                if z < len {
                    v[z] = 0;
                }
                if z + 3 < len {
                    v[z + 3] = 0;
                }
                let want = v.iter().position(|&b| b == 0);
                assert_eq!(find_zero(&v), want, "len {len} zero {z}");
                assert_eq!(find_zero_words(&v), want, "words: len {len} zero {z}");
            }
        }
    }

    #[test]
    fn torn_and_zero_are_told_apart() {
        let mut enc = [0u8; 16];
        let n = encode(&[1, 2, 3, 4, 5], &mut enc).unwrap();
        assert_eq!(
            decode_in_place(&mut enc[..n - 2].to_vec()),
            Err(CobsError::Torn)
        );
        let mut z = enc[..n].to_vec();
        z[2] = 0;
        assert_eq!(decode_in_place(&mut z), Err(CobsError::Zero));
        assert_eq!(encode(&[1, 2, 3], &mut [0u8; 3]), None);
    }
}
