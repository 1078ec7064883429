//! The kernels' CUDA C++ compiled for the host: the intrinsic shims, the f16 helpers and
//! `run<K>`, a serial replay of one launch (grid-stride assignment, warp trees, block stage)
//! around the per-thread state of `BODY`. Shared by `kernel_on_host.rs` (a harness
//! executable) and `mock_driver` (a mock `libcuda.so` that runs launches with it).

use dump_device_cuda::kernel_source::{BLOCK, BODY, HEAD};
use std::path::Path;
use std::process::Command;

/// Host stand-ins for the CUDA built-ins BODY uses. `__fadd_rn` and friends are plain IEEE
/// operations (the build uses -ffp-contract=off, so nothing fuses).
pub const SHIMS: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#define __device__
#define __forceinline__ inline
#define __global__
#define __restrict__
#define __shared__ static
#define __launch_bounds__(x)
struct uint4 { unsigned x, y, z, w; };
struct dim3 { unsigned x; };
static dim3 threadIdx, blockIdx, blockDim, gridDim;
static inline void __syncthreads() {}
template <class T> T __shfl_down_sync(unsigned, T v, unsigned) { return v; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline long long __double_as_longlong(double d) { long long u; memcpy(&u, &d, 8); return u; }
static inline double __longlong_as_double(long long u) { double d; memcpy(&d, &u, 8); return d; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
"#;

/// Host versions of the PTX f16 helpers (`cvt.f32.f16`, `cvt.rn.f16.f32`): GCC's _Float16
/// converts exactly / with round-to-nearest-even.
pub const F16_HOST: &str = r#"
static inline float f16_to_f32(unsigned short h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
static inline float round_f16(float x) { return (float)(_Float16)x; }
"#;

/// `run<K>(data, n, grid, out)`: the partials one launch of kernel `K` writes, thread by
/// thread in the kernel's grid-stride order, warps reduced by the same shuffle tree.
pub const RUN: &str = r#"
template <class K> static void run(const void* data, u64 n, unsigned grid, Partial* out) {
    typedef typename K::raw_t R;
    const unsigned UNIT = 16 / sizeof(R), B = BLOCK_THREADS;
    const R* d = (const R*)data;
    const u64 units = (n + UNIT - 1) / UNIT, stride = (u64)grid * B;
    static St<K> lanes[32], warps[32];
    for (unsigned b = 0; b < grid; ++b) {
        for (unsigned w = 0; w < B / 32; ++w) {
            for (unsigned l = 0; l < 32; ++l) {
                lanes[l].init();
                Counts c = {0u, 0u, 0u, 0u, 0u};
                for (u64 u = (u64)b * B + w * 32 + l; u < units; u += stride) {
                    const u64 base = u * UNIT, end = base + UNIT < n ? base + UNIT : n;
                    // Whole units of small integers as the kernel folds them (checked
                    // here against the model's element-by-element order).
                    if (K::small_int && end - base == UNIT) { lanes[l].push_unit(d + base, c); continue; }
                    for (u64 i = base; i < end; ++i) lanes[l].push(d[i], i, c);
                }
                lanes[l].fold(c);
            }
            for (unsigned off = 16; off > 0; off >>= 1)
                for (unsigned l = 0; l < off; ++l) lanes[l].merge(lanes[l + off]);
            warps[w] = lanes[0];
        }
        for (unsigned l = B / 32; l < 32; ++l) warps[l].init();
        for (unsigned off = 16; off > 0; off >>= 1)
            for (unsigned l = 0; l < off; ++l) warps[l].merge(warps[l + off]);
        warps[0].store(out + b);
    }
}
"#;

/// The kernel source with host shims and [`RUN`]: everything but a `main` or an API.
pub fn kernel_cxx() -> String {
    [
        SHIMS,
        &format!("#define BLOCK_THREADS {BLOCK}u\n"),
        HEAD,
        F16_HOST,
        BODY,
        RUN,
    ]
    .concat()
}

/// Compiles `source` with g++ into `out` with the kernel flags (no FMA contraction, strict
/// IEEE) plus `extra`. `None` when g++ is missing (SKIP printed; a failure with `CI=true`,
/// see `opdump_test_support`); panics
/// with g++'s message when the source does not compile.
pub fn gxx(who: &str, source: &str, out: &Path, extra: &[&str]) -> Option<()> {
    if !opdump_test_support::require(opdump_test_support::Prereq::Cxx) {
        return None;
    }
    let src = out.with_extension("cpp");
    std::fs::write(&src, source).unwrap();
    let result = Command::new("g++")
        .args([
            "-std=c++17",
            "-O2",
            "-ffp-contract=off",
            "-fno-fast-math",
            "-w",
        ])
        .args(extra)
        .arg("-o")
        .arg(out)
        .arg(&src)
        .output();
    let output = result.unwrap_or_else(|e| panic!("{who}: running g++: {e}"));
    assert!(
        output.status.success(),
        "g++ failed for {who}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(())
}
