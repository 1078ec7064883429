//! The GPU under test: device 0 through the real driver, or a skip (a failure with
//! `OPDUMP_REQUIRE_GPU=1`) that says why there is none. NVRTC is preloaded from
//! `OPDUMP_NVRTC_LIB_DIR` when set.

use dump_device_cuda::{CudaStats, driver_present, preload_nvrtc};
use opdump_test_support::{Prereq, check};

/// Statistics on GPU 0, or `None` after reporting the skip.
pub fn gpu() -> Option<CudaStats> {
    if let Some(dir) = std::env::var_os("OPDUMP_NVRTC_LIB_DIR") {
        // A failure shows up below as Error::NoNvrtc with the reason.
        let _ = preload_nvrtc(std::path::Path::new(&dir));
    }
    let reason = if !driver_present() {
        "no NVIDIA driver (libcuda.so not loadable)".to_string()
    } else {
        match CudaStats::new(0) {
            Ok(s) => return Some(s),
            Err(e) => e.to_string(),
        }
    };
    check(Prereq::Gpu, Err(reason));
    None
}
