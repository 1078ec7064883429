use super::*;
use proptest::prelude::*;

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Every backend this CPU runs (the portable one first).
fn backends() -> impl Iterator<Item = Backend> {
    Backend::ALL.into_iter().filter(|b| b.available())
}

/// Every vector backend this CPU runs (AVX2, AVX-512), each checked against the portable one.
fn vector_backends() -> impl Iterator<Item = Backend> {
    backends().filter(|b| *b != Backend::Portable)
}

fn run(backend: Backend, dtype: DType, a: &[u8], b: &[u8], n: usize) -> PairMetrics {
    let mut acc =
        PairAccumulator::with_backend(dtype, n, Tolerance::default_for(dtype), backend).unwrap();
    acc.update(a, b).unwrap();
    acc.finish().unwrap()
}

#[test]
fn identical_tensors_match_exactly() {
    let v: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.37).collect();
    let a = f32_bytes(&v);
    let m = compare_pair(
        DType::Float32,
        &a,
        &a,
        v.len(),
        Tolerance::default_for(DType::Float32),
    )
    .unwrap();
    assert_eq!(
        (m.count, m.finite, m.not_close, m.max_ulp),
        (1000, 1000, 0, 0)
    );
    assert_eq!((m.max_abs, m.max_rel, m.rel_over_1e3), (0.0, 0.0, 0));
    assert!((m.cosine() - 1.0).abs() < 1e-12);
    assert!(m.within_tolerance());
}

#[test]
fn a_scaled_tensor_keeps_cosine_one_but_diverges() {
    let v: Vec<f32> = (1..=100).map(|i| i as f32).collect();
    let w: Vec<f32> = v.iter().map(|x| x * 1.001).collect();
    let m = compare_pair(
        DType::Float32,
        &f32_bytes(&w),
        &f32_bytes(&v),
        100,
        Tolerance::default_for(DType::Float32),
    )
    .unwrap();
    assert!(m.cosine() > 0.999_999);
    assert_eq!(m.not_close, 100, "every element is 1e-3 off, rtol is 1e-4");
    assert!(!m.within_tolerance());
    assert!((m.max_rel - 0.001).abs() < 1e-5, "{}", m.max_rel);
    assert!(m.max_ulp > 1000);
}

#[test]
fn nonfinite_positions_and_ulps() {
    let a = [
        f32::NAN,
        f32::INFINITY,
        1.0,
        0.0,
        -0.0,
        f32::NEG_INFINITY,
        1.0,
        2.0,
        f32::from_bits(1),
    ];
    let b = [
        f32::NAN,
        f32::INFINITY,
        f32::NAN,
        -0.0,
        0.0,
        f32::INFINITY,
        1.0,
        2.0,
        f32::from_bits(0x8000_0001),
    ];
    for backend in backends() {
        let m = run(
            backend,
            DType::Float32,
            &f32_bytes(&a),
            &f32_bytes(&b),
            a.len(),
        );
        assert_eq!(
            m.nonfinite_mismatch, 2,
            "{backend:?}: 1 vs NaN, -inf vs inf"
        );
        assert_eq!(m.finite, 5);
        assert_eq!(
            m.max_ulp, 2,
            "{backend:?}: ±0 equal, ±min subnormal 2 apart"
        );
        assert_eq!(m.not_close, 0);
    }
}

#[test]
fn zero_reference_gives_infinite_relative_error() {
    let m = run(
        Backend::Portable,
        DType::Float32,
        &f32_bytes(&[1.0]),
        &f32_bytes(&[0.0]),
        1,
    );
    assert_eq!(m.max_rel, f64::INFINITY);
    assert_eq!((m.rel_over_1e3, m.not_close), (1, 1));
}

#[test]
fn integers_must_be_equal_and_ulp_is_the_difference() {
    let a: Vec<u8> = [5i64, -7, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
    let b: Vec<u8> = [5i64, -10, 9]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let m = compare_pair(
        DType::Int64,
        &a,
        &b,
        3,
        Tolerance::default_for(DType::Int64),
    )
    .unwrap();
    assert_eq!((m.not_close, m.max_ulp, m.max_abs), (1, 3, 3.0));
}

#[test]
fn half_types_count_ulps_in_their_own_format() {
    let a = half::bf16::from_f32(1.0).to_bits().to_le_bytes();
    let b = half::bf16::from_bits(half::bf16::from_f32(1.0).to_bits() + 3)
        .to_bits()
        .to_le_bytes();
    let m = compare_pair(
        DType::BFloat16,
        &a,
        &b,
        1,
        Tolerance::default_for(DType::BFloat16),
    )
    .unwrap();
    assert_eq!(m.max_ulp, 3);
}

/// FNUZ float8: one rounding step is within the default tolerance, two are not; ulps count
/// in the format's own bits; the one NaN (`0x80`, not a negative zero) only matches a NaN.
#[test]
fn fnuz_float8_tolerance_ulps_and_nan() {
    for backend in backends() {
        for dtype in [DType::Float8E4M3FNUZ, DType::Float8E5M2FNUZ] {
            // 1.0 is 0x40 in both; 0x41 one step above, 0x42 two (e4m3fnuz: 1.125, 1.25;
            // e5m2fnuz: 1.25, 1.5). -1.0 (0xc0) against -1 step (0xc1).
            let a = [0x40u8, 0xc1, 0x80, 0x00];
            let b = [0x41u8, 0xc0, 0x80, 0x00];
            let m = run(backend, dtype, &a, &b, 4);
            assert_eq!(
                (m.finite, m.nonfinite_mismatch, m.max_ulp),
                (3, 0, 1),
                "{dtype}"
            );
            assert_eq!(m.not_close, 0, "{dtype}: one step is within tolerance");
            let m = run(backend, dtype, &[0x42, 0x80], &[0x40, 0x00], 2);
            assert_eq!(m.max_ulp, 2, "{dtype}");
            assert_eq!(m.not_close, 1, "{dtype}: two steps are not");
            assert_eq!(m.nonfinite_mismatch, 1, "{dtype}: NaN against 0");
        }
    }
    assert_eq!(
        Tolerance::default_for(DType::Float8E4M3FNUZ).atol,
        f64::from(f32::from_bits(crate::widen::F8E4M3FNUZ_TO_F32[1]))
    );
    assert_eq!(
        Tolerance::default_for(DType::Float8E5M2FNUZ).atol,
        f64::from(f32::from_bits(crate::widen::F8E5M2FNUZ_TO_F32[1]))
    );
}

#[test]
fn chunked_feeding_equals_one_call_and_length_errors() {
    let v: Vec<f32> = (0..777).map(|i| (i as f32).sin()).collect();
    let w: Vec<f32> = v.iter().map(|x| x + 1e-4).collect();
    let (a, b) = (f32_bytes(&v), f32_bytes(&w));
    let whole = run(Backend::detect(), DType::Float32, &a, &b, 777);
    for backend in backends() {
        let m = run(backend, DType::Float32, &a, &b, 777);
        assert_eq!(
            (m.count, m.not_close, m.rel_over_1e3, m.max_ulp),
            (
                whole.count,
                whole.not_close,
                whole.rel_over_1e3,
                whole.max_ulp
            ),
            "{backend:?}"
        );
    }
    let mut acc =
        PairAccumulator::new(DType::Float32, 777, Tolerance::default_for(DType::Float32)).unwrap();
    for (x, y) in a.chunks(400).zip(b.chunks(400)) {
        acc.update(x, y).unwrap();
    }
    let m = acc.finish().unwrap();
    assert_eq!(
        (m.count, m.not_close, m.rel_over_1e3),
        (whole.count, whole.not_close, whole.rel_over_1e3)
    );
    let mut short =
        PairAccumulator::new(DType::Float32, 777, Tolerance::default_for(DType::Float32)).unwrap();
    short.update(&a[..400], &b[..400]).unwrap();
    assert!(matches!(short.finish(), Err(Error::LengthMismatch { .. })));
    let mut odd =
        PairAccumulator::new(DType::Float32, 777, Tolerance::default_for(DType::Float32)).unwrap();
    assert!(matches!(
        odd.update(&a[..3], &b[..3]),
        Err(Error::Misaligned { .. })
    ));
    assert!(matches!(
        odd.update(&a[..4], &b[..8]),
        Err(Error::LengthMismatch { .. })
    ));
}

fn special() -> impl Strategy<Value = f32> {
    prop_oneof![
        8 => -1e3f32..1e3,
        1 => Just(0.0f32),
        1 => Just(-0.0f32),
        1 => Just(f32::NAN),
        1 => Just(f32::INFINITY),
        1 => Just(f32::NEG_INFINITY),
        1 => any::<u32>().prop_map(f32::from_bits),
    ]
}

proptest! {
    #[test]
    fn vector_kernels_equal_portable(pairs in proptest::collection::vec((special(), special(), 0u8..4), 0..300)) {
        // Half of the pairs are near-equal, so thresholds and ULPs are exercised.
        let a: Vec<f32> = pairs.iter().map(|p| p.0).collect();
        let b: Vec<f32> = pairs.iter().map(|p| match p.2 { 0 => p.1, 1 => p.0, _ => p.0 * (1.0 + 1e-4 * p.2 as f32) }).collect();
        let (x, y) = (f32_bytes(&a), f32_bytes(&b));
        let p = run(Backend::Portable, DType::Float32, &x, &y, a.len());
        for backend in vector_backends() {
            let f = run(backend, DType::Float32, &x, &y, a.len());
            prop_assert_eq!((p.count, p.finite, p.nonfinite_mismatch), (f.count, f.finite, f.nonfinite_mismatch), "{:?}", backend);
            prop_assert_eq!((p.rel_over_1e3, p.rel_over_5e3, p.not_close, p.max_ulp), (f.rel_over_1e3, f.rel_over_5e3, f.not_close, f.max_ulp), "{:?}", backend);
            prop_assert_eq!(p.max_abs, f.max_abs);
            let close = |u: f64, v: f64| u == v || (u - v).abs() <= 1e-6 * u.abs().max(v.abs());
            prop_assert!(close(p.max_rel, f.max_rel), "{:?}: {} {}", backend, p.max_rel, f.max_rel);
            prop_assert!(close(p.dot, f.dot) || (p.dot - f.dot).abs() < 1e-6 * p.sq_a.max(p.sq_b));
        }
    }
}

/// Whole 16-lane steps (so whole 8-lane steps too) of pairs just above or just below the
/// least threshold (the closest `f32` on each side of `|y|·t`), others a few ulps around
/// 0.001, 0.005 and `rtol`: the AVX2 and AVX-512 kernels' counts (with their fast test for
/// steps far below every threshold) equal the portable kernel's exactly.
#[test]
fn counts_at_every_threshold_boundary_equal_the_portable_kernel() {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for tol in [
        Tolerance::default_for(DType::Float32),
        Tolerance {
            rtol: 0.003,
            atol: 0.0,
        },
        Tolerance {
            rtol: 1e-9,
            atol: 1e-12,
        },
        Tolerance {
            rtol: 1e-4,
            atol: -1.0,
        },
    ] {
        let t_min = tol.rtol.min(0.001);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in 0..8000usize {
            let bits = ((next() % 200) as u32 + 20) << 23 | (next() as u32 & 0x7f_ffff);
            let y = f32::from_bits(bits | if next() % 2 == 0 { 0 } else { 1 << 31 });
            let x = match (i / 16) % 3 {
                // Just above (0) or just below (1) |y|·t_min, the whole step alike.
                side @ (0 | 1) => {
                    let want = y.abs() as f64 * t_min;
                    let mut x = (y as f64 + want.copysign(y as f64)) as f32;
                    let up = |x: f32| f32::from_bits(x.to_bits() + 1);
                    let down = |x: f32| f32::from_bits(x.to_bits() - 1);
                    let d = |x: f32| (x as f64 - y as f64).abs();
                    while d(x) <= want {
                        x = up(x);
                    }
                    while d(down(x)) > want {
                        x = down(x);
                    }
                    if side == 1 { down(x) } else { x }
                }
                _ => {
                    let t = [0.001f64, 0.005, tol.rtol, 1e-7][i % 4];
                    let x0 = (y as f64 * (1.0 + t)) as f32;
                    f32::from_bits((x0.to_bits() as i32 + (next() % 7) as i32 - 3) as u32)
                }
            };
            a.push(x);
            b.push(y);
        }
        let (x, y) = (f32_bytes(&a), f32_bytes(&b));
        let go = |backend: Backend| {
            let mut acc =
                PairAccumulator::with_backend(DType::Float32, a.len(), tol, backend).unwrap();
            acc.update(&x, &y).unwrap();
            acc.finish().unwrap()
        };
        let p = go(Backend::Portable);
        assert!(p.rel_over_1e3 > 0 && p.not_close > 0, "{tol:?}: {p:?}");
        for backend in vector_backends() {
            let f = go(backend);
            assert_eq!(
                (p.rel_over_1e3, p.rel_over_5e3, p.not_close),
                (f.rel_over_1e3, f.rel_over_5e3, f.not_close),
                "{backend:?} {tol:?}"
            );
            assert_eq!(p.max_abs, f.max_abs, "{backend:?}");
        }
    }
}
