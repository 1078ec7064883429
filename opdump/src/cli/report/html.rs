//! One self-contained HTML page (no network, no external file): line plots drawn as inline
//! SVG ([`super::svg`]) that scale with the window, a marker on the operator of interest, and
//! a table that sorts on a header click. Every plotted point links to its table row
//! (`id="row-N"`, N the table's `#`), and the summary links the operator of interest's row.
//! [`inspect`] and [`compare`] render their report value as such a page.

use std::fmt::Write as _;

use dump_read::{
    compare::{PairOutcome, PairResult},
    train::{
        EXPLODING_GROWTH, EXPLODING_UPDATE, FROZEN_UPDATE, ParameterTrend, Role, VANISHING_DECAY,
        VANISHING_NORM,
    },
};

use dump_stats::Io;

use super::{
    cells::{TREND_HEAD, metric_cells, trend_cells},
    compare_report::CompareReport,
    esc, g, graph_view,
    inspect_report::InspectReport,
    opt_g,
    svg::{Plot, Series, svg},
    words::{origin_words, pairing_kind, reasons, role_words, unpaired_kind, who, within_count},
};

/// Most table rows a page holds (`--json` and `--csv` have every row).
pub const MAX_ROWS: usize = 20_000;

/// Rows of the tensor table laid out at once: a longer table shows its first page, the rest
/// waits as text (`<noscript id="rest">`) until the pager, a sort or a link asks for it.
pub const PAGE_ROWS: usize = 200;

/// The page's one script: the table's pager (its other rows read from `#rest` when first
/// needed), sorting on a header click (every row of a paged table), folded sections'
/// `<noscript class="lazy">` bodies turned into markup when they open, and links and the
/// address's `#id` revealing their target (its table page shown, its folded sections opened,
/// marked `.target`). With scripting off, the `<noscript>`s are plain markup: every row and
/// every node shows.
const PAGE_JS: &str = r#"
(function () {
  var t = document.getElementById('rows'), bar = document.getElementById('pager');
  var rest = document.getElementById('rest');
  var P = 0, N = 0, R = null, at = {}, page = 0, all = false;
  function text(s) {
    return s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'").replace(/&amp;/g, '&');
  }
  function index() {
    at = {};
    R.forEach(function (h, i) {
      var m = /^<tr id="([^"]+)"/.exec(h);
      if (m) at[m[1]] = i;
    });
  }
  function rows() {
    if (!R) {
      R = [].map.call(t.tBodies[0].rows, function (r) { return r.outerHTML; });
      var s = rest.textContent;
      s.slice(s.indexOf('<tbody>') + 7, s.lastIndexOf('</tbody>')).split('</tr>')
        .forEach(function (h) { if (h) R.push(h + '</tr>'); });
      rest.parentNode.removeChild(rest);
      index();
    }
    return R;
  }
  function label(a, b) {
    bar.querySelector('span').textContent = 'rows ' + (a + 1) + '\u2013' + b + ' of ' + N +
      (all ? '' : ' (page ' + (page + 1) + ' of ' + Math.ceil(N / P) + ')');
  }
  function show(k) {
    var r = rows();
    page = Math.max(0, Math.min(Math.ceil(N / P) - 1, k));
    var a = all ? 0 : page * P, b = all ? N : Math.min(N, a + P);
    t.tBodies[0].innerHTML = r.slice(a, b).join('');
    label(a, b);
  }
  if (t && bar && rest) {
    N = Number(t.getAttribute('data-rows'));
    P = t.tBodies[0].rows.length;
    label(0, P);
    bar.hidden = false;
    bar.addEventListener('click', function (e) {
      var go = e.target.getAttribute('data-go');
      if (go === 'all') { all = !all; show(page); }
      else if (go) { all = false; show(page + Number(go)); }
    });
  }
  function sortPaged(col, asc) {
    var r = rows(), key = r.map(function (h) {
      var c = h.split('<td>')[col + 1] || '';
      return text(c.slice(0, c.indexOf('</td>')));
    });
    var o = r.map(function (_, i) { return i; });
    o.sort(function (i, j) { return order(key[i], key[j], asc) || i - j; });
    R = o.map(function (i) { return r[i]; });
    index();
    show(0);
  }
  function order(x, y, asc) {
    var nx = parseFloat(x), ny = parseFloat(y);
    var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
    return asc ? c : -c;
  }
  document.querySelectorAll('table.sortable th').forEach(function (th) {
    th.addEventListener('click', function () {
      var table = th.closest('table'), col = th.cellIndex;
      var asc = th.getAttribute('data-asc') !== 'true';
      th.setAttribute('data-asc', asc ? 'true' : 'false');
      if (table === t && P) return sortPaged(col, asc);
      var body = table.tBodies[0], list = [].slice.call(body.rows);
      list.sort(function (a, b) {
        return order(a.cells[col].textContent, b.cells[col].textContent, asc);
      });
      list.forEach(function (r) { body.appendChild(r); });
    });
  });
  function unfold(n) {
    n.insertAdjacentHTML('afterend', n.textContent);
    n.parentNode.removeChild(n);
  }
  document.addEventListener('toggle', function (e) {
    var d = e.target;
    if (d.open) [].slice.call(d.children).forEach(function (c) {
      if (c.matches('noscript.lazy')) unfold(c);
    });
  }, true);
  function find(id) {
    var el = document.getElementById(id);
    if (el) return el;
    var key = 'id="' + id + '"', ns = document.querySelectorAll('noscript.lazy');
    for (var i = 0; i < ns.length; i++) {
      if (ns[i].textContent.indexOf(key) >= 0) { unfold(ns[i]); return find(id); }
    }
    if (P && rows() && at[id] !== undefined) {
      all = false;
      show(Math.floor(at[id] / P));
      return document.getElementById(id);
    }
    return null;
  }
  function reveal(id) {
    var el = find(id);
    for (var d = el && el.parentElement; d; d = d.parentElement) {
      if (d.tagName === 'DETAILS') d.open = true;
    }
    return el;
  }
  document.addEventListener('click', function (e) {
    var a = e.target.closest && e.target.closest('a');
    var h = a && a.getAttribute('href');
    if (h && h.charAt(0) === '#') reveal(decodeURIComponent(h.slice(1)));
  });
  function fromHash() {
    var old = document.querySelector('.target');
    if (old) old.classList.remove('target');
    var el = location.hash && reveal(decodeURIComponent(location.hash.slice(1)));
    if (el) { el.classList.add('target'); el.scrollIntoView(); }
  }
  window.addEventListener('hashchange', fromHash);
  fromHash();
})();
"#;

/// The whole page: `summary` (already HTML), the plots, and a sortable table whose row
/// `highlight` is marked; `ids[i]`, where given, is row `i`'s anchor (`id="row-N"`).
pub fn page(
    title: &str,
    summary: &str,
    plots: &[Plot],
    head: &[&str],
    rows: &[Vec<String>],
    ids: &[Option<usize>],
    highlight: Option<usize>,
) -> String {
    page_with(title, summary, plots, "", head, rows, ids, highlight)
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
    if rows.len() > MAX_ROWS {
        let _ = write!(
            s,
            "<p>The first {MAX_ROWS} of {} rows (every row: --json).</p>",
            rows.len()
        );
    }
    s
}

/// [`page`] with `extra` (already HTML: headings, [`table`]s, [`svg`]s) between the plots
/// and the tensor table.
#[allow(clippy::too_many_arguments)]
pub fn page_with(
    title: &str,
    summary: &str,
    plots: &[Plot],
    extra: &str,
    head: &[&str],
    rows: &[Vec<String>],
    ids: &[Option<usize>],
    highlight: Option<usize>,
) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>{t}</title><style>
body{{font-family:sans-serif;margin:16px;color:#222}} table{{border-collapse:collapse;font-size:12px}}
th,td{{border:1px solid #ccc;padding:2px 6px;text-align:left}} th{{cursor:pointer;background:#eee}}
tr.hl td{{background:#fdd}} tr:target td,tr.target td{{background:#ffe08a}} #pager{{margin:6px 0;font-size:13px}} .sum{{font-size:14px;margin-bottom:12px}}
svg.plot{{display:block;width:100%;height:auto;max-width:1800px;margin:8px 0}}
svg.plot circle{{fill-opacity:.55}} svg.plot circle:hover{{fill-opacity:1;stroke:#000}}
details{{margin:8px 0}} summary{{cursor:pointer;font-weight:bold}}
{graph_css}</style></head><body><h1>{t}</h1><div class="sum">{summary}</div>"#,
        t = esc(title),
        graph_css = graph_view::css()
    );
    for p in plots {
        s.push_str(&svg(p));
    }
    s.push_str(extra);
    tensor_table(&mut s, head, rows, ids, highlight);
    let _ = writeln!(s, "<script>{PAGE_JS}</script></body></html>");
    s
}

/// The tensor table (`id="rows"`): its first [`PAGE_ROWS`] rows as markup, the rest (up to
/// [`MAX_ROWS`]) in a second table inside `<noscript id="rest">`, which a browser with
/// scripting on keeps as text (cheap to load; the pager reads it) and one without shows.
fn tensor_table(
    s: &mut String,
    head: &[&str],
    rows: &[Vec<String>],
    ids: &[Option<usize>],
    highlight: Option<usize>,
) {
    let shown = rows.len().min(MAX_ROWS);
    let paged = shown > PAGE_ROWS;
    let mut thead = String::from("<thead><tr>");
    for h in head {
        let _ = write!(thead, "<th>{}</th>", esc(h));
    }
    thead.push_str("</tr></thead>");
    if paged {
        s.push_str(
            r#"<div id="pager" hidden><button data-go="-1">&#9664; previous</button> <span></span> <button data-go="1">next &#9654;</button> <button data-go="all">every row</button></div>"#,
        );
    }
    let _ = write!(
        s,
        r#"<table class="sortable" id="rows" data-rows="{shown}">{thead}<tbody>"#
    );
    for (i, r) in rows.iter().enumerate().take(shown) {
        if i == PAGE_ROWS {
            let _ = write!(
                s,
                r#"</tbody></table><noscript id="rest"><table class="sortable">{thead}<tbody>"#
            );
        }
        s.push_str("<tr");
        if let Some(Some(id)) = ids.get(i) {
            let _ = write!(s, r#" id="row-{id}""#);
        }
        if highlight == Some(i) {
            s.push_str(r#" class="hl""#);
        }
        s.push('>');
        for c in r {
            let _ = write!(s, "<td>{}</td>", esc(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    if paged {
        s.push_str("</noscript>");
    }
    if rows.len() > MAX_ROWS {
        let _ = write!(
            s,
            "<p>The first {MAX_ROWS} of {} rows (every row: --json, or compare's --csv).</p>",
            rows.len()
        );
    }
}

/// A `<details>` section (`attrs` after the tag name, e.g. ` id="x"`) with `summary`; when
/// closed, its `body` is kept in a `<noscript class="lazy">`, which the page's script turns
/// into markup when the section opens (a browser without scripting shows it as is). `body`
/// must hold no `<noscript>` of its own.
pub fn folded(attrs: &str, open: bool, summary: &str, body: &str) -> String {
    if open {
        format!("<details{attrs} open><summary>{summary}</summary>{body}</details>")
    } else {
        format!(
            r#"<details{attrs}><summary>{summary}</summary><noscript class="lazy">{body}</noscript></details>"#
        )
    }
}

/// Colours of the parameters' lines, in turn.
const COLORS: [&str; 8] = [
    "#1f5fbf", "#d62728", "#2a8f2a", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];

/// What the floor of the error plots is: smaller errors (zero included) are drawn at it.
pub const ERROR_FLOOR: f64 = 1e-12;

/// `inspect --html`: per-kernel output l2norm and max|x| along the run order (the forward and
/// backward kernels; a training dump's parameter and optimizer kernels on plots of their
/// own, folded), the first non-finite kernel marked, every point linked to its kernel's row,
/// the parameters' trends of a training dump, and a sortable table of every tensor.
pub fn inspect(r: &InspectReport<'_>) -> String {
    let (dump, ins) = (r.dump, &r.ins);
    let nk = ins.kernels.len();
    let mark = ins.first_nonfinite.as_ref().map(|f| {
        (
            f.kernel,
            format!(
                "first non-finite: #{} {}",
                f.kernel, ins.kernels[f.kernel].op_name
            ),
        )
    });
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
    let hl_tensor = ins
        .first_nonfinite
        .as_ref()
        .map(|f| f.tensor)
        .or(ins.first_nonfinite_tensor.as_ref().map(|t| t.tensor));
    let mut rows = Vec::new();
    let mut hl = None;
    // Each kernel's row (its first, or the highlighted one), which its plot points link to.
    let mut kernel_row: Vec<Option<usize>> = vec![None; nk];
    for (n, k) in ins.kernels.iter().enumerate() {
        for &i in &k.tensors {
            let t = &dump.tensors[i];
            let st = r.stats(i);
            if hl_tensor == Some(i) {
                hl = Some(rows.len());
                kernel_row[n] = Some(rows.len());
            } else if kernel_row[n].is_none() {
                kernel_row[n] = Some(rows.len());
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
    let mut ids = vec![None; rows.len()];
    for (n, row) in kernel_row.iter().enumerate() {
        if let Some(row) = row {
            ids[*row] = Some(n);
        }
    }
    // A kernel's point links to its row when the page holds that row.
    let link = |n: usize| kernel_row[n].filter(|&row| row < MAX_ROWS).map(|_| n);
    let kernel_plots = |ks: &[usize], what: &str| -> Vec<Plot> {
        let base = Plot {
            xs: ks.to_vec(),
            names: ks
                .iter()
                .map(|&n| {
                    let k = &ins.kernels[n];
                    format!("#{n} {} {}", k.op_type, k.op_name)
                })
                .collect(),
            rows: ks.iter().map(|&n| link(n)).collect(),
            mark: mark.clone(),
            log: true,
            ..Plot::new("", "kernel # (run order; the table's # column)", nk)
        };
        vec![
            Plot {
                title: format!("output l2norm per kernel, {what} (log scale)"),
                series: vec![Series {
                    name: "l2norm".into(),
                    values: ks.iter().map(|&n| r.peaks[n].l2norm).collect(),
                    color: "#1f5fbf",
                }],
                ..base.clone()
            },
            Plot {
                title: format!("output max|x| per kernel, {what} (log scale)"),
                series: vec![Series {
                    name: "max|x|".into(),
                    values: ks.iter().map(|&n| r.peaks[n].max_abs).collect(),
                    color: "#2a8f2a",
                }],
                ..base
            },
        ]
    };
    let (state, compute): (Vec<usize>, Vec<usize>) =
        (0..nk).partition(|&n| matches!(r.roles[n].role, Role::Parameter | Role::Optimizer));
    let plots = kernel_plots(&compute, "forward and backward kernels");
    let mut extra = String::new();
    if !state.is_empty() {
        let body: String = kernel_plots(&state, "parameter and optimizer kernels")
            .iter()
            .map(svg)
            .collect();
        extra += &folded(
            "",
            false,
            &format!("Parameter and optimizer kernels ({} kernels)", state.len()),
            &body,
        );
    }
    extra += &graph_view::render(&graph_view::inspect_nodes(r, &|n| link(n).is_some()), false);
    extra += &trends(r);
    let goto = |n: usize| -> String {
        if link(n).is_some() {
            format!(r##" &nbsp;<a href="#row-{n}">go to its row (#{n})</a>"##)
        } else {
            String::new()
        }
    };
    let summary = match &ins.first_nonfinite {
        Some(f) => format!(
            "<b>First non-finite operator:</b> {} ({}){}",
            esc(&who(dump, f.tensor)),
            esc(&role_words(&r.roles[f.kernel])),
            goto(f.kernel)
        ),
        None => match &ins.first_nonfinite_tensor {
            Some(t) => format!(
                "<b>First non-finite tensor:</b> {} ({}; {}); every kernel output is finite.{}",
                esc(&who(dump, t.tensor)),
                esc(&role_words(&r.roles[t.kernel])),
                esc(&origin_words(&t.origin)),
                goto(t.kernel)
            ),
            None => "Every tensor is finite.".into(),
        },
    };
    page_with(
        &format!("opdump inspect {}", dump.root.display()),
        &summary,
        &plots,
        &extra,
        &head,
        &rows,
        &ids,
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
    let longest = params
        .iter()
        .max_by_key(|p| p.steps.len())
        .map_or(&[][..], |p| &p.steps[..]);
    let steps = params
        .iter()
        .map(|p| p.grad_norm.len().max(p.update_ratio.len()))
        .max()
        .unwrap_or(0);
    let plot = |title: &str, f: fn(&ParameterTrend) -> &[Option<f64>]| Plot {
        xs: (0..steps).collect(),
        names: (0..steps)
            .map(|k| match longest.get(k) {
                Some(s) => format!("step {s}"),
                None => format!("step #{k}"),
            })
            .collect(),
        series: params
            .iter()
            .enumerate()
            .map(|(i, p)| Series {
                name: p.name.clone(),
                values: (0..steps)
                    .map(|k| f(p).get(k).copied().flatten().unwrap_or(f64::NAN))
                    .collect(),
                color: COLORS[i % COLORS.len()],
            })
            .collect(),
        log: true,
        ..Plot::new(title, "dumped step (in order)", steps)
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

/// A pair's point name: `#N op_type op_name io.slot`.
fn pair_name(r: &CompareReport<'_>, n: usize) -> String {
    let t = &r.a.tensors[r.cmp.pairs[n].a];
    format!("#{n} {} {} {}", t.id.op_type, t.id.op_name, t.io_slot())
}

/// The plots of pairs `idx` (`what` they are): both runs' l2norm, `1 - cosine` and the
/// largest relative error, on log scales (errors below [`ERROR_FLOOR`] drawn at it; pairs
/// whose NaN/Inf positions differ on the top edge).
fn pair_plots(r: &CompareReport<'_>, idx: &[usize], what: &str) -> Vec<Plot> {
    let pairs = &r.cmp.pairs;
    let mark = r.first.as_ref().map(|f| {
        (
            f.pair,
            format!(
                "first divergent: #{} {}",
                f.pair, r.a.tensors[pairs[f.pair].a].id.op_name
            ),
        )
    });
    let base = Plot {
        xs: idx.to_vec(),
        names: idx.iter().map(|&n| pair_name(r, n)).collect(),
        rows: idx.iter().map(|&n| (n < MAX_ROWS).then_some(n)).collect(),
        mark,
        log: true,
        ..Plot::new(
            "",
            "pair # (A's run order; the table's # column)",
            pairs.len(),
        )
    };
    let values = |f: &dyn Fn(&PairResult) -> f64| -> Vec<f64> {
        idx.iter().map(|&n| f(&pairs[n])).collect()
    };
    let floor = g(ERROR_FLOOR);
    vec![
        Plot {
            title: format!("both runs' l2norm per pair, {what} (log scale)"),
            series: vec![
                Series {
                    name: "A l2norm".into(),
                    values: values(&|p| p.stats_a.l2norm.unwrap_or(f64::NAN)),
                    color: "#1f5fbf",
                },
                Series {
                    name: "B l2norm".into(),
                    values: values(&|p| p.stats_b.l2norm.unwrap_or(f64::NAN)),
                    color: "#e08a00",
                },
            ],
            ..base.clone()
        },
        Plot {
            title: format!(
                "1 - cosine per pair, {what} (log scale; below {floor} drawn at {floor})"
            ),
            series: vec![Series {
                name: "1 - cosine".into(),
                values: values(&|p| match &p.outcome {
                    PairOutcome::Elements(m) if m.nonfinite_mismatch > 0 => f64::INFINITY,
                    PairOutcome::Elements(m) => 1.0 - m.cosine(),
                    _ => f64::NAN,
                }),
                color: "#2a8f2a",
            }],
            floor: Some(ERROR_FLOOR),
            ..base.clone()
        },
        Plot {
            title: format!(
                "max relative error per pair, {what} (log scale; below {floor} drawn at {floor})"
            ),
            series: vec![Series {
                name: "max rel error".into(),
                values: idx.iter().map(|&n| r.pair_rel[n]).collect(),
                color: "#b0302a",
            }],
            floor: Some(ERROR_FLOOR),
            ..base
        },
    ]
}

/// Rows past this many in the fused and unpaired sections fold them (closed `<details>`).
const OPEN_SECTION: usize = 20;

/// `<details>`, open when it lists at most [`OPEN_SECTION`] rows.
fn section(id: &str, rows: usize, summary: &str, body: &str) -> String {
    folded(
        &format!(r#" id="{id}""#),
        rows <= OPEN_SECTION,
        summary,
        body,
    )
}

/// The compare page's sections on the tensors that did not pair one to one: those fused into
/// an ONNX node of the other side (pairing `fused`, with the node), and those with no
/// partner (pairing `nearest` with the other side's nearest candidates, or `unpaired`).
fn fused_and_unpaired(r: &CompareReport<'_>) -> String {
    let (a, b, cmp) = (r.a, r.b, &r.cmp);
    let mut s = String::new();
    let fused: Vec<Vec<String>> = [("A", a, &cmp.fused_a), ("B", b, &cmp.fused_b)]
        .into_iter()
        .flat_map(|(side, d, list)| {
            list.iter()
                .map(move |(i, node)| vec!["fused".into(), side.into(), who(d, *i), node.clone()])
        })
        .collect();
    if !fused.is_empty() {
        s += &section(
            "fused",
            fused.len(),
            &format!(
                "Fused ({}): computed inside an ONNX node that pairs with a later call",
                fused.len()
            ),
            &table(&["pairing", "side", "tensor", "ONNX node"], &fused),
        );
    }
    let unpaired: Vec<Vec<String>> = [
        ("A", a, b, &cmp.only_in_a, &cmp.nearest_a),
        ("B", b, a, &cmp.only_in_b, &cmp.nearest_b),
    ]
    .into_iter()
    .flat_map(|(side, d, other, list, near)| {
        list.iter().map(move |&i| {
            let cands: &[usize] = near
                .iter()
                .find(|(n, _)| *n == i)
                .map_or(&[], |(_, c)| &c[..]);
            vec![
                unpaired_kind(cands.len()).into(),
                side.into(),
                who(d, i),
                cands
                    .iter()
                    .map(|&j| who(other, j))
                    .collect::<Vec<_>>()
                    .join("; "),
            ]
        })
    })
    .collect();
    if !unpaired.is_empty() {
        s += &section(
            "unpaired",
            unpaired.len(),
            &format!(
                "Unpaired ({} only in A, {} only in B), with the other side's nearest candidates",
                cmp.only_in_a.len(),
                cmp.only_in_b.len()
            ),
            &table(
                &["pairing", "side", "tensor", "nearest candidates"],
                &unpaired,
            ),
        );
    }
    s
}

/// `compare --html`: along A's run order, both runs' l2norm, `1 - cosine` and the largest
/// relative error of the outputs' pairs (the inputs' pairs, weights included, on plots of
/// their own, folded), the first divergent pair marked and linked from the top, every point
/// linked to its row, and a sortable table of every pair.
pub fn compare(r: &CompareReport<'_>) -> String {
    let (a, cmp) = (r.a, &r.cmp);
    let first = r.first.as_ref().map(|f| f.pair);
    let (outs, ins): (Vec<usize>, Vec<usize>) =
        (0..cmp.pairs.len()).partition(|&n| a.tensors[cmp.pairs[n].a].id.io == Io::Output);
    let plots = pair_plots(r, &outs, "kernel outputs");
    let mut extra = String::new();
    if !ins.is_empty() {
        let body: String = pair_plots(r, &ins, "kernel inputs")
            .iter()
            .map(svg)
            .collect();
        extra += &folded(
            "",
            false,
            &format!(
                "Kernel inputs: weights, parameters and activations fed in ({} pairs)",
                ins.len()
            ),
            &body,
        );
    }
    extra += &graph_view::render(&graph_view::compare_nodes(r), true);
    extra += &fused_and_unpaired(r);
    let head = [
        "#",
        "pairing",
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
                pairing_kind(p.rule).into(),
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
                if p.diverged() || p.unreadable() {
                    reasons(p)
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    let ids: Vec<Option<usize>> = (0..rows.len()).map(Some).collect();
    let kinds = ["exact", "mapped", "fused"].map(|k| {
        let n = cmp
            .pairs
            .iter()
            .filter(|p| pairing_kind(p.rule) == k)
            .count();
        format!("{n} {k}")
    });
    let unpaired = cmp.only_in_a.len() + cmp.only_in_b.len();
    let folded = cmp.fused_a.len() + cmp.fused_b.len();
    let summary = format!(
        "A: {} &nbsp; B: {}<br>{} pairs ({}), {} only in A, {} only in B{}{}{}<br>{}",
        esc(&a.root.display().to_string()),
        esc(&r.b.root.display().to_string()),
        cmp.pairs.len(),
        kinds.join(", "),
        cmp.only_in_a.len(),
        cmp.only_in_b.len(),
        within_count(r.within_tensors, folded),
        if unpaired > 0 {
            r##" &nbsp;<a href="#unpaired">unpaired tensors and their nearest candidates</a>"##
        } else {
            ""
        },
        if folded > 0 {
            r##" &nbsp;<a href="#fused">fused tensors</a>"##
        } else {
            ""
        },
        match first {
            Some(i) => format!(
                r##"<b>First divergent operator:</b> {}{}"##,
                esc(&who(a, cmp.pairs[i].a)),
                if i < MAX_ROWS {
                    format!(r##" &nbsp;<a id="first" href="#row-{i}">go to its row (#{i})</a>"##)
                } else {
                    String::new()
                }
            ),
            None => "Every pair is within tolerance.".into(),
        }
    );
    page_with(
        "opdump compare",
        &summary,
        &plots,
        &extra,
        &head,
        &rows,
        &ids,
        first,
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use dump_read::{
        Dump,
        compare::{PairRule, Tolerances, compare as compare_dumps},
        inspect::inspect as inspect_dump,
    };

    use super::*;
    use crate::cli::report::test_dumps as td;

    #[test]
    fn page_escapes_links_rows_and_stays_self_contained() {
        let p = Plot {
            title: "l2 <norm>".into(),
            xs: vec![0, 1, 2],
            names: vec!["a".into(), "b".into(), "c".into()],
            rows: vec![Some(0), None, Some(2)],
            series: vec![Series {
                name: "A".into(),
                values: vec![1.0, 2.0, 4.0],
                color: "#00f",
            }],
            mark: Some((1, "first".into())),
            ..Plot::new("", "x", 3)
        };
        let s = svg(&p);
        assert!(s.contains("l2 &lt;norm&gt;"));
        assert!(s.contains(r#"class="mark""#));
        let rows = vec![vec!["<x>".into()], vec!["y".into()], vec!["z".into()]];
        let page = page(
            "t",
            "",
            &[p],
            &["a"],
            &rows,
            &[Some(0), None, Some(2)],
            Some(2),
        );
        assert!(page.contains("<td>&lt;x&gt;</td>"));
        assert!(
            page.contains(r#"<tr id="row-0">"#) && page.contains(r#"<tr id="row-2" class="hl">"#)
        );
        assert_eq!(page.matches(r#" id="row-"#).count(), 2);
        // Responsive: the plot scales with the page.
        assert!(page.contains("svg.plot{display:block;width:100%;height:auto"));
        // Self-contained: no fetched resource, and every link is one within the page, to a
        // row that exists.
        assert!(!page.contains("src=") && !page.contains("<link"));
        let hrefs: Vec<&str> = page.split("href=\"").skip(1).collect();
        assert_eq!(hrefs.len(), 2, "points 0 and 2 link, 1 has no row");
        for h in hrefs {
            let target = &h[..h.find('"').unwrap()];
            assert!(target.starts_with("#row-"), "{target}");
            assert!(
                page.contains(&format!(r#"id="{}""#, &target[1..])),
                "{target}"
            );
        }
    }

    /// The markup of `page` a browser with scripting on lays out: `<noscript>` text removed.
    fn laid_out(page: &str) -> String {
        let mut s = page.to_owned();
        while let Some(a) = s.find("<noscript") {
            let b = s[a..].find("</noscript>").unwrap() + a + "</noscript>".len();
            s.replace_range(a..b, "");
        }
        s
    }

    #[test]
    fn a_long_table_lays_out_one_page_and_keeps_every_row() {
        let n = 2 * PAGE_ROWS + 50;
        let rows: Vec<Vec<String>> = (0..n).map(|i| vec![i.to_string()]).collect();
        let ids: Vec<Option<usize>> = (0..n).map(Some).collect();
        // Points linking to rows on the first page, the second and the last.
        let p = Plot {
            xs: vec![0, PAGE_ROWS + 7, n - 1],
            names: vec!["a".into(), "b".into(), "c".into()],
            rows: vec![Some(0), Some(PAGE_ROWS + 7), Some(n - 1)],
            series: vec![Series {
                name: "s".into(),
                values: vec![1.0, 2.0, 3.0],
                color: "#00f",
            }],
            ..Plot::new("", "x", n)
        };
        let page = page("t", "", &[p], &["#"], &rows, &ids, Some(PAGE_ROWS + 7));
        // Every row is in the page once, in order, the highlighted one marked.
        assert_eq!(page.matches(r#"<tr id="row-"#).count(), n);
        let mut at = 0;
        for i in 0..n {
            let row = format!(r#"<tr id="row-{i}""#);
            let found = page[at..].find(&row).unwrap_or_else(|| panic!("row {i}"));
            at += found + row.len();
        }
        assert!(page.contains(&format!(r#"<tr id="row-{}" class="hl">"#, PAGE_ROWS + 7)));
        // The first page is markup; the rest waits in #rest, a table of its own (shown as is
        // without scripting) with the same header.
        let shown = laid_out(&page);
        assert_eq!(shown.matches(r#"<tr id="row-"#).count(), PAGE_ROWS);
        assert!(shown.contains(&format!(r#"<tr id="row-{}">"#, PAGE_ROWS - 1)));
        assert!(!shown.contains(&format!(r#"<tr id="row-{PAGE_ROWS}">"#)));
        let rest = &page[page.find(r#"<noscript id="rest">"#).unwrap()..];
        assert!(rest.starts_with(
            r#"<noscript id="rest"><table class="sortable"><thead><tr><th>#</th></tr></thead><tbody><tr id="row-200">"#
        ));
        assert!(rest.contains("</tbody></table></noscript>"));
        assert!(page.contains(&format!(
            r#"<table class="sortable" id="rows" data-rows="{n}"><thead><tr><th>#</th></tr></thead><tbody><tr id="row-0">"#
        )));
        // The pager, hidden until the script shows it; the script that pages, sorts and
        // reveals link targets.
        assert!(page.contains(r#"<div id="pager" hidden><button data-go="-1">"#));
        assert_eq!(page.matches("<script>").count(), 1);
        for part in [
            "getElementById('rest')",
            "addEventListener('hashchange'",
            "noscript.lazy",
            "sortPaged(col, asc)",
        ] {
            assert!(page.contains(part), "{part}");
        }
        // Every link lands on an id the page holds (on a later page too).
        let hrefs: Vec<&str> = page.split("href=\"#").skip(1).collect();
        assert_eq!(hrefs.len(), 3);
        for h in hrefs {
            let target = &h[..h.find('"').unwrap()];
            assert_eq!(
                page.matches(&format!(r#" id="{target}""#)).count(),
                1,
                "{target}"
            );
        }
        // A short table is one page: no pager, no #rest.
        let short = super::page("t", "", &[], &["#"], &rows[..PAGE_ROWS], &ids, None);
        assert_eq!(short.matches(r#"<tr id="row-"#).count(), PAGE_ROWS);
        assert!(!short.contains("<noscript") && !short.contains(r#"<div id="pager""#));
    }

    #[test]
    fn a_folded_section_keeps_its_body_as_text_until_opened() {
        assert_eq!(
            folded(r#" id="x""#, false, "S", "<p>b</p>"),
            r#"<details id="x"><summary>S</summary><noscript class="lazy"><p>b</p></noscript></details>"#
        );
        assert_eq!(
            folded("", true, "S", "<p>b</p>"),
            "<details open><summary>S</summary><p>b</p></details>"
        );
    }

    /// Kernels `k0..k5`, each with a weight input (l2norm 100) and an output (l2norm 1); B's
    /// output of kernel 4 is 1.5. Kernel 4's name is `name4`.
    fn conv_dumps(tag: &str, name4: &str) -> (Dump, Dump) {
        let root = td::fresh(tag);
        let rows = |b: bool| -> Vec<String> {
            (0..6)
                .flat_map(|i| {
                    let name = if i == 4 {
                        name4.to_owned()
                    } else {
                        format!("Default_Conv-op{i}")
                    };
                    let out = if b && i == 4 { 1.5 } else { 1.0 };
                    [
                        format!(
                            "Conv2D,{name},0,0,{},input,1,4,float32,\"(1)\",100,100,100,0",
                            10 + 2 * i
                        ),
                        format!(
                            "Conv2D,{name},0,0,{},output,0,4,float32,\"(1)\",{out},{out},{out},0",
                            11 + 2 * i
                        ),
                    ]
                })
                .collect()
        };
        let a = td::stat_dump(&root.join("a"), &rows(false));
        let b = td::stat_dump(&root.join("b"), &rows(true));
        let both = (Dump::open(&a).unwrap(), Dump::open(&b).unwrap());
        let _ = std::fs::remove_dir_all(&root);
        both
    }

    fn report<'a>(a: &'a Dump, b: &'a Dump) -> CompareReport<'a> {
        let cmp = compare_dumps(a, b, &Tolerances::default(), 1, &|_, _| {});
        CompareReport::new(a, b, cmp, false)
    }

    /// The part of the page before the folded inputs' plots.
    fn main_plots(page: &str) -> &str {
        &page[..page.find("<details>").unwrap()]
    }

    #[test]
    fn compare_page_plots_outputs_with_ticks_tooltips_and_links_to_rows() {
        let (a, b) = conv_dumps("html-cmp", "Default_Conv-op4");
        let r = report(&a, &b);
        let page = compare(&r);
        let first = r.first.as_ref().expect("kernel 4's output diverges").pair;
        assert_eq!(
            pair_name(&r, first),
            format!("#{first} Conv2D Default_Conv-op4 output.0")
        );
        let main = main_plots(&page);
        // Outputs only: the weights (l2norm 100) are on the folded plots, not the main ones.
        assert_eq!(
            main.matches("<svg").count(),
            3,
            "l2norm, 1 - cosine, rel error"
        );
        assert!(!main.contains("input.1") && !main.contains("l2norm: 100"));
        assert!(main.contains(&format!(
            "<title>#{first} Conv2D Default_Conv-op4 output.0 B l2norm: 1.5</title>"
        )));
        assert!(page.contains(
            "<summary>Kernel inputs: weights, parameters and activations fed in (6 pairs)</summary>"
        ));
        assert!(page[page.find("<details>").unwrap()..].contains("input.1 A l2norm: 100</title>"));
        // x ticks along the pair index, y ticks in decades.
        assert!(main.contains(r#"<text class="xtick""#) && main.contains(">10</text>"));
        assert!(main.contains(r#"<text class="ytick""#));
        // Error plots on log scales with a labelled floor, no raw cosine.
        assert!(main.contains(
            "1 - cosine per pair, kernel outputs (log scale; below 1e-12 drawn at 1e-12)"
        ));
        assert!(main.contains(
            "max relative error per pair, kernel outputs (log scale; below 1e-12 drawn at 1e-12)"
        ));
        assert!(main.contains("values &lt;= 1e-12 drawn here"));
        assert!(!main.contains("cosine similarity"));
        // Every pair has a row anchor; the points link to them; the top links the first
        // divergent row, which is highlighted.
        assert_eq!(page.matches(r#"<tr id="row-"#).count(), r.cmp.pairs.len());
        assert!(page.contains(&format!(r#"<tr id="row-{first}" class="hl">"#)));
        assert!(main.contains(&format!(r##"<a href="#row-{first}"><circle"##)));
        let top = &page[..page.find("<svg").unwrap()];
        assert!(top.contains(&format!(
            r##"<a id="first" href="#row-{first}">go to its row (#{first})</a>"##
        )));
        // The mark names the pair.
        assert!(main.contains(&format!(
            "<title>first divergent: #{first} Default_Conv-op4</title>"
        )));
    }

    #[test]
    fn a_hostile_kernel_name_is_escaped_in_titles_labels_and_cells() {
        let hostile = "Default_<script>alert('x')</script>&<img src=x onerror=alert(1)>-op4";
        let (a, b) = conv_dumps("html-hostile", hostile);
        assert!(
            a.tensors.iter().any(|t| t.id.op_name == hostile),
            "the name reads back whole"
        );
        let page = compare(&report(&a, &b));
        assert!(
            !page.contains("<script>alert") && !page.contains("<img"),
            "unescaped"
        );
        let escaped = "Default_&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&lt;img src=x onerror=alert(1)&gt;-op4";
        assert!(
            page.contains("<title>first divergent: #")
                && page.contains(&format!(" {escaped}</title>"))
        );
        assert!(page.contains(&format!("Conv2D {escaped} output.0 A l2norm: 1</title>")));
        assert!(page.contains(&format!("<td>{escaped}</td>")));
        // The only script is the page's own sorter.
        assert_eq!(page.matches("<script>").count(), 1);
    }

    #[test]
    fn compare_page_shows_each_pairs_kind_and_the_unpaired_with_nearest_candidates() {
        let (a, b) = conv_dumps("html-kinds", "Default_Conv-op4");
        let mut r = report(&a, &b);
        assert_eq!(r.cmp.pairs.len(), 12);
        // What a cross-framework pairing leaves (the renderer shows the report as it is):
        // a pair by the fused rule and one by module scope, one of A's tensors fused into a
        // node, one of A's unpaired with two candidates, one of B's with none.
        r.cmp.pairs[1].rule = PairRule::Fused;
        r.cmp.pairs[3].rule = PairRule::Scope;
        let (lone_a, c1, c2, lone_b) = (
            r.cmp.pairs[5].a,
            r.cmp.pairs[5].b,
            r.cmp.pairs[7].b,
            r.cmp.pairs[2].b,
        );
        r.cmp.only_in_a = vec![lone_a];
        r.cmp.nearest_a = vec![(lone_a, vec![c1, c2])];
        r.cmp.only_in_b = vec![lone_b];
        r.cmp.fused_a = vec![(r.cmp.pairs[0].a, "/stem/<Conv>".into())];
        let page = compare(&r);
        assert!(page.contains("<th>#</th><th>pairing</th><th>rule</th>"));
        assert!(page.contains(r#"<tr id="row-0"><td>0</td><td>exact</td><td>name</td>"#));
        assert!(page.contains(r#"<tr id="row-1"><td>1</td><td>fused</td><td>fused</td>"#));
        assert!(page.contains(r#"<tr id="row-3"><td>3</td><td>mapped</td><td>scope</td>"#));
        assert!(page.contains("12 pairs (10 exact, 1 mapped, 1 fused), 1 only in A, 1 only in B"));
        let near = format!(
            "<tr><td>nearest</td><td>A</td><td>{}</td><td>{}; {}</td></tr>",
            esc(&who(&a, lone_a)),
            esc(&who(&b, c1)),
            esc(&who(&b, c2))
        );
        assert!(page.contains(&near), "{page}");
        assert!(page.contains(&format!(
            "<tr><td>unpaired</td><td>B</td><td>{}</td><td></td></tr>",
            esc(&who(&b, lone_b))
        )));
        assert!(page.contains(&format!(
            "<tr><td>fused</td><td>A</td><td>{}</td><td>/stem/&lt;Conv&gt;</td></tr>",
            esc(&who(&a, r.cmp.pairs[0].a))
        )));
        // Both sections are open (short) and linked from the summary.
        assert!(page.contains(
            r#"<details id="unpaired" open><summary>Unpaired (1 only in A, 1 only in B)"#
        ));
        assert!(page.contains(r#"<details id="fused" open><summary>Fused (1)"#));
        assert!(
            page.contains(r##"<a href="#unpaired">"##) && page.contains(r##"<a href="#fused">"##)
        );
        // Without any, no section and no link.
        let page = compare(&report(&a, &b));
        assert!(!page.contains("id=\"unpaired\"") && !page.contains("#unpaired"));
        assert!(!page.contains("id=\"fused\"") && !page.contains("#fused"));
    }

    #[test]
    fn inspect_page_links_points_and_the_first_non_finite_row() {
        let root = td::fresh("html-ins");
        let d = td::stat_dump(
            &root,
            &[
                "Relu,Default_Relu-op0,0,0,5,output,0,12,float32,\"(3)\",3,1,2,0".into(),
                "Mul,Default_Mul-op1,0,0,6,input,0,12,float32,\"(3)\",3,1,2,0".into(),
                "Mul,Default_Mul-op1,0,0,7,output,0,12,float32,\"(3)\",nan,nan,nan,1".into(),
                "Relu,Default_Relu-op2,0,0,8,output,0,12,float32,\"(3)\",3,1,5,0".into(),
            ],
        );
        let dump = Dump::open(&d).unwrap();
        let ins = inspect_dump(&dump, 1, &|_, _| {});
        let _ = std::fs::remove_dir_all(&root);
        let r = InspectReport::new(Path::new("x"), &dump, ins, 5);
        let page = inspect(&r);
        assert!(
            page.contains("<title>#0 Relu Default_Relu-op0 l2norm: 2</title>"),
            "{page}"
        );
        assert!(page.contains("<title>#2 Relu Default_Relu-op2 l2norm: 5</title>"));
        assert!(page.contains(r##"<a href="#row-2"><circle"##));
        // Kernel 1's anchor is its highlighted output row, not its input row.
        assert!(
            page.contains(r#"<tr id="row-1" class="hl"><td>1</td>"#),
            "{page}"
        );
        assert!(page.contains(r##"<a href="#row-1">go to its row (#1)</a>"##));
        assert!(page.contains("<title>first non-finite: #1 Default_Mul-op1</title>"));
        assert!(page.contains(r#"<text class="xtick""#) && page.contains("kernel # (run order"));
        assert!(
            !page.contains("<details>"),
            "no parameter kernels, nothing folded"
        );
    }
}
