//! Test helpers shared by the conversion tests: distinct element patterns and naive index math.

/// `count` elements of `elem` bytes, each distinct (the element index, little-endian, with a
/// per-byte salt so that no two bytes of one element are equal), never all-zero.
pub(crate) fn elems(count: usize, elem: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(count * elem);
    for i in 0..count {
        let x = (i as u64 + 1).to_le_bytes();
        for b in 0..elem {
            v.push(x.get(b).copied().unwrap_or(0) ^ (0x5A + b as u8));
        }
    }
    v
}

/// The multi-index of flat row-major index `i` in `shape`.
pub(crate) fn unravel<const R: usize>(mut i: usize, shape: &[usize]) -> [usize; R] {
    let mut idx = [0; R];
    for k in (0..R).rev() {
        idx[k] = i % shape[k];
        i /= shape[k];
    }
    idx
}
