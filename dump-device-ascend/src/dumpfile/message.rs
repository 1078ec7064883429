//! Decoding the `DumpData` message (spec §2) with [`super::wire`]: field numbers per message
//! type, unknown fields skipped, absent fields left at protobuf's defaults.

use super::error::{DumpFileError, WireProblem};
use super::header::{Limits, OpAttr, OriginalOp, TensorKind, TensorMeta};
use super::wire::{Field, LEN, PACKABLE, Schema, VARINT, Value, Wire};
use super::{CannDType, CannFormat};

const DUMP_DATA: Schema = Schema {
    name: "DumpData",
    fields: &[
        (1, "version", LEN),
        (2, "dump_time", VARINT),
        (3, "output", LEN),
        (4, "input", LEN),
        (5, "buffer", LEN),
        (6, "op_name", LEN),
        (7, "attr", LEN),
        (8, "space", LEN),
        (9, "dfx_message", LEN),
    ],
};

const OP_OUTPUT: Schema = Schema {
    name: "OpOutput",
    fields: &[
        (1, "data_type", VARINT),
        (2, "format", VARINT),
        (3, "shape", LEN),
        (4, "original_op", LEN),
        (5, "data", LEN),
        (6, "size", VARINT),
        (7, "original_shape", LEN),
        (8, "sub_format", VARINT),
        (9, "address", VARINT),
        (10, "dim_range", LEN),
        (11, "offset", VARINT),
        (12, "arg_index", VARINT),
    ],
};

const OP_INPUT: Schema = Schema {
    name: "OpInput",
    fields: &[
        (1, "data_type", VARINT),
        (2, "format", VARINT),
        (3, "shape", LEN),
        (4, "data", LEN),
        (5, "size", VARINT),
        (6, "original_shape", LEN),
        (7, "sub_format", VARINT),
        (8, "address", VARINT),
        (9, "offset", VARINT),
        (10, "arg_index", VARINT),
        (11, "input_type", VARINT),
    ],
};

const OP_BUFFER: Schema = Schema {
    name: "OpBuffer",
    fields: &[
        (1, "buffer_type", VARINT),
        (2, "data", LEN),
        (3, "size", VARINT),
    ],
};

const WORKSPACE: Schema = Schema {
    name: "Workspace",
    fields: &[
        (1, "type", VARINT),
        (2, "data", LEN),
        (3, "size", VARINT),
        (4, "arg_index", VARINT),
    ],
};

const SHAPE: Schema = Schema {
    name: "Shape",
    fields: &[(1, "dim", PACKABLE)],
};

const ORIGINAL_OP: Schema = Schema {
    name: "OriginalOp",
    fields: &[
        (1, "name", LEN),
        (2, "output_index", VARINT),
        (3, "data_type", VARINT),
        (4, "format", VARINT),
    ],
};

const DIM_RANGE: Schema = Schema {
    name: "DimRange",
    fields: &[(1, "dim_start", VARINT), (2, "dim_end", VARINT)],
};

const OP_ATTR: Schema = Schema {
    name: "OpAttr",
    fields: &[(1, "name", LEN), (2, "value", LEN)],
};

/// What a tensor message's field means, whatever its number in that message type.
#[derive(Clone, Copy)]
pub(super) enum Role {
    DataType,
    Format,
    Shape,
    OriginalOp,
    Data,
    Size,
    OriginalShape,
    SubFormat,
    Address,
    DimRange,
    Offset,
    ArgIndex,
    InputType,
    BufferType,
}

pub(super) fn role(kind: TensorKind, number: u32) -> Option<Role> {
    use Role::*;
    let table: &[Role] = match kind {
        TensorKind::Output => &[
            DataType,
            Format,
            Shape,
            OriginalOp,
            Data,
            Size,
            OriginalShape,
            SubFormat,
            Address,
            DimRange,
            Offset,
            ArgIndex,
        ],
        TensorKind::Input => &[
            DataType,
            Format,
            Shape,
            Data,
            Size,
            OriginalShape,
            SubFormat,
            Address,
            Offset,
            ArgIndex,
            InputType,
        ],
        TensorKind::Buffer => &[BufferType, Data, Size],
        TensorKind::Workspace => &[BufferType, Data, Size, ArgIndex],
    };
    table
        .get(usize::try_from(number).ok()?.checked_sub(1)?)
        .copied()
}

fn schema(kind: TensorKind) -> &'static Schema {
    match kind {
        TensorKind::Output => &OP_OUTPUT,
        TensorKind::Input => &OP_INPUT,
        TensorKind::Buffer => &OP_BUFFER,
        TensorKind::Workspace => &WORKSPACE,
    }
}

/// A tensor record before its payload is placed: the metadata and its `data` field.
pub(super) struct RawTensor {
    /// Metadata; `ordinal`, `offset` (and for v1 `size`) are filled in by the container.
    pub meta: TensorMeta,
    /// The `data` field: file offset and length (0, 0 when absent).
    pub data: (u64, u64),
}

/// The decoded message.
#[derive(Default)]
pub(super) struct Message {
    pub version: String,
    pub dump_time: u64,
    pub op_name: String,
    pub attrs: Vec<OpAttr>,
    pub dfx_message: String,
    /// Per kind, in index order: inputs, outputs, buffers, workspaces.
    pub tensors: [Vec<RawTensor>; 4],
}

struct Ctx {
    limits: Limits,
    count: usize,
}

fn bytes<'a>(f: &Field<'a>) -> (&'a [u8], u64) {
    match f.value {
        Value::Bytes(b, off) => (b, off),
        _ => (&[], f.offset),
    }
}

fn string(f: &Field<'_>) -> String {
    String::from_utf8_lossy(bytes(f).0).into_owned()
}

fn check_depth(
    depth: usize,
    limits: &Limits,
    at: u64,
    schema: &Schema,
) -> Result<(), DumpFileError> {
    if depth > limits.max_depth {
        return Err(DumpFileError::Wire {
            offset: at,
            field: schema.path(0),
            problem: WireProblem::TooDeep {
                limit: limits.max_depth,
            },
        });
    }
    Ok(())
}

/// Decodes a `DumpData` message; `base` is the file offset of `buf[0]`.
pub(super) fn decode(buf: &[u8], base: u64, limits: Limits) -> Result<Message, DumpFileError> {
    check_depth(1, &limits, base, &DUMP_DATA)?;
    let mut ctx = Ctx { limits, count: 0 };
    let mut m = Message::default();
    let mut w = Wire::new(buf, base);
    while let Some(f) = w.next(&DUMP_DATA)? {
        match f.number {
            1 => m.version = string(&f),
            2 => m.dump_time = f.u64(),
            6 => m.op_name = string(&f),
            9 => m.dfx_message = string(&f),
            7 => {
                let (b, off) = bytes(&f);
                check_depth(2, &limits, off, &OP_ATTR)?;
                let mut a = OpAttr::default();
                let mut w = Wire::new(b, off);
                while let Some(g) = w.next(&OP_ATTR)? {
                    match g.number {
                        1 => a.name = string(&g),
                        _ => a.value = string(&g),
                    }
                }
                m.attrs.push(a);
            }
            n => {
                let kind = match n {
                    3 => TensorKind::Output,
                    4 => TensorKind::Input,
                    5 => TensorKind::Buffer,
                    _ => TensorKind::Workspace,
                };
                if ctx.count >= ctx.limits.max_tensors {
                    return Err(DumpFileError::TooManyTensors {
                        offset: f.offset,
                        limit: ctx.limits.max_tensors,
                    });
                }
                ctx.count += 1;
                let (b, off) = bytes(&f);
                let slot = &mut m.tensors[kind as usize];
                let index = slot.len();
                let t = tensor(b, off, kind, index, &ctx)?;
                slot.push(t);
            }
        }
    }
    Ok(m)
}

fn tensor(
    buf: &[u8],
    base: u64,
    kind: TensorKind,
    index: usize,
    ctx: &Ctx,
) -> Result<RawTensor, DumpFileError> {
    let schema = schema(kind);
    check_depth(2, &ctx.limits, base, schema)?;
    let mut t = TensorMeta {
        kind,
        index,
        ordinal: 0,
        data_type: CannDType::UNDEFINED,
        format: CannFormat::NCHW,
        sub_format: 0,
        shape: Vec::new(),
        original_shape: None,
        size: 0,
        offset: 0,
        address: 0,
        address_offset: 0,
        arg_index: None,
        input_type: 0,
        buffer_type: 0,
        original_op: None,
        dim_range: Vec::new(),
    };
    let mut data = (0, 0);
    let mut w = Wire::new(buf, base);
    while let Some(f) = w.next(schema)? {
        let Some(r) = role(kind, f.number) else {
            continue;
        };
        match r {
            Role::DataType => t.data_type = CannDType(f.i32()),
            Role::Format => t.format = CannFormat(f.i32()),
            Role::SubFormat => t.sub_format = f.i32(),
            Role::Size => t.size = f.u64(),
            Role::Address => t.address = f.u64(),
            Role::Offset => t.address_offset = f.u64(),
            Role::ArgIndex => t.arg_index = Some(f.u32()),
            Role::InputType => t.input_type = f.u32(),
            Role::BufferType => t.buffer_type = f.i32(),
            Role::Data => {
                let (b, off) = bytes(&f);
                data = (off, b.len() as u64);
            }
            Role::Shape => shape(&f, &mut t.shape, ctx)?,
            Role::OriginalShape => {
                let dims = t.original_shape.get_or_insert_with(Vec::new);
                shape(&f, dims, ctx)?;
            }
            Role::OriginalOp => {
                let (b, off) = bytes(&f);
                check_depth(3, &ctx.limits, off, &ORIGINAL_OP)?;
                let op = t.original_op.get_or_insert_with(OriginalOp::default);
                let mut w = Wire::new(b, off);
                while let Some(g) = w.next(&ORIGINAL_OP)? {
                    match g.number {
                        1 => op.name = string(&g),
                        2 => op.output_index = g.u32(),
                        3 => op.data_type = CannDType(g.i32()),
                        _ => op.format = CannFormat(g.i32()),
                    }
                }
            }
            Role::DimRange => {
                let (b, off) = bytes(&f);
                check_depth(3, &ctx.limits, off, &DIM_RANGE)?;
                if t.dim_range.len() >= ctx.limits.max_rank {
                    return Err(DumpFileError::RankTooLarge {
                        offset: f.offset,
                        limit: ctx.limits.max_rank,
                    });
                }
                let mut range = (0, 0);
                let mut w = Wire::new(b, off);
                while let Some(g) = w.next(&DIM_RANGE)? {
                    match g.number {
                        1 => range.0 = g.u64(),
                        _ => range.1 = g.u64(),
                    }
                }
                t.dim_range.push(range);
            }
        }
    }
    Ok(RawTensor { meta: t, data })
}

/// Appends a `Shape` message's dims (packed or not) to `dims`.
fn shape(f: &Field<'_>, dims: &mut Vec<u64>, ctx: &Ctx) -> Result<(), DumpFileError> {
    let (b, off) = bytes(f);
    check_depth(3, &ctx.limits, off, &SHAPE)?;
    let push = |dims: &mut Vec<u64>, d: u64, at: u64| {
        if dims.len() >= ctx.limits.max_rank {
            return Err(DumpFileError::RankTooLarge {
                offset: at,
                limit: ctx.limits.max_rank,
            });
        }
        dims.push(d);
        Ok(())
    };
    let mut w = Wire::new(b, off);
    while let Some(g) = w.next(&SHAPE)? {
        match g.value {
            Value::Bytes(packed, poff) => {
                let mut p = Wire::new(packed, poff);
                while !p.at_end() {
                    let at = p.offset();
                    let d = p.varint(SHAPE.path(1))?;
                    push(dims, d, at)?;
                }
            }
            _ => push(dims, g.u64(), g.offset)?,
        }
    }
    Ok(())
}
