//! Loading `libonnxruntime` at run time: the path comes from `ORT_DYLIB_PATH` (nothing is
//! downloaded at build time), and the process-wide ONNX Runtime environment is built once.

use std::{path::PathBuf, sync::OnceLock};

use ort::environment::Environment;

use crate::Error;

/// The variable naming the ONNX Runtime shared library.
pub const DYLIB_VAR: &str = "ORT_DYLIB_PATH";

/// The library `ORT_DYLIB_PATH` names, checked to exist.
pub fn library_path() -> Result<PathBuf, Error> {
    let Some(p) = std::env::var_os(DYLIB_VAR).filter(|v| !v.is_empty()) else {
        return Err(Error::Library(format!(
            "{DYLIB_VAR} is not set: point it at libonnxruntime.so (ONNX Runtime 1.17 or \
             newer; adapters/dump-ort/ci/fetch-ort.sh prints the path of the one in the \
             onnxruntime PyPI wheel)"
        )));
    };
    let p = PathBuf::from(p);
    if !p.is_file() {
        return Err(Error::Library(format!(
            "{DYLIB_VAR}={} is not a file",
            p.display()
        )));
    }
    Ok(p)
}

/// The process-wide ONNX Runtime environment, loading the library named by `ORT_DYLIB_PATH`
/// at the first call. Later calls return the same environment (or the same error).
pub fn environment() -> Result<Environment, Error> {
    static ENV: OnceLock<Result<Environment, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let path = library_path().map_err(|e| match e {
            Error::Library(m) => m,
            other => other.to_string(),
        })?;
        let builder =
            ort::init_from(&path).map_err(|e| format!("cannot load {}: {e}", path.display()))?;
        builder
            .with_name("opdump")
            .build()
            .map_err(|e| format!("cannot start ONNX Runtime from {}: {e}", path.display()))
    })
    .clone()
    .map_err(Error::Library)
}
