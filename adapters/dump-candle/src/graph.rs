//! The graph a traced step describes: one node per dumped module or tap, in call order, its
//! inputs wired to the kernel whose output tensor they are (candle's tensor ids), other inputs
//! as graph parameters. Written as `graphs/*.ir|.pb` by the Dumper.

use std::collections::HashMap;

use candle_core::{Tensor, TensorId};
use dump_host::graph::{Graph, Input, Node, Output, Parameter};

use crate::convert::dtype_of;

/// One tensor as the graph sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    id: TensorId,
    dtype: Option<dump_core::DType>,
    shape: Vec<usize>,
}

impl Seen {
    fn of(t: &Tensor) -> Self {
        Seen {
            id: t.id(),
            dtype: dtype_of(t.dtype()),
            shape: t.dims().to_vec(),
        }
    }
}

/// One kernel of a traced step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rec {
    pub(crate) op_type: String,
    pub(crate) inputs: Vec<Seen>,
    pub(crate) outputs: Vec<Seen>,
}

impl Rec {
    /// Overwrites this record in place (keeping its allocations).
    pub(crate) fn set(&mut self, op_type: &str, inputs: &[&Tensor], outputs: &[&Tensor]) {
        op_type.clone_into(&mut self.op_type);
        self.inputs.clear();
        self.inputs.extend(inputs.iter().map(|t| Seen::of(t)));
        self.outputs.clear();
        self.outputs.extend(outputs.iter().map(|t| Seen::of(t)));
    }
}

/// The graph of kernels `names` (full names) recorded as `recs`.
pub(crate) fn describe(graph_id: u32, names: &[String], recs: &[Rec]) -> Graph {
    let mut g = Graph::new(&format!("kernel_graph{graph_id}"));
    let mut producer: HashMap<TensorId, Input> = HashMap::new();
    for (index, (name, r)) in names.iter().zip(recs).enumerate() {
        let mut inputs = Vec::with_capacity(r.inputs.len());
        for s in &r.inputs {
            let input = match producer.get(&s.id) {
                Some(&i) => i,
                None => {
                    let p = g.parameters.len();
                    g.parameters
                        .push(Parameter::input(&format!("input{p}"), s.dtype, &s.shape));
                    producer.insert(s.id, Input::Parameter(p));
                    Input::Parameter(p)
                }
            };
            inputs.push(input);
        }
        let outputs = r
            .outputs
            .iter()
            .enumerate()
            .map(|(slot, s)| {
                producer.insert(
                    s.id,
                    Input::Node {
                        node: index,
                        output: slot,
                    },
                );
                Output::new(&format!("{name}:{slot}"), s.dtype, &s.shape)
            })
            .collect();
        let scope = name.rsplit_once('/').map_or("Default", |(s, _)| s);
        g.nodes.push(Node {
            name: name.clone(),
            op_type: r.op_type.clone(),
            inputs,
            outputs,
            scope: scope.to_owned(),
            source: None,
        });
    }
    g
}
