//! Names in a `.ir` file that would break its rows: an ONNX value, node or parameter name with
//! a newline or another control character (ONNX allows any string). The Dumper writes each as
//! `\xHH`, so every row of the file is still one of the forms a reader knows and no name can
//! forge a row; dump-read's `parse_ir` gives the names back exactly.

use dump_core::DType;
use dump_host::graph::{Graph, Input, Node, Output, Parameter};

#[test]
fn control_characters_in_names_cannot_forge_rows_and_read_back_exactly() {
    let f = Some(DType::Float32);
    // A value name that carries a whole forged node row, and others with \r, \t, NUL, DEL.
    let forged = "a\n  %7(evil) = Relu(%0)\n      # Fullname with scope: (Default/evil-op9)";
    let mut g = Graph::new("g\nx");
    g.parameters
        .push(Parameter::input("x\r\n# Params:", f, &[2]));
    g.nodes.push(Node {
        name: "Default/split\n-Split/Split-op0".into(),
        op_type: "Split".into(),
        inputs: vec![Input::Parameter(0)],
        outputs: vec![
            Output::new(forged, f, &[1]),
            Output::new("b\t\u{0}\u{7f}", f, &[1]),
            Output::new("plain \\x41 and \\x0", f, &[1]),
        ],
        scope: "Default/split".into(),
        source: Some("m.onnx: node \"s\nplit\"".into()),
    });
    g.outputs.push(Input::Node { node: 0, output: 1 });
    let ir = g.to_ir();
    // No row that a name started: each line is a known row form (or blank).
    for line in ir.lines() {
        let t = line.trim_start();
        assert!(
            t.is_empty()
                || t.starts_with('#')
                || t.starts_with('%')
                || t.starts_with(": ")
                || t.starts_with("subgraph @")
                || t.starts_with("Return(")
                || t == "}"
                || t.starts_with("Node counting")
                || t.starts_with("Total number"),
            "a forged row: {line:?}\n{ir}"
        );
    }
    assert!(
        !ir.contains("%7(evil)\n") && !ir.contains("\n  %7(evil)"),
        "{ir}"
    );
    assert!(!ir.chars().any(|c| c.is_control() && c != '\n'), "{ir:?}");
    let nodes = dump_read::parse_ir(&ir);
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let n = &nodes[0];
    assert_eq!(n.full_name, "Default/split\n-Split/Split-op0");
    assert_eq!(
        n.values,
        [forged, "b\t\u{0}\u{7f}", "plain \\x41 and \\x0"],
        "{ir}"
    );
}
