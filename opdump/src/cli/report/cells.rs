//! Table cells that more than one renderer shows: a pair's metrics (the terminal table and
//! the HTML table) and a parameter's row (the terminal and the HTML parameters table).

use dump_read::{
    compare::{PairOutcome, PairResult},
    train::ParameterTrend,
};

use super::{g, inspect_report::TrendFigures, opt_g};

/// cosine, max abs, max rel, >0.001, >0.005, ulp as table cells.
pub fn metric_cells(p: &PairResult) -> [String; 6] {
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

/// The parameters table's header.
pub const TREND_HEAD: [&str; 12] = [
    "rank",
    "parameter",
    "steps",
    "grad first",
    "grad last",
    "grad max",
    "growth/step",
    "ratio last",
    "ratio max",
    "exploding from",
    "non-finite at",
    "verdict",
];

/// One parameter's row: name, steps, gradient norm first/last/largest finite, growth per
/// step, update ratio last/largest finite, the first step the exploding rule holds, the first
/// step with a non-finite one, verdict.
pub fn trend_cells(p: &ParameterTrend, f: &TrendFigures) -> Vec<String> {
    vec![
        p.rank.to_string(),
        p.name.clone(),
        p.steps.len().to_string(),
        opt_g(f.grad_first),
        opt_g(f.grad_last),
        opt_g(f.grad_max),
        g(p.growth_per_step),
        opt_g(f.ratio_last),
        opt_g(f.ratio_max),
        p.exploding_from.map_or("-".into(), |s| s.to_string()),
        p.first_nonfinite_step.map_or("-".into(), |s| s.to_string()),
        p.verdict.as_str().to_owned(),
    ]
}
