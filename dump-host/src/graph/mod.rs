//! The graph description a runtime hands the Dumper with
//! [`Dumper::begin_graph_with`](crate::Dumper::begin_graph_with): parameters, nodes in execution
//! order with their op types, inputs (producer outlets), outputs, scopes and source locations.
//!
//! The Dumper writes it as `graphs/ms_output_trace_code_graph_{g}.ir` (MindSpore's readable
//! text form, [`Graph::to_ir`]) and `.pb` (MindSpore's `anf_ir.proto` `ModelProto`,
//! [`Graph::to_pb`]), writes the execution-order csv from the node names, and keeps the graph
//! (its edges) for the inspect and compare tools ([`Dumper::graph`](crate::Dumper::graph)).
//!
//! ```
//! use dump_core::DType;
//! use dump_host::graph::{Graph, Input, Node, Output, Parameter};
//!
//! let mut g = Graph::new("kernel_graph0");
//! g.parameters.push(Parameter::input("x", Some(DType::Float32), &[2, 3]));
//! g.nodes.push(Node {
//!     name: "Default/relu1-Relu/Relu-op0".into(),
//!     op_type: "Relu".into(),
//!     inputs: vec![Input::Parameter(0)],
//!     outputs: vec![Output::new("relu1_out", Some(DType::Float32), &[2, 3])],
//!     scope: "Default/relu1-Relu".into(),
//!     source: None,
//! });
//! assert_eq!(g.edges().count(), 0); // a parameter is not a node: no node-to-node edge
//! assert!(g.to_ir().contains("%0(relu1_out) = Relu(%para1_x)"));
//! assert_eq!(g.producer("relu1_out"), Some((0, 0)));
//! ```

mod ir;
mod pb;
mod useless;

use dump_core::DType;

pub use useless::UselessOutputs;

/// One graph: its parameters (graph inputs and weights) and its nodes in execution order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Graph {
    /// The graph's name (`kernel_graph0`, or the model's graph name).
    pub name: String,
    /// Graph inputs and weights, referred to by [`Input::Parameter`].
    pub parameters: Vec<Parameter>,
    /// Kernels in execution order, referred to by [`Input::Node`].
    pub nodes: Vec<Node>,
    /// The graph's results (producer outlets).
    pub outputs: Vec<Input>,
}

/// A graph input or weight (MindSpore's `%paraN_name`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parameter {
    /// The name (`x`, `conv1.weight`).
    pub name: String,
    /// Element type, when known.
    pub dtype: Option<DType>,
    /// Dimensions (empty for a scalar or when unknown).
    pub shape: Vec<usize>,
    /// `true` for a weight with a default value, `false` for a graph input.
    pub is_weight: bool,
}

impl Parameter {
    /// A graph input fed at each step.
    pub fn input(name: &str, dtype: Option<DType>, shape: &[usize]) -> Self {
        Parameter {
            name: name.to_owned(),
            dtype,
            shape: shape.to_vec(),
            is_weight: false,
        }
    }

    /// A weight (or other constant) of the graph.
    pub fn weight(name: &str, dtype: Option<DType>, shape: &[usize]) -> Self {
        Parameter {
            is_weight: true,
            ..Parameter::input(name, dtype, shape)
        }
    }
}

/// Where a node input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Input {
    /// Parameter `n` of [`Graph::parameters`].
    Parameter(usize),
    /// Output `output` of node `node` of [`Graph::nodes`].
    Node {
        /// Index of the producing node.
        node: usize,
        /// Output slot of the producing node.
        output: usize,
    },
}

/// One output of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// The runtime's name for the value (the ONNX value name): what cross-runtime compare
    /// pairs on.
    pub value: String,
    /// Element type, when known.
    pub dtype: Option<DType>,
    /// Dimensions, when known.
    pub shape: Vec<usize>,
    /// A reserved or dummy output (MindSpore's "useless" outputs): not dumped unless
    /// `MINDSPORE_DUMP_IGNORE_USELESS_OUTPUT=0` (see [`UselessOutputs`]).
    pub useless: bool,
}

impl Output {
    /// A (useful) output named `value`.
    pub fn new(value: &str, dtype: Option<DType>, shape: &[usize]) -> Self {
        Output {
            value: value.to_owned(),
            dtype,
            shape: shape.to_vec(),
            useless: false,
        }
    }
}

/// One kernel of the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Full name with scope, as dumped (`Default/conv1-Conv/Conv-op0`).
    pub name: String,
    /// Primitive name (`Conv`, `Relu`).
    pub op_type: String,
    /// Inputs in slot order.
    pub inputs: Vec<Input>,
    /// Outputs in slot order.
    pub outputs: Vec<Output>,
    /// The scope (`Default/conv1-Conv`).
    pub scope: String,
    /// Where the node comes from (`model.onnx: node conv1`, a source file and line), if known.
    pub source: Option<String>,
}

impl Graph {
    /// An empty graph named `name`.
    pub fn new(name: &str) -> Self {
        Graph {
            name: name.to_owned(),
            ..Graph::default()
        }
    }

    /// Every node-to-node data edge as `(producer outlet, consumer node, consumer slot)`, in
    /// consumer order.
    pub fn edges(&self) -> impl Iterator<Item = ((usize, usize), usize, usize)> + '_ {
        self.nodes.iter().enumerate().flat_map(|(c, n)| {
            n.inputs
                .iter()
                .enumerate()
                .filter_map(move |(slot, i)| match *i {
                    Input::Node { node, output } => Some(((node, output), c, slot)),
                    Input::Parameter(_) => None,
                })
        })
    }

    /// The node and output slot producing the value named `value`.
    pub fn producer(&self, value: &str) -> Option<(usize, usize)> {
        self.nodes.iter().enumerate().find_map(|(i, n)| {
            n.outputs
                .iter()
                .position(|o| o.value == value)
                .map(|slot| (i, slot))
        })
    }

    /// The node named `name` (full name with scope).
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Whether output `slot` of node `node` is dumped under `policy` (useless outputs only when
    /// the policy says so; slots the graph does not describe are dumped).
    pub fn output_dumped(&self, node: usize, slot: usize, policy: UselessOutputs) -> bool {
        let useless = self
            .nodes
            .get(node)
            .and_then(|n| n.outputs.get(slot))
            .is_some_and(|o| o.useless);
        !useless || policy.dump
    }

    /// The kernel names in execution order (the lines of `ms_execution_order_graph_{g}.csv`).
    pub fn execution_order(&self) -> Vec<&str> {
        self.nodes.iter().map(|n| n.name.as_str()).collect()
    }

    /// MindSpore's readable IR text (`ms_output_trace_code_graph_{g}.ir`).
    pub fn to_ir(&self) -> String {
        ir::render(self)
    }

    /// MindSpore's `anf_ir.proto` `ModelProto` bytes (`ms_output_trace_code_graph_{g}.pb`).
    pub fn to_pb(&self) -> Vec<u8> {
        pb::encode(self)
    }
}
