//! The host's frame decoder: bytes of an agent's stream in, frames and problems out.
//!
//! [`Decoder`] takes the stream in pieces of any size ([`Decoder::push`]), splits it at the
//! `0x00` delimiters, and for each frame reports either [`Event::Frame`] or [`Event::Problem`]
//! with the byte offset of the frame in the stream. It never panics and never allocates: one
//! fixed buffer of [`MAX_WIRE_LEN`] bytes holds the frame being read, and bytes beyond it are
//! counted, not kept (an over-long frame). Because every frame ends at the next zero, a bad
//! frame never costs the good frame after it.
//!
//! Sequence numbers: within a session (from a [`Hello`]) the decoder expects `seq` to grow by
//! one per frame. A frame ahead of that is delivered after a [`ProblemKind::Gap`] report (frames
//! were lost); a frame behind it is skipped, as [`ProblemKind::Duplicate`] if that sequence
//! number was delivered among the last [`WINDOW`] frames, otherwise as
//! [`ProblemKind::Reordered`]. A hello starts a new session unless it repeats the current
//! session's hello at a sequence number already delivered (then it is a duplicate).

use super::{
    Frame, Hello,
    cobs::DECODE_SLACK,
    frame::{self, MAX_WIRE_LEN, OpenError},
};

/// How many sequence numbers behind the newest the decoder remembers for duplicates.
pub const WINDOW: u32 = 64;

/// What went wrong with the bytes at [`Problem::offset`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// The frame was cut short (its COBS blocks stop early, it is shorter than any frame, or
    /// the stream ended inside it).
    Torn,
    /// The frame's CRC does not match (or it is not COBS): corrupted in transit.
    Corrupt,
    /// More than [`MAX_WIRE_LEN`] bytes without a delimiter; they were skipped unread.
    OverLong,
    /// A valid frame of a wire version this decoder does not read.
    UnknownVersion(u8),
    /// A valid frame of an unknown kind (or a host-to-agent plan frame).
    UnknownKind(u8),
    /// A valid frame whose header or payload does not decode (an agent bug: the CRC held).
    BadPayload(&'static str),
    /// A frame whose sequence number was already delivered.
    Duplicate {
        /// Its sequence number.
        seq: u32,
    },
    /// A frame that arrived after a later one (its sequence number is behind the newest and
    /// was never delivered); skipped so that records stay in order.
    Reordered {
        /// Its sequence number.
        seq: u32,
        /// The sequence number the decoder expected.
        expected: u32,
    },
    /// Frames are missing before this one (it was still delivered).
    Gap {
        /// The sequence number expected.
        expected: u32,
        /// The sequence number that came.
        got: u32,
    },
}

/// A problem at a place in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Byte offset in the stream of the frame's first byte after its opening delimiter.
    pub offset: u64,
    /// Bytes between the delimiters (for an over-long frame: all the bytes skipped).
    pub len: u64,
    /// What was wrong.
    pub kind: ProblemKind,
}

/// What the decoder reports, in stream order (large because a [`Frame`] is; see there).
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Event {
    /// A good frame.
    Frame {
        /// Byte offset of the frame (after its opening delimiter).
        offset: u64,
        /// Its sequence number.
        seq: u32,
        /// The frame.
        frame: Frame,
    },
    /// Bytes that were skipped, and why.
    Problem(Problem),
}

/// Counts of what a decoder has seen so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Frames delivered.
    pub frames: u64,
    /// Problems reported (gaps included).
    pub problems: u64,
    /// Stream bytes consumed.
    pub bytes: u64,
}

/// Sequence state of the current session.
#[derive(Clone, Debug)]
struct Session {
    /// Newest delivered sequence number.
    newest: u32,
    /// Bit `i`: `newest - i` was delivered (bit 0 is `newest` itself).
    seen: u64,
    /// The session's hello, to tell a duplicated hello from a restart.
    hello: Option<Hello>,
}

/// The stream decoder; see the module documentation.
#[derive(Clone, Debug)]
pub struct Decoder {
    buf: [u8; MAX_WIRE_LEN],
    /// The current frame decoded ([`frame::open_from`]).
    scratch: [u8; MAX_WIRE_LEN + DECODE_SLACK],
    len: usize,
    /// Stream offset of the current frame's first byte.
    start: u64,
    /// Bytes of the current frame (kept or not).
    frame_len: u64,
    /// The current frame outgrew the buffer: skip to the next delimiter.
    overlong: bool,
    session: Option<Session>,
    counts: Counts,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder at stream offset 0, before any session.
    pub const fn new() -> Decoder {
        Decoder {
            buf: [0; MAX_WIRE_LEN],
            scratch: [0; MAX_WIRE_LEN + DECODE_SLACK],
            len: 0,
            start: 0,
            frame_len: 0,
            overlong: false,
            session: None,
            counts: Counts {
                frames: 0,
                problems: 0,
                bytes: 0,
            },
        }
    }

    /// What was seen so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Feeds the next `bytes` of the stream; `on` gets every event they complete, in order.
    pub fn push(&mut self, bytes: &[u8], mut on: impl FnMut(Event)) {
        let mut rest = bytes;
        while !rest.is_empty() {
            match rest.iter().position(|&b| b == 0) {
                Some(i) => {
                    self.take(&rest[..i]);
                    self.counts.bytes += i as u64 + 1;
                    self.end_frame(&mut on);
                    self.start = self.counts.bytes;
                    rest = &rest[i + 1..];
                }
                None => {
                    self.take(rest);
                    self.counts.bytes += rest.len() as u64;
                    rest = &[];
                }
            }
        }
    }

    /// Ends the stream: a frame still open is reported as torn.
    pub fn finish(&mut self, mut on: impl FnMut(Event)) {
        if self.frame_len > 0 {
            let kind = if self.overlong {
                ProblemKind::OverLong
            } else {
                ProblemKind::Torn
            };
            self.problem(&mut on, kind);
        }
        self.reset_frame();
        self.start = self.counts.bytes;
    }

    /// Keeps `piece` of the current frame, or only counts it once the frame is over-long.
    fn take(&mut self, piece: &[u8]) {
        self.frame_len += piece.len() as u64;
        if self.overlong {
            return;
        }
        match self.buf.get_mut(self.len..self.len + piece.len()) {
            Some(dst) => {
                dst.copy_from_slice(piece);
                self.len += piece.len();
            }
            None => self.overlong = true,
        }
    }

    fn reset_frame(&mut self) {
        self.len = 0;
        self.frame_len = 0;
        self.overlong = false;
    }

    fn problem(&mut self, on: &mut impl FnMut(Event), kind: ProblemKind) {
        self.counts.problems += 1;
        on(Event::Problem(Problem {
            offset: self.start,
            len: self.frame_len,
            kind,
        }));
    }

    /// A delimiter: handle the bytes since the last one.
    fn end_frame(&mut self, on: &mut impl FnMut(Event)) {
        if self.frame_len == 0 {
            // Between two delimiters: the normal gap between frames.
            return;
        }
        if self.overlong {
            self.problem(on, ProblemKind::OverLong);
            self.reset_frame();
            return;
        }
        let len = self.len;
        let opened = match frame::open_from(&self.buf[..len], &mut self.scratch) {
            Ok(raw) => Frame::decode(raw.kind, raw.payload)
                .map(|f| (raw.seq, f))
                .map_err(|e| match e {
                    crate::Error::Wire { reason } => ProblemKind::BadPayload(reason),
                    _ => ProblemKind::BadPayload("payload does not decode"),
                }),
            Err(OpenError::Torn) => Err(ProblemKind::Torn),
            Err(OpenError::Corrupt) => Err(ProblemKind::Corrupt),
            Err(OpenError::UnknownVersion(v)) => Err(ProblemKind::UnknownVersion(v)),
            Err(OpenError::UnknownKind(k)) => Err(ProblemKind::UnknownKind(k)),
            Err(OpenError::BadHeader) => Err(ProblemKind::BadPayload("bad sequence number")),
        };
        match opened {
            Ok((seq, frame)) => self.sequence(on, seq, frame),
            Err(kind) => self.problem(on, kind),
        }
        self.reset_frame();
    }

    /// Sequence checks, then delivery.
    fn sequence(&mut self, on: &mut impl FnMut(Event), seq: u32, frame: Frame) {
        let restart = match (&frame, &self.session) {
            (Frame::Hello(h), Some(s)) => {
                !(s.hello.as_ref() == Some(h) && was_delivered(s, seq).unwrap_or(false))
            }
            (Frame::Hello(_), None) | (_, None) => true,
            _ => false,
        };
        if restart {
            let hello = match &frame {
                Frame::Hello(h) => Some(h.clone()),
                _ => None,
            };
            self.session = Some(Session {
                newest: seq,
                seen: 1,
                hello,
            });
            return self.deliver(on, seq, frame);
        }
        let Some(s) = self.session.as_mut() else {
            return;
        };
        let expected = s.newest.wrapping_add(1);
        let ahead = seq.wrapping_sub(expected) as i32;
        if ahead >= 0 {
            let shift = ahead as u32 + 1;
            s.seen = if shift >= 64 { 0 } else { s.seen << shift } | 1;
            s.newest = seq;
            if ahead > 0 {
                self.problem(on, ProblemKind::Gap { expected, got: seq });
            }
            return self.deliver(on, seq, frame);
        }
        let kind = match was_delivered(s, seq) {
            Some(true) => ProblemKind::Duplicate { seq },
            Some(false) => {
                let age = s.newest.wrapping_sub(seq);
                s.seen |= 1 << age;
                ProblemKind::Reordered { seq, expected }
            }
            None => ProblemKind::Reordered { seq, expected },
        };
        self.problem(on, kind);
    }

    fn deliver(&mut self, on: &mut impl FnMut(Event), seq: u32, frame: Frame) {
        self.counts.frames += 1;
        on(Event::Frame {
            offset: self.start,
            seq,
            frame,
        });
    }
}

/// Whether `seq` (not ahead of the newest) was delivered; `None` when it is outside the
/// window (or ahead of the newest).
fn was_delivered(s: &Session, seq: u32) -> Option<bool> {
    let age = s.newest.wrapping_sub(seq);
    (age < WINDOW).then(|| s.seen >> age & 1 == 1)
}
