//! An ONNX graph described for the Dumper ([`dump_host::graph::Graph`]): kernel names, scopes,
//! parameters (graph inputs, then initializers) and the producer of every node input. Each
//! kernel's source row names its ONNX node, and the torch module scope the node records
//! ([`TorchScope`](crate::TorchScope)): `onnx node #4 "node_linear" (Gemm); scope "fc"
//! (Linear); call "linear"`.

use std::collections::HashMap;

use dump_host::graph::{Graph, Input, Node, Output, Parameter};

use crate::Model;

/// The MindSpore-style full name of a kernel: `Default/{node name}/{op type}-op{n}`, `n`
/// counting the nodes of that op type in graph order (`Conv-op0`, `Conv-op1`). dump-tract
/// names tract's kernels the same way.
pub fn full_name(node_name: &str, op_type: &str, n: usize) -> String {
    format!("Default/{node_name}/{op_type}-op{n}")
}

/// Describes the main graph of `model`. Node outputs carry the ONNX value names, so dumps of
/// the same model by different runtimes pair up by value.
pub fn describe(model: &Model) -> Graph {
    let g = &model.graph;
    let mut graph = Graph::new(if g.name.is_empty() {
        "main_graph"
    } else {
        &g.name
    });
    let mut producer: HashMap<&str, Input> = HashMap::new();
    for i in &g.inputs {
        producer.insert(&i.name, Input::Parameter(graph.parameters.len()));
        let shape = i.fixed_shape().unwrap_or_default();
        graph
            .parameters
            .push(Parameter::input(&i.name, i.dtype(), &shape));
    }
    for w in &g.initializers {
        producer.insert(&w.name, Input::Parameter(graph.parameters.len()));
        graph
            .parameters
            .push(Parameter::weight(&w.name, w.dtype(), &w.dims));
    }
    let mut per_op: HashMap<&str, usize> = HashMap::new();
    for (index, n) in g.nodes.iter().enumerate() {
        let count = per_op.entry(&n.op_type).or_insert(0);
        let name = full_name(&n.name, &n.op_type, *count);
        *count += 1;
        let inputs = n
            .inputs
            .iter()
            .filter(|v| !v.is_empty())
            .filter_map(|v| producer.get(v.as_str()).copied())
            .collect();
        for (slot, o) in n.outputs.iter().enumerate() {
            producer.insert(
                o,
                Input::Node {
                    node: index,
                    output: slot,
                },
            );
        }
        graph.nodes.push(Node {
            name,
            op_type: n.op_type.clone(),
            inputs,
            outputs: n
                .outputs
                .iter()
                .map(|o| Output::new(o, None, &[]))
                .collect(),
            scope: format!("Default/{}", n.name),
            source: Some(format!(
                "onnx node #{index} {:?} ({}){}",
                n.name,
                n.op_type,
                crate::TorchScope::of(n)
                    .map(|s| s.row())
                    .unwrap_or_default()
            )),
        });
    }
    graph.outputs = g
        .outputs
        .iter()
        .filter_map(|o| producer.get(o.name.as_str()).copied())
        .collect();
    graph
}
