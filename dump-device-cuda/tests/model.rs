//! The kernel model against the host statistics and the precision policy: what users see on
//! a device, for many shapes and dtypes, with NaN, ±inf and ±0.

mod samples;

use dump_core::{DType, Summary, stats::summarize_reference};
use dump_device_cuda::{Precision, model};
use dump_stats::precision::{DeviceStats, DeviceValue, device_statistics};

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Sizes around unit, warp, block and grid boundaries.
const SIZES: [usize; 14] = [
    1, 2, 7, 8, 15, 16, 17, 255, 257, 1023, 1025, 4099, 65_537, 300_007,
];

/// Special values of a float dtype, as raw little-endian bytes.
fn specials(dtype: DType) -> Vec<Vec<u8>> {
    let f = |v: f64| -> Vec<u8> {
        match dtype {
            DType::Float16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
            DType::BFloat16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
            DType::Float32 => (v as f32).to_le_bytes().to_vec(),
            _ => v.to_le_bytes().to_vec(),
        }
    };
    let neg_nan = match dtype {
        DType::Float16 => 0xfe00u16.to_le_bytes().to_vec(),
        DType::BFloat16 => 0xffc0u16.to_le_bytes().to_vec(),
        DType::Float32 => 0xffc0_0000u32.to_le_bytes().to_vec(),
        _ => 0xfff8_0000_0000_0000u64.to_le_bytes().to_vec(),
    };
    vec![
        f(f64::NAN),
        neg_nan,
        f(f64::INFINITY),
        f(f64::NEG_INFINITY),
        f(0.0),
        f(-0.0),
    ]
}

/// Random elements of `dtype`; floats in [-range, range), with specials sprinkled in when
/// `special` is set.
fn data(dtype: DType, n: usize, rng: &mut Rng, range: f64, special: bool) -> Vec<u8> {
    let size = dtype.size().unwrap();
    let mut out = Vec::with_capacity(n * size);
    let sp = specials(if dtype.is_float() {
        dtype
    } else {
        DType::Float32
    });
    for _ in 0..n {
        if dtype.is_float() && special && rng.below(97) == 0 {
            out.extend_from_slice(&sp[rng.below(sp.len() as u64) as usize]);
            continue;
        }
        let r = rng.next();
        let unit = (r >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        let v = (unit * 2.0 - 1.0) * range;
        match dtype {
            DType::Float16 => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            DType::BFloat16 => out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            DType::Float32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            DType::Float64 => out.extend_from_slice(&v.to_le_bytes()),
            DType::Bool => out.push((r & 1) as u8),
            _ => out.extend_from_slice(&r.to_le_bytes()[..size]),
        }
    }
    out
}

fn same_nan(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits()
        || (a.is_nan() && b.is_nan() && a.is_sign_negative() == b.is_sign_negative())
}

fn check_against_host(dtype: DType, n: usize, bytes: &[u8], p: Precision) {
    let dev = model::summarize(dtype, bytes, n, p).unwrap().unwrap();
    let host: Summary = summarize_reference(dtype, bytes, n).unwrap().unwrap();
    let d = dev.summary;
    let ctx = format!("{dtype} n={n} {p}");
    assert_eq!(
        (d.count, d.nan, d.pos_inf, d.neg_inf, d.zero, d.pos, d.neg),
        (
            host.count,
            host.nan,
            host.pos_inf,
            host.neg_inf,
            host.zero,
            host.pos,
            host.neg
        ),
        "{ctx}: counts"
    );
    // Equal as numbers (a zero extremum may differ in sign: see the model docs).
    assert!(
        d.max == host.max && d.min == host.min,
        "{ctx}: extrema {d:?} vs {host:?}"
    );
    assert!(same_nan(d.first_nan, host.first_nan), "{ctx}: first NaN");
    assert!(same_nan(d.last_nan, host.last_nan), "{ctx}: last NaN");
    if !dtype.is_float() {
        // Integer sums are exact; the host's sequential f64 sum is exact for these sizes
        // except int64 (random 64-bit values exceed 2^53).
        if dtype != DType::Int64 {
            assert_eq!(d.sum, host.sum, "{ctx}: integer sum");
        }
        let exact: i128 = (0..n)
            .map(|i| {
                let s = dtype.size().unwrap();
                let mut b = [0u8; 8];
                b[..s].copy_from_slice(&bytes[i * s..i * s + s]);
                let raw = u64::from_le_bytes(b);
                i128::from(dump_device_cuda::arith::raw_to_i64(dtype, raw))
            })
            .sum();
        assert_eq!(dev.int_sum, Some(exact), "{ctx}: exact integer sum");
    } else if host.sum.is_nan() {
        // inf + -inf: the same NaN as the host's sequential sum, in both precisions.
        assert_eq!(d.sum.to_bits(), host.sum.to_bits(), "{ctx}: NaN sum");
    } else if p == Precision::High && host.sum.is_finite() && host.sum_sq.is_finite() {
        let tol = |x: f64, scale: f64| (x.abs() + scale) * 1e-12;
        let scale = host.sum_sq.sqrt() * (n as f64).sqrt();
        assert!(
            (d.sum - host.sum).abs() <= tol(host.sum, scale),
            "{ctx}: sum"
        );
        assert!(
            (d.sum_sq - host.sum_sq).abs() <= tol(host.sum_sq, 0.0),
            "{ctx}: sum_sq"
        );
    }
    // max/min rows are exactly the policy's; so is every NaN-decided cell.
    let pol = device_statistics(dtype, bytes, n, p).unwrap().unwrap();
    let dv = dev.device_stats();
    assert_eq!(texts(&dv)[..2], texts(&pol)[..2], "{ctx}: device max/min");
    if d.nan != 0 {
        assert_eq!(texts(&dv), texts(&pol), "{ctx}: NaN row");
    }
    if !dtype.is_float() {
        assert_eq!(texts(&dv), texts(&pol), "{ctx}: integer row");
    }
}

fn texts(s: &DeviceStats) -> [String; 4] {
    [s.max, s.min, s.avg, s.l2norm].map(|v| v.to_string())
}

#[test]
fn matches_host_statistics_for_every_dtype_and_shape() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for dtype in samples::DTYPES {
        for &n in &SIZES {
            // The largest sizes only for a few dtypes: the model is a slow, exact replay.
            if n > 70_000 && !matches!(dtype, DType::Float16 | DType::Float32 | DType::Int8) {
                continue;
            }
            for special in [false, true] {
                let bytes = data(dtype, n, &mut rng, 1000.0, special);
                for p in [Precision::High, Precision::Low] {
                    check_against_host(dtype, n, &bytes, p);
                }
            }
        }
    }
}

#[test]
fn high_precision_equals_the_policy_bit_for_bit_when_sums_are_exact() {
    // f16/bf16 values with few significant bits: every f64 partial sum is exact, so the
    // tree order cannot matter and the device row equals the policy's.
    let mut rng = Rng(7);
    for dtype in [
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
    ] {
        for &n in &SIZES {
            let bytes: Vec<u8> = (0..n)
                .flat_map(|_| {
                    let v = (rng.below(257) as f64 - 128.0) / 8.0;
                    match dtype {
                        DType::Float16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
                        DType::BFloat16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
                        DType::Float32 => (v as f32).to_le_bytes().to_vec(),
                        _ => v.to_le_bytes().to_vec(),
                    }
                })
                .collect();
            let dev = model::summarize(dtype, &bytes, n, Precision::High)
                .unwrap()
                .unwrap();
            let pol = device_statistics(dtype, &bytes, n, Precision::High)
                .unwrap()
                .unwrap();
            assert_eq!(dev.device_stats(), pol, "{dtype} n={n}");
        }
    }
}

#[test]
fn high_precision_is_within_one_f32_ulp_of_the_policy_on_random_data() {
    let mut rng = Rng(11);
    let mut differing = 0;
    let mut cells = 0;
    for dtype in [DType::Float32, DType::Float64] {
        for &n in &SIZES[..13] {
            let bytes = data(dtype, n, &mut rng, 3.0, false);
            let dev = model::summarize(dtype, &bytes, n, Precision::High)
                .unwrap()
                .unwrap()
                .device_stats();
            let pol = device_statistics(dtype, &bytes, n, Precision::High)
                .unwrap()
                .unwrap();
            for (a, b) in [(dev.avg, pol.avg), (dev.l2norm, pol.l2norm)] {
                if let (DeviceValue::Float(a), DeviceValue::Float(b)) = (a, b) {
                    let ulps = ((a as f32).to_bits() as i64 - (b as f32).to_bits() as i64).abs();
                    assert!(ulps <= 1, "{dtype} n={n}: {a} vs {b}");
                    differing += usize::from(ulps != 0);
                    cells += 1;
                }
            }
        }
    }
    eprintln!("{differing} of {cells} high-precision cells differ from the policy by 1 ulp");
    // A difference is a rare double-rounding event, not the norm.
    assert!(
        differing * 10 <= cells,
        "{differing} of {cells} cells differ"
    );
}

fn f16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
        .collect()
}

#[test]
fn low_precision_what_users_see() {
    // Small exact data: the tree and the sequential low-precision sums agree.
    let mut rng = Rng(3);
    for &n in &[1usize, 17, 1025, 2048] {
        let v: Vec<f32> = (0..n).map(|_| rng.below(3) as f32 - 1.0).collect();
        let b = f16_bytes(&v);
        let dev = model::summarize(DType::Float16, &b, n, Precision::Low)
            .unwrap()
            .unwrap();
        let pol = device_statistics(DType::Float16, &b, n, Precision::Low)
            .unwrap()
            .unwrap();
        assert_eq!(dev.device_stats(), pol, "n={n}");
    }
    // 4096 f16 ones: a sequential f16 sum stalls at 2048 (policy mean 0.5); the device's
    // tree sums 16-element units and never rounds (mean 1).
    let ones = f16_bytes(&[1.0; 4096]);
    let dev = model::summarize(DType::Float16, &ones, 4096, Precision::Low)
        .unwrap()
        .unwrap()
        .device_stats();
    let pol = device_statistics(DType::Float16, &ones, 4096, Precision::Low)
        .unwrap()
        .unwrap();
    assert_eq!(
        (dev.avg, pol.avg),
        (DeviceValue::Float(1.0), DeviceValue::Float(0.5))
    );
    assert_eq!(dev.l2norm, DeviceValue::Float(64.0));
    // fp16 overflow happens on the device too (spec: 40000 x3 gives inf mean and norm).
    let big = f16_bytes(&[40000.0; 3]);
    let dev = model::summarize(DType::Float16, &big, 3, Precision::Low)
        .unwrap()
        .unwrap()
        .device_stats();
    assert_eq!(texts(&dev), ["40000", "40000", "inf", "inf"]);
    let high = model::summarize(DType::Float16, &big, 3, Precision::High)
        .unwrap()
        .unwrap()
        .device_stats();
    assert_eq!(texts(&high), ["40000", "40000", "40000", "69282"]);
    // bf16 low: 512 ones stay exact in the tree (a sequential bf16 sum stalls at 256).
    let b: Vec<u8> = (0..512)
        .flat_map(|_| half::bf16::from_f32(1.0).to_le_bytes())
        .collect();
    let dev = model::summarize(DType::BFloat16, &b, 512, Precision::Low)
        .unwrap()
        .unwrap();
    assert_eq!(dev.device_stats().avg, DeviceValue::Float(1.0));
}

#[test]
fn spec_cases_match_the_policy_in_both_modes() {
    let inf = f32::INFINITY;
    let cases: [&[f32]; 5] = [
        &[1.0, 2.0, inf],
        &[-inf, 2.0, -10.0],
        &[inf; 3],
        &[2.0, 2.0, -10.0],
        &[3.0, 4.0, -7.0],
    ];
    for v in cases {
        let b = f16_bytes(v);
        for p in [Precision::High, Precision::Low] {
            let dev = model::summarize(DType::Float16, &b, v.len(), p)
                .unwrap()
                .unwrap();
            let pol = device_statistics(DType::Float16, &b, v.len(), p)
                .unwrap()
                .unwrap();
            assert_eq!(texts(&dev.device_stats()), texts(&pol), "{v:?} {p}");
        }
    }
}

#[test]
fn first_and_last_nan_are_resolved_by_index_across_blocks() {
    // A -NaN early in block 0's second grid-stride round and a +NaN in the last block.
    let n = 1024 * 256 * 4 * 2 + 9; // two rounds of the largest f32 grid
    let mut v = vec![1.0f32; n];
    v[1024 * 256 * 4 + 2] = f32::from_bits(0xffc0_0001);
    v[5] = f32::from_bits(0x7fc0_0000);
    v[n - 1] = f32::from_bits(0xffc0_0000);
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let d = model::summarize(DType::Float32, &bytes, n, Precision::High)
        .unwrap()
        .unwrap();
    let host = summarize_reference(DType::Float32, &bytes, n)
        .unwrap()
        .unwrap();
    assert_eq!(d.summary.nan, 3);
    assert_eq!(d.summary.first_nan.to_bits(), host.first_nan.to_bits());
    assert_eq!(d.summary.last_nan.to_bits(), host.last_nan.to_bits());
    assert!(d.summary.first_nan.is_sign_positive() && d.summary.last_nan.is_sign_negative());
    assert_eq!(texts(&d.device_stats())[2], "nan");
}

#[test]
fn results_are_reproducible_run_to_run() {
    let mut rng = Rng(99);
    let bytes = data(DType::Float32, 65_537, &mut rng, 1e6, true);
    let a = model::summarize(DType::Float32, &bytes, 65_537, Precision::Low).unwrap();
    let b = model::summarize(DType::Float32, &bytes, 65_537, Precision::Low).unwrap();
    let (a, b) = (a.unwrap().summary, b.unwrap().summary);
    assert_eq!(a.sum.to_bits(), b.sum.to_bits());
    assert_eq!(a.sum_sq.to_bits(), b.sum_sq.to_bits());
}
