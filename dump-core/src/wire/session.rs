//! The payloads of session frames: what an agent says besides statistics.
//!
//! A session is `Hello`, then per graph `BeginGraph` and one `Kernel` per kernel in execution
//! order, then per dumped step `BeginStep`, one `Stat` per dumped tensor ([`StatRecord`]) and
//! `EndStep`. [`Frame`] is one decoded frame of any kind. `docs/wire.md` has the byte layout.

use super::{
    StatRecord,
    frame::{self, Kind},
    record::{OP_NAME_CAP, OP_TYPE_CAP, SAMPLE_CAP},
};
use crate::{DType, Error};
use serde::{Deserialize, Serialize};

/// Capacity of [`Hello::agent`] and [`Hello::device`] in bytes.
pub const NAME_CAP: usize = 32;

/// A set of dtypes: bit `i` stands for `DType::ALL[i]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DTypeSet(pub u32);

impl DTypeSet {
    /// The set of `dtypes`.
    pub fn of(dtypes: &[DType]) -> DTypeSet {
        DTypeSet(dtypes.iter().fold(0, |m, &d| m | 1 << d as u32))
    }

    /// Whether `d` is in the set.
    pub const fn contains(self, d: DType) -> bool {
        self.0 & (1 << d as u32) != 0
    }
}

/// First frame of a session: who is talking and what it can do.
///
/// The wire version the agent speaks is the version byte of this (and every) frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Hello {
    /// Session tag chosen by the agent (a boot counter, a clock reading or a random number):
    /// a host tells a restarted agent from a duplicated hello by it.
    pub session: u32,
    /// Agent name and version (`opdump-agent 0.1`), at most [`NAME_CAP`] bytes.
    pub agent: heapless::String<NAME_CAP>,
    /// Device description (`cortex-m4 mps2-an386`), at most [`NAME_CAP`] bytes.
    pub device: heapless::String<NAME_CAP>,
    /// The dtypes the agent can summarise.
    pub dtypes: DTypeSet,
    /// Whether the agent can send MD5 digests.
    pub md5: bool,
    /// Most sample bytes the agent sends per tensor (0: no samples).
    pub sample_cap: u16,
}

/// Start of a graph's description: its id and the number of `Kernel` frames that follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BeginGraph {
    /// Graph id (the `graph_id` of every later record of this graph).
    pub graph_id: u32,
    /// Number of kernels in the execution order.
    pub kernels: u32,
}

/// One kernel of a graph's execution order (MindSpore's `execution_order` files).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct KernelEntry {
    /// Graph id.
    pub graph_id: u32,
    /// Position in the execution order, from 0.
    pub index: u32,
    /// Op type, at most [`OP_TYPE_CAP`] bytes.
    pub op_type: heapless::String<OP_TYPE_CAP>,
    /// Op name, at most [`OP_NAME_CAP`] bytes.
    pub op: heapless::String<OP_NAME_CAP>,
}

/// Start of a dumped step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BeginStep {
    /// Graph id.
    pub graph_id: u32,
    /// Iteration.
    pub iteration: u32,
}

/// End of a dumped step: how many stat frames the agent sent in it and how many it could not
/// send, so the host can tell a complete step from one that lost records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EndStep {
    /// Graph id.
    pub graph_id: u32,
    /// Iteration.
    pub iteration: u32,
    /// Stat frames sent in this step.
    pub records: u32,
    /// Tensors the plan wanted but the agent could not send (sink error, name too long,
    /// unsupported dtype).
    pub dropped: u32,
}

/// One decoded frame of an agent's stream.
///
/// The stat variant is the largest (about 430 bytes); without an allocator it cannot be boxed,
/// and frames are handled one at a time, so the size is paid once.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Frame {
    /// [`Hello`].
    Hello(Hello),
    /// [`BeginGraph`].
    BeginGraph(BeginGraph),
    /// [`KernelEntry`].
    Kernel(KernelEntry),
    /// [`BeginStep`].
    BeginStep(BeginStep),
    /// A [`StatRecord`].
    Stat(StatRecord),
    /// [`EndStep`].
    EndStep(EndStep),
}

impl Frame {
    /// The frame's kind byte.
    pub fn kind(&self) -> Kind {
        match self {
            Frame::Hello(_) => Kind::Hello,
            Frame::BeginGraph(_) => Kind::BeginGraph,
            Frame::Kernel(_) => Kind::Kernel,
            Frame::BeginStep(_) => Kind::BeginStep,
            Frame::Stat(_) => Kind::Stat,
            Frame::EndStep(_) => Kind::EndStep,
        }
    }

    /// Builds the raw frame (header, payload, CRC; not yet COBS-encoded) with sequence
    /// number `seq` into `buf` and returns its length.
    pub fn build(&self, seq: u32, buf: &mut [u8; frame::MAX_FRAME_LEN]) -> Result<usize, Error> {
        match self {
            Frame::Hello(p) => frame::build(Kind::Hello, seq, p, buf),
            Frame::BeginGraph(p) => frame::build(Kind::BeginGraph, seq, p, buf),
            Frame::Kernel(p) => frame::build(Kind::Kernel, seq, p, buf),
            Frame::BeginStep(p) => frame::build(Kind::BeginStep, seq, p, buf),
            Frame::Stat(p) => frame::build(Kind::Stat, seq, p, buf),
            Frame::EndStep(p) => frame::build(Kind::EndStep, seq, p, buf),
        }
    }

    /// Decodes the payload of a frame of kind `kind` (an agent-to-host kind; `Plan` gives an
    /// error). The payload must hold exactly one value, nothing after it.
    pub fn decode(kind: Kind, payload: &[u8]) -> Result<Frame, Error> {
        Ok(match kind {
            Kind::Hello => Frame::Hello(exact(payload)?),
            Kind::BeginGraph => Frame::BeginGraph(exact(payload)?),
            Kind::Kernel => Frame::Kernel(exact(payload)?),
            Kind::BeginStep => Frame::BeginStep(exact(payload)?),
            Kind::Stat => Frame::Stat(exact(payload)?),
            Kind::EndStep => Frame::EndStep(exact(payload)?),
            Kind::Plan => {
                return Err(Error::Wire {
                    reason: "a plan frame goes from the host to the agent, not in an agent stream",
                });
            }
        })
    }
}

/// Postcard-decodes exactly one `T` from `payload`.
pub(crate) fn exact<'a, T: Deserialize<'a>>(payload: &'a [u8]) -> Result<T, Error> {
    let (v, rest) = postcard::take_from_bytes(payload).map_err(super::record::wire_error)?;
    if rest.is_empty() {
        Ok(v)
    } else {
        Err(Error::Wire {
            reason: super::record::TRAILING_PAYLOAD,
        })
    }
}

/// Bounds of the non-stat payloads (postcard sizes, see `MAX_ENCODED_LEN`); each must fit in
/// the one frame buffer, sized for the stat record. Checked at compile time below.
const HELLO_MAX: usize = 5 + 2 * (1 + NAME_CAP) + 5 + 1 + 3;
const KERNEL_MAX: usize = 5 + 5 + 1 + OP_TYPE_CAP + 2 + OP_NAME_CAP;
const END_STEP_MAX: usize = 4 * 5;
const _: () = assert!(HELLO_MAX <= frame::MAX_PAYLOAD_LEN);
const _: () = assert!(KERNEL_MAX <= frame::MAX_PAYLOAD_LEN);
const _: () = assert!(END_STEP_MAX <= frame::MAX_PAYLOAD_LEN);
const _: () = assert!(SAMPLE_CAP <= u16::MAX as usize);
