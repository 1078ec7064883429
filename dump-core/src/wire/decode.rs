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
    Frame, Hello, StatView,
    cobs::{self, DECODE_SLACK},
    frame::{self, Kind, MAX_WIRE_LEN, OpenError},
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

/// A good frame as [`Decoder::push_ref`] delivers it: a stat record borrowed from the
/// decoder's buffer ([`StatView`], nothing copied), any other frame decoded.
///
/// The view is the large variant (about 220 bytes, no allocator to box it in); it is built
/// once per frame and lent.
#[derive(Clone, Copy, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum FrameRef<'a> {
    /// A stat frame's record.
    Stat(StatView<'a>),
    /// Any other frame (never [`Frame::Stat`]).
    Session(&'a Frame),
}

impl FrameRef<'_> {
    /// The owned frame.
    pub fn to_frame(&self) -> Frame {
        match self {
            FrameRef::Stat(v) => Frame::Stat(v.to_record()),
            FrameRef::Session(f) => (*f).clone(),
        }
    }
}

/// What [`Decoder::push_ref`] reports: [`Event`] with the frame by reference (a stat
/// record's view is the large variant, about 230 bytes, handed once per frame).
#[derive(Clone, Copy, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum EventRef<'a> {
    /// A good frame.
    Frame {
        /// Byte offset of the frame (after its opening delimiter).
        offset: u64,
        /// Its sequence number.
        seq: u32,
        /// The frame.
        frame: FrameRef<'a>,
    },
    /// Bytes that were skipped, and why.
    Problem(Problem),
}

impl EventRef<'_> {
    /// The owned event.
    pub fn to_event(&self) -> Event {
        match self {
            EventRef::Frame { offset, seq, frame } => Event::Frame {
                offset: *offset,
                seq: *seq,
                frame: frame.to_frame(),
            },
            EventRef::Problem(p) => Event::Problem(*p),
        }
    }
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

/// Everything but the buffers: what a frame's handling updates while the decoded bytes are
/// borrowed.
#[derive(Clone, Debug)]
struct State {
    /// Stream offset of the current frame's first byte.
    start: u64,
    /// Bytes of the current frame (kept or not).
    frame_len: u64,
    /// The current frame outgrew the buffer: skip to the next delimiter.
    overlong: bool,
    session: Option<Session>,
    counts: Counts,
}

/// The stream decoder; see the module documentation.
///
/// A frame that arrives whole within one [`push`](Decoder::push) is decoded straight from the
/// pushed bytes (its delimiter found a word at a time, the frame copied once with its code
/// bytes zeroed, see [`cobs::decode_frame`]); only a frame split across pushes is gathered in
/// a buffer first. Both ways give the same events.
#[derive(Clone, Debug)]
pub struct Decoder {
    buf: [u8; MAX_WIRE_LEN],
    /// The current frame decoded ([`frame::open_from`]).
    scratch: [u8; MAX_WIRE_LEN + DECODE_SLACK],
    /// Bytes of the current frame kept in `buf`.
    len: usize,
    st: State,
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
            st: State {
                start: 0,
                frame_len: 0,
                overlong: false,
                session: None,
                counts: Counts {
                    frames: 0,
                    problems: 0,
                    bytes: 0,
                },
            },
        }
    }

    /// What was seen so far.
    pub fn counts(&self) -> Counts {
        self.st.counts
    }

    /// Feeds the next `bytes` of the stream; `on` gets every event they complete, in order.
    pub fn push(&mut self, bytes: &[u8], mut on: impl FnMut(Event)) {
        self.push_ref(bytes, |e| on(e.to_event()));
    }

    /// [`push`](Decoder::push) with each frame lent to `on` instead of moved: a stat record
    /// is a [`StatView`] of the decoded bytes (no copy of its names). The same events in the
    /// same order.
    pub fn push_ref(&mut self, bytes: &[u8], mut on: impl FnMut(EventRef<'_>)) {
        let mut rest = bytes;
        while let Some((&first, after)) = rest.split_first() {
            if self.st.frame_len == 0 {
                if first == 0 {
                    // Between two delimiters: the normal gap between frames.
                    self.st.counts.bytes += 1;
                    self.st.start = self.st.counts.bytes;
                    rest = after;
                    continue;
                }
                // A frame starts here: decoded in one pass if it ends in these bytes.
                if let Some((n, decoded)) =
                    cobs::decode_frame(rest, MAX_WIRE_LEN, &mut self.scratch)
                {
                    self.st.frame_len = n as u64;
                    self.st.counts.bytes += n as u64 + 1;
                    let opened = decoded
                        .map_err(cobs_error)
                        .and_then(|m| frame::check(&self.scratch[..m]));
                    self.st.handle(opened, &mut on);
                    self.st.frame_len = 0;
                    self.st.start = self.st.counts.bytes;
                    rest = &rest[n + 1..];
                    continue;
                }
            }
            match cobs::find_zero(rest) {
                Some(i) => {
                    self.take(&rest[..i]);
                    self.st.counts.bytes += i as u64 + 1;
                    self.end_frame(&mut on);
                    self.st.start = self.st.counts.bytes;
                    rest = &rest[i + 1..];
                }
                None => {
                    self.take(rest);
                    self.st.counts.bytes += rest.len() as u64;
                    rest = &[];
                }
            }
        }
    }

    /// Ends the stream: a frame still open is reported as torn.
    pub fn finish(&mut self, mut on: impl FnMut(Event)) {
        self.finish_ref(|e| on(e.to_event()));
    }

    /// [`finish`](Decoder::finish) for [`push_ref`](Decoder::push_ref)'s events.
    pub fn finish_ref(&mut self, mut on: impl FnMut(EventRef<'_>)) {
        if self.st.frame_len > 0 {
            let kind = if self.st.overlong {
                ProblemKind::OverLong
            } else {
                ProblemKind::Torn
            };
            self.st.problem(&mut on, kind);
        }
        self.reset_frame();
        self.st.start = self.st.counts.bytes;
    }

    /// Keeps `piece` of the current frame, or only counts it once the frame is over-long.
    fn take(&mut self, piece: &[u8]) {
        self.st.frame_len += piece.len() as u64;
        if self.st.overlong {
            return;
        }
        match self.buf.get_mut(self.len..self.len + piece.len()) {
            Some(dst) => {
                dst.copy_from_slice(piece);
                self.len += piece.len();
            }
            None => self.st.overlong = true,
        }
    }

    fn reset_frame(&mut self) {
        self.len = 0;
        self.st.frame_len = 0;
        self.st.overlong = false;
    }

    /// A delimiter after a frame gathered in `buf`: handle the bytes since the last one.
    fn end_frame(&mut self, on: &mut impl FnMut(EventRef<'_>)) {
        if self.st.frame_len == 0 {
            // Between two delimiters: the normal gap between frames.
            return;
        }
        if self.st.overlong {
            self.st.problem(on, ProblemKind::OverLong);
            self.reset_frame();
            return;
        }
        let opened = frame::open_from(&self.buf[..self.len], &mut self.scratch);
        self.st.handle(opened, on);
        self.reset_frame();
    }
}

fn cobs_error(e: cobs::CobsError) -> OpenError {
    match e {
        cobs::CobsError::Torn => OpenError::Torn,
        cobs::CobsError::Zero => OpenError::Corrupt,
    }
}

impl State {
    fn problem(&mut self, on: &mut impl FnMut(EventRef<'_>), kind: ProblemKind) {
        self.counts.problems += 1;
        on(EventRef::Problem(Problem {
            offset: self.start,
            len: self.frame_len,
            kind,
        }));
    }

    /// A frame opened (or not): its payload decoded, the sequence checked, then delivered.
    fn handle(
        &mut self,
        opened: Result<frame::RawFrame<'_>, OpenError>,
        on: &mut impl FnMut(EventRef<'_>),
    ) {
        // A session frame decoded here, lent to `on`.
        let session;
        let decoded = match opened {
            Ok(raw) => {
                let frame = match raw.kind {
                    Kind::Stat => StatView::decode(raw.payload).map(FrameRef::Stat),
                    k => match Frame::decode(k, raw.payload) {
                        Ok(f) => {
                            session = f;
                            Ok(FrameRef::Session(&session))
                        }
                        Err(e) => Err(e),
                    },
                };
                frame.map(|f| (raw.seq, f)).map_err(|e| match e {
                    crate::Error::Wire { reason } => ProblemKind::BadPayload(reason),
                    _ => ProblemKind::BadPayload("payload does not decode"),
                })
            }
            Err(OpenError::Torn) => Err(ProblemKind::Torn),
            Err(OpenError::Corrupt) => Err(ProblemKind::Corrupt),
            Err(OpenError::UnknownVersion(v)) => Err(ProblemKind::UnknownVersion(v)),
            Err(OpenError::UnknownKind(k)) => Err(ProblemKind::UnknownKind(k)),
            Err(OpenError::BadHeader) => Err(ProblemKind::BadPayload("bad sequence number")),
        };
        match decoded {
            Ok((seq, frame)) => self.sequence(on, seq, frame),
            Err(kind) => self.problem(on, kind),
        }
    }

    /// Sequence checks, then delivery.
    fn sequence(&mut self, on: &mut impl FnMut(EventRef<'_>), seq: u32, frame: FrameRef<'_>) {
        let hello = match &frame {
            FrameRef::Session(Frame::Hello(h)) => Some(h),
            _ => None,
        };
        let restart = match (hello, &self.session) {
            (Some(h), Some(s)) => {
                !(s.hello.as_ref() == Some(h) && was_delivered(s, seq).unwrap_or(false))
            }
            (_, None) => true,
            (None, Some(_)) => false,
        };
        if restart {
            self.session = Some(Session {
                newest: seq,
                seen: 1,
                hello: hello.cloned(),
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

    fn deliver(&mut self, on: &mut impl FnMut(EventRef<'_>), seq: u32, frame: FrameRef<'_>) {
        self.counts.frames += 1;
        on(EventRef::Frame {
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
