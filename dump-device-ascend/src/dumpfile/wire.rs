//! A small protobuf wire-format reader: varints, fixed32/64, length-delimited fields, unknown
//! fields skipped, nesting depth bounded, every error naming the byte offset and the field.
//!
//! It borrows the message bytes and allocates nothing; the message decoders
//! ([`super::message`]) build the owned structures.

use super::error::{DumpFileError, FieldPath, WireProblem};

/// Wire type 0: varint.
pub(super) const VARINT: u8 = 0;
/// Wire type 1: 8 bytes little-endian.
pub(super) const FIXED64: u8 = 1;
/// Wire type 2: varint length, then that many bytes.
pub(super) const LEN: u8 = 2;
/// Wire type 5: 4 bytes little-endian.
pub(super) const FIXED32: u8 = 5;
/// Not a wire type: a `repeated` scalar field that may come packed (2) or one by one (0).
pub(super) const PACKABLE: u8 = 0xF0;

/// One message type's known fields: number, name and wire type.
pub(super) struct Schema {
    /// The message type's name.
    pub name: &'static str,
    /// `(number, name, wire type)` for every field the decoder uses.
    pub fields: &'static [(u32, &'static str, u8)],
}

impl Schema {
    fn find(&self, number: u32) -> Option<(&'static str, u8)> {
        self.fields
            .iter()
            .find(|f| f.0 == number)
            .map(|&(_, name, wt)| (name, wt))
    }

    /// The error path of field `number`.
    pub(super) fn path(&self, number: u32) -> FieldPath {
        FieldPath {
            message: self.name,
            number,
            name: self.find(number).map_or("?", |f| f.0),
        }
    }
}

/// A field's value.
#[derive(Clone, Copy, Debug)]
pub(super) enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1 (also 5, widened).
    Fixed(u64),
    /// Wire type 2: the bytes and the file offset of their first byte.
    Bytes(&'a [u8], u64),
}

/// A known field read from a message.
#[derive(Clone, Copy, Debug)]
pub(super) struct Field<'a> {
    /// The field number.
    pub number: u32,
    /// File offset of the field's tag.
    pub offset: u64,
    /// The value.
    pub value: Value<'a>,
}

impl Field<'_> {
    /// The value as a `uint64` / `uint32` / enum number (varint or fixed).
    pub(super) fn u64(&self) -> u64 {
        match self.value {
            Value::Varint(v) | Value::Fixed(v) => v,
            Value::Bytes(..) => 0,
        }
    }

    /// A `uint32` field: protobuf keeps the low 32 bits of a wider varint.
    pub(super) fn u32(&self) -> u32 {
        self.u64() as u32
    }

    /// An `int32` or enum field: the low 32 bits, two's complement (negative values are
    /// encoded as 10-byte varints).
    pub(super) fn i32(&self) -> i32 {
        self.u64() as u32 as i32
    }
}

/// A cursor over one message's bytes.
pub(super) struct Wire<'a> {
    buf: &'a [u8],
    pos: usize,
    /// File offset of `buf[0]`.
    base: u64,
}

impl<'a> Wire<'a> {
    /// A reader over `buf`, whose first byte is at file offset `base`.
    pub(super) fn new(buf: &'a [u8], base: u64) -> Self {
        Wire { buf, pos: 0, base }
    }

    /// File offset of the next byte.
    pub(super) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// `true` when every byte was consumed.
    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn err(&self, at: u64, field: FieldPath, problem: WireProblem) -> DumpFileError {
        DumpFileError::Wire {
            offset: at,
            field,
            problem,
        }
    }

    /// Reads one varint.
    pub(super) fn varint(&mut self, field: FieldPath) -> Result<u64, DumpFileError> {
        let start = self.offset();
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(self.err(
                    start,
                    field,
                    WireProblem::Truncated {
                        needed: i as u64 + 1,
                        left: i as u64,
                    },
                ));
            };
            self.pos += 1;
            // The 10th byte holds bit 63 only.
            if i == 9 && b > 1 {
                return Err(self.err(start, field, WireProblem::VarintOverflow));
            }
            v |= u64::from(b & 0x7F) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.err(start, field, WireProblem::VarintOverflow))
    }

    fn take(&mut self, n: u64, at: u64, field: FieldPath) -> Result<&'a [u8], DumpFileError> {
        let left = (self.buf.len() - self.pos) as u64;
        if n > left {
            return Err(self.err(at, field, WireProblem::Truncated { needed: n, left }));
        }
        // n <= left <= usize::MAX here.
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    /// The next field of `schema`, skipping unknown ones; `None` at the end of the message.
    pub(super) fn next(&mut self, schema: &Schema) -> Result<Option<Field<'a>>, DumpFileError> {
        while !self.at_end() {
            let at = self.offset();
            let tag = self.varint(schema.path(0))?;
            let number = tag >> 3;
            let wt = (tag & 7) as u8;
            if number == 0 || number > (1 << 29) - 1 {
                return Err(self.err(at, schema.path(0), WireProblem::FieldNumber(number)));
            }
            let number = number as u32;
            let path = schema.path(number);
            let value = match wt {
                VARINT => Value::Varint(self.varint(path)?),
                FIXED64 => {
                    let b = self.take(8, at, path)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    Value::Fixed(u64::from_le_bytes(a))
                }
                FIXED32 => {
                    let b = self.take(4, at, path)?;
                    let mut a = [0u8; 4];
                    a.copy_from_slice(b);
                    Value::Fixed(u64::from(u32::from_le_bytes(a)))
                }
                LEN => {
                    let n = self.varint(path)?;
                    let start = self.offset();
                    Value::Bytes(self.take(n, at, path)?, start)
                }
                other => return Err(self.err(at, path, WireProblem::WireType(other))),
            };
            let Some((_, expected)) = schema.find(number) else {
                continue; // unknown field: skipped (its bytes were consumed above)
            };
            let ok = match expected {
                PACKABLE => wt == VARINT || wt == LEN,
                e => e == wt,
            };
            if !ok {
                let expected = if expected == PACKABLE {
                    VARINT
                } else {
                    expected
                };
                return Err(self.err(
                    at,
                    path,
                    WireProblem::WrongWireType {
                        found: wt,
                        expected,
                    },
                ));
            }
            return Ok(Some(Field {
                number,
                offset: at,
                value,
            }));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Schema = Schema {
        name: "T",
        fields: &[(1, "a", VARINT), (2, "b", LEN), (3, "c", PACKABLE)],
    };

    #[test]
    fn varints_and_skipping() {
        // 1: 300, 9 (unknown, fixed32), 2: "hi", 15 (unknown, fixed64), 1: u64::MAX
        let mut m = vec![0x08, 0xAC, 0x02, 0x4D, 1, 2, 3, 4, 0x12, 2, b'h', b'i'];
        m.extend([0x79, 0, 0, 0, 0, 0, 0, 0, 0]);
        m.extend([
            0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
        ]);
        let mut w = Wire::new(&m, 100);
        let f = w.next(&S).unwrap().unwrap();
        assert_eq!((f.number, f.u64(), f.offset), (1, 300, 100));
        let f = w.next(&S).unwrap().unwrap();
        match f.value {
            Value::Bytes(b, off) => assert_eq!((b, off), (&b"hi"[..], 110)),
            v => panic!("{v:?}"),
        }
        let f = w.next(&S).unwrap().unwrap();
        assert_eq!((f.u64(), f.i32()), (u64::MAX, -1));
        assert!(w.next(&S).unwrap().is_none());
    }

    #[test]
    fn bad_encodings() {
        let problem = |m: &[u8]| match Wire::new(m, 0).next(&S) {
            Err(DumpFileError::Wire { problem, .. }) => problem,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            problem(&[0x08]),
            WireProblem::Truncated { needed: 1, left: 0 }
        );
        assert_eq!(
            problem(&[
                0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80
            ]),
            WireProblem::VarintOverflow
        );
        assert_eq!(
            problem(&[
                0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02
            ]),
            WireProblem::VarintOverflow
        );
        assert_eq!(problem(&[0x00]), WireProblem::FieldNumber(0));
        assert_eq!(problem(&[0x0B]), WireProblem::WireType(3));
        assert_eq!(
            problem(&[0x12, 5, 1]),
            WireProblem::Truncated { needed: 5, left: 1 }
        );
        assert_eq!(
            problem(&[0x10, 1]),
            WireProblem::WrongWireType {
                found: 0,
                expected: 2
            }
        );
        assert_eq!(
            problem(&[
                0x12, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01
            ]),
            WireProblem::Truncated {
                needed: u64::MAX,
                left: 0
            }
        );
    }
}
