//! A mock NVIDIA driver (`libcuda.so`) in host memory, so that the GPU code paths — cudarc
//! calls, launch arguments, partial layout, pinned double buffering, error handling — run on
//! machines without a GPU. See `libcuda_mock.cpp` for what it models.
//!
//! [`load`] builds it with g++ (once per test process) and loads it by path with the soname
//! `libcuda.so`. The dynamic loader matches later loads by soname, so cudarc's own
//! `dlopen("libcuda.so")` resolves to the mock even on a machine with a real driver. Call
//! [`load`] before anything touches cudarc, and keep mock tests in their own test binaries.
//!
//! Kernel launches run `host_cxx::RUN`, the serial replay of the kernel source that
//! `kernel_on_host.rs` checks against the Rust model; so the mock tests check the host side
//! (what is launched, copied and combined), not GPU semantics (`gpu.rs` does that on a GPU).

use super::host_cxx;
use dump_device_cuda::kernel_source::KernelId;
use std::ffi::{CString, c_char, c_int};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The mock driver, loaded for the rest of the process.
pub struct MockDriver {
    lib: libloading::Library,
}

static MOCK: OnceLock<Option<MockDriver>> = OnceLock::new();

/// The mock, built and loaded on first use; `None` (SKIP printed) without g++.
pub fn load() -> Option<&'static MockDriver> {
    MOCK.get_or_init(build).as_ref()
}

fn build() -> Option<MockDriver> {
    let dir = std::env::temp_dir().join(format!("opdump-mock-cuda-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut source = host_cxx::kernel_cxx();
    source.push_str(
        "struct KernelEntry { const char* name; void (*run)(const void*, u64, unsigned, \
         Partial*); size_t elem_size; };\nstatic const KernelEntry KERNELS[] = {\n",
    );
    for k in KernelId::ALL {
        let t = k.traits();
        source.push_str(&format!(
            "    {{\"{}\", &run<{t}>, sizeof({t}::raw_t)}},\n",
            k.name()
        ));
    }
    source.push_str("};\n");
    source.push_str(include_str!("libcuda_mock.cpp"));
    let lib_path: PathBuf = dir.join("libcuda.so");
    host_cxx::gxx(
        "mock driver",
        &source,
        &lib_path,
        &["-shared", "-fPIC", "-Wl,-soname,libcuda.so"],
    )?;
    // SAFETY: the mock's initialisers only construct its (lazily created) global state; the
    // library stays loaded for the life of the process (held in MOCK), so every symbol
    // cudarc resolves from it stays valid.
    let lib = unsafe { libloading::Library::new(&lib_path) }
        .unwrap_or_else(|e| panic!("loading {}: {e}", lib_path.display()));
    assert!(
        dump_device_cuda::driver_present(),
        "the mock libcuda.so is loaded but cudarc's probe does not find it"
    );
    Some(MockDriver { lib })
}

impl MockDriver {
    /// The calls logged since the last `log(true)`, one a line.
    pub fn log(&self, clear: bool) -> String {
        type F = unsafe extern "C" fn(*mut c_char, usize, c_int) -> usize;
        // SAFETY: the symbol has this signature in libcuda_mock.cpp.
        let f = unsafe { self.lib.get::<F>(b"opdump_mock_log\0") }.unwrap();
        // SAFETY: a null buffer asks only for the length; the second call writes at most
        // `cap` bytes (NUL included) into `buf`, which has that many.
        unsafe {
            let len = f(std::ptr::null_mut(), 0, 0);
            let mut buf = vec![0u8; len + 1];
            let cap = buf.len();
            f(buf.as_mut_ptr().cast(), cap, c_int::from(clear));
            buf.truncate(len);
            String::from_utf8(buf).unwrap()
        }
    }

    /// Makes the `(skip + 1)`-th next call of API function `name` return `code`.
    pub fn fail(&self, name: &str, code: i32, skip: i32) {
        type F = unsafe extern "C" fn(*const c_char, c_int, c_int);
        // SAFETY: the symbol has this signature; the mock copies the name before returning.
        unsafe {
            let f = self.lib.get::<F>(b"opdump_mock_fail\0").unwrap();
            let name = CString::new(name).unwrap();
            f(name.as_ptr(), code, skip);
        }
    }

    /// Bytes of device memory currently allocated.
    pub fn device_bytes(&self) -> usize {
        type F = unsafe extern "C" fn() -> usize;
        // SAFETY: the symbol has this signature and only reads the mock's state.
        unsafe { self.lib.get::<F>(b"opdump_mock_device_bytes\0").unwrap()() }
    }
}
