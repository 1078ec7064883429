//! NVRTC compilation of the statistics module, cached per virtual architecture.

use crate::{Error, kernel_source::module_source, probe};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx, compile_ptx_with_opts};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The PTX of the statistics module for one architecture.
#[derive(Clone, Debug)]
pub struct CompiledModule {
    /// The virtual architecture it was compiled for (`compute_80`).
    pub arch: String,
    /// The PTX, ready for `CudaContext::load_module`.
    pub ptx: Ptx,
}

impl CompiledModule {
    /// The PTX text.
    pub fn ptx_text(&self) -> String {
        self.ptx.to_src()
    }
}

/// The in-process PTX cache: one compilation per architecture per process.
static CACHE: Mutex<Option<HashMap<String, Arc<CompiledModule>>>> = Mutex::new(None);

/// The virtual architecture name of a compute capability: `(8, 0)` gives `compute_80`.
pub fn arch_of(major: i32, minor: i32) -> String {
    format!("compute_{major}{minor}")
}

/// Compiles the statistics module for `arch` (`compute_80`, `compute_90`, ...), or returns the
/// cached PTX. Needs only NVRTC (no driver, no GPU): CI compiles every kernel this way.
pub fn compile_for(arch: &str) -> Result<Arc<CompiledModule>, Error> {
    probe::require_nvrtc()?;
    if !arch.starts_with("compute_") || !arch[8..].bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::Compile {
            arch: arch.into(),
            log: "the architecture must be compute_<digits> (compute_80, compute_90, ...)".into(),
        });
    }
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = cache.as_ref().and_then(|c| c.get(arch)) {
        return Ok(Arc::clone(m));
    }
    let opts = CompileOptions {
        // Explicit roundings only: no FMA contraction, IEEE division and square root, no
        // flush-to-zero (subnormal f16/f32 inputs count as non-zero, as on the host).
        fmad: Some(false),
        ftz: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
        name: Some("opdump_stats.cu".into()),
        ..CompileOptions::default()
    };
    let ptx = compile_ptx_with_opts(module_source(), opts).map_err(|e| Error::Compile {
        arch: arch.into(),
        log: match e {
            CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
            other => format!("{other:?}"),
        },
    })?;
    let m = Arc::new(CompiledModule {
        arch: arch.into(),
        ptx,
    });
    cache
        .get_or_insert_with(HashMap::new)
        .insert(arch.into(), Arc::clone(&m));
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names() {
        assert_eq!(arch_of(8, 0), "compute_80");
        assert_eq!(arch_of(9, 0), "compute_90");
    }

    #[test]
    fn bad_arch_is_an_error_not_a_panic() {
        if !probe::nvrtc_present() {
            // Without NVRTC the same call reports the missing library instead.
            assert!(matches!(compile_for("sm_80"), Err(Error::NoNvrtc { .. })));
            return;
        }
        let e = compile_for("sm_80").unwrap_err();
        assert!(e.to_string().contains("compute_<digits>"), "{e}");
    }
}
