//! [`StatsReport`]: what `opdump stats` found, one entry per file in command-line order,
//! rendered by `csv::stats` (the header and rows) and `text::stats_messages` (warnings, notes
//! and errors on stderr).

use std::path::PathBuf;

/// One file's outcome.
pub struct FileRow {
    /// The file as named on the command line.
    pub path: PathBuf,
    /// What the reader warns about (a bf16 file whose values are not all exact bf16).
    pub warning: Option<String>,
    /// Its statistic.csv row (dump-stats' csv writer: the bytes the Dumper writes for the same
    /// tensor); `Ok(None)` for an empty tensor, which gets no row; the error's words when the
    /// file could not be summarised.
    pub row: Result<Option<String>, String>,
}

/// What `opdump stats` reports on its files.
pub struct StatsReport {
    /// The statistic.csv header line, unless `--no-header`.
    pub header: Option<String>,
    /// Every file, in command-line order.
    pub files: Vec<FileRow>,
}

impl StatsReport {
    /// How many files could not be summarised.
    pub fn failed(&self) -> usize {
        self.files.iter().filter(|f| f.row.is_err()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::report::{csv, text};

    #[test]
    fn rows_go_to_out_and_messages_to_err_in_file_order() {
        let file = |p: &str, warning: Option<&str>, row: Result<Option<&str>, &str>| FileRow {
            path: PathBuf::from(p),
            warning: warning.map(str::to_owned),
            row: row.map(|r| r.map(str::to_owned)).map_err(str::to_owned),
        };
        let r = StatsReport {
            header: Some("H\n".into()),
            files: vec![
                file("a.npy", None, Ok(Some("A\n"))),
                file("b.npy", Some("b is odd"), Err("truncated at byte 9")),
                file("c.npy", None, Ok(None)),
                file("d.npy", Some("d is odd"), Ok(Some("D\n"))),
            ],
        };
        assert_eq!(r.failed(), 1);
        let mut out = Vec::new();
        csv::stats(&r, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "H\nA\nD\n");
        let mut err = Vec::new();
        text::stats_messages(&r, &mut err).unwrap();
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "warning: b is odd\nerror: b.npy: truncated at byte 9\n\
             note: c.npy: empty tensor, no row (MindSpore writes none)\nwarning: d is odd\n"
        );
        let no_header = StatsReport { header: None, ..r };
        let mut out = Vec::new();
        csv::stats(&no_header, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "A\nD\n");
    }
}
