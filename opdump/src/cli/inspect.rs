//! `opdump inspect DIR [--json] [--html FILE] [--top N]`: what a dump holds, and the first
//! operator that produced a NaN or an infinity.
//!
//! Per rank and iteration: kernels, tensors and bytes. The **first non-finite operator**: in
//! run order (iteration, rank, then the tensors' timestamps), the first kernel with a NaN or
//! ±Inf in an output while all its dumped inputs are finite; when no such kernel exists (inputs
//! not dumped, e.g. `input_output: 2`), the first kernel with a non-finite output, and the
//! report says so. Then the kernels that grow max|x| or the l2 norm most from inputs to outputs,
//! and outputs that are all zeros or constant. Statistics come from `statistic.csv` rows and
//! are computed by streaming the `.npy` files where the rows lack them. The **first
//! non-finite tensor** in run order (kernel inputs before outputs, Parameters too) is reported
//! with where it comes from when it is not that operator's output: a NaN that enters through a
//! graph input or a weight is found even when every kernel output stays finite.
//!
//! On a training dump both name the kernel's role (`dump_read::train::Role`: a gradient and
//! its parameter, a parameter, an activation, the optimizer's update or state), and a table
//! gives per parameter its gradient norm and update ratio over the steps with a verdict
//! (exploding, frozen, vanishing, ok; thresholds in `dump_read::train`), in `--json`
//! (`parameters`, `parameter_thresholds`) and on the `--html` page (two log plots and a table).
//!
//! Exit code: 0 when every tensor is finite, 1 when any tensor holds a NaN or Inf, 2 when the
//! dump cannot be read.

use std::{io::Write, path::PathBuf};

use dump_read::{
    Dump,
    inspect::{Inspection, Origin, inspect},
    train::{
        EXPLODING_GROWTH, EXPLODING_UPDATE, FROZEN_UPDATE, ParameterTrend, Role, VANISHING_DECAY,
        VANISHING_NORM, parameter_of,
    },
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

/// Arguments of `opdump inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The dump directory (the config's `path`, or one rank_N directory such as rank_0), an
    /// msprobe dump path (step{N}/rank{R}|proc{pid}/dump.json below it), CANN dump files, an
    /// .npz of reference arrays, a directory of NAME.npy, Polygraphy's --save-outputs JSON, or a
    /// device agent's saved frame stream (a file, or a directory of *.opstream files).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Print one JSON object instead of the report (key `first_nonfinite`).
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML page with plots to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// How many kernels to list by growth.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
    /// Worker threads (default: all cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

/// The threads to use.
pub fn threads(n: Option<usize>) -> usize {
    n.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

/// Runs `inspect`: the report on `out` (or `--html`), warnings and the summary on `err`;
/// [`Verdict::Found`] when any tensor holds a NaN or Inf.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Outcome {
    if args.html.is_some() {
        report::output::install_interrupt_handler();
    }
    let dump = match Dump::open(&args.dir) {
        Ok(d) => d,
        Err(e) => {
            return Err(Failure::Invalid(e.to_string()));
        }
    };
    let bar = Progress::new("inspect", dump.tensors.len(), !args.json);
    let ins = inspect(&dump, threads(args.threads), &|d, _| bar.set(d));
    bar.finish();
    let verdict = if ins.first_nonfinite.is_some() || ins.first_nonfinite_tensor.is_some() {
        Verdict::Found
    } else {
        Verdict::Clean
    };
    for p in &dump.problems {
        let _ = writeln!(err, "warning: {}: {}", p.path.display(), p.message);
    }
    for (i, m) in &ins.errors {
        let _ = writeln!(err, "warning: {}: {m}", who(&dump, *i));
    }
    if args.json {
        let _ = writeln!(out, "{:#}", to_json(&dump, &ins, args.top));
    } else {
        let _ = out.write_all(text(&dump, &ins, args.top).as_bytes());
    }
    if let Some(path) = &args.html
        && let Err(e) = report::output::write_atomic(path, page(&dump, &ins).as_bytes())
    {
        return Err(Failure::Invalid(format!("cannot write the HTML page: {e}")));
    }
    let _ = writeln!(
        err,
        "inspected {} tensors of {} kernels in {}: {}",
        dump.tensors.len(),
        ins.kernels.len(),
        args.dir.display(),
        match (&ins.first_nonfinite, &ins.first_nonfinite_tensor) {
            (Some(f), _) => format!("first non-finite: {}", who(&dump, f.tensor)),
            (None, Some(t)) => format!("first non-finite tensor: {}", who(&dump, t.tensor)),
            (None, None) => "all finite".into(),
        }
    );
    Ok(verdict)
}

/// Where the first non-finite tensor comes from, in words.
fn origin_words(o: &Origin) -> String {
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

/// The first non-finite tensor's line(s), when it is not the operator's output already shown.
fn tensor_text(dump: &Dump, ins: &Inspection) -> String {
    let Some(t) = &ins.first_nonfinite_tensor else {
        return String::new();
    };
    if ins
        .first_nonfinite
        .as_ref()
        .is_some_and(|f| f.tensor == t.tensor)
    {
        return String::new();
    }
    let st = ins.stats[t.tensor].clone().unwrap_or_default();
    format!(
        "first non-finite tensor in run order: {}\n  {}\n  nan {} +inf {} -inf {}\n  {}\n",
        who(dump, t.tensor),
        role_words(&ins.kernels[t.kernel]),
        st.nan.map_or("-".into(), |v| v.to_string()),
        st.pos_inf.map_or("-".into(), |v| v.to_string()),
        st.neg_inf.map_or("-".into(), |v| v.to_string()),
        origin_words(&t.origin)
    )
}

fn text(dump: &Dump, ins: &Inspection, top: usize) -> String {
    let mut s = format!(
        "dump {} ({} layout): {} tensors, {} kernels\n\n{:>5} {:>10} {:>8} {:>8} {:>12}\n",
        dump.root.display(),
        dump.dialect,
        dump.tensors.len(),
        ins.kernels.len(),
        "rank",
        "iteration",
        "kernels",
        "tensors",
        "bytes"
    );
    for it in &ins.iterations {
        s += &format!(
            "{:>5} {:>10} {:>8} {:>8} {:>12}\n",
            it.rank,
            it.iteration,
            it.kernels,
            it.tensors,
            report::human_bytes(it.bytes)
        );
    }
    s += "\nfirst non-finite operator: ";
    match &ins.first_nonfinite {
        None if ins.first_nonfinite_tensor.is_some() => {
            s += "none (every kernel output is finite, but not every tensor)\n"
        }
        None => s += "none (every tensor is finite)\n",
        Some(f) => {
            let st = ins.stats[f.tensor].clone().unwrap_or_default();
            s += &format!(
                "{}\n  {}\n  nan {} +inf {} -inf {}, max {} min {}\n  {}\n",
                who(dump, f.tensor),
                role_words(&ins.kernels[f.kernel]),
                st.nan.map_or("-".into(), |v| v.to_string()),
                st.pos_inf.map_or("-".into(), |v| v.to_string()),
                st.neg_inf.map_or("-".into(), |v| v.to_string()),
                opt_g(st.max),
                opt_g(st.min),
                match (f.basis, f.inputs_dumped) {
                    (dump_read::inspect::NonfiniteBasis::FiniteInputs, _) =>
                        "its dumped inputs are all finite: this kernel produced the first NaN/Inf",
                    (dump_read::inspect::NonfiniteBasis::FiniteProducers, _) =>
                        "its inputs were not dumped, but the outputs of the kernels feeding it (graphs/*.ir) are finite: this kernel produced the first NaN/Inf",
                    (_, false) =>
                        "its inputs were not dumped: this is the first kernel with a non-finite output",
                    (_, true) =>
                        "no kernel with finite inputs produced one: this is the first kernel with a non-finite output",
                }
            );
        }
    }
    s += &tensor_text(dump, ins);
    if !ins.growth.is_empty() {
        s += &format!(
            "\ntop {} kernels by growth (output / input):\n",
            top.min(ins.growth.len())
        );
        for gr in ins.growth.iter().take(top) {
            let k = &ins.kernels[gr.kernel];
            s += &format!(
                "  max|x| x{:<10} l2norm x{:<10} {} {} (iteration {})\n",
                g(gr.max_abs_ratio),
                g(gr.l2norm_ratio),
                k.op_type,
                k.op_name,
                k.iteration
            );
        }
    }
    s += &trends_text(&ins.parameters);
    if !ins.oddities.is_empty() {
        s += &format!("\noutputs that look odd ({}):\n", ins.oddities.len());
        for o in ins.oddities.iter().take(top.max(10)) {
            s += &format!("  {}: {}\n", who(dump, o.tensor), o.what);
        }
    }
    if !dump.problems.is_empty() {
        s += &format!(
            "\n{} problem(s) reading the dump (details on stderr)\n",
            dump.problems.len()
        );
    }
    s
}

fn to_json(dump: &Dump, ins: &Inspection, top: usize) -> Value {
    let first = match &ins.first_nonfinite {
        None => Value::Null,
        Some(f) => {
            let mut m = Map::new();
            j::tensor_id_into(&mut m, dump, f.tensor);
            m.insert("basis".into(), json!(f.basis.as_str()));
            role_into(&mut m, &ins.kernels[f.kernel]);
            m.insert("inputs_dumped".into(), json!(f.inputs_dumped));
            m.insert(
                "stats".into(),
                j::stats(&ins.stats[f.tensor].clone().unwrap_or_default()),
            );
            let k = &ins.kernels[f.kernel];
            let inputs: Vec<Value> = k
                .tensors
                .iter()
                .filter(|&&i| dump.tensors[i].id.io == dump_host::layout::Io::Input)
                .map(|&i| {
                    json!({"slot": dump.tensors[i].id.slot,
                    "stats": j::stats(&ins.stats[i].clone().unwrap_or_default())})
                })
                .collect();
            m.insert("inputs".into(), json!(inputs));
            Value::Object(m)
        }
    };
    json!({
        "root": dump.root.display().to_string(),
        "layout": dump.dialect,
        "tensors": dump.tensors.len(),
        "kernels": ins.kernels.len(),
        "iterations": ins.iterations.iter().map(|i| json!({
            "rank": i.rank, "iteration": i.iteration, "kernels": i.kernels,
            "tensors": i.tensors, "bytes": i.bytes})).collect::<Vec<_>>(),
        "first_nonfinite": first,
        "first_nonfinite_tensor": ins.first_nonfinite_tensor.as_ref().map_or(Value::Null, |t| {
            let mut m = Map::new();
            j::tensor_id_into(&mut m, dump, t.tensor);
            m.insert("origin".into(), json!(t.origin.as_str()));
            role_into(&mut m, &ins.kernels[t.kernel]);
            if let Origin::KernelInput { producer: Some(p) } = &t.origin {
                m.insert("producer".into(), json!(p));
            }
            m.insert(
                "stats".into(),
                j::stats(&ins.stats[t.tensor].clone().unwrap_or_default()),
            );
            Value::Object(m)
        }),
        "growth": ins.growth.iter().take(top).map(|gr| {
            let k = &ins.kernels[gr.kernel];
            json!({"rank": k.rank, "iteration": k.iteration, "graph": k.graph,
                "op_type": k.op_type, "op_name": k.op_name,
                "max_abs_ratio": j::num(gr.max_abs_ratio), "l2norm_ratio": j::num(gr.l2norm_ratio)})
        }).collect::<Vec<_>>(),
        "parameters": ins.parameters.iter().map(trend_json).collect::<Vec<_>>(),
        "parameter_thresholds": {
            "exploding_growth": EXPLODING_GROWTH, "exploding_update": EXPLODING_UPDATE,
            "frozen_update": FROZEN_UPDATE, "vanishing_norm": VANISHING_NORM,
            "vanishing_decay": VANISHING_DECAY},
        "oddities": ins.oddities.iter().map(|o| {
            let mut m = Map::new();
            j::tensor_id_into(&mut m, dump, o.tensor);
            m.insert("what".into(), json!(o.what));
            Value::Object(m)
        }).collect::<Vec<_>>(),
        "problems": dump.problems.iter().map(|p| json!({
            "path": p.path.display().to_string(), "message": p.message})).collect::<Vec<_>>(),
        "errors": ins.errors.iter().map(|(i, m)| {
            let mut o = Map::new();
            j::tensor_id_into(&mut o, dump, *i);
            o.insert("message".into(), json!(m));
            Value::Object(o)
        }).collect::<Vec<_>>(),
    })
}

/// The HTML page: per-kernel output l2norm and max|x| along the run order, the first
/// non-finite kernel marked, and a sortable table of every tensor.
fn page(dump: &Dump, ins: &Inspection) -> String {
    let per_kernel = |f: fn(&dump_read::Stats) -> Option<f64>| -> Vec<f64> {
        ins.kernels
            .iter()
            .map(|k| {
                k.tensors
                    .iter()
                    .filter(|&&i| dump.tensors[i].id.io == dump_host::layout::Io::Output)
                    .filter_map(|&i| ins.stats[i].as_ref().and_then(f))
                    .fold(f64::NAN, |m, v| if m.is_nan() { v } else { m.max(v) })
            })
            .collect()
    };
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
                values: per_kernel(|s| s.l2norm),
                color: "#1f5fbf",
            }],
            mark: mark.clone(),
            log: true,
        },
        Plot {
            title: "output max|x| per kernel (run order, log scale)".into(),
            series: vec![Series {
                name: "max|x|".into(),
                values: per_kernel(dump_read::Stats::max_abs),
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
            let st = ins.stats[i].clone().unwrap_or_default();
            if ins.first_nonfinite.as_ref().is_some_and(|f| f.tensor == i) {
                hl = Some(rows.len());
            }
            rows.push(vec![
                n.to_string(),
                t.rank.to_string(),
                t.iteration.to_string(),
                t.id.op_type.clone(),
                t.id.op_name.clone(),
                Role::of_kernel(k).as_str().to_owned(),
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
            html::esc(&who(dump, f.tensor)),
            html::esc(&role_words(&ins.kernels[f.kernel]))
        ),
        None => match &ins.first_nonfinite_tensor {
            Some(t) => format!(
                "<b>First non-finite tensor:</b> {} ({}; {}); every kernel output is finite.",
                html::esc(&who(dump, t.tensor)),
                html::esc(&role_words(&ins.kernels[t.kernel])),
                html::esc(&origin_words(&t.origin))
            ),
            None => "Every tensor is finite.".into(),
        },
    };
    html::page_with(
        &format!("opdump inspect {}", dump.root.display()),
        &summary,
        &plots,
        &trends_html(&ins.parameters),
        &head,
        &rows,
        hl,
    )
}

/// What a kernel is in a training step, in words: `a gradient (of parameter conv1_weight)`.
fn role_words(k: &dump_read::KernelRef) -> String {
    let role = Role::of_kernel(k);
    let what = match role {
        Role::Activation => "a forward activation",
        Role::Gradient => "a gradient",
        Role::Parameter => "a parameter (its value after the step)",
        Role::Optimizer => "the optimizer's update or state",
    };
    match parameter_of(&k.op_type, &k.op_name) {
        Some(p) if role != Role::Parameter => format!("{what} (of parameter {p})"),
        _ => what.to_owned(),
    }
}

/// `role`, and `parameter` when the kernel belongs to one, into a JSON object.
fn role_into(m: &mut Map<String, Value>, k: &dump_read::KernelRef) {
    m.insert("role".into(), json!(Role::of_kernel(k).as_str()));
    if let Some(p) = parameter_of(&k.op_type, &k.op_name) {
        m.insert("parameter".into(), json!(p));
    }
}

/// The largest finite value of a series (`None` when none is).
fn series_max(v: &[Option<f64>]) -> Option<f64> {
    v.iter()
        .flatten()
        .copied()
        .filter(|x| x.is_finite())
        .reduce(f64::max)
}

fn first_last(v: &[Option<f64>]) -> (Option<f64>, Option<f64>) {
    (
        v.iter().flatten().next().copied(),
        v.iter().flatten().last().copied(),
    )
}

/// One table row per parameter: name, steps, gradient norm first/last/largest finite, growth
/// per step, update ratio last/largest finite, the first step the exploding rule holds, the
/// first step with a non-finite one, verdict.
fn trend_cells(p: &ParameterTrend) -> Vec<String> {
    let (g0, g1) = first_last(&p.grad_norm);
    let (_, u1) = first_last(&p.update_ratio);
    let has_u = p.update_ratio.iter().any(Option::is_some);
    vec![
        p.rank.to_string(),
        p.name.clone(),
        p.steps.len().to_string(),
        opt_g(g0),
        opt_g(g1),
        opt_g(series_max(&p.grad_norm)),
        g(p.growth_per_step),
        opt_g(u1),
        if has_u {
            opt_g(series_max(&p.update_ratio))
        } else {
            "-".into()
        },
        p.exploding_from.map_or("-".into(), |s| s.to_string()),
        p.first_nonfinite_step.map_or("-".into(), |s| s.to_string()),
        p.verdict.as_str().to_owned(),
    ]
}

const TREND_HEAD: [&str; 12] = [
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

/// The parameters' table of the terminal report (empty without a training dump).
fn trends_text(params: &[ParameterTrend]) -> String {
    if params.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = params.iter().map(trend_cells).collect();
    let widths: Vec<usize> = (0..TREND_HEAD.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].len())
                .chain([TREND_HEAD[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| -> String {
        let mut l = String::from(" ");
        for (c, cell) in cells.iter().enumerate() {
            if c == 1 {
                l += &format!(" {cell:<w$}", w = widths[c]);
            } else {
                l += &format!(" {cell:>w$}", w = widths[c]);
            }
        }
        l.trim_end().to_owned() + "\n"
    };
    let flagged = params
        .iter()
        .filter(|p| p.verdict != dump_read::train::Verdict::Ok)
        .count();
    let mut s = format!(
        "\nparameters over the dumped steps: gradient l2 norm and update ratio |dw|/|w| \
         ({flagged} of {} flagged; exploding: a non-finite norm, growth x{} or ratio >= {}; \
         frozen: ratio <= {} at every step; vanishing: last norm <= {} or <= {} x the largest)\n",
        params.len(),
        g(EXPLODING_GROWTH),
        g(EXPLODING_UPDATE),
        g(FROZEN_UPDATE),
        g(VANISHING_NORM),
        g(VANISHING_DECAY),
    );
    s += &line(&TREND_HEAD);
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        s += &line(&cells);
    }
    s
}

/// `--json`: one parameter's series and verdict.
fn trend_json(p: &ParameterTrend) -> Value {
    let series = |v: &[Option<f64>]| -> Vec<Value> {
        v.iter().map(|x| x.map_or(Value::Null, j::num)).collect()
    };
    json!({
        "rank": p.rank,
        "parameter": p.name,
        "steps": p.steps,
        "grad_norm": series(&p.grad_norm),
        "update_ratio": series(&p.update_ratio),
        "weight_norm": series(&p.weight_norm),
        "growth_per_step": j::num(p.growth_per_step),
        "first_nonfinite_step": p.first_nonfinite_step,
        "exploding_from": p.exploding_from,
        "verdict": p.verdict.as_str(),
    })
}

/// `--html`: the parameters' gradient norms and update ratios over the steps (log plots, one
/// line per parameter) and their table.
fn trends_html(params: &[ParameterTrend]) -> String {
    if params.is_empty() {
        return String::new();
    }
    const COLORS: [&str; 8] = [
        "#1f5fbf", "#d62728", "#2a8f2a", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
    ];
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
    s += &html::svg(&plot("gradient l2norm per step (log scale)", |p| {
        &p.grad_norm
    }));
    s += &html::svg(&plot("update ratio |dw|/|w| per step (log scale)", |p| {
        &p.update_ratio
    }));
    let rows: Vec<Vec<String>> = params.iter().map(trend_cells).collect();
    s += &html::table(&TREND_HEAD, &rows);
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
