//! The kernels' arithmetic, bit for bit on the CPU: shared by the host combination of block
//! partials ([`crate::combine()`]) and the kernel model ([`crate::model`]).

use crate::KernelId;
use dump_core::DType;

/// Rounds an f32 to f16 precision (nearest even), like PTX `cvt.rn.f16.f32`.
pub fn round_f16(x: f32) -> f32 {
    half::f16::from_f32(x).to_f32()
}

/// Rounds an f32 to bf16 precision (nearest even; NaN stays NaN, quieted).
pub fn round_bf16(x: f32) -> f32 {
    let u = x.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        return f32::from_bits((u | 0x0040_0000) & 0xffff_0000);
    }
    let r = u.wrapping_add(0x7fff + ((u >> 16) & 1));
    f32::from_bits(r & 0xffff_0000)
}

/// How one kernel accumulates: its sum and square steps, on values held exactly in f64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accum {
    /// f64 accumulation (`high`, f64 and integer inputs).
    F64,
    /// f32 accumulation (`low` f32).
    F32,
    /// f32 arithmetic rounded to f16 after every step (`low` f16).
    F16,
    /// f32 arithmetic rounded to bf16 after every step (`low` bf16).
    BF16,
}

impl Accum {
    /// The accumulation of a kernel.
    pub fn of(k: KernelId) -> Accum {
        match (k.dtype, k.low) {
            (DType::Float16, true) => Accum::F16,
            (DType::BFloat16, true) => Accum::BF16,
            (DType::Float32, true) => Accum::F32,
            _ => Accum::F64,
        }
    }

    /// `a + b` as the kernel computes it.
    #[inline]
    pub fn add(self, a: f64, b: f64) -> f64 {
        match self {
            Accum::F64 => a + b,
            Accum::F32 => f64::from(a as f32 + b as f32),
            Accum::F16 => f64::from(round_f16(a as f32 + b as f32)),
            Accum::BF16 => f64::from(round_bf16(a as f32 + b as f32)),
        }
    }

    /// `v * v` as the kernel computes it (`v` is an element's exact value).
    #[inline]
    pub fn sq(self, v: f64) -> f64 {
        match self {
            Accum::F64 => v * v,
            Accum::F32 => f64::from(v as f32 * v as f32),
            Accum::F16 => f64::from(round_f16(v as f32 * v as f32)),
            Accum::BF16 => f64::from(round_bf16(v as f32 * v as f32)),
        }
    }

    /// Rounds an f64 result to the accumulator's dtype (the output of a low-precision mean
    /// or norm); f64 unchanged.
    pub fn round(self, v: f64) -> f64 {
        match self {
            Accum::F64 => v,
            Accum::F32 => f64::from(v as f32),
            Accum::F16 => f64::from(round_f16(v as f32)),
            Accum::BF16 => f64::from(round_bf16(v as f32)),
        }
    }
}

/// The kernels' `vmax`: the larger value; among equal values `+0` beats `-0`, so the result
/// does not depend on the combination order.
#[inline]
pub fn vmax(a: f64, b: f64) -> f64 {
    if b > a || (b == a && a.is_sign_negative() && !b.is_sign_negative()) {
        b
    } else {
        a
    }
}

/// The kernels' `vmin`: the smaller value; among equal values `-0` beats `+0`.
#[inline]
pub fn vmin(a: f64, b: f64) -> f64 {
    if b < a || (b == a && !a.is_sign_negative() && b.is_sign_negative()) {
        b
    } else {
        a
    }
}

/// `true` when the raw bits of an element of `dtype` are a NaN (floats only).
#[inline]
pub fn raw_is_nan(dtype: DType, raw: u64) -> bool {
    match dtype {
        DType::Float16 => raw & 0x7fff > 0x7c00,
        DType::BFloat16 => raw & 0x7fff > 0x7f80,
        DType::Float32 => raw & 0x7fff_ffff > 0x7f80_0000,
        DType::Float64 => raw & 0x7fff_ffff_ffff_ffff > 0x7ff0_0000_0000_0000,
        _ => false,
    }
}

/// The value of a float element's raw bits as the host statistics see it (NaN sign and
/// payload as `dump-core`'s reference widening gives them).
#[inline]
pub fn raw_to_f64(dtype: DType, raw: u64) -> f64 {
    match dtype {
        DType::Float16 => half::f16::from_bits(raw as u16).to_f64(),
        DType::BFloat16 => f64::from(f32::from_bits((raw as u32) << 16)),
        DType::Float32 => f64::from(f32::from_bits(raw as u32)),
        DType::Float64 => f64::from_bits(raw),
        _ => raw as i64 as f64,
    }
}

/// The integer value of an integer or bool element's raw bits (sign-extended as its dtype).
#[inline]
pub fn raw_to_i64(dtype: DType, raw: u64) -> i64 {
    match dtype {
        DType::Bool => i64::from(raw as u8 != 0),
        DType::Int8 => i64::from(raw as u8 as i8),
        DType::UInt8 => i64::from(raw as u8),
        DType::Int16 => i64::from(raw as u16 as i16),
        DType::Int32 => i64::from(raw as u32 as i32),
        _ => raw as i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounding_matches_the_half_crate() {
        for bits in (0u32..=u32::MAX).step_by(65_521) {
            let x = f32::from_bits(bits);
            let ours = round_bf16(x);
            let theirs = half::bf16::from_f32(x).to_f32();
            if x.is_nan() {
                assert!(ours.is_nan() && ours.is_sign_negative() == x.is_sign_negative());
            } else {
                assert_eq!(ours.to_bits(), theirs.to_bits(), "{x:e}");
            }
        }
    }

    #[test]
    fn low_precision_steps_round_like_the_dtype() {
        // 2048 + 1 is not an f16; 256 + 1 is not a bf16; 2^24 + 1 is not an f32.
        assert_eq!(Accum::F16.add(2048.0, 1.0), 2048.0);
        assert_eq!(Accum::BF16.add(256.0, 1.0), 256.0);
        assert_eq!(Accum::F32.add(16_777_216.0, 1.0), 16_777_216.0);
        assert_eq!(Accum::F64.add(16_777_216.0, 1.0), 16_777_217.0);
        // fp16 40000^2 overflows.
        assert_eq!(Accum::F16.sq(40000.0), f64::INFINITY);
        assert_eq!(Accum::F64.sq(40000.0), 1.6e9);
    }

    #[test]
    fn signed_zero_extrema_are_order_independent() {
        assert!(vmax(-0.0, 0.0).is_sign_positive() && vmax(0.0, -0.0).is_sign_positive());
        assert!(vmin(-0.0, 0.0).is_sign_negative() && vmin(0.0, -0.0).is_sign_negative());
        assert_eq!(vmax(1.0, f64::NEG_INFINITY), 1.0);
        assert_eq!(vmin(1.0, -3.0), -3.0);
    }

    #[test]
    fn raw_values() {
        assert!(raw_is_nan(DType::Float16, 0xfe00) && !raw_is_nan(DType::Float16, 0x7c00));
        assert!(raw_to_f64(DType::Float16, 0xfe00).is_sign_negative());
        assert_eq!(raw_to_f64(DType::BFloat16, 0x3f80), 1.0);
        assert_eq!(raw_to_i64(DType::Int8, 0xff), -1);
        assert_eq!(raw_to_i64(DType::Bool, 2), 1);
        assert_eq!(raw_to_i64(DType::Int32, 0xffff_fffe), -2);
    }
}
