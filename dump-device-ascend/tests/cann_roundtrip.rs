//! `dumpfile::encode` then `decode` gives back the header and payloads, for random headers of
//! both variants (every field, negative enums, values up to `u64::MAX`).
#![cfg(feature = "std")]

use dump_device_ascend::dumpfile::{
    CannDType, CannFormat, Container, DumpHeader, DumpReader, OpAttr, OriginalOp, TensorKind,
    TensorMeta, decode, encode,
};
use proptest::prelude::*;

fn kind() -> impl Strategy<Value = TensorKind> {
    prop_oneof![
        Just(TensorKind::Input),
        Just(TensorKind::Output),
        Just(TensorKind::Buffer),
        Just(TensorKind::Workspace),
    ]
}

/// A tensor of `kind` with the fields that kind has, and its payload.
fn tensor() -> impl Strategy<Value = (TensorMeta, Vec<u8>)> {
    (
        kind(),
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
        proptest::collection::vec(any::<u64>(), 0..5),
        proptest::option::of(proptest::collection::vec(0u64..100, 0..5)),
        any::<(u64, u64, Option<u32>, u32)>(),
        proptest::option::of(("[a-z/]{0,8}", any::<u32>(), any::<i32>(), any::<i32>())),
        proptest::collection::vec(any::<(u64, u64)>(), 0..3),
        proptest::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(
            |(kind, dt, fmt, sub, shape, orig, (addr, aoff, arg, itype), op, ranges, data)| {
                let io = matches!(kind, TensorKind::Input | TensorKind::Output);
                let out = kind == TensorKind::Output;
                let t = TensorMeta {
                    kind,
                    index: 0,
                    ordinal: 0,
                    data_type: CannDType(if io { dt } else { 0 }),
                    format: CannFormat(if io { fmt } else { 0 }),
                    sub_format: if io { sub } else { 0 },
                    shape: if io { shape } else { Vec::new() },
                    original_shape: if io { orig } else { None },
                    size: data.len() as u64,
                    offset: 0,
                    address: if io { addr } else { 0 },
                    address_offset: if io { aoff } else { 0 },
                    arg_index: if kind == TensorKind::Buffer {
                        None
                    } else {
                        arg
                    },
                    input_type: if kind == TensorKind::Input { itype } else { 0 },
                    buffer_type: if io { 0 } else { dt },
                    original_op: op
                        .filter(|_| out)
                        .map(|(name, output_index, d, f)| OriginalOp {
                            name,
                            output_index,
                            data_type: CannDType(d),
                            format: CannFormat(f),
                        }),
                    dim_range: if out { ranges } else { Vec::new() },
                };
                (t, data)
            },
        )
}

fn header() -> impl Strategy<Value = (DumpHeader, Vec<Vec<u8>>)> {
    (
        any::<bool>(),
        "[0-9.]{0,4}",
        1u64..,
        "[ -~]{0,20}",
        proptest::collection::vec(("[a-z]{0,5}", "[ -~]{0,10}"), 0..3),
        "[ -~]{0,10}",
        proptest::collection::vec(tensor(), 0..8),
    )
        .prop_map(
            |(inline, version, dump_time, op_name, attrs, dfx, mut ts)| {
                ts.sort_by_key(|(t, _)| t.kind);
                let mut counts = [0usize; 4];
                let (mut tensors, mut payloads) = (Vec::new(), Vec::new());
                for (i, (mut t, p)) in ts.into_iter().enumerate() {
                    t.ordinal = i;
                    t.index = counts[t.kind as usize];
                    counts[t.kind as usize] += 1;
                    tensors.push(t);
                    payloads.push(p);
                }
                let h = DumpHeader {
                    container: if inline {
                        Container::Inline
                    } else {
                        Container::Binary { message_len: 0 }
                    },
                    // v1 files must not say "2.0" and start with the version (tag 0x0A).
                    version: if inline {
                        format!("1{version}")
                    } else {
                        version
                    },
                    dump_time,
                    op_name,
                    attrs: attrs
                        .into_iter()
                        .map(|(name, value)| OpAttr { name, value })
                        .collect(),
                    dfx_message: dfx,
                    tensors,
                    file_len: 0,
                    payload_end: 0,
                };
                (h, payloads)
            },
        )
}

fn cleared(h: &DumpHeader) -> DumpHeader {
    let mut h = h.clone();
    if let Container::Binary { .. } = h.container {
        h.container = Container::Binary { message_len: 0 };
    }
    h.file_len = 0;
    h.payload_end = 0;
    for t in &mut h.tensors {
        t.offset = 0;
    }
    h
}

proptest! {
    #[test]
    fn encode_then_decode_is_the_identity((h, payloads) in header()) {
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let file = encode(&h, &refs).unwrap();
        let back = decode(&file).unwrap();
        prop_assert_eq!(cleared(&back), cleared(&h));
        for (t, p) in back.tensors.iter().zip(&payloads) {
            prop_assert_eq!(t.bytes_in(&file), Some(&p[..]));
        }
        let mut r = DumpReader::open(&file[..], file.len() as u64).unwrap();
        prop_assert_eq!(r.header(), &back);
        let mut i = 0;
        while let Some(t) = r.next_tensor().unwrap() {
            let want = t.bytes_in(&file).unwrap().to_vec();
            let mut got = Vec::new();
            r.copy_tensor(&mut got).unwrap();
            prop_assert_eq!(got, want);
            i += 1;
        }
        prop_assert_eq!(i, payloads.len());
    }
}
