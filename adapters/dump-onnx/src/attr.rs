//! `AttributeProto`: a node's attributes as the kernel arguments MindSpore writes with
//! `save_kernel_args` (`{name: value}`, values as text: `True`/`False` never occur in ONNX;
//! numbers in decimal, lists as `[1, 2]`, strings as they are). Tensor and graph attributes
//! have no text form and are left out.

use crate::{
    Error,
    wire::{Fields, Value, push_ints, string},
};

/// Most elements of a list attribute written out (the rest elided as `...`).
const MAX_LIST: usize = 64;

/// One attribute's name and text, or `None` for a tensor or graph attribute.
pub(crate) fn parse_attribute(b: &[u8]) -> Result<Option<(String, String)>, Error> {
    let mut f = Fields::new(b, "AttributeProto");
    let (mut name, mut kind) = (String::new(), 0u64);
    let (mut float, mut int, mut text) = (None, None, None);
    let (mut floats, mut ints, mut strings) = (Vec::new(), Vec::new(), Vec::new());
    while let Some((n, v, _)) = f.next_field()? {
        match (n, v) {
            (1, v) => name = string(v, "AttributeProto.name")?.to_owned(),
            (2, Value::Fixed32(x)) => float = Some(f32::from_bits(x)),
            (3, v) => int = v.as_u64().map(|x| x as i64),
            (4, Value::Bytes(s)) => text = Some(String::from_utf8_lossy(s).into_owned()),
            (7, Value::Bytes(p)) => {
                if p.len() % 4 != 0 {
                    return Err(Error::Malformed {
                        what: "AttributeProto.floats",
                        offset: 0,
                        message: format!("{} bytes of packed floats, not a multiple of 4", p.len()),
                    });
                }
                floats.extend(
                    p.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                );
            }
            (7, Value::Fixed32(x)) => floats.push(f32::from_bits(x)),
            (8, v) => push_ints(v, &mut ints, "AttributeProto.ints")?,
            (9, Value::Bytes(s)) => strings.push(String::from_utf8_lossy(s).into_owned()),
            (20, v) => kind = v.as_u64().unwrap_or(0),
            _ => {}
        }
    }
    let list = |items: Vec<String>| {
        let n = items.len();
        let mut s: Vec<String> = items.into_iter().take(MAX_LIST).collect();
        if n > MAX_LIST {
            s.push("...".into());
        }
        format!("[{}]", s.join(", "))
    };
    // AttributeType: FLOAT 1, INT 2, STRING 3, TENSOR 4, GRAPH 5, FLOATS 6, INTS 7, STRINGS 8.
    let value = match kind {
        1 => float.map(|x| x.to_string()),
        2 => int.map(|x| x.to_string()),
        3 => text,
        6 => Some(list(floats.iter().map(f32::to_string).collect())),
        7 => Some(list(ints.iter().map(i64::to_string).collect())),
        8 => Some(list(strings)),
        // No type (old exporters): whichever value is there.
        0 => float
            .map(|x| x.to_string())
            .or(int.map(|x| x.to_string()))
            .or(text),
        _ => None,
    };
    Ok(value.map(|v| (name, v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{put_bytes, put_varint};

    fn attr(fields: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut b = Vec::new();
        put_bytes(&mut b, 1, b"axis");
        fields(&mut b);
        b
    }

    fn varint_field(b: &mut Vec<u8>, field: u32, v: u64) {
        put_varint(b, u64::from(field) << 3);
        put_varint(b, v);
    }

    #[test]
    fn every_text_kind() {
        let int = attr(|b| {
            varint_field(b, 3, (-1i64) as u64);
            varint_field(b, 20, 2);
        });
        assert_eq!(
            parse_attribute(&int).unwrap(),
            Some(("axis".into(), "-1".into()))
        );
        let float = attr(|b| {
            put_varint(b, (2 << 3) | 5);
            b.extend(0.5f32.to_le_bytes());
            varint_field(b, 20, 1);
        });
        assert_eq!(parse_attribute(&float).unwrap().unwrap().1, "0.5");
        let ints = attr(|b| {
            let mut p = Vec::new();
            for x in [1u64, 2, 3] {
                put_varint(&mut p, x);
            }
            put_bytes(b, 8, &p);
            varint_field(b, 20, 7);
        });
        assert_eq!(parse_attribute(&ints).unwrap().unwrap().1, "[1, 2, 3]");
        let s = attr(|b| {
            put_bytes(b, 4, b"SAME_UPPER");
            varint_field(b, 20, 3);
        });
        assert_eq!(parse_attribute(&s).unwrap().unwrap().1, "SAME_UPPER");
        let strings = attr(|b| {
            put_bytes(b, 9, b"a");
            put_bytes(b, 9, b"b");
            varint_field(b, 20, 8);
        });
        assert_eq!(parse_attribute(&strings).unwrap().unwrap().1, "[a, b]");
        let tensor = attr(|b| varint_field(b, 20, 4));
        assert_eq!(parse_attribute(&tensor).unwrap(), None);
    }

    #[test]
    fn hostile_attributes_are_errors_or_bounded() {
        // Packed floats of 5 bytes.
        let bad = attr(|b| put_bytes(b, 7, &[0; 5]));
        let e = parse_attribute(&bad).unwrap_err().to_string();
        assert!(
            e.contains("AttributeProto.floats") && e.contains("5 bytes"),
            "{e}"
        );
        // A name that is not UTF-8.
        let mut b = Vec::new();
        put_bytes(&mut b, 1, &[0xff, 0xfe]);
        assert!(
            parse_attribute(&b)
                .unwrap_err()
                .to_string()
                .contains("AttributeProto.name")
        );
        // Truncated: a length past the end.
        assert!(parse_attribute(&[(1 << 3) | 2, 50, b'a']).is_err());
        // A list of 10,000 ints is cut at 64 and says so.
        let long = attr(|b| {
            let mut p = Vec::new();
            for x in 0..10_000u64 {
                put_varint(&mut p, x);
            }
            put_bytes(b, 8, &p);
            varint_field(b, 20, 7);
        });
        let v = parse_attribute(&long).unwrap().unwrap().1;
        assert!(v.ends_with(", 63, ...]"), "{}", &v[v.len() - 20..]);
    }
}
