//! Widening kernels: the conversions MindSpore applies when it saves a tensor (spec §9).
//!
//! | from | to | rule |
//! |------|----|------|
//! | bfloat16 | float32 | the 16 bits become the high half of the float32 (`bits << 16`) |
//! | float16 | float32 | exact IEEE conversion; subnormals exact; NaN sign and payload kept |
//! | float8 e4m3fn | float32 | exact; bias 7, no infinities, `S.1111.111` is NaN |
//! | float8 e5m2 | float32 | exact; bias 15, IEEE-like (±inf, NaN) |
//! | float8 e4m3fnuz | float32 | exact; bias 8, no infinities, no -0, `0x80` is NaN |
//! | float8 e5m2fnuz | float32 | exact; bias 16, no infinities, no -0, `0x80` is NaN |
//! | int4 | int8 | two per byte, low nibble first, sign-extended from bit 3 |
//! | uint4 | uint8 | two per byte, low nibble first, zero-extended |
//! | uint1 | uint8 | eight per byte, most significant bit first; the last byte emits `elems % 8` bits |
//!
//! All kernels work on raw little-endian bytes, write into a caller buffer, never allocate, and
//! return the number of bytes written. Bad lengths give an [`Error`], never a panic.
//!
//! NaN payloads of bfloat16 and float16 are kept bit for bit, signalling NaNs included: a
//! float16 signalling NaN widens to a float32 signalling NaN with the same payload (shifted left
//! by 13), never quietened. float8 NaNs (which carry no useful payload) widen to the quiet NaN
//! `0x7fc00000` with their sign, exactly what ml_dtypes' and torch's float32 casts give.
//!
//! # Chunking
//!
//! Every kernel is stateless, so a tensor may be widened in pieces (for streaming writers, tiles
//! or threads) and the concatenated outputs equal the output of one call:
//!
//! - bf16 / f16: split the source at any **even** byte offset; the output of the piece starting at
//!   source byte `o` goes to output byte `2 * o`.
//! - float8: split anywhere; the piece at source byte `o` goes to output byte `4 * o`.
//! - int4 / uint4: split at any byte; every piece but the last must pass `elems = 2 * bytes`, the last
//!   passes the remaining element count (which may be odd). Output of the piece starting at
//!   source byte `o` goes to output byte `2 * o`.
//! - uint1: split at any byte; every piece but the last passes `elems = 8 * bytes`, the last the
//!   remaining count. Output of the piece starting at source byte `o` goes to output byte `8 * o`.
//!
//! # Speed
//!
//! The bf16 and f16 kernels process fixed blocks that LLVM vectorises for the baseline target.
//! With the `std` feature on x86-64, f16 uses the F16C instruction `vcvtph2ps` (AVX2 + F16C) when
//! the running CPU has it; without `std` it does so only if the target enables `f16c` and `avx2`
//! at compile time. On x86-64, outputs of 8 MiB or more are written with non-temporal stores
//! (they would not stay in cache anyway, and this saves reading every destination line first);
//! smaller outputs, such as a streaming writer's chunk buffer, are written through the cache.
//! Measured in a plain release build on the project's 2-vCPU machine under load (thread CPU
//! time, median of 7): bf16 12–14 GB/s and f16 9–10 GB/s of input at 1 MiB, 6.2–6.5 GB/s for
//! both at 64–256 MiB.
//!
//! ```
//! use dump_core::widen::{bf16_to_f32, f16_to_f32, int4_to_int8, uint1_to_uint8};
//!
//! // bfloat16 1.0 is 0x3f80; float16 1.0 is 0x3c00 (little-endian bytes).
//! let mut out = [0u8; 4];
//! assert_eq!(bf16_to_f32(&[0x80, 0x3f], &mut out), Ok(4));
//! assert_eq!(f32::from_le_bytes(out), 1.0);
//! assert_eq!(f16_to_f32(&[0x00, 0x3c], &mut out), Ok(4));
//! assert_eq!(f32::from_le_bytes(out), 1.0);
//!
//! // int4 [1, -1, 7] packed low nibble first: 0xF1, 0x07.
//! let mut i8s = [0u8; 3];
//! assert_eq!(int4_to_int8(&[0xf1, 0x07], 3, &mut i8s), Ok(3));
//! assert_eq!(i8s.map(|b| b as i8), [1, -1, 7]);
//!
//! // uint1 [1, 0, 1] packed MSB first: 0b1010_0000.
//! let mut u8s = [0u8; 3];
//! assert_eq!(uint1_to_uint8(&[0b1010_0000], 3, &mut u8s), Ok(3));
//! assert_eq!(u8s, [1, 0, 1]);
//! ```

use crate::{DType, Error};

/// Elements per block of the portable 16-bit kernels: large enough for full vectors, small
/// enough that the tail loop stays short.
const BLOCK: usize = 16;

/// Checks a 16-bit-to-32-bit conversion and returns the output byte count.
fn check_half(src: &[u8], dst: &[u8]) -> Result<usize, Error> {
    if !src.len().is_multiple_of(2) {
        return Err(Error::Misaligned {
            len: src.len(),
            multiple: 2,
        });
    }
    let needed = src.len().checked_mul(2).ok_or(Error::Overflow)?;
    if dst.len() < needed {
        return Err(Error::BufferTooSmall {
            needed,
            available: dst.len(),
        });
    }
    Ok(needed)
}

/// Widens bfloat16 to float32: every 16-bit value becomes the high half of a float32.
///
/// `src` holds little-endian bf16 values (its length must be even); `dst` receives little-endian
/// f32 values and must hold at least `2 * src.len()` bytes. Returns the bytes written
/// (`2 * src.len()`). Exact for every bit pattern, NaN sign and payload included.
pub fn bf16_to_f32(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    let out_len = check_half(src, dst)?;
    let dst = &mut dst[..out_len];
    #[cfg(target_arch = "x86_64")]
    if out_len >= STREAM_MIN_OUT && dst.as_ptr().align_offset(4) == 0 {
        // SAFETY: SSE2 is part of the x86-64 baseline; `dst` was cut to `2 * src.len()` bytes,
        // `check_half` checked that `src.len()` is even, and the alignment was checked above.
        unsafe { bf16_stream_sse2(src, dst) };
        return Ok(out_len);
    }
    bf16_blocks(src, dst);
    Ok(out_len)
}

/// Output size (bytes) from which the x86-64 kernels use non-temporal stores: far beyond L2,
/// where writing through the cache costs a read of every destination line first. Smaller
/// outputs (the usual case: a streaming writer's chunk buffer, read again right away) stay in
/// cache.
#[cfg(target_arch = "x86_64")]
const STREAM_MIN_OUT: usize = 8 << 20;

/// bf16 with SSE2 and non-temporal stores.
///
/// # Safety
/// The CPU must support SSE2 (every x86-64 CPU does). `dst` must be exactly `2 * src.len()`
/// bytes, `src.len()` even, and the address of `dst` a multiple of 4.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
unsafe fn bf16_stream_sse2(src: &[u8], dst: &mut [u8]) {
    use core::arch::x86_64::{
        __m128i, _mm_loadu_si128, _mm_setzero_si128, _mm_sfence, _mm_stream_si128,
        _mm_unpackhi_epi16, _mm_unpacklo_epi16,
    };
    // Scalar head up to a 16-byte aligned destination.
    let head = (dst.as_ptr().align_offset(16) / 4).min(src.len() / 2);
    let (s_head, src) = src.split_at(2 * head);
    let (d_head, dst) = dst.split_at_mut(4 * head);
    bf16_scalar(s_head, d_head);
    let mut s_blocks = src.chunks_exact(16);
    let mut d_blocks = dst.chunks_exact_mut(32);
    let zero = _mm_setzero_si128();
    for (s, d) in (&mut s_blocks).zip(&mut d_blocks) {
        // SAFETY: `s` is exactly 16 readable bytes; the load is unaligned.
        let x = unsafe { _mm_loadu_si128(s.as_ptr().cast::<__m128i>()) };
        // Interleaving zero below each value puts it in the high half of a 32-bit lane.
        let lo = _mm_unpacklo_epi16(zero, x);
        let hi = _mm_unpackhi_epi16(zero, x);
        let p = d.as_mut_ptr().cast::<__m128i>();
        // SAFETY: `d` is 32 writable bytes starting at a 16-byte aligned address (the head
        // loop aligned the first block and blocks are 32 bytes), as the stream stores require.
        unsafe {
            _mm_stream_si128(p, lo);
            _mm_stream_si128(p.add(1), hi);
        }
    }
    // Order the non-temporal stores before anything the caller does next.
    _mm_sfence();
    bf16_scalar(s_blocks.remainder(), d_blocks.into_remainder());
}

fn bf16_blocks(src: &[u8], dst: &mut [u8]) {
    let mut s_blocks = src.chunks_exact(2 * BLOCK);
    let mut d_blocks = dst.chunks_exact_mut(4 * BLOCK);
    for (s, d) in (&mut s_blocks).zip(&mut d_blocks) {
        for (si, di) in s.chunks_exact(2).zip(d.chunks_exact_mut(4)) {
            let bits = u32::from(u16::from_le_bytes([si[0], si[1]])) << 16;
            di.copy_from_slice(&bits.to_le_bytes());
        }
    }
    bf16_scalar(s_blocks.remainder(), d_blocks.into_remainder());
}

fn bf16_scalar(src: &[u8], dst: &mut [u8]) {
    for (si, di) in src.chunks_exact(2).zip(dst.chunks_exact_mut(4)) {
        let bits = u32::from(u16::from_le_bytes([si[0], si[1]])) << 16;
        di.copy_from_slice(&bits.to_le_bytes());
    }
}

/// float16 bits to float32 bits, exact, branch-free (so that blocks vectorise).
///
/// Normal numbers rebias the exponent (+112); Inf/NaN get the all-ones exponent with the
/// payload shifted into place (signalling NaNs stay signalling); subnormals are renormalised by
/// an exact float subtraction: `(2^-14 * (1 + m/1024)) - 2^-14 = m * 2^-24`.
#[inline(always)]
fn f16_bits_to_f32_bits(h: u16) -> u32 {
    let h = u32::from(h);
    let sign = (h & 0x8000) << 16;
    let shifted = (h & 0x7fff) << 13; // exponent and mantissa in f32 position, bias 15
    let exp = shifted & 0x0f80_0000;
    let normal = shifted + (112 << 23);
    let infnan = shifted + (224 << 23);
    // 2^-14 * (1 + m/1024) minus 2^-14.
    let sub = (f32::from_bits(shifted + (113 << 23)) - f32::from_bits(113 << 23)).to_bits();
    let mag = if exp == 0x0f80_0000 {
        infnan
    } else if exp == 0 {
        sub
    } else {
        normal
    };
    sign | mag
}

fn f16_portable(src: &[u8], dst: &mut [u8]) {
    let mut s_blocks = src.chunks_exact(2 * BLOCK);
    let mut d_blocks = dst.chunks_exact_mut(4 * BLOCK);
    for (s, d) in (&mut s_blocks).zip(&mut d_blocks) {
        for (si, di) in s.chunks_exact(2).zip(d.chunks_exact_mut(4)) {
            let bits = f16_bits_to_f32_bits(u16::from_le_bytes([si[0], si[1]]));
            di.copy_from_slice(&bits.to_le_bytes());
        }
    }
    f16_scalar(s_blocks.remainder(), d_blocks.into_remainder());
}

fn f16_scalar(src: &[u8], dst: &mut [u8]) {
    for (si, di) in src.chunks_exact(2).zip(dst.chunks_exact_mut(4)) {
        let bits = f16_bits_to_f32_bits(u16::from_le_bytes([si[0], si[1]]));
        di.copy_from_slice(&bits.to_le_bytes());
    }
}

/// `true` when the F16C kernel may run: detected at run time with `std`, else at compile time.
#[cfg(target_arch = "x86_64")]
fn has_f16c() -> bool {
    #[cfg(feature = "std")]
    {
        std::is_x86_feature_detected!("f16c") && std::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(all(target_feature = "f16c", target_feature = "avx2"))
    }
}

/// F16C kernel: `vcvtph2ps` on 8 values at a time, then signalling NaNs are restored (the
/// instruction sets their quiet bit; MindSpore's software conversion does not).
///
/// With `stream`, stores are non-temporal (after a scalar head that aligns `dst` to 32 bytes).
///
/// # Safety
/// The CPU must support AVX2 and F16C. `dst` must be exactly `2 * src.len()` bytes and
/// `src.len()` even; with `stream`, the address of `dst` must be a multiple of 4.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn f16_to_f32_f16c(src: &[u8], dst: &mut [u8], stream: bool) {
    use core::arch::x86_64::{
        __m128i, __m256i, _mm_loadu_si128, _mm_sfence, _mm256_and_si256, _mm256_andnot_si256,
        _mm256_castps_si256, _mm256_cmpeq_epi32, _mm256_cmpgt_epi32, _mm256_cvtepu16_epi32,
        _mm256_cvtph_ps, _mm256_set1_epi32, _mm256_storeu_si256, _mm256_stream_si256,
    };
    let head = if stream {
        (dst.as_ptr().align_offset(32) / 4).min(src.len() / 2)
    } else {
        0
    };
    let (s_head, src) = src.split_at(2 * head);
    let (d_head, dst) = dst.split_at_mut(4 * head);
    f16_scalar(s_head, d_head);
    let mut s_blocks = src.chunks_exact(16);
    let mut d_blocks = dst.chunks_exact_mut(32);
    let abs_mask = _mm256_set1_epi32(0x7fff);
    let inf = _mm256_set1_epi32(0x7c00);
    let quiet16 = _mm256_set1_epi32(0x0200);
    let quiet32 = _mm256_set1_epi32(0x0040_0000);
    for (s, d) in (&mut s_blocks).zip(&mut d_blocks) {
        // SAFETY: `s` is exactly 16 readable bytes; the load is unaligned.
        let h = unsafe { _mm_loadu_si128(s.as_ptr().cast::<__m128i>()) };
        let f = _mm256_castps_si256(_mm256_cvtph_ps(h));
        let w = _mm256_cvtepu16_epi32(h);
        let is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, abs_mask), inf);
        let is_quiet = _mm256_cmpeq_epi32(_mm256_and_si256(w, quiet16), quiet16);
        let is_snan = _mm256_andnot_si256(is_quiet, is_nan);
        let out = _mm256_andnot_si256(_mm256_and_si256(is_snan, quiet32), f);
        let p = d.as_mut_ptr().cast::<__m256i>();
        if stream {
            // SAFETY: `d` is exactly 32 writable bytes at a 32-byte aligned address (the head
            // aligned the first block; blocks are 32 bytes), as the stream store requires.
            unsafe { _mm256_stream_si256(p, out) };
        } else {
            // SAFETY: `d` is exactly 32 writable bytes; the store is unaligned.
            unsafe { _mm256_storeu_si256(p, out) };
        }
    }
    if stream {
        // Order the non-temporal stores before anything the caller does next.
        _mm_sfence();
    }
    f16_scalar(s_blocks.remainder(), d_blocks.into_remainder());
}

/// Widens IEEE float16 to float32, exactly.
///
/// `src` holds little-endian f16 values (its length must be even); `dst` receives little-endian
/// f32 values and must hold at least `2 * src.len()` bytes. Returns the bytes written
/// (`2 * src.len()`). Subnormals convert exactly; NaN sign and payload are kept.
pub fn f16_to_f32(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    let out_len = check_half(src, dst)?;
    let dst = &mut dst[..out_len];
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        let stream = out_len >= STREAM_MIN_OUT && dst.as_ptr().align_offset(4) == 0;
        // SAFETY: AVX2 and F16C are present (checked above); lengths were checked by
        // `check_half`, `dst` was cut to exactly `2 * src.len()` bytes, and streaming is only
        // chosen for a 4-byte aligned `dst`.
        unsafe { f16_to_f32_f16c(src, dst, stream) };
        return Ok(out_len);
    }
    f16_portable(src, dst);
    Ok(out_len)
}

/// Widens packed int4 to int8: low nibble first, each nibble sign-extended from bit 3.
///
/// `src.len()` must equal `DType::Int4.storage_bytes(elems)` (`ceil(elems / 2)`); with odd
/// `elems` the final high nibble is ignored. `dst` must hold at least `elems` bytes. Writes
/// `elems` int8 values and returns `elems`.
pub fn int4_to_int8(src: &[u8], elems: usize, dst: &mut [u8]) -> Result<usize, Error> {
    nibbles_to_bytes::<true>(src, elems, dst)
}

/// Widens packed uint4 to uint8 (0..=15 per byte): low nibble first, zero-extended.
///
/// Same contract as [`int4_to_int8`]: `src.len()` must equal
/// `DType::UInt4.storage_bytes(elems)`, with odd `elems` the final high nibble is ignored,
/// `dst` must hold at least `elems` bytes. Returns `elems`.
pub fn uint4_to_uint8(src: &[u8], elems: usize, dst: &mut [u8]) -> Result<usize, Error> {
    nibbles_to_bytes::<false>(src, elems, dst)
}

/// One nibble as a byte: sign-extended from bit 3 when `SIGNED`, else zero-extended.
#[inline(always)]
const fn nibble<const SIGNED: bool>(n: u8) -> u8 {
    if SIGNED {
        (((n << 4) as i8) >> 4) as u8
    } else {
        n & 0x0f
    }
}

/// The kernel of [`int4_to_int8`] (`SIGNED`) and [`uint4_to_uint8`].
fn nibbles_to_bytes<const SIGNED: bool>(
    src: &[u8],
    elems: usize,
    dst: &mut [u8],
) -> Result<usize, Error> {
    let dtype = if SIGNED { DType::Int4 } else { DType::UInt4 };
    dtype.check_len(src.len(), elems)?;
    if dst.len() < elems {
        return Err(Error::BufferTooSmall {
            needed: elems,
            available: dst.len(),
        });
    }
    let dst = &mut dst[..elems];
    let mut pairs = dst.chunks_exact_mut(2);
    for (&b, d) in src.iter().zip(&mut pairs) {
        d[0] = nibble::<SIGNED>(b);
        d[1] = nibble::<SIGNED>(b >> 4);
    }
    if let (Some(last), Some(&b)) = (pairs.into_remainder().first_mut(), src.last()) {
        *last = nibble::<SIGNED>(b);
    }
    Ok(elems)
}

/// The float8 encodings: what the top binade and the sign bit mean.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fp8Kind {
    /// IEEE-like (E5M2): an all-ones exponent is ±infinity (mantissa 0) or NaN; bias
    /// `2^(E-1) - 1`.
    Ieee,
    /// "Finite" (E4M3FN): no infinities, only `S.1111.111` is NaN, the rest of the top binade
    /// holds normal numbers; bias `2^(E-1) - 1`.
    Fn,
    /// "Finite, unsigned zero" (E4M3FNUZ, E5M2FNUZ): no infinities, no negative zero, the
    /// single NaN is `0x80` (the negative-zero pattern); bias `2^(E-1)`.
    Fnuz,
}

/// The float32 bits of a float8 value `b` of kind `kind` with `E` exponent bits and
/// `M = 7 - E` mantissa bits, decoded from the format's definition.
///
/// NaN widens to the float32 quiet NaN `0x7fc00000` with the byte's sign kept (so FNUZ's
/// `0x80` gives `0xffc00000`), the value ml_dtypes and torch give; every other value is exact.
const fn fp8_bits<const E: u32>(kind: Fp8Kind, b: u8) -> u32 {
    const QUIET_NAN: u32 = 0x7fc0_0000;
    let fnuz = matches!(kind, Fp8Kind::Fnuz);
    let ieee = matches!(kind, Fp8Kind::Ieee);
    let m_bits = 7 - E;
    let bias = if fnuz {
        1i32 << (E - 1)
    } else {
        (1i32 << (E - 1)) - 1
    };
    let sign = ((b >> 7) as u32) << 31;
    if fnuz && b == 0x80 {
        return sign | QUIET_NAN;
    }
    let exp = ((b >> m_bits) as u32) & ((1 << E) - 1);
    let man = (b as u32) & ((1 << m_bits) - 1);
    let exp_max = (1 << E) - 1;
    let man_max = (1 << m_bits) - 1;
    if !fnuz && exp == exp_max && (ieee || man == man_max) {
        return if ieee && man == 0 {
            sign | 0x7f80_0000
        } else {
            sign | QUIET_NAN
        };
    }
    if exp == 0 {
        if man == 0 {
            return sign;
        }
        // Subnormal: man * 2^(1 - bias - m_bits). Normalise around its highest set bit `p`:
        // 2^(p + 1 - bias - m_bits) * (1 + rest / 2^p).
        let p = 31 - man.leading_zeros();
        let e32 = (p as i32 + 1 - bias - m_bits as i32 + 127) as u32;
        return sign | (e32 << 23) | ((man ^ (1 << p)) << (23 - p));
    }
    let e32 = (exp as i32 - bias + 127) as u32;
    sign | (e32 << 23) | (man << (23 - m_bits))
}

/// The float32 bits of every float8 bit pattern, computed at compile time.
const fn fp8_table<const E: u32>(kind: Fp8Kind) -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = fp8_bits::<E>(kind, i as u8);
        i += 1;
    }
    t
}

/// float32 bits of each float8 E4M3FN pattern (index: the byte): bias 7, no infinities,
/// `0x7f`/`0xff` NaN. A `static` (computed at compile time), so every lookup reads the one
/// table in read-only memory, never a copy on the stack.
pub static F8E4M3FN_TO_F32: [u32; 256] = fp8_table::<4>(Fp8Kind::Fn);

/// float32 bits of each float8 E5M2 pattern (index: the byte): bias 15, `0x7c`/`0xfc` ±inf,
/// `0x7d..=0x7f` and `0xfd..=0xff` NaN.
pub static F8E5M2_TO_F32: [u32; 256] = fp8_table::<5>(Fp8Kind::Ieee);

/// float32 bits of each float8 E4M3FNUZ pattern (index: the byte): bias 8, no infinities, no
/// negative zero, `0x80` the only NaN.
pub static F8E4M3FNUZ_TO_F32: [u32; 256] = fp8_table::<4>(Fp8Kind::Fnuz);

/// float32 bits of each float8 E5M2FNUZ pattern (index: the byte): bias 16, no infinities, no
/// negative zero, `0x80` the only NaN.
pub static F8E5M2FNUZ_TO_F32: [u32; 256] = fp8_table::<5>(Fp8Kind::Fnuz);

/// The float32 bits table of a float8 `dtype`, `None` for any other dtype.
#[inline]
pub fn fp8_table_of(dtype: DType) -> Option<&'static [u32; 256]> {
    match dtype {
        DType::Float8E4M3FN => Some(&F8E4M3FN_TO_F32),
        DType::Float8E5M2 => Some(&F8E5M2_TO_F32),
        DType::Float8E4M3FNUZ => Some(&F8E4M3FNUZ_TO_F32),
        DType::Float8E5M2FNUZ => Some(&F8E5M2FNUZ_TO_F32),
        _ => None,
    }
}

/// The float32 value of one float8 byte of `dtype` (`Float8E4M3FN`, `Float8E5M2`,
/// `Float8E4M3FNUZ` or `Float8E5M2FNUZ`; `None` for any other dtype).
#[inline]
pub fn fp8_to_f32(dtype: DType, b: u8) -> Option<f32> {
    fp8_table_of(dtype).map(|t| f32::from_bits(t[b as usize]))
}

/// Widens float8 E4M3FN to float32, exactly (NaN to a quiet NaN of the same sign).
///
/// `src` holds one value per byte; `dst` receives little-endian f32 values and must hold at
/// least `4 * src.len()` bytes. Returns the bytes written (`4 * src.len()`). Stateless: split
/// the source anywhere; the piece at source byte `o` goes to output byte `4 * o`.
pub fn f8e4m3fn_to_f32(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    fp8_widen(&F8E4M3FN_TO_F32, src, dst)
}

/// Widens float8 E5M2 to float32, exactly (±inf kept, NaN to a quiet NaN of the same sign).
///
/// Same contract as [`f8e4m3fn_to_f32`].
pub fn f8e5m2_to_f32(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    fp8_widen(&F8E5M2_TO_F32, src, dst)
}

/// Widens float8 E4M3FNUZ to float32, exactly (`0x80` to the quiet NaN `0xffc00000`).
///
/// Same contract as [`f8e4m3fn_to_f32`].
pub fn f8e4m3fnuz_to_f32(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    fp8_widen(&F8E4M3FNUZ_TO_F32, src, dst)
}

/// Widens float8 E5M2FNUZ to float32, exactly (`0x80` to the quiet NaN `0xffc00000`).
///
/// Same contract as [`f8e4m3fn_to_f32`].
pub fn f8e5m2fnuz_to_f32(src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    fp8_widen(&F8E5M2FNUZ_TO_F32, src, dst)
}

/// The table lookup behind both float8 kernels.
fn fp8_widen(table: &[u32; 256], src: &[u8], dst: &mut [u8]) -> Result<usize, Error> {
    let needed = src.len().checked_mul(4).ok_or(Error::Overflow)?;
    if dst.len() < needed {
        return Err(Error::BufferTooSmall {
            needed,
            available: dst.len(),
        });
    }
    for (&b, d) in src.iter().zip(dst[..needed].chunks_exact_mut(4)) {
        d.copy_from_slice(&table[b as usize].to_le_bytes());
    }
    Ok(needed)
}

/// Widens packed uint1 to uint8 (0 or 1 per byte), most significant bit first.
///
/// `src.len()` must equal `DType::UInt1.storage_bytes(elems)` (`ceil(elems / 8)`). For the last,
/// partial byte exactly `elems % 8` values are emitted, from bit 7 down (MindSpore 2.10 emits
/// `8 - elems % 8` there, a bug this does not copy; see `docs/compat.md`). `dst` must hold at
/// least `elems` bytes. Returns `elems`.
pub fn uint1_to_uint8(src: &[u8], elems: usize, dst: &mut [u8]) -> Result<usize, Error> {
    DType::UInt1.check_len(src.len(), elems)?;
    if dst.len() < elems {
        return Err(Error::BufferTooSmall {
            needed: elems,
            available: dst.len(),
        });
    }
    let dst = &mut dst[..elems];
    let mut octets = dst.chunks_exact_mut(8);
    for (&b, d) in src.iter().zip(&mut octets) {
        for (i, o) in d.iter_mut().enumerate() {
            *o = (b >> (7 - i)) & 1;
        }
    }
    let rest = octets.into_remainder();
    if let (false, Some(&b)) = (rest.is_empty(), src.last()) {
        for (i, o) in rest.iter_mut().enumerate() {
            *o = (b >> (7 - i)) & 1;
        }
    }
    Ok(elems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Naive bf16 reference.
    fn ref_bf16(h: u16) -> u32 {
        u32::from(h) << 16
    }

    /// Naive f16 reference, written independently of the kernel: decode the value with f64
    /// arithmetic (exact for every f16) and narrow to f32 (exact), or build the NaN by fields.
    fn ref_f16(h: u16) -> u32 {
        let sign = h >> 15;
        let exp = i32::from((h >> 10) & 0x1f);
        let man = u32::from(h & 0x3ff);
        if exp == 31 {
            let s = u32::from(sign) << 31;
            return s | 0x7f80_0000 | (man << 13);
        }
        let mag = if exp == 0 {
            f64::from(man) * 2f64.powi(-24)
        } else {
            (1.0 + f64::from(man) / 1024.0) * 2f64.powi(exp - 15)
        };
        let v = if sign == 1 { -mag } else { mag };
        (v as f32).to_bits()
    }

    fn all_u16_bytes() -> Vec<u8> {
        (0..=u16::MAX).flat_map(u16::to_le_bytes).collect()
    }

    fn words(dst: &[u8]) -> impl Iterator<Item = u32> + '_ {
        dst.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    }

    #[test]
    fn bf16_exhaustive() {
        let src = all_u16_bytes();
        let mut dst = vec![0xAAu8; src.len() * 2];
        assert_eq!(bf16_to_f32(&src, &mut dst), Ok(src.len() * 2));
        for (h, w) in (0..=u16::MAX).zip(words(&dst)) {
            assert_eq!(w, ref_bf16(h), "bf16 {h:#06x}");
        }
    }

    #[test]
    fn f16_exhaustive_all_paths() {
        let src = all_u16_bytes();
        let mut dst = vec![0xAAu8; src.len() * 2];
        assert_eq!(f16_to_f32(&src, &mut dst), Ok(src.len() * 2));
        let mut port = vec![0x55u8; src.len() * 2];
        f16_portable(&src, &mut port);
        for ((h, w), p) in (0..=u16::MAX).zip(words(&dst)).zip(words(&port)) {
            let want = ref_f16(h);
            assert_eq!(w, want, "dispatch f16 {h:#06x}");
            assert_eq!(p, want, "portable f16 {h:#06x}");
            // Cross-check the finite values against the `half` crate.
            let hv = half::f16::from_bits(h);
            if !hv.is_nan() {
                assert_eq!(w, hv.to_f32().to_bits(), "half f16 {h:#06x}");
            }
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("f16c") && std::is_x86_feature_detected!("avx2") {
            for stream in [false, true] {
                for off in [0usize, 4, 8, 20] {
                    let mut simd = vec![0x11u8; src.len() * 2 + off];
                    let d = &mut simd[off..];
                    if d.as_ptr().align_offset(4) == 0 || !stream {
                        // SAFETY: features detected above; `d` is 2 * src.len() bytes and,
                        // when streaming, 4-byte aligned (checked just above).
                        unsafe { f16_to_f32_f16c(&src, d, stream) };
                        assert_eq!(d, &port[..], "stream {stream} offset {off}");
                    }
                }
            }
        } else {
            println!("note: CPU lacks AVX2/F16C, F16C kernel not exercised");
        }
    }

    /// Outputs of at least STREAM_MIN_OUT bytes take the non-temporal paths on x86-64; every
    /// destination alignment must give the reference result.
    #[test]
    fn large_buffers_any_alignment() {
        let elems = (8 << 20) / 4 + 7;
        let src: Vec<u8> = (0..elems as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 16) as u16)
            .flat_map(u16::to_le_bytes)
            .collect();
        let mut want_bf = vec![0u8; 2 * src.len()];
        let mut want_f = vec![0u8; 2 * src.len()];
        bf16_scalar(&src, &mut want_bf);
        f16_scalar(&src, &mut want_f);
        let mut buf = vec![0u8; 2 * src.len() + 64];
        for off in [0usize, 1, 4, 12, 16, 28, 33] {
            let d = &mut buf[off..off + 2 * src.len()];
            d.fill(0x5a);
            assert_eq!(bf16_to_f32(&src, d), Ok(2 * src.len()));
            assert!(d == &want_bf[..], "bf16 offset {off}");
            d.fill(0x5a);
            assert_eq!(f16_to_f32(&src, d), Ok(2 * src.len()));
            assert!(d == &want_f[..], "f16 offset {off}");
        }
    }

    #[test]
    fn known_values() {
        let cases: &[(u16, f32)] = &[
            (0x3c00, 1.0),
            (0xc000, -2.0),
            (0x7bff, 65504.0),
            (0x0001, 5.960_464_5e-8),
            (0x03ff, 6.097_555e-5),
            (0x0400, 6.103_515_6e-5),
            (0x8000, -0.0),
            (0x7c00, f32::INFINITY),
            (0xfc00, f32::NEG_INFINITY),
        ];
        for &(h, want) in cases {
            let mut d = [0u8; 4];
            f16_to_f32(&h.to_le_bytes(), &mut d).unwrap();
            assert_eq!(f32::from_le_bytes(d).to_bits(), want.to_bits(), "{h:#06x}");
        }
        // Signalling NaN with sign and payload: 0xfd55 -> 0xffaaa000, quiet bit still clear.
        let mut d = [0u8; 4];
        f16_to_f32(&0xfd55u16.to_le_bytes(), &mut d).unwrap();
        assert_eq!(u32::from_le_bytes(d), 0xffaa_a000);
        bf16_to_f32(&0xff81u16.to_le_bytes(), &mut d).unwrap();
        assert_eq!(u32::from_le_bytes(d), 0xff81_0000);
    }

    #[test]
    fn bad_lengths_are_errors() {
        let mut d = [0u8; 8];
        for f in [bf16_to_f32, f16_to_f32] {
            assert_eq!(
                f(&[1, 2, 3], &mut d),
                Err(Error::Misaligned {
                    len: 3,
                    multiple: 2
                })
            );
            assert_eq!(
                f(&[0; 6], &mut d),
                Err(Error::BufferTooSmall {
                    needed: 12,
                    available: 8
                })
            );
            assert_eq!(f(&[], &mut []), Ok(0));
        }
        assert_eq!(
            int4_to_int8(&[0; 2], 5, &mut d),
            Err(Error::LengthMismatch {
                expected: 3,
                actual: 2
            })
        );
        assert_eq!(
            int4_to_int8(&[0; 5], 9, &mut d),
            Err(Error::BufferTooSmall {
                needed: 9,
                available: 8
            })
        );
        assert_eq!(
            uint1_to_uint8(&[0; 1], 9, &mut d),
            Err(Error::LengthMismatch {
                expected: 2,
                actual: 1
            })
        );
        assert_eq!(
            uint1_to_uint8(&[0; 2], 9, &mut d),
            Err(Error::BufferTooSmall {
                needed: 9,
                available: 8
            })
        );
        assert_eq!(int4_to_int8(&[], 0, &mut []), Ok(0));
        assert_eq!(uint1_to_uint8(&[], 0, &mut []), Ok(0));
    }

    /// ml_dtypes' float32 bits of every float8 pattern (`tests/fixtures/gen_fp8.py`):
    /// `(byte, [e4m3fn, e5m2, e4m3fnuz, e5m2fnuz])`.
    fn ml_dtypes_fp8() -> Vec<(u8, [u32; 4])> {
        let rows: Vec<(u8, [u32; 4])> = include_str!("../tests/fixtures/fp8_f32.txt")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                assert_eq!(f.len(), 5, "{l}");
                let hex = |s: &str| u32::from_str_radix(s, 16).expect("hex");
                (
                    hex(f[0]) as u8,
                    [hex(f[1]), hex(f[2]), hex(f[3]), hex(f[4])],
                )
            })
            .collect();
        assert_eq!(rows.len(), 256);
        rows
    }

    #[test]
    fn fp8_matches_ml_dtypes() {
        let rows = ml_dtypes_fp8();
        let src: Vec<u8> = (0..=255).collect();
        let mut e4 = vec![0xAAu8; 1024 + 3];
        let mut e5 = vec![0xAAu8; 1024];
        assert_eq!(f8e4m3fn_to_f32(&src, &mut e4), Ok(1024));
        assert_eq!(e4[1024..], [0xAA; 3], "wrote past 4 * len");
        assert_eq!(f8e5m2_to_f32(&src, &mut e5), Ok(1024));
        for ((&(b, [want4, want5, ..]), w4), w5) in rows.iter().zip(words(&e4)).zip(words(&e5)) {
            assert_eq!(w4, want4, "e4m3fn {b:#04x}");
            assert_eq!(w5, want5, "e5m2 {b:#04x}");
            assert_eq!(
                fp8_to_f32(DType::Float8E4M3FN, b).map(f32::to_bits),
                Some(want4)
            );
            assert_eq!(
                fp8_to_f32(DType::Float8E5M2, b).map(f32::to_bits),
                Some(want5)
            );
        }
        assert_eq!(fp8_to_f32(DType::Float16, 0), None);
        // The format facts, independent of the fixture.
        let v4 = |b: u8| f32::from_bits(F8E4M3FN_TO_F32[b as usize]);
        let v5 = |b: u8| f32::from_bits(F8E5M2_TO_F32[b as usize]);
        assert_eq!((v4(0x7e), v4(0x38), v4(0x01)), (448.0, 1.0, 2f32.powi(-9)));
        assert!(v4(0x7f).is_nan() && v4(0xff).is_nan() && v4(0xff).is_sign_negative());
        assert_eq!((0..=255u8).filter(|&b| v4(b).is_infinite()).count(), 0);
        assert_eq!((0..=255u8).filter(|&b| v4(b).is_nan()).count(), 2);
        assert_eq!(
            (v5(0x7b), v5(0x3c), v5(0x01)),
            (57344.0, 1.0, 2f32.powi(-16))
        );
        assert_eq!((v5(0x7c), v5(0xfc)), (f32::INFINITY, f32::NEG_INFINITY));
        assert_eq!((0..=255u8).filter(|&b| v5(b).is_nan()).count(), 6);
        // e5m2 is the high byte of a binary16: every non-NaN value agrees with the f16 path.
        for b in 0..=255u8 {
            if !v5(b).is_nan() {
                assert_eq!(v5(b).to_bits(), f16_bits_to_f32_bits(u16::from(b) << 8));
            }
        }
        let mut small = [0u8; 7];
        assert_eq!(
            f8e5m2_to_f32(&[1, 2], &mut small),
            Err(Error::BufferTooSmall {
                needed: 8,
                available: 7
            })
        );
        assert_eq!(f8e4m3fn_to_f32(&[], &mut []), Ok(0));
    }

    #[test]
    fn fp8_fnuz_matches_ml_dtypes() {
        let rows = ml_dtypes_fp8();
        let src: Vec<u8> = (0..=255).collect();
        let mut e4 = vec![0xAAu8; 1024 + 3];
        let mut e5 = vec![0xAAu8; 1024 + 1];
        assert_eq!(f8e4m3fnuz_to_f32(&src, &mut e4), Ok(1024));
        assert_eq!(e4[1024..], [0xAA; 3], "wrote past 4 * len");
        assert_eq!(f8e5m2fnuz_to_f32(&src, &mut e5), Ok(1024));
        assert_eq!(e5[1024], 0xAA, "wrote past 4 * len");
        for ((&(b, [_, _, want4, want5]), w4), w5) in rows.iter().zip(words(&e4)).zip(words(&e5)) {
            assert_eq!(w4, want4, "e4m3fnuz {b:#04x}");
            assert_eq!(w5, want5, "e5m2fnuz {b:#04x}");
            let one = |d| fp8_to_f32(d, b).map(f32::to_bits);
            assert_eq!(one(DType::Float8E4M3FNUZ), Some(want4));
            assert_eq!(one(DType::Float8E5M2FNUZ), Some(want5));
        }
        // The format facts, independent of the fixture: bias 8 / 16, no infinities, no
        // negative zero, `0x80` the single NaN.
        let v4 = |b: u8| f32::from_bits(F8E4M3FNUZ_TO_F32[b as usize]);
        let v5 = |b: u8| f32::from_bits(F8E5M2FNUZ_TO_F32[b as usize]);
        assert_eq!((v4(0x7f), v4(0x40), v4(0x01)), (240.0, 1.0, 2f32.powi(-10)));
        assert_eq!(
            (v5(0x7f), v5(0x40), v5(0x01)),
            (57344.0, 1.0, 2f32.powi(-17))
        );
        assert_eq!((v4(0xff), v5(0xff)), (-240.0, -57344.0));
        for v in [v4, v5] {
            assert!(v(0x80).is_nan());
            assert_eq!((0..=255u8).filter(|&b| v(b).is_nan()).count(), 1);
            assert_eq!((0..=255u8).filter(|&b| v(b).is_infinite()).count(), 0);
            assert_eq!((0..=255u8).filter(|&b| v(b) == 0.0).count(), 1);
            assert_eq!(v(0).to_bits(), 0);
            // Every non-NaN pattern has its negation at `b ^ 0x80`.
            for b in 1..=0x7fu8 {
                assert_eq!(v(b ^ 0x80), -v(b));
            }
        }
        // Each FNUZ value is half the same pattern's FN / IEEE value (bias one higher) where
        // both are finite.
        for b in 0..=255u8 {
            let (fn4, ieee5) = (
                f32::from_bits(F8E4M3FN_TO_F32[b as usize]),
                f32::from_bits(F8E5M2_TO_F32[b as usize]),
            );
            if b != 0x80 && fn4.is_finite() {
                assert_eq!(v4(b), fn4 / 2.0, "{b:#04x}");
            }
            if b != 0x80 && ieee5.is_finite() {
                assert_eq!(v5(b), ieee5 / 2.0, "{b:#04x}");
            }
        }
        let mut small = [0u8; 3];
        assert_eq!(
            f8e4m3fnuz_to_f32(&[1], &mut small),
            Err(Error::BufferTooSmall {
                needed: 4,
                available: 3
            })
        );
        assert_eq!(f8e5m2fnuz_to_f32(&[], &mut []), Ok(0));
        assert!(fp8_table_of(DType::Float32).is_none());
    }

    #[test]
    fn uint4_all_bytes() {
        let src: Vec<u8> = (0..=255).collect();
        let mut d = vec![0u8; 512];
        assert_eq!(uint4_to_uint8(&src, 512, &mut d), Ok(512));
        for (b, pair) in src.iter().zip(d.chunks_exact(2)) {
            assert_eq!(pair, [b & 0xf, b >> 4], "byte {b:#04x}");
        }
        let mut d3 = [0xEEu8; 4];
        assert_eq!(uint4_to_uint8(&[0x8f, 0xf7], 3, &mut d3), Ok(3));
        assert_eq!(d3, [0x0f, 0x08, 0x07, 0xEE]);
        assert_eq!(
            uint4_to_uint8(&[0; 2], 5, &mut d3),
            Err(Error::LengthMismatch {
                expected: 3,
                actual: 2
            })
        );
    }

    #[test]
    fn int4_all_bytes() {
        let src: Vec<u8> = (0..=255).collect();
        let mut d = vec![0u8; 512];
        assert_eq!(int4_to_int8(&src, 512, &mut d), Ok(512));
        for (b, pair) in src.iter().zip(d.chunks_exact(2)) {
            let lo = i32::from(b & 0xf);
            let hi = i32::from(b >> 4);
            let sx = |n: i32| if n >= 8 { n - 16 } else { n };
            assert_eq!(i32::from(pair[0] as i8), sx(lo), "byte {b:#04x} low");
            assert_eq!(i32::from(pair[1] as i8), sx(hi), "byte {b:#04x} high");
        }
        // Odd count: the final high nibble (0xF here) is ignored.
        let mut d3 = [0xEEu8; 4];
        assert_eq!(int4_to_int8(&[0x8f, 0xf7], 3, &mut d3), Ok(3));
        assert_eq!(d3, [0xff, 0xf8, 0x07, 0xEE]);
    }

    #[test]
    fn uint1_last_partial_byte() {
        // 11 elements: 1 full byte + 3 leading bits of the second byte.
        let src = [0b1011_0001, 0b1100_0000];
        let mut d = [9u8; 12];
        assert_eq!(uint1_to_uint8(&src, 11, &mut d), Ok(11));
        assert_eq!(d, [1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 9]);
        for r in 1..8usize {
            let mut d = [9u8; 9];
            assert_eq!(uint1_to_uint8(&[0xff], r, &mut d), Ok(r));
            assert!(d[..r].iter().all(|&x| x == 1) && d[r..].iter().all(|&x| x == 9));
        }
    }

    fn ref_int4(src: &[u8], elems: usize) -> Vec<u8> {
        (0..elems)
            .map(|i| {
                let n = if i % 2 == 0 {
                    src[i / 2] & 0xf
                } else {
                    src[i / 2] >> 4
                };
                (if n >= 8 { n as i8 - 16 } else { n as i8 }) as u8
            })
            .collect()
    }

    fn ref_uint1(src: &[u8], elems: usize) -> Vec<u8> {
        (0..elems)
            .map(|i| (src[i / 8] >> (7 - i % 8)) & 1)
            .collect()
    }

    /// Sorted split points in `0..=len`, restricted to multiples of `step`.
    fn splits(len: usize, cuts: &[usize], step: usize) -> Vec<usize> {
        let mut v: Vec<usize> = cuts.iter().map(|c| c % (len + 1) / step * step).collect();
        v.push(0);
        v.push(len);
        v.sort_unstable();
        v.dedup();
        v
    }

    proptest! {
        #[test]
        fn half_chunked_equals_whole(
            src in proptest::collection::vec(any::<u8>(), 0..600).prop_map(|mut v| {
                v.truncate(v.len() / 2 * 2);
                v
            }),
            cuts in proptest::collection::vec(any::<usize>(), 0..6),
        ) {
            let n = src.len();
            let mut want_bf = vec![0u8; 2 * n];
            let mut want_f = vec![0u8; 2 * n];
            for (i, c) in src.chunks_exact(2).enumerate() {
                let h = u16::from_le_bytes([c[0], c[1]]);
                want_bf[4 * i..4 * i + 4].copy_from_slice(&ref_bf16(h).to_le_bytes());
                want_f[4 * i..4 * i + 4].copy_from_slice(&ref_f16(h).to_le_bytes());
            }
            let pts = splits(n, &cuts, 2);
            let mut got_bf = vec![0u8; 2 * n];
            let mut got_f = vec![0u8; 2 * n];
            for w in pts.windows(2) {
                let (a, b) = (w[0], w[1]);
                prop_assert_eq!(bf16_to_f32(&src[a..b], &mut got_bf[2 * a..]), Ok(2 * (b - a)));
                prop_assert_eq!(f16_to_f32(&src[a..b], &mut got_f[2 * a..]), Ok(2 * (b - a)));
            }
            prop_assert_eq!(got_bf, want_bf);
            prop_assert_eq!(got_f, want_f);
        }

        #[test]
        fn packed_chunked_equals_whole(
            src in proptest::collection::vec(any::<u8>(), 0..200),
            drop_int4 in 0usize..2,
            drop_uint1 in 0usize..8,
            cuts in proptest::collection::vec(any::<usize>(), 0..6),
        ) {
            let n = src.len();
            let e4 = (2 * n).saturating_sub(drop_int4);
            let e1 = (8 * n).saturating_sub(drop_uint1);
            let e4 = if n == 0 { 0 } else { e4 };
            let e1 = if n == 0 { 0 } else { e1 };
            let pts = splits(n, &cuts, 1);
            let mut got4 = vec![0u8; e4];
            let mut got1 = vec![0u8; e1];
            for w in pts.windows(2) {
                let (a, b) = (w[0], w[1]);
                let last = b == n;
                let k4 = if last { e4 - 2 * a } else { 2 * (b - a) };
                let k1 = if last { e1 - 8 * a } else { 8 * (b - a) };
                prop_assert_eq!(int4_to_int8(&src[a..b], k4, &mut got4[2 * a..]), Ok(k4));
                prop_assert_eq!(uint1_to_uint8(&src[a..b], k1, &mut got1[8 * a..]), Ok(k1));
            }
            prop_assert_eq!(got4, ref_int4(&src, e4));
            prop_assert_eq!(got1, ref_uint1(&src, e1));
        }
    }
}
