//! `statistic.csv` header and rows, byte-identical to MindSpore 2.10 (spec §6 and §7).
//!
//! - Header: `Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape`,
//!   then `,` + the title of every category in order, then `\n` (no trailing comma).
//! - Row: every field followed by `,`, then `\n` (so a row ends with `,\n` and has one field more
//!   than the header). Shape is the only quoted field: `"(2,3)"`, `"(3)"`, `"()"`.
//! - Op Type and Op Name are written as given unless they hold `"`, `,`, CR or LF; then they are
//!   quoted with `"` doubled ([`write_field`]), so a csv reader never shifts a column. MindSpore
//!   writes them raw (it only replaces `,` in names); a name with a `"` broke its file.
//! - Host values: `%g` for max/min/avg/l2norm, plain decimal counts, lowercase hex digests.
//! - Device values ([`write_device_row`]): `%g` floats, decimal integers, `True`/`False`, `null`.
//!
//! The writers take any [`core::fmt::Write`] and never allocate; [`write_row_to_slice`] fills a
//! caller buffer. With `alloc`, [`header_string`], [`row_string`] and [`device_row_string`] return
//! owned strings.

use crate::{Category, CategorySet, Error, TensorId, TensorStats, precision::DeviceStats};
use core::fmt::Write;
use dump_core::{
    DType,
    fmt::{g, u64_str},
};

/// The fixed first ten columns of the header.
pub const BASE_HEADER: &str =
    "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape";

pub use crate::identity::Io;

/// The first ten fields of a row: who the tensor belongs to and what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowMeta<'a> {
    /// Op type, sanitised op name (as in the `.npy` file name: `Default_Add-op0`), task and
    /// stream ids, the paired file's timestamp, input or output and slot.
    pub id: TensorId<&'a str>,
    /// Bytes of the host tensor as loaded; see [`data_size`].
    pub data_size: u64,
    /// Element type (printed lowercase: `float16`, `bfloat16`, `int4`).
    pub dtype: DType,
    /// Dimensions (of the sample, for sampled tensors).
    pub shape: &'a [usize],
}

/// MindSpore's `Data Size` of `elems` elements of `dtype` as loaded on the host: the packed
/// storage (`bf16`: 2n, `int4`: n/2 rounded up, `uint1`: n/8 rounded up). For a sampled
/// tensor pass the sample's element count. `None` on overflow.
pub const fn data_size(dtype: DType, elems: usize) -> Option<u64> {
    match dtype.storage_bytes(elems) {
        Some(b) => Some(b as u64),
        None => None,
    }
}

/// Writes the header line (with its `\n`).
pub fn write_header<W: Write>(w: &mut W, categories: &CategorySet) -> Result<(), Error> {
    w.write_str(BASE_HEADER)?;
    for c in categories {
        w.write_char(',')?;
        w.write_str(c.title())?;
    }
    w.write_char('\n')?;
    Ok(())
}

/// `true` when `field` must be quoted to stay one csv field: it holds `"`, `,`, `\n` or `\r`.
pub fn field_needs_quotes(field: &str) -> bool {
    const LO: u64 = u64::from_le_bytes([0x01; 8]);
    const HI: u64 = u64::from_le_bytes([0x80; 8]);
    /// Whether a byte of `w` equals `b` (the zero-byte test on `w ^ b...b`).
    const fn has(w: u64, b: u8) -> bool {
        let x = w ^ (LO * b as u64);
        x.wrapping_sub(LO) & !x & HI != 0
    }
    let bytes = field.as_bytes();
    let mut words = bytes.chunks_exact(8);
    for c in &mut words {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        let w = u64::from_le_bytes(a);
        if has(w, b'"') || has(w, b',') || has(w, b'\n') || has(w, b'\r') {
            return true;
        }
    }
    words
        .remainder()
        .iter()
        .any(|b| matches!(b, b'"' | b',' | b'\n' | b'\r'))
}

/// Writes `field` as one csv field the way Python's `csv` module, pandas and MindSpore's own
/// test readers parse it: as is when [`field_needs_quotes`] is false (so every name MindSpore
/// writes keeps its bytes), otherwise in double quotes with each `"` doubled (RFC 4180).
pub fn write_field<W: Write>(w: &mut W, field: &str) -> Result<(), Error> {
    if !field_needs_quotes(field) {
        w.write_str(field)?;
        return Ok(());
    }
    w.write_char('"')?;
    for (i, part) in field.split('"').enumerate() {
        if i > 0 {
            w.write_str("\"\"")?;
        }
        w.write_str(part)?;
    }
    w.write_char('"')?;
    Ok(())
}

fn write_meta<W: Write>(w: &mut W, m: &RowMeta<'_>, plain_names: bool) -> Result<(), Error> {
    let id = &m.id;
    if plain_names {
        w.write_str(id.op_type)?;
        w.write_char(',')?;
        w.write_str(id.op_name)?;
        w.write_char(',')?;
    } else {
        write_field(w, id.op_type)?;
        w.write_char(',')?;
        write_field(w, id.op_name)?;
        w.write_char(',')?;
    }
    for v in [u64::from(id.task_id), u64::from(id.stream_id), id.timestamp] {
        w.write_str(u64_str(v).as_str())?;
        w.write_char(',')?;
    }
    w.write_str(id.io.as_str())?;
    w.write_char(',')?;
    for v in [u64::from(id.slot), m.data_size] {
        w.write_str(u64_str(v).as_str())?;
        w.write_char(',')?;
    }
    w.write_str(m.dtype.name())?;
    w.write_str(",\"(")?;
    for (i, d) in m.shape.iter().enumerate() {
        if i > 0 {
            w.write_char(',')?;
        }
        w.write_str(u64_str(*d as u64).as_str())?;
    }
    w.write_str(")\",")?;
    Ok(())
}

fn write_hex<W: Write>(w: &mut W, bytes: &[u8]) -> Result<(), Error> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    // A digest (16 or 20 bytes) in one write, not one per digit.
    let mut text = [0u8; 64];
    for chunk in bytes.chunks(text.len() / 2) {
        for (pair, &b) in text.chunks_exact_mut(2).zip(chunk) {
            pair[0] = DIGITS[usize::from(b >> 4)];
            pair[1] = DIGITS[usize::from(b & 15)];
        }
        let hex = &text[..chunk.len() * 2];
        // Only ASCII hex digits were written.
        w.write_str(core::str::from_utf8(hex).map_err(|_| core::fmt::Error)?)?;
    }
    Ok(())
}

/// Writes one host-statistics row (with its trailing `,\n`).
///
/// Returns `Ok(false)` and writes nothing for an empty tensor (`stats.summary` is `None`):
/// MindSpore writes no row for it. A digest column whose digest is missing from `stats` gives
/// [`Error::MissingHash`], also before anything is written.
pub fn write_row<W: Write>(
    w: &mut W,
    meta: &RowMeta<'_>,
    categories: &CategorySet,
    stats: &TensorStats,
) -> Result<bool, Error> {
    row(w, meta, categories, stats, false)
}

/// [`write_row`] for a caller that already made sure neither Op Type nor Op Name holds a byte
/// that needs quoting (`"`, `,`, CR, LF; see [`field_needs_quotes`]): they are written as
/// they are, without looking at them again. The same bytes as [`write_row`] for such names.
pub fn write_row_plain_names<W: Write>(
    w: &mut W,
    meta: &RowMeta<'_>,
    categories: &CategorySet,
    stats: &TensorStats,
) -> Result<bool, Error> {
    debug_assert!(!field_needs_quotes(meta.id.op_type) && !field_needs_quotes(meta.id.op_name));
    row(w, meta, categories, stats, true)
}

fn row<W: Write>(
    w: &mut W,
    meta: &RowMeta<'_>,
    categories: &CategorySet,
    stats: &TensorStats,
    plain_names: bool,
) -> Result<bool, Error> {
    let Some(s) = stats.summary.as_ref() else {
        return Ok(false);
    };
    if categories.needs_md5() && stats.md5.is_none() {
        return Err(Error::MissingHash(Category::Md5));
    }
    if categories.needs_sha1() && stats.sha1.is_none() {
        return Err(Error::MissingHash(Category::Sha1));
    }
    write_meta(w, meta, plain_names)?;
    for c in categories {
        let count = |v: u64| u64_str(v);
        match c {
            Category::Max => w.write_str(g(s.max_value()).as_str())?,
            Category::Min => w.write_str(g(s.min_value()).as_str())?,
            Category::Avg => w.write_str(g(s.avg()).as_str())?,
            Category::L2Norm => w.write_str(g(s.l2norm()).as_str())?,
            Category::Count => w.write_str(count(s.count).as_str())?,
            Category::NegativeZeroCount => w.write_str(count(s.neg).as_str())?,
            Category::PositiveZeroCount => w.write_str(count(s.pos).as_str())?,
            Category::NanCount => w.write_str(count(s.nan).as_str())?,
            Category::NegativeInfCount => w.write_str(count(s.neg_inf).as_str())?,
            Category::PositiveInfCount => w.write_str(count(s.pos_inf).as_str())?,
            Category::ZeroCount => w.write_str(count(s.zero).as_str())?,
            Category::Md5 => write_hex(w, stats.md5.as_ref().map_or(&[][..], |d| &d[..]))?,
            Category::Sha1 => write_hex(w, stats.sha1.as_ref().map_or(&[][..], |d| &d[..]))?,
        }
        w.write_char(',')?;
    }
    w.write_char('\n')?;
    Ok(true)
}

/// Size of the buffer [`row_in`] formats a row in.
pub const ROW_BUF: usize = 1024;

/// Room past the end of a piece that [`row_in`]'s fixed-size copies may write over (the
/// widest is a `%g` buffer, 16 bytes; names are copied 16 bytes at a time).
const ROW_SLACK: usize = 32;

/// `src` into the start of `dst` with fixed-size moves only (no `memcpy` call for the short
/// pieces of a row): 16-byte blocks, the last one overlapping the one before, or two
/// overlapping 8- or 4-byte words, or bytes; nothing past `dst[..src.len()]` is written.
/// `dst` must be at least `src.len()` bytes. Returns `src.len()`.
#[inline(always)]
fn put(dst: &mut [u8], src: &[u8]) -> usize {
    let n = src.len();
    if n >= 16 {
        let mut at = 0;
        while at + 16 < n {
            dst[at..at + 16].copy_from_slice(&src[at..at + 16]);
            at += 16;
        }
        dst[n - 16..n].copy_from_slice(&src[n - 16..n]);
    } else if n >= 8 {
        dst[..8].copy_from_slice(&src[..8]);
        dst[n - 8..n].copy_from_slice(&src[n - 8..n]);
    } else if n >= 4 {
        dst[..4].copy_from_slice(&src[..4]);
        dst[n - 4..n].copy_from_slice(&src[n - 4..n]);
    } else {
        for (d, &b) in dst.iter_mut().zip(src) {
            *d = b;
        }
    }
    n
}

/// The bytes of `hex(b)` for every byte `b`: `HEX[2b..2b + 2]`.
const HEX: [u8; 512] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut t = [0u8; 512];
    let mut b = 0;
    while b < 256 {
        t[2 * b] = DIGITS[b >> 4];
        t[2 * b + 1] = DIGITS[b & 15];
        b += 1;
    }
    t
};

/// The eight lowercase hex digits of four bytes, as the little-endian bytes of a `u64`
/// (the first byte's high nibble first): each byte spread to a 16-bit lane, its nibbles to
/// the lane's two bytes, then `0x30 + n`, plus 39 more (`a` - `0` - 10) where `n > 9`.
#[inline(always)]
fn hex4(b: [u8; 4]) -> u64 {
    let x = u64::from(u32::from_le_bytes(b));
    let lanes =
        (x & 0xff) | ((x & 0xff00) << 8) | ((x & 0xff_0000) << 16) | ((x & 0xff00_0000) << 24);
    let nibbles = ((lanes >> 4) & 0x000f_000f_000f_000f) | ((lanes & 0x000f_000f_000f_000f) << 8);
    let letters = ((nibbles + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    nibbles + 0x3030_3030_3030_3030 + letters * 39
}

/// The row [`write_row_plain_names`] writes, formatted in `buf` and returned as a `str` of
/// it: every piece is put with fixed-size moves, the numbers written in place, so a row costs
/// no `memcpy` call per field and one copy into its destination. The same preconditions
/// (neither Op Type nor Op Name needs quotes) and the same bytes and errors: `Ok(None)` for
/// an empty tensor, [`Error::MissingHash`] for a missing digest. A row that might not fit
/// (very long names, a shape of many dimensions) gives [`Error::BufferTooSmall`] and writes
/// nothing: format it with [`write_row_plain_names`] then.
pub fn row_in<'b>(
    buf: &'b mut [u8; ROW_BUF],
    meta: &RowMeta<'_>,
    categories: &CategorySet,
    stats: &TensorStats,
) -> Result<Option<&'b str>, Error> {
    debug_assert!(!field_needs_quotes(meta.id.op_type) && !field_needs_quotes(meta.id.op_name));
    let Some(s) = stats.summary.as_ref() else {
        return Ok(None);
    };
    let (mut md5, mut sha1) = (false, false);
    for c in categories {
        md5 |= *c == Category::Md5;
        sha1 |= *c == Category::Sha1;
    }
    if md5 && stats.md5.is_none() {
        return Err(Error::MissingHash(Category::Md5));
    }
    if sha1 && stats.sha1.is_none() {
        return Err(Error::MissingHash(Category::Sha1));
    }
    const NUM: usize = dump_core::fmt::U64_DIGITS + 1;
    let id = &meta.id;
    let dtype = meta.dtype.name();
    // Every piece with its comma, counted at its widest; a digest is 40 hex digits at most.
    let needed = id.op_type.len()
        + id.op_name.len()
        + 2
        + 5 * NUM
        + id.io.as_str().len()
        + 1
        + dtype.len()
        + 4
        + meta.shape.len() * NUM
        + 3
        + categories.len() * 41
        + 1;
    if needed + ROW_SLACK > ROW_BUF {
        return Err(Error::BufferTooSmall {
            needed: needed + ROW_SLACK,
            available: ROW_BUF,
        });
    }
    // From here on every write lands below `needed + ROW_SLACK`: the indexing cannot fail.
    let mut at = 0;
    #[inline(always)]
    fn num(buf: &mut [u8; ROW_BUF], at: &mut usize, v: u64) {
        let d: &mut [u8; dump_core::fmt::U64_DIGITS] = (&mut buf[*at..*at + NUM - 1])
            .try_into()
            .unwrap_or_else(|_| unreachable!());
        *at += dump_core::fmt::put_u64(d, v);
    }
    at += put(&mut buf[at..], id.op_type.as_bytes());
    buf[at] = b',';
    at += 1;
    at += put(&mut buf[at..], id.op_name.as_bytes());
    buf[at] = b',';
    at += 1;
    for v in [u64::from(id.task_id), u64::from(id.stream_id), id.timestamp] {
        num(buf, &mut at, v);
        buf[at] = b',';
        at += 1;
    }
    at += put(&mut buf[at..], id.io.as_str().as_bytes());
    buf[at] = b',';
    at += 1;
    for v in [u64::from(id.slot), meta.data_size] {
        num(buf, &mut at, v);
        buf[at] = b',';
        at += 1;
    }
    at += put(&mut buf[at..], dtype.as_bytes());
    buf[at..at + 3].copy_from_slice(b",\"(");
    at += 3;
    for (i, d) in meta.shape.iter().enumerate() {
        if i > 0 {
            buf[at] = b',';
            at += 1;
        }
        num(buf, &mut at, *d as u64);
    }
    buf[at..at + 3].copy_from_slice(b")\",");
    at += 3;
    #[inline(always)]
    fn float(buf: &mut [u8; ROW_BUF], at: &mut usize, v: f64) {
        let t = g(v);
        let (bytes, len) = t.padded();
        buf[*at..*at + bytes.len()].copy_from_slice(bytes);
        *at += len;
    }
    #[inline(always)]
    fn hex(buf: &mut [u8; ROW_BUF], at: &mut usize, digest: &[u8]) {
        let mut words = digest.chunks_exact(4);
        for (i, w) in (&mut words).enumerate() {
            let o = *at + 8 * i;
            buf[o..o + 8].copy_from_slice(&hex4([w[0], w[1], w[2], w[3]]).to_le_bytes());
        }
        let done = digest.len() - words.remainder().len();
        for (i, &b) in words.remainder().iter().enumerate() {
            let (h, o) = (usize::from(b) * 2, *at + 2 * (done + i));
            buf[o] = HEX[h];
            buf[o + 1] = HEX[h + 1];
        }
        *at += 2 * digest.len();
    }
    for c in categories {
        match c {
            Category::Max => float(buf, &mut at, s.max_value()),
            Category::Min => float(buf, &mut at, s.min_value()),
            Category::Avg => float(buf, &mut at, s.avg()),
            Category::L2Norm => float(buf, &mut at, s.l2norm()),
            Category::Count => num(buf, &mut at, s.count),
            Category::NegativeZeroCount => num(buf, &mut at, s.neg),
            Category::PositiveZeroCount => num(buf, &mut at, s.pos),
            Category::NanCount => num(buf, &mut at, s.nan),
            Category::NegativeInfCount => num(buf, &mut at, s.neg_inf),
            Category::PositiveInfCount => num(buf, &mut at, s.pos_inf),
            Category::ZeroCount => num(buf, &mut at, s.zero),
            Category::Md5 => hex(buf, &mut at, stats.md5.as_ref().map_or(&[][..], |d| &d[..])),
            Category::Sha1 => hex(
                buf,
                &mut at,
                stats.sha1.as_ref().map_or(&[][..], |d| &d[..]),
            ),
        }
        buf[at] = b',';
        at += 1;
    }
    buf[at] = b'\n';
    at += 1;
    let row = &buf[..at];
    debug_assert!(core::str::from_utf8(row).is_ok());
    // SAFETY: `row` is, in order: Op Type and Op Name copied whole from `str`s (UTF-8; `put`
    // copies exactly their bytes to `row[..n]`: its overlapping moves write the same source
    // bytes twice), ASCII commas, quotes and parentheses, ASCII digits (`put_u64`), the
    // ASCII `%g` text (`GBuf`'s first `len` bytes), `input`/`output` and a dtype name
    // (ASCII literals), and ASCII hex digits. Bytes a fixed-size move wrote past a piece are
    // overwritten by the next piece or lie beyond `at`. A concatenation of UTF-8 strings is
    // UTF-8.
    Ok(Some(unsafe { core::str::from_utf8_unchecked(row) }))
}

/// Writes one device-statistics row (spec §7; trailing `,\n`). Only max, min, avg and l2norm
/// columns are allowed (use [`CategorySet::split_device`]); any other gives
/// [`Error::NotADeviceCategory`] before anything is written. Device rows are written for
/// non-empty tensors only: call it only when [`device_statistics`](crate::device_statistics)
/// returned `Some`.
pub fn write_device_row<W: Write>(
    w: &mut W,
    meta: &RowMeta<'_>,
    categories: &CategorySet,
    stats: &DeviceStats,
) -> Result<(), Error> {
    if let Some(c) = categories.iter().find(|c| !c.is_device()) {
        return Err(Error::NotADeviceCategory(c));
    }
    write_meta(w, meta, false)?;
    for c in categories {
        write!(w, "{},", stats.get(*c)?)?;
    }
    w.write_char('\n')?;
    Ok(())
}

/// A `core::fmt::Write` over a byte slice that keeps counting when it runs out of room, so
/// that the error can say how many bytes were needed.
struct SliceWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Write for SliceWriter<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        if end <= self.buf.len() {
            self.buf[self.len..end].copy_from_slice(s.as_bytes());
        }
        self.len = end;
        Ok(())
    }
}

/// [`write_row`] into `buf`: `Ok(Some(len))` with the row in `buf[..len]`, `Ok(None)` for an
/// empty tensor, [`Error::BufferTooSmall`] (with the bytes needed) when it does not fit.
pub fn write_row_to_slice(
    buf: &mut [u8],
    meta: &RowMeta<'_>,
    categories: &CategorySet,
    stats: &TensorStats,
) -> Result<Option<usize>, Error> {
    let available = buf.len();
    let mut w = SliceWriter { buf, len: 0 };
    if !write_row(&mut w, meta, categories, stats)? {
        return Ok(None);
    }
    if w.len > available {
        return Err(Error::BufferTooSmall {
            needed: w.len,
            available,
        });
    }
    Ok(Some(w.len))
}

/// The header line as an owned string.
#[cfg(feature = "alloc")]
pub fn header_string(categories: &CategorySet) -> alloc::string::String {
    let mut s = alloc::string::String::with_capacity(BASE_HEADER.len() + 16 * categories.len());
    // Writing into a String cannot fail.
    let _ = write_header(&mut s, categories);
    s
}

/// One host row as an owned string; `Ok(None)` for an empty tensor.
#[cfg(feature = "alloc")]
pub fn row_string(
    meta: &RowMeta<'_>,
    categories: &CategorySet,
    stats: &TensorStats,
) -> Result<Option<alloc::string::String>, Error> {
    let mut s = alloc::string::String::with_capacity(128 + 16 * categories.len());
    Ok(write_row(&mut s, meta, categories, stats)?.then_some(s))
}

/// One device row as an owned string.
#[cfg(feature = "alloc")]
pub fn device_row_string(
    meta: &RowMeta<'_>,
    categories: &CategorySet,
    stats: &DeviceStats,
) -> Result<alloc::string::String, Error> {
    let mut s = alloc::string::String::with_capacity(128 + 16 * categories.len());
    write_device_row(&mut s, meta, categories, stats)?;
    Ok(s)
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;
    use crate::{DeviceValue, Precision, device_statistics};
    use dump_core::{Summary, stats::summarize_reference};

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn stats_of(v: &[f32]) -> TensorStats {
        TensorStats {
            summary: summarize_reference(DType::Float32, &f32_bytes(v), v.len()).unwrap(),
            md5: None,
            sha1: None,
        }
    }

    fn meta<'a>(name: &'a str, io: Io, slot: u32, ts: u64, shape: &'a [usize]) -> RowMeta<'a> {
        RowMeta {
            id: crate::TensorId {
                op_type: "Add",
                op_name: name,
                task_id: 0,
                stream_id: 0,
                timestamp: ts,
                io,
                slot,
            },
            data_size: data_size(DType::Float32, shape.iter().product()).unwrap(),
            dtype: DType::Float32,
            shape,
        }
    }

    /// MindSpore's check_statistic_dump (spec §10): Add of two (2,3) f32 tensors, default
    /// categories. MindSpore's test reads min/max/l2norm `1/6/9.53939`, `7/12/23.6432`,
    /// `8/18/32.9242`.
    #[test]
    fn mindspore_add_example_bytes() {
        let cats = CategorySet::default();
        let mut out = header_string(&cats);
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let y = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
        let z: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
        let shape = [2, 3];
        for (io, slot, ts, v) in [
            (Io::Input, 0, 1795332154537630, &x[..]),
            (Io::Input, 1, 1795332154537672, &y[..]),
            (Io::Output, 0, 1795332154537718, &z[..]),
        ] {
            let row = row_string(
                &meta("Default_Add-op0", io, slot, ts, &shape),
                &cats,
                &stats_of(v),
            )
            .unwrap()
            .unwrap();
            out.push_str(&row);
        }
        assert_eq!(
            out,
            "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,\
             Max Value,Min Value,L2Norm Value\n\
             Add,Default_Add-op0,0,0,1795332154537630,input,0,24,float32,\"(2,3)\",6,1,9.53939,\n\
             Add,Default_Add-op0,0,0,1795332154537672,input,1,24,float32,\"(2,3)\",12,7,23.6432,\n\
             Add,Default_Add-op0,0,0,1795332154537718,output,0,24,float32,\"(2,3)\",18,8,32.9242,\n"
        );
    }

    #[test]
    fn quotes_are_needed_exactly_for_quote_comma_cr_lf_anywhere() {
        let special = [b'"', b',', b'\n', b'\r'];
        for len in 0..40usize {
            for at in 0..len {
                for b in 0u8..128 {
                    let mut f = vec![b'a'; len];
                    f[at] = b;
                    let text = core::str::from_utf8(&f).unwrap();
                    assert_eq!(field_needs_quotes(text), special.contains(&b), "{text:?}");
                }
            }
        }
        assert!(!field_needs_quotes(
            "Default/network-Net/layer1-Dense/MatMul-op1é"
        ));
    }

    #[test]
    fn plain_name_rows_equal_checked_rows() {
        let all = CategorySet::parse(crate::category::VALID_NAMES).unwrap();
        let mut st = stats_of(&[1.5, -2.0, 0.0]);
        st.md5 = Some([7; 16]);
        st.sha1 = Some([9; 20]);
        for name in ["n", "Default_network-Net_MatMul-op1", "caf\u{e9}"] {
            let m = meta(name, Io::Input, 1, 99, &[3]);
            let (mut a, mut b) = (String::new(), String::new());
            assert!(write_row(&mut a, &m, &all, &st).unwrap());
            assert!(write_row_plain_names(&mut b, &m, &all, &st).unwrap());
            assert_eq!(a, b);
        }
    }

    /// xorshift64: reproducible test values.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn rows_in_a_buffer_equal_written_rows_byte_for_byte() {
        let mut rng = Rng(0x005e_ed0f_2026_1127);
        let names: Vec<String> = [
            String::new(),
            "n".into(),
            "abc".into(),
            "abcd".into(),
            "caf\u{e9}".into(),
            "Default_network-Net_layer3-Dense_MatMul-op3".into(),
            "\u{4e2d}\u{6587}_\u{1f600}".into(),
        ]
        .into_iter()
        .chain((0..=70).map(|n| "x".repeat(n)))
        .chain([
            "y".repeat(300),
            "z".repeat(ROW_BUF),
            "w".repeat(ROW_BUF - 200),
        ])
        .collect();
        let all = CategorySet::parse(crate::category::VALID_NAMES).unwrap();
        let sets = [
            all.clone(),
            CategorySet::default(),
            CategorySet::new(),
            CategorySet::parse(["max", "min", "avg", "l2norm", "count", "md5"]).unwrap(),
            CategorySet::parse(["hash:sha1", "md5", "zero count", "nan count"]).unwrap(),
        ];
        let special = [
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e6,
            999_999.5,
            1e-5,
            5e-324,
            f64::MAX,
        ];
        let (mut fast, mut slow, mut too_long) = (0, 0, 0);
        for i in 0..20_000usize {
            let f = |rng: &mut Rng| {
                let r = rng.next();
                match r % 5 {
                    0 => special[(r >> 8) as usize % special.len()],
                    1 => (r >> 20) as f64,
                    2 => f64::from_bits(rng.next()),
                    _ => {
                        ((r >> 11) as f64 / (1u64 << 53) as f64 - 0.5)
                            * 10f64.powi((r % 40) as i32 - 20)
                    }
                }
            };
            let u = |rng: &mut Rng| match rng.next() % 3 {
                0 => rng.next() % 10,
                1 => rng.next() >> (rng.next() % 64),
                _ => u64::MAX - rng.next() % 3,
            };
            let mut s = Summary::EMPTY;
            s.max = f(&mut rng);
            s.min = f(&mut rng);
            s.sum = f(&mut rng);
            s.sum_sq = f(&mut rng).abs();
            s.first_nan = f(&mut rng);
            s.last_nan = f(&mut rng);
            s.count = u(&mut rng).max(1);
            s.nan = u(&mut rng) % 2 * u(&mut rng);
            (s.pos_inf, s.neg_inf) = (u(&mut rng), u(&mut rng));
            (s.zero, s.pos, s.neg) = (u(&mut rng), u(&mut rng), u(&mut rng));
            let mut st = TensorStats {
                summary: Some(s),
                md5: Some(core::array::from_fn(|_| rng.next() as u8)),
                sha1: Some(core::array::from_fn(|_| rng.next() as u8)),
            };
            match i % 50 {
                0 => st.summary = None,
                1 => st.md5 = None,
                2 => st.sha1 = None,
                _ => {}
            }
            let rank = match rng.next() % 8 {
                7 => 40,
                r => r as usize,
            };
            let shape: Vec<usize> = (0..rank).map(|_| u(&mut rng) as usize).collect();
            let id = crate::TensorId {
                op_type: names[rng.next() as usize % 8].as_str(),
                op_name: names[rng.next() as usize % names.len()].as_str(),
                task_id: u(&mut rng) as u32,
                stream_id: u(&mut rng) as u32,
                timestamp: u(&mut rng),
                io: if i % 2 == 0 { Io::Input } else { Io::Output },
                slot: u(&mut rng) as u32,
            };
            let m = RowMeta {
                id,
                data_size: u(&mut rng),
                dtype: DType::ALL[i % DType::ALL.len()],
                shape: &shape,
            };
            let cats = &sets[i % sets.len()];
            let mut want = String::new();
            let expected = write_row_plain_names(&mut want, &m, cats, &st);
            let mut buf = [0xAAu8; ROW_BUF];
            match row_in(&mut buf, &m, cats, &st) {
                Ok(Some(row)) => {
                    assert_eq!(expected, Ok(true));
                    assert_eq!(row, want, "{m:?}");
                    fast += 1;
                }
                Ok(None) => {
                    assert_eq!(expected, Ok(false));
                    slow += 1;
                }
                Err(Error::BufferTooSmall { needed, available }) => {
                    // Only a row that could need more than the buffer; the caller then
                    // writes it the general way.
                    assert!(needed > available && available == ROW_BUF);
                    assert!(
                        m.id.op_name.len() + m.id.op_type.len() + m.shape.len() * 21 + 750
                            > ROW_BUF,
                        "{m:?}"
                    );
                    too_long += 1;
                }
                Err(e) => {
                    assert_eq!(expected, Err(e));
                    slow += 1;
                }
            }
        }
        assert!(
            fast > 10_000 && slow > 300 && too_long > 500,
            "{fast} {slow} {too_long}"
        );
    }

    #[test]
    fn four_bytes_of_hex_at_once_equal_the_table() {
        for b in 0..=255u8 {
            for at in 0..4 {
                let mut w = [0x5a, 0x00, 0xff, 0x09];
                w[at] = b;
                let want: String = w.iter().map(|b| format!("{b:02x}")).collect();
                assert_eq!(hex4(w).to_le_bytes(), want.as_bytes(), "{w:?}");
            }
        }
    }

    #[test]
    fn every_column_and_shapes() {
        let all = CategorySet::parse(crate::category::VALID_NAMES).unwrap();
        assert_eq!(
            header_string(&all),
            format!(
                "{BASE_HEADER},Max Value,Min Value,Avg Value,Count,Negative Zero Count,\
                 Positive Zero Count,NaN Count,Negative Inf Count,Positive Inf Count,Zero Count,\
                 MD5,L2Norm Value,SHA1\n"
            )
        );
        let mut st = stats_of(&[-0.0, 0.0, f32::INFINITY, -3.0, 1e6, 1e-5]);
        st.md5 = Some([
            0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54,
            0x32, 0x10,
        ]);
        st.sha1 = Some([0x01; 20]);
        let shape: [usize; 1] = [6];
        let row = row_string(&meta("n", Io::Output, 2, 7, &shape), &all, &st)
            .unwrap()
            .unwrap();
        assert_eq!(
            row,
            format!(
                "Add,n,0,0,7,output,2,24,float32,\"(6)\",inf,-3,inf,6,1,3,0,0,1,2,{},inf,{},\n",
                "0123456789abcdeffedcba9876543210",
                "01".repeat(20)
            )
        );
        let scalar = stats_of(&[65504.0]);
        let row = row_string(
            &meta("s", Io::Input, 0, 1, &[]),
            &CategorySet::default(),
            &scalar,
        )
        .unwrap()
        .unwrap();
        assert!(
            row.ends_with("float32,\"()\",65504,65504,65504,\n"),
            "{row}"
        );
        assert_eq!(
            header_string(&CategorySet::new()),
            format!("{BASE_HEADER}\n")
        );
    }

    #[test]
    fn empty_tensor_gives_no_row_and_missing_hash_is_an_error() {
        let cats = CategorySet::parse(["md5"]).unwrap();
        let empty = TensorStats::default();
        let m = meta("e", Io::Input, 0, 0, &[0]);
        assert_eq!(row_string(&m, &cats, &empty), Ok(None));
        let mut buf = [0u8; 8];
        assert_eq!(write_row_to_slice(&mut buf, &m, &cats, &empty), Ok(None));
        let one = stats_of(&[1.0]);
        assert_eq!(
            row_string(&m, &cats, &one),
            Err(Error::MissingHash(Category::Md5))
        );
        let mut s = String::new();
        assert!(write_row(&mut s, &m, &cats, &one).is_err());
        assert!(s.is_empty(), "nothing written before the error");
    }

    #[test]
    fn slice_writer_reports_needed_bytes() {
        let cats = CategorySet::default();
        let st = stats_of(&[1.0, 2.0]);
        let shape = [2];
        let m = meta("Default_Add-op0", Io::Input, 0, 5, &shape);
        let expected = row_string(&m, &cats, &st).unwrap().unwrap();
        let mut big = [0u8; 256];
        let n = write_row_to_slice(&mut big, &m, &cats, &st)
            .unwrap()
            .unwrap();
        assert_eq!(&big[..n], expected.as_bytes());
        let mut small = [0u8; 10];
        assert_eq!(
            write_row_to_slice(&mut small, &m, &cats, &st),
            Err(Error::BufferTooSmall {
                needed: expected.len(),
                available: 10
            })
        );
    }

    #[test]
    fn device_rows() {
        let cats = CategorySet::parse(["l2norm", "avg", "max", "min"]).unwrap();
        let b = [1u8, 0];
        let shape = [2];
        let m = RowMeta {
            dtype: DType::Bool,
            data_size: 2,
            ..meta("Default_Equal-op0", Io::Output, 0, 9, &shape)
        };
        let d = device_statistics(DType::Bool, &b, 2, Precision::High)
            .unwrap()
            .unwrap();
        assert_eq!(
            device_row_string(&m, &cats, &d).unwrap(),
            "Add,Default_Equal-op0,0,0,9,output,0,2,bool,\"(2)\",null,null,True,False,\n"
        );
        let bad = CategorySet::parse(["max", "count"]).unwrap();
        assert_eq!(
            device_row_string(&m, &bad, &d),
            Err(Error::NotADeviceCategory(Category::Count))
        );
        assert_eq!(DeviceValue::Int(-7).to_string(), "-7");
    }

    #[test]
    fn packed_and_half_dtypes_rows() {
        // int4: 5 elements packed in 3 bytes (low nibble first): 1, -1, 7, -8, 0.
        let packed = [0xf1u8, 0x87, 0x00];
        let st = TensorStats {
            summary: summarize_reference(DType::Int4, &packed, 5).unwrap(),
            ..TensorStats::default()
        };
        let shape = [5];
        let m = RowMeta {
            dtype: DType::Int4,
            data_size: data_size(DType::Int4, 5).unwrap(),
            ..meta(
                "Default_WeightQuantBatchMatmul-op0",
                Io::Input,
                1,
                3,
                &shape,
            )
        };
        let cats = CategorySet::parse(["max", "min", "count", "zero count"]).unwrap();
        assert_eq!(
            row_string(&m, &cats, &st).unwrap().unwrap(),
            "Add,Default_WeightQuantBatchMatmul-op0,0,0,3,input,1,3,int4,\"(5)\",7,-8,5,1,\n"
        );
        let bf: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
            .collect();
        let st = TensorStats {
            summary: summarize_reference(DType::BFloat16, &bf, 2).unwrap(),
            ..TensorStats::default()
        };
        let shape = [1, 2];
        let m = RowMeta {
            dtype: DType::BFloat16,
            data_size: data_size(DType::BFloat16, 2).unwrap(),
            ..meta("b", Io::Output, 0, 3, &shape)
        };
        assert_eq!(
            row_string(&m, &CategorySet::default(), &st)
                .unwrap()
                .unwrap(),
            "Add,b,0,0,3,output,0,4,bfloat16,\"(1,2)\",1.5,-2,2.5,\n"
        );
        // float8: Data Size is the float8 storage (1 byte each), values the widened ones;
        // e5m2 [448 (0x5f), -inf (0xfc), NaN (0x7e)], e4m3fn [448 (0x7e), 2^-9 (0x01)].
        let cats = CategorySet::parse(["max", "min", "nan count", "negative inf count"]).unwrap();
        for (dtype, data, want) in [
            (
                DType::Float8E5M2,
                &[0x5f, 0xfc, 0x7e][..],
                "Add,f8,0,0,3,output,0,3,float8_e5m2,\"(3)\",nan,nan,1,1,\n",
            ),
            (
                DType::Float8E4M3FN,
                &[0x7e, 0x01][..],
                "Add,f8,0,0,3,output,0,2,float8_e4m3fn,\"(2)\",448,0.00195312,0,0,\n",
            ),
            // e4m3fnuz [-240 (0xff), 2^-10 (0x01)]; e5m2fnuz [NaN (0x80, not -0), 57344 (0x7f)]:
            // 0x80 widens to 0xffc00000 (as ml_dtypes and torch give it), a NaN with its sign
            // bit set, which C's %g prints as -nan.
            (
                DType::Float8E4M3FNUZ,
                &[0xff, 0x01][..],
                "Add,f8,0,0,3,output,0,2,float8_e4m3fnuz,\"(2)\",0.000976562,-240,0,0,\n",
            ),
            (
                DType::Float8E5M2FNUZ,
                &[0x80, 0x7f][..],
                "Add,f8,0,0,3,output,0,2,float8_e5m2fnuz,\"(2)\",-nan,-nan,1,0,\n",
            ),
            (
                DType::UInt4,
                &[0xf3][..],
                "Add,f8,0,0,3,output,0,1,uint4,\"(2)\",15,3,0,0,\n",
            ),
        ] {
            let n = if dtype == DType::UInt4 { 2 } else { data.len() };
            let st = TensorStats {
                summary: summarize_reference(dtype, data, n).unwrap(),
                ..TensorStats::default()
            };
            let shape = [n];
            let m = RowMeta {
                dtype,
                data_size: data_size(dtype, n).unwrap(),
                ..meta("f8", Io::Output, 0, 3, &shape)
            };
            assert_eq!(
                row_string(&m, &cats, &st).unwrap().unwrap(),
                want,
                "{dtype}"
            );
        }
    }

    #[test]
    fn quotes_and_commas_in_names_stay_one_field() {
        let mut s = String::new();
        write_field(&mut s, "Default_Add-op0").unwrap();
        assert_eq!(s, "Default_Add-op0", "plain names keep their bytes");
        for (raw, quoted) in [
            ("a\"b", "\"a\"\"b\""),
            ("\"", "\"\"\"\""),
            ("x,y", "\"x,y\""),
            ("l\nm\r", "\"l\nm\r\""),
            ("\"\"", "\"\"\"\"\"\""),
        ] {
            let mut s = String::new();
            write_field(&mut s, raw).unwrap();
            assert_eq!(s, quoted, "{raw:?}");
        }
        let st = stats_of(&[1.0]);
        let shape = [1];
        let mut m = meta("\"Default_Add\"-op0", Io::Input, 0, 1, &shape);
        m.id.op_type = "T\"x";
        let row = row_string(&m, &CategorySet::default(), &st)
            .unwrap()
            .unwrap();
        assert_eq!(
            row,
            "\"T\"\"x\",\"\"\"Default_Add\"\"-op0\",0,0,1,input,0,4,float32,\"(1)\",1,1,1,\n"
        );
    }

    #[test]
    fn data_sizes() {
        assert_eq!(data_size(DType::BFloat16, 5), Some(10));
        assert_eq!(data_size(DType::Int4, 64), Some(32));
        assert_eq!(data_size(DType::Float32, usize::MAX), None);
        let _ = Summary::EMPTY;
    }
}
