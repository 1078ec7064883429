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
///
/// A module seeded with [`seed_cache`] is returned without NVRTC.
pub fn compile_for(arch: &str) -> Result<Arc<CompiledModule>, Error> {
    check_arch(arch)?;
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = cache.as_ref().and_then(|c| c.get(arch)) {
        return Ok(Arc::clone(m));
    }
    probe::require_nvrtc()?;
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

fn check_arch(arch: &str) -> Result<(), Error> {
    let digits = arch.strip_prefix("compute_").unwrap_or("");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::Compile {
            arch: arch.into(),
            log: "the architecture must be compute_<digits> (compute_80, compute_90, ...)".into(),
        });
    }
    Ok(())
}

/// The NVRTC options every compilation uses (part of [`cache_key`]).
const OPTIONS_TAG: &str = "fmad=false ftz=false prec-div prec-sqrt c++17";

/// A name for a persistent PTX cache entry: the architecture and a hash of the kernel
/// source and compile options, so a changed kernel never loads stale PTX.
///
/// This crate does no file I/O: a caller that keeps PTX on disk (dump-host) stores
/// [`CompiledModule::ptx_text`] under this key and feeds it back with [`seed_cache`].
pub fn cache_key(arch: &str) -> String {
    // FNV-1a, 64 bit: stable across Rust versions (unlike DefaultHasher).
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in module_source().bytes().chain(OPTIONS_TAG.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("opdump-stats-{arch}-{h:016x}")
}

/// Seeds the in-process cache with PTX for `arch` (read from a caller's disk cache under
/// [`cache_key`]), so no NVRTC compilation (nor NVRTC itself) is needed. PTX that is not
/// this module's fails later, when the driver loads it ([`Error::Driver`]).
pub fn seed_cache(arch: &str, ptx_text: String) -> Result<Arc<CompiledModule>, Error> {
    check_arch(arch)?;
    let m = Arc::new(CompiledModule {
        arch: arch.into(),
        ptx: Ptx::from_src(ptx_text),
    });
    CACHE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
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
        for bad in ["sm_80", "compute_", "compute_8a"] {
            let e = compile_for(bad).unwrap_err();
            assert!(e.to_string().contains("compute_<digits>"), "{e}");
        }
    }

    #[test]
    fn seeded_ptx_needs_no_nvrtc_and_keys_track_the_source() {
        // An architecture no test compiles for, so the seed does not disturb other tests.
        let m = seed_cache("compute_1", ".version 8.7\n// seeded".into()).unwrap();
        let again = compile_for("compute_1").unwrap();
        assert!(Arc::ptr_eq(&m, &again));
        assert!(again.ptx_text().contains("// seeded"));
        let k = cache_key("compute_80");
        assert!(
            k.starts_with("opdump-stats-compute_80-") && k.len() == 24 + 16,
            "{k}"
        );
        assert_eq!(k, cache_key("compute_80"));
        assert_ne!(k, cache_key("compute_90"));
    }
}
