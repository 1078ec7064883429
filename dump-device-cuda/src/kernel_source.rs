//! The CUDA C++ source of the statistics kernels, compiled at run time by NVRTC.
//!
//! Header-free on purpose: the NVRTC wheel ships no `cuda_fp16.h`/`cuda_bf16.h`, so f16 and
//! bf16 travel as `unsigned short` and are widened by hand (bf16: `<< 16`; f16: the PTX
//! instruction `cvt.f32.f16`). Every arithmetic step uses an explicitly rounded intrinsic
//! (`__fadd_rn`, `__dmul_rn`, ...), which the compiler never contracts into an FMA, so the
//! kernels compute exactly what [`crate::model`] replays on the CPU.
//!
//! One kernel per [`KernelId`]: a grid-stride loop over 16-byte units, a warp-shuffle tree,
//! a shared-memory stage and one [`crate::Partial`] per block. The exact order is documented
//! in [`crate::model`].

use crate::Precision;
use dump_core::DType;

/// Threads per block of every statistics kernel.
pub const BLOCK: u32 = 256;
/// Largest grid: enough resident threads for any current GPU, and a pure function of the
/// tensor size so that results do not depend on which GPU ran the kernel.
pub const MAX_GRID: u32 = 1024;
/// Bytes each thread reads per grid-stride step (one 16-byte vector load when aligned).
pub const UNIT_BYTES: usize = 16;

/// Elements per 16-byte unit of `dtype` (its grid-stride step per thread).
pub fn unit_elems(elem_size: usize) -> u64 {
    (UNIT_BYTES / elem_size.clamp(1, UNIT_BYTES)) as u64
}

/// The grid (blocks) a kernel launch uses for `elems` elements of `elem_size` bytes: one
/// 16-byte unit per thread up to [`MAX_GRID`] blocks, at least one block. It depends only on
/// the tensor, never on the GPU, so every GPU combines the same partials in the same order.
pub fn grid_for(elem_size: usize, elems: u64) -> u32 {
    let units = elems.div_ceil(unit_elems(elem_size));
    units
        .div_ceil(u64::from(BLOCK))
        .clamp(1, u64::from(MAX_GRID)) as u32
}

/// One compiled statistics kernel: a dtype and, for floats below f64, a precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelId {
    /// The input dtype.
    pub dtype: DType,
    /// `true`: accumulate sums in the source dtype (`low`); `false`: in f64 (`high`).
    /// Always `false` for f64 and integer inputs, whose one kernel serves both precisions.
    pub low: bool,
}

impl KernelId {
    /// Every kernel the module defines.
    pub const ALL: [KernelId; 13] = [
        KernelId::new(DType::Float16, false),
        KernelId::new(DType::Float16, true),
        KernelId::new(DType::BFloat16, false),
        KernelId::new(DType::BFloat16, true),
        KernelId::new(DType::Float32, false),
        KernelId::new(DType::Float32, true),
        KernelId::new(DType::Float64, false),
        KernelId::new(DType::Int8, false),
        KernelId::new(DType::Int16, false),
        KernelId::new(DType::Int32, false),
        KernelId::new(DType::Int64, false),
        KernelId::new(DType::UInt8, false),
        KernelId::new(DType::Bool, false),
    ];

    const fn new(dtype: DType, low: bool) -> KernelId {
        KernelId { dtype, low }
    }

    /// The kernel computing `dtype` statistics under `precision`, or `None` for a dtype the
    /// device path does not support (uint16/32/64, int4, uint1, complex: use host statistics).
    pub fn for_dtype(dtype: DType, precision: Precision) -> Option<KernelId> {
        let low = matches!(precision, Precision::Low);
        match dtype {
            DType::Float16 | DType::BFloat16 | DType::Float32 => Some(KernelId::new(dtype, low)),
            DType::Float64
            | DType::Int8
            | DType::Int16
            | DType::Int32
            | DType::Int64
            | DType::UInt8
            | DType::Bool => Some(KernelId::new(dtype, false)),
            _ => None,
        }
    }

    /// The `extern "C"` name of the kernel.
    pub fn name(self) -> &'static str {
        match (self.dtype, self.low) {
            (DType::Float16, false) => "opdump_stats_f16_high",
            (DType::Float16, true) => "opdump_stats_f16_low",
            (DType::BFloat16, false) => "opdump_stats_bf16_high",
            (DType::BFloat16, true) => "opdump_stats_bf16_low",
            (DType::Float32, false) => "opdump_stats_f32_high",
            (DType::Float32, true) => "opdump_stats_f32_low",
            (DType::Float64, _) => "opdump_stats_f64",
            (DType::Int8, _) => "opdump_stats_i8",
            (DType::Int16, _) => "opdump_stats_i16",
            (DType::Int32, _) => "opdump_stats_i32",
            (DType::Int64, _) => "opdump_stats_i64",
            (DType::UInt8, _) => "opdump_stats_u8",
            // Only Bool is left among the ids `ALL`/`for_dtype` construct.
            _ => "opdump_stats_bool",
        }
    }

    /// The name of the kernel's traits struct in [`BODY`] (`F16Low`, `I32`, ...).
    pub fn traits(self) -> &'static str {
        match (self.dtype, self.low) {
            (DType::Float16, false) => "F16High",
            (DType::Float16, true) => "F16Low",
            (DType::BFloat16, false) => "BF16High",
            (DType::BFloat16, true) => "BF16Low",
            (DType::Float32, false) => "F32High",
            (DType::Float32, true) => "F32Low",
            (DType::Float64, _) => "F64",
            (DType::Int8, _) => "I8",
            (DType::Int16, _) => "I16",
            (DType::Int32, _) => "I32",
            (DType::Int64, _) => "I64",
            (DType::UInt8, _) => "U8",
            _ => "Bool",
        }
    }
}

/// The start of the module: types shared with the host ([`crate::Partial`]).
pub const HEAD: &str = r#"
// opdump statistics kernels (header-free CUDA C++ for NVRTC).
typedef unsigned long long u64;
typedef long long i64;

// One block partial. Layout shared with dump_device_cuda::Partial: 18 x 8 bytes.
struct Partial {
    double max, min, sum, sum_sq;
    i64 imax, imin;
    u64 isum_lo;
    i64 isum_hi;
    u64 nan, pos_inf, neg_inf, zero, pos, neg;
    u64 first_nan_idx, first_nan_raw, last_nan_idx, last_nan_raw;
};

"#;

/// The f16 conversions, in inline PTX (the only device-specific helpers: a host build of
/// [`BODY`] for testing supplies its own).
pub const F16_PTX: &str = r#"
__device__ __forceinline__ float f16_to_f32(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ float round_f16(float x) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return f16_to_f32(h);
}
"#;

/// The rest of the module: helpers, dtype traits, the per-thread state and the kernel body.
pub const BODY: &str = r#"
__device__ __forceinline__ float bf16_to_f32(unsigned short b) {
    return __uint_as_float(((unsigned)b) << 16);
}
// Round to nearest even bf16 (NaN stays NaN, quieted).
__device__ __forceinline__ float round_bf16(float x) {
    unsigned u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float((u | 0x00400000u) & 0xffff0000u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return __uint_as_float(u & 0xffff0000u);
}

__device__ __forceinline__ bool sign_of(float x) { return (__float_as_uint(x) >> 31) != 0; }
__device__ __forceinline__ bool sign_of(double x) { return __double_as_longlong(x) < 0; }
__device__ __forceinline__ bool sign_of(i64) { return false; }
// Extrema independent of order: among equal values +0 is the larger and -0 the smaller.
template <class V> __device__ __forceinline__ V vmax(V a, V b) {
    return (b > a || (b == a && sign_of(a) && !sign_of(b))) ? b : a;
}
template <class V> __device__ __forceinline__ V vmin(V a, V b) {
    return (b < a || (b == a && !sign_of(a) && sign_of(b))) ? b : a;
}

#define OPDUMP_INF (__longlong_as_double(0x7ff0000000000000ll))

// Float traits: raw_t (storage), val_t (exact widened value), acc_t (accumulator).
struct F16High {
    typedef unsigned short raw_t; typedef float val_t; typedef double acc_t;
    static const bool is_int = false; static const bool small_int = false;
    static __device__ __forceinline__ float widen(raw_t r) { return f16_to_f32(r); }
    static __device__ __forceinline__ bool is_nan(raw_t r) { return (r & 0x7fffu) > 0x7c00u; }
    static __device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
    static __device__ __forceinline__ double sq(float v) { return __dmul_rn((double)v, (double)v); }
};
struct F16Low {
    typedef unsigned short raw_t; typedef float val_t; typedef float acc_t;
    static const bool is_int = false; static const bool small_int = false;
    static __device__ __forceinline__ float widen(raw_t r) { return f16_to_f32(r); }
    static __device__ __forceinline__ bool is_nan(raw_t r) { return (r & 0x7fffu) > 0x7c00u; }
    static __device__ __forceinline__ float add(float a, float b) { return round_f16(__fadd_rn(a, b)); }
    static __device__ __forceinline__ float sq(float v) { return round_f16(__fmul_rn(v, v)); }
};
struct BF16High {
    typedef unsigned short raw_t; typedef float val_t; typedef double acc_t;
    static const bool is_int = false; static const bool small_int = false;
    static __device__ __forceinline__ float widen(raw_t r) { return bf16_to_f32(r); }
    static __device__ __forceinline__ bool is_nan(raw_t r) { return (r & 0x7fffu) > 0x7f80u; }
    static __device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
    static __device__ __forceinline__ double sq(float v) { return __dmul_rn((double)v, (double)v); }
};
struct BF16Low {
    typedef unsigned short raw_t; typedef float val_t; typedef float acc_t;
    static const bool is_int = false; static const bool small_int = false;
    static __device__ __forceinline__ float widen(raw_t r) { return bf16_to_f32(r); }
    static __device__ __forceinline__ bool is_nan(raw_t r) { return (r & 0x7fffu) > 0x7f80u; }
    static __device__ __forceinline__ float add(float a, float b) { return round_bf16(__fadd_rn(a, b)); }
    static __device__ __forceinline__ float sq(float v) { return round_bf16(__fmul_rn(v, v)); }
};
struct F32High {
    typedef unsigned raw_t; typedef float val_t; typedef double acc_t;
    static const bool is_int = false; static const bool small_int = false;
    static __device__ __forceinline__ float widen(raw_t r) { return __uint_as_float(r); }
    static __device__ __forceinline__ bool is_nan(raw_t r) { return (r & 0x7fffffffu) > 0x7f800000u; }
    static __device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
    static __device__ __forceinline__ double sq(float v) { return __dmul_rn((double)v, (double)v); }
};
struct F32Low {
    typedef unsigned raw_t; typedef float val_t; typedef float acc_t;
    static const bool is_int = false; static const bool small_int = false;
    static __device__ __forceinline__ float widen(raw_t r) { return __uint_as_float(r); }
    static __device__ __forceinline__ bool is_nan(raw_t r) { return (r & 0x7fffffffu) > 0x7f800000u; }
    static __device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
    static __device__ __forceinline__ float sq(float v) { return __fmul_rn(v, v); }
};
struct F64 {
    typedef u64 raw_t; typedef double val_t; typedef double acc_t;
    static const bool is_int = false; static const bool small_int = false;
    static __device__ __forceinline__ double widen(raw_t r) { return __longlong_as_double((i64)r); }
    static __device__ __forceinline__ bool is_nan(raw_t r) { return (r & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }
    static __device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
    static __device__ __forceinline__ double sq(double v) { return __dmul_rn(v, v); }
};

// Integer traits: val_t is always i64; sums are exact (128-bit), squares sum in f64.
#define OPDUMP_INT_TRAITS(NAME, RAW, WIDEN, SMALL) \
struct NAME { \
    typedef RAW raw_t; typedef i64 val_t; typedef double acc_t; \
    static const bool is_int = true; static const bool small_int = SMALL; \
    static __device__ __forceinline__ i64 widen(raw_t r) { return (WIDEN); } \
    static __device__ __forceinline__ bool is_nan(raw_t) { return false; } \
    static __device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); } \
    static __device__ __forceinline__ double sq(i64 v) { return __dmul_rn((double)v, (double)v); } \
};
// SMALL: values and squares of one 16-byte unit sum exactly in 32/64-bit integers (see
// St::push_unit), so a unit is folded in once instead of element by element.
OPDUMP_INT_TRAITS(I8, signed char, (i64)r, true)
OPDUMP_INT_TRAITS(I16, short, (i64)r, true)
OPDUMP_INT_TRAITS(I32, int, (i64)r, false)
OPDUMP_INT_TRAITS(I64, i64, r, false)
OPDUMP_INT_TRAITS(U8, unsigned char, (i64)r, true)
OPDUMP_INT_TRAITS(Bool, unsigned char, (i64)(r != 0), true)

// One thread's counts of non-NaN elements, in 32 bits: a thread sees at most
// ceil(units / (grid * block)) units, under 2^23 elements for a 2^40-element tensor, so they
// cannot wrap; folded into St's 64-bit counters before the trees.
struct Counts {
    unsigned zero, pos, neg, pinf, ninf;
};

// Per-thread (then per-warp, per-block) state. Plain data: lives in shared memory too.
template <class K> struct St {
    typename K::acc_t sum, sq;
    typename K::val_t mx, mn;
    u64 ilo; i64 ihi;
    u64 nan, pinf, ninf, zero, pos, neg;
    u64 fidx, fraw, lidx, lraw;

    __device__ __forceinline__ void init() {
        sum = 0; sq = 0;
        if (K::is_int) { mx = (typename K::val_t)(-0x7fffffffffffffffll - 1); mn = (typename K::val_t)0x7fffffffffffffffll; }
        else { mx = (typename K::val_t)(-OPDUMP_INF); mn = (typename K::val_t)OPDUMP_INF; }
        ilo = 0; ihi = 0;
        nan = 0; pinf = 0; ninf = 0; zero = 0; pos = 0; neg = 0;
        fidx = 0; fraw = 0; lidx = 0; lraw = 0;
    }

    __device__ __forceinline__ void push(typename K::raw_t r, u64 i, Counts& c) {
        if (K::is_nan(r)) {
            if (nan == 0) { fidx = i; fraw = (u64)r; }
            lidx = i; lraw = (u64)r;
            nan += 1;
            return;
        }
        typename K::val_t v = K::widen(r);
        if (!K::is_int) sum = K::add(sum, (typename K::acc_t)v);
        sq = K::add(sq, K::sq(v));
        mx = vmax(mx, v);
        mn = vmin(mn, v);
        if (K::is_int) {
            u64 old = ilo;
            ilo += (u64)(i64)v;
            ihi += ((i64)v < 0 ? -1 : 0) + (ilo < old ? 1 : 0);
        }
        // Branch-free classification (NaN has returned above): the same counts as
        // `zero / pos (+inf) / neg (-inf)` branches, without divergence.
        c.zero += (unsigned)(v == 0);
        c.pos += (unsigned)(v > 0);
        c.neg += (unsigned)(v < 0);
        if (!K::is_int) {
            c.pinf += (unsigned)((double)v == OPDUMP_INF);
            c.ninf += (unsigned)((double)v == -OPDUMP_INF);
        }
    }

    // One whole 16-byte unit of a small integer type (K::small_int), with exactly the result
    // of pushing its elements in order: the unit's sum (|sum| <= 16 * 2^15 fits 32 bits) and
    // sum of squares (<= 8 * 2^30 fits 64 bits, and is exact in f64) are integers, and so is
    // every f64 partial sum of squares a thread forms (<= 2^53: a thread sees under 2^23
    // elements), so adding the unit's squares at once rounds nowhere, as adding them one
    // by one rounds nowhere. Max, min, the 128-bit sum and the counts are order-free.
    __device__ __forceinline__ void push_unit(const typename K::raw_t* r, Counts& c) {
        const unsigned UNIT = 16 / sizeof(typename K::raw_t);
        int us = 0, umx = -0x7fffffff - 1, umn = 0x7fffffff;
        u64 uq = 0;
        unsigned z = 0, p = 0, ng = 0;
#pragma unroll
        for (unsigned j = 0; j < UNIT; ++j) {
            const int v = (int)K::widen(r[j]);
            us += v;
            uq += (u64)((long long)v * v);
            umx = v > umx ? v : umx;
            umn = v < umn ? v : umn;
            z += (unsigned)(v == 0);
            p += (unsigned)(v > 0);
            ng += (unsigned)(v < 0);
        }
        sq = K::add(sq, (double)uq);
        mx = vmax(mx, (typename K::val_t)umx);
        mn = vmin(mn, (typename K::val_t)umn);
        const u64 old = ilo;
        ilo += (u64)(i64)us;
        ihi += (us < 0 ? -1 : 0) + (ilo < old ? 1 : 0);
        c.zero += z; c.pos += p; c.neg += ng;
    }

    // Adds one thread's 32-bit counts into the 64-bit ones (before any merge).
    __device__ __forceinline__ void fold(const Counts& c) {
        zero += c.zero; pos += c.pos; neg += c.neg; pinf += c.pinf; ninf += c.ninf;
    }

    // Combines `o` into this state (a fixed operation: `this` is always the left operand).
    __device__ __forceinline__ void merge(const St& o) {
        sum = K::add(sum, o.sum);
        sq = K::add(sq, o.sq);
        mx = vmax(mx, o.mx);
        mn = vmin(mn, o.mn);
        if (K::is_int) {
            u64 old = ilo;
            ilo += o.ilo;
            ihi += o.ihi + (ilo < old ? 1 : 0);
        }
        if (o.nan != 0) {
            if (nan == 0 || o.fidx < fidx) { fidx = o.fidx; fraw = o.fraw; }
            if (nan == 0 || o.lidx > lidx) { lidx = o.lidx; lraw = o.lraw; }
        }
        nan += o.nan; pinf += o.pinf; ninf += o.ninf;
        zero += o.zero; pos += o.pos; neg += o.neg;
    }

    __device__ __forceinline__ St shfl_down(unsigned off) const {
        St o;
        const unsigned m = 0xffffffffu;
        o.sum = __shfl_down_sync(m, sum, off);
        o.sq = __shfl_down_sync(m, sq, off);
        o.mx = __shfl_down_sync(m, mx, off);
        o.mn = __shfl_down_sync(m, mn, off);
        if (K::is_int) {
            o.ilo = __shfl_down_sync(m, ilo, off);
            o.ihi = __shfl_down_sync(m, ihi, off);
        } else {
            o.ilo = 0; o.ihi = 0;
        }
        o.nan = __shfl_down_sync(m, nan, off);
        o.pinf = __shfl_down_sync(m, pinf, off);
        o.ninf = __shfl_down_sync(m, ninf, off);
        o.zero = __shfl_down_sync(m, zero, off);
        o.pos = __shfl_down_sync(m, pos, off);
        o.neg = __shfl_down_sync(m, neg, off);
        o.fidx = __shfl_down_sync(m, fidx, off);
        o.fraw = __shfl_down_sync(m, fraw, off);
        o.lidx = __shfl_down_sync(m, lidx, off);
        o.lraw = __shfl_down_sync(m, lraw, off);
        return o;
    }

    __device__ __forceinline__ void warp_reduce() {
        for (unsigned off = 16; off > 0; off >>= 1) {
            St o = shfl_down(off);
            merge(o);
        }
    }

    __device__ __forceinline__ void store(Partial* p) const {
        p->max = (double)mx; p->min = (double)mn;
        p->sum = K::is_int ? 0.0 : (double)sum;
        p->sum_sq = (double)sq;
        p->imax = K::is_int ? (i64)mx : 0; p->imin = K::is_int ? (i64)mn : 0;
        p->isum_lo = ilo; p->isum_hi = ihi;
        p->nan = nan; p->pos_inf = pinf; p->neg_inf = ninf;
        p->zero = zero; p->pos = pos; p->neg = neg;
        p->first_nan_idx = fidx; p->first_nan_raw = fraw;
        p->last_nan_idx = lidx; p->last_nan_raw = lraw;
    }
};

// Grid-stride over 16-byte units; thread g takes units g, g + G*B, g + 2*G*B, ...; the
// elements of a unit in index order. Then warp tree, shared memory, warp 0 tree.
template <class K>
__device__ __forceinline__ void stats_body(const typename K::raw_t* __restrict__ data, u64 n,
                                           int aligned, Partial* __restrict__ out) {
    typedef typename K::raw_t R;
    const unsigned UNIT = 16 / sizeof(R);
    St<K> s;
    s.init();
    const u64 units = (n + UNIT - 1) / UNIT;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    Counts c = {0u, 0u, 0u, 0u, 0u};
    typedef union { uint4 q; R r[16 / sizeof(R)]; } Unit;
    // DEPTH units per trip, all loads issued before any element is pushed (more bytes in
    // flight per thread); the units are still pushed in the order g, g + G*B, g + 2*G*B, ...
    const unsigned DEPTH = 4;
    for (u64 u = (u64)blockIdx.x * blockDim.x + threadIdx.x; u < units; u += DEPTH * stride) {
        if (aligned && (u + (DEPTH - 1) * stride + 1) * UNIT <= n) {
            Unit b[DEPTH];
#pragma unroll
            for (unsigned d = 0; d < DEPTH; ++d)
                b[d].q = *reinterpret_cast<const uint4*>(data + (u + d * stride) * UNIT);
#pragma unroll
            for (unsigned d = 0; d < DEPTH; ++d) {
                const u64 base = (u + d * stride) * UNIT;
                if (K::small_int) {
                    s.push_unit(b[d].r, c);
                } else {
#pragma unroll
                    for (unsigned j = 0; j < UNIT; ++j) s.push(b[d].r[j], base + j, c);
                }
            }
            continue;
        }
        for (unsigned d = 0; d < DEPTH; ++d) {
            const u64 w = u + d * stride;
            if (w >= units) break;
            const u64 base = w * UNIT;
            if (aligned && base + UNIT <= n) {
                Unit b;
                b.q = *reinterpret_cast<const uint4*>(data + base);
                if (K::small_int) {
                    s.push_unit(b.r, c);
                } else {
#pragma unroll
                    for (unsigned j = 0; j < UNIT; ++j) s.push(b.r[j], base + j, c);
                }
            } else {
                const u64 end = base + UNIT < n ? base + UNIT : n;
                for (u64 i = base; i < end; ++i) s.push(data[i], i, c);
            }
        }
    }
    s.fold(c);
    s.warp_reduce();
    __shared__ St<K> warps[32];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (lane == 0) warps[warp] = s;
    __syncthreads();
    if (warp == 0) {
        const unsigned nw = (blockDim.x + 31u) >> 5;
        St<K> t;
        if (lane < nw) t = warps[lane]; else t.init();
        t.warp_reduce();
        if (lane == 0) t.store(out + blockIdx.x);
    }
}
"#;

/// The whole module: [`HEAD`], [`F16_PTX`], [`BODY`] plus one `extern "C"` entry point per [`KernelId`].
pub fn module_source() -> String {
    let mut s = [HEAD, F16_PTX, BODY].concat();
    for k in KernelId::ALL {
        s.push_str(&format!(
            "extern \"C\" __global__ void __launch_bounds__({BLOCK}) {name}(\
             const {t}::raw_t* __restrict__ data, u64 n, int aligned, Partial* __restrict__ out) \
             {{ stats_body<{t}>(data, n, aligned, out); }}\n",
            name = k.name(),
            t = k.traits(),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_dtype_has_a_kernel_in_the_module() {
        let src = module_source();
        for d in DType::ALL {
            for p in [Precision::High, Precision::Low] {
                match KernelId::for_dtype(d, p) {
                    Some(k) => {
                        assert!(KernelId::ALL.contains(&k), "{d} {p}");
                        assert!(src.contains(&format!(" {}(", k.name())), "{}", k.name());
                    }
                    None => assert!(
                        matches!(
                            d,
                            DType::UInt16
                                | DType::UInt32
                                | DType::UInt64
                                | DType::Int4
                                | DType::UInt4
                                | DType::UInt1
                                | DType::Float8E4M3FN
                                | DType::Float8E5M2
                                | DType::Float8E4M3FNUZ
                                | DType::Float8E5M2FNUZ
                                | DType::Complex64
                                | DType::Complex128
                        ),
                        "{d} must have a kernel"
                    ),
                }
            }
        }
        // Names are unique, so one module can hold them all.
        let mut names: Vec<_> = KernelId::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KernelId::ALL.len());
    }

    #[test]
    fn grid_depends_only_on_the_tensor() {
        assert_eq!(grid_for(4, 0), 1);
        assert_eq!(grid_for(4, 1), 1);
        // 256 threads x 4 f32 per unit = 1024 elements per block-step.
        assert_eq!(grid_for(4, 1024), 1);
        assert_eq!(grid_for(4, 1025), 2);
        assert_eq!(grid_for(2, 2048), 1);
        assert_eq!(grid_for(1, 1 << 40), MAX_GRID);
        assert_eq!(unit_elems(8), 2);
        assert_eq!(unit_elems(1), 16);
    }

    #[test]
    fn source_is_header_free() {
        assert!(!module_source().contains("#include"));
    }
}
