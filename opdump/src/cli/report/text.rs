//! The terminal renderers: `inspect`'s and `compare`'s report, their warnings and the one
//! summary line on stderr; `stats`' messages. Each takes the command's report value and a writer.

use std::io::{self, Write};

use dump_read::{
    Dump,
    inspect::NonfiniteBasis,
    train::{EXPLODING_GROWTH, EXPLODING_UPDATE, FROZEN_UPDATE, VANISHING_DECAY, VANISHING_NORM},
};

use super::{
    cells::{TREND_HEAD, metric_cells, trend_cells},
    compare_report::CompareReport,
    g, human_bytes,
    inspect_report::InspectReport,
    opt_g,
    stats_report::StatsReport,
    words::{
        note, origin_words, pairing_kind, reasons, role_words, torch_module, who, within_count,
    },
};

/// `warning: PATH: MESSAGE` for each problem met reading `dump` (prefixed `SIDE: ` when
/// `side` names A or B).
pub fn problems(side: Option<&str>, dump: &Dump, err: &mut dyn Write) -> io::Result<()> {
    for p in &dump.problems {
        match side {
            Some(s) => writeln!(err, "warning: {s}: {}: {}", p.path.display(), p.message)?,
            None => writeln!(err, "warning: {}: {}", p.path.display(), p.message)?,
        }
    }
    Ok(())
}

/// `inspect`'s warnings: the dump's problems, then each tensor whose statistics could not be
/// had.
pub fn inspect_warnings(r: &InspectReport<'_>, err: &mut dyn Write) -> io::Result<()> {
    problems(None, r.dump, err)?;
    for (i, m) in &r.ins.errors {
        writeln!(err, "warning: {}: {m}", who(r.dump, *i))?;
    }
    Ok(())
}

/// `inspect`'s summary line (stderr).
pub fn inspect_summary(r: &InspectReport<'_>, err: &mut dyn Write) -> io::Result<()> {
    writeln!(
        err,
        "inspected {} tensors of {} kernels in {}: {}",
        r.dump.tensors.len(),
        r.ins.kernels.len(),
        r.dir.display(),
        match (&r.ins.first_nonfinite, &r.ins.first_nonfinite_tensor) {
            (Some(f), _) => format!(
                "first non-finite: {}{}",
                who(r.dump, f.tensor),
                unread(r.ins.errors.len())
            ),
            (None, Some(t)) => format!(
                "first non-finite tensor: {}{}",
                who(r.dump, t.tensor),
                unread(r.ins.errors.len())
            ),
            (None, None) if r.ins.errors.is_empty() => "all finite".into(),
            (None, None) => format!(
                "all finite among those read, {} could not be read",
                r.ins.errors.len()
            ),
        }
    )
}

/// `; N could not be read` after a finding, when tensors could not be read.
fn unread(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!("; {n} could not be read")
    }
}

/// `inspect`'s terminal report.
pub fn inspect(r: &InspectReport<'_>, out: &mut dyn Write) -> io::Result<()> {
    out.write_all(inspect_text(r).as_bytes())
}

/// Why the first non-finite operator is the one, in words.
fn basis_words(basis: NonfiniteBasis, inputs_dumped: bool) -> &'static str {
    match (basis, inputs_dumped) {
        (NonfiniteBasis::FiniteInputs, _) => {
            "its dumped inputs are all finite: this kernel produced the first NaN/Inf"
        }
        (NonfiniteBasis::FiniteProducers, _) => {
            "its inputs were not dumped, but the outputs of the kernels feeding it (graphs/*.ir) are finite: this kernel produced the first NaN/Inf"
        }
        (_, false) => {
            "its inputs were not dumped: this is the first kernel with a non-finite output"
        }
        (_, true) => {
            "no kernel with finite inputs produced one: this is the first kernel with a non-finite output"
        }
    }
}

/// `-` or the count.
fn count(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

fn inspect_text(r: &InspectReport<'_>) -> String {
    let (dump, ins) = (r.dump, &r.ins);
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
            human_bytes(it.bytes)
        );
    }
    s += "\nfirst non-finite operator: ";
    match &ins.first_nonfinite {
        None if ins.first_nonfinite_tensor.is_some() => {
            s += "none (every kernel output is finite, but not every tensor)\n"
        }
        None if !ins.errors.is_empty() => {
            s += &format!(
                "none (every tensor read is finite; {} could not be read)\n",
                ins.errors.len()
            )
        }
        None => s += "none (every tensor is finite)\n",
        Some(f) => {
            let st = r.stats(f.tensor);
            s += &format!(
                "{}\n  {}\n  nan {} +inf {} -inf {}, max {} min {}\n  {}\n",
                who(dump, f.tensor),
                role_words(&r.roles[f.kernel]),
                count(st.nan),
                count(st.pos_inf),
                count(st.neg_inf),
                opt_g(st.max),
                opt_g(st.min),
                basis_words(f.basis, f.inputs_dumped)
            );
        }
    }
    if let Some(t) = ins
        .first_nonfinite_tensor
        .as_ref()
        .filter(|_| r.tensor_apart)
    {
        let st = r.stats(t.tensor);
        s += &format!(
            "first non-finite tensor in run order: {}\n  {}\n  nan {} +inf {} -inf {}\n  {}\n",
            who(dump, t.tensor),
            role_words(&r.roles[t.kernel]),
            count(st.nan),
            count(st.pos_inf),
            count(st.neg_inf),
            origin_words(&t.origin)
        );
    }
    if !ins.growth.is_empty() {
        s += &format!(
            "\ntop {} kernels by growth (output / input):\n",
            r.top.min(ins.growth.len())
        );
        for gr in ins.growth.iter().take(r.top) {
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
    s += &trends_text(r);
    if !ins.oddities.is_empty() {
        s += &format!("\noutputs that look odd ({}):\n", ins.oddities.len());
        for o in ins.oddities.iter().take(r.top.max(10)) {
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

/// The parameters' table (empty without a training dump).
fn trends_text(r: &InspectReport<'_>) -> String {
    let params = &r.ins.parameters;
    if params.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = params
        .iter()
        .zip(&r.trends)
        .map(|(p, f)| trend_cells(p, f))
        .collect();
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
    let mut s = format!(
        "\nparameters over the dumped steps: gradient l2 norm and update ratio |dw|/|w| \
         ({} of {} flagged; exploding: a non-finite norm, growth x{} or ratio >= {}; \
         frozen: ratio <= {} at every step; vanishing: last norm <= {} or <= {} x the largest)\n",
        r.flagged,
        params.len(),
        g(EXPLODING_GROWTH),
        g(EXPLODING_UPDATE),
        g(FROZEN_UPDATE),
        g(VANISHING_NORM),
        g(VANISHING_DECAY),
    );
    s += &line(&TREND_HEAD);
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        s += &line(&cells);
    }
    s
}

/// `compare`'s summary line (stderr).
pub fn compare_summary(r: &CompareReport<'_>, err: &mut dyn Write) -> io::Result<()> {
    let cmp = &r.cmp;
    writeln!(
        err,
        "compared {} pairs ({} only in A, {} only in B{}): {}",
        cmp.pairs.len(),
        cmp.only_in_a.len(),
        cmp.only_in_b.len(),
        within_count(r.within_tensors, r.cmp.fused_a.len() + r.cmp.fused_b.len()),
        match (&r.first, r.unreadable) {
            (Some(f), n) => format!(
                "{} diverge{}; first divergent: {}",
                r.diverged,
                if n > 0 {
                    format!(", {n} could not be read")
                } else {
                    String::new()
                },
                who(r.a, cmp.pairs[f.pair].a)
            ),
            (None, 0) => "all within tolerance".into(),
            (None, n) => format!("{n} could not be read, the others within tolerance"),
        }
    )
}

/// `compare`'s terminal table.
pub fn compare(r: &CompareReport<'_>, out: &mut dyn Write) -> io::Result<()> {
    out.write_all(compare_text(r).as_bytes())
}

fn compare_text(r: &CompareReport<'_>) -> String {
    let (a, b, cmp) = (r.a, r.b, &r.cmp);
    let mut s = format!(
        "A: {} ({} tensors)\nB: {} ({} tensors)\n{} pairs, {} only in A, {} only in B{}\n\n",
        a.root.display(),
        a.tensors.len(),
        b.root.display(),
        b.tensors.len(),
        cmp.pairs.len(),
        cmp.only_in_a.len(),
        cmp.only_in_b.len(),
        within_count(r.within_tensors, r.cmp.fused_a.len() + r.cmp.fused_b.len()),
    );
    s += "first divergent operator: ";
    match &r.first {
        None if r.unreadable > 0 => {
            s += &format!(
                "none (every pair read is within tolerance; {} could not be read)\n",
                r.unreadable
            )
        }
        None => s += "none (every pair is within tolerance)\n",
        Some(f) => {
            let p = &cmp.pairs[f.pair];
            s += &format!("{}\n", who(a, p.a));
            if let Some(node) = &f.onnx_node {
                s += &format!("  ONNX node {node}\n");
            }
            if let Some(m) = torch_module(a, p.a).or_else(|| torch_module(b, p.b)) {
                s += &format!("  torch module {m}\n");
            }
            if p.rule != dump_read::compare::PairRule::Name {
                s += &format!(
                    "  paired ({}) with B's {} {}\n",
                    p.rule.as_str(),
                    b.tensors[p.b].id.op_name,
                    b.tensors[p.b].io_slot()
                );
            }
            s += &format!("  {}\n", reasons(p));
        }
    }
    s += &format!(
        "\n{:>5} {:<7} {:<5} {:>4} {:<14} {:<9} {:>10} {:>11} {:>11} {:>9} {:>9} {:>10}  op\n",
        "#",
        "pairing",
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
    for &n in &r.listed {
        let p = &cmp.pairs[n];
        let t = &a.tensors[p.a];
        let c = metric_cells(p);
        s += &format!(
            "{:>5} {:<7} {:<5} {:>4} {:<14} {:<9} {:>10} {:>11} {:>11} {:>9} {:>9} {:>10}  {}{}\n",
            n,
            pairing_kind(p.rule),
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
            if p.diverged() {
                "  DIVERGED"
            } else if p.unreadable() {
                "  UNREADABLE"
            } else {
                ""
            }
        );
    }
    let hidden = r.hidden();
    if hidden > 0 {
        s += &format!("  ... {hidden} more pairs within tolerance (--all lists them)\n");
    }
    if !r.noted.is_empty() {
        s += &format!("\nnotes ({} pairs):\n", r.noted.len());
        for &n in r.noted.iter().take(10) {
            let p = &cmp.pairs[n];
            for nt in &p.notes {
                s += &format!("  #{n} {}: {}\n", a.tensors[p.a].id.op_name, note(nt));
            }
        }
        if r.noted.len() > 10 {
            s += &format!("  ... {} more (--json lists them)\n", r.noted.len() - 10);
        }
    }
    if !r.within.is_empty() {
        s += &format!(
            "\ninside ONNX nodes the dumps compute differently ({} nodes: a decomposition's helpers and the inputs are not paired, the node's outputs are):\n",
            r.within.len()
        );
        for w in r.within.iter().take(20) {
            s += &format!("  {}: {} tensors in A, {} in B\n", w.node, w.in_a, w.in_b);
        }
        if r.within.len() > 20 {
            s += &format!("  ... {} more (--json lists them)\n", r.within.len() - 20);
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

/// `stats`' messages, per file in command-line order: the reader's warning, then a note for an
/// empty tensor or the error of a file that could not be summarised.
pub fn stats_messages(r: &StatsReport, err: &mut dyn Write) -> io::Result<()> {
    for f in &r.files {
        if let Some(w) = &f.warning {
            writeln!(err, "warning: {w}")?;
        }
        match &f.row {
            Ok(Some(_)) => {}
            Ok(None) => writeln!(
                err,
                "note: {}: empty tensor, no row (MindSpore writes none)",
                f.path.display()
            )?,
            Err(m) => writeln!(err, "error: {}: {m}", f.path.display())?,
        }
    }
    Ok(())
}
