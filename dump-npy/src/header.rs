//! Encoding of `.npy` headers exactly as MindSpore 2.10 writes them.
//!
//! Layout (all versions): the magic `\x93NUMPY`, a major and a minor version byte, the header
//! length `HLEN` (u16 LE for 1.0, u32 LE for 2.0), then `HLEN` bytes: the dict text
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2,3,), }`, `pad` spaces and `\n`.
//!
//! MindSpore's dict differs from numpy's in two ways that matter for byte equality:
//! - every dimension is followed by a comma and there are no spaces: `()`, `(5,)`, `(2,1,8,8,)`;
//! - `pad = 64 - ((11 + len(dict)) mod 64)` is never 0: when the header would already end on
//!   a 64-byte boundary, 64 more spaces are added.
//!
//! Version 2.0 (u32 length, `pad = 64 - ((13 + len(dict)) mod 64)`) is used when
//! `11 + len(dict) > 65535`. Nothing here allocates; headers of any size are streamed through a
//! small stack buffer.

use crate::{Error, NpySink};

/// The six magic bytes every `.npy` file starts with.
pub const MAGIC: [u8; 6] = *b"\x93NUMPY";

/// The largest rank the writer emits and the reader accepts.
///
/// numpy itself builds arrays of at most 64 dimensions; the limit here is higher so that
/// version 2.0 headers (above 65535 bytes) can be produced and read back.
pub const MAX_RANK: usize = 1 << 16;

/// The largest header (magic to final `\n`, i.e. the data offset) the writer emits and the
/// reader accepts: 1 MiB.
pub const MAX_HEADER_LEN: usize = 1 << 20;

/// Longest descr accepted by [`encode_header`] and friends.
pub const MAX_DESCR_LEN: usize = 16;

const DICT_HEAD: &[u8] = b"{'descr': '";
const DICT_MID: &[u8] = b"', 'fortran_order': False, 'shape': (";
const DICT_TAIL: &[u8] = b"), }";
const SPACES: [u8; 64] = [b' '; 64];

/// Where and how large each part of a header is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    /// Major version: 1 or 2.
    major: u8,
    /// Bytes of the dict text.
    dict: usize,
    /// Spaces after the dict (1..=64).
    pad: usize,
    /// Magic + version + length field + dict + pad + `\n`.
    total: usize,
}

impl Layout {
    /// Bytes before the dict: magic, version and the length field.
    const fn prefix(self) -> usize {
        if self.major == 1 { 10 } else { 12 }
    }

    /// The `HLEN` field: dict + pad + `\n`.
    const fn hlen(self) -> usize {
        self.dict + self.pad + 1
    }
}

/// Decimal digits of `n`.
const fn decimal_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

fn check_descr(descr: &str) -> Result<(), Error> {
    let ok = !descr.is_empty()
        && descr.len() <= MAX_DESCR_LEN
        && descr
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'\'' && b != b'\\');
    if ok { Ok(()) } else { Err(Error::InvalidDescr) }
}

fn layout(descr: &str, shape: &[usize]) -> Result<Layout, Error> {
    check_descr(descr)?;
    if shape.len() > MAX_RANK {
        return Err(Error::RankTooHigh { max: MAX_RANK });
    }
    // Bounded by MAX_RANK * 21 + 80: no overflow even on 32-bit targets.
    let dims: usize = shape.iter().map(|&d| decimal_len(d) + 1).sum();
    let dict = DICT_HEAD.len() + descr.len() + DICT_MID.len() + dims + DICT_TAIL.len();
    let (major, fixed) = if 11 + dict > 65535 { (2, 13) } else { (1, 11) };
    let pad = 64 - (fixed + dict) % 64;
    let total = fixed - 1 + dict + pad + 1;
    if total > MAX_HEADER_LEN {
        return Err(Error::HeaderTooLong {
            len: total,
            max: MAX_HEADER_LEN,
        });
    }
    Ok(Layout {
        major,
        dict,
        pad,
        total,
    })
}

/// Total header bytes (the data offset) of a MindSpore-style header for `descr` and `shape`,
/// without writing anything. Always a multiple of 64.
///
/// ```
/// assert_eq!(dump_npy::header_len("<f4", &[2, 5]), Ok(128));
/// ```
pub fn header_len(descr: &str, shape: &[usize]) -> Result<usize, Error> {
    layout(descr, shape).map(|l| l.total)
}

/// Emits the header in pieces, in order, through `emit`.
fn emit_header<E>(
    descr: &str,
    shape: &[usize],
    l: Layout,
    emit: &mut impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut prefix = [0u8; 12];
    prefix[..6].copy_from_slice(&MAGIC);
    prefix[6] = l.major;
    prefix[7] = 0;
    // `hlen` <= MAX_HEADER_LEN, so both narrowing conversions are exact.
    if l.major == 1 {
        prefix[8..10].copy_from_slice(&(l.hlen() as u16).to_le_bytes());
    } else {
        prefix[8..12].copy_from_slice(&(l.hlen() as u32).to_le_bytes());
    }
    emit(&prefix[..l.prefix()])?;
    emit(DICT_HEAD)?;
    emit(descr.as_bytes())?;
    emit(DICT_MID)?;
    for &d in shape {
        let mut digits = [0u8; 21];
        let n = decimal_len(d);
        let mut v = d;
        for slot in digits[..n].iter_mut().rev() {
            *slot = b'0' + (v % 10) as u8;
            v /= 10;
        }
        digits[n] = b',';
        emit(&digits[..=n])?;
    }
    emit(DICT_TAIL)?;
    emit(&SPACES[..l.pad])?;
    emit(b"\n")
}

/// Encodes the MindSpore-style header for `descr` and `shape` into `out`; returns its length.
///
/// Errors: [`Error::InvalidDescr`], [`Error::RankTooHigh`], [`Error::HeaderTooLong`], and
/// [`dump_core::Error::BufferTooSmall`] (wrapped in [`Error::Core`]) when `out` is shorter than
/// [`header_len`].
///
/// ```
/// let mut buf = [0u8; 128];
/// let n = dump_npy::encode_header("<f4", &[2, 3], &mut buf).unwrap();
/// assert_eq!(n, 128);
/// assert_eq!(&buf[..10], b"\x93NUMPY\x01\x00\x76\x00");
/// assert!(buf[10..].starts_with(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,3,), }  "));
/// assert_eq!(buf[127], b'\n');
/// ```
pub fn encode_header(descr: &str, shape: &[usize], out: &mut [u8]) -> Result<usize, Error> {
    let l = layout(descr, shape)?;
    if out.len() < l.total {
        return Err(Error::Core(dump_core::Error::BufferTooSmall {
            needed: l.total,
            available: out.len(),
        }));
    }
    let mut pos = 0;
    emit_header(descr, shape, l, &mut |piece: &[u8]| -> Result<(), Error> {
        out[pos..pos + piece.len()].copy_from_slice(piece);
        pos += piece.len();
        Ok(())
    })?;
    Ok(pos)
}

/// Writes the MindSpore-style header for `descr` and `shape` into `sink`; returns its length.
///
/// The pieces are gathered in a 256-byte stack buffer, so a typical header reaches the sink in
/// one `write_all` call; longer (version 2.0) headers take several.
pub fn write_header<S: NpySink + ?Sized>(
    sink: &mut S,
    descr: &str,
    shape: &[usize],
) -> Result<usize, S::Error> {
    let l = layout(descr, shape)?;
    let mut stage = [0u8; 256];
    let mut fill = 0usize;
    emit_header(
        descr,
        shape,
        l,
        &mut |mut piece: &[u8]| -> Result<(), S::Error> {
            while !piece.is_empty() {
                if fill == stage.len() {
                    sink.write_all(&stage)?;
                    fill = 0;
                }
                let n = piece.len().min(stage.len() - fill);
                stage[fill..fill + n].copy_from_slice(&piece[..n]);
                fill += n;
                piece = &piece[n..];
            }
            Ok(())
        },
    )?;
    if fill > 0 {
        sink.write_all(&stage[..fill])?;
    }
    Ok(l.total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SliceSink;

    fn encode(descr: &str, shape: &[usize]) -> Vec<u8> {
        let n = header_len(descr, shape).unwrap();
        let mut v = vec![0u8; n];
        assert_eq!(encode_header(descr, shape, &mut v), Ok(n));
        v
    }

    #[test]
    fn mindspore_dict_text() {
        let h = encode("<f4", &[2, 5]);
        assert_eq!(h.len(), 128);
        let text = core::str::from_utf8(&h[10..]).unwrap();
        assert_eq!(
            text.trim_end(),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,5,), }"
        );
        assert!(text.ends_with(" \n"));
        let scalar = encode("|b1", &[]);
        assert!(
            scalar[10..].starts_with(b"{'descr': '|b1', 'fortran_order': False, 'shape': (), }")
        );
        let one = encode("<c16", &[5]);
        assert!(
            one[10..].starts_with(b"{'descr': '<c16', 'fortran_order': False, 'shape': (5,), }")
        );
    }

    #[test]
    fn pad_is_never_zero() {
        // For "<f4" and rank r of ones: 11 + len(dict) = 66 + 2r, a multiple of 64 at r = 31.
        let mut aligned = 0;
        for r in 0..200 {
            let shape = vec![1usize; r];
            let l = layout("<f4", &shape).unwrap();
            assert!((1..=64).contains(&l.pad));
            assert_eq!(l.total % 64, 0);
            assert_eq!(encode("<f4", &shape).len(), l.total);
            if (11 + l.dict).is_multiple_of(64) {
                assert_eq!(l.pad, 64, "rank {r}: 64 extra spaces when already aligned");
                aligned += 1;
            }
        }
        assert_eq!(layout("<f4", &[1; 31]).unwrap().pad, 64);
        assert!(aligned >= 3);
    }

    #[test]
    fn version_two_above_65535() {
        // Each dim `1,` is two bytes; 11 + dict crosses 65535 between these ranks.
        let mut switched = None;
        for r in 32_700..32_800 {
            let l = layout("<f4", &vec![1usize; r]).unwrap();
            if l.major == 2 {
                assert!(11 + l.dict > 65535);
                assert_eq!((13 + l.dict + l.pad) % 64, 0);
                switched = Some(r);
                break;
            }
            assert!(l.hlen() <= 65535);
        }
        let r = switched.expect("v2 threshold inside the scanned ranks");
        let h = encode("<f4", &vec![1usize; r]);
        assert_eq!(&h[..8], b"\x93NUMPY\x02\x00");
        let hlen = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
        assert_eq!(hlen + 12, h.len());
        assert_eq!(h.len() % 64, 0);
        assert_eq!(*h.last().unwrap(), b'\n');
    }

    #[test]
    fn sink_and_buffer_agree() {
        for shape in [&[][..], &[7], &[2, 1, 8, 8], &[usize::MAX, 0, 3]] {
            let want = encode("<i8", shape);
            let mut buf = vec![0u8; want.len()];
            let mut sink = SliceSink::new(&mut buf);
            assert_eq!(write_header(&mut sink, "<i8", shape), Ok(want.len()));
            assert_eq!(sink.written(), &want[..]);
        }
        // A long header goes through the stage buffer several times.
        let shape = vec![123_456usize; 5000];
        let want = encode("<f2", &shape);
        let mut buf = vec![0u8; want.len()];
        let mut sink = SliceSink::new(&mut buf);
        assert_eq!(write_header(&mut sink, "<f2", &shape), Ok(want.len()));
        assert_eq!(sink.written(), &want[..]);
    }

    #[test]
    fn bad_input_errors() {
        let mut small = [0u8; 127];
        assert_eq!(
            encode_header("<f4", &[2, 5], &mut small),
            Err(Error::Core(dump_core::Error::BufferTooSmall {
                needed: 128,
                available: 127
            }))
        );
        for bad in ["", "<f'4", "a\\b", "<f4\n", "0123456789abcdefg"] {
            assert_eq!(header_len(bad, &[1]), Err(Error::InvalidDescr), "{bad:?}");
        }
        assert_eq!(
            header_len("<f4", &vec![0usize; MAX_RANK + 1]),
            Err(Error::RankTooHigh { max: MAX_RANK })
        );
        assert_eq!(
            header_len("<f4", &vec![usize::MAX; MAX_RANK]),
            Err(Error::HeaderTooLong {
                len: header_len_unchecked(&vec![usize::MAX; MAX_RANK]),
                max: MAX_HEADER_LEN
            })
        );
    }

    fn header_len_unchecked(shape: &[usize]) -> usize {
        let dims: usize = shape.iter().map(|&d| decimal_len(d) + 1).sum();
        let dict = DICT_HEAD.len() + 3 + DICT_MID.len() + dims + DICT_TAIL.len();
        (13 + dict).div_ceil(64) * 64
            + if (13 + dict).is_multiple_of(64) {
                64
            } else {
                0
            }
    }

    #[test]
    fn decimal_lengths() {
        assert_eq!(decimal_len(0), 1);
        assert_eq!(decimal_len(9), 1);
        assert_eq!(decimal_len(10), 2);
        assert_eq!(decimal_len(usize::MAX), usize::MAX.to_string().len());
    }
}
