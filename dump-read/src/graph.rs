//! `graphs/ms_output_trace_code_graph_{g}.ir` read back: per node, its full name, the value
//! name it defines (an ONNX value name when the adapters wrote the graph) and the nodes whose
//! outputs it reads (the data-flow edges). Parameters (`%paraN_...`) are not nodes.
//!
//! The lines used are `  %{i}({value}) = {Op}({args})` and the `# Fullname with scope: ({name})`
//! line after it, which both MindSpore 2.10 and opdump's Dumper write, and the `# In file ...`
//! line after that when it names an ONNX node ([`OnnxOrigin`]): the ONNX adapters write
//! `onnx node #4 "fc1" (Gemm)` (ONNX Runtime, candle: one kernel per ONNX node), dump-tract
//! writes `tract node #13 "fc1" (Add); onnx node "fc1" decomposed; outputs 0->0` (a kernel
//! tract made from ONNX node `fc1`, which outputs of it are the node's outputs).

use dump_stats::names::sanitize;

/// One node of a graph file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GraphNode {
    /// Full name with scope, sanitised as in file names.
    pub op_name: String,
    /// The value the node defines (`relu1_out`; MindSpore writes names like `CNode_31`).
    pub value: String,
    /// Indices (into the same list) of the nodes whose outputs it reads.
    pub inputs: Vec<usize>,
    /// The ONNX node it computes or helps compute, when the source row names one.
    pub onnx: Option<OnnxOrigin>,
}

/// The ONNX node a kernel came from (its `# In file` row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnnxOrigin {
    /// The ONNX node's name.
    pub node: String,
    /// The runtime rewrote the node: several kernels, or one under another name (tract's
    /// Gemm → `EinSum` + `Add`).
    pub decomposed: bool,
    /// `(own output slot, the ONNX node's output slot)` for the kernel's outputs that are the
    /// node's outputs; `None`: every output is the node's output of the same slot.
    pub outputs: Option<Vec<(u32, u32)>>,
}

impl OnnxOrigin {
    /// The ONNX node's output slot that the kernel's output `slot` is, if any.
    pub fn onnx_slot(&self, slot: u32) -> Option<u32> {
        match &self.outputs {
            None => Some(slot),
            Some(m) => m.iter().find(|(own, _)| *own == slot).map(|&(_, o)| o),
        }
    }
}

/// A Rust-escaped quoted string at the start of `s` (`"a\"b"`): its text and the rest.
fn quoted(s: &str) -> Option<(String, &str)> {
    let mut chars = s.strip_prefix('"')?.char_indices();
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[i + 2..])),
            '\\' => match chars.next()?.1 {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

/// The ONNX node named by a `# In file` row (see the module docs); `None` for other rows.
pub fn parse_origin(row: &str) -> Option<OnnxOrigin> {
    if let Some(rest) = row.strip_prefix("onnx node #") {
        let (_, rest) = rest.split_once(' ')?;
        let (node, _) = quoted(rest)?;
        return Some(OnnxOrigin {
            node,
            decomposed: false,
            outputs: None,
        });
    }
    let (_, rest) = row.split_once("; onnx node ")?;
    let (node, rest) = quoted(rest)?;
    let (flags, outputs) = rest.split_once("; outputs ")?;
    let outputs = match outputs.trim() {
        "none" => Vec::new(),
        list => list
            .split(' ')
            .map(|p| {
                let (a, b) = p.split_once("->")?;
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect::<Option<Vec<_>>>()?,
    };
    Some(OnnxOrigin {
        node,
        decomposed: flags.trim() == "decomposed",
        outputs: Some(outputs),
    })
}

/// Parses the text of a `.ir` file; lines of other forms are skipped.
pub fn parse_ir(text: &str) -> Vec<GraphNode> {
    let mut nodes: Vec<GraphNode> = Vec::new();
    // `%i` of the file -> position in `nodes`.
    let mut index: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    let mut pending: Option<GraphNode> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(row) = t.strip_prefix("# In file ") {
            if let Some(n) = nodes.last_mut()
                && n.onnx.is_none()
                && pending.is_none()
            {
                n.onnx = parse_origin(row);
            }
            continue;
        }
        if let Some(rest) = t.strip_prefix("# Fullname with scope: (") {
            if let Some(mut n) = pending.take() {
                n.op_name = sanitize(rest.strip_suffix(')').unwrap_or(rest));
                nodes.push(n);
            }
            continue;
        }
        let Some(rest) = t.strip_prefix('%') else {
            continue;
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let Ok(i) = digits.parse::<usize>() else {
            continue;
        };
        let after = &rest[digits.len()..];
        let Some(after) = after.strip_prefix('(') else {
            continue;
        };
        let Some((value, call)) = after.split_once(") = ") else {
            continue;
        };
        // Arguments: `%j` or `%j[k]` inside the call's parentheses (attributes follow after).
        let args = call
            .split_once('(')
            .map(|(_, a)| a.split(')').next().unwrap_or(""))
            .unwrap_or("");
        let inputs = args
            .split(',')
            .filter_map(|a| {
                let a = a.trim().strip_prefix('%')?;
                let d: String = a.chars().take_while(char::is_ascii_digit).collect();
                d.parse::<usize>().ok()
            })
            .filter_map(|j| index.get(&j).copied())
            .collect();
        index.insert(i, nodes.len());
        pending = Some(GraphNode {
            op_name: String::new(),
            value: value.to_owned(),
            inputs,
            onnx: None,
        });
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_values_and_edges() {
        let ir = "  %0(a_out) = Relu(%para1_x) {attr: (1)}\n      : (<Tensor[Float32], (2)>) -> (<Tensor[Float32], (2)>)\n      # Fullname with scope: (Default/relu-Relu/Relu-op0)\n  %1(b) = Add(%0, %para2_w, %0[1])\n      # Fullname with scope: (Default/Add-op1)\n  %2 junk\n";
        let n = parse_ir(ir);
        assert_eq!(n.len(), 2);
        assert_eq!(
            (n[0].op_name.as_str(), n[0].value.as_str()),
            ("Default_relu-Relu_Relu-op0", "a_out")
        );
        assert!(n[0].inputs.is_empty());
        assert_eq!(
            (n[1].value.as_str(), n[1].inputs.clone()),
            ("b", vec![0, 0])
        );
        assert_eq!(n[1].onnx, None);
    }

    #[test]
    fn source_rows_name_the_onnx_node() {
        let ir = "  %0(fc1.ab) = EinSum(%para1_x)\n      # Fullname with scope: (Default/fc1.ab/EinSum-op0)\n      # In file tract node #10 \"fc1.ab\" (EinSum); onnx node \"fc1\" decomposed; outputs none\n  %1(y) = Add(%0)\n      # Fullname with scope: (Default/fc1/Add-op0)\n      # In file tract node #13 \"fc1\" (Add); onnx node \"f\\\"c1\" decomposed; outputs 0->0 2->1\n  %2(z) = Gemm(%1)\n      # Fullname with scope: (Default/g/Gemm-op0)\n      # In file onnx node #4 \"/a/b.0/Gemm\" (Gemm)\n  %3(w) = Relu(%2)\n      # Fullname with scope: (Default/r/Relu-op0)\n      # In file m.py:3\n";
        let n = parse_ir(ir);
        assert_eq!(n.len(), 4);
        let o = n[0].onnx.clone().unwrap();
        assert_eq!((o.node.as_str(), o.decomposed), ("fc1", true));
        assert_eq!(o.outputs, Some(vec![]));
        assert_eq!(o.onnx_slot(0), None);
        let o = n[1].onnx.clone().unwrap();
        assert_eq!(o.node, "f\"c1");
        assert_eq!(
            (o.onnx_slot(0), o.onnx_slot(2), o.onnx_slot(1)),
            (Some(0), Some(1), None)
        );
        let o = n[2].onnx.clone().unwrap();
        assert_eq!((o.node.as_str(), o.decomposed), ("/a/b.0/Gemm", false));
        assert_eq!(o.onnx_slot(3), Some(3));
        assert_eq!(n[3].onnx, None);
    }

    #[test]
    fn hostile_source_rows_are_ignored() {
        for row in [
            "onnx node #",
            "onnx node #1 \"unterminated",
            "onnx node #1 \"a\\",
            "x; onnx node \"a\"",
            "x; onnx node \"a\"; outputs 0->",
            "x; onnx node \"a\"; outputs x->1",
            "x; onnx node \"a\"; outputs 99999999999->1",
            "x; onnx node a; outputs none",
            "\u{e9}; onnx node \"\u{e9}",
        ] {
            assert_eq!(parse_origin(row), None, "{row}");
        }
    }
}
