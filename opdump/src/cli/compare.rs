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
//! with a note, and so is the output of a flatten or reshape recorded with another shape of as
//! many elements (MindSpore dumps Flatten's output with its input's shape).
//!
//! `--csv` columns (one row per pair): `rank,iteration,graph,op_type,op_name,io,slot,b_op_name,
//! rule,dtype,shape,kind,diverged,cosine,max_abs_error,max_rel_error,ratio_over_0.001,
//! ratio_over_0.005,not_close,max_ulp,nonfinite_mismatch,a_max,a_min,a_avg,a_l2norm,b_max,
//! b_min,b_avg,b_l2norm,reason`.
//!
//! Exit code: 0 when every pair is within tolerance, 1 when a divergence was found, 2 on an
//! error (a dump that cannot be read, a tensor file of a pair that cannot be read, bad
//! arguments, an output file that cannot be written, or nothing compared: no pair at all, as
//! when one side holds no readable tensor; the report is still printed and written). An error
//! outranks a divergence, as `diff`'s trouble does.

use std::{io::Write, path::PathBuf};

use dump_core::{DType, compare::Tolerance};
use dump_read::{
    Dump,
    compare::{Divergence, Mapping, Tolerances, compare_with},
};

use super::{
    outcome::{Failure, Outcome, Verdict},
    report::{self, compare_report::CompareReport, csv, html, json, progress::Progress, text},
};

/// The pairs with a file that could not be read (truncated, changed or removed since the
/// dump was listed), as an error: trouble outranks a divergence, as `diff` exits 2 over 1, so a
/// script never takes a dump it could not read for one that merely differs. `None` when every
/// pair was read. The report, already printed and written, lists every such pair.
fn unreadable_pairs(r: &CompareReport) -> Option<String> {
    const SHOWN: usize = 5;
    let errors: Vec<&str> = r
        .cmp
        .pairs
        .iter()
        .flat_map(|p| &p.reasons)
        .filter_map(|d| match d {
            Divergence::Unreadable(e) => Some(e.as_str()),
            _ => None,
        })
        .collect();
    if errors.is_empty() {
        return None;
    }
    let n = errors.len();
    let mut m = format!(
        "{n} pair{} could not be compared: a file of {} could not be read (the report lists {})",
        if n == 1 { "" } else { "s" },
        if n == 1 { "it" } else { "each" },
        if n == 1 { "it" } else { "them all" },
    );
    for e in errors.iter().take(SHOWN) {
        m.push('\n');
        m.push_str(e);
    }
    if n > SHOWN {
        m.push_str(&format!("\nand {} more", n - SHOWN));
    }
    Some(m)
}

/// Why a compare with no pair is an error, not "every pair within tolerance": which side has
/// no readable tensor, or that the two sides have tensors but none pairs.
fn nothing_compared(a: &Dump, b: &Dump) -> String {
    let side = |name: &str, d: &Dump| {
        let why = if d.problems.is_empty() {
            String::new()
        } else {
            format!(", {} problems listed above", d.problems.len())
        };
        format!(
            "{name} ({}) holds {} readable tensors{why}",
            d.root.display(),
            d.tensors.len()
        )
    };
    let hint = if a.tensors.is_empty() || b.tensors.is_empty() {
        "a dump with no readable tensor cannot be compared"
    } else {
        "no tensor of A pairs with one of B (see `only in A`/`only in B` and their nearest \
         candidates; a --mapping file can pair names the automatic rules miss)"
    };
    format!(
        "nothing was compared: {}; {}: {hint}",
        side("A", a),
        side("B", b)
    )
}

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
    /// fused_a, fused_b, nearest_a, nearest_b, first_divergent; each pair and first_divergent
    /// carry pairing: exact, mapped or fused, and the rule).
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

/// Runs `compare`: builds its [`CompareReport`] and renders it, the report on `out` (or
/// `--json`; `--csv` and `--html` to their files), warnings and the summary on `err`;
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
    // Terminal output is best effort: a closed pipe does not change the verdict.
    let _ = text::problems(Some("A"), &a, err).and_then(|()| text::problems(Some("B"), &b, err));
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
    let r = CompareReport::new(&a, &b, cmp, args.all);
    let _ = if args.json {
        json::compare(&r, out)
    } else {
        text::compare(&r, out)
    };
    if let Some(path) = &args.csv {
        let mut rows = Vec::new();
        let _ = csv::compare(&r, &mut rows);
        if let Err(e) = report::output::write_atomic(path, &rows) {
            return Err(Failure::Invalid(format!("cannot write the csv file: {e}")));
        }
    }
    if let Some(path) = &args.html
        && let Err(e) = report::output::write_atomic(path, html::compare(&r).as_bytes())
    {
        return Err(Failure::Invalid(format!("cannot write the HTML page: {e}")));
    }
    let _ = text::compare_summary(&r, err);
    if r.cmp.pairs.is_empty() {
        return Err(Failure::Invalid(nothing_compared(&a, &b)));
    }
    if let Some(m) = unreadable_pairs(&r) {
        return Err(Failure::Invalid(m));
    }
    Ok(if r.first.is_some() {
        Verdict::Found
    } else {
        Verdict::Clean
    })
}
