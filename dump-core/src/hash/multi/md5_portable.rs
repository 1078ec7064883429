//! Portable lane kernel: [`LANES`] MD5 states as arrays of `u32`, one step applied lane by
//! lane (the compiler turns the lane loops into whatever vectors the target has, SSE2 on
//! x86-64).
//!
//! Lane count measured on the benchmark set (x86-64 baseline build, AMD EPYC): 2 lanes
//! 0.88 GB/s, 4 lanes 1.55–1.59, 8 lanes 0.94, 16 lanes 0.69, one stream 0.63.

use super::{MD5_MAX_LANES, State, md5_steps::md5_steps};

/// Lanes of the portable kernel.
pub(super) const LANES: usize = 4;
const L: usize = LANES;

#[inline(always)]
fn ff(b: u32, c: u32, d: u32) -> u32 {
    d ^ (b & (c ^ d))
}

#[inline(always)]
fn gg(b: u32, c: u32, d: u32) -> u32 {
    c ^ (d & (b ^ c))
}

#[inline(always)]
fn hh(b: u32, c: u32, d: u32) -> u32 {
    b ^ c ^ d
}

#[inline(always)]
fn ii(b: u32, c: u32, d: u32) -> u32 {
    c ^ (b | !d)
}

/// Compresses `n` blocks of `src[lane]` into lanes `0..LANES` of `st`; every `src[lane]` of
/// those lanes holds at least `64 * n` bytes.
pub(super) fn compress(st: &mut State, src: &[&[u8]; MD5_MAX_LANES], n: usize) {
    let mut s = [[0u32; L]; 4];
    for (dst, row) in s.iter_mut().zip(st.iter()) {
        dst.copy_from_slice(&row[..L]);
    }
    for blk in 0..n {
        let mut w = [[0u32; L]; 16];
        for (lane, bytes) in src[..L].iter().enumerate() {
            let block = &bytes[64 * blk..64 * blk + 64];
            for (word, quad) in w.iter_mut().zip(block.chunks_exact(4)) {
                word[lane] = u32::from_le_bytes([quad[0], quad[1], quad[2], quad[3]]);
            }
        }
        let [mut a, mut b, mut c, mut d] = s;
        macro_rules! step {
            ($f:ident, $a:ident, $b:ident, $c:ident, $d:ident, $w:expr, $s:literal, $k:literal) => {
                for lane in 0..L {
                    let t = $a[lane]
                        .wrapping_add($w[lane].wrapping_add($k))
                        .wrapping_add($f($b[lane], $c[lane], $d[lane]));
                    $a[lane] = $b[lane].wrapping_add(t.rotate_left($s));
                }
            };
        }
        md5_steps!(step, a, b, c, d, w);
        for (acc, new) in s.iter_mut().zip([a, b, c, d]) {
            for (x, y) in acc.iter_mut().zip(new) {
                *x = x.wrapping_add(y);
            }
        }
    }
    for (row, src) in st.iter_mut().zip(s) {
        row[..L].copy_from_slice(&src);
    }
}
