//! Portable SHA-1 lane kernel: [`LANES`] SHA-1 states as arrays of `u32`, one round applied
//! lane by lane (the compiler turns the lane loops into whatever vectors the target has, SSE2
//! on x86-64). It is the fallback for CPUs without AVX2; where the CPU has SHA-NI, the engine
//! prefers one scalar stream per busy lane when few are busy.

use super::{MD5_MAX_LANES, State, sha1_rounds::sha1_rounds};

/// Lanes of the portable kernel.
pub(super) const LANES: usize = 4;
const L: usize = LANES;

type V = [u32; L];

#[inline(always)]
fn ch(b: V, c: V, d: V) -> V {
    core::array::from_fn(|i| d[i] ^ (b[i] & (c[i] ^ d[i])))
}

#[inline(always)]
fn parity(b: V, c: V, d: V) -> V {
    core::array::from_fn(|i| b[i] ^ c[i] ^ d[i])
}

#[inline(always)]
fn maj(b: V, c: V, d: V) -> V {
    core::array::from_fn(|i| (b[i] & c[i]) | (d[i] & (b[i] | c[i])))
}

/// Compresses `n` blocks of `src[lane]` into lanes `0..LANES` of `st`; every `src[lane]` of
/// those lanes holds at least `64 * n` bytes.
pub(super) fn compress(st: &mut State, src: &[&[u8]; MD5_MAX_LANES], n: usize) {
    let mut s = [[0u32; L]; 5];
    for (dst, row) in s.iter_mut().zip(st.iter()) {
        dst.copy_from_slice(&row[..L]);
    }
    for blk in 0..n {
        let mut w = [[0u32; L]; 16];
        for (lane, bytes) in src[..L].iter().enumerate() {
            let block = &bytes[64 * blk..64 * blk + 64];
            for (word, quad) in w.iter_mut().zip(block.chunks_exact(4)) {
                word[lane] = u32::from_be_bytes([quad[0], quad[1], quad[2], quad[3]]);
            }
        }
        let [mut a, mut b, mut c, mut d, mut e] = s;
        macro_rules! round {
            ($f:ident, $a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $k:expr, $w:ident, $t:expr) => {
                let i = $t % 16;
                if $t >= 16 {
                    let (x, y, z) = (($t + 13) % 16, ($t + 8) % 16, ($t + 2) % 16);
                    for lane in 0..L {
                        $w[i][lane] =
                            ($w[x][lane] ^ $w[y][lane] ^ $w[z][lane] ^ $w[i][lane]).rotate_left(1);
                    }
                }
                let f = $f($b, $c, $d);
                for lane in 0..L {
                    $e[lane] = $e[lane]
                        .wrapping_add($a[lane].rotate_left(5))
                        .wrapping_add(f[lane])
                        .wrapping_add($k)
                        .wrapping_add($w[i][lane]);
                    $b[lane] = $b[lane].rotate_left(30);
                }
            };
        }
        sha1_rounds!(round, a, b, c, d, e, w);
        for (acc, new) in s.iter_mut().zip([a, b, c, d, e]) {
            for (x, y) in acc.iter_mut().zip(new) {
                *x = x.wrapping_add(y);
            }
        }
    }
    for (row, src) in st.iter_mut().zip(s) {
        row[..L].copy_from_slice(&src);
    }
}
