//! Line plots drawn as inline SVG, written by hand (none of a plotting crate's machinery is
//! needed). A plot is a set of points along an integer x axis (a kernel's or a pair's index
//! in run order), with one value per point for each line. The `<svg>` has a `viewBox` and no
//! fixed size, so the page's CSS stretches it to the window's width; both axes carry ticks
//! with round numbers; every drawn point has a `<title>` (the browser's hover tooltip: the
//! point's name and value) and, where the point has a table row, is a link to `#row-N`.
//! Long series are reduced to bucket maxima, so that a spike stays visible and a page for a
//! million tensors stays small.

use std::fmt::Write as _;

use super::{esc, g};

/// One line of a plot.
#[derive(Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// One value per point of the plot; non-finite (or, on a log scale without a floor,
    /// non-positive) values leave a gap.
    pub values: Vec<f64>,
    /// CSS colour.
    pub color: &'static str,
}

/// A plot along the run order.
#[derive(Clone)]
pub struct Plot {
    /// Title.
    pub title: String,
    /// What the x axis counts (`kernel index (run order)`).
    pub x_label: String,
    /// The x axis spans `0..x_end` (how many kernels or pairs there are, plotted or not).
    pub x_end: usize,
    /// Each point's position on the x axis.
    pub xs: Vec<usize>,
    /// Each point's name, shown when the pointer rests on it.
    pub names: Vec<String>,
    /// Each point's table row (`id="row-N"`), linked from the point; empty for no links.
    pub rows: Vec<Option<usize>>,
    /// Lines, each with one value per point.
    pub series: Vec<Series>,
    /// An x position to mark (the first divergent or non-finite operator) and its label.
    pub mark: Option<(usize, String)>,
    /// Log10 y axis.
    pub log: bool,
    /// On a log axis: values below it (zero and negative ones included) are drawn at it, and
    /// the axis says so; `+inf` (an error that is no number: non-finite values that differ)
    /// is drawn as a triangle on the top edge.
    pub floor: Option<f64>,
}

impl Plot {
    /// An empty plot (no point, no line) with a title and an x axis of `x_end` positions.
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, x_end: usize) -> Plot {
        Plot {
            title: title.into(),
            x_label: x_label.into(),
            x_end,
            xs: Vec::new(),
            names: Vec::new(),
            rows: Vec::new(),
            series: Vec::new(),
            mark: None,
            log: false,
            floor: None,
        }
    }

    /// The value drawn for `v` in axis units (log10 on a log axis), or `None` for a gap.
    fn y_of(&self, v: f64) -> Option<f64> {
        if v == f64::INFINITY && self.log && self.floor.is_some() {
            return Some(f64::INFINITY);
        }
        if !v.is_finite() {
            return None;
        }
        if !self.log {
            return Some(v);
        }
        let v = match self.floor {
            Some(f) => v.max(f),
            None => v,
        };
        (v > 0.0).then(|| v.log10())
    }
}

/// The viewBox's width and height (the page scales the plot to its width).
pub const W: f64 = 960.0;
const H: f64 = 260.0;
const PAD_L: f64 = 72.0;
const PAD_R: f64 = 16.0;
const PAD_T: f64 = 26.0;
const PAD_B: f64 = 42.0;
/// Width of a character of the 11-px labels, taken large (sans-serif digits and letters are
/// narrower), so that a label whose length is estimated with it fits for sure.
const CHAR_W: f64 = 7.0;

/// Most points a line gets: longer series are reduced to the largest value of each of this
/// many buckets (a spike stays visible), so a page for a million tensors stays small and
/// quick to open. About one point per unit of the plot area's width ([`W`] less the
/// margins): more would only overlap.
pub const MAX_POINTS: usize = 1000;

/// For each bucket of `per` consecutive points, the point with the largest drawn value
/// (`None` for a bucket with nothing to draw); `per` is 1 for a short series.
fn reduce(ys: &[Option<f64>], per: usize) -> Vec<Option<usize>> {
    (0..ys.len())
        .step_by(per.max(1))
        .map(|start| {
            (start..(start + per).min(ys.len()))
                .filter_map(|i| ys[i].map(|y| (i, y)))
                .fold(None, |m: Option<(usize, f64)>, (i, y)| match m {
                    Some((_, my)) if my >= y => m,
                    _ => Some((i, y)),
                })
                .map(|(i, _)| i)
        })
        .collect()
}

/// A step of 1, 2 or 5 times a power of ten that cuts `span` into about `target` parts.
fn nice_step(span: f64, target: f64) -> f64 {
    let raw = (span / target).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// The x ticks of an axis of `x_end` positions: multiples of a round step (at least 1).
pub fn x_ticks(x_end: usize) -> Vec<usize> {
    let last = x_end.saturating_sub(1);
    let step = (nice_step(last.max(1) as f64, 10.0).round() as usize).max(1);
    (0..=last).step_by(step).collect()
}

/// The y axis's range (in axis units) and its ticks, from the drawn values' range: round
/// numbers for a linear axis (a constant series gets a range around it), whole decades for
/// a log one.
pub fn y_ticks(lo: f64, hi: f64, log: bool) -> (f64, f64, Vec<f64>) {
    let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    if log {
        lo = lo.floor();
        hi = hi.ceil();
        if hi <= lo {
            hi = lo + 1.0;
        }
        let step = ((hi - lo) / 8.0).ceil().max(1.0);
        let mut ticks: Vec<f64> = (0..)
            .map(|k| lo + step * k as f64)
            .take_while(|&t| t <= hi + 1e-9)
            .collect();
        // One or two decades: 2 and 5 times each power of ten too.
        if hi - lo <= 2.0 {
            let decades = ticks.clone();
            for d in &decades[..decades.len() - 1] {
                ticks.extend([d + 2f64.log10(), d + 5f64.log10()]);
            }
            ticks.sort_by(f64::total_cmp);
        }
        return (lo, hi, ticks);
    }
    let scale = lo.abs().max(hi.abs());
    if hi - lo <= scale * 1e-9 || hi - lo < 1e-300 {
        let d = if scale == 0.0 { 1.0 } else { scale * 0.1 };
        (lo, hi) = (lo - d, hi + d);
    }
    let step = nice_step(hi - lo, 5.0);
    let (lo, hi) = (
        (lo / step + 1e-9).floor() * step,
        (hi / step - 1e-9).ceil() * step,
    );
    let n = ((hi - lo) / step).round() as usize;
    let ticks = (0..=n).map(|k| lo + step * k as f64).collect();
    (lo, hi, ticks)
}

/// A y tick's label: the value (10^t on a log axis) with noise digits dropped.
fn tick_label(t: f64, log: bool) -> String {
    if log {
        g(10f64.powf(t))
    } else if t.abs() < 1e-12 {
        "0".into()
    } else {
        g(t)
    }
}

/// Where the mark's label goes so that it stays inside the plot: (x, `text-anchor`, the text,
/// cut with `…` when it is longer than the room on the wider side of the mark line).
pub fn mark_label(x: f64, text: &str) -> (f64, &'static str, String) {
    let right = W - PAD_R - (x + 4.0);
    let left = (x - 4.0) - 2.0;
    let (tx, anchor, room) = if right >= left {
        (x + 4.0, "start", right)
    } else {
        (x - 4.0, "end", left)
    };
    let fits = (room / CHAR_W).floor().max(1.0) as usize;
    let n = text.chars().count();
    let shown = if n <= fits {
        text.to_owned()
    } else {
        let mut s: String = text.chars().take(fits.saturating_sub(1)).collect();
        s.push('…');
        s
    };
    (tx, anchor, shown)
}

/// The plot as an `<svg>` element.
pub fn svg(p: &Plot) -> String {
    let n = p.xs.len();
    let per = n.div_ceil(MAX_POINTS).max(1);
    let drawn: Vec<Vec<Option<f64>>> = p
        .series
        .iter()
        .map(|s| (0..n).map(|i| p.y_of(s.values[i])).collect())
        .collect();
    let kept: Vec<Vec<Option<usize>>> = drawn.iter().map(|ys| reduce(ys, per)).collect();
    let (lo, hi) = kept
        .iter()
        .zip(&drawn)
        .flat_map(|(k, ys)| k.iter().flatten().filter_map(|&i| ys[i]))
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    let (lo, hi, yt) = y_ticks(lo, hi, p.log);
    let title = if per > 1 {
        format!("{} (max of every {per} points)", p.title)
    } else {
        p.title.clone()
    };
    // The legend: right of the title, wrapping onto rows of its own above the plot area
    // (which moves down by as much, keeping its height).
    let mut legend: Vec<(f64, usize)> = Vec::new();
    let (mut lx, mut row) = (PAD_L + title.chars().count() as f64 * 7.5 + 24.0, 0);
    for ser in &p.series {
        let w = ser.name.chars().count() as f64 * CHAR_W + 16.0;
        if lx + w > W - PAD_R && lx > PAD_L {
            (lx, row) = (PAD_L, row + 1);
        }
        legend.push((lx, row));
        lx += w;
    }
    let extra = 14.0 * row as f64;
    let (top, h) = (PAD_T + extra, H + extra);
    let x_last = p.x_end.saturating_sub(1).max(1) as f64;
    let sx = |x: usize| PAD_L + (W - PAD_L - PAD_R) * (x as f64) / x_last;
    let sy = |v: f64| top + (h - top - PAD_B) * (1.0 - (v - lo) / (hi - lo));
    let (bottom, right) = (h - PAD_B, W - PAD_R);
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" preserveAspectRatio="xMidYMid meet" role="img" aria-label="{t}"><rect width="{W}" height="{h}" fill="#fff"/><text x="{PAD_L}" y="16" font-size="13" font-family="sans-serif">{t}</text>"##,
        t = esc(&title)
    );
    // Grid and y ticks.
    for &t in &yt {
        let y = sy(t);
        let _ = write!(
            s,
            r##"<line class="grid" x1="{PAD_L}" y1="{y:.1}" x2="{right}" y2="{y:.1}" stroke="#eee"/><text class="ytick" x="{lx}" y="{ty:.1}" text-anchor="end" font-size="11" font-family="monospace">{}</text>"##,
            esc(&tick_label(t, p.log)),
            lx = PAD_L - 4.0,
            ty = y + 4.0,
        );
    }
    if let (true, Some(f)) = (p.log, p.floor) {
        let y = sy(f.log10());
        if y >= top - 0.5 && y <= bottom + 0.5 {
            let _ = write!(
                s,
                r##"<line class="floor" x1="{PAD_L}" y1="{y:.1}" x2="{right}" y2="{y:.1}" stroke="#999" stroke-dasharray="2 3"/><text class="floor" x="{tx}" y="{ty:.1}" font-size="10" fill="#666" font-family="sans-serif">values &lt;= {} drawn here</text>"##,
                esc(&g(f)),
                tx = PAD_L + 4.0,
                ty = y - 3.0,
            );
        }
    }
    // Axes, x ticks and the x axis's label.
    let _ = write!(
        s,
        r##"<line x1="{PAD_L}" y1="{top}" x2="{PAD_L}" y2="{bottom}" stroke="#888"/><line x1="{PAD_L}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#888"/>"##,
    );
    for x in x_ticks(p.x_end) {
        let px = sx(x);
        let _ = write!(
            s,
            r##"<line class="xtick" x1="{px:.1}" y1="{bottom}" x2="{px:.1}" y2="{b4}" stroke="#888"/><text class="xtick" x="{px:.1}" y="{ty}" text-anchor="middle" font-size="11" font-family="monospace">{x}</text>"##,
            b4 = bottom + 4.0,
            ty = bottom + 15.0,
        );
    }
    let _ = write!(
        s,
        r##"<text class="xlabel" x="{cx}" y="{ty}" text-anchor="middle" font-size="11" fill="#444" font-family="sans-serif">{}</text>"##,
        esc(&p.x_label),
        cx = (PAD_L + right) / 2.0,
        ty = h - 6.0,
    );
    // The mark, its label inside the plot whatever its position.
    if let Some((i, text)) = &p.mark {
        let x = sx(*i);
        let (tx, anchor, shown) = mark_label(x, text);
        let _ = write!(
            s,
            r##"<line class="mark" x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{bottom}" stroke="#d00" stroke-width="2" stroke-dasharray="4 3"/><text class="mark" x="{tx:.1}" y="{ty}" text-anchor="{anchor}" font-size="11" fill="#d00" font-family="sans-serif"><title>{}</title>{}</text>"##,
            esc(text),
            esc(&shown),
            ty = top + 11.0,
        );
    }
    if kept.iter().all(|k| k.iter().all(Option::is_none)) {
        let _ = write!(
            s,
            r##"<text class="empty" x="{cx}" y="{cy}" text-anchor="middle" font-size="12" fill="#666" font-family="sans-serif">no value to plot here</text>"##,
            cx = (PAD_L + right) / 2.0,
            cy = (top + bottom) / 2.0,
        );
    }
    // Lines, then their points (each with a tooltip and, where it has a row, a link).
    for (k, ser) in p.series.iter().enumerate() {
        let mut seg: Vec<(f64, f64)> = Vec::new();
        let flush = |seg: &mut Vec<(f64, f64)>, s: &mut String| {
            if seg.len() > 1 {
                let pts: Vec<String> = seg.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
                let _ = write!(
                    s,
                    r#"<polyline fill="none" stroke="{}" stroke-width="{}" points="{}"/>"#,
                    ser.color,
                    if k == 0 && p.series.len() > 1 {
                        3.5
                    } else {
                        1.5
                    },
                    pts.join(" ")
                );
            }
            seg.clear();
        };
        for &i in &kept[k] {
            match i.and_then(|i| drawn[k][i].map(|y| (i, y))) {
                Some((i, y)) if y.is_finite() => seg.push((sx(p.xs[i]), sy(y))),
                _ => flush(&mut seg, &mut s),
            }
        }
        flush(&mut seg, &mut s);
        let _ = write!(s, r#"<g class="pts" fill="{}">"#, ser.color);
        for &i in kept[k].iter().flatten() {
            let Some(y) = drawn[k][i] else { continue };
            let name = p.names.get(i).map_or("", String::as_str);
            let x = sx(p.xs[i]);
            let dot = if y.is_finite() {
                format!(
                    r#"<circle cx="{x:.1}" cy="{:.1}" r="2.5"><title>{} {}: {}</title></circle>"#,
                    sy(y),
                    esc(name),
                    esc(&ser.name),
                    esc(&g(ser.values[i])),
                )
            } else {
                format!(
                    r#"<polygon class="nonfinite" points="{:.1},{t} {:.1},{t} {x:.1},{b}"><title>{} {}: not a number (NaN/Inf differ), drawn on the top edge</title></polygon>"#,
                    x - 4.0,
                    x + 4.0,
                    esc(name),
                    esc(&ser.name),
                    t = top,
                    b = top + 7.0,
                )
            };
            match p.rows.get(i).copied().flatten() {
                Some(row) => {
                    let _ = write!(s, r##"<a href="#row-{row}">{dot}</a>"##);
                }
                None => s.push_str(&dot),
            }
        }
        s.push_str("</g>");
        let (lx, row) = legend[k];
        let _ = write!(
            s,
            r#"<text class="legend" x="{lx:.1}" y="{ly}" font-size="11" fill="{}" font-family="sans-serif">{}</text>"#,
            ser.color,
            esc(&ser.name),
            ly = 16.0 + 14.0 * row as f64,
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plot(values: Vec<f64>) -> Plot {
        let n = values.len();
        Plot {
            xs: (0..n).collect(),
            names: (0..n).map(|i| format!("k{i}")).collect(),
            rows: (0..n).map(Some).collect(),
            series: vec![Series {
                name: "s".into(),
                values,
                color: "#000",
            }],
            ..Plot::new("t", "kernel index", n)
        }
    }

    #[test]
    fn long_series_are_reduced_keeping_spikes() {
        let mut v = vec![1.0; 20 * MAX_POINTS];
        v[12_345] = 1e6;
        let ys: Vec<Option<f64>> = v.iter().map(|&x| Some(x)).collect();
        let r = reduce(&ys, 20);
        assert_eq!(r.len(), MAX_POINTS);
        assert_eq!(r[12_345 / 20], Some(12_345), "the bucket keeps its spike");
        let mut p = plot(v);
        p.mark = Some((12_345, "m".into()));
        p.log = true;
        let svg = svg(&p);
        assert!(
            svg.contains("(max of every 20 points)") && svg.len() < 400_000,
            "{}",
            svg.len()
        );
        // The spike's point is drawn, named and linked to its own row.
        assert!(
            svg.contains(r##"<a href="#row-12345"><circle"##) && svg.contains("k12345 s: 1e+06"),
            "spike point missing"
        );
        assert_eq!(svg.matches("<circle").count(), MAX_POINTS);
    }

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(x_ticks(1), [0]);
        assert_eq!(x_ticks(11), (0..=10).collect::<Vec<_>>());
        assert_eq!(x_ticks(414), [0, 50, 100, 150, 200, 250, 300, 350, 400]);
        assert_eq!(x_ticks(5000).len(), 10);
        // A constant series of 1 gets a range around 1, not an axis reading 2.
        let (lo, hi, t) = y_ticks(1.0, 1.0, false);
        assert!(lo < 1.0 && hi > 1.0 && t.len() >= 3, "{lo} {hi} {t:?}");
        assert!(t.iter().any(|&v| (v - 1.0).abs() < 1e-12), "{t:?}");
        assert!(
            t.iter()
                .all(|&v| ["0.9", "0.95", "1", "1.05", "1.1"]
                    .contains(&tick_label(v, false).as_str())),
            "{t:?}"
        );
        // 0.999992 .. 1 stays a range of round ticks.
        let (_, _, t) = y_ticks(0.999_992, 1.0, false);
        assert!(t.len() <= 7, "{t:?}");
        // Log: whole decades.
        let (lo, hi, t) = y_ticks(-11.3, -2.2, true);
        assert_eq!((lo, hi), (-12.0, -2.0));
        assert_eq!(tick_label(t[0], true), "1e-12");
        assert!(t.len() <= 9);
        // Within a decade or two: 1, 2 and 5 times each power of ten.
        let (_, _, t) = y_ticks(0.0, 0.78, true);
        let labels: Vec<String> = t.iter().map(|&v| tick_label(v, true)).collect();
        assert_eq!(labels, ["1", "2", "5", "10"]);
    }

    #[test]
    fn the_plot_has_ticks_tooltips_links_and_a_floor() {
        let mut p = plot(vec![0.5, 2.0, f64::NAN, 4.0, 5.0]);
        let s = svg(&p);
        assert!(s.starts_with(
                r#"<svg class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 960 260" preserveAspectRatio"#
            ),
            "no fixed size: {s}");
        assert_eq!(s.matches(r#"<text class="xtick""#).count(), 5, "{s}");
        assert!(s.matches(r#"<text class="ytick""#).count() >= 3, "{s}");
        assert!(s.contains(">kernel index</text>"));
        assert_eq!(
            s.matches("<polyline").count(),
            2,
            "NaN splits the line: {s}"
        );
        assert_eq!(s.matches("<title>").count(), 4, "one per drawn point: {s}");
        assert!(
            s.contains(r##"<a href="#row-3"><circle"##) && s.contains("<title>k3 s: 4</title>")
        );
        assert!(!s.contains("#row-2"), "a gap has no point");
        assert!(!s.contains("no value to plot"));
        let mut empty = p.clone();
        empty.series[0].values = vec![f64::NAN; 5];
        assert!(svg(&empty).contains(">no value to plot here</text>"));
        p.log = true;
        p.floor = Some(1e-12);
        p.series[0].values = vec![0.0, -1e-16, 1e-3, 1e-8, 1.0];
        let s = svg(&p);
        assert!(s.contains("values &lt;= 1e-12 drawn here"), "{s}");
        assert_eq!(s.matches("<circle").count(), 5, "clamped, not dropped");
        assert!(
            s.contains("<title>k1 s: -1e-16</title>"),
            "the true value shows"
        );
        // +inf (non-finite values that differ) is a triangle on the top edge, linked too.
        p.series[0].values[3] = f64::INFINITY;
        let s = svg(&p);
        assert_eq!(s.matches("<circle").count(), 4);
        assert!(s.contains(
            r##"<a href="#row-3"><polygon class="nonfinite" points="722.0,26 730.0,26 726.0,33"><title>k3 s: not a number"##
        ), "{s}");
        assert_eq!(
            s.matches("<polyline").count(),
            1,
            "the line stops before it (point 4 stands alone)"
        );
    }

    #[test]
    fn a_long_legend_wraps_above_the_plot_instead_of_over_the_title() {
        let mut p = plot(vec![1.0, 2.0]);
        p.title = "gradient l2norm per step (log scale)".into();
        p.series = (0..6)
            .map(|k| Series {
                name: format!("block{k}_conv_weight"),
                values: vec![1.0, 2.0],
                color: "#000",
            })
            .collect();
        let s = svg(&p);
        let xs: Vec<(f64, f64)> = s
            .split(r#"<text class="legend" x=""#)
            .skip(1)
            .map(|t| {
                let x = t[..t.find('"').unwrap()].parse().unwrap();
                let y = &t[t.find(r#"y=""#).unwrap() + 3..];
                (x, y[..y.find('"').unwrap()].parse().unwrap())
            })
            .collect();
        assert_eq!(xs.len(), 6);
        let title_end = PAD_L + p.title.len() as f64 * 7.5;
        for (k, &(x, y)) in xs.iter().enumerate() {
            let end = x + format!("block{k}_conv_weight").len() as f64 * CHAR_W;
            assert!(end <= W - PAD_R, "{k}: ends at {end}");
            assert!(y > 16.0 || x >= title_end, "{k} overlaps the title");
        }
        assert!(xs.iter().any(|&(_, y)| y > 16.0), "some wrapped");
        // The plot area moved down: the viewBox grew by the legend's extra rows.
        assert!(s.contains(r#"viewBox="0 0 960 274""#), "{}", &s[..200]);
    }

    #[test]
    fn the_mark_label_stays_inside_the_plot() {
        let long =
            "first divergent: Default_network-WithLossCell__backbone-TinyNet_relu-ReLU_ReLU-op0";
        for x in [PAD_L, 300.0, W / 2.0, 700.0, W - PAD_R] {
            let (tx, anchor, shown) = mark_label(x, long);
            let len = shown.chars().count() as f64 * CHAR_W;
            let (from, to) = if anchor == "start" {
                (tx, tx + len)
            } else {
                (tx - len, tx)
            };
            assert!(from >= 0.0 && to <= W, "{x}: {from}..{to} {shown}");
            assert!(shown.chars().count() >= 20, "{x}: {shown}");
        }
        let (_, anchor, shown) = mark_label(W - PAD_R, "short");
        assert_eq!((anchor, shown.as_str()), ("end", "short"));
        let mut p = plot(vec![1.0; 30]);
        p.mark = Some((29, format!("<{long}>")));
        let s = svg(&p);
        assert!(
            s.contains(r##"text-anchor="end" font-size="11" fill="#d00""##),
            "{s}"
        );
        assert!(
            s.contains("<title>&lt;first divergent"),
            "full name on hover"
        );
    }
}
