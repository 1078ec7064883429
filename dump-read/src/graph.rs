//! `graphs/ms_output_trace_code_graph_{g}.ir` read back: per node, its full name, the value
//! name it defines (an ONNX value name when the adapters wrote the graph) and the nodes whose
//! outputs it reads (the data-flow edges). Parameters (`%paraN_...`) are not nodes.
//!
//! The lines used are `  %{i}({value}) = {Op}({args})` and the `# Fullname with scope: ({name})`
//! line after it, which both MindSpore 2.10 and opdump's Dumper write.

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
}

/// Parses the text of a `.ir` file; lines of other forms are skipped.
pub fn parse_ir(text: &str) -> Vec<GraphNode> {
    let mut nodes: Vec<GraphNode> = Vec::new();
    // `%i` of the file -> position in `nodes`.
    let mut index: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    let mut pending: Option<GraphNode> = None;
    for line in text.lines() {
        let t = line.trim_start();
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
    }
}
