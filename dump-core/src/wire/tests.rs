//! Session round trips, the decoder's reports, and the seeded mutation campaign.

use super::*;
use crate::{DType, Summary};
use std::{collections::VecDeque, vec::Vec};

/// xorshift64*: seeded, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn hello() -> Frame {
    Frame::Hello(Hello {
        session: 7,
        agent: "test-agent".try_into().unwrap(),
        device: "host".try_into().unwrap(),
        dtypes: DTypeSet::of(&[DType::Float32, DType::Int8]),
        md5: true,
        sample_cap: SAMPLE_CAP as u16,
    })
}

/// A varied, NaN-free frame (so `PartialEq` compares it exactly).
fn some_frame(rng: &mut Rng, i: u64) -> Frame {
    const OPS: [(&str, &str); 4] = [
        ("Conv2D", "Default/network-Net/conv1-Conv2d/Conv2D-op0"),
        ("ReLU", "Default/network-Net/ReLU-op1"),
        ("MatMul", "Default/network-Net/fc1-Dense/MatMul-op2"),
        ("BiasAdd", "Default/network-Net/fc1-Dense/BiasAdd-op3"),
    ];
    let (op_type, op) = OPS[(i % 4) as usize];
    match rng.below(10) {
        0 => Frame::BeginStep(BeginStep {
            graph_id: 0,
            iteration: i as u32,
        }),
        1 => Frame::EndStep(EndStep {
            graph_id: 0,
            iteration: i as u32,
            records: rng.below(100) as u32,
            dropped: rng.below(3) as u32,
        }),
        2 => Frame::Kernel(KernelEntry {
            graph_id: 1,
            index: i as u32,
            op_type: op_type.try_into().unwrap(),
            op: op.try_into().unwrap(),
        }),
        _ => {
            let mut s = Summary::EMPTY;
            for _ in 0..1 + rng.below(6) {
                s.push((rng.below(2001) as f64 - 1000.0) / 8.0);
            }
            let dims = [1 + rng.below(64) as u32, 1 + rng.below(9) as u32];
            let io = if i.is_multiple_of(2) {
                Io::Input
            } else {
                Io::Output
            };
            let mut r = StatRecord::new(op, io, (i % 3) as u32, DType::Float32, &dims, s)
                .unwrap()
                .with_op_type(op_type)
                .unwrap();
            r.graph_id = 0;
            r.iteration = (i / 16) as u32;
            if rng.below(2) == 0 {
                r.md5 = Some(crate::hash::md5(&i.to_le_bytes()));
            }
            if rng.below(3) == 0 {
                let n = rng.below(SAMPLE_CAP as u64 + 1) as usize;
                r.sample = Some((0..n).map(|k| (k as u8) ^ (i as u8)).collect());
            }
            Frame::Stat(r)
        }
    }
}

fn wire_of(frame: &Frame, seq: u32) -> Vec<u8> {
    let mut raw = [0u8; MAX_FRAME_LEN];
    let n = frame.build(seq, &mut raw).unwrap();
    let mut w = [0u8; MAX_WIRE_LEN];
    let len = frame::encode_wire(&raw[..n], &mut w).unwrap();
    w[..len].to_vec()
}

/// A valid frame (CRC fine) with another version or kind byte.
fn foreign_wire(version: u8, kind: u8) -> Vec<u8> {
    let mut raw = std::vec![version, kind, 0, 1, 2, 3];
    raw.extend_from_slice(&crc::crc32(&raw).to_le_bytes());
    let mut w = [0u8; 64];
    let len = frame::encode_wire(&raw, &mut w).unwrap();
    w[..len].to_vec()
}

fn decode_all(bytes: &[u8]) -> Vec<Event> {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    d.push(bytes, |e| out.push(e));
    d.finish(|e| out.push(e));
    out
}

fn problems(events: &[Event]) -> Vec<(u64, ProblemKind)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Problem(p) => Some((p.offset, p.kind)),
            Event::Frame { .. } => None,
        })
        .collect()
}

#[test]
fn bounds_are_the_largest_frame() {
    assert_eq!(MAX_FRAME_LEN, 7 + MAX_ENCODED_LEN + 4);
    assert_eq!(MAX_WIRE_LEN, MAX_FRAME_LEN + MAX_FRAME_LEN / 254 + 1 + 2);
    let s = Summary {
        count: u64::MAX,
        nan: u64::MAX,
        pos_inf: u64::MAX,
        neg_inf: u64::MAX,
        zero: u64::MAX,
        pos: u64::MAX,
        neg: u64::MAX,
        ..Summary::EMPTY
    };
    let mut r = StatRecord::new(
        &"o".repeat(OP_NAME_CAP),
        Io::Output,
        u32::MAX,
        DType::Float64,
        &[u32::MAX; MAX_RANK],
        s,
    )
    .unwrap()
    .with_op_type(&"t".repeat(OP_TYPE_CAP))
    .unwrap();
    r.graph_id = u32::MAX;
    r.iteration = u32::MAX;
    r.md5 = Some([1; 16]);
    r.sample = Some(heapless::Vec::from_slice(&[0xff; SAMPLE_CAP]).unwrap());
    let mut raw = [0u8; MAX_FRAME_LEN];
    assert_eq!(
        Frame::Stat(r.clone()).build(u32::MAX, &mut raw).unwrap(),
        MAX_FRAME_LEN
    );
    // Every byte non-zero makes COBS's overhead largest.
    let w = wire_of(&Frame::Stat(r), u32::MAX);
    assert!(w.len() <= MAX_WIRE_LEN, "{}", w.len());
    let k = KernelEntry {
        graph_id: u32::MAX,
        index: u32::MAX,
        op_type: "t".repeat(OP_TYPE_CAP).as_str().try_into().unwrap(),
        op: "o".repeat(OP_NAME_CAP).as_str().try_into().unwrap(),
    };
    assert!(Frame::Kernel(k).build(u32::MAX, &mut raw).is_ok());
}

#[test]
fn a_session_round_trips_with_offsets() {
    let mut rng = Rng(1);
    let frames: Vec<Frame> = std::iter::once(hello())
        .chain((1..40).map(|i| some_frame(&mut rng, i)))
        .collect();
    let mut stream = Vec::new();
    let mut offsets = Vec::new();
    for (seq, f) in frames.iter().enumerate() {
        offsets.push(stream.len() as u64 + 1);
        stream.extend(wire_of(f, seq as u32));
    }
    // Any split of the stream gives the same events.
    let whole = decode_all(&stream);
    for piece in [1, 2, 7, 100, 1000] {
        let mut d = Decoder::new();
        let mut got = Vec::new();
        for c in stream.chunks(piece) {
            d.push(c, |e| got.push(e));
        }
        d.finish(|e| got.push(e));
        assert_eq!(got, whole, "pieces of {piece}");
        assert_eq!(d.counts().frames, 40);
        assert_eq!(d.counts().bytes, stream.len() as u64);
    }
    let want: Vec<Event> = frames
        .into_iter()
        .enumerate()
        .map(|(seq, frame)| Event::Frame {
            offset: offsets[seq],
            seq: seq as u32,
            frame,
        })
        .collect();
    assert_eq!(whole, want);
}

#[test]
fn each_problem_is_reported_where_it_is_and_the_next_frame_survives() {
    let f = |i| some_frame(&mut Rng(i + 3), i);
    let good = |seq: u32| wire_of(&f(u64::from(seq)), seq);
    let mut s = wire_of(&hello(), 0);
    let mut want = Vec::new();
    // Corrupt: one bit of frame 1.
    let at = s.len() as u64 + 1;
    let mut raw = [0u8; MAX_FRAME_LEN];
    let n = f(1).build(1, &mut raw).unwrap();
    raw[n / 2] ^= 0x10;
    let mut bad = [0u8; MAX_WIRE_LEN];
    let w = frame::encode_wire(&raw[..n], &mut bad).unwrap();
    s.extend(&bad[..w]);
    want.push((at, ProblemKind::Corrupt));
    // Torn: frame 2 cut in the middle, then frame 3 (a gap of 1 and 2).
    let at = s.len() as u64 + 1;
    let g = good(2);
    s.extend(&g[..g.len() / 2]);
    want.push((at, ProblemKind::Torn));
    let at = s.len() as u64 + 1;
    s.extend(good(3));
    want.push((
        at,
        ProblemKind::Gap {
            expected: 1,
            got: 3,
        },
    ));
    // Duplicate of 3; 5 before 4 (4 is reordered).
    let at = s.len() as u64 + 1;
    s.extend(good(3));
    want.push((at, ProblemKind::Duplicate { seq: 3 }));
    let at5 = s.len() as u64 + 1;
    s.extend(good(5));
    want.push((
        at5,
        ProblemKind::Gap {
            expected: 4,
            got: 5,
        },
    ));
    let at = s.len() as u64 + 1;
    s.extend(good(4));
    want.push((
        at,
        ProblemKind::Reordered {
            seq: 4,
            expected: 6,
        },
    ));
    // Over-long garbage, an unknown version, an unknown kind, a plan frame.
    let at = s.len() as u64;
    s.extend(std::iter::repeat_n(0x55u8, 3 * MAX_WIRE_LEN));
    want.push((at, ProblemKind::OverLong));
    let at = s.len() as u64 + 1;
    s.extend(foreign_wire(2, 5));
    want.push((at, ProblemKind::UnknownVersion(2)));
    let at = s.len() as u64 + 1;
    s.extend(foreign_wire(1, 99));
    want.push((at, ProblemKind::UnknownKind(99)));
    let at = s.len() as u64 + 1;
    s.extend(foreign_wire(1, Kind::Stat as u8));
    want.push((at, ProblemKind::BadPayload("record is truncated")));
    s.extend(good(6));
    // The stream ends inside frame 7.
    let at = s.len() as u64 + 1;
    let g = good(7);
    s.extend(&g[..g.len() - 1]);
    want.push((at, ProblemKind::Torn));

    let events = decode_all(&s);
    assert_eq!(problems(&events), want);
    let seqs: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            Event::Frame { seq, .. } => Some(*seq),
            Event::Problem(_) => None,
        })
        .collect();
    assert_eq!(seqs, [0, 3, 5, 6]);
}

#[test]
fn hello_restarts_a_session_but_a_duplicated_hello_does_not() {
    let mut s = wire_of(&hello(), 0);
    s.extend(wire_of(&some_frame(&mut Rng(2), 1), 1));
    let dup_at = s.len() as u64 + 1;
    s.extend(wire_of(&hello(), 0));
    let Frame::Hello(mut h) = hello() else {
        unreachable!()
    };
    h.session = 8;
    s.extend(wire_of(&Frame::Hello(h), 0));
    s.extend(wire_of(&some_frame(&mut Rng(2), 1), 1));
    let events = decode_all(&s);
    assert_eq!(
        problems(&events),
        [(dup_at, ProblemKind::Duplicate { seq: 0 })]
    );
    let seqs: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            Event::Frame { seq, .. } => Some(*seq),
            Event::Problem(_) => None,
        })
        .collect();
    assert_eq!(
        seqs,
        [0, 1, 0, 1],
        "the restarted session is delivered in full"
    );
}

#[test]
fn sequence_numbers_wrap() {
    let mut s = Vec::new();
    for seq in [u32::MAX - 1, u32::MAX, 0, 1] {
        s.extend(wire_of(&some_frame(&mut Rng(5), 0), seq));
    }
    let events = decode_all(&s);
    assert!(problems(&events).is_empty(), "{events:?}");
    assert_eq!(events.len(), 4);
}

/// What one mutation did to the stream, for the checks.
#[derive(Default)]
struct Expect {
    /// Frames the decoder must deliver, in order: (offset, seq, frame).
    frames: VecDeque<(u64, u32, Frame)>,
    /// Byte ranges of bad insertions, in order, with whether a problem was reported in it.
    bad: Vec<(u64, u64, bool)>,
    mutated: u64,
}

/// The mutation campaign: a session of frames, about half of them mutated (bit flips, torn
/// frames, duplicates, swapped pairs, dropped frames, garbage with and without zeros,
/// over-long runs, foreign versions and kinds), fed to one decoder in random pieces. Checks:
/// no panic; the decoder delivers exactly the intact frames it should (every intact frame
/// after a bad one included), at their offsets; every problem it reports lies in a bad
/// insertion (or is a gap reported at the next delivered frame); every bad insertion is
/// reported. Returns the number of mutated frames.
fn campaign(seed: u64, mutated_target: u64) -> u64 {
    let mut rng = Rng(seed);
    let mut exp = Expect::default();
    let mut decoder = Decoder::new();
    let mut pos: u64 = 0;
    let mut seq: u32 = 0;
    let mut pending_gap: Option<u64> = None;
    let mut delivered = 0u64;
    let mut batch = Vec::new();

    let mut check = |e: Event, exp: &mut Expect, pending_gap: &mut Option<u64>| match e {
        Event::Frame { offset, seq, frame } => {
            let (o, s, f) = exp
                .frames
                .pop_front()
                .expect("an unexpected frame was delivered");
            assert_eq!((offset, seq), (o, s), "delivered frame {seq} at {offset}");
            assert_eq!(frame, f);
            if let Some(g) = pending_gap.take() {
                assert_eq!(g, offset, "gap reported at {g}, next frame at {offset}");
            }
            delivered += 1;
        }
        Event::Problem(p) => {
            if let ProblemKind::Gap { .. } = p.kind {
                *pending_gap = Some(p.offset);
                return;
            }
            let i = exp.bad.partition_point(|r| r.1 <= p.offset);
            assert!(
                exp.bad.get(i).is_some_and(|r| r.0 <= p.offset),
                "problem {p:?} outside every bad insertion"
            );
            // One problem may cover adjacent bad insertions (a torn frame merged with a
            // frame whose opening delimiter was flipped).
            let end = p.offset + p.len.max(1);
            for r in exp.bad[i..].iter_mut().take_while(|r| r.0 < end) {
                r.2 = true;
            }
        }
    };

    // Frame 0: the hello, intact.
    let h = hello();
    exp.frames.push_back((1, 0, h.clone()));
    batch.extend(wire_of(&h, 0));
    pos += batch.len() as u64;
    seq += 1;
    let mut i: u64 = 1;
    while exp.mutated < mutated_target {
        let f = some_frame(&mut rng, i);
        let w = wire_of(&f, seq);
        let bad = |batch: &mut Vec<u8>, pos: &mut u64, bytes: &[u8], exp: &mut Expect| {
            exp.bad.push((*pos, *pos + bytes.len() as u64, false));
            batch.extend_from_slice(bytes);
            *pos += bytes.len() as u64;
        };
        let mutation = rng.below(20);
        if mutation >= 10 {
            exp.frames.push_back((pos + 1, seq, f));
            batch.extend_from_slice(&w);
            pos += w.len() as u64;
        } else {
            exp.mutated += 1;
            match mutation {
                0 | 1 => {
                    let mut m = w.clone();
                    let bit = rng.below(m.len() as u64 * 8) as usize;
                    m[bit / 8] ^= 1 << (bit % 8);
                    bad(&mut batch, &mut pos, &m, &mut exp);
                }
                2 => {
                    let cut = 2 + rng.below(w.len() as u64 - 3) as usize;
                    bad(&mut batch, &mut pos, &w[..cut], &mut exp);
                }
                3 => {
                    exp.frames.push_back((pos + 1, seq, f));
                    batch.extend_from_slice(&w);
                    pos += w.len() as u64;
                    bad(&mut batch, &mut pos, &w, &mut exp);
                }
                4 => {
                    // The next frame first, then this one: this one is late.
                    let f2 = some_frame(&mut rng, i + 1);
                    let w2 = wire_of(&f2, seq.wrapping_add(1));
                    exp.frames.push_back((pos + 1, seq.wrapping_add(1), f2));
                    batch.extend_from_slice(&w2);
                    pos += w2.len() as u64;
                    bad(&mut batch, &mut pos, &w, &mut exp);
                    seq = seq.wrapping_add(1);
                    i += 1;
                }
                5 => {} // dropped: the next delivered frame carries a gap
                6 => {
                    let n = 1 + rng.below(600) as usize;
                    let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                    exp.frames.push_back((pos + 1, seq, f));
                    batch.extend_from_slice(&w);
                    pos += w.len() as u64;
                    bad(&mut batch, &mut pos, &junk, &mut exp);
                    // Junk may end inside a "frame" that the next delimiter closes.
                }
                7 => {
                    let n = MAX_WIRE_LEN + rng.below(3000) as usize;
                    let junk: Vec<u8> = (0..n).map(|_| 1 + (rng.next() % 255) as u8).collect();
                    exp.frames.push_back((pos + 1, seq, f));
                    batch.extend_from_slice(&w);
                    pos += w.len() as u64;
                    bad(&mut batch, &mut pos, &junk, &mut exp);
                }
                8 => {
                    exp.frames.push_back((pos + 1, seq, f));
                    batch.extend_from_slice(&w);
                    pos += w.len() as u64;
                    let foreign = if rng.below(2) == 0 {
                        foreign_wire(2 + rng.below(254) as u8, 5)
                    } else {
                        foreign_wire(1, 8 + rng.below(248) as u8)
                    };
                    bad(&mut batch, &mut pos, &foreign, &mut exp);
                }
                _ => {
                    // Two bit flips anywhere in the frame.
                    let mut m = w.clone();
                    for _ in 0..2 {
                        let bit = rng.below(m.len() as u64 * 8) as usize;
                        m[bit / 8] ^= 1 << (bit % 8);
                    }
                    if m == w {
                        m[1] ^= 1;
                    }
                    bad(&mut batch, &mut pos, &m, &mut exp);
                }
            }
        }
        seq = seq.wrapping_add(1);
        i += 1;
        if batch.len() > 1 << 16 || exp.mutated >= mutated_target {
            let mut rest = &batch[..];
            while !rest.is_empty() {
                let n = (1 + rng.below(4096) as usize).min(rest.len());
                decoder.push(&rest[..n], |e| check(e, &mut exp, &mut pending_gap));
                rest = &rest[n..];
            }
            batch.clear();
            // Forget bad ranges that every later problem lies beyond, after checking them.
            let done = exp
                .bad
                .partition_point(|r| r.1 + MAX_WIRE_LEN as u64 * 8 < pos);
            for r in &exp.bad[..done] {
                assert!(r.2, "bad insertion {}..{} was not reported", r.0, r.1);
            }
            exp.bad.drain(..done);
        }
    }
    decoder.finish(|e| check(e, &mut exp, &mut pending_gap));
    assert!(
        exp.frames.is_empty(),
        "{} frames not delivered",
        exp.frames.len()
    );
    for r in &exp.bad {
        assert!(r.2, "bad insertion {}..{} was not reported", r.0, r.1);
    }
    assert_eq!(decoder.counts().frames, delivered);
    exp.mutated
}

/// Mutated frames for `cargo test` (debug); `cargo xtask wire-fuzz` runs 10^6 in release
/// through `OPDUMP_WIRE_FUZZ_FRAMES`.
const DEBUG_MUTATED: u64 = 50_000;

#[test]
fn mutated_streams_never_lose_a_good_frame() {
    let target = std::env::var("OPDUMP_WIRE_FUZZ_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEBUG_MUTATED);
    let t = std::time::Instant::now();
    let n = campaign(0x5eed_0001, target);
    assert!(n >= target);
    std::println!(
        "wire fuzz: {n} mutated frames, no panic, every intact frame delivered ({:.1} s)",
        t.elapsed().as_secs_f64()
    );
}

#[test]
fn the_spec_example_bytes() {
    let f = Frame::BeginStep(BeginStep {
        graph_id: 0,
        iteration: 7,
    });
    assert_eq!(
        wire_of(&f, 0),
        [
            0x00, 0x03, 0x01, 0x04, 0x01, 0x06, 0x07, 0x59, 0xdc, 0x44, 0xea, 0x00
        ]
    );
}

/// A dtype's wire code is its declaration index (postcard's varint variant index): the codes
/// of `docs/wire.md`, new dtypes appended after complex128 without moving the old ones.
#[test]
fn dtype_codes_are_stable() {
    for (code, d) in DType::ALL.iter().enumerate() {
        let mut buf = [0u8; 4];
        let bytes = postcard::to_slice(d, &mut buf).unwrap();
        assert_eq!(bytes, [code as u8], "{d}");
        assert_eq!(postcard::from_bytes::<DType>(&[code as u8]).unwrap(), *d);
    }
    let named = [
        (DType::Bool, 0),
        (DType::Float32, 13),
        (DType::Complex128, 16),
        (DType::Float8E4M3FN, 17),
        (DType::Float8E5M2, 18),
        (DType::UInt4, 19),
        (DType::Float8E4M3FNUZ, 20),
        (DType::Float8E5M2FNUZ, 21),
    ];
    for (d, code) in named {
        assert_eq!(d as u8, code, "{d}");
    }
    assert!(postcard::from_bytes::<DType>(&[22]).is_err());
}

/// The one-pass path (a frame whole within a push) and the gathering path (a frame split
/// across pushes) give the same events: a mutated stream pushed whole, byte by byte and in
/// random pieces, through [`Decoder::push`] and [`Decoder::push_ref`].
#[test]
fn every_way_of_cutting_a_mutated_stream_gives_the_same_events() {
    let mut rng = Rng(0x0ce5_0f5e_0000_2026);
    let mut stream = wire_of(&hello(), 0);
    for i in 1..3000u64 {
        let mut w = wire_of(&some_frame(&mut rng, i), i as u32);
        match rng.below(12) {
            0 => {
                let bit = rng.below(w.len() as u64 * 8) as usize;
                w[bit / 8] ^= 1 << (bit % 8);
            }
            1 => w.truncate(1 + rng.below(w.len() as u64 - 1) as usize),
            2 => {
                let k = rng.below(w.len() as u64) as usize;
                w[k] = 0;
            }
            3 => w.extend((0..rng.below(700)).map(|_| 1 + (rng.next() % 255) as u8)),
            4 => w.extend((0..rng.below(40)).map(|_| (rng.next() % 3) as u8)),
            _ => {}
        }
        stream.extend_from_slice(&w);
    }
    let run = |pieces: &mut dyn FnMut(usize) -> usize, by_ref: bool| {
        let mut d = Decoder::new();
        let mut out = Vec::new();
        let mut rest = &stream[..];
        while !rest.is_empty() {
            let n = pieces(rest.len()).clamp(1, rest.len());
            if by_ref {
                d.push_ref(&rest[..n], |e| out.push(e.to_event()));
            } else {
                d.push(&rest[..n], |e| out.push(e));
            }
            rest = &rest[n..];
        }
        d.finish(|e| out.push(e));
        assert_eq!(d.counts().bytes, stream.len() as u64);
        // Debug text: NaNs.
        std::format!("{out:?} {:?}", d.counts())
    };
    let whole = run(&mut |n| n, false);
    assert!(whole.contains("Stat(") && whole.contains("Torn") && whole.contains("Corrupt"));
    assert_eq!(run(&mut |n| n, true), whole);
    assert_eq!(run(&mut |_| 1, false), whole);
    let mut r2 = Rng(7);
    assert_eq!(run(&mut |_| 1 + r2.below(300) as usize, true), whole);
    let mut r3 = Rng(8);
    assert_eq!(run(&mut |_| 1 + r3.below(5000) as usize, false), whole);
}
