//! NVRTC for the device test binaries: loaded from `OPDUMP_NVRTC_LIB_DIR` (the directory
//! `ci/fetch-nvrtc.sh` prints) or the loader path. Whether a missing NVRTC skips or fails is
//! `opdump_test_support`'s decision (`CI=true` or `OPDUMP_REQUIRE_NVRTC=1` fail).

use dump_device_cuda::{nvrtc_present, preload_nvrtc};
use opdump_test_support::{Prereq, check};

/// Loads NVRTC if it can; `true` when it is loaded, else skips or fails the test (with why).
pub fn require_nvrtc() -> bool {
    check(Prereq::Nvrtc, probe())
}

/// Loads NVRTC if it can; `Err` says why it is missing.
pub fn probe() -> Result<(), String> {
    match std::env::var_os("OPDUMP_NVRTC_LIB_DIR") {
        Some(d) => preload_nvrtc(std::path::Path::new(&d))
            .map_err(|e| format!("OPDUMP_NVRTC_LIB_DIR is set but unusable: {e}")),
        None if nvrtc_present() => Ok(()),
        None => Err(
            "NVRTC not on the loader path and OPDUMP_NVRTC_LIB_DIR is unset \
                     (run dump-device-cuda/ci/fetch-nvrtc.sh)"
                .to_string(),
        ),
    }
}
