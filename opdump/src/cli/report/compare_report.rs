//! [`CompareReport`]: everything `opdump compare` found, built once by the command and read by
//! every renderer (`text`, `json`, `csv`, `html`), none of which derives anything again.

use dump_read::{Dump, KernelRef, compare::Comparison};

use super::shade::{KernelWorst, compare_worst, rel_error};

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
    /// How many pairs could not be read (a file of each could not be opened or read).
    pub unreadable: usize,
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
    /// Per pair: its largest relative error ([`rel_error`]; NaN when none is known).
    pub pair_rel: Vec<f64>,
    /// A's kernels, in run order (the graph view's nodes).
    pub kernels: Vec<KernelRef>,
    /// Per kernel of `kernels`: its worst pair and shade (`None` without a pair).
    pub kernel_worst: Vec<Option<KernelWorst>>,
}

impl<'a> CompareReport<'a> {
    /// The report on `a` against `b` from their comparison `cmp`; `all` lists every pair in
    /// the terminal table.
    pub fn new(a: &'a Dump, b: &'a Dump, cmp: Comparison, all: bool) -> CompareReport<'a> {
        let diverged = cmp.pairs.iter().filter(|p| p.diverged()).count();
        let unreadable = cmp.pairs.iter().filter(|p| p.unreadable()).count();
        let first = cmp.first_divergent.map(|i| {
            let p = &cmp.pairs[i];
            FirstDivergent {
                pair: i,
                onnx_node: onnx_node(a, p.a).or(onnx_node(b, p.b)),
            }
        });
        let mut listed = Vec::new();
        for (n, p) in cmp.pairs.iter().enumerate() {
            if all || p.diverged() || p.unreadable() || listed.len() < TABLE_FIRST {
                listed.push(n);
            }
        }
        let noted = (0..cmp.pairs.len())
            .filter(|&n| !cmp.pairs[n].notes.is_empty())
            .collect();
        let pair_rel: Vec<f64> = cmp.pairs.iter().map(rel_error).collect();
        let kernels = a.kernels();
        let kernel_worst = compare_worst(
            a,
            &kernels,
            &cmp.pairs,
            &pair_rel,
            first.as_ref().map(|f| f.pair),
        );
        CompareReport {
            a,
            b,
            diverged,
            unreadable,
            first,
            pair_rel,
            kernels,
            kernel_worst,
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

#[cfg(test)]
mod tests {
    use dump_read::compare::{Tolerances, compare};

    use super::*;
    use crate::cli::report::{json, shade::Shade, test_dumps as td, text};

    /// A and B with 25 one-element kernels; B's values differ at `diverge` (the folder is
    /// removed once both are read).
    fn dumps(tag: &str, diverge: &[usize]) -> (Dump, Dump) {
        let root = td::fresh(tag);
        let a = td::stat_dump(
            &root.join("a"),
            &(0..25).map(|i| td::add_row(i, 1.0)).collect::<Vec<_>>(),
        );
        let b = td::stat_dump(
            &root.join("b"),
            &(0..25)
                .map(|i| td::add_row(i, if diverge.contains(&i) { 2.0 } else { 1.0 }))
                .collect::<Vec<_>>(),
        );
        let both = (Dump::open(&a).unwrap(), Dump::open(&b).unwrap());
        let _ = std::fs::remove_dir_all(&root);
        both
    }

    fn build<'a>(a: &'a Dump, b: &'a Dump, all: bool) -> CompareReport<'a> {
        let cmp = compare(a, b, &Tolerances::default(), 1, &|_, _| {});
        CompareReport::new(a, b, cmp, all)
    }

    #[test]
    fn the_table_lists_the_first_20_and_every_divergent_pair() {
        let (a, b) = dumps("listed", &[22, 3]);
        let r = build(&a, &b, false);
        assert_eq!(r.cmp.pairs.len(), 25);
        assert_eq!(r.diverged, 2);
        let first = r.first.as_ref().expect("a divergent pair");
        assert_eq!(
            a.tensors[r.cmp.pairs[first.pair].a].id.op_name,
            "Default_Add-op3"
        );
        assert_eq!(first.onnx_node, None, "no graphs/*.ir, no ONNX node");
        let want: Vec<usize> = (0..20).chain([22]).collect();
        assert_eq!(r.listed, want);
        assert_eq!(r.hidden(), 4);
        assert!(r.noted.is_empty() && r.within.is_empty() && r.within_tensors == 0);

        // Each kernel's shade, judged once: the first divergent red, the other divergent one
        // bad, the rest close (equal values).
        assert_eq!(r.kernels.len(), 25);
        assert_eq!(r.pair_rel.len(), 25);
        let shades: Vec<Shade> = r
            .kernel_worst
            .iter()
            .map(|w| w.expect("every kernel has a pair").shade)
            .collect();
        for (n, s) in shades.iter().enumerate() {
            let want = match n {
                3 => Shade::First,
                22 => Shade::Bad,
                _ => Shade::Close,
            };
            assert_eq!(*s, want, "kernel {n}");
        }
        let w3 = r.kernel_worst[3].unwrap();
        assert_eq!((w3.pair, w3.rel), (first.pair, r.pair_rel[first.pair]));
        assert!(r.pair_rel[first.pair] > 0.4, "2 against 1");
        assert_eq!(r.pair_rel[0], 0.0);
        // --json lists them.
        let mut out = Vec::new();
        json::compare(&r, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let ks = v["kernel_shades"].as_array().unwrap();
        assert_eq!(ks.len(), 25);
        assert_eq!(ks[3]["shade"], "first");
        assert_eq!(ks[3]["pair"], first.pair);
        assert_eq!(ks[3]["op_name"], "Default_Add-op3");
        assert_eq!(ks[22]["shade"], "bad");
        assert_eq!(ks[0]["shade"], "close");

        let (a, b) = dumps("listed-all", &[22]);
        let r = build(&a, &b, true);
        assert_eq!(r.listed, (0..25).collect::<Vec<_>>());
        assert_eq!(r.hidden(), 0);
    }

    #[test]
    fn the_text_renderer_shows_what_the_report_lists_and_nothing_else() {
        let (a, b) = dumps("render", &[22]);
        let mut r = build(&a, &b, false);
        // The renderer reads `listed` as it stands: it does not choose the rows again.
        r.listed = vec![7, 22];
        let mut out = Vec::new();
        text::compare(&r, &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        let rows: Vec<&str> = s
            .lines()
            .filter(|l| l.contains("  Default_Add-op"))
            .collect();
        assert_eq!(rows.len(), 2, "{s}");
        assert!(rows[0].trim_start().starts_with("7 exact   name"), "{s}");
        assert!(rows[1].ends_with("Default_Add-op22  DIVERGED"), "{s}");
        assert!(
            s.contains("  ... 23 more pairs within tolerance (--all lists them)"),
            "{s}"
        );
        assert!(s.contains("first divergent operator: rank 0 iteration 0 graph 0: Add Default_Add-op22 output.0"), "{s}");
    }

    #[test]
    fn tensors_inside_a_decomposed_onnx_node_are_counted_per_node() {
        let root = td::fresh("within");
        let (a, b) = (root.join("a"), root.join("b"));
        // A: tract turned ONNX node fc1 into EinSum + Add; B ran it as one Gemm.
        td::graph(
            &a,
            "  %0(h) = EinSum(%para1_x)\n      # Fullname with scope: (Default/fc1-ab/EinSum-op0)\n      # In file tract node #10 \"fc1.ab\" (EinSum); onnx node \"fc1\" decomposed; outputs none\n  %1(y) = Add(%0)\n      # Fullname with scope: (Default/fc1/Add-op1)\n      # In file tract node #13 \"fc1\" (Add); onnx node \"fc1\" decomposed; outputs 0->0\n",
        );
        td::npy(&a, "EinSum", "fc1-ab_EinSum-op0", 10, &[1.0, 2.0]);
        td::npy(&a, "Add", "fc1_Add-op1", 11, &[2.0, 3.0]);
        td::graph(
            &b,
            "  %0(y) = Gemm(%para1_x)\n      # Fullname with scope: (Default/fc1/Gemm-op0)\n      # In file onnx node #0 \"fc1\" (Gemm)\n",
        );
        td::npy(&b, "Gemm", "fc1_Gemm-op0", 10, &[2.0, 3.5]);
        let (a, b) = (Dump::open(&a).unwrap(), Dump::open(&b).unwrap());
        let r = build(&a, &b, false);
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(r.cmp.pairs.len(), 1);
        assert_eq!(r.within_tensors, 1);
        assert_eq!(r.within.len(), 1);
        assert_eq!(
            (
                r.within[0].node.as_str(),
                r.within[0].in_a,
                r.within[0].in_b
            ),
            ("fc1", 1, 0)
        );
        let first = r.first.as_ref().expect("3.5 vs 3 diverges");
        assert_eq!(first.onnx_node.as_deref(), Some("fc1"));
    }
}
