//! The precision policy of statistics (`device_stat_precision_mode`), modelled on the host so
//! that device backends can be tested against it.
//!
//! MindSpore computes device statistics with reduction kernels (spec §7): `max`/`min` return the
//! input dtype; `avg` and `l2norm` return **float32 in `high` mode** and **the input dtype in
//! `low` mode**, which can overflow (fp16 `40000 + 40000` is `inf`). [`device_statistics`]
//! reproduces those results on the host with a defined evaluation order:
//!
//! - `high`: sums and sums of squares accumulate in `f64`, element by element in memory
//!   order; the mean (`sum / n`) and the norm (`sqrt(sum_sq)`) are computed in `f64` and
//!   rounded once to `f32` (the output dtype). "f32 or wider" accumulation: every device
//!   backend that accumulates in f32 with a tree order agrees with it to f32 rounding unless the
//!   f32 accumulation itself overflows.
//! - `low`, float inputs: one accumulator **of the source dtype**, updated in memory order with
//!   round-to-nearest-even after every step: `acc = round(acc + x)` for the mean and
//!   `acc = round(acc + round(x * x))` for the norm (f16/bf16 steps are evaluated in f32 and then
//!   rounded, which is exactly the correctly rounded f16/bf16 result because f32 has more than
//!   `2p + 2` bits). The mean is `round(acc / n)` (the division in f64, rounded to f32 and then
//!   to the source dtype); the norm is `round(sqrt(acc))`.
//! - `low`, integer inputs (avg only): the exact sum divided by `n` with truncation toward zero,
//!   as an integer of the source dtype. This is an assumption (spec §11.7: the exact Ascend
//!   low-precision behaviour is unverified).
//!
//! Host statistics ([`dump_core::Summary`]) are not affected by the policy: they always follow
//! MindSpore's host semantics in `f64`.
//!
//! NaN: every reduction propagates NaN (a tensor with a NaN has NaN max, min, avg and l2norm),
//! the first NaN in memory order giving the value (and so the `nan`/`-nan` text).

use crate::{Category, Error, category::echo};
use dump_core::{DType, stats::pin_generated_nan};

/// `device_stat_precision_mode`: in which dtype device `avg` and `l2norm` accumulate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Precision {
    /// `"high"` (MindSpore's default): f32 or wider.
    #[default]
    High,
    /// `"low"`: the source dtype (may overflow to `inf` for fp16).
    Low,
}

impl Precision {
    /// Parses `"high"` or `"low"` (exactly, like MindSpore).
    pub fn parse(s: &str) -> Result<Precision, Error> {
        match s {
            "high" => Ok(Precision::High),
            "low" => Ok(Precision::Low),
            _ => Err(Error::UnknownPrecision { name: echo(s) }),
        }
    }

    /// The config spelling.
    pub const fn name(self) -> &'static str {
        match self {
            Precision::High => "high",
            Precision::Low => "low",
        }
    }
}

impl core::str::FromStr for Precision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Precision::parse(s)
    }
}

impl core::fmt::Display for Precision {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// One device-statistics cell: the value of a 0-d result tensor, or `null` when the kernel
/// does not support the dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum DeviceValue {
    /// Unsupported dtype for this statistic: the text `null`.
    Null,
    /// A floating-point result (already rounded to its output dtype); printed with `%g`.
    Float(f64),
    /// An integer result; printed in decimal.
    Int(i64),
    /// A bool result; printed `True` / `False`.
    Bool(bool),
}

impl core::fmt::Display for DeviceValue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            DeviceValue::Null => f.write_str("null"),
            DeviceValue::Float(v) => f.write_str(dump_core::fmt::g(v).as_str()),
            DeviceValue::Int(v) => write!(f, "{v}"),
            DeviceValue::Bool(true) => f.write_str("True"),
            DeviceValue::Bool(false) => f.write_str("False"),
        }
    }
}

/// The four device statistics of one tensor (spec §7).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DeviceStats {
    /// `Max` reduction, in the input dtype.
    pub max: DeviceValue,
    /// `Min` reduction, in the input dtype.
    pub min: DeviceValue,
    /// `MeanExt` over all axes.
    pub avg: DeviceValue,
    /// `Norm` (p = 2).
    pub l2norm: DeviceValue,
}

impl DeviceStats {
    /// All four `null` (a tensor whose dtype is "none").
    pub const NULL: DeviceStats = DeviceStats {
        max: DeviceValue::Null,
        min: DeviceValue::Null,
        avg: DeviceValue::Null,
        l2norm: DeviceValue::Null,
    };

    /// The cell of column `c`; host-only categories give [`Error::NotADeviceCategory`].
    pub fn get(&self, c: Category) -> Result<DeviceValue, Error> {
        match c {
            Category::Max => Ok(self.max),
            Category::Min => Ok(self.min),
            Category::Avg => Ok(self.avg),
            Category::L2Norm => Ok(self.l2norm),
            other => Err(Error::NotADeviceCategory(other)),
        }
    }
}

/// `true` when the device `Max`/`Min` kernels support `dtype` under `precision`.
pub const fn device_supports_minmax(dtype: DType, precision: Precision) -> bool {
    match dtype {
        DType::BFloat16
        | DType::Float16
        | DType::Float32
        | DType::Float64
        | DType::Int8
        | DType::UInt8
        | DType::Int16
        | DType::Int32
        | DType::Int64 => true,
        DType::Bool => matches!(precision, Precision::High),
        _ => false,
    }
}

/// `true` when the device mean kernel supports `dtype`.
pub const fn device_supports_avg(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::BFloat16
            | DType::Float16
            | DType::Float32
            | DType::Float64
            | DType::Int8
            | DType::UInt8
            | DType::Int16
            | DType::Int32
            | DType::Int64
    )
}

/// `true` when the device norm kernel supports `dtype`.
pub const fn device_supports_l2norm(dtype: DType) -> bool {
    matches!(dtype, DType::BFloat16 | DType::Float16 | DType::Float32)
}

/// Rounds an f32 to the precision of a float dtype (round to nearest, ties to even).
fn round_f32(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::Float16 => half::f16::from_f32(v).to_f32(),
        DType::BFloat16 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// Element `i` of a float or integer buffer, read exactly: floats as f64, integers as i64.
enum Elem {
    F(f64),
    I(i64),
}

fn elem(dtype: DType, data: &[u8], i: usize) -> Elem {
    fn le<const N: usize>(data: &[u8], i: usize) -> [u8; N] {
        let mut b = [0u8; N];
        b.copy_from_slice(&data[i * N..i * N + N]);
        b
    }
    match dtype {
        DType::Bool => Elem::I(i64::from(data[i] != 0)),
        DType::Int8 => Elem::I(i64::from(data[i] as i8)),
        DType::UInt8 => Elem::I(i64::from(data[i])),
        DType::Int16 => Elem::I(i64::from(i16::from_le_bytes(le(data, i)))),
        DType::Int32 => Elem::I(i64::from(i32::from_le_bytes(le(data, i)))),
        DType::Int64 => Elem::I(i64::from_le_bytes(le(data, i))),
        DType::Float16 => Elem::F(half::f16::from_le_bytes(le(data, i)).to_f64()),
        DType::BFloat16 => Elem::F(half::bf16::from_le_bytes(le(data, i)).to_f64()),
        DType::Float32 => Elem::F(f64::from(f32::from_le_bytes(le(data, i)))),
        DType::Float64 => Elem::F(f64::from_le_bytes(le(data, i))),
        // Callers only pass the dtypes above.
        _ => Elem::F(f64::NAN),
    }
}

/// The device statistics MindSpore would report for a tensor under `precision`, computed on
/// the host in the order documented at the [module level](self).
///
/// `data` holds `elems` little-endian elements of `dtype`. Returns `Ok(None)` for an empty
/// tensor (MindSpore writes no row). Unsupported dtype/statistic pairs give
/// [`DeviceValue::Null`]; a length mismatch gives [`Error::Core`].
pub fn device_statistics(
    dtype: DType,
    data: &[u8],
    elems: usize,
    precision: Precision,
) -> Result<Option<DeviceStats>, Error> {
    dtype.check_len(data.len(), elems)?;
    if elems == 0 {
        return Ok(None);
    }
    let mut out = DeviceStats::NULL;
    // No device kernel for the dtype (float8, packed, complex, wide unsigned): every cell null.
    if !device_supports_minmax(dtype, precision) {
        return Ok(Some(out));
    }
    if dtype.is_float() {
        float_stats(dtype, data, elems, precision, &mut out);
    } else {
        int_stats(dtype, data, elems, precision, &mut out);
    }
    Ok(Some(out))
}

fn float_stats(dtype: DType, data: &[u8], n: usize, precision: Precision, out: &mut DeviceStats) {
    let mut first_nan = None;
    let (mut max, mut min) = (f64::NEG_INFINITY, f64::INFINITY);
    let (mut sum, mut sum_sq) = (0.0f64, 0.0f64);
    // Low-precision accumulators (f16/bf16/f32 evaluate in f32; f64 in `sum` above).
    let (mut acc, mut acc_sq) = (0.0f32, 0.0f32);
    for i in 0..n {
        let Elem::F(v) = elem(dtype, data, i) else {
            continue;
        };
        if v.is_nan() && first_nan.is_none() {
            first_nan = Some(v);
        }
        max = max.max(v);
        min = min.min(v);
        sum += v;
        sum_sq += v * v;
        if dtype != DType::Float64 {
            let x = v as f32;
            acc = round_f32(dtype, acc + x);
            acc_sq = round_f32(dtype, acc_sq + round_f32(dtype, x * x));
        }
    }
    let nf = n as f64;
    let (avg, l2) = match precision {
        Precision::High => (
            f64::from((sum / nf) as f32),
            f64::from(libm::sqrt(sum_sq) as f32),
        ),
        Precision::Low if dtype == DType::Float64 => (sum / nf, libm::sqrt(sum_sq)),
        Precision::Low => (
            f64::from(round_f32(dtype, (f64::from(acc) / nf) as f32)),
            f64::from(round_f32(dtype, libm::sqrtf(acc_sq))),
        ),
    };
    // A NaN element is reported as it is; a NaN the sums made (inf + -inf) as x86 makes it.
    let nan_or = |v: f64| DeviceValue::Float(first_nan.unwrap_or(pin_generated_nan(v)));
    out.max = nan_or(max);
    out.min = nan_or(min);
    out.avg = nan_or(avg);
    out.l2norm = if device_supports_l2norm(dtype) {
        nan_or(l2)
    } else {
        DeviceValue::Null
    };
}

fn int_stats(dtype: DType, data: &[u8], n: usize, precision: Precision, out: &mut DeviceStats) {
    let (mut max, mut min, mut sum) = (i64::MIN, i64::MAX, 0i128);
    for i in 0..n {
        if let Elem::I(v) = elem(dtype, data, i) {
            max = max.max(v);
            min = min.min(v);
            sum += i128::from(v);
        }
    }
    if dtype == DType::Bool {
        out.max = DeviceValue::Bool(max != 0);
        out.min = DeviceValue::Bool(min != 0);
        return;
    }
    out.max = DeviceValue::Int(max);
    out.min = DeviceValue::Int(min);
    if device_supports_avg(dtype) {
        out.avg = match precision {
            Precision::High => DeviceValue::Float(f64::from((sum as f64 / n as f64) as f32)),
            // |sum / n| <= max(|min|, |max|), so the quotient fits i64.
            Precision::Low => DeviceValue::Int((sum / n as i128) as i64),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16_bytes(v: &[f32]) -> Vec<u8> {
        v.iter()
            .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
            .collect()
    }

    fn texts(s: &DeviceStats) -> [String; 4] {
        [s.max, s.min, s.avg, s.l2norm].map(|v| v.to_string())
    }

    fn dev(dtype: DType, data: &[u8], n: usize, p: Precision) -> DeviceStats {
        device_statistics(dtype, data, n, p).unwrap().unwrap()
    }

    #[test]
    fn parse_precision() {
        assert_eq!(Precision::parse("high"), Ok(Precision::High));
        assert_eq!(Precision::parse("low"), Ok(Precision::Low));
        assert_eq!(Precision::default(), Precision::High);
        let e = Precision::parse("High").unwrap_err();
        assert_eq!(
            e.to_string(),
            "'device_stat_precision_mode' only supports 'high' or 'low', but got: High"
        );
    }

    /// spec §10, test_e2e_statistic: Add of fp16 [40000 x3] + [40000 x3].
    #[test]
    fn fp16_40000_high_vs_low() {
        let x = f16_bytes(&[40000.0; 3]);
        let high = dev(DType::Float16, &x, 3, Precision::High);
        let low = dev(DType::Float16, &x, 3, Precision::Low);
        assert_eq!(texts(&high), ["40000", "40000", "40000", "69282"]);
        // 40000 + 40000 and 40000^2 overflow fp16 (max 65504).
        assert_eq!(texts(&low), ["40000", "40000", "inf", "inf"]);
        // The output x + y = [inf x3] in fp16: inf in both modes.
        let out = f16_bytes(&[f32::INFINITY; 3]);
        for p in [Precision::High, Precision::Low] {
            assert_eq!(
                texts(&dev(DType::Float16, &out, 3, p)),
                ["inf", "inf", "inf", "inf"]
            );
        }
    }

    /// spec §10: [1,2,inf]+[-inf,2,-10], [1,2,3]+[2,2,-10], all +inf, all -inf.
    #[test]
    fn fp16_spec_cases() {
        let case = |v: &[f32], p| texts(&dev(DType::Float16, &f16_bytes(v), v.len(), p));
        let inf = f32::INFINITY;
        for p in [Precision::High, Precision::Low] {
            assert_eq!(case(&[1.0, 2.0, inf], p), ["inf", "1", "inf", "inf"]);
            assert_eq!(case(&[-inf, 2.0, -10.0], p), ["2", "-inf", "-inf", "inf"]);
            assert_eq!(case(&[inf; 3], p), ["inf", "inf", "inf", "inf"]);
            assert_eq!(case(&[-inf; 3], p), ["-inf", "-inf", "-inf", "inf"]);
        }
        // l2norm of [2,2,-10] = sqrt(108): f32 in high mode, fp16 (10.390625) in low mode.
        assert_eq!(
            case(&[2.0, 2.0, -10.0], Precision::High),
            ["2", "-10", "-2", "10.3923"]
        );
        assert_eq!(
            case(&[2.0, 2.0, -10.0], Precision::Low),
            ["2", "-10", "-2", "10.3906"]
        );
        // [1,2,3]+[2,2,-10] = [3,4,-7].
        assert_eq!(
            case(&[3.0, 4.0, -7.0], Precision::High),
            ["4", "-7", "0", "8.60233"]
        );
        // fp16 sqrt(74) = 8.6015625 in low mode: the result keeps the source dtype.
        assert_eq!(case(&[3.0, 4.0, -7.0], Precision::Low)[3], "8.60156");
    }

    #[test]
    fn infinities_of_both_signs_average_to_the_x86_nan_on_every_cpu() {
        let inf = f32::INFINITY;
        for p in [Precision::High, Precision::Low] {
            let s = dev(DType::Float16, &f16_bytes(&[inf, 1.0, -inf]), 3, p);
            let DeviceValue::Float(avg) = s.avg else {
                panic!("{p}: avg {:?}", s.avg)
            };
            assert_eq!(
                avg.to_bits(),
                dump_core::stats::GENERATED_NAN.to_bits(),
                "{p}"
            );
            assert_eq!(texts(&s)[2], "-nan", "{p}");
        }
    }

    #[test]
    fn low_mode_rounds_every_step() {
        // 2048 + 1 is not representable in fp16: a sequential fp16 sum of ones stalls at 2048.
        let ones = f16_bytes(&[1.0; 4096]);
        let low = dev(DType::Float16, &ones, 4096, Precision::Low);
        assert_eq!(low.avg, DeviceValue::Float(0.5));
        let high = dev(DType::Float16, &ones, 4096, Precision::High);
        assert_eq!(high.avg, DeviceValue::Float(1.0));
        assert_eq!(high.l2norm, DeviceValue::Float(64.0));
        // bf16 keeps 8 bits: 256 + 1 rounds back to 256.
        let b: Vec<u8> = (0..512)
            .flat_map(|_| half::bf16::from_f32(1.0).to_le_bytes())
            .collect();
        assert_eq!(
            dev(DType::BFloat16, &b, 512, Precision::Low).avg,
            DeviceValue::Float(0.5)
        );
        // f32 low mode: 2^24 + 1 = 2^24.
        let f: Vec<u8> = [16777216.0f32, 1.0, 1.0, 1.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let low = dev(DType::Float32, &f, 4, Precision::Low);
        assert_eq!(low.avg, DeviceValue::Float(4194304.0));
        let high = dev(DType::Float32, &f, 4, Precision::High);
        // (2^24 + 3) / 4 = 4194304.75, rounded to f32 (ulp 0.5, tie to even).
        assert_eq!(high.avg, DeviceValue::Float(4194305.0));
    }

    #[test]
    fn dtype_support_and_value_text() {
        let b = [1u8, 0, 1];
        let hi = dev(DType::Bool, &b, 3, Precision::High);
        assert_eq!(texts(&hi), ["True", "False", "null", "null"]);
        let lo = dev(DType::Bool, &b, 3, Precision::Low);
        assert_eq!(texts(&lo), ["null", "null", "null", "null"]);
        let i8s = [0xffu8, 5, 3];
        assert_eq!(
            texts(&dev(DType::Int8, &i8s, 3, Precision::High)),
            ["5", "-1", "2.33333", "null"]
        );
        assert_eq!(
            texts(&dev(DType::Int8, &i8s, 3, Precision::Low)),
            ["5", "-1", "2", "null"]
        );
        let f64s: Vec<u8> = [1.5f64, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            texts(&dev(DType::Float64, &f64s, 2, Precision::High)),
            ["1.5", "-2", "-0.25", "null"]
        );
        let u32s = [0u8; 8];
        assert_eq!(
            texts(&dev(DType::UInt32, &u32s, 2, Precision::High)),
            ["null", "null", "null", "null"]
        );
        assert_eq!(
            device_statistics(DType::Float32, &[], 0, Precision::High),
            Ok(None)
        );
        assert!(device_statistics(DType::Float32, &[0; 5], 2, Precision::High).is_err());
        assert_eq!(
            DeviceStats::NULL.get(Category::Count),
            Err(Error::NotADeviceCategory(Category::Count))
        );
    }

    #[test]
    fn nan_propagates_with_its_sign() {
        let neg_nan = f32::from_bits(0xffc0_0000);
        let v: Vec<u8> = [1.0f32, neg_nan, 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let s = dev(DType::Float32, &v, 3, Precision::High);
        assert_eq!(texts(&s), ["-nan", "-nan", "-nan", "-nan"]);
    }
}
