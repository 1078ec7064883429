//! A tract plan described for the Dumper: kernel names, the graph description
//! ([`dump_host::graph::Graph`]), the graph inputs and the constants.

use std::collections::{HashMap, HashSet};

use dump_host::graph::{Graph, Input, Node, Output, Parameter};
use tract_onnx::prelude::{OutletId, TypedFact, TypedModel, TypedSimplePlan};
use tract_onnx::tract_core::ops::{konst::Const, source::TypedSource};

use crate::{dtype::dtype_of, origin::OnnxNodes};

/// How one plan node is dumped.
#[derive(Debug, Clone)]
pub(crate) enum Role {
    /// A kernel: `graph.nodes[index]`.
    Kernel(usize),
    /// A graph input: `graph.parameters[index]`, dumped as a Parameter at step end.
    Input(usize),
    /// A constant: `graph.parameters[index]`, dumped once per graph.
    Const(usize),
}

/// Everything the hook needs, computed once per plan.
#[derive(Debug)]
pub(crate) struct Described {
    /// The graph handed to [`dump_host::Dumper::begin_graph_with`].
    pub(crate) graph: Graph,
    /// Role of each model node, by node id (`None`: not in the plan).
    pub(crate) roles: Vec<Option<Role>>,
}

fn fact_shape(f: &TypedFact) -> Vec<usize> {
    f.shape
        .as_concrete()
        .map(<[usize]>::to_vec)
        .unwrap_or_default()
}

/// The MindSpore-style full name of a kernel: `Default/{node name}/{Op}-op{n}`, `n` counting
/// the kernels of op `Op` in execution order (like MindSpore's `Conv2D-op0`, `Conv2D-op1`).
pub(crate) fn full_name(node_name: &str, op: &str, n: usize) -> String {
    format!("Default/{node_name}/{op}-op{n}")
}

/// The ONNX value name of `outlet` (tract's outlet label), or the node name (`name:slot` for
/// a second output) when the model has none. A node name that is also an ONNX value name
/// (`labels`: tract names an unnamed ONNX node after its first output, and its helpers'
/// outlets carry no label) becomes `name#id`, so that no helper claims the value the
/// decomposition's last node computes.
fn value_name(model: &TypedModel, outlet: OutletId, labels: &HashSet<&str>) -> String {
    let name = &model.node(outlet.node).name;
    let base = match model.outlet_label(outlet) {
        Some(l) => return l.to_owned(),
        None if outlet.slot == 0 => name.clone(),
        None => format!("{name}:{}", outlet.slot),
    };
    if labels.contains(base.as_str()) {
        format!("{base}#{}", outlet.node)
    } else {
        base
    }
}

fn parameter(model: &TypedModel, id: usize, weight: bool) -> Parameter {
    let node = model.node(id);
    let fact = &node.outputs[0].fact;
    let dt = dtype_of(fact.datum_type);
    if weight {
        Parameter::weight(&node.name, dt, &fact_shape(fact))
    } else {
        Parameter::input(&node.name, dt, &fact_shape(fact))
    }
}

/// The source row of kernel `id`: the tract node, and with `onnx` the ONNX node it came from,
/// whether tract decomposed that node (several typed nodes, or one under another name), and
/// which of its outputs are the ONNX node's outputs (`own slot->ONNX slot`):
/// `tract node #13 "fc1" (Add); onnx node "fc1" decomposed; outputs 0->0`, then what
/// [`OnnxNodes::with_rows`] gave for the ONNX node (`; onnx op "Gemm"; scope "fc" (Linear);
/// call "linear"`). dump-read parses
/// it (`dump_read::graph::OnnxOrigin`) to pair runtimes at ONNX node boundaries.
fn source_row(
    model: &TypedModel,
    id: usize,
    op: &str,
    onnx: Option<&OnnxNodes>,
    group_size: &HashMap<&str, usize>,
) -> String {
    let node = model.node(id);
    let mut row = format!("tract node #{id} {:?} ({op})", node.name);
    let Some(origin) = onnx.and_then(|o| o.origin(&node.name).map(|n| (o, n))) else {
        return row;
    };
    let (onnx, origin) = origin;
    row += &format!("; onnx node {origin:?}");
    if group_size.get(origin).copied().unwrap_or(0) > 1 || node.name != origin {
        row += " decomposed";
    }
    let map: Vec<String> = (0..node.outputs.len())
        .filter_map(|slot| {
            let label = model.outlet_label(OutletId::new(id, slot))?;
            let o = onnx.output_slot(origin, label)?;
            Some(format!("{slot}->{o}"))
        })
        .collect();
    row += "; outputs ";
    row += &if map.is_empty() {
        "none".to_owned()
    } else {
        map.join(" ")
    };
    row += onnx.row(origin);
    row
}

/// Describes `plan` as graph `name`; with `onnx`, every kernel's source row names the ONNX
/// node it came from ([`source_row`]).
pub(crate) fn describe(plan: &TypedSimplePlan, name: &str, onnx: Option<&OnnxNodes>) -> Described {
    let model = plan.model();
    let labels: HashSet<&str> = model
        .nodes()
        .iter()
        .flat_map(|n| (0..n.outputs.len()).map(move |slot| OutletId::new(n.id, slot)))
        .filter_map(|o| model.outlet_label(o))
        .collect();
    let mut group_size: HashMap<&str, usize> = HashMap::new();
    if let Some(o) = onnx {
        for &id in plan.order_without_consts() {
            let node = model.node(id);
            if node.op_as::<TypedSource>().is_none()
                && let Some(origin) = o.origin(&node.name)
            {
                *group_size.entry(origin).or_insert(0) += 1;
            }
        }
    }
    let mut graph = Graph::new(name);
    let mut roles: Vec<Option<Role>> = vec![None; model.nodes().len()];
    for node in model.nodes() {
        if node.op_as::<Const>().is_some() {
            roles[node.id] = Some(Role::Const(graph.parameters.len()));
            graph.parameters.push(parameter(model, node.id, true));
        }
    }
    let mut per_op: HashMap<String, usize> = HashMap::new();
    for &id in plan.order_without_consts() {
        let node = model.node(id);
        if node.op_as::<TypedSource>().is_some() {
            roles[id] = Some(Role::Input(graph.parameters.len()));
            graph.parameters.push(parameter(model, id, false));
            continue;
        }
        let op = node.op().name().to_string();
        let count = per_op.entry(op.clone()).or_insert(0);
        let full = full_name(&node.name, &op, *count);
        *count += 1;
        roles[id] = Some(Role::Kernel(graph.nodes.len()));
        graph.nodes.push(Node {
            name: full,
            op_type: op.clone(),
            inputs: Vec::new(),
            outputs: node
                .outputs
                .iter()
                .enumerate()
                .map(|(slot, o)| {
                    Output::new(
                        &value_name(model, OutletId::new(id, slot), &labels),
                        dtype_of(o.fact.datum_type),
                        &fact_shape(&o.fact),
                    )
                })
                .collect(),
            scope: format!("Default/{}", node.name),
            source: Some(source_row(model, id, &op, onnx, &group_size)),
        });
    }
    let input = |o: &OutletId| -> Option<Input> {
        match roles.get(o.node)?.as_ref()? {
            Role::Kernel(k) => Some(Input::Node {
                node: *k,
                output: o.slot,
            }),
            Role::Input(p) | Role::Const(p) => Some(Input::Parameter(*p)),
        }
    };
    let mut wired = Vec::with_capacity(graph.nodes.len());
    for &id in plan.order_without_consts() {
        if let Some(Role::Kernel(_)) = roles[id] {
            wired.push(model.node(id).inputs.iter().filter_map(input).collect());
        }
    }
    for (n, inputs) in graph.nodes.iter_mut().zip(wired) {
        n.inputs = inputs;
    }
    graph.outputs = model
        .output_outlets()
        .map(|o| o.iter().filter_map(input).collect())
        .unwrap_or_default();
    Described { graph, roles }
}
