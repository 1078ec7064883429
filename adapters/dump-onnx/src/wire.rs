//! Protocol-buffers wire format: a reader over a message's fields and the few writers the
//! model rewrite needs. Unknown fields are skipped by the reader and kept byte for byte by
//! callers that copy messages through.

use crate::Error;

/// One field's value as it appears on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2: strings, bytes, embedded messages, packed repeated scalars.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

/// One field: its number, its value and its raw bytes (key included).
pub type Field<'a> = (u32, Value<'a>, &'a [u8]);

/// Iterates the fields of one message: `(field number, value, the field's raw bytes)`.
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    /// What is being read, for error messages (`ModelProto.graph`).
    what: &'static str,
}

impl<'a> Fields<'a> {
    /// The fields of the message `buf` (named `what` in errors).
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Fields { buf, pos: 0, what }
    }

    fn err(&self, message: &str) -> Error {
        Error::Malformed {
            what: self.what,
            offset: self.pos,
            message: message.to_owned(),
        }
    }

    fn varint(&mut self) -> Result<u64, Error> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(self.err("truncated varint"));
            };
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.err("varint longer than 10 bytes"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| self.err(&format!("field of {n} bytes runs past the end")))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// The next field, `None` at the end of the message.
    pub fn next_field(&mut self) -> Result<Option<Field<'a>>, Error> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let start = self.pos;
        let key = self.varint()?;
        let field = u32::try_from(key >> 3)
            .ok()
            .filter(|&f| f != 0)
            .ok_or_else(|| self.err(&format!("bad field number in key {key}")))?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => Value::Fixed64(u64::from_le_bytes(
                self.take(8)?.try_into().unwrap_or([0; 8]),
            )),
            2 => {
                let n = self.varint()?;
                let n = usize::try_from(n).map_err(|_| self.err("length overflows"))?;
                Value::Bytes(self.take(n)?)
            }
            5 => Value::Fixed32(u32::from_le_bytes(
                self.take(4)?.try_into().unwrap_or([0; 4]),
            )),
            w => return Err(self.err(&format!("unsupported wire type {w} (field {field})"))),
        };
        Ok(Some((field, value, &self.buf[start..self.pos])))
    }
}

impl Value<'_> {
    /// The value as an integer (varints and fixed-width values).
    pub fn as_u64(self) -> Option<u64> {
        match self {
            Value::Varint(v) | Value::Fixed64(v) => Some(v),
            Value::Fixed32(v) => Some(u64::from(v)),
            Value::Bytes(_) => None,
        }
    }
}

/// Reads a string field.
pub fn string<'a>(v: Value<'a>, what: &'static str) -> Result<&'a str, Error> {
    match v {
        Value::Bytes(b) => std::str::from_utf8(b).map_err(|e| Error::Malformed {
            what,
            offset: 0,
            message: format!("not UTF-8: {e}"),
        }),
        _ => Err(Error::Malformed {
            what,
            offset: 0,
            message: "expected a length-delimited string".into(),
        }),
    }
}

/// Reads a repeated integer field that may be packed (one `Bytes` of varints) or not.
pub fn push_ints(v: Value<'_>, out: &mut Vec<i64>, what: &'static str) -> Result<(), Error> {
    match v {
        Value::Bytes(b) => {
            let mut f = Fields::new(b, what);
            while f.pos < b.len() {
                out.push(f.varint()? as i64);
            }
        }
        other => out.push(other.as_u64().unwrap_or(0) as i64),
    }
    Ok(())
}

/// Appends a varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a length-delimited field (string, bytes or embedded message).
pub fn put_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_varint(out, (u64::from(field) << 3) | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_varints_and_strings() {
        let mut b = Vec::new();
        put_varint(&mut b, 1 << 3); // field 1, wire type 0
        put_varint(&mut b, 300);
        put_bytes(&mut b, 2, b"conv1");
        let mut f = Fields::new(&b, "test");
        let (n, v, raw) = f.next_field().unwrap().unwrap();
        assert_eq!((n, v), (1, Value::Varint(300)));
        assert_eq!(raw, &[0x08, 0xac, 0x02]);
        let (n, v, _) = f.next_field().unwrap().unwrap();
        assert_eq!((n, string(v, "t").unwrap()), (2, "conv1"));
        assert!(f.next_field().unwrap().is_none());
    }

    #[test]
    fn truncated_input_is_an_error_naming_the_offset() {
        let b = [0x12, 0x05, b'a']; // field 2, 5 bytes announced, 1 present
        let e = Fields::new(&b, "NodeProto").next_field().unwrap_err();
        let s = e.to_string();
        assert!(s.contains("NodeProto") && s.contains("past the end"), "{s}");
        let e = Fields::new(&[0x80; 11], "x").next_field().unwrap_err();
        assert!(e.to_string().contains("varint"));
    }

    #[test]
    fn packed_and_unpacked_ints_read_the_same() {
        let mut packed = Vec::new();
        put_varint(&mut packed, 3);
        put_varint(&mut packed, 4);
        let mut out = Vec::new();
        push_ints(Value::Bytes(&packed), &mut out, "dims").unwrap();
        push_ints(Value::Varint(5), &mut out, "dims").unwrap();
        assert_eq!(out, [3, 4, 5]);
    }
}
