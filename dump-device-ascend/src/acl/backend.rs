//! [`AclBackend`]: device statistics of a tensor in NPU memory through aclnn.
//!
//! Call sequence per tensor (CANN aclnn two-phase convention):
//! `aclCreateTensor(self)` → `aclCreateIntArray([0, …, rank))` (→ `aclCreateScalar(p = 2.0)`
//! for l2norm) → per statistic: `aclrtMalloc(out)` → `aclCreateTensor(0-d out)` →
//! `aclnnXxxGetWorkspaceSize(…, keepDim = false, …)` → `aclrtMalloc(workspace)` when its size is
//! non-zero → `aclnnXxx(workspace, size, executor, stream)` → `aclrtSynchronizeStream` →
//! `aclrtMemcpy(D2H)` of the 0-d result → `aclrtFree` / `aclDestroy*` of everything created.
//!
//! Kernels and output dtypes (spec §7): max → `aclnnAmax`, min → `aclnnAmin`, both in the input
//! dtype; avg → `aclnnMean` with explicit output dtype float32 in `high` mode and the input
//! dtype in `low` mode; l2norm → `aclnnNorm` (p = 2), output float32 in `high`, input dtype in
//! `low`. Unsupported dtype/statistic pairs are not sent to the device: they are `null`, as in
//! [`device_stats`](crate::device_stats).

use super::api::AclApi;
use super::types::{
    AclIntArray, AclOpExecutor, AclScalar, AclStream, AclTensor, FORMAT_ND, MALLOC_HUGE_FIRST,
    MEMCPY_DEVICE_TO_HOST, acl_dtype,
};
use crate::Error;
use crate::device_stats::supports;
use core::ffi::c_void;
use core::ptr::{null, null_mut};
use dump_core::DType;
use dump_stats::{Category, CategorySet, DeviceStats, DeviceValue, Precision};

/// Bytes allocated for a 0-d result (ACL device addresses are 32-byte aligned; one block).
const OUT_BYTES: usize = 32;

/// The aclnn statistics backend: a loaded [`AclApi`], a precision mode and a stream.
///
/// It does not initialise ACL, set a device or create a context: the framework that owns the
/// tensors has done that on the calling thread.
#[derive(Debug)]
pub struct AclBackend {
    api: AclApi,
    precision: Precision,
    stream: AclStream,
}

/// Which reduction.
#[derive(Clone, Copy)]
enum Op {
    Max,
    Min,
    Mean,
    Norm,
}

impl Op {
    const fn names(self) -> (&'static str, &'static str) {
        match self {
            Op::Max => ("aclnnAmaxGetWorkspaceSize", "aclnnAmax"),
            Op::Min => ("aclnnAminGetWorkspaceSize", "aclnnAmin"),
            Op::Mean => ("aclnnMeanGetWorkspaceSize", "aclnnMean"),
            Op::Norm => ("aclnnNormGetWorkspaceSize", "aclnnNorm"),
        }
    }
}

fn check(call: &'static str, status: i32) -> Result<(), Error> {
    if status == 0 {
        Ok(())
    } else {
        Err(Error::AclStatus { call, status })
    }
}

/// Device memory from `aclrtMalloc`, freed on drop.
struct DevMem<'a> {
    api: &'a AclApi,
    ptr: *mut c_void,
}

impl<'a> DevMem<'a> {
    fn alloc(api: &'a AclApi, size: usize) -> Result<DevMem<'a>, Error> {
        let mut ptr = null_mut();
        // SAFETY: `aclrtMalloc` writes a device address into `ptr` (a valid out-pointer).
        check("aclrtMalloc", unsafe {
            (api.malloc)(&mut ptr, size, MALLOC_HUGE_FIRST)
        })?;
        if ptr.is_null() {
            return Err(Error::AclNull {
                call: "aclrtMalloc",
            });
        }
        Ok(DevMem { api, ptr })
    }
}

impl Drop for DevMem<'_> {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `aclrtMalloc` and is freed once. A failing free cannot be
        // reported from drop; the statistics already succeeded or failed on their own.
        let _ = unsafe { (self.api.free)(self.ptr) };
    }
}

/// An ACL object (`aclTensor`, `aclIntArray`, `aclScalar`) destroyed on drop.
struct Handle<'a, T> {
    ptr: *mut T,
    destroy: unsafe extern "C" fn(*const T) -> i32,
    _api: core::marker::PhantomData<&'a AclApi>,
}

impl<'a, T> Handle<'a, T> {
    fn new(
        call: &'static str,
        ptr: *mut T,
        destroy: unsafe extern "C" fn(*const T) -> i32,
    ) -> Result<Handle<'a, T>, Error> {
        if ptr.is_null() {
            return Err(Error::AclNull { call });
        }
        Ok(Handle {
            ptr,
            destroy,
            _api: core::marker::PhantomData,
        })
    }
}

impl<T> Drop for Handle<'_, T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` is a live handle created by the matching aclCreate*; destroyed once.
        let _ = unsafe { (self.destroy)(self.ptr) };
    }
}

impl AclBackend {
    /// A backend on the default stream (a null `aclrtStream`).
    pub fn new(api: AclApi, precision: Precision) -> AclBackend {
        AclBackend {
            api,
            precision,
            stream: null_mut(),
        }
    }

    /// The same backend on `stream` (an `aclrtStream` of the framework).
    pub fn with_stream(mut self, stream: AclStream) -> AclBackend {
        self.stream = stream;
        self
    }

    /// The precision mode.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The device statistics of the row-major tensor of `dtype` and `shape` at device address
    /// `data`, for the device categories among `columns` (others stay
    /// [`DeviceValue::Null`]). `Ok(None)` for an empty tensor (no row), every cell `null`
    /// for a dtype no kernel supports.
    ///
    /// # Safety
    /// `data` must be a device address (from the loaded runtime's allocator) holding the
    /// tensor's `shape` elements of `dtype`, valid until this call returns, and the calling
    /// thread must have the tensor's device context current.
    pub unsafe fn statistics(
        &self,
        data: *mut c_void,
        dtype: DType,
        shape: &[usize],
        columns: &CategorySet,
    ) -> Result<Option<DeviceStats>, Error> {
        let mut elems: usize = 1;
        for &d in shape {
            elems = elems.checked_mul(d).ok_or(Error::Overflow)?;
        }
        if elems == 0 {
            return Ok(None);
        }
        let mut out = DeviceStats::NULL;
        let wanted: Vec<Category> = columns
            .iter()
            .filter(|&c| supports(c, dtype, self.precision))
            .collect();
        let Some(acl_dt) = acl_dtype(dtype) else {
            return Ok(Some(out));
        };
        if wanted.is_empty() {
            return Ok(Some(out));
        }
        let dims = shape
            .iter()
            .map(|&d| i64::try_from(d).map_err(|_| Error::Overflow))
            .collect::<Result<Vec<i64>, Error>>()?;
        let mut strides = vec![1i64; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1]
                .checked_mul(dims[i + 1])
                .ok_or(Error::Overflow)?;
        }
        let axes: Vec<i64> = (0..dims.len() as i64).collect();
        let api = &self.api;
        // SAFETY: the dims/strides arrays outlive the call (aclCreateTensor copies them);
        // `data` is a device address per this function's contract.
        let input = Handle::new(
            "aclCreateTensor",
            unsafe {
                (api.create_tensor)(
                    dims.as_ptr(),
                    dims.len() as u64,
                    acl_dt,
                    strides.as_ptr(),
                    0,
                    FORMAT_ND,
                    dims.as_ptr(),
                    dims.len() as u64,
                    data,
                )
            },
            api.destroy_tensor,
        )?;
        // SAFETY: `axes` outlives the call; the array is copied.
        let dim = Handle::new(
            "aclCreateIntArray",
            unsafe { (api.create_int_array)(axes.as_ptr(), axes.len() as u64) },
            api.destroy_int_array,
        )?;
        let mut p = 2.0f32;
        let norm_p = if wanted.contains(&Category::L2Norm) {
            // SAFETY: `p` is a live f32 and ACL_FLOAT (0) says so; the scalar copies it.
            Some(Handle::new(
                "aclCreateScalar",
                unsafe { (api.create_scalar)((&mut p as *mut f32).cast(), 0) },
                api.destroy_scalar,
            )?)
        } else {
            None
        };
        let wide = match self.precision {
            Precision::High => DType::Float32,
            Precision::Low => dtype,
        };
        for c in wanted {
            let (op, out_dtype) = match c {
                Category::Max => (Op::Max, dtype),
                Category::Min => (Op::Min, dtype),
                Category::Avg => (Op::Mean, wide),
                _ => (Op::Norm, wide),
            };
            let scalar = norm_p.as_ref().map_or(null(), |h| h.ptr.cast_const());
            // SAFETY: the handles are live for the call; see `reduce`.
            let v = unsafe { self.reduce(op, input.ptr, dim.ptr, scalar, out_dtype)? };
            match c {
                Category::Max => out.max = v,
                Category::Min => out.min = v,
                Category::Avg => out.avg = v,
                _ => out.l2norm = v,
            }
        }
        Ok(Some(out))
    }

    /// Runs one reduction over all axes into a fresh 0-d tensor and copies the result back.
    ///
    /// # Safety
    /// `input`, `dim` and (for [`Op::Norm`]) `p` are live handles.
    unsafe fn reduce(
        &self,
        op: Op,
        input: *mut AclTensor,
        dim: *mut AclIntArray,
        p: *const AclScalar,
        out_dtype: DType,
    ) -> Result<DeviceValue, Error> {
        let api = &self.api;
        let size = out_dtype.size().ok_or(Error::PackedDType(out_dtype))?;
        let out_acl = acl_dtype(out_dtype).ok_or(Error::PackedDType(out_dtype))?;
        let out_mem = DevMem::alloc(api, OUT_BYTES)?;
        let none = [0i64; 1];
        // SAFETY: a 0-d tensor: zero dims (the pointers are valid, never read past 0 elements)
        // over the `out_mem` device block.
        let out = Handle::new(
            "aclCreateTensor",
            unsafe {
                (api.create_tensor)(
                    none.as_ptr(),
                    0,
                    out_acl,
                    none.as_ptr(),
                    0,
                    FORMAT_ND,
                    none.as_ptr(),
                    0,
                    out_mem.ptr,
                )
            },
            api.destroy_tensor,
        )?;
        let mut ws: u64 = 0;
        let mut exec: *mut AclOpExecutor = null_mut();
        let (ws_name, run_name) = op.names();
        let input = input.cast_const();
        let dim = dim.cast_const();
        // SAFETY: every handle is live; `ws` and `exec` are valid out-pointers.
        let status = unsafe {
            match op {
                Op::Max => (api.amax_ws)(input, dim, false, out.ptr, &mut ws, &mut exec),
                Op::Min => (api.amin_ws)(input, dim, false, out.ptr, &mut ws, &mut exec),
                Op::Mean => (api.mean_ws)(input, dim, false, out_acl, out.ptr, &mut ws, &mut exec),
                Op::Norm => (api.norm_ws)(input, p, dim, false, out.ptr, &mut ws, &mut exec),
            }
        };
        check(ws_name, status)?;
        if exec.is_null() {
            return Err(Error::AclNull { call: ws_name });
        }
        let ws_size = usize::try_from(ws).map_err(|_| Error::Overflow)?;
        let workspace = if ws_size > 0 {
            Some(DevMem::alloc(api, ws_size)?)
        } else {
            None
        };
        let ws_ptr = workspace.as_ref().map_or(null_mut(), |m| m.ptr);
        let run = match op {
            Op::Max => api.amax,
            Op::Min => api.amin,
            Op::Mean => api.mean,
            Op::Norm => api.norm,
        };
        // SAFETY: `exec` came from the first phase; the workspace has the size it asked for.
        check(run_name, unsafe { run(ws_ptr, ws, exec, self.stream) })?;
        // SAFETY: `stream` is the framework's stream (or the default one).
        check("aclrtSynchronizeStream", unsafe { (api.sync)(self.stream) })?;
        let mut host = [0u8; 8];
        // SAFETY: `host` has room for `size` <= 8 bytes; `out_mem` holds the 0-d result.
        check("aclrtMemcpy", unsafe {
            (api.memcpy)(
                host.as_mut_ptr().cast(),
                host.len(),
                out_mem.ptr.cast_const(),
                size,
                MEMCPY_DEVICE_TO_HOST,
            )
        })?;
        decode(out_dtype, &host[..size])
    }
}

/// The value of a 0-d result of `dtype` (little-endian bytes).
fn decode(dtype: DType, b: &[u8]) -> Result<DeviceValue, Error> {
    let mut w = [0u8; 4];
    Ok(match dtype {
        DType::Bool => DeviceValue::Bool(b[0] != 0),
        DType::Int8 => DeviceValue::Int(i64::from(b[0] as i8)),
        DType::UInt8 => DeviceValue::Int(i64::from(b[0])),
        DType::Int16 => DeviceValue::Int(i64::from(i16::from_le_bytes([b[0], b[1]]))),
        DType::Int32 => DeviceValue::Int(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        DType::Int64 => DeviceValue::Int(i64::from_le_bytes(b[..8].try_into().map_err(|_| {
            Error::LengthMismatch {
                expected: 8,
                actual: b.len(),
            }
        })?)),
        DType::Float16 => {
            dump_core::widen::f16_to_f32(b, &mut w).map_err(dump_stats::Error::from)?;
            DeviceValue::Float(f64::from(f32::from_le_bytes(w)))
        }
        DType::BFloat16 => {
            dump_core::widen::bf16_to_f32(b, &mut w).map_err(dump_stats::Error::from)?;
            DeviceValue::Float(f64::from(f32::from_le_bytes(w)))
        }
        DType::Float32 => {
            DeviceValue::Float(f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        }
        DType::Float64 => {
            DeviceValue::Float(f64::from_le_bytes(b[..8].try_into().map_err(|_| {
                Error::LengthMismatch {
                    expected: 8,
                    actual: b.len(),
                }
            })?))
        }
        other => {
            return Err(Error::Stats(dump_stats::Error::Core(
                dump_core::Error::Unsupported(other),
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_results() {
        assert_eq!(decode(DType::Bool, &[1]), Ok(DeviceValue::Bool(true)));
        assert_eq!(decode(DType::Int8, &[0xff]), Ok(DeviceValue::Int(-1)));
        assert_eq!(decode(DType::UInt8, &[0xff]), Ok(DeviceValue::Int(255)));
        assert_eq!(
            decode(DType::Float16, &0x3c00u16.to_le_bytes()),
            Ok(DeviceValue::Float(1.0))
        );
        assert_eq!(
            decode(DType::BFloat16, &0x4000u16.to_le_bytes()),
            Ok(DeviceValue::Float(2.0))
        );
        assert_eq!(
            decode(DType::Int64, &(-5i64).to_le_bytes()),
            Ok(DeviceValue::Int(-5))
        );
        assert!(decode(DType::Complex64, &[0; 8]).is_err());
    }
}
