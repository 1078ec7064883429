//! [`AclApi`]: the hand-written function table of the ACL runtime and aclnn symbols the
//! statistics backend calls, loaded at run time with `libloading`.
//!
//! Signatures (CANN aclnn API reference: `aclCreateTensor`, `aclCreateIntArray`,
//! `aclCreateScalar`, `aclnnAmax`, `aclnnAmin`, `aclnnMean`, `aclnnNorm`; runtime API:
//! `aclrtMalloc`, `aclrtMemcpy`, `aclrtSynchronizeStream`, `aclrtFree`). Only plain C symbols
//! are used (newer headers add C++ inline overloads that `dlsym` cannot find).
//!
//! Libraries: `libascendcl.so` (runtime), `libnnopbase.so` (the `aclTensor` object model) and
//! `libopapi.so` (the `aclnn*` operators). They are searched in `$ASCEND_TOOLKIT_HOME/lib64`,
//! then `$ASCEND_HOME_PATH/lib64`, then by bare name through the default loader path
//! (`LD_LIBRARY_PATH`, `ld.so.cache`).

use super::types::{AclIntArray, AclOpExecutor, AclScalar, AclStream, AclTensor};
use crate::Error;
use core::ffi::c_void;
use libloading::Library;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// `aclCreateTensor(viewDims, viewDimsNum, dataType, stride, offset, format, storageDims,
/// storageDimsNum, tensorData)`.
pub type CreateTensorFn = unsafe extern "C" fn(
    *const i64,
    u64,
    i32,
    *const i64,
    i64,
    i32,
    *const i64,
    u64,
    *mut c_void,
) -> *mut AclTensor;
/// `aclDestroyTensor(tensor)`.
pub type DestroyTensorFn = unsafe extern "C" fn(*const AclTensor) -> i32;
/// `aclCreateIntArray(value, size)`.
pub type CreateIntArrayFn = unsafe extern "C" fn(*const i64, u64) -> *mut AclIntArray;
/// `aclDestroyIntArray(array)`.
pub type DestroyIntArrayFn = unsafe extern "C" fn(*const AclIntArray) -> i32;
/// `aclCreateScalar(value, dataType)`.
pub type CreateScalarFn = unsafe extern "C" fn(*mut c_void, i32) -> *mut AclScalar;
/// `aclDestroyScalar(scalar)`.
pub type DestroyScalarFn = unsafe extern "C" fn(*const AclScalar) -> i32;
/// `aclnnAmaxGetWorkspaceSize` / `aclnnAminGetWorkspaceSize(self, dim, keepDim, out,
/// workspaceSize, executor)`.
pub type ReduceWsFn = unsafe extern "C" fn(
    *const AclTensor,
    *const AclIntArray,
    bool,
    *mut AclTensor,
    *mut u64,
    *mut *mut AclOpExecutor,
) -> i32;
/// `aclnnMeanGetWorkspaceSize(self, dim, keepDim, dtype, out, workspaceSize, executor)`.
pub type MeanWsFn = unsafe extern "C" fn(
    *const AclTensor,
    *const AclIntArray,
    bool,
    i32,
    *mut AclTensor,
    *mut u64,
    *mut *mut AclOpExecutor,
) -> i32;
/// `aclnnNormGetWorkspaceSize(self, pScalar, dim, keepdim, out, workspaceSize, executor)`.
pub type NormWsFn = unsafe extern "C" fn(
    *const AclTensor,
    *const AclScalar,
    *const AclIntArray,
    bool,
    *mut AclTensor,
    *mut u64,
    *mut *mut AclOpExecutor,
) -> i32;
/// The second phase of every aclnn operator: `aclnnXxx(workspace, workspaceSize, executor,
/// stream)`.
pub type RunFn = unsafe extern "C" fn(*mut c_void, u64, *mut AclOpExecutor, AclStream) -> i32;
/// `aclrtMalloc(devPtr, size, policy)`.
pub type MallocFn = unsafe extern "C" fn(*mut *mut c_void, usize, i32) -> i32;
/// `aclrtFree(devPtr)`.
pub type FreeFn = unsafe extern "C" fn(*mut c_void) -> i32;
/// `aclrtMemcpy(dst, destMax, src, count, kind)`.
pub type MemcpyFn = unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, i32) -> i32;
/// `aclrtSynchronizeStream(stream)`.
pub type SyncFn = unsafe extern "C" fn(AclStream) -> i32;

/// `libascendcl.so`: the ACL runtime.
pub const ASCENDCL: &str = "libascendcl.so";
/// `libnnopbase.so`: `aclTensor`, `aclIntArray`, `aclScalar`.
pub const NNOPBASE: &str = "libnnopbase.so";
/// `libopapi.so`: the `aclnn*` operators.
pub const OPAPI: &str = "libopapi.so";

/// Explicit paths of the three libraries (tests point all three at one mock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibPaths {
    /// Path of `libascendcl.so`.
    pub ascendcl: PathBuf,
    /// Path of `libnnopbase.so`.
    pub nnopbase: PathBuf,
    /// Path of `libopapi.so`.
    pub opapi: PathBuf,
}

/// The loaded function table. The libraries stay loaded as long as the table lives.
pub struct AclApi {
    pub(crate) create_tensor: CreateTensorFn,
    pub(crate) destroy_tensor: DestroyTensorFn,
    pub(crate) create_int_array: CreateIntArrayFn,
    pub(crate) destroy_int_array: DestroyIntArrayFn,
    pub(crate) create_scalar: CreateScalarFn,
    pub(crate) destroy_scalar: DestroyScalarFn,
    pub(crate) amax_ws: ReduceWsFn,
    pub(crate) amax: RunFn,
    pub(crate) amin_ws: ReduceWsFn,
    pub(crate) amin: RunFn,
    pub(crate) mean_ws: MeanWsFn,
    pub(crate) mean: RunFn,
    pub(crate) norm_ws: NormWsFn,
    pub(crate) norm: RunFn,
    pub(crate) malloc: MallocFn,
    pub(crate) free: FreeFn,
    pub(crate) memcpy: MemcpyFn,
    pub(crate) sync: SyncFn,
    _libs: [Library; 3],
}

impl core::fmt::Debug for AclApi {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AclApi").finish_non_exhaustive()
    }
}

/// The toolkit directories searched before the default loader path:
/// `$ASCEND_TOOLKIT_HOME/lib64`, then `$ASCEND_HOME_PATH/lib64` (unset or empty variables are
/// skipped). `env` looks a variable up (`std::env::var_os` in [`AclApi::load`]).
pub fn search_dirs(env: impl Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    ["ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"]
        .iter()
        .filter_map(|v| env(v).filter(|s| !s.is_empty()))
        .map(|root| Path::new(&root).join("lib64"))
        .collect()
}

/// Loads `name` from the first of `dirs` that has it, else by bare name.
fn open(name: &'static str, dirs: &[PathBuf]) -> Result<Library, Error> {
    let mut tried = String::new();
    let candidates = dirs
        .iter()
        .map(|d| d.join(name).into_os_string())
        .chain([OsString::from(name)]);
    for c in candidates {
        // SAFETY: loading a shared library runs its initialisers; the CANN libraries (and the
        // test mock) are ordinary C libraries without unsound initialisation.
        match unsafe { Library::new(&c) } {
            Ok(lib) => return Ok(lib),
            Err(e) => {
                if !tried.is_empty() {
                    tried.push_str("; ");
                }
                tried.push_str(&format!("{}: {e}", Path::new(&c).display()));
            }
        }
    }
    Err(Error::LibraryNotFound {
        library: name,
        tried,
    })
}

fn open_path(name: &'static str, path: &Path) -> Result<Library, Error> {
    // SAFETY: as in `open`.
    unsafe { Library::new(path) }.map_err(|e| Error::LibraryNotFound {
        library: name,
        tried: format!("{}: {e}", path.display()),
    })
}

/// Looks `symbol` up in `lib` as a `T` (a function pointer type).
///
/// # Safety
/// `T` must be the symbol's true C signature.
unsafe fn sym<T: Copy>(
    lib: &Library,
    library: &'static str,
    symbol: &'static str,
) -> Result<T, Error> {
    // SAFETY: the caller guarantees `T` matches the symbol; the copied function pointer is
    // only used while `AclApi` keeps `lib` loaded.
    unsafe { lib.get::<T>(symbol) }
        .map(|s| *s)
        .map_err(|_| Error::SymbolMissing { library, symbol })
}

impl AclApi {
    /// Loads the three libraries from the toolkit directories ([`search_dirs`] of the process
    /// environment), falling back to the default loader path.
    pub fn load() -> Result<AclApi, Error> {
        AclApi::load_from_dirs(&search_dirs(|v| std::env::var_os(v)))
    }

    /// Loads the three libraries from the first of `dirs` that has each, else by bare name.
    pub fn load_from_dirs(dirs: &[PathBuf]) -> Result<AclApi, Error> {
        let libs = [
            open(ASCENDCL, dirs)?,
            open(NNOPBASE, dirs)?,
            open(OPAPI, dirs)?,
        ];
        AclApi::bind(libs)
    }

    /// Loads the three libraries from explicit paths.
    pub fn load_from_paths(paths: &LibPaths) -> Result<AclApi, Error> {
        let libs = [
            open_path(ASCENDCL, &paths.ascendcl)?,
            open_path(NNOPBASE, &paths.nnopbase)?,
            open_path(OPAPI, &paths.opapi)?,
        ];
        AclApi::bind(libs)
    }

    fn bind(libs: [Library; 3]) -> Result<AclApi, Error> {
        let [rt, nn, op] = &libs;
        // SAFETY: for every `sym` call below, the type alias is the C signature documented for
        // that symbol in the CANN API reference (see the aliases above).
        unsafe {
            Ok(AclApi {
                create_tensor: sym(nn, NNOPBASE, "aclCreateTensor")?,
                destroy_tensor: sym(nn, NNOPBASE, "aclDestroyTensor")?,
                create_int_array: sym(nn, NNOPBASE, "aclCreateIntArray")?,
                destroy_int_array: sym(nn, NNOPBASE, "aclDestroyIntArray")?,
                create_scalar: sym(nn, NNOPBASE, "aclCreateScalar")?,
                destroy_scalar: sym(nn, NNOPBASE, "aclDestroyScalar")?,
                amax_ws: sym(op, OPAPI, "aclnnAmaxGetWorkspaceSize")?,
                amax: sym(op, OPAPI, "aclnnAmax")?,
                amin_ws: sym(op, OPAPI, "aclnnAminGetWorkspaceSize")?,
                amin: sym(op, OPAPI, "aclnnAmin")?,
                mean_ws: sym(op, OPAPI, "aclnnMeanGetWorkspaceSize")?,
                mean: sym(op, OPAPI, "aclnnMean")?,
                norm_ws: sym(op, OPAPI, "aclnnNormGetWorkspaceSize")?,
                norm: sym(op, OPAPI, "aclnnNorm")?,
                malloc: sym(rt, ASCENDCL, "aclrtMalloc")?,
                free: sym(rt, ASCENDCL, "aclrtFree")?,
                memcpy: sym(rt, ASCENDCL, "aclrtMemcpy")?,
                sync: sym(rt, ASCENDCL, "aclrtSynchronizeStream")?,
                _libs: libs,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_order() {
        let env = |v: &str| match v {
            "ASCEND_TOOLKIT_HOME" => Some(OsString::from("/opt/toolkit")),
            "ASCEND_HOME_PATH" => Some(OsString::from("/usr/local/Ascend/latest")),
            _ => None,
        };
        assert_eq!(
            search_dirs(env),
            [
                PathBuf::from("/opt/toolkit/lib64"),
                PathBuf::from("/usr/local/Ascend/latest/lib64")
            ]
        );
        let empty = |v: &str| (v == "ASCEND_HOME_PATH").then(OsString::new);
        assert!(search_dirs(empty).is_empty());
    }

    #[test]
    fn missing_library_is_an_error_naming_it() {
        let dir = PathBuf::from("/nonexistent-opdump-ascend");
        match AclApi::load_from_dirs(&[dir]) {
            // A machine with CANN installed may find the real library by bare name; then the
            // next library or symbol decides, and the error (if any) still names it.
            Ok(_) => println!("SKIP: a CANN installation is on the loader path"),
            Err(Error::LibraryNotFound { library, tried }) => {
                assert_eq!(library, ASCENDCL);
                assert!(
                    tried.starts_with("/nonexistent-opdump-ascend/libascendcl.so: "),
                    "{tried}"
                );
                assert!(tried.contains("; libascendcl.so: "), "{tried}");
            }
            Err(e) => println!("SKIP: partial CANN installation: {e}"),
        }
    }
}
