//! Tests of the fast kernels against the scalar reference, for every dtype and both backends.

use super::*;
use proptest::prelude::*;

/// Every dtype that has statistics (all but the complex ones).
fn real() -> impl Iterator<Item = DType> {
    DType::ALL.into_iter().filter(|d| !d.is_complex())
}

/// Every backend this CPU runs (every test below runs each of them). On x86-64 machines with
/// AVX2 / AVX-512 the vector backends must be present: `detection_matches_cpu` checks that
/// against the CPU's features, and `OPDUMP_EXPECT_STATS_BACKENDS=avx2,avx512` makes it a hard
/// requirement whatever the detection says.
fn backends() -> Vec<Backend> {
    if let Ok(want) = std::env::var("OPDUMP_EXPECT_STATS_BACKENDS") {
        for name in want.split(',').filter(|n| !n.is_empty()) {
            let b = Backend::ALL
                .iter()
                .find(|b| b.name() == name)
                .expect("known backend name");
            assert!(b.available(), "backend {name} expected but not available");
        }
    }
    let v: Vec<Backend> = Backend::ALL.into_iter().filter(|b| b.available()).collect();
    if v.len() < Backend::ALL.len() {
        let missing: Vec<&str> = Backend::ALL
            .iter()
            .filter(|b| !b.available())
            .map(|b| b.name())
            .collect();
        eprintln!("note: backends {missing:?} not available on this CPU; testing {v:?}");
    }
    v
}

#[test]
fn detection_matches_cpu() {
    #[cfg(target_arch = "x86_64")]
    {
        let f = |name: &str| match name {
            "avx2" => std::is_x86_feature_detected!("avx2"),
            "fma" => std::is_x86_feature_detected!("fma"),
            "f16c" => std::is_x86_feature_detected!("f16c"),
            "avx512f" => std::is_x86_feature_detected!("avx512f"),
            "avx512bw" => std::is_x86_feature_detected!("avx512bw"),
            _ => std::is_x86_feature_detected!("avx512vl"),
        };
        let avx2 = ["avx2", "fma", "f16c"].into_iter().all(f);
        let avx512 = avx2 && ["avx512f", "avx512bw", "avx512vl"].into_iter().all(f);
        assert_eq!(Backend::Avx2.available(), avx2);
        assert_eq!(Backend::Avx512.available(), avx512);
        let best = if avx512 {
            Backend::Avx512
        } else if avx2 {
            Backend::Avx2
        } else {
            Backend::Portable
        };
        assert_eq!(Backend::detect(), best);
    }
    #[cfg(not(target_arch = "x86_64"))]
    assert_eq!(Backend::detect(), Backend::Portable);
    assert!(Backend::Portable.available());
    assert!(backends().contains(&Backend::detect()));
    let names: Vec<&str> = Backend::ALL.iter().map(|b| b.name()).collect();
    assert_eq!(names, ["portable", "avx2", "avx512"]);
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Splitmix64: deterministic test data without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// One element's bytes of a float dtype from an `f64` (round to nearest for f16/bf16/f32).
fn float_bytes(dtype: DType, v: f64, out: &mut Vec<u8>) {
    match dtype {
        DType::Float64 => out.extend_from_slice(&v.to_le_bytes()),
        DType::Float32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
        DType::Float16 => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
        DType::BFloat16 => out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
        _ => unreachable!("float dtypes only"),
    }
}

/// A NaN of `dtype` with the given sign and (nonzero-forced) payload bits.
fn nan_bytes(dtype: DType, neg: bool, payload: u64, out: &mut Vec<u8>) {
    match dtype {
        DType::Float64 => {
            let bits = 0x7ff0_0000_0000_0000 | (payload & 0x000f_ffff_ffff_ffff).max(1);
            out.extend_from_slice(&(bits | (neg as u64) << 63).to_le_bytes());
        }
        DType::Float32 => {
            let bits = 0x7f80_0000 | (payload as u32 & 0x007f_ffff).max(1);
            out.extend_from_slice(&(bits | (neg as u32) << 31).to_le_bytes());
        }
        DType::Float16 => {
            let bits = 0x7c00 | (payload as u16 & 0x03ff).max(1);
            out.extend_from_slice(&(bits | (neg as u16) << 15).to_le_bytes());
        }
        DType::BFloat16 => {
            let bits = 0x7f80 | (payload as u16 & 0x007f).max(1);
            out.extend_from_slice(&(bits | (neg as u16) << 15).to_le_bytes());
        }
        _ => unreachable!("float dtypes only"),
    }
}

/// Storage of `elems` elements of `dtype` built from random words: floats mix ordinary
/// values, NaN (both signs, payloads), ±inf, ±0 and subnormals; integers use raw bits.
fn make(dtype: DType, words: &[u64]) -> Vec<u8> {
    let mut out = Vec::new();
    // float8: raw random bytes already cover every pattern (NaN, ±inf, ±0, subnormals).
    if !dtype.is_float() || dtype.bits() == 8 {
        match dtype.size() {
            Some(size) => words
                .iter()
                .for_each(|w| out.extend_from_slice(&w.to_le_bytes()[..size])),
            None => {
                let bytes = dtype.storage_bytes(words.len()).unwrap_or(0);
                out.extend(words.iter().take(bytes).map(|w| *w as u8));
            }
        }
        return out;
    }
    let tiny = match dtype {
        DType::Float64 => f64::MIN_POSITIVE,
        DType::Float32 | DType::BFloat16 => f32::MIN_POSITIVE as f64,
        _ => 6.1e-5,
    };
    for &w in words {
        let mag = ((w >> 8) as f64 / (1u64 << 56) as f64) * 2.0 - 1.0;
        match w % 16 {
            0 => nan_bytes(dtype, w & 0x100 != 0, w >> 9, &mut out),
            1 => float_bytes(dtype, f64::INFINITY, &mut out),
            2 => float_bytes(dtype, f64::NEG_INFINITY, &mut out),
            3 => float_bytes(dtype, 0.0, &mut out),
            4 => float_bytes(dtype, -0.0, &mut out),
            5 => float_bytes(dtype, mag * tiny, &mut out),
            6 => float_bytes(dtype, mag * 6.0e4, &mut out),
            _ => float_bytes(dtype, mag * 100.0, &mut out),
        }
    }
    out
}

fn assert_close(what: &str, got: f64, want: f64, bound: f64) {
    if want.is_finite() && got.is_finite() {
        assert!(
            (got - want).abs() <= bound,
            "{what}: got {got:e}, reference {want:e}, bound {bound:e}"
        );
    } else {
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "{what}: got {got}, reference {want}"
        );
    }
}

/// Counts, extrema and NaN bits identical; sums equal up to summation-order rounding.
fn assert_matches(dtype: DType, data: &[u8], elems: usize, got: &Summary, want: &Summary) {
    let ctx = format!("{dtype} x{elems}");
    let counts = |s: &Summary| (s.count, s.nan, s.pos_inf, s.neg_inf, s.zero, s.pos, s.neg);
    assert_eq!(counts(got), counts(want), "{ctx}: counts");
    assert_eq!(got.max.to_bits(), want.max.to_bits(), "{ctx}: max");
    assert_eq!(got.min.to_bits(), want.min.to_bits(), "{ctx}: min");
    assert_eq!(
        got.first_nan.to_bits(),
        want.first_nan.to_bits(),
        "{ctx}: first_nan"
    );
    assert_eq!(
        got.last_nan.to_bits(),
        want.last_nan.to_bits(),
        "{ctx}: last_nan"
    );
    let (mut abs, mut sq) = (0.0f64, 0.0f64);
    for i in 0..elems {
        let v = reference::element_f64(dtype, data, i);
        if v.is_finite() {
            abs += v.abs();
            sq += v * v;
        }
    }
    let eps = 2.0 * (elems as f64 + 1.0) * f64::EPSILON;
    assert_close(
        &format!("{ctx}: sum"),
        got.sum,
        want.sum,
        eps * abs + 1e-300,
    );
    assert_close(
        &format!("{ctx}: sum_sq"),
        got.sum_sq,
        want.sum_sq,
        eps * sq + 1e-300,
    );
}

fn check_all_backends(dtype: DType, data: &[u8], elems: usize) {
    let want = summarize_reference(dtype, data, elems).expect("reference");
    for b in backends() {
        let got = summarize_with(b, dtype, data, elems).expect("kernel");
        match (&got, &want) {
            (Some(g), Some(w)) => assert_matches(dtype, data, elems, g, w),
            (None, None) => {}
            _ => panic!("{dtype} x{elems} {b:?}: {got:?} vs {want:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every real dtype, random lengths 0..5000, unaligned starts, all backends.
    #[test]
    fn kernels_match_reference(
        words in proptest::collection::vec(any::<u64>(), 0..5000),
        offset in 0usize..4,
    ) {
        for dtype in real() {
            let data = make(dtype, &words);
            let mut buf = vec![0xa5u8; offset];
            buf.extend_from_slice(&data);
            check_all_backends(dtype, &buf[offset..], words.len());
        }
    }

    /// Feeding element-aligned chunks gives the same statistics as one call.
    #[test]
    fn chunks_merge(
        words in proptest::collection::vec(any::<u64>(), 1..3000),
        cut in 0.0f64..1.0,
    ) {
        for dtype in real() {
            let data = make(dtype, &words);
            let elems = words.len();
            let per_byte = match dtype { DType::Int4 | DType::UInt4 => 2, DType::UInt1 => 8, _ => 1 };
            let unit = dtype.size().unwrap_or(1);
            let split_bytes = ((data.len() as f64 * cut) as usize / unit) * unit;
            let split_bytes = split_bytes.min((elems / per_byte) * unit);
            for b in backends() {
                let mut acc = Accumulator::with_backend(dtype, elems, b).expect("acc");
                acc.update(&data[..split_bytes]).expect("first chunk");
                acc.update(&data[split_bytes..]).expect("second chunk");
                let got = acc.finish().expect("finish").expect("non-empty");
                let want = summarize_reference(dtype, &data, elems).expect("ref").expect("non-empty");
                assert_matches(dtype, &data, elems, &got, &want);
            }
        }
    }
}

/// Lengths around every lane/step boundary, for every dtype, with specials at the edges.
#[test]
fn lane_boundaries() {
    let mut rng = Rng(7);
    for n in (0..140).chain([255, 256, 257, 1023, 1024, 1025, 4095, 4097, 8193]) {
        let mut words: Vec<u64> = (0..n).map(|_| rng.next()).collect();
        if n > 2 {
            words[0] = 0; // NaN for floats
            words[n - 1] = 0x100; // negative NaN
        }
        for dtype in real() {
            check_all_backends(dtype, &make(dtype, &words), n);
        }
    }
}

#[test]
fn mindspore_known_answers() {
    let g6 = |v: f64| format!("{:.5e}", v);
    for b in backends() {
        let s = summarize_with(b, DType::Float32, &f32_bytes(&[1., 2., 3., 4., 5., 6.]), 6)
            .unwrap()
            .unwrap();
        assert_eq!((s.min_value(), s.max_value()), (1.0, 6.0));
        assert_eq!(g6(s.l2norm()), "9.53939e0");
        let v: Vec<f32> = (7..=12).map(|v| v as f32).collect();
        let s = summarize_with(b, DType::Float32, &f32_bytes(&v), 6)
            .unwrap()
            .unwrap();
        assert_eq!(g6(s.l2norm()), "2.36432e1");
        let s = summarize_with(b, DType::Float32, &f32_bytes(&[1.0; 64]), 64)
            .unwrap()
            .unwrap();
        assert_eq!(s.l2norm(), 8.0);
        let bf: Vec<u8> = [1.0f32; 64]
            .iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect();
        let s = summarize_with(b, DType::BFloat16, &bf, 64)
            .unwrap()
            .unwrap();
        assert_eq!((s.l2norm(), s.avg(), s.pos), (8.0, 1.0, 64));
    }
}

#[test]
fn bool_and_int64_extremes() {
    for b in backends() {
        let s = summarize_with(b, DType::Bool, &[0, 1, 2, 0, 255], 5)
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.max, s.min, s.sum, s.zero, s.pos, s.neg),
            (1.0, 0.0, 3.0, 2, 3, 0)
        );
        let v = [i64::MIN, i64::MAX, 0, -1];
        let d: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let s = summarize_with(b, DType::Int64, &d, 4).unwrap().unwrap();
        assert_eq!((s.max, s.min), (2f64.powi(63), -(2f64.powi(63))));
        assert_eq!((s.zero, s.pos, s.neg), (1, 1, 2));
        let d: Vec<u8> = [u64::MAX, 0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let s = summarize_with(b, DType::UInt64, &d, 2).unwrap().unwrap();
        assert_eq!((s.max, s.min, s.zero), (u64::MAX as f64, 0.0, 1));
    }
}

#[test]
fn packed_types_ignore_padding() {
    for b in backends() {
        // int4 [-8, 7, -1] with a junk high nibble in the last byte.
        let s = summarize_with(b, DType::Int4, &[0x78, 0xff], 3)
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.min, s.max, s.sum, s.count, s.neg),
            (-8.0, 7.0, -2.0, 3, 2)
        );
        // uint1 1,0,1 then five padding bits that are set.
        let s = summarize_with(b, DType::UInt1, &[0b1011_1111], 3)
            .unwrap()
            .unwrap();
        assert_eq!((s.sum, s.zero, s.pos), (2.0, 1, 2));
        // uint4 [8, 7, 15] (zero-extended, unlike int4) with a junk high nibble.
        let s = summarize_with(b, DType::UInt4, &[0x78, 0xff], 3)
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.min, s.max, s.sum, s.count, s.neg, s.pos),
            (7.0, 15.0, 30.0, 3, 0, 3)
        );
    }
}

/// Statistics of float8 see the widened float32 values: e5m2 infinities and NaNs counted,
/// e4m3fn's top binade finite (448) and only `S.1111.111` NaN.
#[test]
fn float8_statistics_see_widened_values() {
    for b in backends() {
        // e5m2: +inf, -inf, NaN (0x7d), -NaN (0xff), 1.0 (0x3c), -2.0 (0xc0), -0.0, 57344 (0x7b)
        let e5 = [0x7c, 0xfc, 0x7d, 0xff, 0x3c, 0xc0, 0x80, 0x7b];
        let s = summarize_with(b, DType::Float8E5M2, &e5, 8)
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.count, s.nan, s.pos_inf, s.neg_inf, s.zero, s.pos, s.neg),
            (8, 2, 1, 1, 1, 3, 2),
            "{b:?}"
        );
        assert_eq!((s.max, s.min), (f64::INFINITY, f64::NEG_INFINITY));
        assert!(s.first_nan.is_nan() && s.last_nan.is_sign_negative());
        // Without the infinities (whose sum is NaN) the sum is exact.
        let s = summarize_with(b, DType::Float8E5M2, &e5[2..], 6)
            .unwrap()
            .unwrap();
        assert_eq!((s.sum, s.max, s.min), (1.0 - 2.0 + 57344.0, 57344.0, -2.0));
        // e4m3fn: 448 (0x7e), -448 (0xfe), NaN (0x7f), 0.5 (0x30), 2^-9 (0x01), 0x78 = 256
        let e4 = [0x7e, 0xfe, 0x7f, 0x30, 0x01, 0x78];
        let s = summarize_with(b, DType::Float8E4M3FN, &e4, 6)
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.count, s.nan, s.pos_inf, s.neg_inf, s.pos, s.neg),
            (6, 1, 0, 0, 4, 1),
            "{b:?}"
        );
        assert_eq!((s.max, s.min), (448.0, -448.0));
        assert_eq!(s.sum, 0.5 + 2f64.powi(-9) + 256.0);
        assert_eq!(
            s.sum_sq,
            2.0 * 448.0 * 448.0 + 0.25 + 2f64.powi(-18) + 65536.0
        );
    }
}

/// Statistics of the FNUZ float8 types see the widened values: no infinities, `0x80` the one
/// NaN (not a negative zero), bias one above e4m3fn / e5m2.
#[test]
fn float8_fnuz_statistics_see_widened_values() {
    for b in backends() {
        // e4m3fnuz: 240 (0x7f), -240 (0xff), NaN (0x80), 1.0 (0x40), 2^-10 (0x01), 0 (0x00)
        let e4 = [0x7f, 0xff, 0x80, 0x40, 0x01, 0x00];
        let s = summarize_with(b, DType::Float8E4M3FNUZ, &e4, 6)
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.count, s.nan, s.pos_inf, s.neg_inf, s.zero, s.pos, s.neg),
            (6, 1, 0, 0, 1, 3, 1),
            "{b:?}"
        );
        assert_eq!((s.max, s.min), (240.0, -240.0));
        assert_eq!(s.sum, 1.0 + 2f64.powi(-10));
        assert!(s.first_nan.is_nan() && s.first_nan.is_sign_negative());
        // e5m2fnuz: 57344 (0x7f), -1.0 (0xc0), NaN (0x80), 2^-17 (0x01)
        let e5 = [0x7f, 0xc0, 0x80, 0x01];
        let s = summarize_with(b, DType::Float8E5M2FNUZ, &e5, 4)
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.count, s.nan, s.pos_inf, s.neg_inf, s.zero, s.pos, s.neg),
            (4, 1, 0, 0, 0, 2, 1),
            "{b:?}"
        );
        assert_eq!((s.max, s.min), (57344.0, -1.0));
        assert_eq!(s.sum, 57344.0 - 1.0 + 2f64.powi(-17));
    }
}

#[test]
fn errors_and_empty() {
    assert_eq!(summarize(DType::Float32, &[], 0), Ok(None));
    assert_eq!(
        summarize(DType::Float32, &[0; 7], 2),
        Err(Error::LengthMismatch {
            expected: 8,
            actual: 7
        })
    );
    assert_eq!(
        summarize(DType::Complex64, &[0; 8], 1),
        Err(Error::Unsupported(DType::Complex64))
    );
    let mut acc = Accumulator::new(DType::Float32, 2).unwrap();
    assert_eq!(
        acc.update(&[0; 3]),
        Err(Error::Misaligned {
            len: 3,
            multiple: 4
        })
    );
    acc.update(&[0; 4]).unwrap();
    assert_eq!(
        acc.clone().finish(),
        Err(Error::LengthMismatch {
            expected: 8,
            actual: 4
        })
    );
    assert_eq!(
        acc.update(&[0; 8]),
        Err(Error::LengthMismatch {
            expected: 8,
            actual: 12
        })
    );
    let mut acc = Accumulator::new(DType::UInt1, 9).unwrap();
    assert_eq!(
        acc.update(&[0; 3]),
        Err(Error::LengthMismatch {
            expected: 2,
            actual: 3
        })
    );
}

/// The portable fallback and every vector backend agree exactly on counts and extrema over a
/// large tensor with specials (and on sums up to rounding).
#[test]
fn fallback_equals_dispatched() {
    let mut rng = Rng(11);
    let words: Vec<u64> = (0..100_003).map(|_| rng.next()).collect();
    for dtype in real() {
        let d = make(dtype, &words);
        let p = summarize_with(Backend::Portable, dtype, &d, words.len())
            .unwrap()
            .unwrap();
        for b in backends() {
            let a = summarize_with(b, dtype, &d, words.len()).unwrap().unwrap();
            assert_matches(dtype, &d, words.len(), &a, &p);
        }
    }
}

/// Accuracy as `statistic.csv` shows it: avg and l2norm printed with 6 significant digits
/// must match a compensated f64 reference on ≥ 99.9% of cells, over 10^4 random tensors of
/// f32/bf16/f16, half of them zero-mean (where cancellation amplifies rounding).
#[test]
fn accuracy() {
    fn two_sum(s: &mut (f64, f64), v: f64) {
        let t = s.0 + v;
        let e = if s.0.abs() >= v.abs() {
            (s.0 - t) + v
        } else {
            (v - t) + s.0
        };
        s.0 = t;
        s.1 += e;
    }
    let g6 = |v: f64| format!("{:.5e}", v);
    let mut rng = Rng(2026);
    let (mut cells, mut bad) = (0usize, 0usize);
    for t in 0..10_000 {
        let dtype = [DType::Float32, DType::BFloat16, DType::Float16][t % 3];
        let n = 1 + (rng.next() % 3000) as usize;
        let offset = if t % 2 == 0 { 0.0 } else { rng.unit() * 10.0 };
        let scale = 1.0 + rng.unit().abs() * 50.0;
        let mut data = Vec::new();
        for _ in 0..n {
            float_bytes(dtype, offset + rng.unit() * scale, &mut data);
        }
        let (mut sum, mut sq) = ((0.0, 0.0), (0.0, 0.0));
        for i in 0..n {
            let v = reference::element_f64(dtype, &data, i);
            two_sum(&mut sum, v);
            let p = v * v;
            two_sum(&mut sq, p);
            sq.1 += v.mul_add(v, -p);
        }
        let s = summarize(dtype, &data, n).unwrap().unwrap();
        let want_avg = (sum.0 + sum.1) / n as f64;
        let want_l2 = (sq.0 + sq.1).sqrt();
        cells += 2;
        bad += (g6(s.avg()) != g6(want_avg)) as usize;
        bad += (g6(s.l2norm()) != g6(want_l2)) as usize;
    }
    eprintln!("accuracy: {bad} of {cells} avg/l2norm cells differ in %g(6)");
    assert!(bad * 1000 <= cells, "{bad} of {cells} cells differ");
}

/// The fused form sees every byte once, in order, and gives the plain form's statistics.
#[test]
fn fused_chunks_cover_data_in_order() {
    let mut rng = Rng(5);
    let n = FUSE_CHUNK / 4 * 2 + 1234; // two full chunks and a partial one
    let words: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    for dtype in [DType::Float32, DType::Int4, DType::UInt1, DType::BFloat16] {
        let data = make(dtype, &words);
        let mut seen = Vec::new();
        let mut calls = 0;
        let got = summarize_fused(dtype, &data, n, |c| {
            seen.extend_from_slice(c);
            calls += 1;
        })
        .unwrap()
        .unwrap();
        assert_eq!(seen, data, "{dtype}");
        assert_eq!(calls, data.len().div_ceil(FUSE_CHUNK), "{dtype}");
        let want = summarize_reference(dtype, &data, n).unwrap().unwrap();
        assert_matches(dtype, &data, n, &got, &want);
    }
    let mut called = false;
    assert!(summarize_fused(DType::Float32, &[0; 5], 1, |_| called = true).is_err());
    assert!(!called);
}

/// Fused hashing gives the same digests as hashing separately, over several chunks.
#[test]
fn hashed_equals_separate() {
    use crate::hash::{Md5Stream, MsSha1, md5, ms_sha1};
    let mut rng = Rng(9);
    let n = FUSE_CHUNK / 2 + 77; // f32: three chunks
    let words: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    let data = make(DType::Float32, &words);
    let (mut m, mut s) = (Md5Stream::new(), MsSha1::new(DType::Float32, n));
    let got = summarize_hashed(DType::Float32, &data, n, Some(&mut m), Some(&mut s))
        .unwrap()
        .unwrap();
    assert_eq!(m.finish(), md5(&data));
    assert_eq!(s.finish(), ms_sha1(DType::Float32, &data, n));
    assert_eq!(got.count, n as u64);
    let only = summarize_hashed(DType::Float32, &data, n, None, None).unwrap();
    assert_eq!(only.map(|s| s.nan), Some(got.nan));
}

/// Float tensors without NaN take the unmasked fast pass (no rerun): it must match the
/// reference exactly too, with and without infinities.
#[test]
fn nan_free_fast_path() {
    let mut rng = Rng(13);
    for n in [1, 15, 16, 17, 31, 32, 33, 64, 100, 1000, 4099, 70_001] {
        for with_inf in [false, true] {
            let words: Vec<u64> = (0..n)
                .map(|_| {
                    let w = rng.next();
                    match w % 16 {
                        0 => w | 7,
                        1 | 2 if !with_inf => w | 7,
                        _ => w,
                    }
                })
                .collect();
            for dtype in [
                DType::Float16,
                DType::BFloat16,
                DType::Float32,
                DType::Float64,
            ] {
                let data = make(dtype, &words);
                let r = summarize_reference(dtype, &data, n).unwrap().unwrap();
                assert_eq!(r.nan, 0);
                check_all_backends(dtype, &data, n);
            }
        }
    }
}

#[test]
fn zero_extrema_keep_the_first_zero_sign_on_every_backend() {
    for (vals, max, min) in [
        (vec![-1.0f32, -0.0, 0.0, -2.0], -0.0f64, -2.0f64),
        (vec![-1.0, 0.0, -0.0], 0.0, -1.0),
        (vec![3.0, -0.0, 0.0, 1.0], 3.0, -0.0),
    ] {
        let mut v = vals.clone();
        for _ in 0..40 {
            v.extend(vals.iter().rev()); // many lanes see both zeros
        }
        let data: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        for b in backends() {
            let mut acc = Accumulator::with_backend(DType::Float32, v.len(), b).unwrap();
            acc.update(&data).unwrap();
            let s = acc.finish().unwrap().unwrap();
            assert_eq!(
                (s.max.to_bits(), s.min.to_bits()),
                (max.to_bits(), min.to_bits()),
                "{vals:?} {b:?}"
            );
        }
    }
}

/// Elements per 128-byte step of the widest kernel (AVX-512: two `zmm` loads).
fn step_elems(dtype: DType) -> usize {
    128 / dtype.size().expect("byte-sized dtype")
}

/// The vector kernels' dtypes.
const HOT: [DType; 3] = [DType::Float32, DType::Float16, DType::BFloat16];

/// One element of every kind the kernels treat specially.
fn specials(dtype: DType) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (neg, payload) in [(false, 0), (true, 0), (false, u64::MAX), (true, 0x55)] {
        let mut b = Vec::new();
        nan_bytes(dtype, neg, payload, &mut b);
        out.push(b);
    }
    let big = match dtype {
        DType::Float16 => 65504.0,
        DType::BFloat16 => 3.3e38,
        _ => f32::MAX as f64,
    };
    // The smallest subnormal (its bits: magnitude 1).
    let tiny = match dtype {
        DType::Float16 => 2f64.powi(-24),
        DType::BFloat16 => 2f64.powi(-133),
        _ => 2f64.powi(-149),
    };
    for (i, v) in [
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        big,
        -big,
        tiny,
        -tiny,
    ]
    .into_iter()
    .enumerate()
    {
        let mut b = Vec::new();
        float_bytes(dtype, v, &mut b);
        if i >= 6 {
            // Exactly the smallest subnormal, not rounded to zero.
            assert_eq!(reference::element_f64(dtype, &b, 0).abs(), tiny, "{dtype}");
        }
        out.push(b);
    }
    out
}

/// `n` ordinary values of `dtype` (both signs, no zero) from `rng`.
fn ordinary(dtype: DType, n: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..n {
        let v = rng.unit();
        float_bytes(dtype, if v == 0.0 { 0.5 } else { v * 100.0 }, &mut out);
    }
    out
}

/// A special value (NaN of both signs and payloads, ±inf, ±0, ±largest, ±smallest subnormal) at
/// every position of two steps and a tail, alone in ordinary data, on every backend.
#[test]
fn a_special_at_every_position_of_a_step() {
    let mut rng = Rng(17);
    for dtype in HOT {
        let e = dtype.size().unwrap();
        let n = 2 * step_elems(dtype) + step_elems(dtype) / 2 + 3;
        let base = ordinary(dtype, n, &mut rng);
        for sp in specials(dtype) {
            for pos in 0..n {
                let mut d = base.clone();
                d[pos * e..pos * e + e].copy_from_slice(&sp);
                check_all_backends(dtype, &d, n);
            }
        }
    }
}

/// Pairs of specials that interact: +inf with -inf (a NaN sum without a NaN element), +0 with
/// -0 (the sign of a zero extremum), two NaNs (first and last), at positions across steps.
#[test]
fn special_pairs_across_a_step() {
    for dtype in HOT {
        let e = dtype.size().unwrap();
        let s = step_elems(dtype);
        let n = 2 * s + 5;
        let sp = specials(dtype);
        // indices into `specials`: 0..4 NaNs, 4 +inf, 5 -inf, 6 +0, 7 -0
        let pairs = [
            (4, 5),
            (5, 4),
            (6, 7),
            (7, 6),
            (0, 1),
            (1, 3),
            (4, 4),
            (7, 7),
        ];
        for fill in [1.0f64, -1.0] {
            let mut base = Vec::new();
            (0..n).for_each(|_| float_bytes(dtype, fill, &mut base));
            for &(a, b) in &pairs {
                for i in (0..n).step_by(3) {
                    for j in [0, 1, s - 1, s, s + 1, 2 * s - 1, 2 * s, n - 1] {
                        if i == j {
                            continue;
                        }
                        let mut d = base.clone();
                        d[i * e..i * e + e].copy_from_slice(&sp[a]);
                        d[j * e..j * e + e].copy_from_slice(&sp[b]);
                        check_all_backends(dtype, &d, n);
                    }
                }
            }
        }
        // All zeros of one sign, then the other first: a zero maximum and minimum.
        for first in [6, 7] {
            let mut d = Vec::new();
            for i in 0..n {
                d.extend_from_slice(&sp[if i == n / 2 { 13 - first } else { first }]);
            }
            check_all_backends(dtype, &d, n);
        }
    }
}

/// Every tail length 0..step after 0, 1 and 2 whole steps, with a NaN or an infinity in the
/// tail itself (the masked tail loads of AVX-512, the scalar tails of the others).
#[test]
fn tails_of_every_length() {
    let mut rng = Rng(19);
    for dtype in HOT {
        let e = dtype.size().unwrap();
        let s = step_elems(dtype);
        let sp = specials(dtype);
        for whole in 0..3 {
            for t in 0..s {
                let n = whole * s + t;
                let d = ordinary(dtype, n, &mut rng);
                check_all_backends(dtype, &d, n);
                if t > 0 {
                    for k in [0, 1, 4, 5, 7] {
                        for at in [whole * s, n - 1] {
                            let mut d = d.clone();
                            d[at * e..at * e + e].copy_from_slice(&sp[k]);
                            check_all_backends(dtype, &d, n);
                        }
                    }
                }
            }
        }
    }
}

/// Every start offset within a cache line and beyond, element-aligned or not.
#[test]
fn unaligned_starts() {
    let mut rng = Rng(23);
    let words: Vec<u64> = (0..1000).map(|_| rng.next()).collect();
    for dtype in real() {
        let data = make(dtype, &words);
        for offset in 0..72 {
            let mut buf = vec![0x5au8; offset];
            buf.extend_from_slice(&data);
            buf.extend_from_slice(&[0x7f; 8]); // junk after the end must not be read
            check_all_backends(dtype, &buf[offset..offset + data.len()], words.len());
        }
    }
}

/// Chunks of every size fed one after another give the whole tensor's statistics: counts,
/// extrema and NaN bits exactly (sums up to rounding), on every backend.
#[test]
fn chunked_feeding_equals_whole() {
    let mut rng = Rng(29);
    let n = 5000;
    let words: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    for dtype in real().filter(|d| d.size().is_some()) {
        let data = make(dtype, &words);
        let e = dtype.size().unwrap();
        for b in backends() {
            let whole = summarize_with(b, dtype, &data, n).unwrap().unwrap();
            for chunk in [1, 3, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 1000] {
                let mut acc = Accumulator::with_backend(dtype, n, b).unwrap();
                for c in data.chunks(chunk * e) {
                    acc.update(c).unwrap();
                }
                let got = acc.finish().unwrap().unwrap();
                assert_matches(dtype, &data, n, &got, &whole);
                let want = summarize_reference(dtype, &data, n).unwrap().unwrap();
                assert_matches(dtype, &data, n, &got, &want);
            }
        }
    }
}

/// The masked tail loads read nothing past the tensor's last byte: data placed right before a
/// page the process may not read (and right after one) gives the reference's statistics.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn no_read_past_the_end() {
    use core::ffi::c_void;
    unsafe extern "C" {
        fn mmap(
            addr: *mut c_void,
            len: usize,
            prot: i32,
            flags: i32,
            fd: i32,
            off: i64,
        ) -> *mut c_void;
        fn mprotect(addr: *mut c_void, len: usize, prot: i32) -> i32;
        fn munmap(addr: *mut c_void, len: usize) -> i32;
    }
    const PAGE: usize = 4096;
    const READ_WRITE: i32 = 3;
    const PRIVATE_ANONYMOUS: i32 = 0x02 | 0x20;
    // SAFETY: an anonymous private mapping of 3 pages at an address the kernel chooses.
    let base = unsafe {
        mmap(
            core::ptr::null_mut(),
            3 * PAGE,
            READ_WRITE,
            PRIVATE_ANONYMOUS,
            -1,
            0,
        )
    };
    assert!(!base.is_null() && base as isize != -1, "mmap failed");
    let base = base as *mut u8;
    // SAFETY: the first and last page lie inside the mapping just made; PROT_NONE (0).
    unsafe {
        assert_eq!(mprotect(base as *mut c_void, PAGE, 0), 0);
        assert_eq!(mprotect(base.add(2 * PAGE) as *mut c_void, PAGE, 0), 0);
    }
    // SAFETY: the middle page is mapped readable and writable and nothing else refers to it.
    let page = unsafe { core::slice::from_raw_parts_mut(base.add(PAGE), PAGE) };
    let mut rng = Rng(31);
    for dtype in HOT.into_iter().chain(INTS) {
        let e = dtype.size().unwrap();
        for n in (1..300).chain([PAGE / e - 1, PAGE / e]) {
            let bytes = n * e;
            let words: Vec<u64> = (0..n).map(|_| rng.next()).collect();
            let data = make(dtype, &words);
            // Ending at the guard page after it, then starting at the one before it.
            let end = PAGE - bytes;
            page[end..].copy_from_slice(&data);
            check_all_backends(dtype, &page[end..], n);
            page[..bytes].copy_from_slice(&data);
            check_all_backends(dtype, &page[..bytes], n);
        }
    }
    // SAFETY: unmaps exactly the mapping made above; `page` is not used after this.
    unsafe { assert_eq!(munmap(base as *mut c_void, 3 * PAGE), 0) };
}

/// The integer dtypes with vector kernels (values widened to `i32` lanes).
const INTS: [DType; 6] = [
    DType::Bool,
    DType::Int8,
    DType::UInt8,
    DType::Int16,
    DType::UInt16,
    DType::Int32,
];

/// Integers: every tail length after 0, 1 and 2 whole steps, over data that is all negative, all
/// positive or mixed (so that a zero let into the extrema by a tail's unused lanes shows), and
/// each dtype's extremes at every position of two steps and a tail.
#[test]
fn integer_tails_and_extremes() {
    let mut rng = Rng(37);
    for dtype in INTS {
        let e = dtype.size().unwrap();
        let s = step_elems(dtype);
        // Bytes of one element: the value's low `e` bytes (two's complement, little-endian).
        let el = |v: i64| v.to_le_bytes()[..e].to_vec();
        let (lo, hi) = match dtype {
            DType::Bool => (1, 255), // bool: any nonzero byte is true
            DType::Int8 => (i8::MIN as i64, i8::MAX as i64),
            DType::UInt8 => (0, u8::MAX as i64),
            DType::Int16 => (i16::MIN as i64, i16::MAX as i64),
            DType::UInt16 => (0, u16::MAX as i64),
            _ => (i32::MIN as i64, i32::MAX as i64),
        };
        for whole in 0..3 {
            for t in 0..s {
                let n = whole * s + t;
                for sign in [-1i64, 1, 0] {
                    let mut d = Vec::new();
                    for _ in 0..n {
                        let r = (rng.next() % 100) as i64 + 1;
                        let v = match sign {
                            0 => r - 50,
                            _ => sign * r,
                        };
                        d.extend(el(v.clamp(lo, hi)));
                    }
                    check_all_backends(dtype, &d, n);
                }
            }
        }
        let n = 2 * s + s / 2 + 3;
        let base: Vec<u8> = (0..n).flat_map(|i| el((i % 7) as i64 - 3)).collect();
        for v in [lo, hi, 0, -1, 1] {
            for pos in 0..n {
                let mut d = base.clone();
                d[pos * e..pos * e + e].copy_from_slice(&el(v));
                check_all_backends(dtype, &d, n);
            }
        }
    }
}

/// One chunk far larger than the kernels' counter flush interval (AVX-512 counts `f16`/`bf16`
/// signs in `u16` lanes): the counts stay exact.
#[test]
fn counters_survive_a_huge_chunk() {
    let n = 5 << 20; // 10 MiB of a 2-byte dtype, 20 MiB of f32
    for dtype in [DType::Float16, DType::BFloat16, DType::Float32, DType::Int8] {
        // 1, -1, 0, 1 repeated: pos n/2, neg n/4, zero n/4.
        let mut one = Vec::new();
        for v in [1.0, -1.0, 0.0, 1.0] {
            match dtype {
                DType::Int8 => one.push(v as i8 as u8),
                _ => float_bytes(dtype, v, &mut one),
            }
        }
        let data = one.repeat(n / 4);
        for b in backends() {
            let mut acc = Accumulator::with_backend(dtype, n, b).unwrap();
            acc.update(&data).unwrap();
            let s = acc.finish().unwrap().unwrap();
            let n = n as u64;
            assert_eq!(
                (s.pos, s.neg, s.zero, s.nan),
                (n / 2, n / 4, n / 4, 0),
                "{dtype} {b:?}"
            );
            assert_eq!(
                (s.sum, s.sum_sq, s.max, s.min),
                ((n / 4) as f64, (3 * n / 4) as f64, 1.0, -1.0)
            );
        }
    }
}

/// `f16`/`bf16` extrema that the AVX-512 fast pass takes on the 16-bit bits (signed maximum,
/// unsigned maximum and minimum): data all negative (the maximum is the smallest magnitude),
/// all positive and mixed, with a value of each kind (±largest, ±smallest subnormal, ±0, near
/// ±1) at every position of two loop iterations, an odd step and a tail.
#[test]
fn half_extrema_on_bits_every_sign_mix() {
    let mut rng = Rng(41);
    for dtype in [DType::Float16, DType::BFloat16] {
        let e = dtype.size().unwrap();
        let s = step_elems(dtype);
        let n = 5 * s + s / 2 + 3;
        let sp = specials(dtype);
        // indices into `specials`: 4 +inf, 5 -inf, 6 +0, 7 -0, 8 big, 9 -big, 10 tiny, 11 -tiny
        let mut extremes: Vec<Vec<u8>> = (4..12).map(|i| sp[i].clone()).collect();
        for v in [0.5f64, -0.5, 1000.0, -1000.0] {
            let mut b = Vec::new();
            float_bytes(dtype, v, &mut b);
            extremes.push(b);
        }
        for sign in [-1.0f64, 1.0, 0.0] {
            let mut base = Vec::new();
            for _ in 0..n {
                let m = 1.0 + 99.0 * rng.unit().abs();
                let v = if sign == 0.0 {
                    m * rng.unit().signum()
                } else {
                    sign * m
                };
                float_bytes(dtype, v, &mut base);
            }
            check_all_backends(dtype, &base, n);
            for x in &extremes {
                for pos in 0..n {
                    let mut d = base.clone();
                    d[pos * e..pos * e + e].copy_from_slice(x);
                    check_all_backends(dtype, &d, n);
                }
            }
        }
    }
}
