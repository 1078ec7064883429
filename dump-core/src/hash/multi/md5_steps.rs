//! The 64 steps of the MD5 compression function (RFC 1321, section 3.4), written once for
//! every lane kernel.
//!
//! `md5_steps!(step, a, b, c, d, w)` expands to `step!(f, a, b, c, d, w[m], s, k)` for each
//! step in order: `f` is the round function (`ff`, `gg`, `hh`, `ii`, defined by the kernel for
//! its lane type), `w[m]` the message word, `s` the left rotation and `k` the additive
//! constant `floor(abs(sin(i + 1)) * 2^32)`. The register roles rotate as in the RFC.

macro_rules! md5_steps {
    ($step:ident, $a:ident, $b:ident, $c:ident, $d:ident, $w:ident) => {
        $step!(ff, $a, $b, $c, $d, $w[0], 7, 0xd76aa478_u32);
        $step!(ff, $d, $a, $b, $c, $w[1], 12, 0xe8c7b756_u32);
        $step!(ff, $c, $d, $a, $b, $w[2], 17, 0x242070db_u32);
        $step!(ff, $b, $c, $d, $a, $w[3], 22, 0xc1bdceee_u32);
        $step!(ff, $a, $b, $c, $d, $w[4], 7, 0xf57c0faf_u32);
        $step!(ff, $d, $a, $b, $c, $w[5], 12, 0x4787c62a_u32);
        $step!(ff, $c, $d, $a, $b, $w[6], 17, 0xa8304613_u32);
        $step!(ff, $b, $c, $d, $a, $w[7], 22, 0xfd469501_u32);
        $step!(ff, $a, $b, $c, $d, $w[8], 7, 0x698098d8_u32);
        $step!(ff, $d, $a, $b, $c, $w[9], 12, 0x8b44f7af_u32);
        $step!(ff, $c, $d, $a, $b, $w[10], 17, 0xffff5bb1_u32);
        $step!(ff, $b, $c, $d, $a, $w[11], 22, 0x895cd7be_u32);
        $step!(ff, $a, $b, $c, $d, $w[12], 7, 0x6b901122_u32);
        $step!(ff, $d, $a, $b, $c, $w[13], 12, 0xfd987193_u32);
        $step!(ff, $c, $d, $a, $b, $w[14], 17, 0xa679438e_u32);
        $step!(ff, $b, $c, $d, $a, $w[15], 22, 0x49b40821_u32);
        $step!(gg, $a, $b, $c, $d, $w[1], 5, 0xf61e2562_u32);
        $step!(gg, $d, $a, $b, $c, $w[6], 9, 0xc040b340_u32);
        $step!(gg, $c, $d, $a, $b, $w[11], 14, 0x265e5a51_u32);
        $step!(gg, $b, $c, $d, $a, $w[0], 20, 0xe9b6c7aa_u32);
        $step!(gg, $a, $b, $c, $d, $w[5], 5, 0xd62f105d_u32);
        $step!(gg, $d, $a, $b, $c, $w[10], 9, 0x02441453_u32);
        $step!(gg, $c, $d, $a, $b, $w[15], 14, 0xd8a1e681_u32);
        $step!(gg, $b, $c, $d, $a, $w[4], 20, 0xe7d3fbc8_u32);
        $step!(gg, $a, $b, $c, $d, $w[9], 5, 0x21e1cde6_u32);
        $step!(gg, $d, $a, $b, $c, $w[14], 9, 0xc33707d6_u32);
        $step!(gg, $c, $d, $a, $b, $w[3], 14, 0xf4d50d87_u32);
        $step!(gg, $b, $c, $d, $a, $w[8], 20, 0x455a14ed_u32);
        $step!(gg, $a, $b, $c, $d, $w[13], 5, 0xa9e3e905_u32);
        $step!(gg, $d, $a, $b, $c, $w[2], 9, 0xfcefa3f8_u32);
        $step!(gg, $c, $d, $a, $b, $w[7], 14, 0x676f02d9_u32);
        $step!(gg, $b, $c, $d, $a, $w[12], 20, 0x8d2a4c8a_u32);
        $step!(hh, $a, $b, $c, $d, $w[5], 4, 0xfffa3942_u32);
        $step!(hh, $d, $a, $b, $c, $w[8], 11, 0x8771f681_u32);
        $step!(hh, $c, $d, $a, $b, $w[11], 16, 0x6d9d6122_u32);
        $step!(hh, $b, $c, $d, $a, $w[14], 23, 0xfde5380c_u32);
        $step!(hh, $a, $b, $c, $d, $w[1], 4, 0xa4beea44_u32);
        $step!(hh, $d, $a, $b, $c, $w[4], 11, 0x4bdecfa9_u32);
        $step!(hh, $c, $d, $a, $b, $w[7], 16, 0xf6bb4b60_u32);
        $step!(hh, $b, $c, $d, $a, $w[10], 23, 0xbebfbc70_u32);
        $step!(hh, $a, $b, $c, $d, $w[13], 4, 0x289b7ec6_u32);
        $step!(hh, $d, $a, $b, $c, $w[0], 11, 0xeaa127fa_u32);
        $step!(hh, $c, $d, $a, $b, $w[3], 16, 0xd4ef3085_u32);
        $step!(hh, $b, $c, $d, $a, $w[6], 23, 0x04881d05_u32);
        $step!(hh, $a, $b, $c, $d, $w[9], 4, 0xd9d4d039_u32);
        $step!(hh, $d, $a, $b, $c, $w[12], 11, 0xe6db99e5_u32);
        $step!(hh, $c, $d, $a, $b, $w[15], 16, 0x1fa27cf8_u32);
        $step!(hh, $b, $c, $d, $a, $w[2], 23, 0xc4ac5665_u32);
        $step!(ii, $a, $b, $c, $d, $w[0], 6, 0xf4292244_u32);
        $step!(ii, $d, $a, $b, $c, $w[7], 10, 0x432aff97_u32);
        $step!(ii, $c, $d, $a, $b, $w[14], 15, 0xab9423a7_u32);
        $step!(ii, $b, $c, $d, $a, $w[5], 21, 0xfc93a039_u32);
        $step!(ii, $a, $b, $c, $d, $w[12], 6, 0x655b59c3_u32);
        $step!(ii, $d, $a, $b, $c, $w[3], 10, 0x8f0ccc92_u32);
        $step!(ii, $c, $d, $a, $b, $w[10], 15, 0xffeff47d_u32);
        $step!(ii, $b, $c, $d, $a, $w[1], 21, 0x85845dd1_u32);
        $step!(ii, $a, $b, $c, $d, $w[8], 6, 0x6fa87e4f_u32);
        $step!(ii, $d, $a, $b, $c, $w[15], 10, 0xfe2ce6e0_u32);
        $step!(ii, $c, $d, $a, $b, $w[6], 15, 0xa3014314_u32);
        $step!(ii, $b, $c, $d, $a, $w[13], 21, 0x4e0811a1_u32);
        $step!(ii, $a, $b, $c, $d, $w[4], 6, 0xf7537e82_u32);
        $step!(ii, $d, $a, $b, $c, $w[11], 10, 0xbd3af235_u32);
        $step!(ii, $c, $d, $a, $b, $w[2], 15, 0x2ad7d2bb_u32);
        $step!(ii, $b, $c, $d, $a, $w[9], 21, 0xeb86d391_u32);
    };
}

pub(super) use md5_steps;
