//! The frame: `version | kind | seq | payload | crc32`, COBS-encoded between two `0x00`.
//!
//! ```text
//! raw frame (before COBS)                         wire
//! +---------+------+-----------+---------+-------+ 00 | COBS(raw frame) | 00
//! | version | kind | seq       | payload | crc32 |
//! | u8 = 1  | u8   | varint u32| postcard| LE u32|
//! +---------+------+-----------+---------+-------+
//! ```
//!
//! The CRC-32 ([`super::crc`]) covers every byte before it. Only the version byte (first) and
//! the CRC (last 4 bytes) keep their place in every wire version, so a host checks the CRC
//! first, then the version, and skips a frame of a version it does not know (see
//! `docs/wire.md`). Every frame starts and ends with a `0x00`: two zeros stand between
//! consecutive frames, so one corrupted delimiter never merges two frames.

use super::{cobs, crc, record::MAX_ENCODED_LEN};
use crate::Error;
use serde::Serialize;

/// The wire version this crate writes and reads.
pub const WIRE_VERSION: u8 = 1;

/// Bytes of the CRC at the end of every raw frame.
pub const CRC_LEN: usize = 4;

/// Most bytes of a header: version 1, kind 1, seq 5 (varint).
pub const MAX_HEADER_LEN: usize = 7;

/// Fewest bytes of a raw frame: version, kind, a one-byte seq, an empty payload and the CRC.
pub const MIN_FRAME_LEN: usize = 3 + CRC_LEN;

/// Largest payload: the largest encoded [`super::StatRecord`]; every other payload is smaller
/// (asserted at compile time in `session.rs`) and a plan must fit it.
pub const MAX_PAYLOAD_LEN: usize = MAX_ENCODED_LEN;

/// Largest raw frame (header, payload, CRC): the agent's one frame buffer.
pub const MAX_FRAME_LEN: usize = MAX_HEADER_LEN + MAX_PAYLOAD_LEN + CRC_LEN;

/// Largest frame on the wire: COBS of [`MAX_FRAME_LEN`] bytes plus the two `0x00`
/// delimiters. A host that sees more bytes between two zeros reports an over-long frame.
pub const MAX_WIRE_LEN: usize = cobs::max_encoded_len(MAX_FRAME_LEN) + 2;

/// What a frame carries (the kind byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Kind {
    /// Agent to host: [`super::Hello`].
    Hello = 1,
    /// Agent to host: [`super::BeginGraph`].
    BeginGraph = 2,
    /// Agent to host: [`super::KernelEntry`].
    Kernel = 3,
    /// Agent to host: [`super::BeginStep`].
    BeginStep = 4,
    /// Agent to host: [`super::StatRecord`].
    Stat = 5,
    /// Agent to host: [`super::EndStep`].
    EndStep = 6,
    /// Host to agent: a dump plan (`crate::agent::Plan`).
    Plan = 7,
}

impl Kind {
    /// The kind of byte `b`, if known.
    pub const fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Hello,
            2 => Kind::BeginGraph,
            3 => Kind::Kernel,
            4 => Kind::BeginStep,
            5 => Kind::Stat,
            6 => Kind::EndStep,
            7 => Kind::Plan,
            _ => return None,
        })
    }
}

/// Writes `v` as a LEB128 varint (postcard's `u32` encoding) into `out` at `at` (at most
/// `MAX_FRAME_LEN - 5`); returns its length (1..=5).
fn put_varint(mut v: u32, out: &mut [u8; MAX_FRAME_LEN], at: usize) -> usize {
    let mut n = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        out[at + n] = if v == 0 { byte } else { byte | 0x80 };
        n += 1;
        if v == 0 {
            return n;
        }
    }
}

/// Reads a LEB128 `u32` varint at the front of `bytes`: the value and its length. `None` for a
/// varint that is cut short, longer than 5 bytes or above `u32::MAX`.
fn get_varint(bytes: &[u8]) -> Option<(u32, usize)> {
    let mut v: u32 = 0;
    for (i, &b) in bytes.iter().take(5).enumerate() {
        if i == 4 && b > 0x0f {
            return None;
        }
        v |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Builds a raw frame (header, postcard `payload`, CRC) into `buf`; returns its length.
/// Errors only if the payload does not fit [`MAX_PAYLOAD_LEN`] (a plan with too many or too
/// long entries; every agent-to-host payload fits by construction).
pub fn build<T: Serialize + ?Sized>(
    kind: Kind,
    seq: u32,
    payload: &T,
    buf: &mut [u8; MAX_FRAME_LEN],
) -> Result<usize, Error> {
    buf[0] = WIRE_VERSION;
    buf[1] = kind as u8;
    let head = 2 + put_varint(seq, buf, 2);
    let room = head + MAX_PAYLOAD_LEN;
    let used = postcard::to_slice(payload, &mut buf[head..room])
        .map_err(|_| Error::Wire {
            reason: "payload does not fit in one frame (MAX_PAYLOAD_LEN bytes)",
        })?
        .len();
    let end = head + used;
    let c = crc::crc32(&buf[..end]);
    buf[end..end + CRC_LEN].copy_from_slice(&c.to_le_bytes());
    Ok(end + CRC_LEN)
}

/// Hands the wire form of the raw frame `raw` to `emit`: `0x00`, the COBS blocks, `0x00`.
pub fn write_wire<E>(raw: &[u8], mut emit: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
    emit(&[0])?;
    cobs::write_blocks(raw, &mut emit)?;
    emit(&[0])
}

/// Writes the wire form of `raw` into the front of `out`; returns its length, or `None` if
/// `out` is too short ([`MAX_WIRE_LEN`] always suffices for a frame from [`build`]).
pub fn encode_wire(raw: &[u8], out: &mut [u8]) -> Option<usize> {
    let (first, rest) = out.split_first_mut()?;
    *first = 0;
    let n = cobs::encode(raw, rest)?;
    *rest.get_mut(n)? = 0;
    Some(n + 2)
}

/// A raw frame whose CRC and header checked out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawFrame<'a> {
    /// The kind byte, known to this crate.
    pub kind: Kind,
    /// Sequence number.
    pub seq: u32,
    /// The postcard payload.
    pub payload: &'a [u8],
}

/// Why the bytes between two delimiters are not a usable frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OpenError {
    /// Cut short: the COBS blocks stop early, or fewer bytes than the smallest frame.
    Torn,
    /// Not COBS (a zero inside), or the CRC does not match: corrupted in transit.
    Corrupt,
    /// CRC fine, but a wire version this crate does not read.
    UnknownVersion(u8),
    /// CRC fine, version fine, but an unknown kind byte.
    UnknownKind(u8),
    /// CRC fine, but the header's sequence number is not a valid varint.
    BadHeader,
}

/// Opens one frame: `encoded` is what stood between two `0x00` delimiters (COBS), decoded in
/// place; then the CRC, the version, the kind and the sequence number are checked.
pub fn open(encoded: &mut [u8]) -> Result<RawFrame<'_>, OpenError> {
    let n = cobs::decode_in_place(encoded).map_err(cobs_error)?;
    check(&encoded[..n])
}

/// [`open`] without touching `encoded`: decoded into `scratch` ([`cobs::decode_to`]; give it
/// `encoded.len()` + [`cobs::DECODE_SLACK`] bytes), the same checks, the same errors. The
/// host's decoder uses it.
pub fn open_from<'s>(encoded: &[u8], scratch: &'s mut [u8]) -> Result<RawFrame<'s>, OpenError> {
    let n = cobs::decode_to(encoded, scratch).map_err(cobs_error)?;
    check(&scratch[..n])
}

fn cobs_error(e: cobs::CobsError) -> OpenError {
    match e {
        cobs::CobsError::Torn => OpenError::Torn,
        cobs::CobsError::Zero => OpenError::Corrupt,
    }
}

/// The checks of [`open`] on the decoded bytes `raw`.
pub(crate) fn check(raw: &[u8]) -> Result<RawFrame<'_>, OpenError> {
    if raw.len() < MIN_FRAME_LEN {
        return Err(OpenError::Torn);
    }
    let (body, tail) = raw.split_at(raw.len() - CRC_LEN);
    let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    if crc::crc32(body) != stored {
        return Err(OpenError::Corrupt);
    }
    if body[0] != WIRE_VERSION {
        return Err(OpenError::UnknownVersion(body[0]));
    }
    let kind = Kind::from_u8(body[1]).ok_or(OpenError::UnknownKind(body[1]))?;
    let (seq, len) = get_varint(&body[2..]).ok_or(OpenError::BadHeader)?;
    Ok(RawFrame {
        kind,
        seq,
        payload: &body[2 + len..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_bad_forms() {
        let mut buf = [0u8; MAX_FRAME_LEN];
        for v in [0, 1, 127, 128, 300, 16_383, 16_384, u32::MAX - 1, u32::MAX] {
            let n = put_varint(v, &mut buf, 0);
            assert_eq!(get_varint(&buf[..n]), Some((v, n)));
            // Same bytes as postcard.
            let mut p = [0u8; 8];
            assert_eq!(postcard::to_slice(&v, &mut p).unwrap(), &buf[..n]);
        }
        assert_eq!(get_varint(&[0x80, 0x80]), None);
        assert_eq!(get_varint(&[0xff, 0xff, 0xff, 0xff, 0x1f]), None);
        assert_eq!(get_varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), None);
    }

    #[test]
    fn build_open_and_every_failure() {
        let mut raw = [0u8; MAX_FRAME_LEN];
        let n = build(Kind::EndStep, 300, &(1u32, 2u32, 3u32, 4u32), &mut raw).unwrap();
        assert_eq!(&raw[..4], &[1, 6, 0xac, 0x02]);
        let mut wire = [0u8; MAX_WIRE_LEN];
        let w = encode_wire(&raw[..n], &mut wire).unwrap();
        assert_eq!((wire[0], wire[w - 1]), (0, 0));
        let mut streamed = std::vec::Vec::new();
        write_wire(&raw[..n], |b| {
            streamed.extend_from_slice(b);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(&streamed[..], &wire[..w]);

        let pristine = wire;
        let f = open(&mut wire[1..w - 1]).unwrap();
        assert_eq!(
            (f.kind, f.seq, f.payload),
            (Kind::EndStep, 300, &[1u8, 2, 3, 4][..])
        );

        let again = |edit: &dyn Fn(&mut [u8; MAX_FRAME_LEN]) -> usize| {
            let mut r = raw;
            let n = edit(&mut r);
            let mut wire = [0u8; MAX_WIRE_LEN];
            let w = encode_wire(&r[..n], &mut wire).unwrap();
            open(&mut wire[1..w - 1]).map(|f| f.kind)
        };
        assert_eq!(
            again(&|r| {
                r[5] ^= 4;
                n
            }),
            Err(OpenError::Corrupt)
        );
        let recrc = |r: &mut [u8; MAX_FRAME_LEN], n: usize| {
            let c = crc::crc32(&r[..n - 4]);
            r[n - 4..n].copy_from_slice(&c.to_le_bytes());
            n
        };
        assert_eq!(
            again(&|r| {
                r[0] = 9;
                recrc(r, n)
            }),
            Err(OpenError::UnknownVersion(9))
        );
        assert_eq!(
            again(&|r| {
                r[1] = 200;
                recrc(r, n)
            }),
            Err(OpenError::UnknownKind(200))
        );
        assert_eq!(
            again(&|r| {
                r[2..9].copy_from_slice(&[0xff; 7]);
                recrc(r, n)
            }),
            Err(OpenError::BadHeader)
        );
        assert_eq!(open(&mut [2, 1, 1]), Err(OpenError::Torn));
        let mut cut = pristine;
        assert_eq!(open(&mut cut[1..w - 3]), Err(OpenError::Torn));
        let too_big = [7u8; MAX_PAYLOAD_LEN + 1];
        assert!(build(Kind::Plan, 0, &too_big[..], &mut raw).is_err());
    }
}
