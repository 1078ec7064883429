//! A tract [`Tensor`] handed to the Dumper without a copy.

use dump_host::TensorRef;
use tract_onnx::prelude::{DatumType, Tensor};

use crate::dtype::dtype_of;

/// Why a tensor is not dumped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    /// No MindSpore dump type for this datum type.
    Type(DatumType),
    /// The bytes are not plain host memory (block-quantized or device-resident storage).
    NotPlain,
}

impl Skip {
    /// One key per kind of problem, so each is reported once.
    pub(crate) fn key(self) -> String {
        match self {
            Skip::Type(dt) if dt.is_quantized() => "quantized".to_owned(),
            Skip::Type(dt) => format!("{dt:?}"),
            Skip::NotPlain => "not plain".to_owned(),
        }
    }

    /// What is skipped and why.
    pub(crate) fn describe(self) -> String {
        match self {
            Skip::Type(dt) => format!(
                "tract type {dt:?} has no MindSpore dump type (supported: bool, u8-u64, i8-i64, \
                 f16, f32, f64)"
            ),
            Skip::NotPlain => "storage is not plain host memory (exotic or device tensor)".into(),
        }
    }
}

/// `t` as a host [`TensorRef`] over tract's own buffer (tract tensors are dense, C order).
pub(crate) fn tensor_ref(t: &Tensor) -> Result<TensorRef<'_>, Skip> {
    let dt = dtype_of(t.datum_type()).ok_or(Skip::Type(t.datum_type()))?;
    let view = t.as_plain_ram().ok_or(Skip::NotPlain)?;
    Ok(TensorRef::host(dt, t.shape(), view.as_bytes()))
}
