//! `Dumper::begin_graph_with`: the graph files, the execution order and the kept graph.

use std::{collections::HashMap, os::unix::fs::PermissionsExt, path::Path};

use dump_core::DType;
use dump_host::{
    DumpOptions, Dumper,
    graph::{Graph, Input, Node, Output, Parameter},
};

fn dumper(root: &Path) -> Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions::default())
        .open_json(text.into_bytes())
        .unwrap()
}

fn two_nodes() -> Graph {
    let f = Some(DType::Float32);
    let mut g = Graph::new("main");
    g.parameters.push(Parameter::input("x", f, &[2, 3]));
    g.parameters.push(Parameter::weight("w", f, &[3]));
    g.nodes.push(Node {
        name: "Default/add1-Add/Add-op0".into(),
        op_type: "Add".into(),
        inputs: vec![Input::Parameter(0), Input::Parameter(1)],
        outputs: vec![Output::new("sum", f, &[2, 3])],
        scope: "Default/add1-Add".into(),
        source: Some("m.onnx: node add1".into()),
    });
    let mut spare = Output::new("reserved", f, &[1]);
    spare.useless = true;
    g.nodes.push(Node {
        name: "Default/relu1-Relu/Relu-op1".into(),
        op_type: "Relu".into(),
        inputs: vec![Input::Node { node: 0, output: 0 }],
        outputs: vec![Output::new("y", f, &[2, 3]), spare],
        scope: "Default/relu1-Relu".into(),
        source: None,
    });
    g.outputs.push(Input::Node { node: 1, output: 0 });
    g
}

#[test]
fn begin_graph_with_writes_ir_pb_and_execution_order_and_keeps_edges() {
    let root = std::env::temp_dir().join(format!("opdump-graph-files-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut d = dumper(&root);
    let g = two_nodes();
    d.begin_graph_with(3, &g).unwrap();
    d.close().unwrap();
    let rank = root.join("rank_0");
    let ir = std::fs::read_to_string(rank.join("graphs/ms_output_trace_code_graph_3.ir")).unwrap();
    assert!(ir.starts_with("# IR entry: @main\n"), "{ir}");
    assert!(ir.contains("  %1(y) = Relu(%0)\n"), "{ir}");
    assert!(ir.contains("# Fullname with scope: (Default/add1-Add/Add-op0)"));
    let pb = std::fs::read(rank.join("graphs/ms_output_trace_code_graph_3.pb")).unwrap();
    assert_eq!(pb, g.to_pb());
    assert!(
        pb.windows(b"Default/relu1-Relu/Relu-op1".len())
            .any(|w| w == b"Default/relu1-Relu/Relu-op1")
    );
    let order =
        std::fs::read_to_string(rank.join("execution_order/ms_execution_order_graph_3.csv"))
            .unwrap();
    assert_eq!(
        order,
        "NodeExecutionOrder-FullNameWithScope\nDefault/add1-Add/Add-op0\nDefault/relu1-Relu/Relu-op1\n"
    );
    for f in ["ir", "pb"] {
        let p = rank.join(format!("graphs/ms_output_trace_code_graph_3.{f}"));
        assert_eq!(
            std::fs::metadata(p).unwrap().permissions().mode() & 0o777,
            0o400
        );
    }
    let kept = d.graph(3).expect("graph kept");
    assert_eq!(kept.edges().collect::<Vec<_>>(), vec![((0, 0), 1, 0)]);
    assert_eq!(kept.producer("y"), Some((1, 0)));
    assert!(d.graph(0).is_none());
    let (policy, warning) = d.useless_outputs();
    // the test runner's environment does not set MINDSPORE_DUMP_IGNORE_USELESS_OUTPUT
    assert!(!policy.dump && warning.is_none());
    assert!(kept.output_dumped(1, 0, policy));
    assert!(!kept.output_dumped(1, 1, policy));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_disabled_dumper_keeps_the_graph_and_writes_nothing() {
    let mut d = Dumper::disabled();
    d.begin_graph_with(0, &two_nodes()).unwrap();
    assert_eq!(d.graph(0).unwrap().nodes.len(), 2);
}
