//! The hardened `.npy` header reader (no_std, no allocation).
//!
//! Accepts any header numpy accepts for the dtypes opdump knows: versions 1.0, 2.0 and 3.0
//! (UTF-8 dict), MindSpore's style (`(2,3,)`, no spaces) and numpy's (`(2, 3)`), `True` or
//! `False` Fortran order, keys in any order, single or double quotes, any whitespace and any
//! padding (aligned or not). It rejects — with an [`Error`], never a panic — anything else:
//! bad magic or version, truncated input, headers above [`MAX_HEADER_LEN`], ranks above
//! [`MAX_RANK`], unknown or duplicate keys, descrs outside opdump's dtypes (big-endian,
//! strings, records), dimensions that overflow `usize`, and shapes whose byte size overflows.
//!
//! Deviations from numpy, all stricter: duplicate keys (Python keeps the last), integer
//! literals with `_`, `+`, leading zeros or Python-2 `L` suffixes, and string escapes are
//! errors.

use dump_core::DType;

use crate::{Error, MAGIC, MAX_HEADER_LEN, MAX_RANK};

/// A parsed `.npy` header. Borrows the header bytes for `descr` and the shape text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    major: u8,
    descr: &'a str,
    dtype: DType,
    fortran_order: bool,
    shape_text: &'a [u8],
    rank: usize,
    elems: usize,
    data_len: usize,
    data_offset: usize,
}

impl<'a> Header<'a> {
    /// Major format version: 1, 2 or 3.
    pub fn version(&self) -> u8 {
        self.major
    }

    /// The descr string as written (`<f4`, `|b1`, `f8`, `<E2`, ...).
    pub fn descr(&self) -> &'a str {
        self.descr
    }

    /// The dtype the descr names.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// `true` when the data is stored in Fortran (column-major) order.
    pub fn fortran_order(&self) -> bool {
        self.fortran_order
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The dimensions, outermost first.
    pub fn dims(&self) -> Dims<'a> {
        Dims {
            text: self.shape_text,
            left: self.rank,
        }
    }

    /// Copies the dimensions into `out` and returns the filled prefix.
    pub fn shape_into<'o>(&self, out: &'o mut [usize]) -> Result<&'o [usize], Error> {
        if out.len() < self.rank {
            return Err(Error::Core(dump_core::Error::BufferTooSmall {
                needed: self.rank,
                available: out.len(),
            }));
        }
        let out = &mut out[..self.rank];
        for (slot, d) in out.iter_mut().zip(self.dims()) {
            *slot = d;
        }
        Ok(out)
    }

    /// Number of elements (1 for 0-d).
    pub fn elems(&self) -> usize {
        self.elems
    }

    /// Bytes of data the header announces.
    pub fn data_len(&self) -> usize {
        self.data_len
    }

    /// Offset of the data from the start of the file (the whole header's length).
    pub fn data_offset(&self) -> usize {
        self.data_offset
    }
}

/// Iterator over a parsed header's dimensions.
#[derive(Clone, Debug)]
pub struct Dims<'a> {
    text: &'a [u8],
    left: usize,
}

impl Iterator for Dims<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.left == 0 {
            return None;
        }
        // The text was validated by the parser: digits separated by commas and whitespace.
        let start = self.text.iter().position(u8::is_ascii_digit)?;
        let rest = &self.text[start..];
        let len = rest
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(rest.len());
        let value = rest[..len].iter().fold(0usize, |acc, &b| {
            acc.wrapping_mul(10).wrapping_add(usize::from(b - b'0'))
        });
        self.text = &rest[len..];
        self.left -= 1;
        Some(value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Dims<'_> {}

/// Reads the fixed prefix (magic, version, length field) from the first 10 or 12 bytes of a
/// file and returns the total header length, i.e. the data offset. Lets a streaming reader
/// know how many bytes to fetch before calling [`parse_header`].
pub fn header_len_from_prefix(prefix: &[u8]) -> Result<usize, Error> {
    let truncated = |needed| Error::Truncated {
        what: "magic, version and header length",
        needed,
        available: prefix.len(),
    };
    if prefix.len() < 8 {
        if !MAGIC.starts_with(&prefix[..prefix.len().min(6)]) {
            return Err(Error::BadMagic);
        }
        return Err(truncated(10));
    }
    if prefix[..6] != MAGIC {
        return Err(Error::BadMagic);
    }
    let (major, minor) = (prefix[6], prefix[7]);
    let (hlen, fixed) = match (major, minor) {
        (1, 0) => {
            let b = prefix.get(8..10).ok_or(truncated(10))?;
            (usize::from(u16::from_le_bytes([b[0], b[1]])), 10)
        }
        (2 | 3, 0) => {
            let b = prefix.get(8..12).ok_or(truncated(12))?;
            let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            (usize::try_from(v).unwrap_or(usize::MAX), 12)
        }
        _ => return Err(Error::UnsupportedVersion { major, minor }),
    };
    let total = hlen.saturating_add(fixed);
    if total > MAX_HEADER_LEN {
        return Err(Error::HeaderTooLong {
            len: total,
            max: MAX_HEADER_LEN,
        });
    }
    Ok(total)
}

/// Parses the header at the start of `bytes` (which may hold more: the data follows).
///
/// ```
/// let mut file = [0u8; 128];
/// dump_npy::encode_header("<i8", &[4, 0, 2], &mut file).unwrap();
/// let h = dump_npy::parse_header(&file).unwrap();
/// assert_eq!(h.dtype(), dump_core::DType::Int64);
/// assert_eq!(h.dims().collect::<Vec<_>>(), [4, 0, 2]);
/// assert_eq!((h.elems(), h.data_len(), h.data_offset()), (0, 0, 128));
/// ```
pub fn parse_header(bytes: &[u8]) -> Result<Header<'_>, Error> {
    parse_header_with(bytes, false)
}

/// The byte-sized carrier of an opaque descr that numpy writes for ml_dtypes' arrays, whose
/// element type the file does not say: `<V1` / `|V1` (int4 and uint4, one value per byte;
/// float8_e4m3fn, e4m3fnuz, e5m2fnuz), `<f1` (float8_e5m2) as [`DType::UInt8`], `<V2` / `|V2`
/// (bfloat16) as [`DType::UInt16`]; `None` for any other descr.
pub fn opaque_carrier(descr: &str) -> Option<DType> {
    match descr {
        "<V1" | "|V1" | "V1" | "<f1" | "|f1" => Some(DType::UInt8),
        "<V2" | "|V2" | "V2" => Some(DType::UInt16),
        _ => None,
    }
}

/// [`parse_header`], also accepting the opaque descrs of [`opaque_carrier`] (ml_dtypes'
/// arrays as numpy saves them): their header's dtype is the carrier, and the caller decides
/// what the bytes are (`opdump run` takes the type the model declares for the input).
pub fn parse_header_opaque(bytes: &[u8]) -> Result<Header<'_>, Error> {
    parse_header_with(bytes, true)
}

fn parse_header_with(bytes: &[u8], opaque: bool) -> Result<Header<'_>, Error> {
    let data_offset = header_len_from_prefix(bytes)?;
    let header = bytes.get(..data_offset).ok_or(Error::Truncated {
        what: "header",
        needed: data_offset,
        available: bytes.len(),
    })?;
    let major = header[6];
    let dict = &header[if major == 1 { 10 } else { 12 }..];
    if major == 3 && core::str::from_utf8(dict).is_err() {
        return Err(Error::Syntax {
            at: 0,
            expected: "UTF-8 text (version 3.0)",
        });
    }
    let parsed = Parser {
        s: dict,
        i: 0,
        opaque,
    }
    .dict()?;
    let size = parsed.dtype.size().ok_or(Error::UnsupportedDescr)?;
    let data_len = parsed.elems.checked_mul(size).ok_or(Error::ShapeOverflow)?;
    data_offset
        .checked_add(data_len)
        .ok_or(Error::ShapeOverflow)?;
    Ok(Header {
        major,
        descr: parsed.descr,
        dtype: parsed.dtype,
        fortran_order: parsed.fortran_order,
        shape_text: parsed.shape_text,
        rank: parsed.rank,
        elems: parsed.elems,
        data_len,
        data_offset,
    })
}

/// Parses a whole in-memory `.npy` file: the header, and the data, whose length must be exactly
/// what the header announces ([`Error::DataLength`] otherwise).
pub fn read_npy(bytes: &[u8]) -> Result<(Header<'_>, &[u8]), Error> {
    let h = parse_header(bytes)?;
    let data = &bytes[h.data_offset..];
    if data.len() != h.data_len {
        return Err(Error::DataLength {
            expected: h.data_len,
            actual: data.len(),
        });
    }
    Ok((h, data))
}

struct Parsed<'a> {
    descr: &'a str,
    dtype: DType,
    fortran_order: bool,
    shape_text: &'a [u8],
    rank: usize,
    elems: usize,
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    /// Accept [`opaque_carrier`] descrs.
    opaque: bool,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(
            self.peek(),
            Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c')
        ) {
            self.i += 1;
        }
    }

    fn err(&self, expected: &'static str) -> Error {
        Error::Syntax {
            at: self.i,
            expected,
        }
    }

    fn eat(&mut self, c: u8, expected: &'static str) -> Result<(), Error> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.err(expected))
        }
    }

    /// A quoted string without escapes; returns its contents.
    fn string(&mut self) -> Result<&'a [u8], Error> {
        let q = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return Err(self.err("a quoted string")),
        };
        self.i += 1;
        let start = self.i;
        loop {
            match self.peek() {
                Some(c) if c == q => break,
                Some(b'\\' | b'\n' | b'\r') | None => {
                    return Err(self.err("the closing quote (escapes are not supported)"));
                }
                Some(_) => self.i += 1,
            }
        }
        let text = &self.s[start..self.i];
        self.i += 1;
        Ok(text)
    }

    fn boolean(&mut self) -> Result<bool, Error> {
        let rest = &self.s[self.i..];
        let (value, len) = if rest.starts_with(b"True") {
            (true, 4)
        } else if rest.starts_with(b"False") {
            (false, 5)
        } else {
            return Err(self.err("True or False"));
        };
        if rest
            .get(len)
            .is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(self.err("True or False"));
        }
        self.i += len;
        Ok(value)
    }

    /// `( dims )`: returns (text between the parentheses, rank, element count).
    fn shape(&mut self) -> Result<(&'a [u8], usize, usize), Error> {
        self.eat(b'(', "'(' starting the shape tuple")?;
        let start = self.i;
        let mut rank = 0usize;
        let mut product = 1usize; // of the non-zero dims
        let mut zero = false;
        let mut trailing_comma = false;
        loop {
            self.ws();
            match self.peek() {
                Some(b')') => break,
                Some(b'0'..=b'9') => {}
                _ => return Err(self.err("a dimension (decimal digits) or ')'")),
            }
            if rank == MAX_RANK {
                return Err(Error::RankTooHigh { max: MAX_RANK });
            }
            let first = self.i;
            let mut value = 0usize;
            while let Some(c @ b'0'..=b'9') = self.peek() {
                value = value
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(usize::from(c - b'0')))
                    .ok_or(Error::DimTooLarge { index: rank })?;
                self.i += 1;
            }
            if self.s[first] == b'0' && self.i - first > 1 {
                return Err(Error::Syntax {
                    at: first,
                    expected: "a dimension without leading zeros",
                });
            }
            if value == 0 {
                zero = true;
            } else {
                product = product.checked_mul(value).ok_or(Error::ShapeOverflow)?;
            }
            rank += 1;
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    trailing_comma = true;
                }
                Some(b')') => {
                    trailing_comma = false;
                    break;
                }
                _ => return Err(self.err("',' or ')' after a dimension")),
            }
        }
        if rank == 1 && !trailing_comma {
            return Err(self.err("',' after the only dimension: a 1-d shape is written (n,)"));
        }
        let text = &self.s[start..self.i];
        self.i += 1; // ')'
        Ok((text, rank, if zero { 0 } else { product }))
    }

    fn dict(mut self) -> Result<Parsed<'a>, Error> {
        let mut descr: Option<(&'a str, DType)> = None;
        let mut fortran: Option<bool> = None;
        let mut shape: Option<(&'a [u8], usize, usize)> = None;
        self.ws();
        self.eat(b'{', "'{' starting the header dict")?;
        loop {
            self.ws();
            if self.peek() == Some(b'}') {
                break;
            }
            let key_at = self.i;
            let key = self.string()?;
            self.ws();
            self.eat(b':', "':' after a key")?;
            self.ws();
            match key {
                b"descr" if descr.is_none() => {
                    if self.peek() == Some(b'[') {
                        return Err(Error::UnsupportedDescr);
                    }
                    let text = self.string()?;
                    let text = core::str::from_utf8(text).map_err(|_| Error::UnsupportedDescr)?;
                    let dt = DType::from_npy_descr(text)
                        .or_else(|| opaque_carrier(text).filter(|_| self.opaque))
                        .ok_or(Error::UnsupportedDescr)?;
                    descr = Some((text, dt));
                }
                b"fortran_order" if fortran.is_none() => fortran = Some(self.boolean()?),
                b"shape" if shape.is_none() => shape = Some(self.shape()?),
                _ => return Err(Error::BadKey { at: key_at }),
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => break,
                _ => return Err(self.err("',' or '}' after a value")),
            }
        }
        self.i += 1; // '}'
        self.ws();
        if self.i != self.s.len() {
            return Err(self.err("only whitespace after the closing '}'"));
        }
        let (descr, dtype) = descr.ok_or(Error::MissingKey("descr"))?;
        let fortran_order = fortran.ok_or(Error::MissingKey("fortran_order"))?;
        let (shape_text, rank, elems) = shape.ok_or(Error::MissingKey("shape"))?;
        Ok(Parsed {
            descr,
            dtype,
            fortran_order,
            shape_text,
            rank,
            elems,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v1 file around `dict` (no alignment, numpy-style freedom).
    fn v1(dict: &str) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[1, 0]);
        v.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        v.extend_from_slice(dict.as_bytes());
        v
    }

    fn shape_of(h: &Header<'_>) -> Vec<usize> {
        h.dims().collect()
    }

    #[test]
    fn ml_dtypes_opaque_descrs_only_on_request() {
        for (descr, carrier) in [
            ("<V1", DType::UInt8),
            ("|V1", DType::UInt8),
            ("<f1", DType::UInt8),
            ("<V2", DType::UInt16),
        ] {
            let f = v1(&format!(
                "{{'descr': '{descr}', 'fortran_order': False, 'shape': (2, 3), }}\n"
            ));
            assert_eq!(
                parse_header(&f).unwrap_err(),
                Error::UnsupportedDescr,
                "{descr}: plain readers refuse it"
            );
            let h = parse_header_opaque(&f).unwrap();
            assert_eq!((h.dtype(), h.descr()), (carrier, descr));
            assert_eq!(h.data_len(), 6 * carrier.size().unwrap());
            assert_eq!(shape_of(&h), [2, 3]);
        }
        // Other void and odd descrs stay unsupported, opaque or not.
        for descr in ["<V3", "<V0", "<V16", ">f1", "<f3", "V", "<V1 "] {
            let f = v1(&format!(
                "{{'descr': '{descr}', 'fortran_order': False, 'shape': (2,), }}\n"
            ));
            assert_eq!(
                parse_header_opaque(&f).unwrap_err(),
                Error::UnsupportedDescr,
                "{descr}"
            );
        }
        // A known descr is what it is, whichever parser reads it.
        let f = v1("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }\n");
        assert_eq!(parse_header_opaque(&f).unwrap().dtype(), DType::Int16);
    }

    #[test]
    fn numpy_and_mindspore_styles() {
        let cases: &[(&str, DType, bool, &[usize])] = &[
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n",
                DType::Float32,
                false,
                &[2, 3],
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,3,), }\n",
                DType::Float32,
                false,
                &[2, 3],
            ),
            (
                "{'descr': '|b1', 'fortran_order': True, 'shape': (5,), }\n",
                DType::Bool,
                true,
                &[5],
            ),
            (
                "{'shape': (), 'fortran_order': False, 'descr': '<c16'}",
                DType::Complex128,
                false,
                &[],
            ),
            (
                "{\"descr\":\"<E2\",\"shape\":( 7 , 1 ,),\"fortran_order\":False}\t\r\n",
                DType::BFloat16,
                false,
                &[7, 1],
            ),
            (
                "  {'descr': 'u1', 'fortran_order': False, 'shape': (0, 18446744073709551615)}",
                DType::UInt8,
                false,
                &[0, usize::MAX],
            ),
        ];
        for (dict, dt, f, shape) in cases {
            let file = v1(dict);
            let h = parse_header(&file).unwrap_or_else(|e| panic!("{dict}: {e}"));
            assert_eq!(h.dtype(), *dt, "{dict}");
            assert_eq!(h.fortran_order(), *f);
            assert_eq!(shape_of(&h), *shape);
            assert_eq!(h.rank(), shape.len());
            assert_eq!(h.data_offset(), file.len());
            assert_eq!(h.version(), 1);
            let elems: usize = if shape.contains(&0) {
                0
            } else {
                shape.iter().product()
            };
            assert_eq!(h.elems(), elems);
            assert_eq!(h.data_len(), elems * dt.size().unwrap());
        }
    }

    #[test]
    fn rejects_invalid_dicts() {
        let bad: &[(&str, Error)] = &[
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (5)}",
                Error::Syntax {
                    at: 52,
                    expected: "',' after the only dimension: a 1-d shape is written (n,)",
                },
            ),
            (
                "{'descr': '<f4', 'fortran_order': False}",
                Error::MissingKey("shape"),
            ),
            (
                "{'descr': '<f4', 'shape': ()}",
                Error::MissingKey("fortran_order"),
            ),
            (
                "{'fortran_order': False, 'shape': ()}",
                Error::MissingKey("descr"),
            ),
            (
                "{'descr': '>f4', 'fortran_order': False, 'shape': ()}",
                Error::UnsupportedDescr,
            ),
            (
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}",
                Error::UnsupportedDescr,
            ),
            (
                "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}",
                Error::BadKey { at: 17 },
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}",
                Error::BadKey { at: 54 },
            ),
            (
                "{'descr': '<f4', 'fortran_order': 0, 'shape': ()}",
                Error::Syntax {
                    at: 34,
                    expected: "True or False",
                },
            ),
            (
                "{'descr': '<f4', 'fortran_order': Falsey, 'shape': ()}",
                Error::Syntax {
                    at: 34,
                    expected: "True or False",
                },
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (,)}",
                Error::Syntax {
                    at: 51,
                    expected: "a dimension (decimal digits) or ')'",
                },
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}",
                Error::Syntax {
                    at: 51,
                    expected: "a dimension without leading zeros",
                },
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
                Error::Syntax {
                    at: 51,
                    expected: "a dimension (decimal digits) or ')'",
                },
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
                Error::DimTooLarge { index: 0 },
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}",
                Error::ShapeOverflow,
            ),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}",
                Error::ShapeOverflow,
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': ()} x",
                Error::Syntax {
                    at: 54,
                    expected: "only whitespace after the closing '}'",
                },
            ),
            (
                "{'descr': '<f\\4', 'fortran_order': False, 'shape': ()}",
                Error::Syntax {
                    at: 13,
                    expected: "the closing quote (escapes are not supported)",
                },
            ),
            (
                "{'descr': '<f4' 'fortran_order': False, 'shape': ()}",
                Error::Syntax {
                    at: 16,
                    expected: "',' or '}' after a value",
                },
            ),
            (
                "",
                Error::Syntax {
                    at: 0,
                    expected: "'{' starting the header dict",
                },
            ),
        ];
        for (dict, want) in bad {
            assert_eq!(parse_header(&v1(dict)).err(), Some(*want), "{dict}");
        }
    }

    #[test]
    fn prefix_errors() {
        assert_eq!(
            parse_header(b"").err(),
            Some(Error::Truncated {
                what: "magic, version and header length",
                needed: 10,
                available: 0
            })
        );
        assert_eq!(
            parse_header(b"\x93NUM").err(),
            Some(Error::Truncated {
                what: "magic, version and header length",
                needed: 10,
                available: 4
            })
        );
        assert_eq!(parse_header(b"PK\x03\x04").err(), Some(Error::BadMagic));
        assert_eq!(
            parse_header(b"\x93NUMPZ\x01\x00\x00\x00").err(),
            Some(Error::BadMagic)
        );
        assert_eq!(
            parse_header(b"\x93NUMPY\x04\x00\x00\x00").err(),
            Some(Error::UnsupportedVersion { major: 4, minor: 0 })
        );
        assert_eq!(
            parse_header(b"\x93NUMPY\x01\x01\x00\x00").err(),
            Some(Error::UnsupportedVersion { major: 1, minor: 1 })
        );
        assert_eq!(
            parse_header(b"\x93NUMPY\x02\x00\x00\x00").err(),
            Some(Error::Truncated {
                what: "magic, version and header length",
                needed: 12,
                available: 10
            })
        );
        assert_eq!(
            parse_header(b"\x93NUMPY\x02\x00\xff\xff\xff\xff").err(),
            Some(Error::HeaderTooLong {
                len: 0xffff_ffff + 12,
                max: MAX_HEADER_LEN
            })
        );
        assert_eq!(
            parse_header(b"\x93NUMPY\x01\x00\x10\x00{").err(),
            Some(Error::Truncated {
                what: "header",
                needed: 26,
                available: 11
            })
        );
        let mut v3 = MAGIC.to_vec();
        v3.extend_from_slice(&[3, 0, 3, 0, 0, 0, b'{', 0xff, b'}']);
        assert_eq!(
            parse_header(&v3).err(),
            Some(Error::Syntax {
                at: 0,
                expected: "UTF-8 text (version 3.0)"
            })
        );
    }

    #[test]
    fn read_npy_checks_data_length() {
        let mut file = v1("{'descr': '<i2', 'fortran_order': False, 'shape': (3,)}");
        file.extend_from_slice(&[1, 0, 2, 0, 3]);
        assert_eq!(
            read_npy(&file).err(),
            Some(Error::DataLength {
                expected: 6,
                actual: 5
            })
        );
        file.push(0);
        let (h, data) = read_npy(&file).unwrap();
        assert_eq!(data, &[1, 0, 2, 0, 3, 0]);
        let mut shape = [0usize; 2];
        assert_eq!(h.shape_into(&mut shape), Ok(&[3usize][..]));
        let mut none = [0usize; 0];
        assert!(h.shape_into(&mut none).is_err());
        file.push(0);
        assert_eq!(
            read_npy(&file).err(),
            Some(Error::DataLength {
                expected: 6,
                actual: 7
            })
        );
    }

    #[test]
    fn round_trips_the_encoder() {
        for shape in [&[][..], &[1], &[0, 5], &[2, 1, 8, 8], &[3; 8]] {
            for d in DType::ALL {
                let Some(descr) = d.npy_descr() else { continue };
                let mut buf = vec![0u8; crate::header_len(descr, shape).unwrap()];
                crate::encode_header(descr, shape, &mut buf).unwrap();
                let h = parse_header(&buf).unwrap();
                assert_eq!((h.dtype(), h.descr(), h.fortran_order()), (d, descr, false));
                assert_eq!(shape_of(&h), shape);
                assert_eq!(h.dims().len(), shape.len());
            }
        }
    }
}
