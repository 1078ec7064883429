//! Finding the CUDA libraries without ever panicking.
//!
//! cudarc loads `libcuda.so` and `libnvrtc.so` lazily on the first call and **panics** when
//! they are missing. Every entry point of this crate therefore asks these functions first and
//! returns [`Error::NoDriver`] / [`Error::NoNvrtc`] instead.

use crate::Error;
use std::path::Path;
use std::sync::Mutex;

/// `true` when the NVIDIA driver library can be loaded (it says nothing about devices).
pub fn driver_present() -> bool {
    #[cfg(not(feature = "dynamic-linking"))]
    // SAFETY: is_culib_present only tries to dlopen the candidate names and drops the handle;
    // loading libcuda runs no user-visible initialisation.
    let present = unsafe { cudarc::driver::sys::is_culib_present() };
    // Linked at build time: the loader resolved libcuda before the process started.
    #[cfg(feature = "dynamic-linking")]
    let present = true;
    present
}

/// `true` when NVRTC can be loaded by name (the system loader path, or a library already
/// loaded by [`preload_nvrtc`]).
pub fn nvrtc_present() -> bool {
    #[cfg(not(feature = "dynamic-linking"))]
    // SAFETY: as for driver_present: a dlopen attempt of libnvrtc by name.
    let present = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    // Linked at build time, as for driver_present.
    #[cfg(feature = "dynamic-linking")]
    let present = true;
    present
}

/// Libraries loaded by [`preload_nvrtc`], kept loaded for the life of the process.
static PRELOADED: Mutex<Vec<libloading::Library>> = Mutex::new(Vec::new());

/// Loads `libnvrtc.so.12` from `dir` (for example the `lib` directory of the PyPI wheel
/// `nvidia-cuda-nvrtc-cu12`, see `ci/fetch-nvrtc.sh`), so that later loads by name find it.
///
/// The dynamic loader matches already-loaded libraries by their soname, so after this call
/// cudarc's own `dlopen("libnvrtc.so.12")` succeeds without `LD_LIBRARY_PATH`. The library
/// finds its `libnvrtc-builtins` through its `$ORIGIN` run path. Idempotent.
pub fn preload_nvrtc(dir: &Path) -> Result<(), Error> {
    let path = dir.join("libnvrtc.so.12");
    if !path.is_file() {
        return Err(Error::NoNvrtc {
            searched: path.display().to_string(),
        });
    }
    // SAFETY: loading libnvrtc runs its ELF initialisers, which only set up NVRTC's own
    // state; the handle is kept in PRELOADED for the life of the process, so no symbol
    // resolved from it later (by cudarc) outlives the library.
    let lib = unsafe { libloading::Library::new(&path) }.map_err(|e| Error::NoNvrtc {
        searched: format!("{} ({e})", path.display()),
    })?;
    PRELOADED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(lib);
    if nvrtc_present() {
        Ok(())
    } else {
        Err(Error::NoNvrtc {
            searched: format!("{} (loaded, but not found again by name)", path.display()),
        })
    }
}

/// Checks that NVRTC is loadable, with a clear error when it is not.
pub(crate) fn require_nvrtc() -> Result<(), Error> {
    if nvrtc_present() {
        Ok(())
    } else {
        Err(Error::NoNvrtc {
            searched: "the dynamic loader path (libnvrtc.so, libnvrtc.so.12, ...)".into(),
        })
    }
}

/// Checks that the driver is loadable.
pub(crate) fn require_driver() -> Result<(), Error> {
    if driver_present() {
        Ok(())
    } else {
        Err(Error::NoDriver)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_from_a_directory_without_nvrtc_is_an_error() {
        let dir = std::env::temp_dir().join("opdump-no-nvrtc-here");
        let e = preload_nvrtc(&dir).unwrap_err();
        assert!(
            e.to_string()
                .contains("opdump-no-nvrtc-here/libnvrtc.so.12"),
            "{e}"
        );
    }

    #[test]
    fn probes_never_panic() {
        // Whatever this machine has, the answers are plain booleans.
        let (d, n) = (driver_present(), nvrtc_present());
        assert_eq!(require_driver().is_ok(), d);
        assert_eq!(require_nvrtc().is_ok(), n);
    }
}
