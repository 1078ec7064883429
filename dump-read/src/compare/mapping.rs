//! A mapping file: names of dump A's tensors mapped to names in dump B, where the automatic
//! pairing rules do not find them (or find the wrong partner). `opdump compare --mapping FILE`.
//!
//! JSON, or YAML of the same shape (a top-level mapping of the three sections, each a
//! mapping of quoted or plain strings; comments with `#`):
//!
//! ```json
//! {
//!   "exact":  { "Module.fc.Linear.forward.0": "node_linear" },
//!   "prefix": { "Module.layer1.": "/layer1/" },
//!   "regex":  { "^Functional\\.conv2d\\.(\\d+)\\.forward$": "conv2d_$1" }
//! }
//! ```
//!
//! A name of A (an op name: msprobe's call name, a MindSpore op name, an ONNX node's kernel)
//! is looked up in `exact`, then in `prefix` (the longest matching prefix is replaced), then
//! in `regex` (the first pattern that matches, in file order, is replaced with `$1`-style
//! groups). The result names a kernel of B by its op name, the ONNX node it came from, the
//! ONNX value it defines, or the FX call torch's exporter recorded (`conv2d_5`). The rule
//! that pairs them is `mapping`, tried before every automatic rule.

use std::path::Path;

use regex::Regex;
use serde_json::Value;

use crate::Error;

/// The largest mapping file read (a hand-written file is far smaller).
pub const MAX_MAPPING_FILE: u64 = 4 << 20;

/// The sections of a mapping file.
pub const SECTIONS: [&str; 3] = ["exact", "prefix", "regex"];

/// A parsed mapping file.
#[derive(Clone, Debug, Default)]
pub struct Mapping {
    exact: std::collections::HashMap<String, String>,
    prefix: Vec<(String, String)>,
    regex: Vec<(Regex, String)>,
}

impl Mapping {
    /// Reads `path`: JSON, or YAML when the name ends in `.yaml` / `.yml`. Every error names
    /// the file, the section or entry, the value and what is allowed.
    pub fn load(path: &Path) -> Result<Mapping, Error> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if meta.len() > MAX_MAPPING_FILE {
            return Err(Error::format(
                path,
                format!(
                    "{} bytes: a mapping file is at most {MAX_MAPPING_FILE} bytes",
                    meta.len()
                ),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let yaml = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
        if yaml {
            Mapping::parse_yaml(&text, path)
        } else {
            Mapping::parse_json(&text, path)
        }
    }

    /// Parses JSON `text` (`path` names it in errors).
    pub fn parse_json(text: &str, path: &Path) -> Result<Mapping, Error> {
        let v: Value = serde_json::from_str(text).map_err(|e| {
            Error::format(path, format!("not a JSON mapping file: {e} (expected {{\"exact\": {{...}}, \"prefix\": {{...}}, \"regex\": {{...}}}})"))
        })?;
        let Value::Object(top) = v else {
            return Err(Error::format(
                path,
                "the top level is not an object (expected the sections exact, prefix, regex)",
            ));
        };
        let mut sections = Vec::new();
        for (key, value) in top {
            let Value::Object(entries) = value else {
                return Err(Error::format(
                    path,
                    format!(
                        "section {key:?} is {value}, not an object of \"name\": \"name\" entries"
                    ),
                ));
            };
            let mut list = Vec::new();
            for (from, to) in entries {
                let Value::String(to) = to else {
                    return Err(Error::format(
                        path,
                        format!("{key}: entry {from:?} maps to {to}, not a string"),
                    ));
                };
                list.push((from, to));
            }
            sections.push((key, list));
        }
        Mapping::from_sections(sections, path)
    }

    /// Parses YAML `text` of the documented shape (`path` names it in errors): top-level
    /// `section:` lines, each followed by indented `from: to` lines; strings plain, or
    /// quoted with `'` (`''` for a quote) or `"` (backslash escapes `\\ \" \n \t`).
    pub fn parse_yaml(text: &str, path: &Path) -> Result<Mapping, Error> {
        let mut sections: Vec<(String, Vec<(String, String)>)> = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = n + 1;
            let err = |m: String| Error::format(path, format!("line {line}: {m}"));
            let body = strip_comment(raw);
            if body.trim().is_empty() || body.trim() == "---" {
                continue;
            }
            let indented = body.starts_with(' ') || body.starts_with('\t');
            let (key, rest) = yaml_key(body.trim()).map_err(&err)?;
            if !indented {
                if !rest.trim().is_empty() && rest.trim() != "{}" {
                    return Err(err(format!(
                        "section {key:?} has the value {:?} on its line: put its entries on the indented lines below",
                        rest.trim()
                    )));
                }
                sections.push((key, Vec::new()));
                continue;
            }
            let Some((section, list)) = sections.last_mut() else {
                return Err(err(format!(
                    "entry {key:?} is indented but under no section (expected one of {})",
                    SECTIONS.join(", ")
                )));
            };
            let value = yaml_scalar(rest.trim())
                .map_err(|m| err(format!("{section}: entry {key:?}: {m}")))?;
            list.push((key, value));
        }
        Mapping::from_sections(sections, path)
    }

    fn from_sections(
        sections: Vec<(String, Vec<(String, String)>)>,
        path: &Path,
    ) -> Result<Mapping, Error> {
        let mut m = Mapping::default();
        for (key, list) in sections {
            match key.as_str() {
                "exact" => m.exact.extend(list),
                "prefix" => {
                    if let Some((from, _)) = list.iter().find(|(f, _)| f.is_empty()) {
                        return Err(Error::format(
                            path,
                            format!(
                                "prefix: entry {from:?} is empty (a prefix must name something)"
                            ),
                        ));
                    }
                    m.prefix.extend(list);
                }
                "regex" => {
                    for (from, to) in list {
                        let re = regex::RegexBuilder::new(&from)
                            .size_limit(1 << 20)
                            .build()
                            .map_err(|e| {
                                Error::format(
                                    path,
                                    format!("regex: entry {from:?} is not a valid regular expression: {e}"),
                                )
                            })?;
                        m.regex.push((re, to));
                    }
                }
                other => {
                    return Err(Error::format(
                        path,
                        format!(
                            "unknown section {other:?} (allowed: {})",
                            SECTIONS.join(", ")
                        ),
                    ));
                }
            }
        }
        // The longest prefix wins.
        m.prefix.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        Ok(m)
    }

    /// Whether the file maps nothing.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.prefix.is_empty() && self.regex.is_empty()
    }

    /// The name in B that A's `name` maps to, if any (see the module docs).
    pub fn target(&self, name: &str) -> Option<String> {
        if let Some(t) = self.exact.get(name) {
            return Some(t.clone());
        }
        for (from, to) in &self.prefix {
            if let Some(rest) = name.strip_prefix(from.as_str()) {
                return Some(format!("{to}{rest}"));
            }
        }
        for (re, to) in &self.regex {
            if re.is_match(name) {
                return Some(re.replace(name, to.as_str()).into_owned());
            }
        }
        None
    }
}

/// `line` without a `#` comment (outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q && !(q == '"' && prev == '\\') => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && (i == 0 || prev == ' ' || prev == '\t') => return &line[..i],
            None => {}
        }
        prev = c;
    }
    line
}

/// `key: rest` of a YAML line (the key plain or quoted).
fn yaml_key(s: &str) -> Result<(String, &str), String> {
    if s.starts_with('"') || s.starts_with('\'') {
        let (k, rest) = quoted(s)?;
        let rest = rest
            .trim_start()
            .strip_prefix(':')
            .ok_or_else(|| format!("expected `:` after the key {k:?}"))?;
        return Ok((k, rest));
    }
    match s
        .find(": ")
        .or_else(|| s.strip_suffix(':').map(|k| k.len()))
    {
        Some(i) => Ok((s[..i].trim_end().to_owned(), &s[(i + 1).min(s.len())..])),
        None => Err(format!("{s:?} is not `name: name`")),
    }
}

/// A YAML scalar value: plain or quoted.
fn yaml_scalar(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("no value (expected a name)".into());
    }
    if s.starts_with('"') || s.starts_with('\'') {
        let (v, rest) = quoted(s)?;
        if !rest.trim().is_empty() {
            return Err(format!("{:?} after the quoted value", rest.trim()));
        }
        return Ok(v);
    }
    if s.starts_with(['{', '[', '&', '*', '!', '|', '>']) {
        return Err(format!(
            "{s:?}: only plain or quoted strings are allowed (quote it)"
        ));
    }
    Ok(s.to_owned())
}

/// A quoted YAML string at the start of `s` and the rest.
fn quoted(s: &str) -> Result<(String, &str), String> {
    let q = s.chars().next().unwrap_or('"');
    let mut out = String::new();
    let mut it = s[1..].char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if c == q {
            if q == '\'' && it.peek().is_some_and(|&(_, n)| n == '\'') {
                it.next();
                out.push('\'');
                continue;
            }
            return Ok((out, &s[i + 2..]));
        }
        if c == '\\' && q == '"' {
            match it.next().map(|(_, c)| c) {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(c @ ('\\' | '"' | '/')) => out.push(c),
                Some(c) => return Err(format!("unknown escape \\{c} in {s:?}")),
                None => return Err(format!("unterminated string {s:?}")),
            }
            continue;
        }
        out.push(c);
    }
    Err(format!("unterminated string {s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("map.json")
    }

    #[test]
    fn exact_then_longest_prefix_then_regex() {
        let m = Mapping::parse_json(
            r#"{"exact": {"Module.fc.Linear.forward.0": "node_linear"},
                "prefix": {"Module.": "/", "Module.layer1.": "/layer1/"},
                "regex": {"^Functional\\.conv2d\\.(\\d+)\\.forward$": "conv2d_$1"}}"#,
            p(),
        )
        .unwrap();
        assert_eq!(
            m.target("Module.fc.Linear.forward.0").as_deref(),
            Some("node_linear")
        );
        assert_eq!(m.target("Module.layer1.x").as_deref(), Some("/layer1/x"));
        assert_eq!(m.target("Module.y").as_deref(), Some("/y"));
        assert_eq!(
            m.target("Functional.conv2d.5.forward").as_deref(),
            Some("conv2d_5")
        );
        assert_eq!(m.target("Functional.relu.0.forward"), None);
        assert!(!m.is_empty());
    }

    #[test]
    fn yaml_of_the_same_shape() {
        let text = "# mapping\nexact:\n  Module.fc.Linear.forward.0: node_linear  # the head\n  \"a: b\": 'it''s'\nregex:\n  '^Functional\\.conv2d\\.(\\d+)\\.forward$': \"conv2d_$1\"\nprefix: {}\n";
        let m = Mapping::parse_yaml(text, Path::new("m.yaml")).unwrap();
        assert_eq!(
            m.target("Module.fc.Linear.forward.0").as_deref(),
            Some("node_linear")
        );
        assert_eq!(m.target("a: b").as_deref(), Some("it's"));
        assert_eq!(
            m.target("Functional.conv2d.2.forward").as_deref(),
            Some("conv2d_2")
        );
    }

    #[test]
    fn bad_files_name_the_field_and_value() {
        let cases: &[(&str, &str)] = &[
            ("[]", "top level is not an object"),
            (
                "{\"exakt\": {}}",
                "unknown section \"exakt\" (allowed: exact, prefix, regex)",
            ),
            ("{\"exact\": []}", "section \"exact\" is [], not an object"),
            (
                "{\"exact\": {\"a\": 1}}",
                "exact: entry \"a\" maps to 1, not a string",
            ),
            (
                "{\"regex\": {\"(\": \"x\"}}",
                "regex: entry \"(\" is not a valid regular expression",
            ),
            ("{\"prefix\": {\"\": \"x\"}}", "prefix: entry \"\" is empty"),
            ("{", "not a JSON mapping file"),
        ];
        for (text, want) in cases {
            let e = Mapping::parse_json(text, p()).unwrap_err().to_string();
            assert!(e.contains("map.json") && e.contains(want), "{text}: {e}");
        }
        let y: &[(&str, &str)] = &[
            (
                "  a: b\n",
                "line 1: entry \"a\" is indented but under no section",
            ),
            (
                "exact: x\n",
                "line 1: section \"exact\" has the value \"x\"",
            ),
            (
                "exact:\n  a: [1]\n",
                "line 2: exact: entry \"a\": \"[1]\": only plain or quoted",
            ),
            (
                "exact:\n  a: 'x\n",
                "line 2: exact: entry \"a\": unterminated string",
            ),
            ("exact:\n  a\n", "line 2: \"a\" is not `name: name`"),
            ("exact:\n  a:\n", "line 2: exact: entry \"a\": no value"),
            ("nope:\n", "unknown section \"nope\""),
        ];
        for (text, want) in y {
            let e = Mapping::parse_yaml(text, Path::new("m.yml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("m.yml") && e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn load_refuses_missing_and_huge_files() {
        let dir = std::env::temp_dir().join(format!("opdump-mapping-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = Mapping::load(&dir.join("none.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none.json"), "{e}");
        let f = dir.join("ok.yml");
        std::fs::write(&f, "exact:\n  a: b\n").unwrap();
        assert_eq!(Mapping::load(&f).unwrap().target("a").as_deref(), Some("b"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
