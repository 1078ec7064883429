//! csv output: `compare --csv` (one row per pair, under a stable header documented in
//! `compare`'s module docs and the README; fields with a comma, quote or newline are quoted,
//! RFC 4180) and `stats` (statistic.csv rows as dump-stats writes them).

use std::io::{self, Write};

use dump_core::compare::PairMetrics;
use dump_read::compare::PairOutcome;

use super::{compare_report::CompareReport, g, stats_report::StatsReport, words::reasons};

/// The `--csv` header.
pub const COMPARE_HEADER: &str = "rank,iteration,graph,op_type,op_name,io,slot,b_op_name,rule,dtype,shape,kind,diverged,cosine,max_abs_error,max_rel_error,ratio_over_0.001,ratio_over_0.005,not_close,max_ulp,nonfinite_mismatch,a_max,a_min,a_avg,a_l2norm,b_max,b_min,b_avg,b_l2norm,reason";

/// A csv field, quoted when it holds a comma, quote or newline.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// The header and one row per pair of `r`, in A's run order.
pub fn compare(r: &CompareReport<'_>, out: &mut dyn Write) -> io::Result<()> {
    let (a, b) = (r.a, r.b);
    writeln!(out, "{COMPARE_HEADER}")?;
    for p in &r.cmp.pairs {
        let t = &a.tensors[p.a];
        let (kind, m) = match &p.outcome {
            PairOutcome::Elements(m) => ("elements", Some(m)),
            PairOutcome::Statistics { .. } => ("statistics", None),
            PairOutcome::Digest { .. } => ("digest", None),
            PairOutcome::Mismatch(_) => ("mismatch", None),
        };
        let mf = |f: fn(&PairMetrics) -> String| m.map(f).unwrap_or_default();
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
            reasons(p),
        ];
        let row: Vec<String> = cells.iter().map(|c| field(c)).collect();
        writeln!(out, "{}", row.join(","))?;
    }
    Ok(())
}

/// `stats`: the header (unless left out) and each file's row, in command-line order; files
/// without a row (empty, or failed) are skipped.
pub fn stats(r: &StatsReport, out: &mut dyn Write) -> io::Result<()> {
    if let Some(h) = &r.header {
        out.write_all(h.as_bytes())?;
    }
    for f in &r.files {
        if let Ok(Some(row)) = &f.row {
            out.write_all(row.as_bytes())?;
        }
    }
    Ok(())
}
