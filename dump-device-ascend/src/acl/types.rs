//! C-side vocabulary of ACL / aclnn: opaque handles, `aclDataType` values, status codes.
//!
//! Sources: CANN `acl_base.h` (public copies) for `aclDataType` (`ACL_FLOAT = 0`,
//! `FLOAT16 = 1`, `INT8 = 2`, `INT32 = 3`, `UINT8 = 4`, `INT16 = 6`, `UINT16 = 7`,
//! `UINT32 = 8`, `INT64 = 9`, `UINT64 = 10`, `DOUBLE = 11`, `BOOL = 12`, `BF16 = 27`) and
//! `aclrtMemcpyKind` (`HOST_TO_HOST = 0`, `HOST_TO_DEVICE = 1`, `DEVICE_TO_HOST = 2`,
//! `DEVICE_TO_DEVICE = 3`); the aclnn return-code page for `161001` (PARAM_NULLPTR),
//! `161002` (PARAM_INVALID), `361001` (RUNTIME_ERROR) and `561xxx` (inner errors).

use core::ffi::c_void;
use dump_core::DType;

/// Opaque `aclTensor`.
#[repr(C)]
pub struct AclTensor {
    _opaque: [u8; 0],
}
/// Opaque `aclIntArray`.
#[repr(C)]
pub struct AclIntArray {
    _opaque: [u8; 0],
}
/// Opaque `aclScalar`.
#[repr(C)]
pub struct AclScalar {
    _opaque: [u8; 0],
}
/// Opaque `aclOpExecutor`.
#[repr(C)]
pub struct AclOpExecutor {
    _opaque: [u8; 0],
}
/// `aclrtStream` (a null stream is the default stream).
pub type AclStream = *mut c_void;

/// `aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_HOST`.
pub const MEMCPY_DEVICE_TO_HOST: i32 = 2;
/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_FIRST`.
pub const MALLOC_HUGE_FIRST: i32 = 0;
/// `aclFormat::ACL_FORMAT_ND`.
pub const FORMAT_ND: i32 = 2;

/// The `aclDataType` of a dtype, `None` for dtypes the statistics backend does not send.
pub const fn acl_dtype(d: DType) -> Option<i32> {
    Some(match d {
        DType::Float32 => 0,
        DType::Float16 => 1,
        DType::Int8 => 2,
        DType::Int32 => 3,
        DType::UInt8 => 4,
        DType::Int16 => 6,
        DType::UInt16 => 7,
        DType::UInt32 => 8,
        DType::Int64 => 9,
        DType::UInt64 => 10,
        DType::Float64 => 11,
        DType::Bool => 12,
        DType::BFloat16 => 27,
        _ => return None,
    })
}

/// What an aclnn / ACL status code means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AclStatusKind {
    /// `0`: success.
    Success,
    /// `161001` ACLNN_ERR_PARAM_NULLPTR: a null argument.
    ParamNullptr,
    /// `161002` ACLNN_ERR_PARAM_INVALID: an argument (dtype, shape, dim, ...) is invalid.
    ParamInvalid,
    /// `361001` ACLNN_ERR_RUNTIME_ERROR: the runtime failed (device memory, stream, ...).
    Runtime,
    /// `561xxx` ACLNN_ERR_INNER_*: an internal error (no kernel for the dtype, tiling, ...).
    Inner,
    /// Any other code (ACL runtime codes such as `107xxx` / `207xxx` / `507xxx`).
    Other,
}

impl AclStatusKind {
    /// Classifies a status code.
    pub const fn of(status: i32) -> AclStatusKind {
        match status {
            0 => AclStatusKind::Success,
            161001 => AclStatusKind::ParamNullptr,
            161002 => AclStatusKind::ParamInvalid,
            361001 => AclStatusKind::Runtime,
            561000..=561999 => AclStatusKind::Inner,
            _ => AclStatusKind::Other,
        }
    }
}

impl core::fmt::Display for AclStatusKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            AclStatusKind::Success => "success",
            AclStatusKind::ParamNullptr => "ACLNN_ERR_PARAM_NULLPTR: a required argument is null",
            AclStatusKind::ParamInvalid => {
                "ACLNN_ERR_PARAM_INVALID: an argument (dtype, shape or dim) is invalid"
            }
            AclStatusKind::Runtime => "ACLNN_ERR_RUNTIME_ERROR: the ACL runtime failed",
            AclStatusKind::Inner => "ACLNN_ERR_INNER: internal aclnn error",
            AclStatusKind::Other => "ACL error code; see the CANN error code list",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_kinds() {
        assert_eq!(AclStatusKind::of(0), AclStatusKind::Success);
        assert_eq!(AclStatusKind::of(161001), AclStatusKind::ParamNullptr);
        assert_eq!(AclStatusKind::of(161002), AclStatusKind::ParamInvalid);
        assert_eq!(AclStatusKind::of(361001), AclStatusKind::Runtime);
        assert_eq!(AclStatusKind::of(561103), AclStatusKind::Inner);
        assert_eq!(AclStatusKind::of(507011), AclStatusKind::Other);
    }

    #[test]
    fn dtype_values() {
        assert_eq!(acl_dtype(DType::BFloat16), Some(27));
        assert_eq!(acl_dtype(DType::Bool), Some(12));
        assert_eq!(acl_dtype(DType::Float64), Some(11));
        assert_eq!(acl_dtype(DType::Int4), None);
        assert_eq!(acl_dtype(DType::Complex64), None);
    }
}
