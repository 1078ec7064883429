//! [`Graph`] as MindSpore's readable IR text (`ms_output_trace_code_graph_{g}.ir`).
//!
//! The layout follows the files MindSpore 2.10 writes (see `shared/reference/*/files/**/graphs`):
//! a header with the entry and parameter list, node counts, one `subgraph @name() { ... }` block
//! with one `%i(value) = Op(args)` line per node followed by its `: (in types) -> (out types)`
//! line, `# Fullname with scope: (...)` and `# In file ...` lines, then `Return` and `# Order:`.
//! Differences (no ANF monads, `Load` or `UpdateState` nodes; a second output of a node is
//! written `%i[k]` where MindSpore inserts a `TupleGetItem`, and its value name on a
//! `# Output value k: {value}` line after the node's other rows) are listed in docs/compat.md.

use std::{borrow::Cow, fmt::Write as _};

use dump_core::DType;

use super::{Graph, Input, Node};

/// `s` with every control character (a newline in an ONNX value name would start a row of
/// its own) written `\xHH`; dump-read's `parse_ir` reads it back. Names without one, which is
/// every name MindSpore writes, are unchanged.
fn one_line(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            let _ = write!(o, "\\x{:02x}", u32::from(c));
        } else {
            o.push(c);
        }
    }
    Cow::Owned(o)
}

/// A value name for the `%i(value) = Op(...)` head: [`one_line`], and a `) = ` inside the
/// name written `\x29 = `, so the head splits at its own `) = `.
fn head_value(s: &str) -> Cow<'_, str> {
    match one_line(s) {
        v if v.contains(") = ") => Cow::Owned(v.replace(") = ", "\\x29 = ")),
        v => v,
    }
}

fn dtype_name(d: Option<DType>) -> &'static str {
    d.map_or("Unknown", DType::cpu_name)
}

fn dims(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(usize::to_string).collect();
    parts.join(", ")
}

fn tensor_type(d: Option<DType>, shape: &[usize]) -> String {
    format!("<Tensor[{}], ({})>", dtype_name(d), dims(shape))
}

fn arg(g: &Graph, i: &Input) -> String {
    match *i {
        Input::Parameter(p) => match g.parameters.get(p) {
            Some(par) => format!("%para{}_{}", p + 1, one_line(&par.name)),
            None => format!("%para{}_<missing>", p + 1),
        },
        Input::Node { node, output } => {
            let multi = g.nodes.get(node).is_some_and(|n| n.outputs.len() > 1);
            if multi {
                format!("%{node}[{output}]")
            } else {
                format!("%{node}")
            }
        }
    }
}

fn input_type(g: &Graph, i: &Input) -> String {
    match *i {
        Input::Parameter(p) => g.parameters.get(p).map_or_else(
            || tensor_type(None, &[]),
            |p| tensor_type(p.dtype, &p.shape),
        ),
        Input::Node { node, output } => g
            .nodes
            .get(node)
            .and_then(|n| n.outputs.get(output))
            .map_or_else(
                || tensor_type(None, &[]),
                |o| tensor_type(o.dtype, &o.shape),
            ),
    }
}

fn write_node(s: &mut String, g: &Graph, i: usize, n: &Node) {
    let value = head_value(n.outputs.first().map_or("", |o| o.value.as_str()));
    let (op_type, name) = (one_line(&n.op_type), one_line(&n.name));
    let args: Vec<String> = n.inputs.iter().map(|a| arg(g, a)).collect();
    let ins: Vec<String> = n.inputs.iter().map(|a| input_type(g, a)).collect();
    let outs: Vec<String> = n
        .outputs
        .iter()
        .map(|o| tensor_type(o.dtype, &o.shape))
        .collect();
    let _ = writeln!(s, "  %{i}({value}) = {op_type}({})", args.join(", "));
    let _ = writeln!(s, "      : ({}) -> ({})", ins.join(", "), outs.join(", "));
    let _ = writeln!(s, "      # Fullname with scope: ({name})");
    if let Some(src) = &n.source {
        let _ = writeln!(s, "      # In file {}", one_line(src));
    }
    // The `%i(value)` head names the first output's value only; the others' names (an ONNX
    // Split's or LSTM's second and third outputs) are what reference arrays are keyed by.
    for (k, o) in n.outputs.iter().enumerate().skip(1) {
        let _ = writeln!(s, "      # Output value {k}: {}", one_line(&o.value));
    }
}

/// Renders `g` as MindSpore's IR text.
pub(crate) fn render(g: &Graph) -> String {
    let mut s = String::new();
    let gname = one_line(&g.name);
    let _ = writeln!(s, "# IR entry: @{gname}");
    let _ = writeln!(s, "# Total subgraphs: 1\n");
    let _ = writeln!(s, "# Total params: {}", g.parameters.len());
    let _ = writeln!(s, "# Params:");
    for (k, p) in g.parameters.iter().enumerate() {
        let pname = one_line(&p.name);
        let name = format!("%para{}_{pname}", k + 1);
        let dt = dtype_name(p.dtype);
        let d = dims(&p.shape);
        if p.is_weight {
            let _ = writeln!(
                s,
                "{name}: <Ref[Tensor[{dt}]], ({d}), ref_key={}, is_parameter>  :  has_default  :  \
                 <{dt}xDefaultFormat[const vector]{{{d}}}>  :  IsWeight: true",
                pname
            );
        } else {
            let _ = writeln!(
                s,
                "{name}: {} : [{d}]  :  <{dt}xDefaultFormat[const vector]{{{d}}}>  :  \
                 IsWeight: false",
                tensor_type(p.dtype, &p.shape)
            );
        }
    }
    let _ = writeln!(s, "\nNode counting information:");
    let _ = writeln!(
        s,
        "Total number of nodes: {}",
        g.parameters.len() + g.nodes.len() + 1
    );
    let _ = writeln!(s, "Total number of cnodes: {}\n", g.nodes.len() + 1);
    let _ = writeln!(s, "subgraph @{gname}() {{");
    for (i, n) in g.nodes.iter().enumerate() {
        write_node(&mut s, g, i, n);
    }
    let rets: Vec<String> = g.outputs.iter().map(|o| arg(g, o)).collect();
    let rtypes: Vec<String> = g.outputs.iter().map(|o| input_type(g, o)).collect();
    let _ = writeln!(s, "  Return({})", rets.join(", "));
    let _ = writeln!(s, "      : ({})", rtypes.join(", "));
    let _ = writeln!(s, "      # Fullname with scope: (Default/Return-op0)");
    let _ = writeln!(s, "}}");
    let _ = writeln!(s, "# Order:");
    for (i, n) in g.nodes.iter().enumerate() {
        let value = one_line(n.outputs.first().map_or("", |o| o.value.as_str()));
        let _ = writeln!(
            s,
            "#   {}: @{gname}:{value}{{{}}}",
            i + 1,
            one_line(&n.name)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::{Graph, Input, Node, Output, Parameter};
    use dump_core::DType;

    #[test]
    fn params_nodes_multi_outputs_and_return_render_like_mindspore() {
        let f = Some(DType::Float32);
        let mut g = Graph::new("g");
        g.parameters.push(Parameter::input("x", f, &[2, 1, 8, 8]));
        g.parameters.push(Parameter::weight("w", f, &[5]));
        g.nodes.push(Node {
            name: "Default/split-Split/Split-op0".into(),
            op_type: "Split".into(),
            inputs: vec![Input::Parameter(0), Input::Parameter(1)],
            outputs: vec![Output::new("a", f, &[1]), Output::new("b", f, &[1])],
            scope: "Default/split-Split".into(),
            source: Some("m.onnx: node split".into()),
        });
        g.outputs.push(Input::Node { node: 0, output: 1 });
        let ir = g.to_ir();
        assert!(ir.starts_with("# IR entry: @g\n# Total subgraphs: 1\n\n# Total params: 2\n"));
        assert!(ir.contains(
            "%para1_x: <Tensor[Float32], (2, 1, 8, 8)> : [2, 1, 8, 8]  :  \
             <Float32xDefaultFormat[const vector]{2, 1, 8, 8}>  :  IsWeight: false\n"
        ));
        assert!(ir.contains("%para2_w: <Ref[Tensor[Float32]], (5), ref_key=w, is_parameter>"));
        assert!(ir.contains("  %0(a) = Split(%para1_x, %para2_w)\n      : (<Tensor[Float32], (2, 1, 8, 8)>, <Tensor[Float32], (5)>) -> (<Tensor[Float32], (1)>, <Tensor[Float32], (1)>)\n      # Fullname with scope: (Default/split-Split/Split-op0)\n      # In file m.onnx: node split\n      # Output value 1: b\n"), "{ir}");
        assert!(ir.contains("  Return(%0[1])\n"), "{ir}");
        assert!(ir.contains("#   1: @g:a{Default/split-Split/Split-op0}"));
    }
}
