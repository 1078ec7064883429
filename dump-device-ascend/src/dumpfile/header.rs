//! The decoded file: [`DumpHeader`] (the `DumpData` message's fields and where each tensor's
//! bytes are), [`TensorMeta`], and the [`Limits`] decoding works under.

use super::error::{DumpFileError, TensorId};
use super::{CannDType, CannFormat};
use dump_core::DType;

/// Bounds on what a file may declare; anything beyond them is an error, so a hostile file
/// cannot make the decoder allocate or loop without bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest `DumpData` message accepted, in bytes; for the inline (v1) variant, the
    /// longest file. The message is held in memory. Default 256 MiB (real messages are a few
    /// KiB; CANN's writer caps them below 2 GiB).
    pub max_message_len: u64,
    /// The most tensors (inputs + outputs + buffers + workspaces). Default 65 536.
    pub max_tensors: usize,
    /// The most dimensions of one shape. Default 64.
    pub max_rank: usize,
    /// The deepest message nesting. `DumpData` needs 3 (`DumpData` > `OpOutput` > `Shape`);
    /// default 8.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_len: 256 << 20,
            max_tensors: 65_536,
            max_rank: 64,
            max_depth: 8,
        }
    }
}

/// Which container variant a file is (spec §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Container {
    /// v2, "binary" (every current writer): `u64` LE message length, the message, then the
    /// tensor bytes.
    Binary {
        /// The message length from the 8-byte header.
        message_len: u64,
    },
    /// v1, "protobuf" (old): the whole file is one `DumpData` with each tensor's bytes in its
    /// `data` field.
    Inline,
}

/// What a tensor is: the four repeated tensor fields of `DumpData`, in payload order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum TensorKind {
    /// `DumpData.input` (`OpInput`).
    Input,
    /// `DumpData.output` (`OpOutput`).
    Output,
    /// `DumpData.buffer` (`OpBuffer`, an L1 buffer).
    Buffer,
    /// `DumpData.space` (`Workspace`).
    Workspace,
}

impl TensorKind {
    /// `input`, `output`, `buffer` or `workspace`.
    pub const fn name(self) -> &'static str {
        match self {
            TensorKind::Input => "input",
            TensorKind::Output => "output",
            TensorKind::Buffer => "buffer",
            TensorKind::Workspace => "workspace",
        }
    }
}

/// `OpOutput.original_op`: the operator the tensor came from before fusion.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OriginalOp {
    /// Its name.
    pub name: String,
    /// Its output index.
    pub output_index: u32,
    /// Its data type.
    pub data_type: CannDType,
    /// Its format.
    pub format: CannFormat,
}

/// One `DumpData.attr` entry (`attr[0].value` holds FFTS+ slicing JSON).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpAttr {
    /// The attribute's name.
    pub name: String,
    /// Its value.
    pub value: String,
}

/// One tensor's metadata and where its bytes are.
///
/// Fields a kind does not have keep protobuf's defaults: buffers and workspaces have
/// `data_type` `UNDEFINED`, `format` `NCHW` (0), an empty shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMeta {
    /// Input, output, buffer or workspace.
    pub kind: TensorKind,
    /// Index within its kind (`output 1`).
    pub index: usize,
    /// Position among all tensors in payload order (inputs, outputs, buffers, workspaces).
    pub ordinal: usize,
    /// `data_type`.
    pub data_type: CannDType,
    /// `format` (the primary format).
    pub format: CannFormat,
    /// `sub_format` (e.g. the group count of grouped convolution weights).
    pub sub_format: i32,
    /// `shape`: the device shape.
    pub shape: Vec<u64>,
    /// `original_shape`: the host (logical) shape; `None` when the field is absent.
    pub original_shape: Option<Vec<u64>>,
    /// Payload bytes: the `size` field (v2), the `data` field's length (v1).
    pub size: u64,
    /// Byte offset of the payload in the file.
    pub offset: u64,
    /// `address`: the device address.
    pub address: u64,
    /// `offset` field of the message (not the file offset).
    pub address_offset: u64,
    /// `arg_index` where present.
    pub arg_index: Option<u32>,
    /// `OpInput.input_type`.
    pub input_type: u32,
    /// `OpBuffer.buffer_type` (0 = L1) or `Workspace.type` (0 = LOG).
    pub buffer_type: i32,
    /// `OpOutput.original_op`.
    pub original_op: Option<OriginalOp>,
    /// `OpOutput.dim_range`: `(dim_start, dim_end)` pairs.
    pub dim_range: Vec<(u64, u64)>,
}

impl TensorMeta {
    /// This tensor's identity for messages.
    pub fn id(&self) -> TensorId {
        TensorId {
            ordinal: self.ordinal,
            kind: self.kind,
            index: self.index,
        }
    }

    /// The workspace dtype of the tensor, or [`DumpFileError::UnsupportedDType`] naming the
    /// CANN type when it has none (HIFLOAT8, FLOAT8_E8M0, QINT8, STRING, ...).
    pub fn dtype(&self) -> Result<DType, DumpFileError> {
        self.data_type
            .dtype()
            .ok_or(DumpFileError::UnsupportedDType {
                tensor: self.id(),
                data_type: self.data_type,
            })
    }

    /// Elements of `shape`, `None` on overflow.
    pub fn elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }

    /// The bytes `shape` and `data_type` need (packed types rounded up to whole bytes), `None`
    /// when the dtype's width is unknown or on overflow. msaccucmp decodes only this many
    /// bytes of a payload (and uses shape `[size]` when the shape is empty but `size > 0`, or
    /// the type is `UNDEFINED`); readers advance by [`size`](TensorMeta::size).
    pub fn shape_bytes(&self) -> Option<u64> {
        let bits = u64::from(self.data_type.bits()?);
        Some(self.elements()?.checked_mul(bits)?.div_ceil(8))
    }

    /// File offset one past the payload's last byte.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.size)
    }
}

/// A decoded dump file: the `DumpData` message's scalar fields and every tensor's metadata,
/// in payload order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpHeader {
    /// Which container variant the file is.
    pub container: Container,
    /// `version` (writers set `"2.0"`).
    pub version: String,
    /// `dump_time`: microseconds since the epoch (AICPU writer).
    pub dump_time: u64,
    /// `op_name`: the full, unsanitised name (may contain `/`).
    pub op_name: String,
    /// `attr`.
    pub attrs: Vec<OpAttr>,
    /// `dfx_message`.
    pub dfx_message: String,
    /// Every tensor: inputs, outputs, buffers, workspaces.
    pub tensors: Vec<TensorMeta>,
    /// The file's length.
    pub file_len: u64,
    /// File offset after the last payload (v2); bytes from here to `file_len` are trailing
    /// bytes no tensor claims.
    pub payload_end: u64,
}

impl DumpHeader {
    /// The tensors of one kind, in index order.
    pub fn of_kind(&self, kind: TensorKind) -> impl Iterator<Item = &TensorMeta> {
        self.tensors.iter().filter(move |t| t.kind == kind)
    }

    /// The tensor of `kind` and `index`.
    pub fn tensor(&self, kind: TensorKind, index: usize) -> Option<&TensorMeta> {
        self.of_kind(kind).nth(index)
    }

    /// The last `/`-separated segment of `op_name` (what MindSpore and msaccucmp's `msnpy`
    /// names use).
    pub fn short_op_name(&self) -> &str {
        self.op_name.rsplit('/').next().unwrap_or("")
    }
}
