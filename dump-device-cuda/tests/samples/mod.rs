//! Test data and comparisons shared by the device test binaries (each uses part of them).
#![allow(dead_code)]

use dump_core::DType;
use dump_device_cuda::DeviceSummary;

/// Every dtype the device kernels support.
pub const DTYPES: [DType; 10] = [
    DType::Float16,
    DType::BFloat16,
    DType::Float32,
    DType::Float64,
    DType::Int8,
    DType::Int16,
    DType::Int32,
    DType::Int64,
    DType::UInt8,
    DType::Bool,
];

/// Every field of a device summary as bits, so that `assert_eq!` compares NaN payloads and
/// signed zeros exactly.
pub fn bits(s: &DeviceSummary) -> Vec<u64> {
    let m = &s.summary;
    vec![
        m.count,
        m.max.to_bits(),
        m.min.to_bits(),
        m.sum.to_bits(),
        m.sum_sq.to_bits(),
        m.nan,
        m.pos_inf,
        m.neg_inf,
        m.zero,
        m.pos,
        m.neg,
        m.first_nan.to_bits(),
        m.last_nan.to_bits(),
        s.int_sum.map_or(0, |v| v as u64),
        s.int_max.map_or(0, |v| v as u64),
    ]
}

/// `n` deterministic elements of `dtype` from `seed`: moderate values (exercising rounding),
/// every third element raw bits (NaN, inf, subnormals, huge values), every eleventh a
/// negative zero (zero for integers), bools 0..=3 (2 is "true" too).
pub fn bytes_for(dtype: DType, n: usize, seed: u64) -> Vec<u8> {
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
