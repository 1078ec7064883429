//! The 80 rounds of the SHA-1 compression function (FIPS 180-4, section 6.1.2), written once
//! for every lane kernel.
//!
//! `sha1_rounds!(round, a, b, c, d, e, w)` expands to one `round!(f, a, b, c, d, e, k, w, t)`
//! per round `t` in order: `f` is the round function (`ch`, `parity`, `maj`, defined by the
//! kernel for its lane type), `a`..`e` the five working variables in the roles of that round
//! (they rotate by one each round and come back after five, so no value moves), `k` the
//! round constant and `w` the message schedule, a ring of 16 words. `t` is a constant
//! expression; a kernel's `round!` first updates `w[t % 16]` when `t >= 16` (the sum is
//! `rotl1(w[(t + 13) % 16] ^ w[(t + 8) % 16] ^ w[(t + 2) % 16] ^ w[t % 16])`, words `t - 3`,
//! `t - 8`, `t - 14` and `t - 16`), then computes `e += rotl5(a) + f(b, c, d) + k + w[t % 16]`
//! and `b = rotl30(b)`. The indices fold to constants, so the ring stays in registers.

macro_rules! sha1_rounds {
    ($round:ident, $a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $w:ident) => {
        sha1_rounds!(@five $round, ch, 0x5a82_7999_u32, $w, 0, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, ch, 0x5a82_7999_u32, $w, 5, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, ch, 0x5a82_7999_u32, $w, 10, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, ch, 0x5a82_7999_u32, $w, 15, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, parity, 0x6ed9_eba1_u32, $w, 20, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, parity, 0x6ed9_eba1_u32, $w, 25, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, parity, 0x6ed9_eba1_u32, $w, 30, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, parity, 0x6ed9_eba1_u32, $w, 35, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, maj, 0x8f1b_bcdc_u32, $w, 40, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, maj, 0x8f1b_bcdc_u32, $w, 45, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, maj, 0x8f1b_bcdc_u32, $w, 50, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, maj, 0x8f1b_bcdc_u32, $w, 55, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, parity, 0xca62_c1d6_u32, $w, 60, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, parity, 0xca62_c1d6_u32, $w, 65, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, parity, 0xca62_c1d6_u32, $w, 70, $a, $b, $c, $d, $e);
        sha1_rounds!(@five $round, parity, 0xca62_c1d6_u32, $w, 75, $a, $b, $c, $d, $e);
    };
    (@five $round:ident, $f:ident, $k:expr, $w:ident, $t:expr, $a:ident, $b:ident, $c:ident, $d:ident, $e:ident) => {
        $round!($f, $a, $b, $c, $d, $e, $k, $w, $t);
        $round!($f, $e, $a, $b, $c, $d, $k, $w, $t + 1);
        $round!($f, $d, $e, $a, $b, $c, $k, $w, $t + 2);
        $round!($f, $c, $d, $e, $a, $b, $k, $w, $t + 3);
        $round!($f, $b, $c, $d, $e, $a, $k, $w, $t + 4);
    };
}

pub(super) use sha1_rounds;
