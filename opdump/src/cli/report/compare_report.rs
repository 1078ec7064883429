//! [`CompareReport`]: everything `opdump compare` found, built once by the command and read by
//! every renderer (`text`, `json`, `csv`, `html`), none of which derives anything again.

use dump_read::{Dump, compare::Comparison};

/// Pairs the terminal table lists at least (divergent pairs are always listed).
pub const TABLE_FIRST: usize = 20;

/// The first divergent pair and where it came from.
pub struct FirstDivergent {
    /// Its index in [`Comparison::pairs`].
    pub pair: usize,
    /// The ONNX node A's (else B's) kernel came from, when its `graphs/*.ir` source row
    /// names one.
    pub onnx_node: Option<String>,
}

/// An ONNX node the two dumps compute differently, and how many tensors each has inside it.
pub struct WithinNode {
    /// The ONNX node's name.
    pub node: String,
    /// Tensors inside it in A.
    pub in_a: usize,
    /// Tensors inside it in B.
    pub in_b: usize,
}

/// What `opdump compare` reports on two dumps.
pub struct CompareReport<'a> {
    /// The run under test.
    pub a: &'a Dump,
    /// The reference.
    pub b: &'a Dump,
    /// Pairs, unpaired tensors and the first divergent pair.
    pub cmp: Comparison,
    /// How many pairs diverge.
    pub diverged: usize,
    /// The first divergent pair.
    pub first: Option<FirstDivergent>,
    /// The ONNX nodes with tensors inside them, in A's order.
    pub within: Vec<WithinNode>,
    /// Tensors inside such nodes, both sides.
    pub within_tensors: usize,
    /// The pairs the terminal table lists (all with `--all`; else the divergent ones and
    /// the first [`TABLE_FIRST`]).
    pub listed: Vec<usize>,
    /// The pairs with notes on how they were compared.
    pub noted: Vec<usize>,
}

impl<'a> CompareReport<'a> {
    /// The report on `a` against `b` from their comparison `cmp`; `all` lists every pair in
    /// the terminal table.
    pub fn new(a: &'a Dump, b: &'a Dump, cmp: Comparison, all: bool) -> CompareReport<'a> {
        let diverged = cmp.pairs.iter().filter(|p| p.diverged()).count();
        let first = cmp.first_divergent.map(|i| {
            let p = &cmp.pairs[i];
            FirstDivergent {
                pair: i,
                onnx_node: onnx_node(a, p.a).or(onnx_node(b, p.b)),
            }
        });
        let mut listed = Vec::new();
        for (n, p) in cmp.pairs.iter().enumerate() {
            if all || p.diverged() || listed.len() < TABLE_FIRST {
                listed.push(n);
            }
        }
        let noted = (0..cmp.pairs.len())
            .filter(|&n| !cmp.pairs[n].notes.is_empty())
            .collect();
        CompareReport {
            a,
            b,
            diverged,
            first,
            within: within_nodes(&cmp),
            within_tensors: cmp.within_a.len() + cmp.within_b.len(),
            listed,
            noted,
            cmp,
        }
    }

    /// Pairs the terminal table leaves out.
    pub fn hidden(&self) -> usize {
        self.cmp.pairs.len() - self.listed.len()
    }
}

/// The ONNX node tensor `i`'s kernel came from, when its `graphs/*.ir` source row names one.
fn onnx_node(d: &Dump, i: usize) -> Option<String> {
    d.kernels()
        .into_iter()
        .find(|k| k.tensors.contains(&i))
        .and_then(|k| k.onnx.map(|o| o.node))
}

/// The ONNX nodes with tensors inside them, in A's order.
fn within_nodes(cmp: &Comparison) -> Vec<WithinNode> {
    let mut out: Vec<WithinNode> = Vec::new();
    for (side, list) in [(0, &cmp.within_a), (1, &cmp.within_b)] {
        for (_, node) in list {
            let at = match out.iter().position(|w| w.node == *node) {
                Some(at) => at,
                None => {
                    out.push(WithinNode {
                        node: node.clone(),
                        in_a: 0,
                        in_b: 0,
                    });
                    out.len() - 1
                }
            };
            if side == 0 {
                out[at].in_a += 1;
            } else {
                out[at].in_b += 1;
            }
        }
    }
    out
}
