//! NVRTC compilation of the statistics module, cached per architecture.
//!
//! Two targets:
//! - `sm_XY` (a real architecture): a CUBIN, machine code for exactly that GPU. The driver
//!   loads it without a JIT, so it works with any driver of the same CUDA major version
//!   (CUDA's minor-version compatibility), even one older than NVRTC. Preferred.
//! - `compute_XY` (a virtual architecture): PTX, which the driver JIT-compiles; it runs on
//!   that architecture and newer ones, but needs a driver at least as new as NVRTC (PTX ISA
//!   8.7 for NVRTC 12.8). The fallback, and what CI checks on machines without a GPU.

use crate::{Error, kernel_source::module_source, probe};
use cudarc::nvrtc::{Ptx, result, sys};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex};

/// The compiled statistics module for one architecture: PTX text or a CUBIN.
#[derive(Clone, Debug)]
pub struct CompiledModule {
    /// The architecture it was compiled for (`sm_80` or `compute_80`).
    pub arch: String,
    image: Image,
}

#[derive(Clone, Debug)]
enum Image {
    Ptx(String),
    Cubin(Vec<u8>),
}

impl CompiledModule {
    /// The PTX text (`compute_XY` modules), else `None`.
    pub fn ptx_text(&self) -> Option<&str> {
        match &self.image {
            Image::Ptx(s) => Some(s),
            Image::Cubin(_) => None,
        }
    }

    /// The CUBIN (`sm_XY` modules), else `None`.
    pub fn cubin(&self) -> Option<&[u8]> {
        match &self.image {
            Image::Cubin(b) => Some(b),
            Image::Ptx(_) => None,
        }
    }

    /// The image for `CudaContext::load_module`.
    pub(crate) fn to_ptx(&self) -> Ptx {
        match &self.image {
            Image::Ptx(s) => Ptx::from_src(s.clone()),
            Image::Cubin(b) => Ptx::from_binary(b.clone()),
        }
    }
}

/// The in-process cache: one compilation per architecture per process.
static CACHE: Mutex<Option<HashMap<String, Arc<CompiledModule>>>> = Mutex::new(None);

/// The virtual architecture name of a compute capability: `(8, 0)` gives `compute_80`.
pub fn arch_of(major: i32, minor: i32) -> String {
    format!("compute_{major}{minor}")
}

/// The real architecture name of a compute capability: `(8, 0)` gives `sm_80`.
pub fn sm_of(major: i32, minor: i32) -> String {
    format!("sm_{major}{minor}")
}

/// The NVRTC options of every compilation (also part of [`cache_key`]). Explicit roundings
/// only: no FMA contraction, IEEE division and square root, no flush-to-zero (subnormal
/// f16/f32 inputs count as non-zero, as on the host).
const OPTIONS: [&str; 5] = [
    "--fmad=false",
    "--ftz=false",
    "--prec-div=true",
    "--prec-sqrt=true",
    "--std=c++17",
];

/// Compiles the statistics module for `arch` — `compute_XY` gives PTX, `sm_XY` a CUBIN —
/// or returns the cached module. Needs only NVRTC (no driver, no GPU): CI compiles every
/// kernel this way. A module seeded with [`seed_cache`] is returned without NVRTC.
pub fn compile_for(arch: &str) -> Result<Arc<CompiledModule>, Error> {
    let cubin = check_arch(arch)?;
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = cache.as_ref().and_then(|c| c.get(arch)) {
        return Ok(Arc::clone(m));
    }
    probe::require_nvrtc()?;
    let image = nvrtc_compile(arch, cubin)?;
    let m = Arc::new(CompiledModule {
        arch: arch.into(),
        image,
    });
    cache
        .get_or_insert_with(HashMap::new)
        .insert(arch.into(), Arc::clone(&m));
    Ok(m)
}

/// One NVRTC program, destroyed on drop.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by create_program and is destroyed only here.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

fn nvrtc_compile(arch: &str, cubin: bool) -> Result<Image, Error> {
    let fail = |log: String| Error::Compile {
        arch: arch.into(),
        log,
    };
    let src = CString::new(module_source()).map_err(|_| fail("NUL byte in the source".into()))?;
    let name = c"opdump_stats.cu";
    let prog =
        Program(result::create_program(&src, Some(name)).map_err(|e| fail(format!("{e:?}")))?);
    let mut options: Vec<String> = OPTIONS.iter().map(|o| o.to_string()).collect();
    options.push(format!("--gpu-architecture={arch}"));
    // SAFETY: `prog` is a live program (destroyed by its Drop after this function); `src`
    // and `name` outlive it.
    if let Err(e) = unsafe { result::compile_program(prog.0, &options) } {
        // SAFETY: as above.
        let log = unsafe { result::get_program_log(prog.0) }
            .map(|l| {
                let bytes: Vec<u8> = l.iter().map(|&c| c as u8).collect();
                CStr::from_bytes_until_nul(&bytes)
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned())
            })
            .unwrap_or_else(|le| format!("(no log: {le:?})"));
        return Err(fail(format!("{e:?}: {log}")));
    }
    if cubin {
        let mut size = 0usize;
        // SAFETY: `prog` compiled successfully for a real architecture, so NVRTC holds a
        // CUBIN of `size` bytes, which it copies into a buffer of exactly that size.
        let bytes = unsafe {
            sys::nvrtcGetCUBINSize(prog.0, &mut size)
                .result()
                .map_err(|e| fail(format!("nvrtcGetCUBINSize: {e:?}")))?;
            let mut buf = vec![0u8; size];
            sys::nvrtcGetCUBIN(prog.0, buf.as_mut_ptr().cast())
                .result()
                .map_err(|e| fail(format!("nvrtcGetCUBIN: {e:?}")))?;
            buf
        };
        return Ok(Image::Cubin(bytes));
    }
    // SAFETY: `prog` compiled successfully.
    let ptx =
        unsafe { result::get_ptx(prog.0) }.map_err(|e| fail(format!("nvrtcGetPTX: {e:?}")))?;
    let bytes: Vec<u8> = ptx.iter().map(|&c| c as u8).collect();
    let text = CStr::from_bytes_until_nul(&bytes)
        .map(|c| c.to_string_lossy().into_owned())
        .map_err(|_| fail("PTX without a terminating NUL".into()))?;
    Ok(Image::Ptx(text))
}

/// Validates `compute_<digits>` / `sm_<digits>`; `true` for `sm_` (a CUBIN).
fn check_arch(arch: &str) -> Result<bool, Error> {
    let (cubin, digits) = match (arch.strip_prefix("compute_"), arch.strip_prefix("sm_")) {
        (Some(d), _) => (false, d),
        (_, Some(d)) => (true, d),
        _ => (false, ""),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::Compile {
            arch: arch.into(),
            log: "the architecture must be compute_<digits> (PTX) or sm_<digits> (CUBIN), \
                  for example compute_80 or sm_90"
                .into(),
        });
    }
    Ok(cubin)
}

/// A name for a persistent cache entry: the architecture and a hash of the kernel source
/// and compile options, so a changed kernel never loads a stale image.
///
/// This crate does no file I/O: a caller that keeps images on disk (dump-host) stores
/// [`CompiledModule::ptx_text`] or [`CompiledModule::cubin`] under this key and feeds it
/// back with [`seed_cache`].
pub fn cache_key(arch: &str) -> String {
    // FNV-1a, 64 bit: stable across Rust versions (unlike DefaultHasher).
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in module_source().bytes().chain(OPTIONS.concat().bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("opdump-stats-{arch}-{h:016x}")
}

/// Seeds the in-process cache for `arch` with an image read from a caller's disk cache
/// under [`cache_key`] (PTX text for `compute_XY`, CUBIN bytes for `sm_XY`), so that no
/// NVRTC compilation (nor NVRTC itself) is needed. An image that is not this module's fails
/// later, when the driver loads it ([`Error::Driver`]).
pub fn seed_cache(arch: &str, image: Vec<u8>) -> Result<Arc<CompiledModule>, Error> {
    let cubin = check_arch(arch)?;
    let image = if cubin {
        Image::Cubin(image)
    } else {
        Image::Ptx(String::from_utf8(image).map_err(|_| Error::Compile {
            arch: arch.into(),
            log: "seeded PTX is not UTF-8 text".into(),
        })?)
    };
    let m = Arc::new(CompiledModule {
        arch: arch.into(),
        image,
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
        assert_eq!(sm_of(9, 0), "sm_90");
        assert_eq!(check_arch("sm_86"), Ok(true));
        assert_eq!(check_arch("compute_90"), Ok(false));
    }

    #[test]
    fn bad_arch_is_an_error_not_a_panic() {
        for bad in ["sm80", "compute_", "compute_8a", "sm_", ""] {
            let e = compile_for(bad).unwrap_err();
            assert!(e.to_string().contains("compute_<digits>"), "{e}");
        }
    }

    #[test]
    fn seeded_images_need_no_nvrtc_and_keys_track_the_source() {
        // Architectures no test compiles for, so the seeds do not disturb other tests.
        let m = seed_cache("compute_1", b".version 8.7\n// seeded".to_vec()).unwrap();
        let again = compile_for("compute_1").unwrap();
        assert!(Arc::ptr_eq(&m, &again));
        assert!(again.ptx_text().unwrap().contains("// seeded"));
        let c = seed_cache("sm_1", vec![0x7f, b'E', b'L', b'F']).unwrap();
        assert_eq!(
            compile_for("sm_1").unwrap().cubin(),
            Some(&[0x7f, b'E', b'L', b'F'][..])
        );
        assert!(c.ptx_text().is_none());
        assert!(seed_cache("compute_2", vec![0xff, 0xfe]).is_err());
        let k = cache_key("compute_80");
        assert!(
            k.starts_with("opdump-stats-compute_80-") && k.len() == 24 + 16,
            "{k}"
        );
        assert_eq!(k, cache_key("compute_80"));
        assert_ne!(k, cache_key("sm_80"));
    }
}
