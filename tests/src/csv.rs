//! Checking `statistic.csv` files.

/// Splits one csv line on commas outside double quotes (quotes kept out of the fields).
pub fn split_row(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().expect("non-empty").push(c),
        }
    }
    out
}

/// A parsed `statistic.csv`.
#[derive(Clone, Debug)]
pub struct StatCsv {
    /// Header columns.
    pub header: Vec<String>,
    /// Rows, without the empty field after the trailing comma.
    pub rows: Vec<Vec<String>>,
}

impl StatCsv {
    /// The index of column `title`.
    pub fn col(&self, title: &str) -> usize {
        self.header
            .iter()
            .position(|h| h == title)
            .unwrap_or_else(|| panic!("no column {title:?} in {:?}", self.header))
    }
}

/// Parses `text` and asserts MindSpore's form: a header line, then rows that each end in
/// `,\n` and have exactly one field per header column (plus the empty one after the last
/// comma). Panics with the offending line otherwise.
pub fn parse_statistic_csv(text: &str) -> StatCsv {
    assert!(text.ends_with('\n'), "file ends with a newline");
    let mut lines = text.split_inclusive('\n');
    let header_line = lines.next().expect("a header line");
    assert!(header_line.starts_with(
        "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape"
    ));
    assert!(
        !header_line.ends_with(",\n"),
        "no trailing comma in the header"
    );
    let header: Vec<String> = split_row(header_line.trim_end_matches('\n'));
    let mut rows = Vec::new();
    for l in lines {
        assert!(l.ends_with(",\n"), "row ends with ,\\n: {l:?}");
        let mut f = split_row(&l[..l.len() - 1]);
        assert_eq!(f.pop().as_deref(), Some(""), "trailing comma: {l:?}");
        assert_eq!(f.len(), header.len(), "field count of {l:?}");
        rows.push(f);
    }
    StatCsv { header, rows }
}
