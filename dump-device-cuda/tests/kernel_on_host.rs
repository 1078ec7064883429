//! The kernels' own CUDA C++ (`HEAD` + `BODY`, everything but the two PTX f16 helpers),
//! compiled for the host with g++ and a few intrinsic shims, produces exactly the block
//! partials of [`model::partials`]. This checks, without a GPU, that the CUDA source's
//! per-thread state (types, roundings, 128-bit sums, NaN tracking, signed-zero extrema) is
//! what the model replays. The thread/warp/block driver below mirrors `stats_body`; on a
//! GPU, `tests/gpu.rs` checks the real launch against the model.
//!
//! Without g++ the test prints SKIP and passes.

use dump_core::DType;
use dump_device_cuda::kernel_source::{BLOCK, BODY, HEAD, KernelId, grid_for};
use dump_device_cuda::{Partial, model};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Host stand-ins for the CUDA built-ins BODY uses. `__fadd_rn` and friends are plain IEEE
/// operations (the build uses -ffp-contract=off, so nothing fuses).
const SHIMS: &str = r#"
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
const F16_HOST: &str = r#"
static inline float f16_to_f32(unsigned short h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
static inline float round_f16(float x) { return (float)(_Float16)x; }
"#;

/// The driver: the kernel's grid-stride assignment, warp trees and block stage, with the
/// per-thread state from BODY. Usage: harness TRAITS N GRID IN OUT.
const DRIVER: &str = r#"
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
                for (u64 u = (u64)b * B + w * 32 + l; u < units; u += stride) {
                    const u64 base = u * UNIT, end = base + UNIT < n ? base + UNIT : n;
                    for (u64 i = base; i < end; ++i) lanes[l].push(d[i], i);
                }
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

int main(int argc, char** argv) {
    if (argc != 6) return 2;
    const char* k = argv[1];
    u64 n = strtoull(argv[2], 0, 10);
    unsigned grid = (unsigned)strtoul(argv[3], 0, 10);
    FILE* f = fopen(argv[4], "rb");
    if (!f) return 3;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void* data = malloc(len + 16);
    if (fread(data, 1, len, f) != (size_t)len) return 4;
    fclose(f);
    Partial* out = (Partial*)calloc(grid, sizeof(Partial));
#define K(T) if (!strcmp(k, #T)) run<T>(data, n, grid, out); else
    K(F16High) K(F16Low) K(BF16High) K(BF16Low) K(F32High) K(F32Low) K(F64)
    K(I8) K(I16) K(I32) K(I64) K(U8) K(Bool) return 5;
    FILE* o = fopen(argv[5], "wb");
    if (!o || fwrite(out, sizeof(Partial), grid, o) != grid) return 6;
    fclose(o);
    return 0;
}
"#;

fn build_harness(dir: &Path) -> Option<PathBuf> {
    let src = dir.join("harness.cpp");
    let exe = dir.join("harness");
    let text = [
        SHIMS,
        &format!("#define BLOCK_THREADS {BLOCK}u\n"),
        HEAD,
        F16_HOST,
        BODY,
        DRIVER,
    ]
    .concat();
    std::fs::write(&src, text).unwrap();
    let out = match Command::new("g++")
        .args([
            "-std=c++17",
            "-O1",
            "-ffp-contract=off",
            "-fno-fast-math",
            "-w",
            "-o",
        ])
        .arg(&exe)
        .arg(&src)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            eprintln!("SKIP kernel_on_host: g++ not runnable ({e})");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "g++ failed on the kernel source:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(exe)
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn bytes_for(dtype: DType, n: usize, seed: u64) -> Vec<u8> {
    let size = dtype.size().unwrap();
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n * size);
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut b = x.to_le_bytes();
        if dtype.is_float() && i % 3 != 0 {
            // Moderate values (exercise rounding); every third element raw bits (NaN, inf,
            // subnormals, huge values).
            let v = ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 6e4;
            b = match dtype {
                DType::Float16 => u64::from(half::f16::from_f64(v).to_bits()).to_le_bytes(),
                DType::BFloat16 => u64::from(half::bf16::from_f64(v).to_bits()).to_le_bytes(),
                DType::Float32 => u64::from((v as f32).to_bits()).to_le_bytes(),
                _ => v.to_le_bytes(),
            };
        }
        if i % 11 == 0 {
            b = [0, 0, 0, 0, 0, 0, 0, 0x80]; // -0.0 in f64, else zero / negative ints
            if size < 8 {
                b = [0; 8];
                b[size - 1] = if dtype.is_float() { 0x80 } else { 0 };
            }
        }
        if dtype == DType::Bool {
            b[0] &= 3; // 2 is "true" too
        }
        out.extend_from_slice(&b[..size]);
    }
    out
}

#[test]
fn the_cuda_source_computes_what_the_model_replays() {
    let dir = std::env::temp_dir().join(format!("opdump-kernel-on-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let Some(exe) = build_harness(&dir) else {
        return;
    };
    for k in KernelId::ALL {
        let size = k.dtype.size().unwrap();
        let cases = [1usize, 5, 33, 1000, 4099, 70_001, 300_000]
            .into_iter()
            .map(|n| (n, false))
            .chain([(77, true), (5000, true)]);
        for (n, zeros) in cases {
            let mut data = bytes_for(k.dtype, n, n as u64 ^ 0x5eed);
            if zeros {
                // Only +0 and -0 (floats) or 0 (integers): the extrema are signed zeros.
                for (i, b) in data.iter_mut().enumerate() {
                    let top = i % size == size - 1;
                    *b = if top && k.dtype.is_float() && (i / size) % 3 == 1 {
                        0x80
                    } else {
                        0
                    };
                }
            }
            let grid = grid_for(size, n as u64);
            let input = dir.join("in.bin");
            let output = dir.join("out.bin");
            std::fs::write(&input, &data).unwrap();
            let st = Command::new(&exe)
                .arg(k.traits())
                .arg(n.to_string())
                .arg(grid.to_string())
                .arg(&input)
                .arg(&output)
                .status()
                .unwrap();
            assert!(st.success(), "harness failed for {} n={n}: {st}", k.name());
            let raw = std::fs::read(&output).unwrap();
            assert_eq!(raw.len(), grid as usize * Partial::WORDS * 8);
            let cxx: Vec<Partial> = raw
                .chunks_exact(Partial::WORDS * 8)
                .map(|c| {
                    let mut w = [0u64; Partial::WORDS];
                    for (word, bytes) in w.iter_mut().zip(c.chunks_exact(8)) {
                        *word = u64::from_le_bytes(bytes.try_into().unwrap());
                    }
                    Partial::from_words(&w)
                })
                .collect();
            let rust = model::partials(k, &data, n).unwrap();
            assert_eq!(cxx.len(), rust.len());
            for (b, (c, r)) in cxx.iter().zip(&rust).enumerate() {
                let ctx = format!(
                    "{} n={n} zeros={zeros} block {b}:\n  c++  {c:?}\n  rust {r:?}",
                    k.name()
                );
                assert!(same(c.max, r.max) && same(c.min, r.min), "{ctx}\nextrema");
                assert!(
                    same(c.sum, r.sum) && same(c.sum_sq, r.sum_sq),
                    "{ctx}\nsums"
                );
                let ints = |p: &Partial| {
                    [
                        p.imax as u64,
                        p.imin as u64,
                        p.isum_lo,
                        p.isum_hi as u64,
                        p.nan,
                        p.pos_inf,
                        p.neg_inf,
                        p.zero,
                        p.pos,
                        p.neg,
                        p.first_nan_idx,
                        p.first_nan_raw,
                        p.last_nan_idx,
                        p.last_nan_raw,
                    ]
                };
                assert_eq!(ints(c), ints(r), "{ctx}\ncounts, integer sums, NaN");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
