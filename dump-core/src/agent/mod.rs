//! The device agent (feature `serde`): summarises a network's tensors where they are and
//! streams one stat frame per tensor to the host (`docs/wire.md`).
//!
//! `no_std`, no allocation, one fixed frame buffer of [`MAX_FRAME_LEN`] bytes inside the
//! [`Agent`]; the caller supplies the byte [`Sink`] (a UART, a semihosting file, a socket).
//! Frames are COBS-encoded straight into the sink, block by block, without a second buffer.
//! The [`Plan`] decides what is dumped, as the host's config does: in a step the plan does not
//! want, [`Agent::kernel`] returns `None` after one flag test; for an unwanted kernel after a
//! few string compares, or after a bit test with [`Agent::kernel_at`] (the decision per kernel
//! of the execution order is taken once, in [`Agent::begin_graph`]); no tensor byte is read.
//!
//! ```
//! use dump_core::DType;
//! use dump_core::agent::{Agent, Plan, Sink};
//! use dump_core::wire::{Decoder, Event, Frame};
//!
//! struct Buf(Vec<u8>);
//! impl Sink for Buf {
//!     type Error = core::convert::Infallible;
//!     fn write(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
//!         self.0.extend_from_slice(bytes);
//!         Ok(())
//!     }
//! }
//!
//! let plan = Plan::new("0", &[])?.with_md5(true);
//! let mut agent = Agent::new(Buf(Vec::new()), plan);
//! agent.hello(1, "doc-agent", "host")?;
//! agent.begin_graph(0, &[("ReLU", "Default/ReLU-op0")])?;
//! for step in 0..2 {
//!     agent.begin_step(step)?;
//!     if let Some(mut k) = agent.kernel("ReLU", "Default/ReLU-op0") {
//!         let x = [1.0f32, -2.0, 3.0];
//!         let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
//!         k.output(0, DType::Float32, &[3], &bytes)?;
//!     }
//!     agent.end_step()?;
//! }
//! let stream = agent.into_sink().0;
//!
//! let mut stats = Vec::new();
//! Decoder::new().push(&stream, |e| {
//!     if let Event::Frame { frame: Frame::Stat(r), .. } = e {
//!         stats.push(r);
//!     }
//! });
//! assert_eq!(stats.len(), 1, "step 1 is not in the plan");
//! assert_eq!((stats[0].iteration, stats[0].summary.count, stats[0].summary.neg), (0, 3, 1));
//! # Ok::<(), dump_core::agent::AgentError<core::convert::Infallible>>(())
//! ```

mod plan;

pub use plan::{IoFilter, PLAN_KERNELS, Plan};

use crate::{
    DType, Error,
    hash::Md5Stream,
    stats::summarize_hashed,
    wire::{
        BeginGraph, BeginStep, DTypeSet, EndStep, Hello, Io, KernelEntry, Kind, MAX_FRAME_LEN,
        SAMPLE_CAP, StatRecord, frame,
    },
};
use serde::Serialize;

/// Where the agent's bytes go: a UART, a semihosting file, a socket.
pub trait Sink {
    /// The sink's error.
    type Error;
    /// Writes all of `bytes` (frames arrive in several pieces; the sink may buffer them).
    fn write(&mut self, bytes: &[u8]) -> Result<(), Self::Error>;
}

impl<S: Sink + ?Sized> Sink for &mut S {
    type Error = S::Error;
    fn write(&mut self, bytes: &[u8]) -> Result<(), S::Error> {
        (**self).write(bytes)
    }
}

/// Why an agent call did not send its frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentError<E> {
    /// The sink failed (the frame's sequence number is spent, so the host sees a gap).
    Sink(E),
    /// The tensor or a name could not be made into a frame (too long a name, too high a rank,
    /// a dtype without statistics, data that is not the storage of the shape).
    Record(Error),
}

impl<E> From<Error> for AgentError<E> {
    fn from(e: Error) -> Self {
        AgentError::Record(e)
    }
}

impl<E: core::fmt::Debug> core::fmt::Display for AgentError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AgentError::Sink(e) => write!(f, "agent sink failed: {e:?}"),
            AgentError::Record(e) => write!(f, "agent record: {e}"),
        }
    }
}

/// What happened to one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// Its stat frame went to the sink.
    Frame,
    /// The plan does not want this side (inputs or outputs): nothing was read.
    Filtered,
    /// An empty tensor: it has no statistics, and MindSpore writes no row for it.
    Empty,
}

/// The dtypes an agent summarises: every real dtype (complex ones have no statistics).
pub const AGENT_DTYPES: [DType; 20] = [
    DType::Bool,
    DType::Int4,
    DType::Int8,
    DType::Int16,
    DType::Int32,
    DType::Int64,
    DType::UInt1,
    DType::UInt8,
    DType::UInt16,
    DType::UInt32,
    DType::UInt64,
    DType::Float16,
    DType::BFloat16,
    DType::Float32,
    DType::Float64,
    DType::Float8E4M3FN,
    DType::Float8E5M2,
    DType::UInt4,
    DType::Float8E4M3FNUZ,
    DType::Float8E5M2FNUZ,
];

/// Kernels of a graph whose plan decision [`Agent::begin_graph`] takes once, by position in
/// the execution order, for [`Agent::kernel_at`].
pub const INDEXED_KERNELS: usize = 256;

/// The state of the current step.
#[derive(Clone, Copy, Debug)]
struct Step {
    iteration: u32,
    active: bool,
    records: u32,
    dropped: u32,
}

/// A device agent writing frames to `S`; see the module documentation.
pub struct Agent<'p, S: Sink> {
    sink: S,
    plan: Plan<'p>,
    seq: u32,
    graph_id: u32,
    step: Option<Step>,
    /// Bit `i`: the plan wants kernel `i` of the current graph (valid below `indexed`).
    wanted: [u32; INDEXED_KERNELS / 32],
    indexed: usize,
    frame: [u8; MAX_FRAME_LEN],
}

impl<S: Sink> core::fmt::Debug for Agent<'_, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Agent")
            .field("plan", &self.plan)
            .field("seq", &self.seq)
            .field("graph_id", &self.graph_id)
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

impl<'p, S: Sink> Agent<'p, S> {
    /// An agent that writes to `sink` and dumps what `plan` asks for.
    pub fn new(sink: S, plan: Plan<'p>) -> Agent<'p, S> {
        Agent {
            sink,
            plan,
            seq: 0,
            graph_id: 0,
            step: None,
            wanted: [0; INDEXED_KERNELS / 32],
            indexed: 0,
            frame: [0; MAX_FRAME_LEN],
        }
    }

    /// Replaces the plan (for example with one the host sent, see [`Plan::from_wire`]); takes
    /// effect at the next [`begin_step`](Agent::begin_step). [`kernel_at`](Agent::kernel_at)
    /// falls back to comparing names until the next [`begin_graph`](Agent::begin_graph).
    pub fn set_plan(&mut self, plan: Plan<'p>) {
        self.plan = plan;
        self.indexed = 0;
    }

    /// The plan.
    pub fn plan(&self) -> &Plan<'p> {
        &self.plan
    }

    /// The sink.
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// Gives the sink back.
    pub fn into_sink(self) -> S {
        self.sink
    }

    /// Builds and sends one frame; the sequence number is spent even if the sink fails.
    fn send<T: Serialize + ?Sized>(
        &mut self,
        kind: Kind,
        payload: &T,
    ) -> Result<(), AgentError<S::Error>> {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let n = frame::build(kind, seq, payload, &mut self.frame)?;
        let sink = &mut self.sink;
        frame::write_wire(&self.frame[..n], |b| sink.write(b)).map_err(AgentError::Sink)
    }

    /// Starts a session: sequence numbers restart at 0 and a hello frame is sent. `session`
    /// tells this boot from others (a boot counter or a random number); `agent` and `device`
    /// are at most [`crate::wire::NAME_CAP`] bytes.
    pub fn hello(
        &mut self,
        session: u32,
        agent: &str,
        device: &str,
    ) -> Result<(), AgentError<S::Error>> {
        let name = |s: &str| {
            heapless::String::try_from(s).map_err(|_| Error::Wire {
                reason: "agent or device name is longer than NAME_CAP (32) bytes",
            })
        };
        let hello = Hello {
            session,
            agent: name(agent)?,
            device: name(device)?,
            dtypes: DTypeSet::of(&AGENT_DTYPES),
            md5: true,
            sample_cap: SAMPLE_CAP as u16,
        };
        self.seq = 0;
        self.send(Kind::Hello, &hello)
    }

    /// Describes graph `graph_id`: a begin-graph frame, then one kernel frame per
    /// `(op_type, op_name)` in execution order. Later steps belong to this graph.
    pub fn begin_graph(
        &mut self,
        graph_id: u32,
        kernels: &[(&str, &str)],
    ) -> Result<(), AgentError<S::Error>> {
        self.graph_id = graph_id;
        self.wanted = [0; INDEXED_KERNELS / 32];
        self.indexed = kernels.len().min(INDEXED_KERNELS);
        for (i, &(op_type, op)) in kernels.iter().take(INDEXED_KERNELS).enumerate() {
            if self.plan.wants_kernel(op_type, op) {
                self.wanted[i / 32] |= 1 << (i % 32);
            }
        }
        let count = u32::try_from(kernels.len()).map_err(|_| Error::Overflow)?;
        self.send(
            Kind::BeginGraph,
            &BeginGraph {
                graph_id,
                kernels: count,
            },
        )?;
        for (index, &(op_type, op)) in (0u32..).zip(kernels) {
            let entry = KernelEntry {
                graph_id,
                index,
                op_type: heapless::String::try_from(op_type).map_err(|_| Error::Wire {
                    reason: "op type is longer than OP_TYPE_CAP (32) bytes",
                })?,
                op: heapless::String::try_from(op).map_err(|_| Error::Wire {
                    reason: "op name is longer than OP_NAME_CAP (128) bytes",
                })?,
            };
            self.send(Kind::Kernel, &entry)?;
        }
        Ok(())
    }

    /// Starts step `iteration` of the current graph. Returns whether the plan dumps it; if so
    /// a begin-step frame is sent. A step left open is ended first.
    pub fn begin_step(&mut self, iteration: u32) -> Result<bool, AgentError<S::Error>> {
        if self.step.is_some() {
            self.end_step()?;
        }
        let active = self.plan.wants_step(iteration);
        self.step = Some(Step {
            iteration,
            active,
            records: 0,
            dropped: 0,
        });
        if active {
            let graph_id = self.graph_id;
            self.send(
                Kind::BeginStep,
                &BeginStep {
                    graph_id,
                    iteration,
                },
            )?;
        }
        Ok(active)
    }

    /// The kernel `op_name` of type `op_type` ran: `Some` if the current step and the plan
    /// want it, then give it its tensors. `None` costs a flag test and a few compares.
    #[inline]
    pub fn kernel<'k>(
        &'k mut self,
        op_type: &'k str,
        op_name: &'k str,
    ) -> Option<Kernel<'k, 'p, S>> {
        match self.step {
            Some(Step { active: true, .. }) if self.plan.wants_kernel(op_type, op_name) => {
                Some(Kernel {
                    agent: self,
                    op_type,
                    op_name,
                })
            }
            _ => None,
        }
    }

    /// [`kernel`](Agent::kernel) for the kernel at `index` of the execution order given to
    /// [`begin_graph`](Agent::begin_graph) (named `op_type`, `op_name` there): the plan's
    /// decision was taken then, so an unwanted kernel costs a bit test. Beyond
    /// [`INDEXED_KERNELS`], or after [`set_plan`](Agent::set_plan), the names are compared.
    #[inline]
    pub fn kernel_at<'k>(
        &'k mut self,
        index: usize,
        op_type: &'k str,
        op_name: &'k str,
    ) -> Option<Kernel<'k, 'p, S>> {
        if !matches!(self.step, Some(Step { active: true, .. })) {
            return None;
        }
        let wanted = if index < self.indexed {
            self.wanted[index / 32] >> (index % 32) & 1 == 1
        } else {
            self.plan.wants_kernel(op_type, op_name)
        };
        wanted.then_some(Kernel {
            agent: self,
            op_type,
            op_name,
        })
    }

    /// Ends the current step: an end-step frame with the counts of sent and dropped records,
    /// if the step was dumped. Returns those counts (`None` without a dumped step).
    pub fn end_step(&mut self) -> Result<Option<EndStep>, AgentError<S::Error>> {
        let Some(step) = self.step.take() else {
            return Ok(None);
        };
        if !step.active {
            return Ok(None);
        }
        let end = EndStep {
            graph_id: self.graph_id,
            iteration: step.iteration,
            records: step.records,
            dropped: step.dropped,
        };
        self.send(Kind::EndStep, &end)?;
        Ok(Some(end))
    }

    /// Summarises one tensor and sends its stat frame.
    fn tensor(
        &mut self,
        op: (&str, &str),
        io: Io,
        slot: u32,
        dtype: DType,
        shape: &[u32],
        data: &[u8],
    ) -> Result<Sent, AgentError<S::Error>> {
        if !self.plan.wants_io(io) {
            return Ok(Sent::Filtered);
        }
        let result = self.summarize_and_send(op, io, slot, dtype, shape, data);
        if let Some(step) = self.step.as_mut() {
            match result {
                Ok(Sent::Frame) => step.records = step.records.wrapping_add(1),
                Err(_) => step.dropped = step.dropped.wrapping_add(1),
                Ok(_) => {}
            }
        }
        result
    }

    fn summarize_and_send(
        &mut self,
        (op_type, op_name): (&str, &str),
        io: Io,
        slot: u32,
        dtype: DType,
        shape: &[u32],
        data: &[u8],
    ) -> Result<Sent, AgentError<S::Error>> {
        let elems = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d as usize))
            .ok_or(Error::Overflow)?;
        let mut md5 = self.plan.md5().then(Md5Stream::new);
        let Some(summary) = summarize_hashed(dtype, data, elems, md5.as_mut(), None)? else {
            return Ok(Sent::Empty);
        };
        let step = self.step.map_or(0, |s| s.iteration);
        let mut rec =
            StatRecord::new(op_name, io, slot, dtype, shape, summary)?.with_op_type(op_type)?;
        rec.graph_id = self.graph_id;
        rec.iteration = step;
        rec.md5 = md5.map(Md5Stream::finish);
        let want = usize::from(self.plan.sample());
        if want > 0 {
            let unit = (dtype.bits() as usize).div_ceil(8);
            let n = want.min(data.len()) / unit * unit;
            rec.sample = heapless::Vec::from_slice(data.get(..n).unwrap_or(&[])).ok();
        }
        self.send(Kind::Stat, &rec)?;
        Ok(Sent::Frame)
    }
}

/// A kernel the plan wants in the current step; see [`Agent::kernel`].
pub struct Kernel<'k, 'p, S: Sink> {
    agent: &'k mut Agent<'p, S>,
    op_type: &'k str,
    op_name: &'k str,
}

impl<S: Sink> core::fmt::Debug for Kernel<'_, '_, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Kernel")
            .field("op_type", &self.op_type)
            .field("op_name", &self.op_name)
            .finish_non_exhaustive()
    }
}

impl<S: Sink> Kernel<'_, '_, S> {
    /// Input `slot`: `data` is the little-endian storage of `shape` elements of `dtype`.
    pub fn input(
        &mut self,
        slot: u32,
        dtype: DType,
        shape: &[u32],
        data: &[u8],
    ) -> Result<Sent, AgentError<S::Error>> {
        self.agent.tensor(
            (self.op_type, self.op_name),
            Io::Input,
            slot,
            dtype,
            shape,
            data,
        )
    }

    /// Output `slot`; see [`input`](Kernel::input).
    pub fn output(
        &mut self,
        slot: u32,
        dtype: DType,
        shape: &[u32],
        data: &[u8],
    ) -> Result<Sent, AgentError<S::Error>> {
        self.agent.tensor(
            (self.op_type, self.op_name),
            Io::Output,
            slot,
            dtype,
            shape,
            data,
        )
    }
}

#[cfg(test)]
mod tests;
