//! Statistic categories: MindSpore 2.10's `statistic_category` names, their `statistic.csv`
//! column titles, and [`CategorySet`], the ordered, de-duplicated, fixed-capacity list a config
//! selects.

/// A config value echoed back in an error, truncated to 32 bytes (on a UTF-8 boundary) so that
/// the error never allocates.
pub type EchoedName = heapless::String<32>;

/// Copies `s` into an [`EchoedName`], cutting at a character boundary (with a trailing `…`
/// when it did not fit).
pub(crate) fn echo(s: &str) -> EchoedName {
    let mut out = EchoedName::new();
    if out.push_str(s).is_ok() {
        return out;
    }
    for c in s.chars() {
        if out.len() + c.len_utf8() + '…'.len_utf8() > out.capacity() {
            break;
        }
        // Cannot fail: the length was checked above.
        let _ = out.push(c);
    }
    let _ = out.push('…');
    out
}

/// A `statistic_category` item that MindSpore 2.10 does not accept.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UnknownCategory {
    /// The offending item (truncated to 32 bytes).
    pub name: EchoedName,
    /// Its position in the configured list.
    pub index: usize,
    /// The valid name closest to it (edit distance, ASCII case-insensitive).
    pub suggestion: &'static str,
}

impl core::fmt::Display for UnknownCategory {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // MindSpore's own wording first, then what it does not say.
        write!(
            f,
            "The following statistic_category is invalid:{}, the valid \
             statistic_category are as follows:[",
            self.name
        )?;
        for (i, n) in VALID_NAMES.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "'{n}'")?;
        }
        write!(
            f,
            "] (item {} of statistic_category; did you mean '{}'?)",
            self.index, self.suggestion
        )
    }
}

impl core::error::Error for UnknownCategory {}

/// The 15 `statistic_category` names MindSpore 2.10 accepts, in MindSpore's own order (the
/// order its error message lists them in).
pub const VALID_NAMES: [&str; 15] = [
    "max",
    "min",
    "avg",
    "count",
    "negative zero count",
    "positive zero count",
    "nan count",
    "negative inf count",
    "positive inf count",
    "zero count",
    "md5",
    "l2norm",
    "hash",
    "hash:sha1",
    "hash:md5",
];

/// One statistic column of `statistic.csv`.
///
/// Several config names can select the same column: `hash` and `hash:sha1` both mean
/// [`Sha1`](Category::Sha1) (in MindSpore 2.10 `hash` is SHA-1; it was MD5 up to 2.7.0), and
/// `hash:md5` means [`Md5`](Category::Md5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Category {
    /// `max` → `Max Value`.
    Max,
    /// `min` → `Min Value`.
    Min,
    /// `avg` → `Avg Value`.
    Avg,
    /// `count` → `Count`: number of elements.
    Count,
    /// `negative zero count` → `Negative Zero Count`. A MindSpore misnomer: it counts the
    /// elements `< 0` (including `-inf`), not the `-0.0`s.
    NegativeZeroCount,
    /// `positive zero count` → `Positive Zero Count`. A MindSpore misnomer: it counts the
    /// elements `> 0` (including `+inf`).
    PositiveZeroCount,
    /// `nan count` → `NaN Count`.
    NanCount,
    /// `negative inf count` → `Negative Inf Count`.
    NegativeInfCount,
    /// `positive inf count` → `Positive Inf Count`.
    PositiveInfCount,
    /// `zero count` → `Zero Count`: elements equal to `±0.0`.
    ZeroCount,
    /// `md5` or `hash:md5` → `MD5`: 32 lowercase hex digits of MD5 over the tensor bytes.
    Md5,
    /// `l2norm` → `L2Norm Value`.
    L2Norm,
    /// `hash` or `hash:sha1` → `SHA1`: 40 lowercase hex digits of MindSpore's SHA-1 scheme.
    Sha1,
}

impl Category {
    /// Every column, in declaration order.
    pub const ALL: [Category; 13] = [
        Category::Max,
        Category::Min,
        Category::Avg,
        Category::Count,
        Category::NegativeZeroCount,
        Category::PositiveZeroCount,
        Category::NanCount,
        Category::NegativeInfCount,
        Category::PositiveInfCount,
        Category::ZeroCount,
        Category::Md5,
        Category::L2Norm,
        Category::Sha1,
    ];

    /// Parses one `statistic_category` item, exactly as MindSpore does (case-sensitive, no
    /// trimming). Unknown names give [`UnknownCategory`] naming the closest valid one
    /// (`index` is 0; [`CategorySet::parse`] fills in the position).
    pub fn parse(name: &str) -> Result<Category, UnknownCategory> {
        Ok(match name {
            "max" => Category::Max,
            "min" => Category::Min,
            "avg" => Category::Avg,
            "count" => Category::Count,
            "negative zero count" => Category::NegativeZeroCount,
            "positive zero count" => Category::PositiveZeroCount,
            "nan count" => Category::NanCount,
            "negative inf count" => Category::NegativeInfCount,
            "positive inf count" => Category::PositiveInfCount,
            "zero count" => Category::ZeroCount,
            "md5" | "hash:md5" => Category::Md5,
            "l2norm" => Category::L2Norm,
            "hash" | "hash:sha1" => Category::Sha1,
            _ => {
                return Err(UnknownCategory {
                    name: echo(name),
                    index: 0,
                    suggestion: closest_name(name),
                });
            }
        })
    }

    /// The canonical config name (`max`, ..., `md5`, `l2norm`, `hash:sha1`).
    pub const fn name(self) -> &'static str {
        match self {
            Category::Max => "max",
            Category::Min => "min",
            Category::Avg => "avg",
            Category::Count => "count",
            Category::NegativeZeroCount => "negative zero count",
            Category::PositiveZeroCount => "positive zero count",
            Category::NanCount => "nan count",
            Category::NegativeInfCount => "negative inf count",
            Category::PositiveInfCount => "positive inf count",
            Category::ZeroCount => "zero count",
            Category::Md5 => "md5",
            Category::L2Norm => "l2norm",
            Category::Sha1 => "hash:sha1",
        }
    }

    /// The `statistic.csv` column title (`Max Value`, `NaN Count`, `MD5`, `SHA1`, ...).
    pub const fn title(self) -> &'static str {
        match self {
            Category::Max => "Max Value",
            Category::Min => "Min Value",
            Category::Avg => "Avg Value",
            Category::Count => "Count",
            Category::NegativeZeroCount => "Negative Zero Count",
            Category::PositiveZeroCount => "Positive Zero Count",
            Category::NanCount => "NaN Count",
            Category::NegativeInfCount => "Negative Inf Count",
            Category::PositiveInfCount => "Positive Inf Count",
            Category::ZeroCount => "Zero Count",
            Category::Md5 => "MD5",
            Category::L2Norm => "L2Norm Value",
            Category::Sha1 => "SHA1",
        }
    }

    /// `true` for the four categories device statistics compute (max, min, avg, l2norm).
    pub const fn is_device(self) -> bool {
        matches!(
            self,
            Category::Max | Category::Min | Category::Avg | Category::L2Norm
        )
    }

    /// `true` for the digest columns (MD5, SHA1).
    pub const fn is_hash(self) -> bool {
        matches!(self, Category::Md5 | Category::Sha1)
    }
}

impl core::fmt::Display for Category {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Category {
    type Err = UnknownCategory;
    fn from_str(s: &str) -> Result<Self, UnknownCategory> {
        Category::parse(s)
    }
}

/// The valid name with the smallest edit distance to `name` (ASCII case-insensitive
/// Levenshtein over bytes; ties go to the earlier name in [`VALID_NAMES`]).
pub fn closest_name(name: &str) -> &'static str {
    let mut best = VALID_NAMES[0];
    let mut best_d = usize::MAX;
    for cand in VALID_NAMES {
        let d = edit_distance(name.as_bytes(), cand.as_bytes());
        if d < best_d {
            best_d = d;
            best = cand;
        }
    }
    best
}

/// Levenshtein distance, ASCII case-insensitive, with two fixed rows over `b` (the valid names
/// are at most 19 bytes, so `b` is truncated at 31 bytes, which never happens for them).
fn edit_distance(a: &[u8], b: &[u8]) -> usize {
    const W: usize = 32;
    let b = &b[..b.len().min(W - 1)];
    let mut prev = [0usize; W];
    let mut cur = [0usize; W];
    for (j, p) in prev.iter_mut().enumerate().take(b.len() + 1) {
        *p = j;
    }
    for (i, &ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let subst = prev[j] + usize::from(!ca.eq_ignore_ascii_case(&cb));
            cur[j + 1] = subst.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// An ordered list of distinct statistic columns, as a config selects them. Fixed capacity
/// (one slot per [`Category`]), no allocation.
///
/// Duplicates follow MindSpore 2.10's host rule: the first occurrence wins and later ones are
/// dropped. Names that select the same column are duplicates of each other (`hash` and
/// `hash:sha1`; `md5` and `hash:md5`), because MindSpore maps them to one statistic before it
/// de-duplicates and two identical columns would carry no information.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CategorySet {
    items: heapless::Vec<Category, 13>,
}

impl Default for CategorySet {
    /// MindSpore's default `["max", "min", "l2norm"]`.
    fn default() -> Self {
        let mut s = CategorySet::new();
        s.push(Category::Max);
        s.push(Category::Min);
        s.push(Category::L2Norm);
        s
    }
}

impl CategorySet {
    /// Every distinct column, in MindSpore's list order ([`Category::ALL`]).
    pub fn all() -> CategorySet {
        let mut s = CategorySet::new();
        Category::ALL.into_iter().for_each(|c| {
            s.push(c);
        });
        s
    }

    /// No columns (the `"statistic_category": []` case).
    pub const fn new() -> CategorySet {
        CategorySet {
            items: heapless::Vec::new(),
        }
    }

    /// Parses a configured list in order, de-duplicating (first occurrence wins). The first
    /// unknown item gives [`UnknownCategory`] with its position and a suggestion.
    pub fn parse<'a>(
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<CategorySet, UnknownCategory> {
        let mut set = CategorySet::new();
        for (i, name) in names.into_iter().enumerate() {
            match Category::parse(name) {
                Ok(c) => {
                    set.push(c);
                }
                Err(e) => return Err(UnknownCategory { index: i, ..e }),
            }
        }
        Ok(set)
    }

    /// Appends `c` unless it is already present; returns whether it was added.
    pub fn push(&mut self, c: Category) -> bool {
        if self.contains(c) {
            return false;
        }
        // Cannot fail: the capacity is the number of distinct categories.
        self.items.push(c).is_ok()
    }

    /// The columns, in order.
    pub fn as_slice(&self) -> &[Category] {
        &self.items
    }

    /// Iterates the columns in order.
    pub fn iter(&self) -> impl Iterator<Item = Category> + '_ {
        self.items.iter().copied()
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// `true` when there are no statistic columns.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// `true` when `c` is one of the columns.
    pub fn contains(&self, c: Category) -> bool {
        self.items.contains(&c)
    }

    /// `true` when an MD5 column is requested.
    pub fn needs_md5(&self) -> bool {
        self.contains(Category::Md5)
    }

    /// `true` when a SHA1 column is requested.
    pub fn needs_sha1(&self) -> bool {
        self.contains(Category::Sha1)
    }

    /// The device-statistics view (spec §7): `(kept, dropped)`, where `kept` holds the max,
    /// min, avg and l2norm columns in config order and `dropped` the other valid host
    /// categories, which MindSpore drops with a warning in device mode.
    pub fn split_device(&self) -> (CategorySet, CategorySet) {
        let mut kept = CategorySet::new();
        let mut dropped = CategorySet::new();
        for c in self.iter() {
            if c.is_device() {
                kept.push(c);
            } else {
                dropped.push(c);
            }
        }
        (kept, dropped)
    }
}

impl<'a> IntoIterator for &'a CategorySet {
    type Item = &'a Category;
    type IntoIter = core::slice::Iter<'a, Category>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn all_is_every_distinct_column_once() {
        let a = super::CategorySet::all();
        assert_eq!(a.as_slice(), &super::Category::ALL);
        let parsed = super::CategorySet::parse(super::VALID_NAMES).unwrap();
        assert_eq!(
            parsed.as_slice(),
            a.as_slice(),
            "the 15 names select the same 13 columns"
        );
    }

    use super::*;

    #[test]
    fn echo_truncates_on_char_boundary() {
        assert_eq!(echo("max").as_str(), "max");
        let long = "é".repeat(40);
        let e = echo(&long);
        assert!(e.ends_with('…'));
        assert!(e.len() <= 32);
        assert!(e.starts_with("éé"));
    }

    #[test]
    fn every_valid_name_parses_and_titles_are_mindspore_s() {
        let titles: Vec<&str> = VALID_NAMES
            .iter()
            .map(|n| Category::parse(n).unwrap().title())
            .collect();
        assert_eq!(
            titles,
            [
                "Max Value",
                "Min Value",
                "Avg Value",
                "Count",
                "Negative Zero Count",
                "Positive Zero Count",
                "NaN Count",
                "Negative Inf Count",
                "Positive Inf Count",
                "Zero Count",
                "MD5",
                "L2Norm Value",
                "SHA1",
                "SHA1",
                "MD5"
            ]
        );
        for c in Category::ALL {
            assert_eq!(Category::parse(c.name()), Ok(c));
        }
    }

    #[test]
    fn default_is_max_min_l2norm() {
        let d = CategorySet::default();
        assert_eq!(
            d.as_slice(),
            [Category::Max, Category::Min, Category::L2Norm]
        );
    }

    #[test]
    fn order_kept_and_duplicates_dropped_first_wins() {
        let s = CategorySet::parse([
            "l2norm",
            "max",
            "hash",
            "l2norm",
            "hash:sha1",
            "md5",
            "hash:md5",
        ])
        .unwrap();
        assert_eq!(
            s.as_slice(),
            [
                Category::L2Norm,
                Category::Max,
                Category::Sha1,
                Category::Md5
            ]
        );
        assert!(s.needs_md5() && s.needs_sha1());
        let all = CategorySet::parse(VALID_NAMES).unwrap();
        assert_eq!(all.len(), 13);
        assert!(CategorySet::parse([]).unwrap().is_empty());
    }

    #[test]
    fn unknown_name_reports_position_valid_names_and_suggestion() {
        let e = CategorySet::parse(["max", "l2_norm"]).unwrap_err();
        assert_eq!(
            (e.name.as_str(), e.index, e.suggestion),
            ("l2_norm", 1, "l2norm")
        );
        let text = e.to_string();
        assert!(text.starts_with("The following statistic_category is invalid:l2_norm, "));
        assert!(text.contains("['max', 'min', 'avg', 'count', 'negative zero count',"));
        assert!(text.contains("'hash:md5']"));
        assert!(text.ends_with("did you mean 'l2norm'?)"));
        assert_eq!(closest_name("Max"), "max");
        assert_eq!(closest_name("nan_count"), "nan count");
        assert_eq!(closest_name("hash:sha"), "hash:sha1");
        assert_eq!(closest_name("md-5"), "md5");
        assert_eq!(closest_name("negative-inf-count"), "negative inf count");
        assert!(
            Category::parse("MAX").is_err(),
            "MindSpore is case-sensitive"
        );
        assert!(Category::parse(" max").is_err(), "MindSpore does not trim");
    }

    #[test]
    fn edit_distance_basics() {
        assert_eq!(edit_distance(b"", b"max"), 3);
        assert_eq!(edit_distance(b"kitten", b"sitting"), 3);
        assert_eq!(edit_distance(b"MIN", b"min"), 0);
        assert_eq!(edit_distance(&[b'x'; 100], b"max"), 99);
    }

    #[test]
    fn device_split_keeps_order() {
        let s = CategorySet::parse(["count", "l2norm", "md5", "max"]).unwrap();
        let (kept, dropped) = s.split_device();
        assert_eq!(kept.as_slice(), [Category::L2Norm, Category::Max]);
        assert_eq!(dropped.as_slice(), [Category::Count, Category::Md5]);
    }
}
