//! The agent against the host decoder.

use super::*;
use crate::wire::{Decoder, Event, Frame, ProblemKind};
use std::vec::Vec;

/// A sink that keeps everything, or fails the `fail_at`-th write.
#[derive(Default)]
struct Buf {
    bytes: Vec<u8>,
    writes: usize,
    fail_at: Option<usize>,
}

impl Sink for Buf {
    type Error = &'static str;
    fn write(&mut self, bytes: &[u8]) -> Result<(), &'static str> {
        self.writes += 1;
        if self.fail_at == Some(self.writes) {
            return Err("link down");
        }
        self.bytes.extend_from_slice(bytes);
        Ok(())
    }
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode(bytes: &[u8]) -> (Vec<Frame>, Vec<ProblemKind>) {
    let (mut frames, mut problems) = (Vec::new(), Vec::new());
    let mut d = Decoder::new();
    d.push(bytes, |e| match e {
        Event::Frame { frame, .. } => frames.push(frame),
        Event::Problem(p) => problems.push(p.kind),
    });
    d.finish(|e| panic!("stream ends inside a frame: {e:?}"));
    (frames, problems)
}

const K: [(&str, &str); 3] = [
    ("Conv2D", "Default/net/conv1-Conv2d/Conv2D-op0"),
    ("ReLU", "Default/net/ReLU-op1"),
    ("MatMul", "Default/net/fc-Dense/MatMul-op2"),
];

/// Runs steps 0..steps of a three-kernel graph through `agent`.
fn run<S: Sink>(agent: &mut Agent<'_, S>, steps: u32) -> Vec<Option<EndStep>>
where
    S::Error: core::fmt::Debug,
{
    agent.hello(3, "test-agent 0.1", "host").unwrap();
    agent.begin_graph(0, &K).unwrap();
    let x = f32s(&[1.0, -2.0, 0.0, 4.0]);
    let mut ends = Vec::new();
    for step in 0..steps {
        agent.begin_step(step).unwrap();
        for (t, n) in K {
            if let Some(mut k) = agent.kernel(t, n) {
                k.input(0, DType::Float32, &[2, 2], &x).unwrap();
                k.output(0, DType::Float32, &[4], &x).unwrap();
            }
        }
        ends.push(agent.end_step().unwrap());
    }
    ends
}

#[test]
fn a_session_decodes_into_complete_records() {
    let plan = Plan::new("all", &[]).unwrap().with_md5(true).with_sample(6);
    let mut agent = Agent::new(Buf::default(), plan);
    let ends = run(&mut agent, 2);
    assert_eq!(ends[1].map(|e| (e.records, e.dropped)), Some((6, 0)));
    let (frames, problems) = decode(&agent.into_sink().bytes);
    assert!(problems.is_empty(), "{problems:?}");
    // hello, begin-graph, 3 kernels, then per step: begin, 6 stats, end.
    assert_eq!(frames.len(), 5 + 2 * 8);
    let Frame::Hello(h) = &frames[0] else {
        panic!("{:?}", frames[0])
    };
    assert_eq!(
        (h.session, h.agent.as_str(), h.md5),
        (3, "test-agent 0.1", true)
    );
    assert!(h.dtypes.contains(DType::BFloat16) && !h.dtypes.contains(DType::Complex64));
    assert!(h.dtypes.contains(DType::Float8E5M2) && h.dtypes.contains(DType::UInt4));
    assert!(h.dtypes.contains(DType::Float8E4M3FNUZ) && h.dtypes.contains(DType::Float8E5M2FNUZ));
    assert_eq!(h.dtypes.0, (1 << 22) - 1 - (1 << 15) - (1 << 16));
    assert_eq!(
        frames[1],
        Frame::BeginGraph(crate::wire::BeginGraph {
            graph_id: 0,
            kernels: 3
        })
    );
    let Frame::Kernel(k) = &frames[4] else {
        panic!()
    };
    assert_eq!(
        (k.index, k.op_type.as_str(), k.op.as_str()),
        (2, K[2].0, K[2].1)
    );
    let Frame::Stat(r) = &frames[5 + 8 + 4] else {
        panic!("{:?}", frames[17])
    };
    let x = f32s(&[1.0, -2.0, 0.0, 4.0]);
    assert_eq!(
        (r.graph_id, r.iteration, r.op_type.as_str()),
        (0, 1, "ReLU")
    );
    assert_eq!((r.op.as_str(), r.io, r.slot), (K[1].1, Io::Output, 0));
    assert_eq!((r.dtype, &r.shape[..]), (DType::Float32, &[4u32][..]));
    assert_eq!(r.md5, Some(crate::hash::md5(&x)));
    assert_eq!(
        r.sample.as_deref(),
        Some(&x[..4]),
        "6 bytes round down to one f32"
    );
    let s = r.summary;
    assert_eq!(
        (s.count, s.max, s.min, s.sum, s.neg, s.zero, s.pos),
        (4, 4.0, -2.0, 3.0, 1, 1, 2)
    );
    assert_eq!(frames[20], Frame::EndStep(ends[1].unwrap()));
}

#[test]
fn the_plan_filters_steps_kernels_and_sides_without_reading_tensors() {
    let plan = Plan::new("1", &["relu", "Default/net/fc-Dense/MatMul-op2"])
        .unwrap()
        .with_io(IoFilter::Output);
    let mut agent = Agent::new(Buf::default(), plan);
    let ends = run(&mut agent, 3);
    assert_eq!(ends[0], None, "step 0 is not dumped");
    assert_eq!(ends[1].map(|e| e.records), Some(2));
    // In an unwanted step no kernel is wanted, and reading is never attempted.
    agent.begin_step(7).unwrap();
    assert!(agent.kernel("ReLU", K[1].1).is_none());
    agent.begin_step(1).unwrap();
    assert!(agent.kernel("Conv2D", K[0].1).is_none());
    let mut k = agent.kernel("ReLU", K[1].1).unwrap();
    // Not even the length is checked for an unwanted side.
    assert_eq!(k.input(0, DType::Float32, &[9], &[]), Ok(Sent::Filtered));
    agent.end_step().unwrap();
    let (frames, _) = decode(&agent.into_sink().bytes);
    let stats: Vec<_> = frames
        .iter()
        .filter_map(|f| match f {
            Frame::Stat(r) => Some((r.iteration, r.op_type.as_str(), r.io)),
            _ => None,
        })
        .collect();
    assert_eq!(stats, [(1, "ReLU", Io::Output), (1, "MatMul", Io::Output)]);
}

#[test]
fn kernel_at_decides_like_kernel() {
    let plan = Plan::new("all", &["relu"]).unwrap();
    let mut agent = Agent::new(Buf::default(), plan);
    agent.begin_graph(0, &K).unwrap();
    assert!(agent.kernel_at(0, K[0].0, K[0].1).is_none(), "no step yet");
    agent.begin_step(0).unwrap();
    for (i, (t, n)) in K.iter().enumerate() {
        let by_name = agent.kernel(t, n).is_some();
        assert_eq!(agent.kernel_at(i, t, n).is_some(), by_name, "{n}");
        assert_eq!(by_name, i == 1);
    }
    // Beyond the indexed kernels, and after a new plan, names decide.
    assert!(agent.kernel_at(INDEXED_KERNELS + 3, "ReLU", "x").is_some());
    agent.set_plan(Plan::all());
    assert!(agent.kernel_at(0, K[0].0, K[0].1).is_some());
}

#[test]
fn failures_are_counted_and_the_host_sees_them() {
    // Fail the fourth write of the first stat frame (opening zero, code, data, code): the
    // host sees a cut frame, then a gap.
    let mut probe = Agent::new(Buf::default(), Plan::all());
    probe.hello(0, "a", "b").unwrap();
    probe.begin_graph(0, &K).unwrap();
    probe.begin_step(0).unwrap();
    let before = probe.sink_mut().writes;
    let sink = Buf {
        fail_at: Some(before + 4),
        ..Buf::default()
    };
    let mut agent = Agent::new(sink, Plan::all());
    agent.hello(0, "a", "b").unwrap();
    agent.begin_graph(0, &K).unwrap();
    agent.begin_step(0).unwrap();
    let x = f32s(&[1.0; 4]);
    let mut k = agent.kernel("ReLU", K[1].1).unwrap();
    assert_eq!(
        k.input(0, DType::Float32, &[4], &x),
        Err(AgentError::Sink("link down"))
    );
    assert_eq!(k.input(1, DType::Float32, &[4], &x), Ok(Sent::Frame));
    assert_eq!(
        k.input(2, DType::Complex64, &[2], &x),
        Err(AgentError::Record(Error::Unsupported(DType::Complex64)))
    );
    assert_eq!(
        k.input(3, DType::Float32, &[5], &x),
        Err(AgentError::Record(Error::LengthMismatch {
            expected: 20,
            actual: 16
        }))
    );
    assert_eq!(k.output(0, DType::Float32, &[0, 3], &[]), Ok(Sent::Empty));
    let long = "n".repeat(crate::wire::OP_NAME_CAP + 1);
    let mut k = agent.kernel("ReLU", &long).unwrap();
    assert!(matches!(
        k.output(0, DType::Float32, &[1], &x[..4]),
        Err(AgentError::Record(Error::Wire { .. }))
    ));
    let end = agent.end_step().unwrap().unwrap();
    assert_eq!((end.records, end.dropped), (1, 4));
    let (frames, problems) = decode(&agent.into_sink().bytes);
    assert!(
        matches!(
            problems[..],
            [
                ProblemKind::Torn | ProblemKind::Corrupt,
                ProblemKind::Gap { .. }
            ]
        ),
        "{problems:?}"
    );
    assert!(matches!(frames.last(), Some(Frame::EndStep(e)) if e.dropped == 4));
    let too_long = "x".repeat(40);
    let mut a = Agent::new(Buf::default(), Plan::all());
    assert!(a.hello(0, &too_long, "d").is_err());
    assert!(a.begin_graph(0, &[(too_long.as_str(), "n")]).is_err());
}

#[test]
fn a_plan_from_the_host_takes_over_at_the_next_step() {
    let mut raw = [0u8; MAX_FRAME_LEN];
    let host_plan = Plan::new("0", &["MatMul"]).unwrap().with_md5(true);
    let n = host_plan.build_frame(0, &mut raw).unwrap();
    let mut rx = [0u8; crate::wire::MAX_WIRE_LEN];
    let w = frame::encode_wire(&raw[..n], &mut rx).unwrap();
    let plan = Plan::from_wire(&mut rx[1..w - 1]).unwrap();
    let mut agent = Agent::new(Buf::default(), Plan::all());
    agent.set_plan(plan);
    assert_eq!(agent.plan(), &host_plan);
    let ends = run(&mut agent, 2);
    assert_eq!(ends[0].map(|e| e.records), Some(2));
    assert_eq!(ends[1], None);
    assert!(format!("{agent:?}").contains("Agent"));
}
