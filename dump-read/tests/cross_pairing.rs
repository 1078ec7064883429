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
        unreadable: None,
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

/// MindSpore 2.10's own kernel names for a network called directly (no wrapper cell), as its
/// e2e dump writes them (tests/fixtures/mindspore_e2e): Conv2d and Dense with a bias run
/// Conv2D or MatMul then BiasAdd, Flatten's output is dumped with its input's shape.
fn mindspore_forward(prefix: &str) -> Dump {
    let k = |cells: &str, op: &str| format!("Default_{prefix}{cells}_{op}-op0");
    torch(&[
        ("Conv2D", &k("conv1-Conv2d", "Conv2D"), &[1, 4, 16, 16]),
        ("BiasAdd", &k("conv1-Conv2d", "BiasAdd"), &[1, 4, 16, 16]),
        ("ReLU", &k("relu-ReLU", "ReLU"), &[1, 4, 16, 16]),
        ("MaxPool", &k("pool-MaxPool2d", "MaxPool"), IMG),
        (
            "Conv2D",
            &k("features-SequentialCell_0-Conv2d", "Conv2D"),
            &[1, 8, 8, 8],
        ),
        (
            "BiasAdd",
            &k("features-SequentialCell_0-Conv2d", "BiasAdd"),
            &[1, 8, 8, 8],
        ),
        (
            "ReLU",
            &k("features-SequentialCell_1-ReLU", "ReLU"),
            &[1, 8, 8, 8],
        ),
        (
            "MaxPool",
            &k("features-SequentialCell_2-MaxPool2d", "MaxPool"),
            &[1, 8, 4, 4],
        ),
        ("Flatten", &k("flatten-Flatten", "Flatten"), &[1, 8, 4, 4]),
        ("MatMul", &k("fc-Dense", "MatMul"), VEC),
        ("BiasAdd", &k("fc-Dense", "BiasAdd"), VEC),
    ])
}

/// torch's TorchScript export of the same network (the nodes' names carry the scopes).
fn torchscript_net() -> Dump {
    graph(&[
        ("Conv", "/conv1/Conv", "Conv", "", &[1, 4, 16, 16]),
        ("Relu", "/relu/Relu", "Relu", "", &[1, 4, 16, 16]),
        ("MaxPool", "/pool/MaxPool", "MaxPool", "", IMG),
        (
            "Conv",
            "/features/features.0/Conv",
            "Conv",
            "",
            &[1, 8, 8, 8],
        ),
        (
            "Relu",
            "/features/features.1/Relu",
            "Relu",
            "",
            &[1, 8, 8, 8],
        ),
        (
            "MaxPool",
            "/features/features.2/MaxPool",
            "MaxPool",
            "",
            &[1, 8, 4, 4],
        ),
        ("Reshape", "/flatten/Flatten", "Flatten", "", &[1, 128]),
        ("Gemm", "/fc/Gemm", "Gemm", "", VEC),
    ])
}

fn fused_outputs(a: &Dump, p: &dump_read::compare::Pairing) -> Vec<(String, String)> {
    p.fused_a
        .iter()
        .filter(|(i, _)| a.tensors[*i].id.io == Io::Output)
        .map(|(i, n)| (a.tensors[*i].id.op_name.clone(), n.clone()))
        .collect()
}

#[test]
fn mindspore_bias_add_pairs_with_the_conv_and_gemm_and_its_producer_is_fused() {
    let a = mindspore_forward("");
    let b = torchscript_net();
    let p = pair_tensors(&a, &b);
    let pairs = output_pairs(&a, &b, &p.pairs);
    let expect = [
        ("conv1-Conv2d_BiasAdd", "_conv1_Conv"),
        ("relu-ReLU_ReLU", "_relu_Relu"),
        ("pool-MaxPool2d_MaxPool", "_pool_MaxPool"),
        ("SequentialCell_0-Conv2d_BiasAdd", "_features.0_Conv"),
        ("SequentialCell_1-ReLU_ReLU", "_features.1_Relu"),
        ("SequentialCell_2-MaxPool2d_MaxPool", "_features.2_MaxPool"),
        ("flatten-Flatten_Flatten", "_flatten_Flatten"),
        ("fc-Dense_BiasAdd", "_fc_Gemm"),
    ];
    assert_eq!(pairs.len(), expect.len(), "{pairs:#?}");
    for ((a_name, b_name, rule), (x, y)) in pairs.iter().zip(expect) {
        assert!(
            a_name.contains(x) && b_name.contains(y),
            "{a_name} {b_name}"
        );
        assert_eq!(*rule, PairRule::Scope, "{a_name}");
    }
    // The bias-free outputs are computed inside the Conv and Gemm nodes: fused, not unpaired.
    assert_eq!(
        fused_outputs(&a, &p),
        vec![
            (
                "Default_conv1-Conv2d_Conv2D-op0".to_owned(),
                "/conv1/Conv".to_owned()
            ),
            (
                "Default_features-SequentialCell_0-Conv2d_Conv2D-op0".to_owned(),
                "/features/features.0/Conv".to_owned()
            ),
            (
                "Default_fc-Dense_MatMul-op0".to_owned(),
                "/fc/Gemm".to_owned()
            ),
        ]
    );
    let unpaired: Vec<&str> = p
        .only_in_a
        .iter()
        .filter(|&&i| a.tensors[i].id.io == Io::Output)
        .map(|&i| a.tensors[i].id.op_name.as_str())
        .collect();
    assert!(unpaired.is_empty(), "{unpaired:?}");
}

#[test]
fn mindspore_wrapper_cells_are_dropped_by_matching_the_graph_scopes() {
    // The same network under TrainOneStepCell(WithLossCell(net)): every name starts with
    // `network-WithLossCell/_backbone-Net`; the loss cell's kernel has no ONNX counterpart.
    let mut a = mindspore_forward("network-WithLossCell__backbone-Net_");
    let loss = "Default_network-WithLossCell__loss_fn-SoftmaxCrossEntropyWithLogits_SparseSoftmaxCrossEntropyWithLogits-op0";
    a.tensors.push(record(
        "SparseSoftmaxCrossEntropyWithLogits",
        loss,
        Io::Output,
        0,
        &[],
        1000,
    ));
    let b = torchscript_net();
    let p = pair_tensors(&a, &b);
    let pairs = output_pairs(&a, &b, &p.pairs);
    assert_eq!(pairs.len(), 8, "{pairs:#?}");
    assert!(pairs.iter().all(|x| x.2 == PairRule::Scope), "{pairs:#?}");
    assert!(pairs[3].0.contains("0-Conv2d_BiasAdd") && pairs[3].1.contains("features.0"));
    assert_eq!(fused_outputs(&a, &p).len(), 3);
    let unpaired: Vec<&str> = p
        .only_in_a
        .iter()
        .map(|&i| a.tensors[i].id.op_name.as_str())
        .collect();
    assert_eq!(unpaired, vec![loss]);
}

#[test]
fn a_mindspore_conv_without_bias_add_pairs_itself() {
    // Conv2d(has_bias=False): Conv2D alone is the conv's output; a lone BiasAdd elsewhere
    // (not after its producer's output) is an addition.
    let a = torch(&[
        ("Conv2D", "Default_conv1-Conv2d_Conv2D-op0", IMG),
        ("ReLU", "Default_relu-ReLU_ReLU-op0", IMG),
        ("BiasAdd", "Default_BiasAdd-op0", IMG),
    ]);
    let b = graph(&[
        ("Conv", "/conv1/Conv", "Conv", "", IMG),
        ("Relu", "/relu/Relu", "Relu", "", IMG),
        ("Add", "/Add", "Add", "", IMG),
    ]);
    let p = pair_tensors(&a, &b);
    let pairs = output_pairs(&a, &b, &p.pairs);
    assert_eq!(pairs.len(), 3, "{pairs:#?}");
    assert_eq!(pairs[0].0, "Default_conv1-Conv2d_Conv2D-op0");
    assert_eq!(pairs[2].0, "Default_BiasAdd-op0");
    assert!(p.fused_a.is_empty());
}

#[test]
fn mindspore_parameters_do_not_hide_the_kernels() {
    // A dump with more Parameters (weights, BatchNorm statistics, inputs) than kernels still
    // reads as MindSpore's kernels named by cell.
    let mut a = mindspore_forward("");
    for i in 0..40 {
        a.tensors.push(record(
            "Parameter",
            &format!("layer{i}_weight"),
            Io::Output,
            0,
            &[3],
            500 + i,
        ));
    }
    let b = torchscript_net();
    let p = pair_tensors(&a, &b);
    assert_eq!(output_pairs(&a, &b, &p.pairs).len(), 8);
    assert_eq!(fused_outputs(&a, &p).len(), 3);
}
