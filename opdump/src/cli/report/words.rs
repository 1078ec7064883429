//! The report's wordings that more than one renderer uses: a tensor's identity, why a pair
//! diverges, how it was compared, what a kernel is in a training step, where the first
//! non-finite tensor comes from.

use dump_read::{
    Dump,
    compare::{Divergence, Note, PairResult, PairRule},
    inspect::Origin,
    train::Role,
};

use super::inspect_report::KernelRole;

/// `rank 0 iteration 1 graph 0: ReLU Default_..._ReLU-op0 output.0`: tensor `i` of `dump`.
pub fn who(dump: &Dump, i: usize) -> String {
    let t = &dump.tensors[i];
    format!(
        "rank {} iteration {} graph {}: {} {} {}",
        t.rank,
        t.iteration,
        t.graph,
        t.id.op_type,
        t.id.op_name,
        t.io_slot()
    )
}

/// Why a pair diverges, in words (the terminal table, `--json`, `--csv` and `--html` all use
/// this one wording).
pub fn reason(d: &Divergence) -> String {
    use Divergence as D;
    match d {
        D::DTypes { a, b } => format!("dtypes differ: {a} vs {b}"),
        D::Shapes { a, b } => format!("shapes differ: {a:?} vs {b:?}"),
        D::Unreadable(e) => e.clone(),
        D::NonfinitePositions(n) => format!("NaN/Inf positions differ at {n} elements"),
        D::NotClose {
            not_close,
            count,
            tolerance,
            max_abs,
            max_rel,
        } => format!(
            "{not_close} of {count} elements outside |a-b| <= {:e} + {:e}*|b| (max abs error {max_abs:e}, max rel error {max_rel:e})",
            tolerance.atol, tolerance.rtol
        ),
        D::Statistic { name, a, b } => format!("{name} differs: {a} vs {b}"),
        D::Digests { a, b } => format!("digests differ: {a} vs {b}"),
        D::NothingToCompare => {
            "nothing to compare: no files on both sides, no common statistic or digest".into()
        }
    }
}

/// A note on how a pair was compared, worded.
pub fn note(n: &Note) -> String {
    match n {
        Note::Reshaped { a, b } => {
            format!("shapes {a:?} and {b:?} differ only in dimensions of size 1: compared by value")
        }
        Note::Viewed { a, b } => format!(
            "a flatten or reshape recorded as {a:?} and {b:?}: the same elements in order, \
             compared by value"
        ),
    }
}

/// Every reason of `p`, worded, `; `-separated.
pub fn reasons(p: &PairResult) -> String {
    p.reasons.iter().map(reason).collect::<Vec<_>>().join("; ")
}

/// Where the first non-finite tensor comes from, in words.
pub fn origin_words(o: &Origin) -> String {
    match o {
        Origin::KernelOutput => "an output of this kernel".into(),
        Origin::Parameter => "a graph input or weight (Parameter)".into(),
        Origin::KernelInput { producer: Some(p) } => format!(
            "an input of this kernel, produced by {p} (graphs/*.ir), whose outputs were not \
             dumped or are finite"
        ),
        Origin::KernelInput { producer: None } => "an input of this kernel that no dumped \
             tensor before it explains: a graph input, a weight, a constant, or the output of \
             a kernel that was not dumped"
            .into(),
    }
}

/// What a kernel is in a training step, in words: `a gradient (of parameter conv1_weight)`.
pub fn role_words(k: &KernelRole) -> String {
    let what = match k.role {
        Role::Activation => "a forward activation",
        Role::Gradient => "a gradient",
        Role::Parameter => "a parameter (its value after the step)",
        Role::Optimizer => "the optimizer's update or state",
    };
    match &k.parameter {
        Some(p) if k.role != Role::Parameter => format!("{what} (of parameter {p})"),
        _ => what.to_owned(),
    }
}

/// `, N inside ONNX nodes the dumps compute differently` when the node rule left `n` tensors
/// within nodes (nothing when `n` is 0).
pub fn within_count(n: usize, fused: usize) -> String {
    let mut s = String::new();
    if n > 0 {
        s += &format!(", {n} inside ONNX nodes the dumps compute differently");
    }
    if fused > 0 {
        s += &format!(", {fused} fused into an ONNX node");
    }
    s
}

/// The torch module tensor `i` belongs to: an msprobe module call's path, or the scope its
/// ONNX node records (`block2.bn2 (BatchNorm2d), fused`) or its TorchScript name gives.
pub fn torch_module(d: &dump_read::Dump, i: usize) -> Option<String> {
    let k = d.kernels().into_iter().find(|k| k.tensors.contains(&i))?;
    if let Some(c) = dump_read::compare::cross::parse_call(&k.op_name) {
        return c.module.then(|| format!("{} ({})", c.path, c.what));
    }
    let o = k.onnx?;
    let (scope, _) = o.module_scope()?;
    let mut s = if scope.is_empty() {
        "(top level)".to_owned()
    } else {
        scope
    };
    if let Some(c) = &o.class {
        s += &format!(" ({c})");
    }
    if o.fused {
        s += ", fused";
    }
    Some(s)
}

/// How a pair was formed, in one word: `exact` (the same name on both sides), `fused` (an
/// ONNX node that fuses several calls, paired with the last of them) or `mapped` (every other
/// rule: the same ONNX node or value, run order, a mapping file, a call counter, a module
/// scope). An unpaired tensor is `nearest` when it has candidates, else `unpaired`
/// ([`unpaired_kind`]).
pub fn pairing_kind(rule: PairRule) -> &'static str {
    match rule {
        PairRule::Name => "exact",
        PairRule::Fused => "fused",
        PairRule::Node
        | PairRule::Value
        | PairRule::Order
        | PairRule::Mapping
        | PairRule::Counter
        | PairRule::Scope => "mapped",
    }
}

/// An unpaired tensor's kind: `nearest` when `candidates` it has, else `unpaired`.
pub fn unpaired_kind(candidates: usize) -> &'static str {
    if candidates > 0 {
        "nearest"
    } else {
        "unpaired"
    }
}
