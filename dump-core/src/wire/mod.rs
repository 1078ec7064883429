//! The wire format of device agents (feature `serde`): frames an agent streams over a UART, a
//! semihosting file or a socket, and the host's decoder. The normative description, with the
//! byte layout and the rules a host follows, is `docs/wire.md`.
//!
//! - [`record`]: [`StatRecord`], the statistics of one tensor (postcard);
//! - [`session`]: the other frames' payloads ([`Hello`], [`BeginGraph`], [`KernelEntry`],
//!   [`BeginStep`], [`EndStep`]) and [`Frame`], any one of them;
//! - [`frame`]: `version | kind | seq | payload | crc32`, COBS-encoded between two zeros, with
//!   size bounds known at compile time ([`MAX_FRAME_LEN`], [`MAX_WIRE_LEN`]);
//! - [`crc`] and [`cobs`]: the CRC-32 and the byte stuffing, written here, `no_std`;
//! - [`view`]: [`StatView`], a stat record decoded by hand where it lies (the host's hot
//!   path; it accepts exactly what postcard accepts);
//! - [`decode`]: [`Decoder`], which resynchronises on the delimiter and reports torn, corrupt,
//!   over-long, duplicated and reordered frames with their offsets.
//!
//! Nothing here allocates; the agent that sends these frames is [`crate::agent`].
//!
//! ```
//! use dump_core::wire::{BeginStep, Decoder, Event, Frame, MAX_FRAME_LEN, MAX_WIRE_LEN, frame};
//!
//! let mut raw = [0u8; MAX_FRAME_LEN];
//! let step = Frame::BeginStep(BeginStep { graph_id: 0, iteration: 7 });
//! let n = step.build(0, &mut raw)?;
//! let mut wire = [0u8; MAX_WIRE_LEN];
//! let w = frame::encode_wire(&raw[..n], &mut wire).expect("MAX_WIRE_LEN suffices");
//!
//! let mut decoder = Decoder::new();
//! let mut got = Vec::new();
//! decoder.push(&wire[..w], |e| got.push(e));
//! assert_eq!(got, [Event::Frame { offset: 1, seq: 0, frame: step }]);
//! # Ok::<(), dump_core::Error>(())
//! ```

pub mod cobs;
/// CRC-32 of every frame: [`crate::hash::crc32`].
pub use crate::hash::crc32 as crc;
pub mod decode;
pub mod frame;
pub mod record;
pub mod session;
pub mod view;

pub use decode::{Decoder, Event, EventRef, FrameRef, Problem, ProblemKind};
pub use frame::{Kind, MAX_FRAME_LEN, MAX_WIRE_LEN, WIRE_VERSION};
pub use record::{
    Io, MAX_COBS_LEN, MAX_ENCODED_LEN, MAX_RANK, OP_NAME_CAP, OP_TYPE_CAP, SAMPLE_CAP, StatRecord,
};
pub use session::{BeginGraph, BeginStep, DTypeSet, EndStep, Frame, Hello, KernelEntry, NAME_CAP};
pub use view::StatView;

#[cfg(test)]
mod tests;
