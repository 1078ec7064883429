//! The parts of an ONNX `ModelProto` the adapters need: the main graph's nodes (name, op
//! type, input and output value names), its inputs and outputs (element type and shape) and
//! its initializers (dtype, dims, little-endian bytes).

use dump_core::DType;

use crate::{
    Error,
    wire::{Fields, Value, push_ints, string},
};

/// A parsed model: the main graph, the original bytes kept for rewriting.
#[derive(Clone, Debug)]
pub struct Model {
    /// The main graph.
    pub graph: Graph,
    bytes: Vec<u8>,
}

/// The main graph of a model.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// `GraphProto.name`.
    pub name: String,
    /// Nodes in graph order (topologically sorted, as ONNX requires).
    pub nodes: Vec<Node>,
    /// Graph inputs fed at run time (inputs that are also initializers are left out).
    pub inputs: Vec<ValueInfo>,
    /// Graph outputs.
    pub outputs: Vec<ValueInfo>,
    /// Weights and constants.
    pub initializers: Vec<Initializer>,
}

/// One node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    /// `NodeProto.name`; `{op_type}_{index}` when the model leaves it empty.
    pub name: String,
    /// `NodeProto.op_type`.
    pub op_type: String,
    /// `NodeProto.domain` (empty for the default ONNX domain).
    pub domain: String,
    /// Input value names in slot order (empty for an omitted optional input).
    pub inputs: Vec<String>,
    /// Output value names in slot order (empty for an omitted optional output).
    pub outputs: Vec<String>,
    /// Attributes with a text form (name, value), in the model's order: what the dump writes
    /// as kernel arguments under `save_kernel_args`.
    pub attributes: Vec<(String, String)>,
    /// `NodeProto.metadata_props` (key, value) in the model's order: torch's dynamo exporter
    /// keeps each node's module scope there ([`TorchScope`](crate::TorchScope)).
    pub metadata: Vec<(String, String)>,
}

/// One dimension of a declared shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A fixed size.
    Value(i64),
    /// A named symbolic size (`batch`).
    Param(String),
    /// Neither.
    Unknown,
}

/// A graph input or output: its name, element type and shape when declared.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ValueInfo {
    /// The value name.
    pub name: String,
    /// ONNX `TensorProto.DataType` code, when declared.
    pub elem_type: Option<i32>,
    /// Dimensions, when declared.
    pub dims: Option<Vec<Dim>>,
}

impl ValueInfo {
    /// The element type as a dump dtype.
    pub fn dtype(&self) -> Option<DType> {
        self.elem_type.and_then(dtype)
    }

    /// The shape when every dimension is a fixed size.
    pub fn fixed_shape(&self) -> Option<Vec<usize>> {
        self.dims
            .as_ref()?
            .iter()
            .map(|d| match d {
                Dim::Value(v) => usize::try_from(*v).ok(),
                _ => None,
            })
            .collect()
    }
}

/// A weight or constant of the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Initializer {
    /// The value name.
    pub name: String,
    /// ONNX `TensorProto.DataType` code.
    pub data_type: i32,
    /// Dimensions.
    pub dims: Vec<usize>,
    /// Little-endian element bytes in C order; `None` when the data is not in the model
    /// (external data, strings).
    pub data: Option<Vec<u8>>,
}

impl Initializer {
    /// The element type as a dump dtype.
    pub fn dtype(&self) -> Option<DType> {
        dtype(self.data_type)
    }
}

/// The dump dtype of an ONNX `TensorProto.DataType` code (`INT4`, 22: [`DType::Int4`] and
/// `UINT4`, 21: [`DType::UInt4`], two per byte, low nibble first, as ONNX packs them;
/// `FLOAT8E4M3FN`, 17, `FLOAT8E4M3FNUZ`, 18, `FLOAT8E5M2`, 19 and `FLOAT8E5M2FNUZ`, 20: the
/// float8 dtypes); `None` for strings, 4-bit floats, `FLOAT8E8M0` and other types opdump has
/// no dtype for.
pub fn dtype(code: i32) -> Option<DType> {
    Some(match code {
        1 => DType::Float32,
        2 => DType::UInt8,
        3 => DType::Int8,
        4 => DType::UInt16,
        5 => DType::Int16,
        6 => DType::Int32,
        7 => DType::Int64,
        9 => DType::Bool,
        10 => DType::Float16,
        11 => DType::Float64,
        12 => DType::UInt32,
        13 => DType::UInt64,
        14 => DType::Complex64,
        15 => DType::Complex128,
        16 => DType::BFloat16,
        17 => DType::Float8E4M3FN,
        18 => DType::Float8E4M3FNUZ,
        19 => DType::Float8E5M2,
        20 => DType::Float8E5M2FNUZ,
        21 => DType::UInt4,
        22 => DType::Int4,
        _ => return None,
    })
}

/// The ONNX name of a `TensorProto.DataType` code (`FLOAT8E4M3FN`), or `"an unknown type"`.
pub fn type_name(code: i32) -> &'static str {
    const NAMES: [&str; 27] = [
        "UNDEFINED",
        "FLOAT",
        "UINT8",
        "INT8",
        "UINT16",
        "INT16",
        "INT32",
        "INT64",
        "STRING",
        "BOOL",
        "FLOAT16",
        "DOUBLE",
        "UINT32",
        "UINT64",
        "COMPLEX64",
        "COMPLEX128",
        "BFLOAT16",
        "FLOAT8E4M3FN",
        "FLOAT8E4M3FNUZ",
        "FLOAT8E5M2",
        "FLOAT8E5M2FNUZ",
        "UINT4",
        "INT4",
        "FLOAT4E2M1",
        "FLOAT8E8M0",
        "UINT2",
        "INT2",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|c| NAMES.get(c))
        .copied()
        .unwrap_or("an unknown type")
}

/// The ONNX `TensorProto.DataType` code of a dump dtype (the inverse of [`dtype`]).
pub fn onnx_code(d: DType) -> Option<i32> {
    (1..=22).find(|&c| dtype(c) == Some(d))
}

/// The error of a model whose `ModelProto.graph` appears more than once.
pub(crate) const TWO_GRAPHS: &str =
    "ModelProto.graph appears twice (a model has one graph; protobuf would merge them)";

impl Model {
    /// Parses `bytes` (an `.onnx` file).
    pub fn parse(bytes: Vec<u8>) -> Result<Model, Error> {
        let mut graph = None;
        let mut f = Fields::new(&bytes, "ModelProto");
        while let Some((n, v, _)) = f.next_field()? {
            if n == 7 {
                let Value::Bytes(b) = v else {
                    return Err(Error::Model("ModelProto.graph is not a message".into()));
                };
                if graph.is_some() {
                    // Protobuf would merge the two; the rewriters (inline_data, only_outputs)
                    // edit one graph. No exporter writes two, so it is refused.
                    return Err(Error::Model(TWO_GRAPHS.into()));
                }
                graph = Some(parse_graph(b)?);
            }
        }
        let graph = graph.ok_or_else(|| Error::Model("the model has no graph".into()))?;
        Ok(Model { graph, bytes })
    }

    /// The model's bytes as given to [`parse`](Model::parse).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The initializer named `name`.
    pub fn initializer(&self, name: &str) -> Option<&Initializer> {
        self.graph.initializers.iter().find(|i| i.name == name)
    }
}

fn parse_graph(b: &[u8]) -> Result<Graph, Error> {
    let mut g = Graph::default();
    let mut inputs = Vec::new();
    let mut f = Fields::new(b, "GraphProto");
    while let Some((n, v, _)) = f.next_field()? {
        match (n, v) {
            (1, Value::Bytes(m)) => g.nodes.push(parse_node(m)?),
            (2, v) => g.name = string(v, "GraphProto.name")?.to_owned(),
            (5, Value::Bytes(m)) => g.initializers.push(parse_tensor(m)?),
            (11, Value::Bytes(m)) => inputs.push(parse_value_info(m)?),
            (12, Value::Bytes(m)) => g.outputs.push(parse_value_info(m)?),
            _ => {}
        }
    }
    g.inputs = inputs
        .into_iter()
        .filter(|i| !g.initializers.iter().any(|w| w.name == i.name))
        .collect();
    for (i, node) in g.nodes.iter_mut().enumerate() {
        if node.name.is_empty() {
            node.name = format!("{}_{i}", node.op_type);
        }
    }
    Ok(g)
}

pub(crate) fn parse_node(b: &[u8]) -> Result<Node, Error> {
    let mut node = Node::default();
    let mut f = Fields::new(b, "NodeProto");
    while let Some((n, v, _)) = f.next_field()? {
        match n {
            1 => node.inputs.push(string(v, "NodeProto.input")?.to_owned()),
            2 => node.outputs.push(string(v, "NodeProto.output")?.to_owned()),
            3 => node.name = string(v, "NodeProto.name")?.to_owned(),
            4 => node.op_type = string(v, "NodeProto.op_type")?.to_owned(),
            7 => node.domain = string(v, "NodeProto.domain")?.to_owned(),
            9 => {
                if let Value::Bytes(e) = v {
                    node.metadata.push(parse_entry(e)?);
                }
            }
            5 => {
                if let Value::Bytes(a) = v
                    && let Some(kv) = crate::attr::parse_attribute(a)?
                {
                    node.attributes.push(kv);
                }
            }
            _ => {}
        }
    }
    Ok(node)
}

/// `StringStringEntryProto` → (key, value).
fn parse_entry(b: &[u8]) -> Result<(String, String), Error> {
    let (mut key, mut value) = (String::new(), String::new());
    let mut f = Fields::new(b, "StringStringEntryProto");
    while let Some((n, v, _)) = f.next_field()? {
        match n {
            1 => key = string(v, "StringStringEntryProto.key")?.to_owned(),
            2 => value = string(v, "StringStringEntryProto.value")?.to_owned(),
            _ => {}
        }
    }
    Ok((key, value))
}

fn parse_value_info(b: &[u8]) -> Result<ValueInfo, Error> {
    let mut vi = ValueInfo::default();
    let mut f = Fields::new(b, "ValueInfoProto");
    while let Some((n, v, _)) = f.next_field()? {
        match (n, v) {
            (1, v) => vi.name = string(v, "ValueInfoProto.name")?.to_owned(),
            (2, Value::Bytes(t)) => parse_type(t, &mut vi)?,
            _ => {}
        }
    }
    Ok(vi)
}

/// `TypeProto.tensor_type` → element type and shape (other kinds of values are left blank).
fn parse_type(b: &[u8], vi: &mut ValueInfo) -> Result<(), Error> {
    let mut f = Fields::new(b, "TypeProto");
    while let Some((n, v, _)) = f.next_field()? {
        let (1, Value::Bytes(tt)) = (n, v) else {
            continue;
        };
        let mut t = Fields::new(tt, "TypeProto.Tensor");
        while let Some((n, v, _)) = t.next_field()? {
            match (n, v) {
                (1, v) => vi.elem_type = v.as_u64().map(|c| c as i32),
                (2, Value::Bytes(shape)) => vi.dims = Some(parse_shape(shape)?),
                _ => {}
            }
        }
    }
    Ok(())
}

fn parse_shape(b: &[u8]) -> Result<Vec<Dim>, Error> {
    let mut dims = Vec::new();
    let mut f = Fields::new(b, "TensorShapeProto");
    while let Some((n, v, _)) = f.next_field()? {
        let (1, Value::Bytes(d)) = (n, v) else {
            continue;
        };
        let mut dim = Dim::Unknown;
        let mut df = Fields::new(d, "TensorShapeProto.Dimension");
        while let Some((n, v, _)) = df.next_field()? {
            match n {
                1 => dim = Dim::Value(v.as_u64().unwrap_or(0) as i64),
                2 => dim = Dim::Param(string(v, "Dimension.dim_param")?.to_owned()),
                _ => {}
            }
        }
        dims.push(dim);
    }
    Ok(dims)
}

/// `TensorProto` → initializer (data from `raw_data` or the typed repeated fields).
pub(crate) fn parse_tensor(b: &[u8]) -> Result<Initializer, Error> {
    let mut name = String::new();
    let mut data_type = 0i32;
    let mut dims = Vec::new();
    let mut raw: Option<&[u8]> = None;
    let mut ints: Vec<i64> = Vec::new();
    let mut wide: Vec<u8> = Vec::new(); // float_data / double_data bytes
    let mut external = false;
    let mut f = Fields::new(b, "TensorProto");
    while let Some((n, v, _)) = f.next_field()? {
        match (n, v) {
            (1, v) => push_ints(v, &mut dims, "TensorProto.dims")?,
            (2, v) => data_type = v.as_u64().unwrap_or(0) as i32,
            (4 | 10, Value::Bytes(packed)) => wide.extend_from_slice(packed),
            (4, Value::Fixed32(x)) => wide.extend_from_slice(&x.to_le_bytes()),
            (10, Value::Fixed64(x)) => wide.extend_from_slice(&x.to_le_bytes()),
            (5 | 7 | 11, v) => push_ints(v, &mut ints, "TensorProto data")?,
            (8, v) => name = string(v, "TensorProto.name")?.to_owned(),
            (9, Value::Bytes(r)) => raw = Some(r),
            (14, v) => external = v.as_u64() == Some(1),
            _ => {}
        }
    }
    let dims: Vec<usize> = dims
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<_, _>>()
        .map_err(|_| Error::Model(format!("initializer {name:?}: negative dims {dims:?}")))?;
    let data = if external {
        None
    } else if let Some(r) = raw {
        Some(r.to_vec())
    } else if !wide.is_empty() {
        Some(wide)
    } else {
        narrow_ints(&name, data_type, &ints)?
    };
    let init = Initializer {
        name,
        data_type,
        dims,
        data,
    };
    check_length(&init)?;
    Ok(init)
}

/// `int32_data` / `int64_data` / `uint64_data` values as element bytes of `data_type`
/// (initializer `name`). Those fields hold types of up to 8 bytes; integer values for a wider
/// type (complex128, kept in `double_data`) are an error, not a guess.
fn narrow_ints(name: &str, data_type: i32, ints: &[i64]) -> Result<Option<Vec<u8>>, Error> {
    let Some((dt, size)) = dtype(data_type).and_then(|d| Some((d, d.size()?))) else {
        return Ok(None);
    };
    if size > 8 {
        if ints.is_empty() {
            return Ok(Some(Vec::new()));
        }
        return Err(Error::Model(format!(
            "initializer {name:?}: {} integer values for {dt}, whose {size}-byte elements an \
             integer field cannot hold",
            ints.len()
        )));
    }
    let mut out = Vec::with_capacity(ints.len() * size);
    for &v in ints {
        out.extend_from_slice(&v.to_le_bytes()[..size]);
    }
    Ok(Some(out))
}

fn check_length(i: &Initializer) -> Result<(), Error> {
    let (Some(data), Some(dt)) = (&i.data, i.dtype()) else {
        return Ok(());
    };
    // Dims from the file: a product past usize is an error, not a wrap (or a debug panic).
    let elems = i.dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    match elems.and_then(|e| dt.storage_bytes(e)) {
        Some(n) if n == data.len() => Ok(()),
        n => Err(Error::Model(format!(
            "initializer {:?}: {} data bytes for {dt} {:?} (needs {})",
            i.name,
            data.len(),
            i.dims,
            n.map_or("an overflowing count".to_owned(), |n| n.to_string())
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{put_bytes, put_varint};

    /// A `TensorProto`: `dims`, `data_type`, name `t`, and `ints` in `int64_data` (field 7).
    fn tensor(dims: &[u64], data_type: u64, ints: &[u64]) -> Vec<u8> {
        let mut t = Vec::new();
        for d in dims {
            put_varint(&mut t, 1 << 3);
            put_varint(&mut t, *d);
        }
        put_varint(&mut t, 2 << 3);
        put_varint(&mut t, data_type);
        for v in ints {
            put_varint(&mut t, 7 << 3);
            put_varint(&mut t, *v);
        }
        put_bytes(&mut t, 8, b"t");
        t
    }

    /// Integer values for a type wider than 8 bytes (complex128) are an error naming the
    /// initializer; they once sliced past an `i64`'s bytes (a panic the `onnx_inline` fuzz
    /// target found). Up to 8 bytes they are narrowed.
    #[test]
    fn integer_data_for_a_sixteen_byte_type_is_an_error_not_a_panic() {
        let e = parse_tensor(&tensor(&[1], 15, &[7]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"t\"") && e.contains("complex128"), "{e}");
        let empty = parse_tensor(&tensor(&[0], 15, &[])).unwrap();
        assert_eq!(empty.data.as_deref(), Some(&[][..]));
        let i16s = parse_tensor(&tensor(&[2], 5, &[1, 0xFFFF])).unwrap();
        assert_eq!(i16s.data.as_deref(), Some(&[1, 0, 0xFF, 0xFF][..]));
    }

    /// Dims whose product passes `usize` are an error naming the initializer; their product
    /// once overflowed (a panic in a debug build, a wrapped count in release, which the
    /// `onnx_cut` fuzz target found with dims 2^32 · 2^32 and int64 data).
    #[test]
    fn dims_whose_product_overflows_are_an_error_not_a_panic() {
        let e = parse_tensor(&tensor(&[1 << 32, 1 << 32, 2], 7, &[1]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"t\"") && e.contains("an overflowing count"),
            "{e}"
        );
        // A product that fits is still checked against the data.
        let e = parse_tensor(&tensor(&[3, 2], 7, &[1]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs 48"), "{e}");
    }

    /// A model with two `graph` fields is refused by the parser and by both rewriters,
    /// which once edited the first while the parser read the last (the `onnx_cut` fuzz
    /// target found the cut model's outputs disagreeing).
    #[test]
    fn two_graphs_are_refused_everywhere() {
        let mut g = Vec::new();
        put_bytes(&mut g, 5, &tensor(&[1], 7, &[3]));
        let mut m = Vec::new();
        put_bytes(&mut m, 7, &g);
        assert!(Model::parse(m.clone()).is_ok());
        put_bytes(&mut m, 7, &g);
        let base = std::path::Path::new(".");
        for e in [
            Model::parse(m.clone()).err(),
            crate::only_outputs(&m, &["x"]).err(),
            crate::inline_data(&m, base, 1 << 20).err(),
        ] {
            let e = e.expect("refused").to_string();
            assert!(e.contains("appears twice"), "{e}");
        }
    }

    #[test]
    fn type_names_and_codes() {
        assert_eq!(type_name(1), "FLOAT");
        assert_eq!(type_name(17), "FLOAT8E4M3FN");
        assert_eq!((type_name(25), type_name(26)), ("UINT2", "INT2"));
        assert_eq!(type_name(27), "an unknown type");
        assert_eq!(type_name(22), "INT4");
        assert_eq!(type_name(-1), "an unknown type");
        assert_eq!(type_name(99), "an unknown type");
        assert_eq!(dtype(22), Some(DType::Int4));
        assert_eq!(onnx_code(DType::Int4), Some(22));
        assert_eq!(dtype(21), Some(DType::UInt4));
        assert_eq!(dtype(17), Some(DType::Float8E4M3FN));
        assert_eq!(dtype(19), Some(DType::Float8E5M2));
        assert_eq!(onnx_code(DType::Float8E5M2), Some(19));
        assert_eq!(dtype(18), Some(DType::Float8E4M3FNUZ));
        assert_eq!(dtype(20), Some(DType::Float8E5M2FNUZ));
        assert_eq!(type_name(18), "FLOAT8E4M3FNUZ");
        assert_eq!(type_name(20), "FLOAT8E5M2FNUZ");
        assert_eq!(onnx_code(DType::Float8E4M3FNUZ), Some(18));
        assert_eq!(onnx_code(DType::Float8E5M2FNUZ), Some(20));
        assert_eq!(dtype(23), None, "no FLOAT4E2M1 dump dtype");
        assert_eq!(dtype(24), None, "no FLOAT8E8M0 dump dtype");
        for c in 1..=22 {
            if let Some(d) = dtype(c) {
                assert_eq!(onnx_code(d), Some(c));
            }
        }
    }
}
