//! [`Graph`] as MindSpore's `anf_ir.proto` `ModelProto` (`ms_output_trace_code_graph_{g}.pb`),
//! with a tiny protobuf encoder (varints and length-delimited fields are all it needs).
//!
//! Fields written (proto2 field numbers from MindSpore's public `anf_ir.proto`):
//! `ModelProto { ir_version = 1, model_version = 3, graph = 4 }`;
//! `GraphProto { node = 1, name = 2, parameters = 3, outputs = 4 }`;
//! `NodeProto { input = 1, name = 2, op_type = 3, scope = 4, output_type = 6, full_name = 8,
//! instance_name = 10 }` (`name` is the node's position, as in the `.ir` file; `instance_name`
//! is the runtime's value name of its first output); `InputProto { name = 1, type = 2 }`
//! (`DATA_EDGE`); `ParameterProto { name = 1, type = 2 }`; `OutputProto { name = 1, type = 2 }`;
//! `TypeProto { data_type = 1, tensor_type = 2 { elem_type = 1, shape = 2 { dim = 1 { size =
//! 1 } } }, sequence_type = 3 { elem_types = 1 } }`.

use dump_core::DType;

use super::{Graph, Input, Output};

const DT_UNDEFINED: u64 = 0;
const DT_TENSOR: u64 = 14;
const DT_TUPLE: u64 = 31;

/// `anf_ir.proto` `DataType` of `d` (bf16, int4, uint1 have no value there: `DT_UNDEFINED`).
fn data_type(d: Option<DType>) -> u64 {
    match d {
        Some(DType::Bool) => 1,
        Some(DType::Int8) => 2,
        Some(DType::Int16) => 3,
        Some(DType::Int32) => 4,
        Some(DType::Int64) => 5,
        Some(DType::UInt8) => 6,
        Some(DType::UInt16) => 7,
        Some(DType::UInt32) => 8,
        Some(DType::UInt64) => 9,
        Some(DType::Float16) => 10,
        Some(DType::Float32) => 11,
        Some(DType::Float64) => 12,
        Some(DType::Complex64) => 43,
        Some(DType::Complex128) => 44,
        _ => DT_UNDEFINED,
    }
}

/// A protobuf message being written.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn uint(&mut self, field: u32, v: u64) {
        self.varint(u64::from(field) << 3);
        self.varint(v);
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.varint((u64::from(field) << 3) | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn str(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    fn msg(&mut self, field: u32, build: impl FnOnce(&mut Msg)) {
        let mut m = Msg::default();
        build(&mut m);
        self.bytes(field, &m.0);
    }
}

fn tensor_type(m: &mut Msg, d: Option<DType>, shape: &[usize]) {
    m.uint(1, DT_TENSOR);
    m.msg(2, |t| {
        t.uint(1, data_type(d));
        t.msg(2, |s| {
            for &n in shape {
                s.msg(1, |dim| dim.uint(1, n as u64));
            }
        });
    });
}

fn outputs_type(m: &mut Msg, outs: &[Output]) {
    match outs {
        [o] => tensor_type(m, o.dtype, &o.shape),
        _ => {
            m.uint(1, DT_TUPLE);
            m.msg(3, |seq| {
                for o in outs {
                    seq.msg(1, |t| tensor_type(t, o.dtype, &o.shape));
                }
            });
        }
    }
}

fn input_name(g: &Graph, i: &Input) -> String {
    match *i {
        Input::Parameter(p) => g
            .parameters
            .get(p)
            .map_or_else(String::new, |p| p.name.clone()),
        Input::Node { node, .. } => node.to_string(),
    }
}

/// Encodes `g` as a `ModelProto`.
pub(crate) fn encode(g: &Graph) -> Vec<u8> {
    let mut model = Msg::default();
    model.uint(1, 1); // ir_version: IR_VERSION
    model.uint(3, 1); // model_version
    model.msg(4, |graph| {
        for (i, n) in g.nodes.iter().enumerate() {
            graph.msg(1, |node| {
                for inp in &n.inputs {
                    node.msg(1, |e| {
                        e.str(1, &input_name(g, inp));
                        e.uint(2, 0); // DATA_EDGE
                    });
                }
                node.str(2, &i.to_string());
                node.str(3, &n.op_type);
                node.str(4, &n.scope);
                node.msg(6, |t| outputs_type(t, &n.outputs));
                node.str(8, &n.name);
                if let Some(o) = n.outputs.first() {
                    node.str(10, &o.value);
                }
            });
        }
        graph.str(2, &g.name);
        for p in &g.parameters {
            graph.msg(3, |par| {
                par.str(1, &p.name);
                par.msg(2, |t| tensor_type(t, p.dtype, &p.shape));
            });
        }
        for o in &g.outputs {
            graph.msg(4, |out| {
                out.str(1, &input_name(g, o));
                if let Input::Node { node, output } = *o
                    && let Some(v) = g.nodes.get(node).and_then(|n| n.outputs.get(output))
                {
                    out.msg(2, |t| tensor_type(t, v.dtype, &v.shape));
                }
            });
        }
    });
    model.0
}

#[cfg(test)]
mod tests {
    use super::super::{Graph, Input, Node, Output, Parameter};
    use dump_core::DType;

    /// Reads one level of a protobuf message: `(field, wire value or bytes)`.
    fn fields(mut b: &[u8]) -> Vec<(u32, Result<u64, Vec<u8>>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let byte = b[0];
                *b = &b[1..];
                v |= u64::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    break;
                }
            }
            v
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            let field = (key >> 3) as u32;
            match key & 7 {
                0 => out.push((field, Ok(varint(&mut b)))),
                2 => {
                    let n = varint(&mut b) as usize;
                    out.push((field, Err(b[..n].to_vec())));
                    b = &b[n..];
                }
                w => panic!("unexpected wire type {w}"),
            }
        }
        out
    }

    fn sub(f: &[(u32, Result<u64, Vec<u8>>)], field: u32) -> Vec<Vec<u8>> {
        f.iter()
            .filter(|(n, _)| *n == field)
            .filter_map(|(_, v)| v.clone().err())
            .collect()
    }

    #[test]
    fn model_graph_nodes_inputs_and_types_decode_back() {
        let f = Some(DType::Float32);
        let mut g = Graph::new("main");
        g.parameters.push(Parameter::input("x", f, &[300, 2]));
        g.nodes.push(Node {
            name: "Default/a-Relu/Relu-op0".into(),
            op_type: "Relu".into(),
            inputs: vec![Input::Parameter(0)],
            outputs: vec![Output::new("r", f, &[300, 2])],
            scope: "Default/a-Relu".into(),
            source: None,
        });
        g.nodes.push(Node {
            name: "Default/b-Neg/Neg-op1".into(),
            op_type: "Neg".into(),
            inputs: vec![Input::Node { node: 0, output: 0 }],
            outputs: vec![Output::new("y", Some(DType::Float16), &[300, 2])],
            scope: "Default/b-Neg".into(),
            source: None,
        });
        g.outputs.push(Input::Node { node: 1, output: 0 });
        let model = fields(&g.to_pb());
        assert_eq!(model[0], (1, Ok(1)));
        let graph = fields(&sub(&model, 4)[0]);
        assert_eq!(sub(&graph, 2), vec![b"main".to_vec()]);
        let nodes = sub(&graph, 1);
        assert_eq!(nodes.len(), 2);
        let n1 = fields(&nodes[1]);
        assert_eq!(sub(&n1, 2), vec![b"1".to_vec()]);
        assert_eq!(sub(&n1, 3), vec![b"Neg".to_vec()]);
        assert_eq!(sub(&n1, 4), vec![b"Default/b-Neg".to_vec()]);
        assert_eq!(sub(&n1, 8), vec![b"Default/b-Neg/Neg-op1".to_vec()]);
        assert_eq!(sub(&n1, 10), vec![b"y".to_vec()]);
        let edge = fields(&sub(&n1, 1)[0]);
        assert_eq!(edge, vec![(1, Err(b"0".to_vec())), (2, Ok(0))]);
        // output_type: DT_TENSOR, elem DT_FLOAT16, dims 300 (a two-byte varint) and 2
        let ty = fields(&sub(&n1, 6)[0]);
        assert_eq!(ty[0], (1, Ok(14)));
        let tensor = fields(&sub(&ty, 2)[0]);
        assert_eq!(tensor[0], (1, Ok(10)));
        let dims: Vec<_> = sub(&fields(&sub(&tensor, 2)[0]), 1)
            .iter()
            .map(|d| fields(d)[0].1.clone().unwrap())
            .collect();
        assert_eq!(dims, vec![300, 2]);
        let par = fields(&sub(&graph, 3)[0]);
        assert_eq!(sub(&par, 1), vec![b"x".to_vec()]);
        let out = fields(&sub(&graph, 4)[0]);
        assert_eq!(sub(&out, 1), vec![b"1".to_vec()]);
    }
}
