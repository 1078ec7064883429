//! [`inline_data`]: a model whose every initializer keeps its data in `raw_data`.
//!
//! ONNX lets an initializer hold its elements in `raw_data`, in a typed repeated field
//! (`float_data`, `int32_data`, `int64_data`, `double_data`, `uint64_data`) or in a file beside
//! the model (external data: `data_location` EXTERNAL with `location`, `offset` and `length`
//! entries; torch's exporter writes `M.onnx` + `M.onnx.data`). Some runtimes (candle-onnx)
//! read only `raw_data`; this rewrite gives them the same values there. Initializers of types
//! with no little-endian element form (strings) are copied unchanged.
//!
//! External files are read relative to the model's folder (an absolute `location` is used as
//! given). Every read is checked: the file opens, `offset` + `length` lie inside it, the
//! length is the tensor's size, and the bytes inlined stay within the caller's budget.

use std::{
    io::{Read, Seek, SeekFrom},
    path::{Path, PathBuf},
};

use crate::{
    Error,
    model::{dtype, parse_tensor},
    wire::{Fields, Value, push_ints, put_bytes, put_varint, string},
};

/// The most bytes a rewritten model may hold: protobuf messages cannot exceed 2 GiB.
pub const MAX_INLINE_MODEL: u64 = (1 << 31) - 1;

/// `model` (an `.onnx` file's bytes; external files looked up in `base`) with every
/// initializer of the main graph stored in `raw_data`. The result stays under `budget` bytes
/// (at most [`MAX_INLINE_MODEL`]); a bigger model is an error that says so. Every other field
/// is copied as it is, unchecked: a model that [`Model::parse`](crate::Model::parse) rejects
/// may come out, rejected the same way.
pub fn inline_data(model: &[u8], base: &Path, budget: u64) -> Result<Vec<u8>, Error> {
    let budget = budget.min(MAX_INLINE_MODEL);
    let mut out = Vec::with_capacity(model.len());
    let mut seen_graph = false;
    let mut f = Fields::new(model, "ModelProto");
    while let Some((n, v, raw)) = f.next_field()? {
        match (n, v) {
            (7, Value::Bytes(graph)) if !seen_graph => {
                seen_graph = true;
                let mut g = Vec::with_capacity(graph.len());
                let mut gf = Fields::new(graph, "GraphProto");
                while let Some((gn, gv, graw)) = gf.next_field()? {
                    match (gn, gv) {
                        (5, Value::Bytes(t)) => {
                            let tensor = normalise(t, base, budget)?;
                            put_bytes(&mut g, 5, &tensor);
                        }
                        _ => g.extend_from_slice(graw),
                    }
                    if (out.len() + g.len()) as u64 > budget {
                        return Err(over_budget(budget));
                    }
                }
                put_bytes(&mut out, 7, &g);
            }
            (7, Value::Bytes(_)) => return Err(Error::Model(crate::model::TWO_GRAPHS.into())),
            (7, _) => return Err(Error::Model("ModelProto.graph is not a message".into())),
            _ => out.extend_from_slice(raw),
        }
    }
    if !seen_graph {
        return Err(Error::Model("the model has no graph".into()));
    }
    if out.len() as u64 > budget {
        return Err(over_budget(budget));
    }
    Ok(out)
}

fn over_budget(budget: u64) -> Error {
    Error::Model(format!(
        "the model with its external data inlined exceeds {budget} bytes (protobuf's 2 GiB \
         limit, or the caller's budget)"
    ))
}

/// Where an external initializer's bytes are.
#[derive(Default)]
struct External {
    location: Option<String>,
    offset: u64,
    length: Option<u64>,
}

impl crate::Model {
    /// This model with the weights it keeps in external files (looked up in `base`) read
    /// into `raw_data`, so a dump sees them as constants and kernel inputs; `None` when it
    /// keeps none outside, or when they cannot be read or the whole would exceed protobuf's
    /// 2 GiB (the dump then names each initializer it lacks).
    pub fn with_external_weights(&self, base: &Path) -> Option<crate::Model> {
        if self.graph.initializers.iter().all(|i| i.data.is_some()) {
            return None;
        }
        inline_data(self.bytes(), base, MAX_INLINE_MODEL)
            .and_then(crate::Model::parse)
            .ok()
    }
}

/// The element bytes of one initializer (`tensor`: a `TensorProto`'s bytes), little-endian
/// as `raw_data` holds them, wherever the model keeps them: `raw_data`, a typed field
/// (`float_data`, `int64_data`, ...) or an external file (looked up in `base`, at most
/// `budget` bytes, checked against the file and the tensor's size). `None` for a type with no
/// element bytes (strings) or a tensor without data.
///
/// A runtime that builds its own model structure (candle-onnx's `ModelProto`) fills
/// `raw_data` with it tensor by tensor, so the weights never pass through one protobuf
/// message and models beyond protobuf's 2 GiB run.
pub fn initializer_data(tensor: &[u8], base: &Path, budget: u64) -> Result<Option<Vec<u8>>, Error> {
    Ok(parse_initializer(tensor, base, budget)?.data)
}

/// An initializer's identity and its element bytes (see [`initializer_data`]).
struct Initializer {
    name: String,
    data_type: i32,
    dims: Vec<i64>,
    data: Option<Vec<u8>>,
}

fn parse_initializer(t: &[u8], base: &Path, budget: u64) -> Result<Initializer, Error> {
    let mut name = String::new();
    let mut data_type = 0i32;
    let mut dims: Vec<i64> = Vec::new();
    let mut external = false;
    let mut ext = External::default();
    let mut f = Fields::new(t, "TensorProto");
    while let Some((n, v, _)) = f.next_field()? {
        match (n, v) {
            (1, v) => push_ints(v, &mut dims, "TensorProto.dims")?,
            (2, v) => data_type = v.as_u64().unwrap_or(0) as i32,
            (8, v) => name = string(v, "TensorProto.name")?.to_owned(),
            (13, Value::Bytes(entry)) => external_entry(entry, &name, &mut ext)?,
            (14, v) => external = v.as_u64() == Some(1),
            _ => {}
        }
    }
    let data = if external {
        Some(read_external(&name, data_type, &dims, &ext, base, budget)?)
    } else {
        parse_tensor(t)?.data.filter(|_| dtype(data_type).is_some())
    };
    Ok(Initializer {
        name,
        data_type,
        dims,
        data,
    })
}

/// One `TensorProto` with its data in `raw_data` (unchanged when its type has no element
/// bytes).
fn normalise(t: &[u8], base: &Path, budget: u64) -> Result<Vec<u8>, Error> {
    let Initializer {
        name,
        data_type,
        dims,
        data,
    } = parse_initializer(t, base, budget)?;
    let Some(data) = data else {
        return Ok(t.to_vec());
    };
    let mut out = Vec::with_capacity(data.len() + name.len() + 32);
    for d in &dims {
        put_varint(&mut out, 1 << 3);
        put_varint(&mut out, *d as u64);
    }
    put_varint(&mut out, 2 << 3);
    put_varint(&mut out, data_type as u64);
    put_bytes(&mut out, 8, name.as_bytes());
    put_bytes(&mut out, 9, &data);
    Ok(out)
}

/// One `StringStringEntryProto` of `external_data`.
fn external_entry(entry: &[u8], tensor: &str, ext: &mut External) -> Result<(), Error> {
    let (mut key, mut value) = ("", "");
    let mut f = Fields::new(entry, "TensorProto.external_data");
    while let Some((n, v, _)) = f.next_field()? {
        match n {
            1 => key = string(v, "StringStringEntryProto.key")?,
            2 => value = string(v, "StringStringEntryProto.value")?,
            _ => {}
        }
    }
    let number = |what: &str| {
        value.parse::<u64>().map_err(|_| {
            Error::Model(format!(
                "initializer {tensor:?}: external_data {what} {value:?} is not a non-negative \
                 integer"
            ))
        })
    };
    match key {
        "location" => ext.location = Some(value.to_owned()),
        "offset" => ext.offset = number("offset")?,
        "length" => ext.length = Some(number("length")?),
        _ => {} // checksum and others are not needed to read the bytes
    }
    Ok(())
}

/// The bytes of an external initializer, checked against the file and the tensor's size.
fn read_external(
    tensor: &str,
    data_type: i32,
    dims: &[i64],
    ext: &External,
    base: &Path,
    budget: u64,
) -> Result<Vec<u8>, Error> {
    let fail = |file: &Path, m: String| {
        Error::Model(format!(
            "initializer {tensor:?}: external data {}: {m}",
            file.display()
        ))
    };
    let Some(location) = ext.location.as_deref().filter(|l| !l.is_empty()) else {
        return Err(Error::Model(format!(
            "initializer {tensor:?}: data_location is EXTERNAL but external_data has no \
             \"location\" entry"
        )));
    };
    let Some(dt) = dtype(data_type) else {
        return Err(Error::Model(format!(
            "initializer {tensor:?}: external data of ONNX type {data_type} cannot be inlined \
             (no element size)"
        )));
    };
    let elems = dims.iter().try_fold(1usize, |acc, &d| {
        usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
    });
    let Some(need) = elems.and_then(|e| dt.storage_bytes(e)) else {
        return Err(Error::Model(format!(
            "initializer {tensor:?}: dims {dims:?} are negative or overflow"
        )));
    };
    let file: PathBuf = base.join(location);
    let length = ext.length.unwrap_or(need as u64);
    if length != need as u64 {
        return Err(fail(
            &file,
            format!("length {length} but {dt} {dims:?} needs {need} bytes"),
        ));
    }
    if length > budget {
        return Err(over_budget(budget));
    }
    let mut fh = std::fs::File::open(&file).map_err(|e| fail(&file, e.to_string()))?;
    let size = fh.metadata().map_err(|e| fail(&file, e.to_string()))?.len();
    if ext.offset.checked_add(length).is_none_or(|end| end > size) {
        return Err(fail(
            &file,
            format!(
                "offset {} + length {length} runs past the end of the file ({size} bytes)",
                ext.offset
            ),
        ));
    }
    fh.seek(SeekFrom::Start(ext.offset))
        .map_err(|e| fail(&file, e.to_string()))?;
    let mut data = vec![0u8; need];
    fh.read_exact(&mut data)
        .map_err(|e| fail(&file, e.to_string()))?;
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Model;

    /// A TensorProto: dims, data_type, name, then `rest` (already encoded fields).
    fn tensor(name: &str, data_type: i32, dims: &[u64], rest: &[u8]) -> Vec<u8> {
        let mut t = Vec::new();
        for d in dims {
            put_varint(&mut t, 1 << 3);
            put_varint(&mut t, *d);
        }
        put_varint(&mut t, 2 << 3);
        put_varint(&mut t, data_type as u64);
        put_bytes(&mut t, 8, name.as_bytes());
        t.extend_from_slice(rest);
        t
    }

    fn entry(k: &str, v: &str) -> Vec<u8> {
        let mut e = Vec::new();
        put_bytes(&mut e, 1, k.as_bytes());
        put_bytes(&mut e, 2, v.as_bytes());
        let mut f = Vec::new();
        put_bytes(&mut f, 13, &e);
        f
    }

    fn external(entries: &[(&str, &str)]) -> Vec<u8> {
        let mut r: Vec<u8> = entries.iter().flat_map(|(k, v)| entry(k, v)).collect();
        put_varint(&mut r, 14 << 3);
        put_varint(&mut r, 1);
        r
    }

    fn model_with(tensors: &[Vec<u8>]) -> Vec<u8> {
        let mut g = Vec::new();
        for t in tensors {
            put_bytes(&mut g, 5, t);
        }
        let mut m = Vec::new();
        put_bytes(&mut m, 7, &g);
        m
    }

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dump-onnx-inline-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn typed_fields_and_external_files_become_raw_data() {
        let d = dir("ok");
        let w: Vec<u8> = [1.5f32, -2.0, 3.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut file = vec![0xEEu8; 5]; // the tensor starts at offset 5
        file.extend_from_slice(&w);
        std::fs::write(d.join("m.onnx.data"), &file).unwrap();
        // float_data packed: 0.5, 0.25
        let mut packed = Vec::new();
        for v in [0.5f32, 0.25] {
            packed.extend_from_slice(&v.to_le_bytes());
        }
        let mut fd = Vec::new();
        put_bytes(&mut fd, 4, &packed);
        // int64_data packed: 3, -1
        let mut ints = Vec::new();
        put_varint(&mut ints, 3);
        put_varint(&mut ints, u64::MAX); // -1
        let mut id = Vec::new();
        put_bytes(&mut id, 7, &ints);
        let m = model_with(&[
            tensor(
                "w",
                1,
                &[3],
                &external(&[
                    ("location", "m.onnx.data"),
                    ("offset", "5"),
                    ("length", "12"),
                ]),
            ),
            tensor("s", 1, &[2], &fd),
            tensor("shape", 7, &[2], &id),
        ]);
        // Before: w has no data in the model.
        assert_eq!(
            Model::parse(m.clone()).unwrap().graph.initializers[0].data,
            None
        );
        let out = inline_data(&m, &d, u64::MAX).unwrap();
        let g = Model::parse(out.clone()).unwrap().graph;
        assert_eq!(g.initializers[0].data.as_deref(), Some(&w[..]));
        assert_eq!(g.initializers[1].data.as_deref(), Some(&packed[..]));
        let want: Vec<u8> = [3i64, -1].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(g.initializers[2].data.as_deref(), Some(&want[..]));
        // Every initializer now carries raw_data (field 9) and no external marker.
        let mut f = Fields::new(&out, "m");
        let (_, Value::Bytes(graph), _) = f.next_field().unwrap().unwrap() else {
            panic!("graph")
        };
        let mut gf = Fields::new(graph, "g");
        let mut n = 0;
        while let Some((5, Value::Bytes(t), _)) = gf.next_field().unwrap() {
            let fields: Vec<u32> = {
                let mut tf = Fields::new(t, "t");
                let mut v = Vec::new();
                while let Some((k, _, _)) = tf.next_field().unwrap() {
                    v.push(k);
                }
                v
            };
            assert!(fields.contains(&9) && !fields.contains(&14) && !fields.contains(&4));
            n += 1;
        }
        assert_eq!(n, 3);
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn initializer_data_reads_raw_typed_and_external_bytes() {
        let d = dir("one");
        let w: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        std::fs::write(d.join("w.bin"), [&[9u8; 3][..], &w].concat()).unwrap();
        let ext = tensor(
            "w",
            1,
            &[2],
            &external(&[("location", "w.bin"), ("offset", "3")]),
        );
        assert_eq!(
            initializer_data(&ext, &d, u64::MAX).unwrap(),
            Some(w.clone())
        );
        let mut raw = Vec::new();
        put_bytes(&mut raw, 9, &w);
        assert_eq!(
            initializer_data(&tensor("r", 1, &[2], &raw), &d, 0).unwrap(),
            Some(w.clone())
        );
        let mut ints = Vec::new();
        put_varint(&mut ints, 5);
        let mut typed = Vec::new();
        put_bytes(&mut typed, 7, &ints);
        assert_eq!(
            initializer_data(&tensor("i", 7, &[1], &typed), &d, 0).unwrap(),
            Some(5i64.to_le_bytes().to_vec())
        );
        // Strings have no element bytes; an external file over the budget is an error.
        assert_eq!(
            initializer_data(&tensor("s", 8, &[1], &[]), &d, 0).unwrap(),
            None
        );
        let e = initializer_data(&ext, &d, 4).unwrap_err().to_string();
        assert!(e.contains("exceeds 4 bytes"), "{e}");
    }

    #[test]
    fn external_weights_are_read_in_when_the_model_has_some() {
        let d = dir("weights");
        let w: Vec<u8> = [4.0f32, 5.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(d.join("w.bin"), &w).unwrap();
        let ext = model_with(&[tensor("w", 1, &[2], &external(&[("location", "w.bin")]))]);
        let m = Model::parse(ext).unwrap();
        let read = m.with_external_weights(&d).expect("external weights read");
        assert_eq!(read.graph.initializers[0].data.as_deref(), Some(&w[..]));
        // Nothing outside: nothing to do; a missing file: the model stays as it is.
        assert!(read.with_external_weights(&d).is_none());
        assert!(m.with_external_weights(&dir("empty")).is_none());
    }

    #[test]
    fn hostile_external_data_is_a_clear_error() {
        let d = dir("bad");
        std::fs::write(d.join("short.data"), [0u8; 8]).unwrap();
        let case = |entries: &[(&str, &str)], dims: &[u64]| {
            let m = model_with(&[tensor("w", 1, dims, &external(entries))]);
            inline_data(&m, &d, u64::MAX).unwrap_err().to_string()
        };
        let e = case(&[("offset", "0")], &[2]);
        assert!(
            e.contains("\"w\"") && e.contains("no \"location\" entry"),
            "{e}"
        );
        let e = case(&[("location", "missing.data")], &[2]);
        assert!(
            e.contains("missing.data") && e.contains("No such file"),
            "{e}"
        );
        let e = case(&[("location", "short.data"), ("offset", "4")], &[2]);
        assert!(
            e.contains("short.data")
                && e.contains("offset 4 + length 8 runs past the end of the file (8 bytes)"),
            "{e}"
        );
        let e = case(&[("location", "short.data"), ("length", "4")], &[2]);
        assert!(e.contains("length 4 but float32 [2] needs 8 bytes"), "{e}");
        let e = case(&[("location", "short.data"), ("offset", "-3")], &[2]);
        assert!(
            e.contains("offset \"-3\" is not a non-negative integer"),
            "{e}"
        );
        let e = case(
            &[
                ("location", "short.data"),
                ("offset", "18446744073709551615"),
            ],
            &[2],
        );
        assert!(e.contains("runs past the end"), "{e}");
        let e = case(&[("location", "short.data")], &[u64::MAX >> 1, 1 << 40]);
        assert!(e.contains("negative or overflow"), "{e}");
        // Over the caller's budget.
        let m = model_with(&[tensor(
            "w",
            1,
            &[2],
            &external(&[("location", "short.data")]),
        )]);
        let e = inline_data(&m, &d, 4).unwrap_err().to_string();
        assert!(e.contains("exceeds 4 bytes"), "{e}");
        // Not a model at all.
        assert!(inline_data(b"\xff\xff", &d, u64::MAX).is_err());
        assert!(
            inline_data(&[], &d, u64::MAX)
                .unwrap_err()
                .to_string()
                .contains("no graph")
        );
        std::fs::remove_dir_all(&d).ok();
    }
}
