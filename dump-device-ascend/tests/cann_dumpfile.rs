//! The CANN dump file codec (`dumpfile`) against the fixtures `tests/gen_cann.py` generates
//! with the `protobuf` and `numpy` packages: every decoded tensor's metadata and bytes against
//! the manifest and the numpy arrays, streaming in any chunk size against whole-file decoding,
//! and every hostile file's own error.
#![cfg(feature = "std")]

use std::io::Read;
use std::path::{Path, PathBuf};

use dump_core::{DType, widen};
use dump_device_ascend::dumpfile::{
    Container, DumpFileError, DumpHeader, DumpReader, Limits, OverflowReport, TensorKind,
    TensorMeta, WireProblem, decode, decode_with,
};
use serde_json::Value;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cann")
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(dir().join("manifest.json")).expect("manifest.json");
    serde_json::from_str(&text).unwrap()
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(dir().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

fn dims(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(u).collect()
}

/// The `.npy` under `npy/`: its descr, shape and data bytes.
fn npy(name: &str) -> (String, Vec<usize>, Vec<u8>) {
    let bytes = read(&format!("npy/{name}"));
    let (h, data) = dump_npy::read_npy(&bytes).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    (h.descr().to_owned(), h.dims().collect(), data.to_vec())
}

fn check_tensor(file: &str, t: &TensorMeta, e: &Value, bytes: &[u8]) {
    let ctx = format!("{file} {}", t.id());
    assert_eq!(t.kind.name(), e["kind"].as_str().unwrap(), "{ctx}");
    assert_eq!(t.index as u64, u(&e["index"]), "{ctx}");
    assert_eq!(t.ordinal as u64, u(&e["ordinal"]), "{ctx}");
    assert_eq!(
        i64::from(t.data_type.0),
        e["data_type"].as_i64().unwrap(),
        "{ctx}"
    );
    assert_eq!(
        i64::from(t.format.0),
        e["format"].as_i64().unwrap(),
        "{ctx}"
    );
    assert_eq!(
        i64::from(t.sub_format),
        e["sub_format"].as_i64().unwrap(),
        "{ctx}"
    );
    assert_eq!(t.shape, dims(&e["shape"]), "{ctx}");
    let original = (!e["original_shape"].is_null()).then(|| dims(&e["original_shape"]));
    assert_eq!(t.original_shape, original, "{ctx}");
    assert_eq!(t.size, u(&e["size"]), "{ctx}");
    assert_eq!(t.offset, u(&e["offset"]), "{ctx}");
    assert_eq!(t.address, u(&e["address"]), "{ctx}");
    assert_eq!(t.address_offset, u(&e["address_offset"]), "{ctx}");
    assert_eq!(t.arg_index.map(u64::from), e["arg_index"].as_u64(), "{ctx}");
    assert_eq!(u64::from(t.input_type), u(&e["input_type"]), "{ctx}");
    assert_eq!(
        i64::from(t.buffer_type),
        e["buffer_type"].as_i64().unwrap(),
        "{ctx}"
    );
    let ranges: Vec<(u64, u64)> = e["dim_range"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (u(&r[0]), u(&r[1])))
        .collect();
    assert_eq!(t.dim_range, ranges, "{ctx}");
    match (&t.original_op, &e["original_op"]) {
        (None, Value::Null) => {}
        (Some(o), v) => {
            assert_eq!(o.name, v["name"].as_str().unwrap(), "{ctx}");
            assert_eq!(u64::from(o.output_index), u(&v["output_index"]), "{ctx}");
            assert_eq!(i64::from(o.data_type.0), v["data_type"].as_i64().unwrap());
            assert_eq!(i64::from(o.format.0), v["format"].as_i64().unwrap());
        }
        (o, v) => panic!("{ctx}: original_op {o:?} vs {v}"),
    }
    assert_eq!(bytes.len() as u64, t.size, "{ctx}");
    check_bytes(&ctx, t, &e["expect"], bytes);
}

/// The tensor's bytes against what the generator says they hold.
fn check_bytes(ctx: &str, t: &TensorMeta, expect: &Value, bytes: &[u8]) {
    let elems = t.elements().unwrap() as usize;
    let check = expect["check"].as_str().unwrap();
    if check == "bytes" {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, expect["hex"].as_str().unwrap(), "{ctx}");
        return;
    }
    if check == "opdebug" {
        let want = String::from_utf8(read(expect["json"].as_str().unwrap())).unwrap();
        let report = OverflowReport::decode(bytes).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert_eq!(report.to_json(Some(4)), want, "{ctx}");
        return;
    }
    let (descr, shape, data) = npy(expect["npy"].as_str().unwrap());
    let shape_u64: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    match check {
        "raw" => {
            assert_eq!(bytes, &data[..], "{ctx}");
            assert_eq!(shape_u64, t.shape, "{ctx}");
            assert_eq!(
                Some(t.dtype().unwrap()),
                DType::from_npy_descr(&descr),
                "{ctx}"
            );
            assert_eq!(t.shape_bytes(), Some(t.size), "{ctx}");
        }
        "bf16" => {
            assert_eq!(t.dtype().unwrap(), DType::BFloat16);
            let mut wide = vec![0u8; bytes.len() * 2];
            widen::bf16_to_f32(bytes, &mut wide).unwrap();
            assert_eq!(wide, data, "{ctx}");
            assert_eq!(descr, "<f4");
        }
        "int4" => {
            assert_eq!(t.dtype().unwrap(), DType::Int4);
            let mut wide = vec![0u8; elems];
            widen::int4_to_int8(bytes, elems, &mut wide).unwrap();
            assert_eq!(wide, data, "{ctx}");
            assert_eq!(t.shape_bytes(), Some(t.size), "{ctx}");
        }
        "uint1" => {
            assert_eq!(t.dtype().unwrap(), DType::UInt1);
            let mut wide = vec![0u8; elems];
            widen::uint1_to_uint8(bytes, elems, &mut wide).unwrap();
            assert_eq!(wide, data, "{ctx}");
            assert_eq!(t.shape_bytes(), Some(t.size), "{ctx}");
        }
        "fp8" => {
            let name = expect["name"].as_str().unwrap();
            let dtype = match name {
                "FLOAT8_E5M2" => DType::Float8E5M2,
                "FLOAT8_E4M3FN" => DType::Float8E4M3FN,
                other => panic!("{ctx}: fp8 check of {other}"),
            };
            assert_eq!(t.data_type.name(), Some(name));
            assert_eq!(t.dtype().unwrap(), dtype, "{ctx}");
            assert_eq!(bytes.len(), elems, "{ctx}: one byte per element");
            let mut wide = vec![0u8; bytes.len() * 4];
            if dtype == DType::Float8E5M2 {
                widen::f8e5m2_to_f32(bytes, &mut wide).unwrap();
            } else {
                widen::f8e4m3fn_to_f32(bytes, &mut wide).unwrap();
            }
            // ml_dtypes' float32 values, NaN bits included.
            assert_eq!(wide, data, "{ctx}");
            assert_eq!(descr, "<f4");
            assert_eq!(t.shape_bytes(), Some(t.size), "{ctx}");
        }
        "unsupported" => {
            assert_eq!(bytes, &data[..], "{ctx}");
            let name = expect["name"].as_str().unwrap();
            assert_eq!(t.data_type.name(), Some(name));
            match t.dtype() {
                Err(e @ DumpFileError::UnsupportedDType { .. }) => {
                    let msg = e.to_string();
                    assert!(msg.contains(&format!("data type {name} (")), "{ctx}: {msg}");
                    assert!(msg.contains(&t.id().to_string()), "{ctx}: {msg}");
                }
                other => panic!("{ctx}: {other:?}"),
            }
        }
        other => panic!("unknown check {other}"),
    }
}

fn check_header(h: &DumpHeader, f: &Value) {
    let name = f["file"].as_str().unwrap();
    let c = &f["container"];
    match (h.container, c["variant"].as_str().unwrap()) {
        (Container::Binary { message_len }, "binary") => {
            assert_eq!(message_len, u(&c["message_len"]), "{name}")
        }
        (Container::Inline, "inline") => {}
        (got, want) => panic!("{name}: {got:?} vs {want}"),
    }
    assert_eq!(h.version, f["version"].as_str().unwrap(), "{name}");
    assert_eq!(h.dump_time, u(&f["dump_time"]), "{name}");
    assert_eq!(h.op_name, f["op_name"].as_str().unwrap(), "{name}");
    assert_eq!(h.dfx_message, f["dfx_message"].as_str().unwrap(), "{name}");
    assert_eq!(h.file_len, u(&f["file_len"]), "{name}");
    let attrs: Vec<(String, String)> = h
        .attrs
        .iter()
        .map(|a| (a.name.clone(), a.value.clone()))
        .collect();
    let want: Vec<(String, String)> = f["attrs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a[0].as_str().unwrap().into(), a[1].as_str().unwrap().into()))
        .collect();
    assert_eq!(attrs, want, "{name}");
    assert_eq!(
        h.tensors.len(),
        f["tensors"].as_array().unwrap().len(),
        "{name}"
    );
}

#[test]
fn every_fixture_decodes_to_its_manifest_and_arrays() {
    let m = manifest();
    let files = m["files"].as_array().unwrap();
    let mut tensors = 0;
    let mut dtypes = std::collections::BTreeSet::new();
    for f in files {
        let name = f["file"].as_str().unwrap();
        let bytes = read(name);
        let h = decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        check_header(&h, f);
        for (t, e) in h.tensors.iter().zip(f["tensors"].as_array().unwrap()) {
            let data = t.bytes_in(&bytes).unwrap();
            check_tensor(name, t, e, data);
            dtypes.insert(t.data_type.0);
            tensors += 1;
        }
        // Payloads are contiguous after the message (v2) and never overlap.
        if let Container::Binary { message_len } = h.container {
            let mut at = 8 + message_len;
            for t in &h.tensors {
                assert_eq!(t.offset, at, "{name} {}", t.id());
                at = t.end();
            }
            assert_eq!(h.payload_end, at);
        }
    }
    assert!(files.len() >= 50, "{} fixtures", files.len());
    assert!(tensors >= 110, "{tensors} tensors");
    assert_eq!(
        dtypes.len(),
        43,
        "every OutputDataType value appears: {dtypes:?}"
    );
}

/// A reader that hands out at most `max` bytes per call.
struct Trickle<R> {
    inner: R,
    max: usize,
}

impl<R: Read> Read for Trickle<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.max);
        self.inner.read(&mut buf[..n])
    }
}

#[test]
fn streaming_in_any_chunk_size_matches_whole_file_decoding() {
    let m = manifest();
    for f in m["files"].as_array().unwrap() {
        let name = f["file"].as_str().unwrap();
        let bytes = read(name);
        let whole = decode(&bytes).unwrap();
        for (chunk, trickle) in [(1, usize::MAX), (3, 2), (7, 5), (4096, 4096), (1 << 20, 1)] {
            let src = Trickle {
                inner: &bytes[..],
                max: trickle,
            };
            let mut r = DumpReader::open(src, bytes.len() as u64).unwrap();
            assert_eq!(r.header(), &whole, "{name}");
            let mut buf = vec![0u8; chunk];
            let mut seen = 0;
            while let Some(t) = r.next_tensor().unwrap() {
                let t = t.clone();
                let mut got = Vec::new();
                loop {
                    let n = r.read_chunk(&mut buf).unwrap();
                    if n == 0 {
                        break;
                    }
                    assert!(n <= chunk);
                    got.extend_from_slice(&buf[..n]);
                }
                assert_eq!(Some(&got[..]), t.bytes_in(&bytes), "{name} {}", t.id());
                seen += 1;
            }
            assert_eq!(seen, whole.tensors.len());
            assert_eq!(r.read_chunk(&mut buf).unwrap(), 0);
        }
        // Skipping: read only every other tensor, through the Write helper.
        let mut r = DumpReader::open(
            std::fs::File::open(dir().join(name)).unwrap(),
            bytes.len() as u64,
        )
        .unwrap();
        let mut i = 0;
        while let Some(t) = r.next_tensor().unwrap() {
            let t = t.clone();
            if i % 2 == 1 {
                let mut out = Vec::new();
                assert_eq!(r.copy_tensor(&mut out).unwrap(), t.size);
                assert_eq!(Some(&out[..]), t.bytes_in(&bytes), "{name} {}", t.id());
            }
            i += 1;
        }
    }
}

fn variant(e: &DumpFileError) -> String {
    let d = format!("{e:?}");
    d.split([' ', '{', '(']).next().unwrap().to_owned()
}

#[test]
fn every_hostile_file_gives_its_own_error() {
    let m = manifest();
    let hostile = m["hostile"].as_array().unwrap();
    assert!(hostile.len() >= 20);
    for h in hostile {
        let name = h["file"].as_str().unwrap();
        let bytes = read(name);
        let want = h["error"].as_str().unwrap();
        let contains = h["contains"].as_str().unwrap();
        let err = if h["opdebug"].as_bool() == Some(true) {
            let header = decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            let t = header.tensor(TensorKind::Output, 0).unwrap();
            OverflowReport::decode(t.bytes_in(&bytes).unwrap()).unwrap_err()
        } else {
            let e = decode(&bytes).unwrap_err();
            // The streaming reader says the same.
            let s = DumpReader::open(&bytes[..], bytes.len() as u64).unwrap_err();
            assert_eq!(s.to_string(), e.to_string(), "{name}");
            e
        };
        let msg = err.to_string();
        assert_eq!(variant(&err), want, "{name}: {msg}");
        assert!(msg.contains(contains), "{name}: {msg:?} lacks {contains:?}");
    }
}

fn first_fixture() -> Vec<u8> {
    let m = manifest();
    let conv = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"].as_str().unwrap().starts_with("Conv2D."))
        .unwrap();
    read(conv["file"].as_str().unwrap())
}

#[test]
fn limits_are_enforced() {
    let bytes = first_fixture();
    let ok = decode(&bytes).unwrap();
    let Container::Binary { message_len } = ok.container else {
        panic!()
    };
    let small = Limits {
        max_message_len: message_len - 1,
        ..Limits::default()
    };
    let e = decode_with(&bytes, small).unwrap_err();
    assert!(
        matches!(e, DumpFileError::MessageTooLarge { len, limit } if len == message_len && limit == message_len - 1),
        "{e}"
    );
    let e = decode_with(
        &bytes,
        Limits {
            max_tensors: 3,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, DumpFileError::TooManyTensors { limit: 3, .. }),
        "{e}"
    );
    let e = decode_with(
        &bytes,
        Limits {
            max_rank: 4,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, DumpFileError::RankTooLarge { limit: 4, .. }),
        "{e}"
    );
    let e = decode_with(
        &bytes,
        Limits {
            max_depth: 2,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            DumpFileError::Wire {
                problem: WireProblem::TooDeep { limit: 2 },
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        DumpReader::open_with(&bytes[..], bytes.len() as u64, small)
            .unwrap_err()
            .to_string(),
        e_string(decode_with(&bytes, small))
    );
}

fn e_string(r: Result<DumpHeader, DumpFileError>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn a_reader_shorter_than_its_length_names_the_tensor() {
    let bytes = first_fixture();
    let h = decode(&bytes).unwrap();
    let last = h.tensors.iter().rev().find(|t| t.size > 0).unwrap().clone();
    let cut = &bytes[..(last.offset + 2) as usize];
    let mut buf = [0u8; 64];
    // Everything before the cut reads; the cut tensor's read_chunk fails.
    let mut r = DumpReader::open(cut, bytes.len() as u64).unwrap();
    while let Some(t) = r.next_tensor().unwrap() {
        if t.ordinal == last.ordinal {
            break;
        }
    }
    let mut got = 0;
    let e = loop {
        match r.read_chunk(&mut buf) {
            Ok(n) => got += n,
            Err(e) => break e,
        }
    };
    assert_eq!(got, 2);
    let msg = e.to_string();
    assert!(
        matches!(e, DumpFileError::UnexpectedEof { offset, .. } if offset == last.offset + 2),
        "{msg}"
    );
    assert!(msg.contains(&last.id().to_string()), "{msg}");
}

/// A reader whose every call fails.
#[derive(Debug)]
struct Broken;

impl Read for Broken {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        Err(std::io::Error::other("disk on fire"))
    }
}

#[test]
fn io_errors_keep_their_cause() {
    let e = DumpReader::open(Broken, 100).unwrap_err();
    assert!(matches!(e, DumpFileError::Io { offset: 0, .. }), "{e}");
    let src = std::error::Error::source(&e).unwrap();
    assert_eq!(src.to_string(), "disk on fire");
}

/// Hands out a v2 header for one 10 GiB FLOAT output, then `len` bytes it never writes.
#[derive(Debug)]
struct Huge {
    head: Vec<u8>,
    pos: u64,
    len: u64,
    max_read: usize,
}

impl Read for Huge {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if (self.pos as usize) < self.head.len() {
            let from = &self.head[self.pos as usize..];
            let n = from.len().min(buf.len());
            buf[..n].copy_from_slice(&from[..n]);
            self.pos += n as u64;
            return Ok(n);
        }
        let left = self.len - self.pos;
        let n = (left.min(buf.len() as u64) as usize).min(self.max_read);
        self.pos += n as u64;
        Ok(n)
    }
}

#[test]
fn a_ten_gib_file_streams_in_bounded_memory() {
    const SIZE: u64 = 10 << 30;
    // output { data_type: FLOAT, format: ND, shape { dim: [2684354560] }, size: 10 GiB },
    // then a small input after it in the message, whose payload comes first.
    let mut out = vec![0x08, 1, 0x10, 2];
    let mut dim = vec![0x0A];
    let mut v = Vec::new();
    let mut x = SIZE / 4;
    while x >= 0x80 {
        v.push((x as u8) | 0x80);
        x >>= 7;
    }
    v.push(x as u8);
    dim.push(v.len() as u8);
    dim.extend(&v);
    out.push(0x1A);
    out.push(dim.len() as u8);
    out.extend(&dim);
    out.push(0x30);
    let mut s = Vec::new();
    let mut x = SIZE;
    while x >= 0x80 {
        s.push((x as u8) | 0x80);
        x >>= 7;
    }
    s.push(x as u8);
    out.extend(&s);
    let mut msg = vec![0x1A, out.len() as u8];
    msg.extend(&out);
    // A second output of 4 bytes after the huge one.
    msg.extend([0x1A, 4, 0x08, 1, 0x30, 4]);
    let mut head = (msg.len() as u64).to_le_bytes().to_vec();
    head.extend(&msg);
    let file_len = head.len() as u64 + SIZE + 4;
    let src = Huge {
        head,
        pos: 0,
        len: file_len,
        max_read: 1 << 20,
    };
    let mut r = DumpReader::open(src, file_len).unwrap();
    assert_eq!(r.header().tensors[0].size, SIZE);
    assert_eq!(r.header().tensors[0].shape_bytes(), Some(SIZE));
    let mut buf = vec![0u8; 1 << 20];
    let t = r.next_tensor().unwrap().unwrap().clone();
    let mut total = 0u64;
    // Read the first 100 MiB in chunks, skip the rest by asking for the next tensor.
    while total < 100 << 20 {
        total += r.read_chunk(&mut buf).unwrap() as u64;
    }
    let t2 = r.next_tensor().unwrap().unwrap().clone();
    assert_eq!(t2.offset, t.end());
    assert_eq!(r.position(), t.end());
    let mut small = [0u8; 8];
    assert_eq!(r.read_chunk(&mut small).unwrap(), 4);
    assert!(r.next_tensor().unwrap().is_none());
}

#[cfg(feature = "serde")]
#[test]
fn overflow_reports_serialize_like_to_json() {
    let m = manifest();
    let mut n = 0;
    for f in m["files"].as_array().unwrap() {
        let name = f["file"].as_str().unwrap();
        if !dump_device_ascend::dumpfile::is_opdebug_file(name) {
            continue;
        }
        let bytes = read(name);
        let h = decode(&bytes).unwrap();
        let t = h.tensor(TensorKind::Output, 0).unwrap();
        let r = OverflowReport::decode(t.bytes_in(&bytes).unwrap()).unwrap();
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r.to_json(None),
            "{name}"
        );
        n += 1;
    }
    assert_eq!(n, 5);
}

/// The header without what depends on where things landed in the file.
fn placed_fields_cleared(h: &DumpHeader) -> DumpHeader {
    let mut h = h.clone();
    h.container = Container::Binary { message_len: 0 };
    h.file_len = 0;
    h.payload_end = 0;
    for t in &mut h.tensors {
        t.offset = 0;
    }
    h
}

#[test]
fn encoding_gives_the_protobuf_packages_bytes_and_decodes_back() {
    let m = manifest();
    let mut identical = 0;
    for f in m["files"].as_array().unwrap() {
        let name = f["file"].as_str().unwrap();
        let bytes = read(name);
        let h = decode(&bytes).unwrap();
        let payloads: Vec<&[u8]> = h
            .tensors
            .iter()
            .map(|t| t.bytes_in(&bytes).unwrap())
            .collect();
        let again = dump_device_ascend::dumpfile::encode(&h, &payloads).unwrap();
        // Written by the protobuf package: the same bytes, except the files with trailing
        // bytes (Add) or hand-made encodings (Relu: unpacked dims, unknown fields).
        if name.starts_with("Add.") || name.starts_with("Relu.") {
            assert_ne!(again, bytes, "{name}");
        } else {
            assert_eq!(again, bytes, "{name}");
            identical += 1;
        }
        let h2 = decode(&again).unwrap();
        assert_eq!(
            placed_fields_cleared(&h2),
            placed_fields_cleared(&h),
            "{name}"
        );
        for (t, p) in h2.tensors.iter().zip(&payloads) {
            assert_eq!(t.bytes_in(&again), Some(*p), "{name}");
        }
        if let Container::Binary { message_len } = h2.container {
            let msg = dump_device_ascend::dumpfile::encode_message(&h);
            assert_eq!(msg.len() as u64, message_len);
            assert_eq!(&again[8..8 + msg.len()], &msg[..]);
        }
    }
    assert!(identical >= 50, "{identical}");
}

#[test]
fn encoding_refuses_payloads_that_do_not_match() {
    use dump_device_ascend::dumpfile::encode;
    let bytes = first_fixture();
    let h = decode(&bytes).unwrap();
    let payloads: Vec<&[u8]> = h
        .tensors
        .iter()
        .map(|t| t.bytes_in(&bytes).unwrap())
        .collect();
    let e = encode(&h, &payloads[1..]).unwrap_err();
    assert!(matches!(e, DumpFileError::PayloadCount { .. }), "{e}");
    let mut short = payloads.clone();
    short[1] = &short[1][1..];
    let e = encode(&h, &short).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: payload of {} bytes where its size is {}",
            h.tensors[1].id(),
            h.tensors[1].size - 1,
            h.tensors[1].size
        )
    );
    let mut swapped = h.clone();
    swapped.tensors.swap(0, h.tensors.len() - 1);
    let mut p = payloads.clone();
    p.swap(0, h.tensors.len() - 1);
    let e = encode(&swapped, &p).unwrap_err();
    assert!(matches!(e, DumpFileError::TensorOrder { .. }), "{e}");
}

#[test]
fn seeking_reads_tensors_in_any_order() {
    let m = manifest();
    for f in m["files"].as_array().unwrap() {
        let name = f["file"].as_str().unwrap();
        let bytes = read(name);
        let whole = decode(&bytes).unwrap();
        // Not at offset 0 of the source: the reader counts from where it started.
        let mut src = std::io::Cursor::new([vec![0xEE; 5], bytes.clone()].concat());
        src.set_position(5);
        let mut r = DumpReader::open(src, bytes.len() as u64).unwrap();
        let mut buf = [0u8; 5];
        for i in (0..whole.tensors.len()).rev().chain(0..whole.tensors.len()) {
            let t = r.seek_tensor(i).unwrap().unwrap().clone();
            let mut got = Vec::new();
            loop {
                let n = r.read_chunk(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(Some(&got[..]), t.bytes_in(&bytes), "{name} {}", t.id());
        }
        assert!(r.seek_tensor(whole.tensors.len()).unwrap().is_none());
    }
}
