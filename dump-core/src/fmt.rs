//! Allocation-free number formatting, byte-identical to what MindSpore writes.
//!
//! MindSpore prints statistics with a default C++ `ostream`, which is C `printf("%g")` with
//! precision 6. [`g`] reproduces glibc's output exactly for every `f64`, including `inf`,
//! `-inf`, `nan` / `-nan` (chosen by the sign bit, as glibc does), `-0`, subnormals and the
//! switch to exponent form (`1e+06`, `1e-05`). Counts are plain unsigned decimal: [`u64_str`].
//!
//! Both return small inline buffers; nothing allocates.
//!
//! ```
//! use dump_core::fmt::{g, u64_str, G};
//!
//! assert_eq!(g(9.539392014169456).as_str(), "9.53939");
//! assert_eq!(g(1e6).as_str(), "1e+06");
//! assert_eq!(g(0.00001).as_str(), "1e-05");
//! assert_eq!(g(65504.0).as_str(), "65504");
//! assert_eq!(g(-f64::NAN).as_str(), "-nan");
//! assert_eq!(u64_str(18446744073709551615).as_str(), "18446744073709551615");
//! assert_eq!(format!("{}", G(23.643180835073778)), "23.6432");
//! ```

use core::fmt::Write;

/// Significant digits of `%g` without an explicit precision.
const PRECISION: i32 = 6;

/// Longest `%g` output: `-1.23457e-308` is 13 bytes; [`GBuf`] holds this many.
pub const GBUF_CAP: usize = 16;

/// The text of one `%g`-formatted number, held inline (at most 16 bytes).
#[derive(Clone, Copy)]
pub struct GBuf {
    buf: [u8; GBUF_CAP],
    len: u8,
}

impl GBuf {
    /// The formatted text.
    pub fn as_str(&self) -> &str {
        let bytes = self.buf.get(..self.len as usize).unwrap_or(&[]);
        debug_assert!(bytes.is_ascii());
        // SAFETY: `g` is the only writer of `buf`. It stores ASCII only: `-`, `.`, `e`, `+`,
        // `nan`, `inf`, digits from `eight_digits` (`0x30 + d`, d < 10) or from core's
        // formatting after a check that they are ASCII digits, and zero bytes past the text.
        // ASCII is UTF-8. Checked in debug builds.
        unsafe { core::str::from_utf8_unchecked(bytes) }
    }
}

impl GBuf {
    /// The whole inline buffer and the text's length: the text is `buf[..len]`, the bytes
    /// after it are zero. For a writer that copies the fixed-size buffer (one move, no
    /// `memcpy` call) and keeps `len` bytes.
    #[inline]
    pub fn padded(&self) -> (&[u8; GBUF_CAP], usize) {
        (&self.buf, usize::from(self.len).min(GBUF_CAP))
    }
}

impl core::fmt::Debug for GBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl core::fmt::Display for GBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.pad(self.as_str())
    }
}

impl PartialEq<str> for GBuf {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for GBuf {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A fixed-capacity `core::fmt::Write` sink for core's `{:.5e}` output.
struct Scratch {
    buf: [u8; 32],
    len: usize,
}

impl Write for Scratch {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(core::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Formats `v` as C `printf("%g", v)` does (glibc, precision 6).
///
/// ```
/// assert_eq!(dump_core::fmt::g(1.0 / 3.0).as_str(), "0.333333");
/// assert_eq!(dump_core::fmt::g(f64::MAX).as_str(), "1.79769e+308");
/// assert_eq!(dump_core::fmt::g(-0.0).as_str(), "-0");
/// assert_eq!(dump_core::fmt::g(f64::NEG_INFINITY).as_str(), "-inf");
/// ```
#[inline]
pub fn g(v: f64) -> GBuf {
    // The text is assembled in a register, little-endian (the first character in the low
    // byte), from whole pieces: no loop, no branch per character.
    let (text, len) = if v.is_nan() {
        (u128::from(u32::from_le_bytes(*b"nan\0")), 3)
    } else if v.is_infinite() {
        (u128::from(u32::from_le_bytes(*b"inf\0")), 3)
    } else {
        finite_g(v.abs())
    };
    let (text, len) = if v.is_sign_negative() {
        ((text << 8) | u128::from(b'-'), len + 1)
    } else {
        (text, len)
    };
    // At most 13 bytes (`-1.23457e-308`); every byte of `text` past `len` is zero.
    GBuf {
        buf: text.to_le_bytes(),
        len: len as u8,
    }
}

/// The low `k` bytes of a word (`k <= 8`).
#[inline(always)]
const fn low_bytes(w: u64, k: usize) -> u64 {
    if k >= 8 {
        w
    } else {
        w & ((1u64 << (8 * k)) - 1)
    }
}

/// [`g`] of finite `a >= 0`, without the sign: the text's bytes (first in the low byte) and
/// its length. Every byte is ASCII: digits from [`eight_digits`] or checked ones from core,
/// and `.`, `e`, `+`, `-`.
#[inline]
fn finite_g(a: f64) -> (u128, usize) {
    if a < 1e6 && a == (a as u64) as f64 {
        // A whole number below 10^6 (0 included): `%g` prints its digits, nothing else.
        let w = a as u32;
        let n = w.checked_ilog10().map_or(1, |l| l as usize + 1);
        return (u128::from(eight_digits(w) >> (8 * (8 - n))), n);
    }
    let (d, x) = match six_digits_f64(a).or_else(|| six_digits(a)) {
        // q has six digits: drop eight_digits' two leading zeros.
        Some((q, x)) => (eight_digits(q) >> 16, x),
        None => match six_digits_core(a) {
            Some((digits, x)) if digits.iter().all(u8::is_ascii_digit) => {
                let mut w = [0u8; 8];
                w[..PRECISION as usize].copy_from_slice(&digits);
                (u64::from_le_bytes(w), x)
            }
            // Unreachable: core writes `d.ddddde<exp>` in ASCII digits.
            _ => return (u128::from(u32::from_le_bytes(*b"nan\0")), 3),
        },
    };
    // Significant digits once trailing zeros are stripped (at least one): the highest digit
    // byte that is not `0`.
    let nonzero = d ^ 0x3030_3030_3030;
    let nd = (((64 - nonzero.leading_zeros()) as usize).div_ceil(8)).max(1);
    if (0..PRECISION).contains(&x) {
        // Style f with precision P - 1 - X, trailing zeros removed: the integer part is the
        // first X + 1 of the six digits (zeros included), then `.` and the rest, if any.
        let int_len = x as usize + 1;
        let int = u128::from(low_bytes(d, int_len));
        if nd <= int_len {
            return (int, int_len);
        }
        let frac = u128::from(low_bytes(d >> (8 * int_len), nd - int_len));
        return (
            int | (u128::from(b'.') << (8 * int_len)) | (frac << (8 * (int_len + 1))),
            nd + 1,
        );
    }
    if (-4..0).contains(&x) {
        // `0.`, then -X - 1 zeros, then the digits.
        let zeros = (-x - 1) as usize;
        let text = u128::from(u16::from_le_bytes(*b"0."))
            | (u128::from(low_bytes(0x3030_3030, zeros)) << 16)
            | (u128::from(low_bytes(d, nd)) << (8 * (2 + zeros)));
        return (text, 2 + zeros + nd);
    }
    // Style e with precision P - 1, trailing zeros removed; the exponent has >= 2 digits.
    let (mut text, mut len) = (u128::from(d & 0xff), 1);
    if nd > 1 {
        text |= (u128::from(b'.') << 8) | (u128::from(low_bytes(d >> 8, nd - 1)) << 16);
        len = nd + 1;
    }
    let ax = x.unsigned_abs();
    let sign = if x < 0 { b'-' } else { b'+' };
    let (exp, exp_len) = if ax >= 100 {
        let e = eight_digits(ax % 1000) >> 40;
        (e, 3)
    } else {
        (eight_digits(ax) >> 48, 2)
    };
    text |= u128::from(u16::from_le_bytes([b'e', sign])) << (8 * len);
    text |= u128::from(exp) << (8 * (len + 2));
    (text, len + 2 + exp_len)
}

/// `10^k` for `k` in `0..=22`: every one exact in an `f64`.
const POW10_F64: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// [`six_digits`] for most values with one `f64` multiplication or division: `a · 10^k` with
/// `10^k` exact is off the exact product by at most half an ulp (under `1.2e-10` below
/// `10^6`), so where it is more than `MARGIN` from a rounding boundary (a half, or the ends
/// of `[100000, 999999.5)`) it rounds to the same six digits as the exact value. `None` near a
/// boundary or outside `10^±22` scaling: [`six_digits`] decides exactly.
#[inline]
fn six_digits_f64(a: f64) -> Option<(u32, i32)> {
    const MARGIN: f64 = 1e-6;
    let biased = ((a.to_bits() >> 52) & 0x7ff) as i32;
    if biased == 0 || biased == 0x7ff {
        return None;
    }
    // a is in [2^p, 2^(p+1)): floor(log10 a) is floor(p·log10 2) or one more.
    let p = biased - 1023;
    let mut x = (p * 78_913) >> 18;
    let scaled = |x: i32| {
        let k = 5 - x;
        if k >= 0 {
            POW10_F64.get(k as usize).map(|t| a * t)
        } else {
            POW10_F64.get((-k) as usize).map(|t| a / t)
        }
    };
    let mut y = scaled(x)?;
    if y >= 999_999.5 - MARGIN {
        x += 1;
        y = scaled(x)?;
    }
    // `floor` and `round` without std (no_std targets): y is positive where it matters
    // (the range check), so truncation is the floor, and the fraction is far from a half.
    let whole = y as u64;
    let frac = y - whole as f64;
    let safe =
        (100_000.0 + MARGIN..=999_999.5 - MARGIN).contains(&y) && (frac - 0.5).abs() > MARGIN;
    safe.then(|| ((whole + u64::from(frac > 0.5)) as u32, x))
}

/// `10^k` for `k` in `0..=38` (all fit a `u128`).
const POW10: [u128; 39] = {
    let mut t = [1u128; 39];
    let mut k = 1;
    while k < 39 {
        t[k] = t[k - 1] * 10;
        k += 1;
    }
    t
};

/// The six significant digits of finite `a > 0` rounded as `printf` rounds them (the exact
/// binary value, ties to even), as `(q, x)` with `q` in `100000..1000000` and
/// `a ≈ q · 10^(x - 5)`; `None` where the exact arithmetic would not fit a `u128` (values
/// below about `1e-17` or above about `1e38`, and subnormals), which [`six_digits_core`]
/// handles.
///
/// `a = m · 2^e` exactly; with `k = 5 - x`, `a · 10^k` is the ratio of two integers (`m · 10^k`
/// over `2^-e`, or `m · 2^e` over `10^-k`), whose quotient and remainder give the digits and
/// the rounding without any floating-point step.
fn six_digits(a: f64) -> Option<(u32, i32)> {
    let bits = a.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    if biased == 0 || biased == 0x7ff {
        return None;
    }
    let m = u128::from((bits & ((1u64 << 52) - 1)) | (1u64 << 52));
    let e = biased - 1075;
    // a is in [2^p, 2^(p+1)), so floor(log10 a) is floor(p·log10 2) or one more.
    let p = e + 52;
    let mut x = (p * 78_913) >> 18;
    for _ in 0..2 {
        let k = 5 - x;
        let (num, den_shift, den) = if k >= 0 {
            let k = usize::try_from(k).ok()?;
            let num = m.checked_mul(*POW10.get(k)?)?;
            if e >= 0 {
                (num.checked_shl(e as u32).filter(|n| n >> e == num)?, 0, 1)
            } else {
                (num, (-e) as u32, 1)
            }
        } else {
            let j = usize::try_from(-k).ok()?;
            let ten = *POW10.get(j)?;
            if e >= 0 {
                let num = m.checked_shl(e as u32).filter(|n| n >> e == m)?;
                (num, 0, ten)
            } else {
                let den = ten.checked_shl((-e) as u32).filter(|d| d >> (-e) == ten)?;
                (m, 0, den)
            }
        };
        let (t, round_up) = if den_shift > 0 {
            if den_shift >= 128 {
                return None;
            }
            let t = num >> den_shift;
            let r = num & ((1u128 << den_shift) - 1);
            let half = 1u128 << (den_shift - 1);
            (t, r > half || (r == half && t & 1 == 1))
        } else {
            let (t, r) = (num / den, num % den);
            // 2r < 2·den <= 2·10^38 < 2^128.
            let twice = r * 2;
            (t, twice > den || (twice == den && t & 1 == 1))
        };
        if t >= 1_000_000 {
            x += 1; // the estimate was one low
            continue;
        }
        if t < 100_000 {
            return None; // not reachable for a correct estimate; leave it to core
        }
        let q = t as u32 + u32::from(round_up);
        return Some(if q == 1_000_000 {
            (100_000, x + 1)
        } else {
            (q, x)
        });
    }
    None
}

/// [`six_digits`] through core's exact `{:.5e}` formatting (which also rounds the exact
/// binary value, ties to even): six ASCII digits and the decimal exponent. Slower (a bignum
/// fallback), used where the `u128` arithmetic does not reach.
fn six_digits_core(a: f64) -> Option<([u8; PRECISION as usize], i32)> {
    let mut s = Scratch {
        buf: [0; 32],
        len: 0,
    };
    write!(s, "{:.5e}", a).ok()?;
    let text = &s.buf[..s.len];
    // text = "d.ddddde<exp>"; exp is "-?[0-9]+".
    let mut digits = [b'0'; PRECISION as usize];
    digits[0] = text[0];
    digits[1..].copy_from_slice(&text[2..2 + (PRECISION as usize - 1)]);
    let exp_text = &text[2 + PRECISION as usize..];
    let (neg_exp, exp_digits) = match exp_text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, exp_text),
    };
    let mut x: i32 = 0;
    for &d in exp_digits {
        x = x * 10 + i32::from(d - b'0');
    }
    Some((digits, if neg_exp { -x } else { x }))
}

/// An `f64` that displays as C `printf("%g")` (see [`g`]).
///
/// ```
/// assert_eq!(format!("{}", dump_core::fmt::G(65504.0)), "65504");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct G(pub f64);

impl core::fmt::Display for G {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.pad(g(self.0).as_str())
    }
}

/// Longest `u64` in decimal: 20 digits.
const U64BUF_CAP: usize = 20;

/// The decimal text of one `u64`, held inline.
#[derive(Clone, Copy)]
pub struct U64Buf {
    buf: [u8; U64BUF_CAP],
    start: u8,
}

impl U64Buf {
    /// The formatted text.
    pub fn as_str(&self) -> &str {
        let bytes = self.buf.get(self.start as usize..).unwrap_or(&[]);
        debug_assert!(bytes.is_ascii());
        // SAFETY: `buf` starts as ASCII `0`s and `u64_str`, its only writer, stores ASCII
        // digits (`b'0' + v % 10` and bytes of `PAIRS`, all `0`..=`9`) only: every byte is ASCII, hence UTF-8. Checked in debug
        // builds.
        unsafe { core::str::from_utf8_unchecked(bytes) }
    }
}

impl core::fmt::Debug for U64Buf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl core::fmt::Display for U64Buf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Formats `v` as plain unsigned decimal (C `%llu`), without allocating.
///
/// ```
/// assert_eq!(dump_core::fmt::u64_str(0).as_str(), "0");
/// assert_eq!(dump_core::fmt::u64_str(20480).as_str(), "20480");
/// ```
pub fn u64_str(mut v: u64) -> U64Buf {
    let mut out = U64Buf {
        buf: [b'0'; U64BUF_CAP],
        start: U64BUF_CAP as u8,
    };
    // Two digits per division (a timestamp has 16); `start` stays above 1 while v >= 100
    // (20 digits at most).
    while v >= 100 {
        let pair = usize::from((v % 100) as u8) * 2;
        v /= 100;
        out.start -= 2;
        let at = out.start as usize;
        out.buf[at] = PAIRS[pair];
        out.buf[at + 1] = PAIRS[pair + 1];
    }
    if v >= 10 {
        let pair = v as usize * 2;
        out.start -= 2;
        let at = out.start as usize;
        out.buf[at] = PAIRS[pair];
        out.buf[at + 1] = PAIRS[pair + 1];
    } else {
        out.start -= 1;
        out.buf[out.start as usize] = b'0' + v as u8;
    }
    out
}

/// [`u64_str`]'s digits written at the start of `dst` (as many as `v` has, at most
/// [`U64_DIGITS`]); returns how many. For a row writer with room to spare: no intermediate
/// buffer, no copy. Bytes of `dst` after the digits may be overwritten (with zeros).
///
/// Eight digits at a time in one register (`eight_digits`): a 16-digit timestamp is two
/// independent conversions instead of a chain of eight dependent divisions.
///
/// ```
/// let mut d = [0u8; dump_core::fmt::U64_DIGITS];
/// let n = dump_core::fmt::put_u64(&mut d, 1_764_288_000_123_456);
/// assert_eq!(&d[..n], b"1764288000123456");
/// ```
#[inline]
pub fn put_u64(dst: &mut [u8; U64_DIGITS], v: u64) -> usize {
    const E8: u64 = 100_000_000;
    let n = v.checked_ilog10().map_or(1, |l| l as usize + 1);
    // The text in (at most) three 8-digit groups, the first one cut to its significant
    // digits: its leading zeros are its low bytes (the first characters), shifted out.
    // Each group writes 8 bytes (zeros after a short first group's digits); a later group
    // overwrites them.
    let put = |dst: &mut [u8; U64_DIGITS], at: usize, group: u64, digits: usize| {
        let text = eight_digits(group as u32) >> (8 * (8 - digits));
        dst[at..at + 8].copy_from_slice(&text.to_le_bytes());
    };
    if n <= 8 {
        put(dst, 0, v, n);
    } else if n <= 16 {
        put(dst, 0, v / E8, n - 8);
        put(dst, n - 8, v % E8, 8);
    } else {
        put(dst, 0, v / (E8 * E8), n - 16);
        put(dst, n - 16, v / E8 % E8, 8);
        put(dst, n - 8, v % E8, 8);
    }
    n
}

/// The eight ASCII digits of `x < 10^8`, with leading zeros, as the little-endian bytes of
/// a `u64` (the first digit in the low byte). Splits in lanes, no loop: `x` into two 4-digit
/// halves (32-bit lanes), each into two 2-digit quarters (16-bit lanes), each into two
/// digits (8-bit lanes); each lane's quotient comes from a multiplication and shift that is
/// exact for the lane's range (`/100` as `·10486 >> 20` for values below 43,699; `/10` as
/// `·103 >> 10` below 179), and no lane's product reaches the next lane.
#[inline]
fn eight_digits(x: u32) -> u64 {
    debug_assert!(x < 100_000_000);
    let x = u64::from(x);
    // 32-bit lanes: the high half (first four digits) in the low lane.
    let halves = (x / 10_000) | ((x % 10_000) << 32);
    // 16-bit lanes: per 32-bit lane, value / 100 in its low half and value % 100 above.
    let hundreds = ((halves * 10_486) >> 20) & 0x0000_007f_0000_007f;
    let quarters = hundreds | ((halves - hundreds * 100) << 16);
    // 8-bit lanes: per 16-bit lane, tens in its low byte and ones above.
    let tens = ((quarters * 103) >> 10) & 0x000f_000f_000f_000f;
    let digits = tens | ((quarters - tens * 10) << 8);
    digits + 0x3030_3030_3030_3030
}

/// Longest `u64` in decimal: [`put_u64`] writes at most this many digits.
pub const U64_DIGITS: usize = U64BUF_CAP;

/// `PAIRS[2k..2k + 2]`: the two ASCII digits of `k` (`00` to `99`).
const PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut k = 0;
    while k < 100 {
        t[2 * k] = b'0' + (k / 10) as u8;
        t[2 * k + 1] = b'0' + (k % 10) as u8;
        k += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;
    use core::ffi::{c_char, c_int};

    unsafe extern "C" {
        fn snprintf(buf: *mut c_char, n: usize, fmt: *const c_char, ...) -> c_int;
    }

    /// C's `printf("%g", v)` from the platform libc.
    fn c_g(v: f64) -> String {
        let mut buf = [0u8; 64];
        // SAFETY: `buf` is writable for its full length, which is passed as `n`; the format is
        // a NUL-terminated literal taking exactly one double, and one f64 is passed.
        let n = unsafe { snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%g".as_ptr(), v) };
        assert!(n > 0 && (n as usize) < buf.len(), "snprintf returned {n}");
        String::from_utf8(buf[..n as usize].to_vec()).expect("ascii")
    }

    fn c_llu(v: u64) -> String {
        let mut buf = [0u8; 32];
        // SAFETY: as in `c_g`; `%llu` takes one unsigned long long, and a u64 is passed.
        let n = unsafe { snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%llu".as_ptr(), v) };
        assert!(n > 0 && (n as usize) < buf.len(), "snprintf returned {n}");
        String::from_utf8(buf[..n as usize].to_vec()).expect("ascii")
    }

    fn check(v: f64) {
        let ours = g(v);
        let theirs = c_g(v);
        assert_eq!(
            ours.as_str(),
            theirs,
            "value {v:e} (bits {:#018x})",
            v.to_bits()
        );
        let (padded, len) = ours.padded();
        assert_eq!(&padded[..len], theirs.as_bytes());
        assert!(padded[len..].iter().all(|&b| b == 0), "{v:e}");
    }

    /// splitmix64: deterministic, good enough for test vectors.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
    }

    #[test]
    fn spec_vectors() {
        let cases: &[(f64, &str)] = &[
            (9.539392014169456, "9.53939"),
            (23.643180835073778, "23.6432"),
            (8.0, "8"),
            (1e6, "1e+06"),
            (1e-5, "1e-05"),
            (65504.0, "65504"),
            (0.0, "0"),
            (-0.0, "-0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (-f64::NAN, "-nan"),
            (f64::MAX, "1.79769e+308"),
            (f64::MIN_POSITIVE, "2.22507e-308"),
            (5e-324, "4.94066e-324"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (0.0001, "0.0001"),
            (0.000123456789, "0.000123457"),
            (-3.5, "-3.5"),
            (100.0, "100"),
        ];
        for &(v, want) in cases {
            assert_eq!(g(v).as_str(), want, "{v:e}");
            assert_eq!(format!("{}", G(v)), want);
        }
        assert_eq!(format!("{:>6}", G(1.5)), "   1.5");
    }

    #[test]
    fn nan_sign_follows_sign_bit() {
        // x86 arithmetic NaNs (inf - inf) have the sign bit set: glibc prints "-nan".
        let pos = f64::from_bits(0x7ff8_0000_0000_0001);
        let neg = f64::from_bits(0xfff0_0000_0000_0001);
        assert_eq!(g(pos).as_str(), "nan");
        assert_eq!(g(neg).as_str(), "-nan");
        check(pos);
        check(neg);
    }

    #[test]
    fn edge_vectors_match_c() {
        let mut v = Vec::new();
        for e in -330..=310 {
            let p = 10f64.powi(e);
            let q: f64 = format!("1e{e}").parse().expect("literal");
            for base in [p, q] {
                v.extend([
                    base,
                    -base,
                    base * 0.5,
                    base * 1.5,
                    base * 9.999995,
                    base * 9.9999949,
                    base * 9.9999951,
                    base * 0.99999949999,
                    base * 0.9999995,
                    f64::from_bits(base.to_bits().wrapping_add(1)),
                    f64::from_bits(base.to_bits().wrapping_sub(1)),
                ]);
            }
        }
        v.extend([
            0.5e-4,
            0.5e-5,
            0.999995e-4,
            0.9999949e-4,
            0.9999951e-4,
            999999.5,
            999999.4999,
            999998.5,
            999_995.0,
            9.999995,
            9.999985,
            0.5,
            1.5,
            2.5,
            0.125,
            1.0000005,
            1.0000015,
            12345.65,
            12345.75,
            0.00012345649999,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            f64::EPSILON,
            5e-324,
            -5e-324,
            1e-310,
            65504.0,
            65505.0,
            f64::from(f32::MAX),
            f64::from(f32::MIN_POSITIVE),
            f64::from(f32::from_bits(1)),
        ]);
        for i in 0..=2000u32 {
            v.push(f64::from(i) * 0.5);
            v.push(999_000.0 + f64::from(i) * 0.5);
        }
        for x in v {
            check(x);
        }
    }

    #[test]
    fn exact_ties_round_to_even_as_c_does() {
        // Integers of seven or more digits ending in 5 (exact in binary) are ties at the sixth
        // digit; so are their binary fractions such as 1.5 · 2^-k scaled into six digits.
        for v in [
            1_234_565.0,
            1_234_575.0,
            9_999_995.0,
            10_000_005.0,
            123_456_500.0,
            2_500_000_000_000_000.0,
            0.5,
            1.5,
            2.5,
            1_000_000.5,
            999_999.5,
            99_999.95,
            0.000_012_345_65,
        ] {
            check(v);
            check(-v);
        }
        for n in 1_000_000u64..1_002_000 {
            check(n as f64 * 10.0 + 5.0);
            check((n as f64 * 10.0 + 5.0) / 1024.0);
        }
    }

    #[test]
    fn fast_digits_agree_with_core_where_both_apply() {
        let mut rng = Rng(0x0005_eed0_f6d1_2026);
        for _ in 0..2_000_000 {
            let b = rng.next();
            let mant = (b >> 11) as f64 / (1u64 << 53) as f64;
            // 1e-16 ..= 1e31: the range the u128 path must cover (statistics live there).
            let e = (b % 47) as i32 - 16;
            let v = (1.0 + 9.0 * mant) * 10f64.powi(e);
            let (q, x) = six_digits(v).unwrap_or_else(|| panic!("no fast digits for {v:e}"));
            let (d, cx) = six_digits_core(v).expect("core formats it");
            let cq = d.iter().fold(0u32, |a, &c| a * 10 + u32::from(c - b'0'));
            assert_eq!((q, x), (cq, cx), "{v:e}");
        }
    }

    #[test]
    fn random_bits_match_c() {
        let mut rng = Rng(0x0dd0_face_2026_1122);
        for _ in 0..1_000_000 {
            check(f64::from_bits(rng.next()));
        }
        // f32 and f16-range values are what statistics mostly print.
        for _ in 0..200_000 {
            let b = rng.next();
            check(f64::from(f32::from_bits(b as u32)));
            check(f64::from(half::f16::from_bits((b >> 32) as u16)));
        }
        // Values near the fixed/exponent switch points, with random low digits.
        for _ in 0..200_000 {
            let b = rng.next();
            let mant = (b >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
            let e = (b % 16) as i32 - 8;
            check((1.0 + 9.0 * mant) * 10f64.powi(e));
        }
    }

    #[test]
    fn f64_digits_agree_with_exact_digits_where_they_answer() {
        let mut rng = Rng(0x5eed_f64d_1617_2026);
        let (mut answered, mut total) = (0u32, 0u32);
        for i in 0..2_000_000u32 {
            let b = rng.next();
            let v = match i % 3 {
                0 => f64::from_bits(b >> 1),
                1 => f64::from(f32::from_bits((b >> 1) as u32)),
                _ => {
                    // Near halves of the sixth digit: k.5 scaled, with a few ulps of noise.
                    let base = (100_000 + b % 900_000) as f64 + 0.5;
                    let v = base * 10f64.powi((b >> 40) as i32 % 12 - 6);
                    f64::from_bits(v.to_bits().wrapping_add((b >> 60) % 5).wrapping_sub(2))
                }
            };
            if !v.is_finite() || v == 0.0 {
                continue;
            }
            total += 1;
            if let Some(fast) = six_digits_f64(v) {
                answered += 1;
                let exact = six_digits(v).or_else(|| {
                    let (d, x) = six_digits_core(v)?;
                    let q = d.iter().fold(0u32, |q, &c| q * 10 + u32::from(c - b'0'));
                    Some((q, x))
                });
                assert_eq!(Some(fast), exact, "{v:e}");
            }
        }
        // Most random bit patterns are beyond 10^±22 (exact path); f32 values mostly are not.
        assert!(answered > total / 10, "{answered} of {total}");
    }

    #[test]
    fn whole_numbers_match_c() {
        let mut vals: Vec<f64> = (0..20_000).map(f64::from).collect();
        for i in 0..2000 {
            vals.push(f64::from(999_000 + i));
            vals.push(f64::from(i * 499 + 7));
        }
        vals.extend([
            1e6,
            1e6 - 1.0,
            1e6 + 1.0,
            4e6,
            123_456_789.0,
            0.5,
            1.5,
            999_999.5,
        ]);
        for v in vals {
            for s in [v, -v] {
                assert_eq!(g(s).as_str(), c_g(s), "{s}");
            }
        }
    }

    #[test]
    fn u64_matches_c() {
        let mut rng = Rng(7);
        let mut vals = vec![0, 1, 9, 10, 99, 100, u64::MAX, u64::MAX - 1, 1 << 63];
        for i in 0..64 {
            vals.push(1u64 << i);
            vals.push((1u64 << i) - 1);
        }
        for p in 0..20 {
            vals.push(10u64.pow(p));
            vals.push(10u64.pow(p) - 1);
        }
        for _ in 0..100_000 {
            vals.push(rng.next() >> (rng.next() % 64));
        }
        for x in vals {
            let c = c_llu(x);
            assert_eq!(u64_str(x).as_str(), c);
            // put_u64 writes the same digits at the start.
            let mut d = [b'#'; U64_DIGITS];
            let n = put_u64(&mut d, x);
            assert_eq!(&d[..n], c.as_bytes(), "{x}");
        }
        for x in 0..100_000_000u32 {
            if x % 9973 != 0 && x > 10_000 && x % 10_000_000 > 10 {
                continue;
            }
            let want = format!("{x:08}");
            assert_eq!(eight_digits(x).to_le_bytes(), want.as_bytes(), "{x}");
        }
        assert_eq!(format!("{:>3}", u64_str(7)), "  7");
    }
}
