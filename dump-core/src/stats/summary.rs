//! [`Summary`]: the one mergeable statistics record every backend produces.

/// One-pass statistics of a tensor (or of a part of one: partials [`merge`](Summary::merge)).
///
/// Host kernels, CUDA, Ascend and device agents all produce this type, and `dump-stats`
/// formats it. Semantics follow MindSpore's host statistics:
/// - every element counts in `count`; NaN elements count only in `nan`;
/// - `zero` counts `±0.0`; `pos` counts `v > 0` (including `+inf`), `neg` counts `v < 0`
///   (including `-inf`; `-0.0` is zero, not negative);
/// - `max`, `min`, `sum` and `sum_sq` cover the non-NaN elements, in `f64`;
/// - any NaN makes [`max_value`](Summary::max_value), [`min_value`](Summary::min_value),
///   [`avg`](Summary::avg) and [`l2norm`](Summary::l2norm) NaN (keeping the sign of the NaN, so
///   that `%g` prints `nan` or `-nan` as MindSpore does).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Summary {
    /// Number of elements.
    pub count: u64,
    /// Largest non-NaN value (`-inf` when there is none).
    pub max: f64,
    /// Smallest non-NaN value (`+inf` when there is none).
    pub min: f64,
    /// Sum of the non-NaN values.
    pub sum: f64,
    /// Sum of the squares of the non-NaN values.
    pub sum_sq: f64,
    /// Number of NaN elements.
    pub nan: u64,
    /// Number of `+inf` elements.
    pub pos_inf: u64,
    /// Number of `-inf` elements.
    pub neg_inf: u64,
    /// Number of `±0.0` elements.
    pub zero: u64,
    /// Number of elements `> 0` (including `+inf`).
    pub pos: u64,
    /// Number of elements `< 0` (including `-inf`).
    pub neg: u64,
    /// The first NaN seen (its sign decides `nan` / `-nan` of avg and l2norm); `0.0` if none.
    pub first_nan: f64,
    /// The last NaN seen (its sign decides `nan` / `-nan` of max and min); `0.0` if none.
    pub last_nan: f64,
}

/// The NaN an x86-64 CPU produces for an invalid operation such as `inf + (-inf)`: SSE's
/// "default NaN", sign bit set, printed `-nan`. AArch64 and RISC-V produce a positive NaN
/// (`nan`) instead. MindSpore's reference output comes from x86 builds, and opdump reports this
/// NaN on every machine, so that the same tensor gives the same `statistic.csv` everywhere.
pub const GENERATED_NAN: f64 = f64::from_bits(0xfff8_0000_0000_0000);

/// `v`, or [`GENERATED_NAN`] if `v` is a NaN that arithmetic made (not one read from the
/// tensor: callers report those as they are).
#[inline]
pub fn pin_generated_nan(v: f64) -> f64 {
    if v.is_nan() { GENERATED_NAN } else { v }
}

impl Default for Summary {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl Summary {
    /// The identity of [`merge`](Summary::merge): no elements.
    pub const EMPTY: Summary = Summary {
        count: 0,
        max: f64::NEG_INFINITY,
        min: f64::INFINITY,
        sum: 0.0,
        sum_sq: 0.0,
        nan: 0,
        pos_inf: 0,
        neg_inf: 0,
        zero: 0,
        pos: 0,
        neg: 0,
        first_nan: 0.0,
        last_nan: 0.0,
    };

    /// Adds one value (the scalar reference path; kernels produce the same result faster).
    #[inline]
    pub fn push(&mut self, v: f64) {
        self.count += 1;
        if v.is_nan() {
            if self.nan == 0 {
                self.first_nan = v;
            }
            self.last_nan = v;
            self.nan += 1;
            return;
        }
        self.sum += v;
        self.sum_sq += v * v;
        if v > self.max {
            self.max = v;
        }
        if v < self.min {
            self.min = v;
        }
        if v == 0.0 {
            self.zero += 1;
        } else if v > 0.0 {
            self.pos += 1;
            self.pos_inf += (v == f64::INFINITY) as u64;
        } else {
            self.neg += 1;
            self.neg_inf += (v == f64::NEG_INFINITY) as u64;
        }
    }

    /// Combines a partial that covers the elements *after* this one's.
    ///
    /// Counts, sums and extrema combine exactly; the order only decides which NaN is "first"
    /// and "last" and the rounding of `sum`/`sum_sq`.
    #[inline]
    pub fn merge(&mut self, later: &Summary) {
        if later.count == 0 {
            return;
        }
        if self.nan == 0 {
            self.first_nan = later.first_nan;
        }
        if later.nan != 0 {
            self.last_nan = later.last_nan;
        }
        self.count += later.count;
        self.max = if later.max > self.max {
            later.max
        } else {
            self.max
        };
        self.min = if later.min < self.min {
            later.min
        } else {
            self.min
        };
        self.sum += later.sum;
        self.sum_sq += later.sum_sq;
        self.nan += later.nan;
        self.pos_inf += later.pos_inf;
        self.neg_inf += later.neg_inf;
        self.zero += later.zero;
        self.pos += later.pos;
        self.neg += later.neg;
    }

    /// `true` when no element was seen (an empty tensor has no statistics).
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The maximum, or the (last) NaN if the tensor holds any NaN.
    pub fn max_value(&self) -> f64 {
        if self.nan != 0 {
            self.last_nan
        } else {
            self.max
        }
    }

    /// The minimum, or the (last) NaN if the tensor holds any NaN.
    pub fn min_value(&self) -> f64 {
        if self.nan != 0 {
            self.last_nan
        } else {
            self.min
        }
    }

    /// `sum / count`, or the (first) NaN if the tensor holds any NaN. A sum made NaN by
    /// adding `+inf` and `-inf` gives [`GENERATED_NAN`] on every CPU.
    pub fn avg(&self) -> f64 {
        if self.nan != 0 {
            self.first_nan
        } else {
            pin_generated_nan(self.sum / self.count as f64)
        }
    }

    /// `sqrt(sum of squares)`, or the (first) NaN if the tensor holds any NaN.
    pub fn l2norm(&self) -> f64 {
        if self.nan != 0 {
            self.first_nan
        } else {
            sqrt(self.sum_sq)
        }
    }
}

/// The correctly rounded square root: the CPU's instruction with `std`, libm's (also correctly
/// rounded, so the same bits) without.
#[inline]
fn sqrt(v: f64) -> f64 {
    #[cfg(feature = "std")]
    {
        v.sqrt()
    }
    #[cfg(not(feature = "std"))]
    {
        libm::sqrt(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqrt_is_libms_bit_for_bit() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Non-negative values of every exponent, and small integers.
            let v = if i % 4 == 0 {
                (i / 4) as f64
            } else {
                f64::from_bits(x >> 1)
            };
            if v.is_nan() {
                continue; // l2norm never takes the root of a NaN (the NaN itself is reported)
            }
            assert_eq!(sqrt(v).to_bits(), libm::sqrt(v).to_bits(), "{v:e}");
        }
        assert_eq!(sqrt(f64::INFINITY), f64::INFINITY);
        assert_eq!(sqrt(0.0).to_bits(), 0);
    }

    fn of(vals: &[f64]) -> Summary {
        let mut s = Summary::EMPTY;
        vals.iter().for_each(|&v| s.push(v));
        s
    }

    #[test]
    fn mindspore_known_answers() {
        let s = of(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!((s.max_value(), s.min_value(), s.count), (6.0, 1.0, 6));
        assert!((s.l2norm() - 9.539392014169456).abs() < 1e-12);
        assert_eq!(of(&[1.0; 64]).l2norm(), 8.0);
    }

    #[test]
    fn infinities_of_both_signs_average_to_the_x86_nan_everywhere() {
        let s = of(&[f64::INFINITY, 1.0, f64::NEG_INFINITY]);
        assert_eq!(s.avg().to_bits(), GENERATED_NAN.to_bits());
        // Whatever NaN the sum holds (a positive one on AArch64, or from a GPU's partials).
        let s = Summary { sum: f64::NAN, ..s };
        assert_eq!(s.avg().to_bits(), GENERATED_NAN.to_bits());
        assert_eq!(s.l2norm(), f64::INFINITY);
        // A NaN element is reported as it is.
        let s = of(&[f64::INFINITY, f64::NAN, f64::NEG_INFINITY]);
        assert_eq!(s.avg().to_bits(), f64::NAN.to_bits());
    }

    #[test]
    fn nan_rules() {
        let neg_nan = f64::from_bits(0xfff8_0000_0000_0000);
        let s = of(&[1.0, neg_nan, 2.0, f64::NAN]);
        assert_eq!(s.nan, 2);
        assert!(s.avg().is_sign_negative() && s.avg().is_nan());
        assert!(s.max_value().is_sign_positive() && s.max_value().is_nan());
        assert_eq!(s.max, 2.0);
    }

    #[test]
    fn counts_and_signed_zero() {
        let s = of(&[-0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY, -3.0, 5.0]);
        assert_eq!(
            (s.zero, s.pos, s.neg, s.pos_inf, s.neg_inf),
            (2, 2, 2, 1, 1)
        );
        assert!(s.avg().is_nan(), "inf + -inf is NaN");
    }

    #[test]
    fn merge_equals_sequential() {
        let vals = [3.0, f64::NAN, -1.0, 0.0, 7.5, -f64::NAN, 2.0];
        for cut in 0..=vals.len() {
            let mut a = of(&vals[..cut]);
            a.merge(&of(&vals[cut..]));
            let whole = of(&vals);
            assert_eq!(a.count, whole.count);
            assert_eq!(a.first_nan.to_bits(), whole.first_nan.to_bits());
            assert_eq!(a.last_nan.to_bits(), whole.last_nan.to_bits());
            assert_eq!(
                (a.max, a.min, a.nan, a.zero),
                (whole.max, whole.min, whole.nan, whole.zero)
            );
        }
    }
}
