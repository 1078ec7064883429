//! The fuzzed entry point of the CANN dump file codec (`dump_device_ascend::dumpfile`) and its
//! invariants, shared by the cargo-fuzz target `fuzz_targets/cann_dump.rs` and the replay test
//! `dump-device-ascend/tests/fuzz_corpus_cann.rs`, which runs every file of
//! `fuzz/corpus/cann_dump/` and `fuzz/seeds/cann_dump/` through it in a normal `cargo test`.
//! (Kept apart from `checks.rs` so that the replay builds with `-p dump-device-ascend` alone.)
#![allow(dead_code)]

use dump_device_ascend::{
    DeviceTensor,
    blocked::HostBlocks,
    dumpfile::{
        Container, DumpHeader, DumpReader, Limits, OverflowReport, decode, decode_with, encode,
    },
    to_host,
};

/// One fuzzed entry point: takes arbitrary bytes, panics when an invariant breaks.
pub type Check = fn(&[u8]);

/// Every target of this file by name, for the replay test.
pub const TARGETS: [(&str, Check); 1] = [("cann_dump", cann_dump)];

/// A CANN dump file: the bytes as a whole file, and (so that mutations of the message need
/// not keep the header right) as a message behind a correct 8-byte length header. For each:
/// decoding from memory and streaming agree (the same header, or the same error text); every
/// tensor lies within the file, v2 payloads are contiguous after the message; streaming in a
/// chunk size taken from the input gives each tensor's bytes, and so does seeking in reverse
/// order; a v2 header re-encodes to a file that decodes to the same header (a fixed point
/// after one round, byte for byte); tight limits never panic; every payload decoded as an
/// overflow block never panics and an accepted one writes JSON; a device-format payload that
/// `blocked::HostBlocks` accepts (against its `original_shape`) converts block by block to
/// exactly what the whole-tensor `to_host` gives.
pub fn cann_dump(data: &[u8]) {
    one_file(data);
    let mut framed = (data.len() as u64).to_le_bytes().to_vec();
    framed.extend_from_slice(data);
    one_file(&framed);
    if let Ok(r) = OverflowReport::decode(data) {
        let json = r.to_json(Some(4));
        assert!(json.starts_with('{') && json.ends_with('}'));
    }
}

fn one_file(file: &[u8]) {
    let len = file.len() as u64;
    let whole = decode(file);
    let streamed = DumpReader::open(file, len);
    let tight = Limits {
        max_message_len: 512,
        max_tensors: 3,
        max_rank: 2,
        max_depth: 3,
    };
    let _ = decode_with(file, tight);
    let h = match (whole, streamed) {
        (Ok(h), Ok(mut r)) => {
            assert_eq!(r.header(), &h, "decode and DumpReader disagree");
            let chunk = 1 + usize::from(file.last().copied().unwrap_or(0) % 13);
            let mut buf = vec![0u8; chunk];
            let mut n = 0;
            while let Some(t) = r.next_tensor().expect("a decoded file streams") {
                let t = t.clone();
                let want = t.bytes_in(file).expect("every tensor lies within the file");
                let mut got = Vec::new();
                loop {
                    let k = r.read_chunk(&mut buf).expect("a decoded file streams");
                    if k == 0 {
                        break;
                    }
                    assert!(k <= chunk);
                    got.extend_from_slice(&buf[..k]);
                }
                assert_eq!(got, want, "{}", t.id());
                n += 1;
            }
            assert_eq!(n, h.tensors.len());
            h
        }
        (Err(a), Err(b)) => {
            assert_eq!(
                a.to_string(),
                b.to_string(),
                "decode and DumpReader disagree"
            );
            return;
        }
        (a, b) => panic!(
            "decode and DumpReader disagree: {:?} vs {:?}",
            a.map(|h| h.container),
            b.map(|r| r.header().container)
        ),
    };
    assert!(h.payload_end <= h.file_len && h.file_len == len);
    blocks_agree(&h, file);
    if let Container::Binary { message_len } = h.container {
        let mut at = 8 + message_len;
        for t in &h.tensors {
            assert_eq!(
                t.offset,
                at,
                "{} is not where the previous payload ended",
                t.id()
            );
            at = t.end();
        }
        assert_eq!(at, h.payload_end);
    }
    let payloads: Vec<&[u8]> = h
        .tensors
        .iter()
        .map(|t| t.bytes_in(file).expect("within the file"))
        .collect();
    let mut r = DumpReader::open(std::io::Cursor::new(file), len).expect("opened before");
    let mut buf = [0u8; 7];
    for (i, want) in payloads.iter().enumerate().rev() {
        r.seek_tensor(i).expect("seeks").expect("exists");
        let mut got = Vec::new();
        loop {
            let k = r.read_chunk(&mut buf).expect("a decoded file streams");
            if k == 0 {
                break;
            }
            got.extend_from_slice(&buf[..k]);
        }
        assert_eq!(&got, want, "seek_tensor({i})");
    }
    if matches!(h.container, Container::Binary { .. }) {
        let again = encode(&h, &payloads).expect("a decoded header encodes");
        if again.len() > 8 {
            let h2 = decode(&again).expect("a re-encoded file decodes");
            assert_eq!(cleared(&h2), cleared(&h), "re-encoding changed the header");
            assert_eq!(
                encode(&h2, &payloads).expect("encodes"),
                again,
                "not a fixed point"
            );
        }
    }
    for (i, t) in h.tensors.iter().enumerate() {
        assert_eq!(t.ordinal, i);
        let _ = (
            t.dtype(),
            t.shape_bytes(),
            t.data_type.to_string(),
            t.format.to_string(),
        );
        if let Ok(r) = OverflowReport::decode(t.bytes_in(file).unwrap_or(&[])) {
            let _ = r.to_json(None);
        }
    }
}

/// The header without what depends on where things landed in the file.
fn cleared(h: &DumpHeader) -> DumpHeader {
    let mut h = h.clone();
    h.container = Container::Binary { message_len: 0 };
    h.file_len = 0;
    h.payload_end = 0;
    for t in &mut h.tensors {
        t.offset = 0;
    }
    h
}

/// Block-by-block conversion (what `opdump convert` and dump-read stream) equals `to_host`.
fn blocks_agree(h: &DumpHeader, file: &[u8]) {
    for t in &h.tensors {
        let (Some(format), Ok(dtype), Some(orig)) =
            (t.format.format(), t.dtype(), t.original_shape.as_ref())
        else {
            continue;
        };
        let dims = |s: &[u64]| -> Option<Vec<usize>> {
            s.iter().map(|&d| usize::try_from(d).ok()).collect()
        };
        let (Some(dev), Some(host)) = (dims(&t.shape), dims(orig)) else {
            continue;
        };
        let Ok(plan) = HostBlocks::new(format, dtype, &dev, &host, 1 << 16) else {
            continue;
        };
        let Some(payload) = t.bytes_in(file) else {
            continue;
        };
        // Consecutive runs here: a FRACTAL_Z band (over 4 MiB) never fits the 64 KiB limit.
        let need = plan.src_extent();
        if payload.len() < need {
            continue;
        }
        let data = &payload[..need];
        let mut got = Vec::new();
        let mut buf = vec![0u8; plan.max_dst_bytes()];
        let mut at = 0;
        for i in 0..plan.count() {
            let n = plan.src_bytes(i);
            let k = plan
                .convert(i, &data[at..at + n], &mut buf)
                .expect("a planned block converts");
            got.extend_from_slice(&buf[..k]);
            at += n;
        }
        let whole = DeviceTensor {
            format,
            dtype,
            device_shape: &dev,
            host_shape: &host,
            data,
        };
        let mut out = vec![0u8; whole.host_bytes().expect("planned")];
        let want = to_host(&whole, &mut out).expect("what HostBlocks accepts, to_host converts");
        assert_eq!(got, want.data, "{format}: blocks differ from to_host");
    }
}
