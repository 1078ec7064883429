//! `opdump compare A B [--json] [--csv FILE] [--html FILE] [--rtol R --atol T] [--tol DTYPE=R,T] [--mapping FILE]`:
//! where two dumps start to differ.
//!
//! Tensors pair by (rank, iteration, op name, IO, slot); kernels left over pair by the ONNX
//! node their `graphs/*.ir` source row names (`node`: where one runtime decomposed the node,
//! as tract turns Gemm into EinSum + Add, only the node's outputs pair; the decomposition's
//! helpers and the node's inputs are listed as "inside ONNX node N", not as unpaired), then
//! by the value name of their node in `graphs/*.ir` (an ONNX value name), then by position in
//! the run order when their op types agree (the `rule` column says which: `name`, `node`,
//! `value`, `order`). A `--mapping` file's names pair first (`mapping`). Across frameworks (an
//! msprobe dump or module-keyed arrays against ONNX nodes) the FX call counter (`counter`),
//! the torch module scope (`scope`) and the op kind in run order (`order`) pair the calls'
//! outputs with the nodes', a BatchNorm folded into its convolution pairs as `fused` (the
//! convolution's call listed as fused into the node), and unpaired tensors list their nearest
//! candidates (docs/msprobe.md). Per pair: cosine
//! similarity, max absolute and relative error, the shares of elements with a relative error
//! above 0.001 and 0.005, max ULP distance, and both sides' statistics; statistic-only dumps
//! compare max/min/avg/l2norm, md5-only rows compare digests. A pair diverges when an element
//! is outside `|a - b| <= atol + rtol * |b|` (B is the reference), when NaN/Inf positions
//! differ, or when shapes or dtypes differ. The headline is the first divergent operator in
//! A's run order.
//!
//! Either side may be MindSpore's or opdump's layout, an msprobe dump (`dump.json` with
//! `.pt`/`.npy` tensors, or statistics only; its `md5`, a CRC-32, compared as a digest), an
//! `.npz` of reference arrays, a directory of `NAME.npy` or Polygraphy's `--save-outputs`
//! JSON (each array named by the ONNX value
//! it holds, paired by the `value` rule).
//!
//! Default tolerances: rtol float64 1e-7, float32 1e-4, float16 1e-3, bfloat16 8e-3; atol
//! scales with the reference tensor, `atol = rtol / 10 * max(|max B|, |min B|)` (so rounding
//! in a large tensor is not a divergence and a 1% change of a tiny one is), unless `--atol` or
//! a `--tol` for the dtype fixes it; where the reference has no statistic.csv row the fixed atol is
//! float64 1e-10, float32 1e-6, float16 and bfloat16 1e-5; integers and bool exact. Tensors whose
//! shapes differ only in dimensions of size 1 (`[1,1,384]` and `[384]`) are compared by value,
//! with a note.
//!
//! `--csv` columns (one row per pair): `rank,iteration,graph,op_type,op_name,io,slot,b_op_name,
//! rule,dtype,shape,kind,diverged,cosine,max_abs_error,max_rel_error,ratio_over_0.001,
//! ratio_over_0.005,not_close,max_ulp,nonfinite_mismatch,a_max,a_min,a_avg,a_l2norm,b_max,
//! b_min,b_avg,b_l2norm,reason`.
//!
//! Exit code: 0 when every pair is within tolerance, 1 when a divergence was found, 2 on an
//! error (a dump that cannot be read, bad arguments, an output file that cannot be written).

use std::{io::Write, path::PathBuf};

use dump_core::{DType, compare::Tolerance};
use dump_read::{
    Dump,
    compare::{Comparison, Mapping, PairOutcome, PairResult, PairRule, Tolerances, compare_with},
};
use serde_json::{Map, Value, json};

use super::{
    outcome::{Failure, Outcome, Verdict},
    report::{
        self, g,
        html::{self, Plot, Series},
        json as j, opt_g,
        progress::Progress,
        who,
    },
};

/// Arguments of `opdump compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The first dump (the run under test): MindSpore's or opdump's layout, an msprobe dump
    /// (step{N}/rank{R}|proc{pid}/dump.json, .pt or .npy tensors), CANN dump files, an .npz of
    /// reference arrays, a directory of NAME.npy, Polygraphy's --save-outputs JSON, or a device
    /// agent's saved frame stream.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The second dump (the reference: relative errors divide by its values), any layout A
    /// takes. Reference arrays (.npz, NAME.npy, Polygraphy JSON) pair with A's kernels by the ONNX value name
    /// A's graphs/*.ir gives them (rule `value`).
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Print one JSON object (keys pairs, matched, only_in_a, only_in_b, within_a, within_b,
    /// fused_a, fused_b, nearest_a, nearest_b, first_divergent).
    #[arg(long)]
    pub json: bool,
    /// Also write one csv row per pair to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write a self-contained HTML page with plots to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Relative tolerance for every dtype without a --tol (default: per dtype; --atol stays
    /// per dtype unless given too).
    #[arg(long, value_name = "R")]
    pub rtol: Option<f64>,
    /// Absolute tolerance for every dtype without a --tol (default: scales with each tensor,
    /// rtol/10 times the reference's largest |value| from its statistic.csv row).
    #[arg(long, value_name = "T")]
    pub atol: Option<f64>,
    /// Tolerance of one dtype, repeatable: `float16=1e-2,1e-4` (rtol,atol).
    #[arg(long = "tol", value_name = "DTYPE=R,T")]
    pub tol: Vec<String>,
    /// Table: list every pair (default: the divergent ones and the first 20).
    #[arg(long)]
    pub all: bool,
    /// Worker threads (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// A mapping file (JSON, or YAML when named .yaml/.yml) of A's names to B's, tried before
    /// the automatic rules: {"exact": {"A name": "B name"}, "prefix": {"A prefix": "B
    /// prefix"}, "regex": {"A regex": "B name with $1"}}. B's name is an op name, an ONNX
    /// node, an ONNX value or an FX call (conv2d_5). See docs/msprobe.md.
    #[arg(long, value_name = "FILE")]
    pub mapping: Option<PathBuf>,
}

fn tolerances(args: &Args) -> Result<Tolerances, String> {
    let mut t = Tolerances::default();
    let check = |what: &str, v: f64| {
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(format!("{what} is {v}: expected a finite number >= 0"))
        }
    };
    t.set_all(
        args.rtol.map(|v| check("--rtol", v)).transpose()?,
        args.atol.map(|v| check("--atol", v)).transpose()?,
    );
    for spec in &args.tol {
        let bad = || format!("--tol {spec:?}: expected DTYPE=RTOL,ATOL such as float16=1e-2,1e-4");
        let (d, v) = spec.split_once('=').ok_or_else(bad)?;
        let dtype = DType::from_name(d).map_err(|_| {
            format!(
                "--tol {spec:?}: unknown dtype {d:?} (allowed: {})",
                DType::ALL
                    .iter()
                    .map(|d| d.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let (r, a) = v.split_once(',').ok_or_else(bad)?;
        let r: f64 = r.trim().parse().map_err(|_| bad())?;
        let a: f64 = a.trim().parse().map_err(|_| bad())?;
        t.set(
            dtype,
            Tolerance {
                rtol: check("rtol", r)?,
                atol: check("atol", a)?,
            },
        );
    }
    Ok(t)
}

/// Runs `compare`: the report on `out` (or `--csv`/`--html` files), the summary on `err`;
/// [`Verdict::Found`] when a pair diverges.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Outcome {
    if args.csv.is_some() || args.html.is_some() {
        report::output::install_interrupt_handler();
    }
    let tol = tolerances(args).map_err(Failure::Invalid)?;
    let mapping = match &args.mapping {
        Some(p) => Some(Mapping::load(p).map_err(|e| Failure::Invalid(format!("--mapping: {e}")))?),
        None => None,
    };
    // Both sides are opened before either error is returned, so a user sees both at once.
    let (a, b) = match (Dump::open(&args.a), Dump::open(&args.b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), Ok(_)) | (Ok(_), Err(e)) => return Err(Failure::Invalid(e.to_string())),
        (Err(ea), Err(eb)) => return Err(Failure::Invalid(format!("{ea}\n{eb}"))),
    };
    for (side, d) in [("A", &a), ("B", &b)] {
        for p in &d.problems {
            let _ = writeln!(err, "warning: {side}: {}: {}", p.path.display(), p.message);
        }
    }
    let bar = Progress::new("compare", 0, !args.json);
    let cmp = compare_with(
        &a,
        &b,
        &tol,
        mapping.as_ref(),
        super::inspect::threads(args.threads),
        &|d, total| {
            if d == 1 {
                bar.set_len(total);
            }
            bar.set(d)
        },
    );
    bar.finish();
    if args.json {
        let _ = writeln!(out, "{:#}", to_json(&a, &b, &cmp));
    } else {
        let _ = out.write_all(table(&a, &b, &cmp, args.all).as_bytes());
    }
    if let Some(path) = &args.csv
        && let Err(e) = report::output::write_atomic(path, csv(&a, &b, &cmp).as_bytes())
    {
        return Err(Failure::Invalid(format!("cannot write the csv file: {e}")));
    }
    if let Some(path) = &args.html
        && let Err(e) = report::output::write_atomic(path, page(&a, &b, &cmp).as_bytes())
    {
        return Err(Failure::Invalid(format!("cannot write the HTML page: {e}")));
    }
    let diverged = cmp.pairs.iter().filter(|p| p.diverged()).count();
    let _ = writeln!(
        err,
        "compared {} pairs ({} only in A, {} only in B{}): {}",
        cmp.pairs.len(),
        cmp.only_in_a.len(),
        cmp.only_in_b.len(),
        within_count(&cmp),
        match cmp.first_divergent {
            Some(i) => format!(
                "{diverged} diverge; first divergent: {}",
                who(&a, cmp.pairs[i].a)
            ),
            None => "all within tolerance".into(),
        }
    );
    if cmp.first_divergent.is_some() {
        Ok(Verdict::Found)
    } else {
        Ok(Verdict::Clean)
    }
}

/// cosine, max abs, max rel, >0.001, >0.005, ulp as table cells.
fn metric_cells(p: &PairResult) -> [String; 6] {
    match &p.outcome {
        PairOutcome::Elements(m) => [
            g(m.cosine()),
            g(m.max_abs),
            g(m.max_rel),
            g(m.ratio_over_1e3()),
            g(m.ratio_over_5e3()),
            m.max_ulp.to_string(),
        ],
        PairOutcome::Statistics { rel } => [
            "-".into(),
            "-".into(),
            opt_g(rel.iter().flatten().copied().reduce(f64::max)),
            "-".into(),
            "-".into(),
            "-".into(),
        ],
        PairOutcome::Digest { equal } => [
            if *equal { "md5 equal" } else { "md5 differs" }.into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ],
        PairOutcome::Mismatch(_) => std::array::from_fn(|_| "-".into()),
    }
}

/// `, N inside ONNX nodes the dumps compute differently` when the node rule left tensors within nodes.
fn within_count(cmp: &Comparison) -> String {
    let n = cmp.within_a.len() + cmp.within_b.len();
    let f = cmp.fused_a.len() + cmp.fused_b.len();
    let mut s = String::new();
    if n > 0 {
        s += &format!(", {n} inside ONNX nodes the dumps compute differently");
    }
    if f > 0 {
        s += &format!(", {f} fused into an ONNX node");
    }
    s
}

/// The ONNX nodes with tensors inside them: `(node, count in A, count in B)`, in A's order.
fn within_nodes(cmp: &Comparison) -> Vec<(&str, usize, usize)> {
    let mut out: Vec<(&str, usize, usize)> = Vec::new();
    for (side, list) in [(0, &cmp.within_a), (1, &cmp.within_b)] {
        for (_, node) in list {
            let at = match out.iter().position(|(n, ..)| *n == node.as_str()) {
                Some(at) => at,
                None => {
                    out.push((node.as_str(), 0, 0));
                    out.len() - 1
                }
            };
            if side == 0 {
                out[at].1 += 1;
            } else {
                out[at].2 += 1;
            }
        }
    }
    out
}

fn table(a: &Dump, b: &Dump, cmp: &Comparison, all: bool) -> String {
    let mut s = format!(
        "A: {} ({} tensors)\nB: {} ({} tensors)\n{} pairs, {} only in A, {} only in B{}\n\n",
        a.root.display(),
        a.tensors.len(),
        b.root.display(),
        b.tensors.len(),
        cmp.pairs.len(),
        cmp.only_in_a.len(),
        cmp.only_in_b.len(),
        within_count(cmp),
    );
    s += "first divergent operator: ";
    match cmp.first_divergent {
        None => s += "none (every pair is within tolerance)\n",
        Some(i) => {
            let p = &cmp.pairs[i];
            s += &format!("{}\n", who(a, p.a));
            if let Some(node) = onnx_node(a, p.a).or(onnx_node(b, p.b)) {
                s += &format!("  ONNX node {node}\n");
            }
            if let Some(m) = torch_module(a, p.a).or(torch_module(b, p.b)) {
                s += &format!("  torch module {m}\n");
            }
            if p.rule != PairRule::Name {
                s += &format!(
                    "  paired ({}) with B's {} {}\n",
                    p.rule.as_str(),
                    b.tensors[p.b].id.op_name,
                    b.tensors[p.b].io_slot()
                );
            }
            s += &format!("  {}\n", super::report::reasons(p));
        }
    }
    s += &format!(
        "\n{:>5} {:<5} {:>4} {:<14} {:<9} {:>10} {:>11} {:>11} {:>9} {:>9} {:>10}  op\n",
        "#",
        "rule",
        "iter",
        "op_type",
        "io",
        "cosine",
        "max_abs",
        "max_rel",
        ">0.001",
        ">0.005",
        "max_ulp"
    );
    let mut shown = 0;
    let mut hidden = 0;
    for (n, p) in cmp.pairs.iter().enumerate() {
        if !(all || p.diverged() || shown < 20) {
            hidden += 1;
            continue;
        }
        shown += 1;
        let t = &a.tensors[p.a];
        let c = metric_cells(p);
        s += &format!(
            "{:>5} {:<5} {:>4} {:<14} {:<9} {:>10} {:>11} {:>11} {:>9} {:>9} {:>10}  {}{}\n",
            n,
            p.rule.as_str(),
            t.iteration,
            t.id.op_type,
            t.io_slot(),
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            c[5],
            t.id.op_name,
            if p.diverged() { "  DIVERGED" } else { "" }
        );
    }
    if hidden > 0 {
        s += &format!("  ... {hidden} more pairs within tolerance (--all lists them)\n");
    }
    let noted: Vec<(usize, &PairResult)> = cmp
        .pairs
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.notes.is_empty())
        .collect();
    if !noted.is_empty() {
        s += &format!(
            "
notes ({} pairs):\n",
            noted.len()
        );
        for (n, p) in noted.iter().take(10) {
            for note in &p.notes {
                s += &format!(
                    "  #{n} {}: {}\n",
                    a.tensors[p.a].id.op_name,
                    super::report::note(note)
                );
            }
        }
        if noted.len() > 10 {
            s += &format!("  ... {} more (--json lists them)\n", noted.len() - 10);
        }
    }
    let within = within_nodes(cmp);
    if !within.is_empty() {
        s += &format!(
            "\ninside ONNX nodes the dumps compute differently ({} nodes: a decomposition's helpers and the inputs are not paired, the node's outputs are):\n",
            within.len()
        );
        for (node, na, nb) in within.iter().take(20) {
            s += &format!("  {node}: {na} tensors in A, {nb} in B\n");
        }
        if within.len() > 20 {
            s += &format!("  ... {} more (--json lists them)\n", within.len() - 20);
        }
    }
    for (side, d, list) in [("A", a, &cmp.fused_a), ("B", b, &cmp.fused_b)] {
        if !list.is_empty() {
            s += &format!(
                "\nfused in {side} ({}: computed inside an ONNX node that pairs with a later call):\n",
                list.len()
            );
            for (i, node) in list.iter().take(20) {
                s += &format!("  {} -> {node}\n", who(d, *i));
            }
            if list.len() > 20 {
                s += &format!("  ... {} more (--json lists them)\n", list.len() - 20);
            }
        }
    }
    for (side, d, other, list, near) in [
        ("A", a, b, &cmp.only_in_a, &cmp.nearest_a),
        ("B", b, a, &cmp.only_in_b, &cmp.nearest_b),
    ] {
        if !list.is_empty() {
            s += &format!("\nonly in {side} ({}):\n", list.len());
            for &i in list.iter().take(20) {
                s += &format!("  {}\n", who(d, i));
                if let Some((_, c)) = near.iter().find(|(n, _)| *n == i) {
                    let names: Vec<String> = c.iter().map(|&j| who(other, j)).collect();
                    s += &format!("      nearest: {}\n", names.join("; "));
                }
            }
            if list.len() > 20 {
                s += &format!("  ... {} more\n", list.len() - 20);
            }
        }
    }
    s
}

fn to_json(a: &Dump, b: &Dump, cmp: &Comparison) -> Value {
    let first = match cmp.first_divergent {
        None => Value::Null,
        Some(i) => {
            let p = &cmp.pairs[i];
            let mut m = Map::new();
            j::tensor_id_into(&mut m, a, p.a);
            m.insert("b_op_name".into(), json!(b.tensors[p.b].id.op_name));
            m.insert(
                "onnx_node".into(),
                json!(onnx_node(a, p.a).or(onnx_node(b, p.b))),
            );
            m.insert("rule".into(), json!(p.rule.as_str()));
            m.insert(
                "torch_module".into(),
                json!(torch_module(a, p.a).or(torch_module(b, p.b))),
            );
            m.insert(
                "reasons".into(),
                json!(
                    p.reasons
                        .iter()
                        .map(super::report::reason)
                        .collect::<Vec<_>>()
                ),
            );
            if let PairOutcome::Elements(mm) = &p.outcome {
                m.insert("metrics".into(), j::metrics(mm));
            }
            m.insert("stats_a".into(), j::stats(&p.stats_a));
            m.insert("stats_b".into(), j::stats(&p.stats_b));
            Value::Object(m)
        }
    };
    json!({
        "a": a.root.display().to_string(),
        "b": b.root.display().to_string(),
        "matched": cmp.pairs.len(),
        "diverged": cmp.pairs.iter().filter(|p| p.diverged()).count(),
        "first_divergent": first,
        "only_in_a": cmp.only_in_a.iter().map(|&i| j::tensor(a, i)).collect::<Vec<_>>(),
        "only_in_b": cmp.only_in_b.iter().map(|&i| j::tensor(b, i)).collect::<Vec<_>>(),
        "within_a": within_json(a, &cmp.within_a),
        "within_b": within_json(b, &cmp.within_b),
        "fused_a": within_json(a, &cmp.fused_a),
        "fused_b": within_json(b, &cmp.fused_b),
        "nearest_a": nearest_json(a, b, &cmp.nearest_a),
        "nearest_b": nearest_json(b, a, &cmp.nearest_b),
        "pairs": cmp.pairs.iter().map(|p| j::pair(a, b, p)).collect::<Vec<_>>(),
    })
}

/// The ONNX node tensor `i`'s kernel came from, when its `graphs/*.ir` source row names one.
fn onnx_node(d: &Dump, i: usize) -> Option<String> {
    d.kernels()
        .into_iter()
        .find(|k| k.tensors.contains(&i))
        .and_then(|k| k.onnx.map(|o| o.node))
}

/// The torch module tensor `i` belongs to: an msprobe module call's path, or the scope its
/// ONNX node records (`block2.bn2 (BatchNorm2d), fused`) or its TorchScript name gives.
fn torch_module(d: &Dump, i: usize) -> Option<String> {
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

/// Tensors inside decomposed ONNX nodes: each tensor's identity with `onnx_node`.
fn within_json(d: &Dump, list: &[(usize, String)]) -> Vec<Value> {
    list.iter()
        .map(|(i, node)| {
            let mut t = j::tensor(d, *i);
            if let Value::Object(m) = &mut t {
                m.insert("onnx_node".into(), json!(node));
            }
            t
        })
        .collect()
}

/// Unpaired tensors with their nearest candidates: `{"tensor": ..., "candidates": [...]}`.
fn nearest_json(d: &Dump, other: &Dump, list: &[(usize, Vec<usize>)]) -> Vec<Value> {
    list.iter()
        .map(|(i, c)| {
            json!({
                "tensor": j::tensor(d, *i),
                "candidates": c.iter().map(|&k| j::tensor(other, k)).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// The `--csv` header (stable; documented in the module docs and README).
pub const CSV_HEADER: &str = "rank,iteration,graph,op_type,op_name,io,slot,b_op_name,rule,dtype,shape,kind,diverged,cosine,max_abs_error,max_rel_error,ratio_over_0.001,ratio_over_0.005,not_close,max_ulp,nonfinite_mismatch,a_max,a_min,a_avg,a_l2norm,b_max,b_min,b_avg,b_l2norm,reason";

/// A csv field, quoted when it holds a comma, quote or newline.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn csv(a: &Dump, b: &Dump, cmp: &Comparison) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for p in &cmp.pairs {
        let t = &a.tensors[p.a];
        let (kind, m) = match &p.outcome {
            PairOutcome::Elements(m) => ("elements", Some(m)),
            PairOutcome::Statistics { .. } => ("statistics", None),
            PairOutcome::Digest { .. } => ("digest", None),
            PairOutcome::Mismatch(_) => ("mismatch", None),
        };
        let mf = |f: fn(&dump_core::compare::PairMetrics) -> String| m.map(f).unwrap_or_default();
        let st = |v: Option<f64>| v.map(g).unwrap_or_default();
        let cells = [
            t.rank.to_string(),
            t.iteration.to_string(),
            t.graph.to_string(),
            t.id.op_type.clone(),
            t.id.op_name.clone(),
            t.id.io.as_str().into(),
            t.id.slot.to_string(),
            b.tensors[p.b].id.op_name.clone(),
            p.rule.as_str().into(),
            t.dtype.name().into(),
            format!("{:?}", t.shape),
            kind.into(),
            p.diverged().to_string(),
            mf(|m| g(m.cosine())),
            mf(|m| g(m.max_abs)),
            mf(|m| g(m.max_rel)),
            mf(|m| g(m.ratio_over_1e3())),
            mf(|m| g(m.ratio_over_5e3())),
            mf(|m| m.not_close.to_string()),
            mf(|m| m.max_ulp.to_string()),
            mf(|m| m.nonfinite_mismatch.to_string()),
            st(p.stats_a.max),
            st(p.stats_a.min),
            st(p.stats_a.avg),
            st(p.stats_a.l2norm),
            st(p.stats_b.max),
            st(p.stats_b.min),
            st(p.stats_b.avg),
            st(p.stats_b.l2norm),
            super::report::reasons(p),
        ];
        s += &cells.iter().map(|c| field(c)).collect::<Vec<_>>().join(",");
        s.push('\n');
    }
    s
}

/// The HTML page: per-pair cosine, max relative error and both runs' l2norm along A's run
/// order, the first divergent pair marked, and a sortable table of every pair.
fn page(a: &Dump, b: &Dump, cmp: &Comparison) -> String {
    let metric = |f: fn(&dump_core::compare::PairMetrics) -> f64| -> Vec<f64> {
        cmp.pairs
            .iter()
            .map(|p| match &p.outcome {
                PairOutcome::Elements(m) => f(m),
                _ => f64::NAN,
            })
            .collect()
    };
    let mark = cmp.first_divergent.map(|i| {
        (
            i,
            format!("first divergent: {}", a.tensors[cmp.pairs[i].a].id.op_name),
        )
    });
    let plots = [
        Plot {
            title: "both runs' l2norm per pair (A's run order, log scale)".into(),
            series: vec![
                Series {
                    name: "A l2norm".into(),
                    values: cmp
                        .pairs
                        .iter()
                        .map(|p| p.stats_a.l2norm.unwrap_or(f64::NAN))
                        .collect(),
                    color: "#1f5fbf",
                },
                Series {
                    name: "B l2norm".into(),
                    values: cmp
                        .pairs
                        .iter()
                        .map(|p| p.stats_b.l2norm.unwrap_or(f64::NAN))
                        .collect(),
                    color: "#e08a00",
                },
            ],
            mark: mark.clone(),
            log: true,
        },
        Plot {
            title: "max relative error per pair (log scale)".into(),
            series: vec![Series {
                name: "max rel error".into(),
                values: metric(|m| m.max_rel),
                color: "#b0302a",
            }],
            mark: mark.clone(),
            log: true,
        },
        Plot {
            title: "cosine similarity per pair".into(),
            series: vec![Series {
                name: "cosine".into(),
                values: metric(|m| m.cosine()),
                color: "#2a8f2a",
            }],
            mark,
            log: false,
        },
    ];
    let head = [
        "#",
        "rule",
        "iteration",
        "op_type",
        "op_name",
        "io",
        "cosine",
        "max_abs",
        "max_rel",
        ">0.001",
        ">0.005",
        "max_ulp",
        "diverged",
    ];
    let rows: Vec<Vec<String>> = cmp
        .pairs
        .iter()
        .enumerate()
        .map(|(n, p)| {
            let t = &a.tensors[p.a];
            let c = metric_cells(p);
            vec![
                n.to_string(),
                p.rule.as_str().into(),
                t.iteration.to_string(),
                t.id.op_type.clone(),
                t.id.op_name.clone(),
                t.io_slot(),
                c[0].clone(),
                c[1].clone(),
                c[2].clone(),
                c[3].clone(),
                c[4].clone(),
                c[5].clone(),
                if p.diverged() {
                    super::report::reasons(p)
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    let summary = format!(
        "A: {} &nbsp; B: {}<br>{} pairs, {} only in A, {} only in B{}<br>{}",
        html::esc(&a.root.display().to_string()),
        html::esc(&b.root.display().to_string()),
        cmp.pairs.len(),
        cmp.only_in_a.len(),
        cmp.only_in_b.len(),
        within_count(cmp),
        match cmp.first_divergent {
            Some(i) => format!(
                "<b>First divergent operator:</b> {}",
                html::esc(&who(a, cmp.pairs[i].a))
            ),
            None => "Every pair is within tolerance.".into(),
        }
    );
    let _ = b;
    html::page(
        "opdump compare",
        &summary,
        &plots,
        &head,
        &rows,
        cmp.first_divergent,
    )
}
