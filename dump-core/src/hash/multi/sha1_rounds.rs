//! The 80 rounds of the SHA-1 compression function (FIPS 180-4, section 6.1.2), written once
//! for every lane kernel.
//!
//! `sha1_rounds!(round, a, b, c, d, e, w)` expands to one `round!` per round in order:
//! `round!(f, a, b, c, d, e, k, w, i, sched)` with `f` the round function (`ch`, `parity`,
//! `maj`, defined by the kernel for its lane type), the five working variables in the roles of
//! that round (they rotate by one each round, so no value moves), `k` the round constant, and
//! the message schedule kept in a ring of 16 words `w`: for rounds 0..16, `sched` is `load`
//! and `w[i]` already holds word `i`; from round 16 on, `sched` is `[i - 3, i - 8, i - 14]`
//! (mod 16) and the kernel first sets `w[i] = rotl1(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i])`.
//! A round then computes `e += rotl5(a) + f(b, c, d) + k + w[i]` and `b = rotl30(b)`.

macro_rules! sha1_rounds {
    ($round:ident, $a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $w:ident) => {
        $round!(ch, $a, $b, $c, $d, $e, 0x5a82_7999_u32, $w, 0, load);
        $round!(ch, $e, $a, $b, $c, $d, 0x5a82_7999_u32, $w, 1, load);
        $round!(ch, $d, $e, $a, $b, $c, 0x5a82_7999_u32, $w, 2, load);
        $round!(ch, $c, $d, $e, $a, $b, 0x5a82_7999_u32, $w, 3, load);
        $round!(ch, $b, $c, $d, $e, $a, 0x5a82_7999_u32, $w, 4, load);
        $round!(ch, $a, $b, $c, $d, $e, 0x5a82_7999_u32, $w, 5, load);
        $round!(ch, $e, $a, $b, $c, $d, 0x5a82_7999_u32, $w, 6, load);
        $round!(ch, $d, $e, $a, $b, $c, 0x5a82_7999_u32, $w, 7, load);
        $round!(ch, $c, $d, $e, $a, $b, 0x5a82_7999_u32, $w, 8, load);
        $round!(ch, $b, $c, $d, $e, $a, 0x5a82_7999_u32, $w, 9, load);
        $round!(ch, $a, $b, $c, $d, $e, 0x5a82_7999_u32, $w, 10, load);
        $round!(ch, $e, $a, $b, $c, $d, 0x5a82_7999_u32, $w, 11, load);
        $round!(ch, $d, $e, $a, $b, $c, 0x5a82_7999_u32, $w, 12, load);
        $round!(ch, $c, $d, $e, $a, $b, 0x5a82_7999_u32, $w, 13, load);
        $round!(ch, $b, $c, $d, $e, $a, 0x5a82_7999_u32, $w, 14, load);
        $round!(ch, $a, $b, $c, $d, $e, 0x5a82_7999_u32, $w, 15, load);
        $round!(ch, $e, $a, $b, $c, $d, 0x5a82_7999_u32, $w, 0, [13, 8, 2]);
        $round!(ch, $d, $e, $a, $b, $c, 0x5a82_7999_u32, $w, 1, [14, 9, 3]);
        $round!(ch, $c, $d, $e, $a, $b, 0x5a82_7999_u32, $w, 2, [15, 10, 4]);
        $round!(ch, $b, $c, $d, $e, $a, 0x5a82_7999_u32, $w, 3, [0, 11, 5]);
        $round!(
            parity,
            $a,
            $b,
            $c,
            $d,
            $e,
            0x6ed9_eba1_u32,
            $w,
            4,
            [1, 12, 6]
        );
        $round!(
            parity,
            $e,
            $a,
            $b,
            $c,
            $d,
            0x6ed9_eba1_u32,
            $w,
            5,
            [2, 13, 7]
        );
        $round!(
            parity,
            $d,
            $e,
            $a,
            $b,
            $c,
            0x6ed9_eba1_u32,
            $w,
            6,
            [3, 14, 8]
        );
        $round!(
            parity,
            $c,
            $d,
            $e,
            $a,
            $b,
            0x6ed9_eba1_u32,
            $w,
            7,
            [4, 15, 9]
        );
        $round!(
            parity,
            $b,
            $c,
            $d,
            $e,
            $a,
            0x6ed9_eba1_u32,
            $w,
            8,
            [5, 0, 10]
        );
        $round!(
            parity,
            $a,
            $b,
            $c,
            $d,
            $e,
            0x6ed9_eba1_u32,
            $w,
            9,
            [6, 1, 11]
        );
        $round!(
            parity,
            $e,
            $a,
            $b,
            $c,
            $d,
            0x6ed9_eba1_u32,
            $w,
            10,
            [7, 2, 12]
        );
        $round!(
            parity,
            $d,
            $e,
            $a,
            $b,
            $c,
            0x6ed9_eba1_u32,
            $w,
            11,
            [8, 3, 13]
        );
        $round!(
            parity,
            $c,
            $d,
            $e,
            $a,
            $b,
            0x6ed9_eba1_u32,
            $w,
            12,
            [9, 4, 14]
        );
        $round!(
            parity,
            $b,
            $c,
            $d,
            $e,
            $a,
            0x6ed9_eba1_u32,
            $w,
            13,
            [10, 5, 15]
        );
        $round!(
            parity,
            $a,
            $b,
            $c,
            $d,
            $e,
            0x6ed9_eba1_u32,
            $w,
            14,
            [11, 6, 0]
        );
        $round!(
            parity,
            $e,
            $a,
            $b,
            $c,
            $d,
            0x6ed9_eba1_u32,
            $w,
            15,
            [12, 7, 1]
        );
        $round!(
            parity,
            $d,
            $e,
            $a,
            $b,
            $c,
            0x6ed9_eba1_u32,
            $w,
            0,
            [13, 8, 2]
        );
        $round!(
            parity,
            $c,
            $d,
            $e,
            $a,
            $b,
            0x6ed9_eba1_u32,
            $w,
            1,
            [14, 9, 3]
        );
        $round!(
            parity,
            $b,
            $c,
            $d,
            $e,
            $a,
            0x6ed9_eba1_u32,
            $w,
            2,
            [15, 10, 4]
        );
        $round!(
            parity,
            $a,
            $b,
            $c,
            $d,
            $e,
            0x6ed9_eba1_u32,
            $w,
            3,
            [0, 11, 5]
        );
        $round!(
            parity,
            $e,
            $a,
            $b,
            $c,
            $d,
            0x6ed9_eba1_u32,
            $w,
            4,
            [1, 12, 6]
        );
        $round!(
            parity,
            $d,
            $e,
            $a,
            $b,
            $c,
            0x6ed9_eba1_u32,
            $w,
            5,
            [2, 13, 7]
        );
        $round!(
            parity,
            $c,
            $d,
            $e,
            $a,
            $b,
            0x6ed9_eba1_u32,
            $w,
            6,
            [3, 14, 8]
        );
        $round!(
            parity,
            $b,
            $c,
            $d,
            $e,
            $a,
            0x6ed9_eba1_u32,
            $w,
            7,
            [4, 15, 9]
        );
        $round!(maj, $a, $b, $c, $d, $e, 0x8f1b_bcdc_u32, $w, 8, [5, 0, 10]);
        $round!(maj, $e, $a, $b, $c, $d, 0x8f1b_bcdc_u32, $w, 9, [6, 1, 11]);
        $round!(maj, $d, $e, $a, $b, $c, 0x8f1b_bcdc_u32, $w, 10, [7, 2, 12]);
        $round!(maj, $c, $d, $e, $a, $b, 0x8f1b_bcdc_u32, $w, 11, [8, 3, 13]);
        $round!(maj, $b, $c, $d, $e, $a, 0x8f1b_bcdc_u32, $w, 12, [9, 4, 14]);
        $round!(
            maj,
            $a,
            $b,
            $c,
            $d,
            $e,
            0x8f1b_bcdc_u32,
            $w,
            13,
            [10, 5, 15]
        );
        $round!(maj, $e, $a, $b, $c, $d, 0x8f1b_bcdc_u32, $w, 14, [11, 6, 0]);
        $round!(maj, $d, $e, $a, $b, $c, 0x8f1b_bcdc_u32, $w, 15, [12, 7, 1]);
        $round!(maj, $c, $d, $e, $a, $b, 0x8f1b_bcdc_u32, $w, 0, [13, 8, 2]);
        $round!(maj, $b, $c, $d, $e, $a, 0x8f1b_bcdc_u32, $w, 1, [14, 9, 3]);
        $round!(maj, $a, $b, $c, $d, $e, 0x8f1b_bcdc_u32, $w, 2, [15, 10, 4]);
        $round!(maj, $e, $a, $b, $c, $d, 0x8f1b_bcdc_u32, $w, 3, [0, 11, 5]);
        $round!(maj, $d, $e, $a, $b, $c, 0x8f1b_bcdc_u32, $w, 4, [1, 12, 6]);
        $round!(maj, $c, $d, $e, $a, $b, 0x8f1b_bcdc_u32, $w, 5, [2, 13, 7]);
        $round!(maj, $b, $c, $d, $e, $a, 0x8f1b_bcdc_u32, $w, 6, [3, 14, 8]);
        $round!(maj, $a, $b, $c, $d, $e, 0x8f1b_bcdc_u32, $w, 7, [4, 15, 9]);
        $round!(maj, $e, $a, $b, $c, $d, 0x8f1b_bcdc_u32, $w, 8, [5, 0, 10]);
        $round!(maj, $d, $e, $a, $b, $c, 0x8f1b_bcdc_u32, $w, 9, [6, 1, 11]);
        $round!(maj, $c, $d, $e, $a, $b, 0x8f1b_bcdc_u32, $w, 10, [7, 2, 12]);
        $round!(maj, $b, $c, $d, $e, $a, 0x8f1b_bcdc_u32, $w, 11, [8, 3, 13]);
        $round!(
            parity,
            $a,
            $b,
            $c,
            $d,
            $e,
            0xca62_c1d6_u32,
            $w,
            12,
            [9, 4, 14]
        );
        $round!(
            parity,
            $e,
            $a,
            $b,
            $c,
            $d,
            0xca62_c1d6_u32,
            $w,
            13,
            [10, 5, 15]
        );
        $round!(
            parity,
            $d,
            $e,
            $a,
            $b,
            $c,
            0xca62_c1d6_u32,
            $w,
            14,
            [11, 6, 0]
        );
        $round!(
            parity,
            $c,
            $d,
            $e,
            $a,
            $b,
            0xca62_c1d6_u32,
            $w,
            15,
            [12, 7, 1]
        );
        $round!(
            parity,
            $b,
            $c,
            $d,
            $e,
            $a,
            0xca62_c1d6_u32,
            $w,
            0,
            [13, 8, 2]
        );
        $round!(
            parity,
            $a,
            $b,
            $c,
            $d,
            $e,
            0xca62_c1d6_u32,
            $w,
            1,
            [14, 9, 3]
        );
        $round!(
            parity,
            $e,
            $a,
            $b,
            $c,
            $d,
            0xca62_c1d6_u32,
            $w,
            2,
            [15, 10, 4]
        );
        $round!(
            parity,
            $d,
            $e,
            $a,
            $b,
            $c,
            0xca62_c1d6_u32,
            $w,
            3,
            [0, 11, 5]
        );
        $round!(
            parity,
            $c,
            $d,
            $e,
            $a,
            $b,
            0xca62_c1d6_u32,
            $w,
            4,
            [1, 12, 6]
        );
        $round!(
            parity,
            $b,
            $c,
            $d,
            $e,
            $a,
            0xca62_c1d6_u32,
            $w,
            5,
            [2, 13, 7]
        );
        $round!(
            parity,
            $a,
            $b,
            $c,
            $d,
            $e,
            0xca62_c1d6_u32,
            $w,
            6,
            [3, 14, 8]
        );
        $round!(
            parity,
            $e,
            $a,
            $b,
            $c,
            $d,
            0xca62_c1d6_u32,
            $w,
            7,
            [4, 15, 9]
        );
        $round!(
            parity,
            $d,
            $e,
            $a,
            $b,
            $c,
            0xca62_c1d6_u32,
            $w,
            8,
            [5, 0, 10]
        );
        $round!(
            parity,
            $c,
            $d,
            $e,
            $a,
            $b,
            0xca62_c1d6_u32,
            $w,
            9,
            [6, 1, 11]
        );
        $round!(
            parity,
            $b,
            $c,
            $d,
            $e,
            $a,
            0xca62_c1d6_u32,
            $w,
            10,
            [7, 2, 12]
        );
        $round!(
            parity,
            $a,
            $b,
            $c,
            $d,
            $e,
            0xca62_c1d6_u32,
            $w,
            11,
            [8, 3, 13]
        );
        $round!(
            parity,
            $e,
            $a,
            $b,
            $c,
            $d,
            0xca62_c1d6_u32,
            $w,
            12,
            [9, 4, 14]
        );
        $round!(
            parity,
            $d,
            $e,
            $a,
            $b,
            $c,
            0xca62_c1d6_u32,
            $w,
            13,
            [10, 5, 15]
        );
        $round!(
            parity,
            $c,
            $d,
            $e,
            $a,
            $b,
            0xca62_c1d6_u32,
            $w,
            14,
            [11, 6, 0]
        );
        $round!(
            parity,
            $b,
            $c,
            $d,
            $e,
            $a,
            0xca62_c1d6_u32,
            $w,
            15,
            [12, 7, 1]
        );
    };
}

pub(super) use sha1_rounds;
