//! `statistic.csv` read back: the header decides which statistic columns a row holds (any
//! subset of the 13, in any order); rows are read line by line (never the whole file at once),
//! with `"`-quoted fields (`""` for a quote inside), as MindSpore's and opdump's rows are.

use std::{
    fs::File,
    io::{BufRead, BufReader},
    path::Path,
};

use dump_core::DType;
use dump_stats::{Category, csv::BASE_HEADER};

use dump_stats::{Io, TensorId};

use crate::{Error, Stats};

/// One `statistic.csv` row.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvRow {
    /// 1-based line number in the file.
    pub line: usize,
    /// Op Type, Op Name (sanitised, as in file names), Task ID, Stream ID, Timestamp (the
    /// paired file's), IO and Slot.
    pub id: TensorId<String>,
    /// Data Type, when it names a known dtype.
    pub dtype: Option<DType>,
    /// Shape.
    pub shape: Vec<usize>,
    /// The statistic columns present.
    pub stats: Stats,
}

/// Splits one csv line into fields (quotes removed, `""` unescaped).
pub(crate) fn split_fields(line: &str) -> Result<Vec<String>, &'static str> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut at_start = true;
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    cur.push('"');
                } else {
                    quoted = false;
                }
            } else {
                cur.push(c);
            }
        } else if c == '"' && at_start {
            quoted = true;
            at_start = false;
        } else if c == ',' {
            out.push(std::mem::take(&mut cur));
            at_start = true;
        } else {
            cur.push(c);
            at_start = false;
        }
    }
    if quoted {
        return Err("a quoted field is not closed");
    }
    out.push(cur);
    Ok(out)
}

fn shape(s: &str) -> Option<Vec<usize>> {
    let inner = s.strip_prefix('(')?.strip_suffix(')')?;
    inner
        .split(',')
        .filter(|d| !d.trim().is_empty())
        .map(|d| d.trim().parse().ok())
        .collect()
}

fn float(s: &str) -> Option<f64> {
    match s {
        "" | "null" => None,
        s => s.parse().ok(),
    }
}

/// Reads `path`; rows that cannot be parsed are returned as messages (line, field, value,
/// what is allowed) next to the good rows.
pub fn read_statistic_csv(path: &Path) -> Result<(Vec<CsvRow>, Vec<String>), Error> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.file_type().is_file() {
        return Err(Error::format(path, "not a regular file"));
    }
    let f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut lines = BufReader::new(f).lines();
    let header = match lines.next() {
        Some(h) => h.map_err(|e| Error::io(path, e))?,
        None => {
            return Err(Error::format(path, "empty statistic.csv (no header line)"));
        }
    };
    if !header.starts_with(BASE_HEADER) {
        return Err(Error::format(
            path,
            format!("the header does not start with `{BASE_HEADER}`: {header:?}"),
        ));
    }
    let mut cats = Vec::new();
    for t in header[BASE_HEADER.len()..].split(',').skip(1) {
        match Category::ALL.iter().find(|c| c.title() == t) {
            Some(c) => cats.push(Some(*c)),
            None => cats.push(None),
        }
    }
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for (i, line) in lines.enumerate() {
        let line_no = i + 2;
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                problems.push(format!("line {line_no}: {e}"));
                break;
            }
        };
        if line.is_empty() {
            continue;
        }
        match row(&line, &cats) {
            Ok(mut r) => {
                r.line = line_no;
                rows.push(r);
            }
            Err(m) => problems.push(format!("line {line_no}: {m}")),
        }
    }
    Ok((rows, problems))
}

fn row(line: &str, cats: &[Option<Category>]) -> Result<CsvRow, String> {
    let f = split_fields(line).map_err(str::to_owned)?;
    if f.len() < 10 + cats.len() {
        return Err(format!(
            "{} fields, the header needs {} (a cut-off row?)",
            f.len(),
            10 + cats.len()
        ));
    }
    let num = |k: usize, name: &str| -> Result<u64, String> {
        f[k].parse().map_err(|_| {
            format!(
                "field {name} is {:?}: expected a non-negative integer",
                f[k]
            )
        })
    };
    let small = |k: usize, name: &str| -> Result<u32, String> {
        num(k, name)?
            .try_into()
            .map_err(|_| format!("field {name} is {:?}: larger than 2^32-1", f[k]))
    };
    let Some(io) = Io::parse(&f[5]) else {
        return Err(format!("field IO is {:?}: expected input or output", f[5]));
    };
    let mut stats = Stats::default();
    for (c, v) in cats.iter().zip(&f[10..]) {
        let count = || v.parse::<u64>().ok();
        match c {
            Some(Category::Max) => stats.max = float(v),
            Some(Category::Min) => stats.min = float(v),
            Some(Category::Avg) => stats.avg = float(v),
            Some(Category::L2Norm) => stats.l2norm = float(v),
            Some(Category::Count) => stats.count = count(),
            Some(Category::NanCount) => stats.nan = count(),
            Some(Category::NegativeInfCount) => stats.neg_inf = count(),
            Some(Category::PositiveInfCount) => stats.pos_inf = count(),
            Some(Category::ZeroCount) => stats.zero = count(),
            Some(Category::Md5) => stats.md5 = Some(v.clone()).filter(|s| !s.is_empty()),
            Some(Category::Sha1) => stats.sha1 = Some(v.clone()).filter(|s| !s.is_empty()),
            _ => {}
        }
    }
    Ok(CsvRow {
        line: 0,
        id: TensorId {
            op_type: f[0].clone(),
            op_name: f[1].clone(),
            task_id: small(2, "Task ID")?,
            stream_id: small(3, "Stream ID")?,
            timestamp: num(4, "Timestamp")?,
            io,
            slot: small(6, "Slot")?,
        },
        dtype: DType::from_name(&f[8]).ok(),
        shape: shape(&f[9])
            .ok_or_else(|| format!("field Shape is {:?}: expected (d0,d1,...)", f[9]))?,
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_quoted_fields() {
        assert_eq!(
            split_fields(r#"Add,"a""b",0,"(2,3)","#).unwrap(),
            ["Add", "a\"b", "0", "(2,3)", ""]
        );
        assert!(split_fields(r#"a,"b"#).is_err());
        assert_eq!(shape("(2,3)"), Some(vec![2, 3]));
        assert_eq!(shape("()"), Some(vec![]));
        assert_eq!(shape("(x)"), None);
        assert!(float("-nan").unwrap().is_nan());
        assert_eq!(float("-inf"), Some(f64::NEG_INFINITY));
    }
}
