//! Writing CANN dump files: the `DumpData` message of a [`DumpHeader`] and whole files of
//! either variant, the inverse of [`decode`](super::decode). Fields are written in field-number
//! order and, as proto3 does, scalars and strings equal to their default are left out;
//! `Some` sub-messages (`original_shape`, `original_op`) and `arg_index` are always written.

use super::error::DumpFileError;
use super::header::{Container, DumpHeader, TensorKind, TensorMeta};
use super::message::{Role, role};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, number: u32, wire_type: u8) {
    varint(out, u64::from(number) << 3 | u64::from(wire_type));
}

fn field_varint(out: &mut Vec<u8>, number: u32, v: u64) {
    if v != 0 {
        tag(out, number, 0);
        varint(out, v);
    }
}

/// An `int32` / enum: negative values are sign-extended to 64 bits (10-byte varints).
fn field_i32(out: &mut Vec<u8>, number: u32, v: i32) {
    field_varint(out, number, i64::from(v) as u64);
}

fn field_bytes(out: &mut Vec<u8>, number: u32, b: &[u8]) {
    tag(out, number, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn field_string(out: &mut Vec<u8>, number: u32, s: &str) {
    if !s.is_empty() {
        field_bytes(out, number, s.as_bytes());
    }
}

fn shape(dims: &[u64]) -> Vec<u8> {
    let mut packed = Vec::new();
    for &d in dims {
        varint(&mut packed, d);
    }
    let mut m = Vec::new();
    if !packed.is_empty() {
        field_bytes(&mut m, 1, &packed);
    }
    m
}

/// One tensor record; `data` is written into the `data` field (v1) when `Some`, else `size`.
fn tensor(t: &TensorMeta, data: Option<&[u8]>) -> Vec<u8> {
    let mut m = Vec::new();
    for number in 1..=12 {
        let Some(r) = role(t.kind, number) else {
            continue;
        };
        match r {
            Role::DataType => field_i32(&mut m, number, t.data_type.0),
            Role::Format => field_i32(&mut m, number, t.format.0),
            Role::SubFormat => field_i32(&mut m, number, t.sub_format),
            Role::BufferType => field_i32(&mut m, number, t.buffer_type),
            Role::Address => field_varint(&mut m, number, t.address),
            Role::Offset => field_varint(&mut m, number, t.address_offset),
            Role::InputType => field_varint(&mut m, number, u64::from(t.input_type)),
            Role::ArgIndex => {
                if let Some(a) = t.arg_index {
                    tag(&mut m, number, 0);
                    varint(&mut m, u64::from(a));
                }
            }
            Role::Shape => {
                if !t.shape.is_empty() {
                    field_bytes(&mut m, number, &shape(&t.shape));
                }
            }
            Role::OriginalShape => {
                if let Some(s) = &t.original_shape {
                    field_bytes(&mut m, number, &shape(s));
                }
            }
            Role::Data => {
                if let Some(d) = data.filter(|d| !d.is_empty()) {
                    field_bytes(&mut m, number, d);
                }
            }
            Role::Size => {
                if data.is_none() {
                    field_varint(&mut m, number, t.size);
                }
            }
            Role::OriginalOp => {
                if let Some(o) = &t.original_op {
                    let mut b = Vec::new();
                    field_string(&mut b, 1, &o.name);
                    field_varint(&mut b, 2, u64::from(o.output_index));
                    field_i32(&mut b, 3, o.data_type.0);
                    field_i32(&mut b, 4, o.format.0);
                    field_bytes(&mut m, number, &b);
                }
            }
            Role::DimRange => {
                for &(a, b) in &t.dim_range {
                    let mut r = Vec::new();
                    field_varint(&mut r, 1, a);
                    field_varint(&mut r, 2, b);
                    field_bytes(&mut m, number, &r);
                }
            }
        }
    }
    m
}

fn message(h: &DumpHeader, payloads: Option<&[&[u8]]>) -> Vec<u8> {
    let mut m = Vec::new();
    field_string(&mut m, 1, &h.version);
    field_varint(&mut m, 2, h.dump_time);
    let data = |i: usize| payloads.and_then(|p| p.get(i).copied());
    for (number, kind) in [
        (3, TensorKind::Output),
        (4, TensorKind::Input),
        (5, TensorKind::Buffer),
    ] {
        for (i, t) in h.tensors.iter().enumerate().filter(|(_, t)| t.kind == kind) {
            field_bytes(&mut m, number, &tensor(t, data(i)));
        }
    }
    field_string(&mut m, 6, &h.op_name);
    for a in &h.attrs {
        let mut b = Vec::new();
        field_string(&mut b, 1, &a.name);
        field_string(&mut b, 2, &a.value);
        field_bytes(&mut m, 7, &b);
    }
    for (i, t) in h.tensors.iter().enumerate() {
        if t.kind == TensorKind::Workspace {
            field_bytes(&mut m, 8, &tensor(t, data(i)));
        }
    }
    field_string(&mut m, 9, &h.dfx_message);
    m
}

/// The `DumpData` message of a v2 (binary) file: every tensor with its `size`, no data. A
/// streaming writer writes `(len as u64).to_le_bytes()`, this message, then the payloads in
/// [`DumpHeader::tensors`] order (which must be inputs, outputs, buffers, workspaces).
pub fn encode_message(header: &DumpHeader) -> Vec<u8> {
    message(header, None)
}

/// A whole file in the variant `header.container` says (`Binary`: length, message, payloads;
/// `Inline`: one message with the payloads in the `data` fields). `payloads[i]` is the bytes
/// of `header.tensors[i]` and must be `size` bytes long; the tensors must be in payload order
/// (inputs, outputs, buffers, workspaces). The header's offsets, `message_len`, `file_len`
/// and `payload_end` are ignored: decoding the result computes them.
pub fn encode(header: &DumpHeader, payloads: &[&[u8]]) -> Result<Vec<u8>, DumpFileError> {
    if payloads.len() != header.tensors.len() {
        return Err(DumpFileError::PayloadCount {
            expected: header.tensors.len(),
            actual: payloads.len(),
        });
    }
    let mut last = TensorKind::Input;
    for (t, p) in header.tensors.iter().zip(payloads) {
        if p.len() as u64 != t.size {
            return Err(DumpFileError::PayloadSize {
                tensor: t.id(),
                expected: t.size,
                actual: p.len() as u64,
            });
        }
        if t.kind < last {
            return Err(DumpFileError::TensorOrder { tensor: t.id() });
        }
        last = t.kind;
    }
    Ok(match header.container {
        Container::Inline => message(header, Some(payloads)),
        Container::Binary { .. } => {
            let msg = encode_message(header);
            let total: usize = payloads.iter().map(|p| p.len()).sum();
            let mut out = Vec::with_capacity(8 + msg.len() + total);
            out.extend_from_slice(&(msg.len() as u64).to_le_bytes());
            out.extend_from_slice(&msg);
            for p in payloads {
                out.extend_from_slice(p);
            }
            out
        }
    })
}
