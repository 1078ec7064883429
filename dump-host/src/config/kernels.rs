//! Which kernels a `dump_mode` 1 config selects: MindSpore's three kinds of `kernels` entry.
//!
//! * `name-regex(RE)`: `RE` must match the whole full name (Rust `regex` syntax, anchored).
//! * an entry containing `/` or `-op`: exact, case-sensitive full name.
//! * anything else: an op type. It matches when the lowercased entry is a substring of the
//!   lowercased part of the full name between the last `/` and the last `-`
//!   (`Default/net/conv1-Conv2d/Conv2D-op12` → `conv2d`). Called with a Parameter's name
//!   (`conv1.weight`, no `/` or `-`), the whole name is that part, so `conv` also selects the
//!   Parameters `conv1.weight` and `moments.conv1.weight`, as in MindSpore.
//!
//! A name is checked against the regexes, then the exact names, then the op types; the first
//! entry that matches is marked as used, so [`KernelFilter::unused_entries`] can report
//! MindSpore's `Unused Kernel in json` list when the dump closes.
//!
//! ```
//! use dump_host::config::KernelFilter;
//!
//! let f = KernelFilter::from_entries(["conv", "name-regex(.*/Add-op\\d+)", "Default/x/MatMul-op3"]).unwrap();
//! assert!(f.matches("Default/net/conv1-Conv2d/Conv2D-op12"));
//! assert!(f.matches("Default/net/Add-op7"));
//! assert!(!f.matches("Default/net/ReLU-op2"));
//! assert_eq!(f.unused_entries(), ["Default/x/MatMul-op3"]);
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use regex::Regex;
use serde_json::Value;

/// How one `kernels` entry is interpreted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// `name-regex(...)`: full match of a regular expression.
    Regex,
    /// Contains `/` or `-op`: exact full name.
    FullName,
    /// Anything else: case-insensitive op type substring.
    OpType,
}

/// The prefix of a regex entry.
pub(super) const REGEX_PREFIX: &str = "name-regex(";

/// Normalises a `kernels` element like MindSpore: a non-string element becomes its compact JSON
/// text; then every `"` and every space is removed. A string element is taken as its decoded
/// value, so JSON escapes such as `\\d` give `\d` (MindSpore keeps them doubled).
pub fn normalize_entry(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    text.chars().filter(|&c| c != '"' && c != ' ').collect()
}

/// Classifies a normalised, non-empty entry.
pub fn classify(entry: &str) -> EntryKind {
    if entry.starts_with(REGEX_PREFIX) && entry.ends_with(')') && entry.len() > REGEX_PREFIX.len() {
        EntryKind::Regex
    } else if !entry.contains('/') && !entry.contains("-op") {
        EntryKind::OpType
    } else {
        EntryKind::FullName
    }
}

/// A `kernels` entry whose regular expression does not compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadRegex {
    /// Index of the entry in the list given to [`KernelFilter::from_entries`].
    pub index: usize,
    /// The entry.
    pub entry: String,
    /// The `regex` crate's message.
    pub message: String,
}

/// The op-type part of a full name: after the last `/`, up to the last `-` after it.
pub fn type_part(full_name: &str) -> &str {
    let tail = match full_name.rfind('/') {
        Some(i) => &full_name[i + 1..],
        None => full_name,
    };
    match tail.rfind('-') {
        Some(j) => &tail[..j],
        None => tail,
    }
}

/// ASCII-case-insensitive substring test; `needle` is already lowercase.
fn contains_lower(hay: &[u8], needle: &[u8]) -> bool {
    if needle.is_empty() {
        return true;
    }
    if needle.len() > hay.len() {
        return false;
    }
    hay.windows(needle.len()).any(|w| {
        w.iter()
            .zip(needle)
            .all(|(a, b)| a.to_ascii_lowercase() == *b)
    })
}

/// The kernel selection of a config, with "was it ever used" tracking. Shareable between
/// threads (`matches` takes `&self`).
#[derive(Debug)]
pub struct KernelFilter {
    /// `None`: every kernel matches (dump_mode 0, or dump_mode 1 without entries).
    entries: Option<Vec<String>>,
    regexes: Vec<(Regex, usize)>,
    exact: HashMap<String, usize>,
    /// Byte lengths of the exact names: most names are rejected without hashing.
    exact_lens: Vec<usize>,
    types: Vec<(Vec<u8>, usize)>,
    used: Vec<AtomicBool>,
    /// dump_mode 2: the names and scopes marked with `set_dump` (see [`KernelFilter::marked`]).
    marks: Vec<String>,
}

impl KernelFilter {
    /// A filter that selects every kernel.
    pub fn all() -> Self {
        KernelFilter {
            entries: None,
            regexes: Vec::new(),
            exact: HashMap::new(),
            exact_lens: Vec::new(),
            types: Vec::new(),
            used: Vec::new(),
            marks: Vec::new(),
        }
    }

    /// The filter of a `dump_mode` 2 config (Ascend `set_dump`): it selects the kernels whose
    /// full name is one of `marks`, or lies in a scope that is (`Default/net/conv1-Conv2d`
    /// marks `Default/net/conv1-Conv2d/Conv2D-op0`, as `set_dump` on a cell marks the kernels
    /// inside it). Without marks it selects nothing, as in MindSpore, where nothing is marked
    /// by default. Marks are not `kernels` entries: they are never reported as unused.
    pub fn marked<I, S>(marks: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut seen = HashSet::new();
        let marks = marks
            .into_iter()
            .map(|m| m.as_ref().trim_end_matches('/').to_owned())
            .filter(|m| !m.is_empty() && seen.insert(m.clone()))
            .collect();
        KernelFilter {
            entries: Some(Vec::new()),
            marks,
            ..Self::all()
        }
    }

    /// Builds a filter from normalised entries (see [`normalize_entry`]). Empty entries are
    /// skipped and duplicates kept once; with no entry left the filter selects everything,
    /// like MindSpore. Every regex that does not compile is returned.
    pub fn from_entries<I, S>(entries: I) -> Result<Self, Vec<BadRegex>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut kept: Vec<String> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        let mut regexes = Vec::new();
        let mut exact = HashMap::new();
        let mut types = Vec::new();
        let mut bad = Vec::new();
        let entries: Vec<S> = entries.into_iter().collect();
        for (index, e) in entries.iter().enumerate() {
            let e = e.as_ref();
            if e.is_empty() || !seen.insert(e) {
                continue;
            }
            let slot = kept.len();
            match classify(e) {
                EntryKind::Regex => {
                    let body = &e[REGEX_PREFIX.len()..e.len() - 1];
                    match Regex::new(&format!("^(?:{body})$")) {
                        Ok(re) => regexes.push((re, slot)),
                        Err(err) => {
                            bad.push(BadRegex {
                                index,
                                entry: e.to_owned(),
                                message: err.to_string(),
                            });
                            continue;
                        }
                    }
                }
                EntryKind::FullName => {
                    exact.insert(e.to_owned(), slot);
                }
                EntryKind::OpType => types.push((e.to_ascii_lowercase().into_bytes(), slot)),
            }
            kept.push(e.to_owned());
        }
        if !bad.is_empty() {
            return Err(bad);
        }
        if kept.is_empty() {
            return Ok(Self::all());
        }
        let used = kept.iter().map(|_| AtomicBool::new(false)).collect();
        let mut exact_lens: Vec<usize> = exact.keys().map(String::len).collect();
        exact_lens.sort_unstable();
        exact_lens.dedup();
        Ok(KernelFilter {
            entries: Some(kept),
            regexes,
            exact,
            exact_lens,
            types,
            used,
            marks: Vec::new(),
        })
    }

    /// Whether this filter selects every kernel.
    pub fn selects_all(&self) -> bool {
        self.entries.is_none()
    }

    /// The entries, deduplicated, in order (empty when everything is selected).
    pub fn entries(&self) -> &[String] {
        self.entries.as_deref().unwrap_or(&[])
    }

    fn mark(&self, slot: usize) -> bool {
        let flag = &self.used[slot];
        if !flag.load(Ordering::Relaxed) {
            flag.store(true, Ordering::Relaxed);
        }
        true
    }

    /// Whether the kernel (or Parameter) with this full name is selected, marking the entry
    /// that selects it as used. Allocation-free.
    pub fn matches(&self, full_name: &str) -> bool {
        match self.selecting(full_name) {
            Some(Some(slot)) => self.mark(slot),
            Some(None) => true,
            None => false,
        }
    }

    /// [`matches`](KernelFilter::matches) without marking anything used: for a question asked
    /// ahead of the run (which kernels a runtime must prepare to show), so that an entry is
    /// reported unused unless a kernel it selects is dumped.
    pub fn would_match(&self, full_name: &str) -> bool {
        self.selecting(full_name).is_some()
    }

    /// The entry slot that selects `full_name`; `Some(None)` when it is selected without an
    /// entry (everything selected, or a mark); `None` when it is not selected.
    fn selecting(&self, full_name: &str) -> Option<Option<usize>> {
        if self.entries.is_none() {
            return Some(None);
        }
        if let Some((_, slot)) = self.regexes.iter().find(|(re, _)| re.is_match(full_name)) {
            return Some(Some(*slot));
        }
        if self.exact_lens.contains(&full_name.len())
            && let Some(&slot) = self.exact.get(full_name)
        {
            return Some(Some(slot));
        }
        let part = type_part(full_name).as_bytes();
        if let Some((_, slot)) = self.types.iter().find(|(t, _)| contains_lower(part, t)) {
            return Some(Some(*slot));
        }
        self.marks
            .iter()
            .any(|m| {
                full_name
                    .strip_prefix(m.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            })
            .then_some(None)
    }

    /// The entries that never selected anything so far, in order. MindSpore logs each as
    /// `[DataDump] Unused Kernel in json: <entry>` at exit.
    pub fn unused_entries(&self) -> Vec<&str> {
        self.entries()
            .iter()
            .zip(&self.used)
            .filter(|(_, u)| !u.load(Ordering::Relaxed))
            .map(|(e, _)| e.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const CONV: &str = "Default/network-WithLossCell/_backbone-TinyNet/conv1-Conv2d/Conv2D-op0";

    #[test]
    fn normalisation_like_mindspore() {
        assert_eq!(normalize_entry(&json!("Re LU")), "ReLU");
        assert_eq!(normalize_entry(&json!("a\"b")), "ab");
        assert_eq!(normalize_entry(&json!(5)), "5");
        assert_eq!(normalize_entry(&json!(true)), "true");
        assert_eq!(normalize_entry(&json!(["a b", 1])), "[ab,1]");
        assert_eq!(normalize_entry(&json!(null)), "null");
        assert_eq!(
            normalize_entry(&json!("name-regex(a\\d)")),
            "name-regex(a\\d)"
        );
    }

    #[test]
    fn classification() {
        assert_eq!(classify("conv"), EntryKind::OpType);
        assert_eq!(classify("Conv2D-op12"), EntryKind::FullName);
        assert_eq!(classify("a/b"), EntryKind::FullName);
        assert_eq!(classify("name-regex(.*)"), EntryKind::Regex);
        assert_eq!(classify("name-regex(.*"), EntryKind::OpType);
        assert_eq!(classify("name-regex(a/b"), EntryKind::FullName);
        assert_eq!(classify("5"), EntryKind::OpType);
    }

    #[test]
    fn type_part_edge_cases() {
        assert_eq!(type_part("Default/net/conv1-Conv2d/Conv2D-op12"), "Conv2D");
        assert_eq!(type_part("Conv2D-op12"), "Conv2D");
        assert_eq!(type_part("a-b/Relu"), "Relu");
        assert_eq!(type_part("conv1.weight"), "conv1.weight");
        assert_eq!(type_part("a/b-c-d"), "b-c");
        assert_eq!(type_part("a/"), "");
        assert_eq!(type_part(""), "");
    }

    #[test]
    fn reference_cases() {
        // c2: `conv` selects Conv2D, Conv2DBackpropFilter and conv Parameters, not ReLU.
        let f = KernelFilter::from_entries(["conv"]).unwrap();
        assert!(f.matches(CONV));
        assert!(f.matches("Gradients/Default/Grad_Conv2D/Conv2DBackpropFilter-op0"));
        assert!(f.matches("conv1.weight"));
        assert!(f.matches("moments.conv1.weight"));
        assert!(!f.matches("Default/network-WithLossCell/_backbone-TinyNet/ReLU-op1"));
        // `op12` is not part of the type.
        assert!(
            !KernelFilter::from_entries(["op12"])
                .unwrap()
                .matches("Default/Conv2D-op12")
        );
        // c1: exact full name, case-sensitive.
        let f = KernelFilter::from_entries([CONV]).unwrap();
        assert!(f.matches(CONV));
        assert!(!f.matches(&CONV.to_lowercase()));
        assert!(
            !f.matches("Default/network-WithLossCell/_backbone-TinyNet/conv1-Conv2d/Conv2D-op01")
        );
        // c3: regex full match.
        let f = KernelFilter::from_entries(["name-regex(Default/.+)"]).unwrap();
        assert!(f.matches(CONV));
        assert!(!f.matches("Gradients/Default/x-op1"));
        assert!(!f.matches("conv1.weight"));
        // e14: no entries selects everything.
        let f = KernelFilter::from_entries(Vec::<String>::new()).unwrap();
        assert!(f.selects_all() && f.matches("anything") && f.unused_entries().is_empty());
        let f = KernelFilter::from_entries(["", ""]).unwrap();
        assert!(f.selects_all());
    }

    #[test]
    fn regex_escapes_work_and_bad_regex_is_reported() {
        let f = KernelFilter::from_entries([r"name-regex(.*/Add-op\d+)"]).unwrap();
        assert!(f.matches("Default/Add-op12"));
        assert!(!f.matches("Default/Add-opx"));
        let err =
            KernelFilter::from_entries(["relu", "name-regex(a(b)", "name-regex([)"]).unwrap_err();
        assert_eq!(err.len(), 2);
        assert_eq!(err[0].index, 1);
        assert_eq!(err[1].entry, "name-regex([)");
        assert!(!err[0].message.is_empty());
    }

    #[test]
    fn order_and_unused_tracking() {
        let f = KernelFilter::from_entries([
            "relu",
            "name-regex(.*ReLU.*)",
            "relu",
            "Default/Add-op1",
            "mul",
        ])
        .unwrap();
        assert_eq!(
            f.entries(),
            ["relu", "name-regex(.*ReLU.*)", "Default/Add-op1", "mul"]
        );
        assert!(f.matches("Default/ReLU-op3"));
        // The regex is checked first, so it is the one marked used.
        assert_eq!(f.unused_entries(), ["relu", "Default/Add-op1", "mul"]);
        // Asking ahead of time marks nothing.
        assert!(f.would_match("Default/net/relu-ReLU/ReLU-op9"));
        assert!(!f.would_match("Default/Sub-op0"));
        assert_eq!(f.unused_entries(), ["relu", "Default/Add-op1", "mul"]);
        assert!(f.matches("Default/ReluGrad-op1"));
        assert!(f.matches("Default/Add-op1"));
        assert_eq!(f.unused_entries(), ["mul"]);
    }

    #[test]
    fn set_dump_marks_select_names_and_scopes_only() {
        let none = KernelFilter::marked(std::iter::empty::<&str>());
        assert!(!none.selects_all() && !none.matches(CONV) && !none.matches(""));
        let f = KernelFilter::marked(["Default/network-WithLossCell/_backbone-TinyNet/", "x"]);
        assert!(f.matches(CONV));
        assert!(f.matches("x") && f.matches("x/Add-op1"));
        assert!(!f.matches("xy/Add-op1") && !f.matches("Default/network-WithLossCell"));
        assert!(
            f.unused_entries().is_empty(),
            "marks are not kernels entries"
        );
    }

    fn naive(entries: &[String], name: &str) -> bool {
        let nonempty: Vec<&String> = entries.iter().filter(|e| !e.is_empty()).collect();
        if nonempty.is_empty() {
            return true;
        }
        nonempty.iter().any(|e| match classify(e) {
            EntryKind::Regex => false,
            EntryKind::FullName => e.as_str() == name,
            EntryKind::OpType => {
                let seg = name.rsplit('/').next().unwrap_or("");
                let seg = match seg.rfind('-') {
                    Some(j) => &seg[..j],
                    None => seg,
                };
                seg.to_ascii_lowercase().contains(&e.to_ascii_lowercase())
            }
        })
    }

    proptest! {
        #[test]
        fn matches_like_naive_model(
            entries in proptest::collection::vec("[a-cA-C/-]{0,5}|[a-c]{0,3}-op[0-9]", 0..4),
            name in "[a-cA-C/.-]{0,12}(-op[0-9])?",
        ) {
            let f = KernelFilter::from_entries(&entries).unwrap();
            prop_assert_eq!(f.matches(&name), naive(&entries, &name));
        }

        #[test]
        fn op_type_is_case_insensitive(t in "[a-zA-Z0-9]{1,6}", pre in "[a-z/]{0,6}", n in 0u32..100) {
            let name = format!("{pre}/X{}Y-op{n}", t.to_ascii_uppercase());
            let f = KernelFilter::from_entries([t.to_ascii_lowercase()]).unwrap();
            prop_assert!(f.matches(&name));
            prop_assert!(f.unused_entries().is_empty());
        }
    }
}
