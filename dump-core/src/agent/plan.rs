//! [`Plan`]: which steps, kernels and tensors an agent summarises, compiled in or sent by the
//! host in a plan frame.
//!
//! The filters follow the host's `data_dump.json` rules, minus what a microcontroller cannot
//! afford: `iterations` is MindSpore's grammar ([`IterationSpec`]); a `kernels` entry that
//! holds `/` or `-op` is an exact, case-sensitive op name, any other entry an op type that
//! matches when it is an ASCII case-insensitive substring of the kernel's op type or of the
//! type part of its name (between the last `/` and the last `-`), as on the host. There are no
//! `name-regex(...)` entries on a device. An empty list selects every kernel.

use crate::{
    Error,
    iteration::IterationSpec,
    wire::{
        Io, Kind, MAX_FRAME_LEN, SAMPLE_CAP,
        frame::{self, build},
        session::exact,
    },
};
use serde::{Deserialize, Serialize};

/// Most `kernels` entries a plan holds.
pub const PLAN_KERNELS: usize = 8;

/// Which side of a kernel is summarised (`input_output` of `data_dump.json`: 0 both, 1 inputs,
/// 2 outputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IoFilter {
    /// Inputs and outputs.
    Both,
    /// Inputs only.
    Input,
    /// Outputs only.
    Output,
}

/// One `kernels` entry, classified once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry<'a> {
    text: &'a str,
    full_name: bool,
}

/// What the agent dumps; see the module documentation. Borrows its strings (from the firmware's
/// constants, or from the buffer a plan frame arrived in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan<'a> {
    iterations: IterationSpec<'a>,
    kernels: heapless::Vec<Entry<'a>, PLAN_KERNELS>,
    io: IoFilter,
    md5: bool,
    sample: u16,
}

/// The plan as it travels in a plan frame (field order = wire order).
#[derive(Serialize, Deserialize)]
struct PlanWire<'a> {
    #[serde(borrow)]
    iterations: &'a str,
    #[serde(borrow)]
    kernels: heapless::Vec<&'a str, PLAN_KERNELS>,
    io: IoFilter,
    md5: bool,
    sample: u16,
}

impl Plan<'static> {
    /// Every step, every kernel, inputs and outputs, no MD5, no sample.
    pub const fn all() -> Plan<'static> {
        Plan {
            iterations: IterationSpec::ALL,
            kernels: heapless::Vec::new(),
            io: IoFilter::Both,
            md5: false,
            sample: 0,
        }
    }
}

impl<'a> Plan<'a> {
    /// A plan for the steps `iterations` (MindSpore's grammar, `"all"` for every step) and the
    /// kernels `kernels` (empty: all), inputs and outputs, no MD5, no sample. Errors on a bad
    /// iteration string, more than [`PLAN_KERNELS`] entries, or an empty entry.
    pub fn new(iterations: &'a str, kernels: &[&'a str]) -> Result<Plan<'a>, Error> {
        let iterations = IterationSpec::parse(iterations)?;
        let mut list = heapless::Vec::new();
        for &text in kernels {
            if text.is_empty() {
                return Err(Error::Wire {
                    reason: "a plan's kernels entry is empty",
                });
            }
            let full_name = text.contains('/') || text.contains("-op");
            list.push(Entry { text, full_name })
                .map_err(|_| Error::Wire {
                    reason: "a plan holds at most PLAN_KERNELS (8) kernels entries",
                })?;
        }
        Ok(Plan {
            iterations,
            kernels: list,
            io: IoFilter::Both,
            md5: false,
            sample: 0,
        })
    }

    /// The same plan, summarising only `io`.
    pub fn with_io(mut self, io: IoFilter) -> Plan<'a> {
        self.io = io;
        self
    }

    /// The same plan, with (or without) the MD5 of every tensor.
    pub fn with_md5(mut self, md5: bool) -> Plan<'a> {
        self.md5 = md5;
        self
    }

    /// The same plan, sending the first `bytes` bytes of every tensor (at most
    /// [`SAMPLE_CAP`], rounded down to whole elements).
    pub fn with_sample(mut self, bytes: u16) -> Plan<'a> {
        self.sample = bytes.min(SAMPLE_CAP as u16);
        self
    }

    /// Whether MD5s are sent.
    pub fn md5(&self) -> bool {
        self.md5
    }

    /// Sample bytes per tensor (0: none).
    pub fn sample(&self) -> u16 {
        self.sample
    }

    /// Whether step `iteration` is dumped.
    pub fn wants_step(&self, iteration: u32) -> bool {
        self.iterations.matches(iteration)
    }

    /// Whether the kernel `op_name` of type `op_type` is dumped: a few string compares.
    #[inline]
    pub fn wants_kernel(&self, op_type: &str, op_name: &str) -> bool {
        if self.kernels.is_empty() {
            return true;
        }
        self.kernels.iter().any(|e| {
            if e.full_name {
                e.text == op_name
            } else {
                contains_ignore_case(op_type, e.text)
                    || contains_ignore_case(type_part(op_name), e.text)
            }
        })
    }

    /// Whether tensors on side `io` are dumped.
    #[inline]
    pub fn wants_io(&self, io: Io) -> bool {
        matches!(
            (self.io, io),
            (IoFilter::Both, _) | (IoFilter::Input, Io::Input) | (IoFilter::Output, Io::Output)
        )
    }

    /// Host side: builds the raw plan frame (sequence number `seq`) into `buf`; send it with
    /// [`frame::write_wire`]. Errors if the plan does not fit one frame.
    pub fn build_frame(&self, seq: u32, buf: &mut [u8; MAX_FRAME_LEN]) -> Result<usize, Error> {
        let mut kernels = heapless::Vec::new();
        for e in &self.kernels {
            // Cannot fail: both vectors hold PLAN_KERNELS.
            let _ = kernels.push(e.text);
        }
        let wire = PlanWire {
            iterations: self.iterations.as_str(),
            kernels,
            io: self.io,
            md5: self.md5,
            sample: self.sample,
        };
        build(Kind::Plan, seq, &wire, buf)
    }

    /// Agent side: the plan in a plan frame's payload (borrowing it).
    pub fn from_payload(payload: &'a [u8]) -> Result<Plan<'a>, Error> {
        let w: PlanWire<'a> = exact(payload)?;
        Ok(Plan::new(w.iterations, &w.kernels)?
            .with_io(w.io)
            .with_md5(w.md5)
            .with_sample(w.sample))
    }

    /// Agent side: the plan in one received frame, `encoded` being the bytes between two
    /// `0x00` delimiters (COBS-decoded in place, CRC and kind checked).
    pub fn from_wire(encoded: &'a mut [u8]) -> Result<Plan<'a>, Error> {
        let raw = frame::open(encoded).map_err(|_| Error::Wire {
            reason: "plan frame is torn, corrupt or of an unknown version",
        })?;
        if raw.kind != Kind::Plan {
            return Err(Error::Wire {
                reason: "not a plan frame",
            });
        }
        Plan::from_payload(raw.payload)
    }
}

/// The op-type part of a full name: after the last `/`, up to the last `-` after it.
fn type_part(name: &str) -> &str {
    let tail = match name.rfind('/') {
        Some(i) => &name[i + 1..],
        None => name,
    };
    match tail.rfind('-') {
        Some(i) => &tail[..i],
        None => tail,
    }
}

/// Whether `needle` is an ASCII case-insensitive substring of `hay`.
fn contains_ignore_case(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    n.len() <= h.len() && h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_like_the_host() {
        let p = Plan::new("0|2-3", &["conv", "Default/net/fc2-Dense/MatMul-op4"]).unwrap();
        assert!(p.wants_step(0) && !p.wants_step(1) && p.wants_step(3) && !p.wants_step(4));
        assert!(p.wants_kernel("Conv2D", "whatever"));
        assert!(p.wants_kernel("X", "Default/net/conv1-Conv2d/Conv2D-op0"));
        assert!(p.wants_kernel("MatMul", "Default/net/fc2-Dense/MatMul-op4"));
        assert!(!p.wants_kernel("MatMul", "Default/net/fc1-Dense/MatMul-op2"));
        assert!(!p.wants_kernel("ReLU", "Default/net/ReLU-op1"));
        assert!(Plan::all().wants_kernel("", "") && Plan::all().wants_step(u32::MAX));
        let out = Plan::all().with_io(IoFilter::Output);
        assert!(out.wants_io(Io::Output) && !out.wants_io(Io::Input));
        assert!(Plan::new("x", &[]).is_err());
        assert!(Plan::new("all", &[""]).is_err());
        assert!(Plan::new("all", &["a"; PLAN_KERNELS + 1]).is_err());
        assert_eq!(Plan::all().with_sample(1000).sample(), SAMPLE_CAP as u16);
    }

    #[test]
    fn plan_frame_round_trips() {
        let p = Plan::new("1-5", &["relu", "Default/a-op1"])
            .unwrap()
            .with_io(IoFilter::Input)
            .with_md5(true)
            .with_sample(16);
        let mut raw = [0u8; MAX_FRAME_LEN];
        let n = p.build_frame(9, &mut raw).unwrap();
        let mut wire = [0u8; crate::wire::MAX_WIRE_LEN];
        let w = frame::encode_wire(&raw[..n], &mut wire).unwrap();
        let back = Plan::from_wire(&mut wire[1..w - 1]).unwrap();
        assert_eq!(back, p);
        let long = "k".repeat(120);
        let too_big = Plan::new("all", &[long.as_str(); 4]).unwrap();
        assert!(too_big.build_frame(0, &mut raw).is_err());
        let hello = crate::wire::Frame::BeginStep(crate::wire::BeginStep {
            graph_id: 0,
            iteration: 0,
        });
        let n = hello.build(0, &mut raw).unwrap();
        let mut other = [0u8; crate::wire::MAX_WIRE_LEN];
        let w = frame::encode_wire(&raw[..n], &mut other).unwrap();
        assert!(Plan::from_wire(&mut other[1..w - 1]).is_err());
    }
}
