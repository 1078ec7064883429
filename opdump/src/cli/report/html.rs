//! One self-contained HTML page (no network, no external file): line plots drawn as inline
//! SVG ([`super::svg`]), a marker on the operator of interest, and a table that sorts on a
//! header click. [`inspect`] and [`compare`] render their report value as such a page.

use std::fmt::Write as _;

use dump_core::compare::PairMetrics;
use dump_read::{
    compare::PairOutcome,
    train::{
        EXPLODING_GROWTH, EXPLODING_UPDATE, FROZEN_UPDATE, ParameterTrend, VANISHING_DECAY,
        VANISHING_NORM,
    },
};

use super::{
    cells::{TREND_HEAD, metric_cells, trend_cells},
    compare_report::CompareReport,
    esc, g,
    inspect_report::InspectReport,
    opt_g,
    svg::{Plot, Series, svg},
    words::{origin_words, reasons, role_words, who, within_count},
};

/// Most table rows a page holds (`--json` and `--csv` have every row).
pub const MAX_ROWS: usize = 20_000;

const SORT_JS: &str = r#"
document.querySelectorAll('table.sortable th').forEach(function (th, col) {
  th.addEventListener('click', function () {
    var table = th.closest('table');
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var asc = th.getAttribute('data-asc') !== 'true';
    th.setAttribute('data-asc', asc ? 'true' : 'false');
    rows.sort(function (a, b) {
      var x = a.cells[col].textContent, y = b.cells[col].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"#;

/// The whole page: `summary` (already HTML), the plots, and a sortable table whose row
/// `highlight` is marked.
pub fn page(
    title: &str,
    summary: &str,
    plots: &[Plot],
    head: &[&str],
    rows: &[Vec<String>],
    highlight: Option<usize>,
) -> String {
    page_with(title, summary, plots, "", head, rows, highlight)
}

/// A sortable table of its own (a section of a page: [`page_with`]'s `extra`), cells escaped.
pub fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = String::from(r#"<table class="sortable"><thead><tr>"#);
    for h in head {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for r in rows.iter().take(MAX_ROWS) {
        s.push_str("<tr>");
        for c in r {
            let _ = write!(s, "<td>{}</td>", esc(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// [`page`] with `extra` (already HTML: headings, [`table`]s, [`svg`]s) between the plots
/// and the tensor table.
pub fn page_with(
    title: &str,
    summary: &str,
    plots: &[Plot],
    extra: &str,
    head: &[&str],
    rows: &[Vec<String>],
    highlight: Option<usize>,
) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{t}</title><style>
body{{font-family:sans-serif;margin:16px;color:#222}} table{{border-collapse:collapse;font-size:12px}}
th,td{{border:1px solid #ccc;padding:2px 6px;text-align:left}} th{{cursor:pointer;background:#eee}}
tr.hl td{{background:#fdd}} .sum{{font-size:14px;margin-bottom:12px}} svg{{display:block;margin:8px 0}}
</style></head><body><h1>{t}</h1><div class="sum">{summary}</div>"#,
        t = esc(title)
    );
    for p in plots {
        s.push_str(&svg(p));
    }
    s.push_str(extra);
    s.push_str(r#"<table class="sortable"><thead><tr>"#);
    for h in head {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for (i, r) in rows.iter().enumerate().take(MAX_ROWS) {
        s.push_str(if highlight == Some(i) {
            r#"<tr class="hl">"#
        } else {
            "<tr>"
        });
        for c in r {
            let _ = write!(s, "<td>{}</td>", esc(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    if rows.len() > MAX_ROWS {
        let _ = write!(
            s,
            "<p>The first {MAX_ROWS} of {} rows (every row: --json, or compare's --csv).</p>",
            rows.len()
        );
    }
    let _ = writeln!(s, "<script>{SORT_JS}</script></body></html>");
    s
}

/// Colours of the parameters' lines, in turn.
const COLORS: [&str; 8] = [
    "#1f5fbf", "#d62728", "#2a8f2a", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];

/// `inspect --html`: per-kernel output l2norm and max|x| along the run order, the first
/// non-finite kernel marked, the parameters' trends of a training dump, and a sortable table
/// of every tensor.
pub fn inspect(r: &InspectReport<'_>) -> String {
    let (dump, ins) = (r.dump, &r.ins);
    let mark = ins.first_nonfinite.as_ref().map(|f| {
        (
            f.kernel,
            format!("first non-finite: {}", ins.kernels[f.kernel].op_name),
        )
    });
    let plots = [
        Plot {
            title: "output l2norm per kernel (run order, log scale)".into(),
            series: vec![Series {
                name: "l2norm".into(),
                values: r.peaks.iter().map(|p| p.l2norm).collect(),
                color: "#1f5fbf",
            }],
            mark: mark.clone(),
            log: true,
        },
        Plot {
            title: "output max|x| per kernel (run order, log scale)".into(),
            series: vec![Series {
                name: "max|x|".into(),
                values: r.peaks.iter().map(|p| p.max_abs).collect(),
                color: "#2a8f2a",
            }],
            mark,
            log: true,
        },
    ];
    let head = [
        "#",
        "rank",
        "iteration",
        "op_type",
        "op_name",
        "role",
        "io",
        "dtype",
        "shape",
        "max",
        "min",
        "l2norm",
        "nan",
        "inf",
    ];
    let mut rows = Vec::new();
    let mut hl = None;
    for (n, k) in ins.kernels.iter().enumerate() {
        for &i in &k.tensors {
            let t = &dump.tensors[i];
            let st = r.stats(i);
            if ins.first_nonfinite.as_ref().is_some_and(|f| f.tensor == i) {
                hl = Some(rows.len());
            }
            rows.push(vec![
                n.to_string(),
                t.rank.to_string(),
                t.iteration.to_string(),
                t.id.op_type.clone(),
                t.id.op_name.clone(),
                r.roles[n].role.as_str().to_owned(),
                t.io_slot(),
                t.dtype.name().to_owned(),
                format!("{:?}", t.shape),
                opt_g(st.max),
                opt_g(st.min),
                opt_g(st.l2norm),
                st.nan.map_or("-".into(), |v| v.to_string()),
                st.pos_inf
                    .zip(st.neg_inf)
                    .map_or("-".into(), |(p, m)| (p + m).to_string()),
            ]);
        }
    }
    let summary = match &ins.first_nonfinite {
        Some(f) => format!(
            "<b>First non-finite operator:</b> {} ({})",
            esc(&who(dump, f.tensor)),
            esc(&role_words(&r.roles[f.kernel]))
        ),
        None => match &ins.first_nonfinite_tensor {
            Some(t) => format!(
                "<b>First non-finite tensor:</b> {} ({}; {}); every kernel output is finite.",
                esc(&who(dump, t.tensor)),
                esc(&role_words(&r.roles[t.kernel])),
                esc(&origin_words(&t.origin))
            ),
            None => "Every tensor is finite.".into(),
        },
    };
    page_with(
        &format!("opdump inspect {}", dump.root.display()),
        &summary,
        &plots,
        &trends(r),
        &head,
        &rows,
        hl,
    )
}

/// The parameters' gradient norms and update ratios over the steps (log plots, one line per
/// parameter) and their table; empty without a training dump.
fn trends(r: &InspectReport<'_>) -> String {
    let params = &r.ins.parameters;
    if params.is_empty() {
        return String::new();
    }
    let plot = |title: &str, f: fn(&ParameterTrend) -> &[Option<f64>]| Plot {
        title: title.into(),
        series: params
            .iter()
            .enumerate()
            .map(|(i, p)| Series {
                name: p.name.clone(),
                values: f(p).iter().map(|v| v.unwrap_or(f64::NAN)).collect(),
                color: COLORS[i % COLORS.len()],
            })
            .collect(),
        mark: None,
        log: true,
    };
    let mut s = String::from("<h2>Parameters over the dumped steps</h2>");
    s += &svg(&plot("gradient l2norm per step (log scale)", |p| {
        &p.grad_norm
    }));
    s += &svg(&plot("update ratio |dw|/|w| per step (log scale)", |p| {
        &p.update_ratio
    }));
    let rows: Vec<Vec<String>> = params
        .iter()
        .zip(&r.trends)
        .map(|(p, f)| trend_cells(p, f))
        .collect();
    s += &table(&TREND_HEAD, &rows);
    s += &format!(
        "<p>exploding: a non-finite gradient norm or update ratio, growth to {}x the first \
         norm, or a ratio of {} or more; frozen: every ratio at most {} (or every norm 0); \
         vanishing: the last norm at most {} or at most {}x the largest before it.</p><h2>Tensors</h2>",
        g(EXPLODING_GROWTH),
        g(EXPLODING_UPDATE),
        g(FROZEN_UPDATE),
        g(VANISHING_NORM),
        g(VANISHING_DECAY),
    );
    s
}

/// `compare --html`: per-pair cosine, max relative error and both runs' l2norm along A's run
/// order, the first divergent pair marked, and a sortable table of every pair.
pub fn compare(r: &CompareReport<'_>) -> String {
    let (a, cmp) = (r.a, &r.cmp);
    let metric = |f: fn(&PairMetrics) -> f64| -> Vec<f64> {
        cmp.pairs
            .iter()
            .map(|p| match &p.outcome {
                PairOutcome::Elements(m) => f(m),
                _ => f64::NAN,
            })
            .collect()
    };
    let first = r.first.as_ref().map(|f| f.pair);
    let mark = first.map(|i| {
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
            let [c0, c1, c2, c3, c4, c5] = metric_cells(p);
            vec![
                n.to_string(),
                p.rule.as_str().into(),
                t.iteration.to_string(),
                t.id.op_type.clone(),
                t.id.op_name.clone(),
                t.io_slot(),
                c0,
                c1,
                c2,
                c3,
                c4,
                c5,
                if p.diverged() {
                    reasons(p)
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    let summary = format!(
        "A: {} &nbsp; B: {}<br>{} pairs, {} only in A, {} only in B{}<br>{}",
        esc(&a.root.display().to_string()),
        esc(&r.b.root.display().to_string()),
        cmp.pairs.len(),
        cmp.only_in_a.len(),
        cmp.only_in_b.len(),
        within_count(r.within_tensors, r.cmp.fused_a.len() + r.cmp.fused_b.len()),
        match first {
            Some(i) => format!(
                "<b>First divergent operator:</b> {}",
                esc(&who(a, cmp.pairs[i].a))
            ),
            None => "Every pair is within tolerance.".into(),
        }
    );
    page("opdump compare", &summary, &plots, &head, &rows, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_lines_gaps_and_the_mark() {
        let p = Plot {
            title: "l2 <norm>".into(),
            series: vec![Series {
                name: "A".into(),
                values: vec![1.0, 2.0, f64::NAN, 4.0, 5.0],
                color: "#00f",
            }],
            mark: Some((3, "first".into())),
            log: false,
        };
        let s = svg(&p);
        assert_eq!(
            s.matches("<polyline").count(),
            2,
            "NaN splits the line: {s}"
        );
        assert!(s.contains("l2 &lt;norm&gt;"));
        assert!(s.contains(r#"class="mark""#));
        let page = page("t", "", &[p], &["a"], &[vec!["<x>".into()]], Some(0));
        assert!(page.contains("&lt;x&gt;") && page.contains(r#"<tr class="hl">"#));
        // Self-contained: the only URL is the SVG namespace, nothing is fetched.
        assert!(!page.contains("src=") && !page.contains("href="));
    }
}
