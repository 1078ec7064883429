//! Rendering for `inspect`, `compare` and `stats`. Each command builds one report value
//! ([`inspect_report::InspectReport`], [`compare_report::CompareReport`],
//! [`stats_report::StatsReport`]) that holds everything an output needs; one renderer
//! per format takes it: [`text`] (the terminal report, warnings and the stderr summary),
//! [`json`] (`--json`), [`csv`] (compare's `--csv`, stats' rows) and [`html`] (`--html`: one page with
//! [`svg`] plots and a [`graph_view`] of the model). The renderers format; they never derive a finding again (a kernel's colour in the
//! graph view included: [`shade`]). Around them:
//! wordings and table cells shared by several formats ([`words`], [`cells`]), progress on
//! stderr, and output files written whole (temp file + rename; Ctrl-C removes the temp file,
//! so no partial output file is ever left).

pub mod cells;
pub mod compare_report;
pub mod csv;
pub mod graph_view;
pub mod html;
pub mod inspect_report;
pub mod json;
pub mod output;
pub mod progress;
pub mod shade;
pub mod stats_report;
pub mod svg;
#[cfg(test)]
mod test_dumps;
pub mod text;
pub mod words;

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

/// `&`, `<`, `>`, `"` and `'` escaped.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}
