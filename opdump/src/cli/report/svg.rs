//! Line plots drawn as inline SVG: each plot is a few polylines over the run order, written by
//! hand (none of a plotting crate's machinery is needed), long series reduced to bucket
//! maxima so that a spike stays visible and a page for a million tensors stays small.

use std::fmt::Write as _;

use super::esc;

/// One line of a plot.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// One value per position; non-finite (or, on a log scale, non-positive) values leave a gap.
    pub values: Vec<f64>,
    /// CSS colour.
    pub color: &'static str,
}

/// A plot along the run order.
pub struct Plot {
    /// Title.
    pub title: String,
    /// Lines.
    pub series: Vec<Series>,
    /// A position to mark (the first divergent or non-finite operator) and its label.
    pub mark: Option<(usize, String)>,
    /// Log10 y axis.
    pub log: bool,
}

const W: f64 = 960.0;
const H: f64 = 240.0;
const PAD_L: f64 = 70.0;
const PAD_R: f64 = 10.0;
const PAD_T: f64 = 24.0;
const PAD_B: f64 = 24.0;

/// Most points a line gets: longer series are reduced to the largest finite value of each of
/// this many buckets (a spike stays visible), so a page for a million tensors stays small.
pub const MAX_POINTS: usize = 2000;

/// `values` reduced to at most [`MAX_POINTS`] bucket maxima (NaN for a bucket with no finite
/// value), and the bucket size.
fn reduce(values: &[f64]) -> (Vec<f64>, usize) {
    let per = values.len().div_ceil(MAX_POINTS).max(1);
    if per == 1 {
        return (values.to_vec(), 1);
    }
    let out = values
        .chunks(per)
        .map(|c| {
            c.iter()
                .copied()
                .filter(|v| v.is_finite())
                .fold(f64::NAN, |m, v| if m.is_nan() { v } else { m.max(v) })
        })
        .collect();
    (out, per)
}

/// The plot as an `<svg>` element.
pub fn svg(p: &Plot) -> String {
    let reduced: Vec<(Vec<f64>, usize)> = p.series.iter().map(|s| reduce(&s.values)).collect();
    let per = reduced.iter().map(|r| r.1).max().unwrap_or(1);
    let p = &Plot {
        title: if per > 1 {
            format!("{} (max of every {per})", p.title)
        } else {
            p.title.clone()
        },
        series: p
            .series
            .iter()
            .zip(reduced)
            .map(|(s, (values, _))| Series {
                name: s.name.clone(),
                values,
                color: s.color,
            })
            .collect(),
        mark: p.mark.as_ref().map(|(i, t)| (i / per, t.clone())),
        log: p.log,
    };
    let y_of = |v: f64| -> Option<f64> {
        if !v.is_finite() || (p.log && v <= 0.0) {
            None
        } else if p.log {
            Some(v.log10())
        } else {
            Some(v)
        }
    };
    let n = p.series.iter().map(|s| s.values.len()).max().unwrap_or(0);
    let ys: Vec<f64> = p
        .series
        .iter()
        .flat_map(|s| s.values.iter().filter_map(|&v| y_of(v)))
        .collect();
    let (mut lo, mut hi) = ys
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    if hi - lo < 1e-12 {
        hi = lo + 1.0;
    }
    let sx = |i: usize| PAD_L + (W - PAD_L - PAD_R) * (i as f64) / ((n.max(2) - 1) as f64);
    let sy = |v: f64| PAD_T + (H - PAD_T - PAD_B) * (1.0 - (v - lo) / (hi - lo));
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img"><rect width="{W}" height="{H}" fill="#fff"/><text x="{PAD_L}" y="16" font-size="13" font-family="sans-serif">{}</text>"##,
        esc(&p.title)
    );
    let label = |v: f64| {
        if p.log {
            super::g(10f64.powf(v))
        } else {
            super::g(v)
        }
    };
    let _ = write!(
        s,
        r##"<line x1="{PAD_L}" y1="{t}" x2="{PAD_L}" y2="{b}" stroke="#888"/><line x1="{PAD_L}" y1="{b}" x2="{r}" y2="{b}" stroke="#888"/><text x="4" y="{t2}" font-size="11" font-family="monospace">{}</text><text x="4" y="{b}" font-size="11" font-family="monospace">{}</text>"##,
        esc(&label(hi)),
        esc(&label(lo)),
        t = PAD_T,
        b = H - PAD_B,
        r = W - PAD_R,
        t2 = PAD_T + 10.0,
    );
    if let Some((i, text)) = &p.mark {
        let x = sx(*i);
        let _ = write!(
            s,
            r##"<line class="mark" x1="{x:.1}" y1="{PAD_T}" x2="{x:.1}" y2="{b}" stroke="#d00" stroke-width="2" stroke-dasharray="4 3"/><text x="{tx:.1}" y="{ty}" font-size="11" fill="#d00" font-family="sans-serif">{}</text>"##,
            esc(text),
            b = H - PAD_B,
            tx = (x + 4.0).min(W - 200.0),
            ty = H - 8.0,
        );
    }
    for (k, ser) in p.series.iter().enumerate() {
        let mut seg: Vec<(f64, f64)> = Vec::new();
        let flush = |seg: &mut Vec<(f64, f64)>, s: &mut String| {
            if let [(x, y)] = seg[..] {
                let _ = write!(
                    s,
                    r#"<circle r="2" cx="{x:.1}" cy="{y:.1}" fill="{}"/>"#,
                    ser.color
                );
            } else if seg.len() > 1 {
                let pts: Vec<String> = seg.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
                let _ = write!(
                    s,
                    r#"<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>"#,
                    ser.color,
                    pts.join(" ")
                );
            }
            seg.clear();
        };
        for (i, &v) in ser.values.iter().enumerate() {
            match y_of(v) {
                Some(y) => seg.push((sx(i), sy(y))),
                None => flush(&mut seg, &mut s),
            }
        }
        flush(&mut seg, &mut s);
        let ly = PAD_T + 12.0 * k as f64 + 4.0;
        let _ = write!(
            s,
            r#"<text x="{lx}" y="{ly}" font-size="11" fill="{}" font-family="sans-serif">{}</text>"#,
            ser.color,
            esc(&ser.name),
            lx = W - 260.0,
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_series_are_reduced_keeping_spikes() {
        let mut v = vec![1.0; 10 * MAX_POINTS];
        v[12_345] = 1e6;
        let (r, per) = reduce(&v);
        assert_eq!((r.len(), per), (MAX_POINTS, 10));
        assert_eq!(r[1234], 1e6);
        let p = Plot {
            title: "t".into(),
            series: vec![Series {
                name: "s".into(),
                values: v,
                color: "#000",
            }],
            mark: Some((12_345, "m".into())),
            log: true,
        };
        let svg = svg(&p);
        assert!(
            svg.contains("(max of every 10)") && svg.len() < 100_000,
            "{}",
            svg.len()
        );
    }
}
