//! Rendering for `inspect` and `compare`: the terminal table, JSON, the HTML page with SVG
//! plots, progress on stderr, and output files written whole (temp file + rename; Ctrl-C
//! removes the temp file, so no partial output file is ever left).

pub mod html;
pub mod json;
pub mod output;
pub mod progress;

/// `1.5 KiB`, `3.2 MiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A number in `%g` style (6 significant digits, `nan`, `inf`).
pub fn g(v: f64) -> String {
    dump_core::fmt::g(v).as_str().to_owned()
}

/// `v` or `-`.
pub fn opt_g(v: Option<f64>) -> String {
    v.map(g).unwrap_or_else(|| "-".into())
}

/// `rank 0 iteration 1 graph 0: ReLU Default_..._ReLU-op0 output.0`: tensor `i` of `dump`.
pub fn who(dump: &dump_read::Dump, i: usize) -> String {
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
pub fn reason(d: &dump_read::compare::Divergence) -> String {
    use dump_read::compare::Divergence as D;
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
pub fn note(n: &dump_read::compare::Note) -> String {
    match n {
        dump_read::compare::Note::Reshaped { a, b } => {
            format!("shapes {a:?} and {b:?} differ only in dimensions of size 1: compared by value")
        }
    }
}

/// Every reason of `p`, worded, `; `-separated.
pub fn reasons(p: &dump_read::compare::PairResult) -> String {
    p.reasons.iter().map(reason).collect::<Vec<_>>().join("; ")
}
