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
    /// Full name with scope as the file writes it (`Default/conv1-Conv2d/Conv2D-op5`: its
    /// `/`-separated prefixes are the module scope); empty where the source has none.
    pub full_name: String,
    /// The values the node defines, by output slot (`relu1_out`; MindSpore writes names like
    /// `CNode_31`): the first from its `%i(value)` line, the others from its
    /// `# Output value k: {value}` rows (an ONNX Split's or LSTM's further outputs), empty
    /// where a row is missing. Never empty.
    pub values: Vec<String>,
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
    /// The ONNX node's op type (`Conv`), when the row names it.
    pub op_type: Option<String>,
    /// The torch module scope the exporter recorded for the node (`layer2.0.conv1`;
    /// `dump_onnx::TorchScope`), when the row carries one. [`module_scope`](Self::module_scope)
    /// also reads TorchScript's node names.
    pub scope: Option<String>,
    /// The torch module's class (`Conv2d`), when recorded.
    pub class: Option<String>,
    /// The FX node's name with its counter (`conv2d_5`), when recorded.
    pub call: Option<String>,
    /// The exporter fused several torch calls into the node (BatchNorm into Conv).
    pub fused: bool,
}

impl OnnxOrigin {
    /// An origin naming only the ONNX node (`decomposed` as given, every output its own).
    pub fn node(node: &str, decomposed: bool) -> OnnxOrigin {
        OnnxOrigin {
            node: node.to_owned(),
            decomposed,
            outputs: None,
            op_type: None,
            scope: None,
            class: None,
            call: None,
            fused: false,
        }
    }

    /// The torch module scope of the node and the call index of the module in it: the
    /// recorded [`scope`](Self::scope) (index 0), or else the scope TorchScript's exporter
    /// writes into node names (`/layer2/layer2.0/conv1/Conv` → `layer2.0.conv1`; a
    /// module's second call, `/layer1/relu_1/Relu`, → `layer1.relu`, index 1). `None` for
    /// names of neither form.
    pub fn module_scope(&self) -> Option<(String, u32)> {
        if let Some(s) = &self.scope {
            return Some((s.clone(), 0));
        }
        torchscript_scope(&self.node)
    }
}

/// The module path of a TorchScript-exported node name (`/layer2/layer2.0/conv1/Conv` →
/// `layer2.0.conv1`, call index 0; `/layer1/layer1.0/relu_1/Relu` → `layer1.0.relu`, 1; a
/// top-level `/Relu` → the empty path). Each component is a child's name, or the child's
/// qualified name when it extends the path so far (`layer2` then `layer2.0`).
pub fn torchscript_scope(node: &str) -> Option<(String, u32)> {
    let rest = node.strip_prefix('/')?;
    let mut parts: Vec<&str> = rest.split('/').collect();
    parts.pop(); // the op (`Conv`, `Conv_1`)
    if parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let mut path = String::new();
    let mut index = 0;
    let last = parts.len().saturating_sub(1);
    for (i, p) in parts.iter().enumerate() {
        let mut p = *p;
        if i == last
            && let Some((base, n)) = p.rsplit_once('_')
            && !base.is_empty()
            && let Ok(n) = n.parse::<u32>()
        {
            p = base;
            index = n;
        }
        let qualified = p.len() > path.len() + 1
            && p.starts_with(path.as_str())
            && p.as_bytes()[path.len()] == b'.';
        if path.is_empty() || qualified {
            path = p.to_owned();
        } else {
            path = format!("{path}.{p}");
        }
    }
    Some((path, index))
}

/// The torch parts of a source row after the ONNX node (`; onnx op "Conv"; scope "s"
/// (Class); call "c"; fused`), into `o`; parts it does not know are skipped.
fn parse_torch(mut rest: &str, o: &mut OnnxOrigin) {
    while let Some(i) = rest.find("; ") {
        rest = &rest[i + 2..];
        if let Some(r) = rest.strip_prefix("onnx op ")
            && let Some((t, r)) = quoted(r)
        {
            o.op_type = Some(t);
            rest = r;
        } else if let Some(r) = rest.strip_prefix("scope ")
            && let Some((t, r)) = quoted(r)
        {
            o.scope = Some(t);
            rest = r;
            if let Some(r) = rest.strip_prefix(" (")
                && let Some((c, r)) = r.split_once(')')
            {
                o.class = Some(c.to_owned());
                rest = r;
            }
        } else if let Some(r) = rest.strip_prefix("call ")
            && let Some((t, r)) = quoted(r)
        {
            o.call = Some(t);
            rest = r;
        } else if rest == "fused" || rest.starts_with("fused;") {
            o.fused = true;
        }
    }
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
        let (node, rest) = quoted(rest)?;
        let mut o = OnnxOrigin::node(&node, false);
        let mut rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix('(')
            && let Some((t, r)) = r.split_once(')')
        {
            o.op_type = Some(t.to_owned());
            rest = r;
        }
        parse_torch(rest, &mut o);
        return Some(o);
    }
    let (_, rest) = row.split_once("; onnx node ")?;
    let (node, rest) = quoted(rest)?;
    let (flags, outputs) = rest.split_once("; outputs ")?;
    let (outputs, torch) = match outputs.find("; ") {
        Some(i) => (&outputs[..i], &outputs[i..]),
        None => (outputs, ""),
    };
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
    let mut o = OnnxOrigin::node(&node, flags.trim() == "decomposed");
    o.outputs = Some(outputs);
    parse_torch(torch, &mut o);
    Some(o)
}

/// The highest output slot a `# Output value` row may name (ONNX nodes have a few outputs;
/// `Split` into many pieces may have hundreds).
const MAX_OUTPUT_SLOT: usize = 65_535;

/// A name as the Dumper wrote it into a `.ir` row: a control character (a newline in an ONNX
/// value name) is written `\xHH` so it cannot start a row, and a `)` of `) = ` in a head's
/// value `\x29`; this turns them back. Other text, a `\x` not followed by the two hex digits
/// of a control character or `)` included, is kept as is.
fn unescape(s: &str) -> String {
    if !s.contains("\\x") {
        return s.to_owned();
    }
    let mut o = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("\\x") {
        o.push_str(&rest[..at]);
        let hex = rest.get(at + 2..at + 4);
        match hex
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .and_then(char::from_u32)
            .filter(|&c| c.is_control() || c == ')')
        {
            Some(c) => {
                o.push(c);
                rest = &rest[at + 4..];
            }
            None => {
                o.push_str("\\x");
                rest = &rest[at + 2..];
            }
        }
    }
    o.push_str(rest);
    o
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
        if let Some(rest) = t.strip_prefix("# Output value ") {
            if let (Some(n), None) = (nodes.last_mut(), &pending)
                && let Some((k, value)) = rest.split_once(": ")
                && let Ok(k) = k.parse::<usize>()
                // A slot beyond any real node's outputs is a damaged row, not a reason to
                // allocate.
                && (1..=MAX_OUTPUT_SLOT).contains(&k)
            {
                if n.values.len() <= k {
                    n.values.resize(k + 1, String::new());
                }
                n.values[k] = unescape(value);
            }
            continue;
        }
        if let Some(rest) = t.strip_prefix("# Fullname with scope: (") {
            if let Some(mut n) = pending.take() {
                let full = rest.strip_suffix(')').unwrap_or(rest);
                let full = unescape(full);
                n.op_name = sanitize(&full);
                n.full_name = full;
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
            full_name: String::new(),
            values: vec![unescape(value)],
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
    fn escaped_names_come_back_and_other_backslashes_stay() {
        for (written, name) in [
            ("a\\x0ab", "a\nb"),
            ("\\x29 = x\\x7f", ") = x\u{7f}"),
            ("\\x", "\\x"),
            ("\\x4", "\\x4"),
            ("\\xZZ\\x41", "\\xZZ\\x41"),
            ("end\\x0", "end\\x0"),
            ("\\x\\x09", "\\x\t"),
            ("plain", "plain"),
        ] {
            assert_eq!(unescape(written), name, "{written}");
        }
    }

    #[test]
    fn nodes_values_and_edges() {
        let ir = "  %0(a_out) = Relu(%para1_x) {attr: (1)}\n      : (<Tensor[Float32], (2)>) -> (<Tensor[Float32], (2)>)\n      # Fullname with scope: (Default/relu-Relu/Relu-op0)\n  %1(b) = Add(%0, %para2_w, %0[1])\n      # Fullname with scope: (Default/Add-op1)\n  %2 junk\n";
        let n = parse_ir(ir);
        assert_eq!(n.len(), 2);
        assert_eq!(
            (n[0].op_name.as_str(), n[0].values[0].as_str()),
            ("Default_relu-Relu_Relu-op0", "a_out")
        );
        assert_eq!(n[0].full_name, "Default/relu-Relu/Relu-op0");
        assert!(n[0].inputs.is_empty());
        assert_eq!(
            (n[1].values.clone(), n[1].inputs.clone()),
            (vec!["b".to_owned()], vec![0, 0])
        );
        assert_eq!(n[1].onnx, None);
    }

    #[test]
    fn further_output_values_by_slot() {
        // A Split's three outputs, a gap at slot 2, and damaged rows that change nothing.
        let ir = "  %0(s0) = Split(%para1_x)
      # Fullname with scope: (Default/split/Split-op0)
      # In file onnx node #0 \"split\" (Split)
      # Output value 1: s 1: x
      # Output value 3: s3
      # Output value 0: bad
      # Output value 99999999: bad
      # Output value x: bad
  %1(c) = Concat(%0[1])
      # Output value 1: dangling
      # Fullname with scope: (Default/concat/Concat-op0)
";
        let n = parse_ir(ir);
        assert_eq!(n.len(), 2);
        assert_eq!(n[0].values, ["s0", "s 1: x", "", "s3"]);
        assert_eq!(n[0].onnx.as_ref().unwrap().node, "split");
        // A row between a node's head and its Fullname line belongs to no finished node: the
        // previous node keeps its values.
        assert_eq!(n[1].values, ["c"]);
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
    fn torch_scopes_in_source_rows() {
        let o = parse_origin("onnx node #3 \"node_Conv_27\" (Conv); scope \"layer1.0.bn1\" (BatchNorm2d); call \"_native_batch_norm_legit_no_training_1\"; fused").unwrap();
        assert_eq!(o.node, "node_Conv_27");
        assert_eq!(o.op_type.as_deref(), Some("Conv"));
        assert_eq!(o.scope.as_deref(), Some("layer1.0.bn1"));
        assert_eq!(o.class.as_deref(), Some("BatchNorm2d"));
        assert_eq!(
            o.call.as_deref(),
            Some("_native_batch_norm_legit_no_training_1")
        );
        assert!(o.fused);
        assert_eq!(o.module_scope(), Some(("layer1.0.bn1".to_owned(), 0)));
        let o = parse_origin("tract node #13 \"node_linear\" (Add); onnx node \"node_linear\" decomposed; outputs 0->0; onnx op \"Gemm\"; scope \"fc\" (Linear); call \"linear\"").unwrap();
        assert_eq!(o.outputs, Some(vec![(0, 0)]));
        assert_eq!(
            (
                o.op_type.as_deref(),
                o.scope.as_deref(),
                o.class.as_deref(),
                o.call.as_deref(),
                o.fused
            ),
            (
                Some("Gemm"),
                Some("fc"),
                Some("Linear"),
                Some("linear"),
                false
            )
        );
        let o = parse_origin("tract node #2 \"/Relu\" (Max); onnx node \"/Relu\" decomposed; outputs none; onnx op \"Relu\"").unwrap();
        assert_eq!(
            (o.op_type.as_deref(), o.scope.as_deref()),
            (Some("Relu"), None)
        );
        assert_eq!(o.module_scope(), Some((String::new(), 0)));
        // an old row: no torch parts
        let o = parse_origin("onnx node #4 \"fc1\" (Gemm)").unwrap();
        assert_eq!(
            (
                o.op_type.as_deref(),
                o.scope.as_deref(),
                o.call.as_deref(),
                o.fused
            ),
            (Some("Gemm"), None, None, false)
        );
        assert_eq!(o.module_scope(), None);
    }

    #[test]
    fn torchscript_names_give_module_scopes() {
        for (name, want) in [
            ("/layer2/layer2.0/conv1/Conv", Some(("layer2.0.conv1", 0))),
            ("/layer1/layer1.0/relu_1/Relu", Some(("layer1.0.relu", 1))),
            ("/fc/Gemm", Some(("fc", 0))),
            ("/Relu", Some(("", 0))),
            (
                "/features/features.0/features.0.1/Conv",
                Some(("features.0.1", 0)),
            ),
            ("node_Conv_3", None),
            ("/a//Conv", None),
        ] {
            assert_eq!(
                torchscript_scope(name),
                want.map(|(s, i)| (s.to_owned(), i)),
                "{name}"
            );
        }
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
