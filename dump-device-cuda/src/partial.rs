//! [`Partial`]: what one thread block of a statistics kernel writes.

/// The statistics of one thread block's elements, as the kernel stores them: eighteen 8-byte
/// words, the layout of `struct Partial` in [`crate::kernel_source::HEAD`].
///
/// Float kernels fill `max`, `min`, `sum`, `sum_sq` (accumulator values widened exactly to
/// f64) and leave the integer fields zero; integer kernels fill `imax`, `imin`, the exact
/// 128-bit sum `isum_hi:isum_lo` and `sum_sq`. NaN elements are not in the sums or extrema;
/// the first and last NaN of the block are kept by element index and raw bits, so the host
/// resolves the tensor's first and last NaN exactly whatever the block order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Partial {
    /// Largest non-NaN value (float kernels; `-inf` when none).
    pub max: f64,
    /// Smallest non-NaN value (float kernels; `+inf` when none).
    pub min: f64,
    /// Sum of the non-NaN values in the accumulator type (float kernels).
    pub sum: f64,
    /// Sum of squares in the accumulator type.
    pub sum_sq: f64,
    /// Largest value (integer kernels).
    pub imax: i64,
    /// Smallest value (integer kernels).
    pub imin: i64,
    /// Low 64 bits of the exact sum (integer kernels).
    pub isum_lo: u64,
    /// High 64 bits of the exact sum (integer kernels).
    pub isum_hi: i64,
    /// NaN elements.
    pub nan: u64,
    /// `+inf` elements.
    pub pos_inf: u64,
    /// `-inf` elements.
    pub neg_inf: u64,
    /// `±0` elements.
    pub zero: u64,
    /// Elements `> 0`.
    pub pos: u64,
    /// Elements `< 0`.
    pub neg: u64,
    /// Element index of the first NaN (valid when `nan > 0`).
    pub first_nan_idx: u64,
    /// Raw bits of the first NaN.
    pub first_nan_raw: u64,
    /// Element index of the last NaN (valid when `nan > 0`).
    pub last_nan_idx: u64,
    /// Raw bits of the last NaN.
    pub last_nan_raw: u64,
}

impl Partial {
    /// Words per partial in device memory.
    pub const WORDS: usize = 18;

    /// The partials in `words`, as the kernel wrote them, [`WORDS`](Partial::WORDS) per
    /// partial (a trailing incomplete group is ignored).
    pub fn all_from_words(words: &[u64]) -> Vec<Partial> {
        words
            .chunks_exact(Partial::WORDS)
            .map(|w| {
                let mut a = [0u64; Partial::WORDS];
                a.copy_from_slice(w);
                Partial::from_words(&a)
            })
            .collect()
    }

    /// Reads a partial from the words the kernel wrote (native byte order).
    pub fn from_words(w: &[u64; Partial::WORDS]) -> Partial {
        let f = f64::from_bits;
        Partial {
            max: f(w[0]),
            min: f(w[1]),
            sum: f(w[2]),
            sum_sq: f(w[3]),
            imax: w[4] as i64,
            imin: w[5] as i64,
            isum_lo: w[6],
            isum_hi: w[7] as i64,
            nan: w[8],
            pos_inf: w[9],
            neg_inf: w[10],
            zero: w[11],
            pos: w[12],
            neg: w[13],
            first_nan_idx: w[14],
            first_nan_raw: w[15],
            last_nan_idx: w[16],
            last_nan_raw: w[17],
        }
    }

    /// The words of this partial, as the kernel writes them.
    pub fn to_words(&self) -> [u64; Partial::WORDS] {
        [
            self.max.to_bits(),
            self.min.to_bits(),
            self.sum.to_bits(),
            self.sum_sq.to_bits(),
            self.imax as u64,
            self.imin as u64,
            self.isum_lo,
            self.isum_hi as u64,
            self.nan,
            self.pos_inf,
            self.neg_inf,
            self.zero,
            self.pos,
            self.neg,
            self.first_nan_idx,
            self.first_nan_raw,
            self.last_nan_idx,
            self.last_nan_raw,
        ]
    }

    /// The exact integer sum.
    pub fn isum(&self) -> i128 {
        (i128::from(self.isum_hi) << 64) | i128::from(self.isum_lo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_kernel_struct() {
        // The CUDA struct has 18 eight-byte fields in this order (the kernel indexes partials
        // with its size), and from_words reads them in the same order.
        assert_eq!(core::mem::size_of::<Partial>(), Partial::WORDS * 8);
        assert!(crate::kernel_source::HEAD.contains(
            "double max, min, sum, sum_sq;\n    i64 imax, imin;\n    u64 isum_lo;\n    i64 isum_hi;"
        ));
    }

    #[test]
    fn words_round_trip_and_isum_sign() {
        let p = Partial {
            max: -2.5,
            imax: -7,
            isum_lo: u64::MAX,
            isum_hi: -1,
            first_nan_raw: 0x7e00,
            last_nan_idx: 99,
            ..Partial::default()
        };
        assert_eq!(Partial::from_words(&p.to_words()), p);
        assert_eq!(p.isum(), -1);
        let big = Partial {
            isum_lo: 5,
            isum_hi: 1,
            ..Partial::default()
        };
        assert_eq!(big.isum(), (1i128 << 64) + 5);
    }
}
