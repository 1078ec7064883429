//! [`DumpFileError`]: everything that can go wrong reading a CANN dump file, with the byte
//! offset, the field, the value found and what is allowed.

use super::{CannDType, TensorKind};

/// Where in the message a protobuf problem was found: the message type and the field number
/// and name (`"OpOutput"`, `6`, `"size"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldPath {
    /// The message type (`DumpData`, `OpOutput`, `Shape`, ...).
    pub message: &'static str,
    /// The field number, 0 when the problem is in a tag itself.
    pub number: u32,
    /// The field name from the spec, `"?"` for unknown fields.
    pub name: &'static str,
}

impl core::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{} (field {})", self.message, self.name, self.number)
    }
}

/// Which tensor an error is about: its position among all payloads (input, output, buffer,
/// workspace order), its kind and its index within the kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorId {
    /// Position among all tensors, in payload order.
    pub ordinal: usize,
    /// Input, output, buffer or workspace.
    pub kind: TensorKind,
    /// Index within its kind.
    pub index: usize,
}

impl core::fmt::Display for TensorId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "tensor {} ({} {})",
            self.ordinal,
            self.kind.name(),
            self.index
        )
    }
}

/// Everything that can go wrong decoding a CANN dump file or an overflow (`Opdebug`) block.
///
/// Every variant says where (a byte offset from the start of the file, or of the overflow
/// block), what was found and what is allowed. Reading errors keep their [`std::io::Error`]
/// as [`source`](std::error::Error::source).
#[derive(Debug)]
#[non_exhaustive]
pub enum DumpFileError {
    /// The file is too short to hold the 8-byte header and a message.
    TooShort {
        /// The file's length.
        file_len: u64,
    },
    /// The `u32` at offset 8 is `0x5A5A5A5A`: msaccucmp's "nano" TLV container, whose record
    /// layout the spec does not give, so it is not decoded.
    NanoContainer,
    /// The 8-byte header declares a message that does not fit in the file, and the file is not
    /// an inline (v1) message either.
    MessageLength {
        /// The declared message length.
        declared: u64,
        /// Bytes after the header (`file_len - 8`).
        available: u64,
    },
    /// A message (or, for the inline variant, the whole file) is longer than
    /// [`Limits::max_message_len`](super::Limits::max_message_len).
    MessageTooLarge {
        /// The message's length in bytes.
        len: u64,
        /// The limit in force.
        limit: u64,
    },
    /// A protobuf encoding error at `offset` (bytes from the start of the file).
    Wire {
        /// Byte offset in the file.
        offset: u64,
        /// The field being read.
        field: FieldPath,
        /// What is wrong.
        problem: WireProblem,
    },
    /// More tensors (inputs + outputs + buffers + workspaces) than
    /// [`Limits::max_tensors`](super::Limits::max_tensors).
    TooManyTensors {
        /// Byte offset of the tensor record that went past the limit.
        offset: u64,
        /// The limit in force.
        limit: usize,
    },
    /// A shape with more dimensions than [`Limits::max_rank`](super::Limits::max_rank).
    RankTooLarge {
        /// Byte offset of the dimension that went past the limit.
        offset: u64,
        /// The limit in force.
        limit: usize,
    },
    /// A tensor's payload (at `offset`, `size` bytes) ends after the end of the file.
    PayloadPastEnd {
        /// The tensor.
        tensor: TensorId,
        /// Its declared size (`size` field).
        size: u64,
        /// Where its payload starts.
        offset: u64,
        /// The file's length.
        file_len: u64,
    },
    /// A tensor's data type has no workspace [`DType`](dump_core::DType) (HIFLOAT8,
    /// FLOAT8_E8M0, QINT8, STRING, ...): its bytes are available but cannot be converted.
    UnsupportedDType {
        /// The tensor.
        tensor: TensorId,
        /// Its CANN data type.
        data_type: CannDType,
    },
    /// [`encode`](super::encode) was given another number of payloads than the header has
    /// tensors.
    PayloadCount {
        /// Tensors in the header.
        expected: usize,
        /// Payloads given.
        actual: usize,
    },
    /// [`encode`](super::encode) was given a payload that is not its tensor's `size` bytes.
    PayloadSize {
        /// The tensor.
        tensor: TensorId,
        /// Its `size`.
        expected: u64,
        /// The payload's length.
        actual: u64,
    },
    /// [`encode`](super::encode) was given tensors out of payload order (inputs, outputs,
    /// buffers, workspaces): this one follows a later kind.
    TensorOrder {
        /// The tensor out of order.
        tensor: TensorId,
    },
    /// The reader ended (end of input) before the bytes the header promised.
    UnexpectedEof {
        /// The byte offset where more data was expected.
        offset: u64,
        /// What was being read (`"header"`, `"message"`, `"tensor 2 (output 0)"`, ...).
        reading: String,
    },
    /// The underlying reader failed.
    Io {
        /// The byte offset being read.
        offset: u64,
        /// The reader's error.
        source: std::io::Error,
    },
    /// An overflow (`Opdebug`) block could not be decoded.
    OpDebug {
        /// Byte offset in the block.
        offset: usize,
        /// What is wrong.
        problem: &'static str,
        /// The value found (a length, a tag, a count).
        value: u64,
    },
}

/// What is wrong with one piece of protobuf encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireProblem {
    /// The input ends inside a varint, a fixed-size value or a length-delimited field.
    Truncated {
        /// Bytes needed from the offset.
        needed: u64,
        /// Bytes left in the enclosing message.
        left: u64,
    },
    /// A varint longer than 10 bytes or with bits beyond 64.
    VarintOverflow,
    /// Field number 0 or above 2^29 - 1.
    FieldNumber(u64),
    /// A wire type protobuf does not define (6, 7) or the deprecated groups (3, 4).
    WireType(u8),
    /// A known field arrived with another wire type than the one the spec gives.
    WrongWireType {
        /// The wire type found.
        found: u8,
        /// The wire type of the field's type.
        expected: u8,
    },
    /// Messages nested deeper than [`Limits::max_depth`](super::Limits::max_depth).
    TooDeep {
        /// The limit in force.
        limit: usize,
    },
}

impl core::fmt::Display for WireProblem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WireProblem::Truncated { needed, left } => write!(
                f,
                "needs {needed} bytes but only {left} are left in the enclosing message"
            ),
            WireProblem::VarintOverflow => {
                f.write_str("varint longer than 10 bytes or wider than 64 bits")
            }
            WireProblem::FieldNumber(n) => {
                write!(f, "field number {n} (allowed: 1 to 536870911)")
            }
            WireProblem::WireType(t) => write!(
                f,
                "wire type {t} (allowed: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32)"
            ),
            WireProblem::WrongWireType { found, expected } => {
                write!(f, "wire type {found}, expected {expected}")
            }
            WireProblem::TooDeep { limit } => {
                write!(f, "messages nested deeper than {limit} levels")
            }
        }
    }
}

impl core::fmt::Display for DumpFileError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DumpFileError::TooShort { file_len } => write!(
                f,
                "file is {file_len} bytes; a CANN dump file must be greater than 8 bytes"
            ),
            DumpFileError::NanoContainer => f.write_str(
                "bytes 8..12 are 0x5A5A5A5A: a \"nano\" TLV dump, which is not supported \
                 (only the binary (v2) and inline protobuf (v1) containers are)",
            ),
            DumpFileError::MessageLength {
                declared,
                available,
            } => write!(
                f,
                "header at byte 0 declares a {declared}-byte message but only {available} bytes \
                 follow it (and the file is not an inline protobuf dump either)"
            ),
            DumpFileError::MessageTooLarge { len, limit } => write!(
                f,
                "message of {len} bytes exceeds the limit of {limit} bytes (Limits::max_message_len)"
            ),
            DumpFileError::Wire {
                offset,
                field,
                problem,
            } => write!(f, "protobuf at byte {offset}, {field}: {problem}"),
            DumpFileError::TooManyTensors { offset, limit } => write!(
                f,
                "tensor record at byte {offset} exceeds the limit of {limit} tensors \
                 (Limits::max_tensors)"
            ),
            DumpFileError::RankTooLarge { offset, limit } => write!(
                f,
                "shape dimension at byte {offset} exceeds the limit of {limit} dimensions \
                 (Limits::max_rank)"
            ),
            DumpFileError::PayloadPastEnd {
                tensor,
                size,
                offset,
                file_len,
            } => write!(
                f,
                "{tensor} declares {size} bytes from byte {offset} but the file ends at byte \
                 {file_len}"
            ),
            DumpFileError::UnsupportedDType { tensor, data_type } => write!(
                f,
                "{tensor} has data type {data_type} ({}), which has no host dtype (supported: \
                 FLOAT, FLOAT16, BF16, DOUBLE, FLOAT8_E5M2, FLOAT8_E4M3FN, INT4/8/16/32/64, \
                 UINT1/8/16/32/64, BOOL, COMPLEX64/128)",
                data_type.0
            ),
            DumpFileError::PayloadCount { expected, actual } => write!(
                f,
                "the header has {expected} tensors but {actual} payloads were given"
            ),
            DumpFileError::PayloadSize {
                tensor,
                expected,
                actual,
            } => write!(
                f,
                "{tensor}: payload of {actual} bytes where its size is {expected}"
            ),
            DumpFileError::TensorOrder { tensor } => write!(
                f,
                "{tensor} comes after a later kind; tensors go inputs, outputs, buffers, \
                 workspaces"
            ),
            DumpFileError::UnexpectedEof { offset, reading } => write!(
                f,
                "input ended at byte {offset} while reading {reading} (the file is shorter \
                 than its length said)"
            ),
            DumpFileError::Io { offset, source } => {
                write!(f, "read failed at byte {offset}: {source}")
            }
            DumpFileError::OpDebug {
                offset,
                problem,
                value,
            } => write!(
                f,
                "overflow block at byte {offset}: {problem} (found {value})"
            ),
        }
    }
}

impl std::error::Error for DumpFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DumpFileError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
