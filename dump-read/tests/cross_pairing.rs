//! Cross-framework pairing on dumps built in memory: msprobe L0 and L1 call names against
//! kernels whose graph nodes name their ONNX node (TorchScript's scoped names, or the dynamo
//! exporter's recorded scope and FX call), BatchNorm folded into the convolution, a mapping
//! file that overrides the rules, and the nearest candidates of what stays unpaired.

use std::path::Path;

use dump_core::DType;
use dump_read::{
    Dump, GraphNode, TensorRecord,
    compare::{Mapping, PairRule, pair_tensors, pair_tensors_with},
    dialect::ModuleEdge,
    parse_origin,
};
use dump_stats::{Io, TensorId};

fn record(
    op_type: &str,
    op_name: &str,
    io: Io,
    slot: u32,
    shape: &[usize],
    ts: u64,
) -> TensorRecord {
    TensorRecord {
        rank: 0,
        net: String::new(),
        graph: 0,
        iteration: 0,
        id: TensorId {
            op_type: op_type.to_owned(),
            op_name: op_name.to_owned(),
            task_id: 0,
            stream_id: 0,
            timestamp: ts,
            io,
            slot,
        },
        dtype: DType::Float32,
        shape: shape.to_vec(),
        source: None,
        stored: None,
        row_stats: None,
        arg_name: None,
    }
}

/// A torch-side dump: msprobe calls with one input and one output each.
fn torch(calls: &[(&str, &str, &[usize])]) -> Dump {
    let mut d = Dump::default();
    for (n, (op_type, name, shape)) in calls.iter().enumerate() {
        let ts = 2 * n as u64;
        d.tensors
            .push(record(op_type, name, Io::Input, 0, shape, ts));
        d.tensors
            .push(record(op_type, name, Io::Output, 0, shape, ts + 1));
    }
    d
}

/// A run of ONNX nodes: (kernel op type, source row after `onnx node #i "NODE" (OP)`, shape).
fn graph(nodes: &[(&str, &str, &str, &str, &[usize])]) -> Dump {
    let mut d = Dump::default();
    let mut list = Vec::new();
    for (n, (op, node, onnx_op, extra, shape)) in nodes.iter().enumerate() {
        let name = format!("Default_{}_{op}-op{n}", node.replace('/', "_"));
        let ts = 2 * n as u64;
        d.tensors.push(record(op, &name, Io::Input, 0, shape, ts));
        d.tensors
            .push(record(op, &name, Io::Output, 0, shape, ts + 1));
        let row = format!("onnx node #{n} {node:?} ({onnx_op}){extra}");
        list.push(GraphNode {
            op_name: name,
            full_name: String::new(),
            values: vec![format!("{node}_out")],
            inputs: Vec::new(),
            onnx: Some(parse_origin(&row).expect("a source row")),
        });
    }
    d.graphs.push(((0, 0), list));
    d
}

/// The output pairs as (A's op name, B's op name, rule).
fn output_pairs(
    a: &Dump,
    b: &Dump,
    p: &[(usize, usize, PairRule)],
) -> Vec<(String, String, PairRule)> {
    p.iter()
        .filter(|(i, _, _)| a.tensors[*i].id.io == Io::Output)
        .map(|&(i, j, r)| {
            (
                a.tensors[i].id.op_name.clone(),
                b.tensors[j].id.op_name.clone(),
                r,
            )
        })
        .collect()
}

const IMG: &[usize] = &[1, 4, 8, 8];
const VEC: &[usize] = &[1, 10];

fn torchscript_folded() -> Dump {
    graph(&[
        ("Conv", "/conv1/Conv", "Conv", "", IMG),
        ("Relu", "/relu/Relu", "Relu", "", IMG),
        ("Gemm", "/fc/Gemm", "Gemm", "", VEC),
    ])
}

#[test]
fn l0_modules_pair_by_scope_and_a_folded_batchnorm_is_fused() {
    let a = torch(&[
        ("Conv2d", "Module.conv1.Conv2d.forward.0", IMG),
        ("BatchNorm2d", "Module.bn1.BatchNorm2d.forward.0", IMG),
        ("ReLU", "Module.relu.ReLU.forward.0", IMG),
        ("Linear", "Module.fc.Linear.forward.0", VEC),
    ]);
    let b = torchscript_folded();
    let p = pair_tensors(&a, &b);
    assert_eq!(
        output_pairs(&a, &b, &p.pairs),
        vec![
            (
                "Module.bn1.BatchNorm2d.forward.0".into(),
                "Default__conv1_Conv_Conv-op0".into(),
                PairRule::Fused
            ),
            (
                "Module.relu.ReLU.forward.0".into(),
                "Default__relu_Relu_Relu-op1".into(),
                PairRule::Scope
            ),
            (
                "Module.fc.Linear.forward.0".into(),
                "Default__fc_Gemm_Gemm-op2".into(),
                PairRule::Scope
            ),
        ]
    );
    // The conv's output is accounted for as fused into the node; nothing is unpaired but the
    // graph's inputs... which sit within their nodes.
    assert_eq!(p.fused_a.len(), 1);
    assert_eq!(
        a.tensors[p.fused_a[0].0].id.op_name,
        "Module.conv1.Conv2d.forward.0"
    );
    assert_eq!(p.fused_a[0].1, "/conv1/Conv");
    assert!(p.only_in_a.is_empty(), "{:?}", p.only_in_a);
    assert!(p.only_in_b.is_empty(), "{:?}", p.only_in_b);
}

#[test]
fn the_same_with_the_dumps_swapped() {
    let a = torchscript_folded();
    let b = torch(&[
        ("Conv2d", "Module.conv1.Conv2d.forward.0", IMG),
        ("BatchNorm2d", "Module.bn1.BatchNorm2d.forward.0", IMG),
        ("ReLU", "Module.relu.ReLU.forward.0", IMG),
        ("Linear", "Module.fc.Linear.forward.0", VEC),
    ]);
    let p = pair_tensors(&a, &b);
    let pairs = output_pairs(&a, &b, &p.pairs);
    assert_eq!(pairs.len(), 3);
    assert_eq!(pairs[0].1, "Module.bn1.BatchNorm2d.forward.0");
    assert_eq!(pairs[0].2, PairRule::Fused);
    assert_eq!(p.fused_b.len(), 1);
    assert!(p.only_in_a.is_empty() && p.only_in_b.is_empty());
}

#[test]
fn l1_calls_pair_by_fx_counter_with_recorded_scopes() {
    let a = torch(&[
        ("conv2d", "Functional.conv2d.0.forward", IMG),
        ("batch_norm", "Functional.batch_norm.0.forward", IMG),
        ("relu", "Functional.relu.0.forward", IMG),
        ("relu", "Functional.relu.1.forward", IMG),
        ("linear", "Functional.linear.0.forward", VEC),
    ]);
    let b = graph(&[
        (
            "Conv",
            "node_Conv_7",
            "Conv",
            "; scope \"bn1\" (BatchNorm2d); call \"_native_batch_norm_legit_no_training\"; fused",
            IMG,
        ),
        // The second relu first in the graph: only the counter can tell them apart.
        (
            "Relu",
            "node_relu_1",
            "Relu",
            "; scope \"\" (Net); call \"relu_1\"",
            IMG,
        ),
        (
            "Relu",
            "node_relu",
            "Relu",
            "; scope \"\" (Net); call \"relu\"",
            IMG,
        ),
        (
            "Gemm",
            "node_linear",
            "Gemm",
            "; scope \"fc\" (Linear); call \"linear\"",
            VEC,
        ),
    ]);
    let p = pair_tensors(&a, &b);
    let pairs = output_pairs(&a, &b, &p.pairs);
    let rule_of = |name: &str| {
        pairs
            .iter()
            .find(|x| x.0 == name)
            .map(|x| (x.1.clone(), x.2))
    };
    assert_eq!(
        rule_of("Functional.batch_norm.0.forward"),
        Some(("Default_node_Conv_7_Conv-op0".into(), PairRule::Fused))
    );
    assert_eq!(
        rule_of("Functional.relu.0.forward"),
        Some(("Default_node_relu_Relu-op2".into(), PairRule::Counter))
    );
    assert_eq!(
        rule_of("Functional.relu.1.forward"),
        Some(("Default_node_relu_1_Relu-op1".into(), PairRule::Counter))
    );
    assert_eq!(
        rule_of("Functional.linear.0.forward"),
        Some(("Default_node_linear_Gemm-op3".into(), PairRule::Counter))
    );
    assert_eq!(p.fused_a.len(), 1, "conv2d.0 fused into node_Conv_7");
}

#[test]
fn mix_level_api_calls_pair_within_their_module_scope() {
    let mut a = torch(&[
        ("conv2d", "Functional.conv2d.0.forward", IMG),
        ("Conv2d", "Module.conv1.Conv2d.forward.0", IMG),
        ("relu", "Functional.relu.0.forward", IMG),
        ("ReLU", "Module.relu.ReLU.forward.0", IMG),
        ("relu", "Functional.relu.1.forward", IMG),
        ("ReLU", "Module.relu.ReLU.forward.1", IMG),
    ]);
    for (node, parent) in [
        (
            "Functional.conv2d.0.forward",
            "Module.conv1.Conv2d.forward.0",
        ),
        ("Functional.relu.0.forward", "Module.relu.ReLU.forward.0"),
        ("Functional.relu.1.forward", "Module.relu.ReLU.forward.1"),
    ] {
        a.modules.push(ModuleEdge {
            rank: 0,
            iteration: 0,
            node: node.into(),
            parent: Some(parent.into()),
        });
    }
    // TorchScript: a module's second call is `relu_1`.
    let b = graph(&[
        ("Conv", "/conv1/Conv", "Conv", "", IMG),
        ("Relu", "/relu/Relu", "Relu", "", IMG),
        ("Relu", "/relu_1/Relu", "Relu", "", IMG),
    ]);
    let p = pair_tensors(&a, &b);
    let pairs = output_pairs(&a, &b, &p.pairs);
    assert_eq!(pairs.len(), 6, "{pairs:?}");
    assert!(pairs.iter().all(|x| x.2 == PairRule::Scope), "{pairs:?}");
    let partner = |name: &str| {
        pairs
            .iter()
            .find(|x| x.0 == name)
            .map(|x| x.1.clone())
            .unwrap()
    };
    assert_eq!(
        partner("Functional.relu.1.forward"),
        "Default__relu_1_Relu_Relu-op2"
    );
    assert_eq!(
        partner("Module.relu.ReLU.forward.1"),
        "Default__relu_1_Relu_Relu-op2"
    );
    assert_eq!(
        partner("Module.relu.ReLU.forward.0"),
        "Default__relu_Relu_Relu-op1"
    );
}

#[test]
fn a_mapping_file_overrides_the_rules() {
    let a = torch(&[
        ("ReLU", "Module.relu.ReLU.forward.0", IMG),
        ("Linear", "Module.head.Linear.forward.0", VEC),
    ]);
    // A head the exporter wrote as a custom op: no scope, no kind in common.
    let b = graph(&[
        ("Relu", "/relu/Relu", "Relu", "", IMG),
        ("Gemm", "/fc/Gemm", "MyDense", "", VEC),
    ]);
    // Without the mapping, the head finds no scope `head` and no node of its kind.
    let p = pair_tensors(&a, &b);
    assert!(
        output_pairs(&a, &b, &p.pairs)
            .iter()
            .all(|x| x.0 != "Module.head.Linear.forward.0")
    );
    // The nearest candidate of the unpaired head is the custom node (same shape).
    let head = a
        .tensors
        .iter()
        .position(|t| t.id.op_name == "Module.head.Linear.forward.0" && t.id.io == Io::Output)
        .unwrap();
    let near = p
        .nearest_a
        .iter()
        .find(|(i, _)| *i == head)
        .expect("candidates");
    assert_eq!(b.tensors[near.1[0]].id.op_name, "Default__fc_Gemm_Gemm-op1");
    let m = Mapping::parse_json(
        r#"{"regex": {"^Module\\.head\\..*": "/fc/Gemm"}}"#,
        Path::new("m.json"),
    )
    .unwrap();
    let p = pair_tensors_with(&a, &b, Some(&m));
    let pairs = output_pairs(&a, &b, &p.pairs);
    assert!(
        pairs.contains(&(
            "Module.head.Linear.forward.0".into(),
            "Default__fc_Gemm_Gemm-op1".into(),
            PairRule::Mapping
        )),
        "{pairs:?}"
    );
    assert!(
        p.only_in_a.is_empty() && p.only_in_b.is_empty(),
        "{:?} {:?}",
        p.only_in_a,
        p.only_in_b
    );
}

#[test]
fn shapes_that_differ_do_not_pair() {
    let a = torch(&[("ReLU", "Module.relu.ReLU.forward.0", &[1, 3, 8, 8])]);
    let b = graph(&[("Relu", "/relu/Relu", "Relu", "", IMG)]);
    let p = pair_tensors(&a, &b);
    assert!(output_pairs(&a, &b, &p.pairs).is_empty());
}

#[test]
fn hostile_call_names_pair_nothing_and_never_panic() {
    let a = torch(&[
        ("ReLU", "Module.relu.ReLU.forward.4294967295", IMG),
        ("ReLU", "Module.relu.ReLU.forward.99999999999", IMG),
        ("x", "Functional..0.forward", IMG),
        ("x", "Module...forward.0", IMG),
        ("x", "Tensor.__add__.1.backward", IMG),
    ]);
    let b = graph(&[
        ("Relu", "/relu/Relu", "Relu", "", IMG),
        ("Relu", "/relu_4294967295/Relu", "Relu", "", IMG),
        (
            "Conv",
            "//Conv",
            "Conv",
            "; scope \"relu\" (ReLU); call \"relu_99999999999999\"",
            IMG,
        ),
    ]);
    let p = pair_tensors(&a, &b);
    // The one call of `relu` whose index parses is its 4294967295th: TorchScript's
    // `/relu_4294967295/Relu` is exactly that call.
    let pairs = output_pairs(&a, &b, &p.pairs);
    assert!(pairs.len() <= 2, "{pairs:?}");
    let _ = pair_tensors(&b, &a);
}

#[test]
fn mindspore_kernels_pair_by_cell_path_and_op_kind() {
    // MindSpore's file-name form of op names: the cell path `layer1.0.conv_1`, op kinds
    // Conv2D ↔ Conv, ReLU ↔ Relu, MatMul + BiasAdd-free Dense ↔ Gemm.
    let a = torch(&[
        (
            "Conv2D",
            "Default_network-Net_layer1-SequentialCell_0-Block_conv_1-Conv2d_Conv2D-op0",
            IMG,
        ),
        (
            "ReLU",
            "Default_network-Net_layer1-SequentialCell_0-Block_relu-ReLU_ReLU-op1",
            IMG,
        ),
        ("Dense", "Default_network-Net_fc-Dense_Dense-op2", VEC),
    ]);
    let b = graph(&[
        ("Conv", "/layer1/layer1.0/conv_1/Conv", "Conv", "", IMG),
        ("Relu", "/layer1/layer1.0/relu/Relu", "Relu", "", IMG),
        ("Gemm", "/fc/Gemm", "Gemm", "", VEC),
    ]);
    let p = pair_tensors(&a, &b);
    let pairs = output_pairs(&a, &b, &p.pairs);
    assert_eq!(pairs.len(), 3, "{pairs:?}");
    assert!(pairs.iter().all(|x| x.2 == PairRule::Scope), "{pairs:?}");
    assert!(pairs[0].1.contains("conv_1"), "{pairs:?}");
}
