//! The `iteration` filter of a MindSpore `data_dump.json`: which steps are dumped.
//!
//! Grammar (MindSpore 2.10, spec §2): either exactly `all`, or segments separated by `|`, each
//! a decimal step (`7`, leading zeros fine) or an inclusive range `lo-hi` (`5-8`). A step `k`
//! matches when any segment matches it. MindSpore accepts, and never matches, segments that
//! cannot be ranges: an empty segment (`1||2`), a reversed range (`5-3`), more than one `-`
//! (`1-2-3`), a missing side (`-5`, `5-`) and numbers that overflow 64 bits.
//! [`IterationSpec::segments`] lets a caller warn about those.
//!
//! One deliberate difference from MindSpore: ASCII spaces around a segment are ignored, so the
//! form `"0 | 5-8 | 100-120"` from MindSpore's own documentation works (MindSpore's parser
//! rejects it). A space inside a segment (`1 2`, `5 - 8`) is still an error.
//!
//! Nothing here allocates: the spec borrows the text and matching walks it.
//!
//! ```
//! use dump_core::iteration::IterationSpec;
//!
//! let spec = IterationSpec::parse("0 | 5-8 | 100-120").unwrap();
//! assert!(spec.matches(0) && spec.matches(6) && spec.matches(120));
//! assert!(!spec.matches(9));
//! assert!(IterationSpec::parse("all").unwrap().matches(u32::MAX));
//! assert!(IterationSpec::parse("a|b").is_err());
//! // `5-3` is legal but can never match.
//! let never = IterationSpec::parse("5-3|7").unwrap();
//! assert_eq!(never.segments().filter(|s| s.never_matches()).count(), 1);
//! ```

use crate::Error;

/// A validated `iteration` value. Borrows its text; [`Copy`] and allocation-free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IterationSpec<'a> {
    /// `None` means `all`.
    text: Option<&'a str>,
}

/// What one `|`-separated segment of an iteration spec means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SegmentKind {
    /// A single step.
    Single(u64),
    /// An inclusive range `lo-hi` with `lo <= hi`.
    Range(u64, u64),
    /// A range `lo-hi` with `lo > hi`: legal, never matches.
    Reversed(u64, u64),
    /// An empty segment (`1||2`, a leading or trailing `|`): never matches.
    Empty,
    /// More than one `-`, or a `-` with an empty side (`1-2-3`, `-5`, `5-`): never matches.
    Malformed,
    /// A number that does not fit in 64 bits: never matches (MindSpore's `stoul` fails).
    Overflow,
}

/// One `|`-separated segment of an [`IterationSpec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment<'a> {
    /// The segment's text with surrounding spaces removed.
    pub text: &'a str,
    /// Its meaning.
    pub kind: SegmentKind,
}

impl Segment<'_> {
    /// Whether no `u32` step can ever match this segment (empty, reversed, malformed,
    /// overflowing, or a single value above `u32::MAX`, or a range starting above it).
    pub fn never_matches(&self) -> bool {
        match self.kind {
            SegmentKind::Single(v) => v > u64::from(u32::MAX),
            SegmentKind::Range(lo, _) => lo > u64::from(u32::MAX),
            SegmentKind::Reversed(..)
            | SegmentKind::Empty
            | SegmentKind::Malformed
            | SegmentKind::Overflow => true,
        }
    }

    /// Whether `step` matches this segment.
    pub fn matches(&self, step: u32) -> bool {
        let k = u64::from(step);
        match self.kind {
            SegmentKind::Single(v) => v == k,
            SegmentKind::Range(lo, hi) => lo <= k && k <= hi,
            _ => false,
        }
    }
}

/// Iterator over the segments of an [`IterationSpec`]; see [`IterationSpec::segments`].
#[derive(Clone, Debug)]
pub struct Segments<'a> {
    rest: Option<&'a str>,
}

impl<'a> Iterator for Segments<'a> {
    type Item = Segment<'a>;

    fn next(&mut self) -> Option<Segment<'a>> {
        let rest = self.rest?;
        let (head, tail) = match rest.find('|') {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        self.rest = tail;
        let text = head.trim_matches(' ');
        Some(Segment {
            text,
            kind: classify(text),
        })
    }
}

/// Decimal digits to `u64`; `None` on overflow or an empty/non-digit string.
fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for b in s.bytes() {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

fn classify(text: &str) -> SegmentKind {
    if text.is_empty() {
        return SegmentKind::Empty;
    }
    match text.find('-') {
        None => parse_u64(text).map_or(SegmentKind::Overflow, SegmentKind::Single),
        Some(i) => {
            let (lo, hi) = (&text[..i], &text[i + 1..]);
            if lo.is_empty() || hi.is_empty() || hi.contains('-') {
                return SegmentKind::Malformed;
            }
            match (parse_u64(lo), parse_u64(hi)) {
                (Some(lo), Some(hi)) if lo <= hi => SegmentKind::Range(lo, hi),
                (Some(lo), Some(hi)) => SegmentKind::Reversed(lo, hi),
                _ => SegmentKind::Overflow,
            }
        }
    }
}

impl<'a> IterationSpec<'a> {
    /// The spec that matches every step (`"all"`).
    pub const ALL: IterationSpec<'static> = IterationSpec { text: None };

    /// Validates `text`: exactly `all`, or only ASCII digits, `-` and `|`, with optional ASCII
    /// spaces around segments. An empty string, any other character, or a space inside a
    /// segment gives [`Error::InvalidIteration`] with the byte offset of the first offender
    /// (offset 0 for an empty string).
    pub fn parse(text: &'a str) -> Result<Self, Error> {
        if text == "all" {
            return Ok(Self::ALL);
        }
        if text.is_empty() {
            return Err(Error::InvalidIteration { at: 0 });
        }
        // A space is allowed only where it touches `|`, the string ends or another such space.
        let bytes = text.as_bytes();
        let mut seg_start = 0;
        for i in 0..=bytes.len() {
            if i == bytes.len() || bytes[i] == b'|' {
                let seg = &bytes[seg_start..i];
                let lead = seg.iter().take_while(|&&b| b == b' ').count();
                let trail = seg[lead..].iter().rev().take_while(|&&b| b == b' ').count();
                let core = &seg[lead..seg.len() - trail];
                if let Some(j) = core
                    .iter()
                    .position(|&b| !(b.is_ascii_digit() || b == b'-'))
                {
                    return Err(Error::InvalidIteration {
                        at: seg_start + lead + j,
                    });
                }
                seg_start = i + 1;
            }
        }
        Ok(IterationSpec { text: Some(text) })
    }

    /// Whether this is `all`.
    pub fn is_all(&self) -> bool {
        self.text.is_none()
    }

    /// The text this spec was parsed from (`"all"` for [`IterationSpec::ALL`]).
    pub fn as_str(&self) -> &'a str {
        self.text.unwrap_or("all")
    }

    /// Whether step `step` is dumped: `all` matches everything, otherwise any segment must
    /// match (see [`Segment::matches`]).
    pub fn matches(&self, step: u32) -> bool {
        match self.text {
            None => true,
            Some(_) => self.segments().any(|s| s.matches(step)),
        }
    }

    /// The segments in order (none for `all`).
    pub fn segments(&self) -> Segments<'a> {
        Segments { rest: self.text }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A deliberately naive model of spec §2, written from the text independently of the
    /// implementation above (string splitting and `u64::from_str`).
    fn naive(text: &str, k: u32) -> bool {
        if text == "all" {
            return true;
        }
        text.split('|').any(|seg| {
            let seg = seg.trim_matches(' ');
            let parts: std::vec::Vec<&str> = seg.split('-').collect();
            match parts.as_slice() {
                [one] if !one.is_empty() => one.parse::<u64>().ok() == Some(u64::from(k)),
                [lo, hi] if !lo.is_empty() && !hi.is_empty() => {
                    match (lo.parse::<u64>(), hi.parse::<u64>()) {
                        (Ok(lo), Ok(hi)) => lo <= u64::from(k) && u64::from(k) <= hi,
                        _ => false,
                    }
                }
                _ => false,
            }
        })
    }

    #[test]
    fn table() {
        let cases: &[(&str, &[u32], &[u32])] = &[
            ("all", &[0, 1, u32::MAX], &[]),
            ("0|2", &[0, 2], &[1, 3]),
            ("5-8", &[5, 6, 8], &[4, 9]),
            ("0 | 5-8 | 100-120", &[0, 5, 100, 120], &[1, 121]),
            ("007", &[7], &[0, 70]),
            ("5-3", &[], &[3, 4, 5]),
            ("1-2-3", &[], &[1, 2, 3]),
            ("-5", &[], &[0, 5]),
            ("5-", &[], &[5, 6]),
            ("|", &[], &[0]),
            ("1||2", &[1, 2], &[0]),
            ("4294967295", &[u32::MAX], &[0]),
            ("4294967296", &[], &[0, u32::MAX]),
            ("99999999999999999999", &[], &[0]),
            ("0-99999999999", &[0, u32::MAX], &[]),
            ("0-99999999999999999999", &[], &[0]),
        ];
        for (text, yes, no) in cases {
            let spec = IterationSpec::parse(text).unwrap();
            for &k in *yes {
                assert!(spec.matches(k), "{text:?} should match {k}");
            }
            for &k in *no {
                assert!(!spec.matches(k), "{text:?} should not match {k}");
            }
        }
    }

    #[test]
    fn rejects_bad_characters_with_offset() {
        let bad: &[(&str, usize)] = &[
            ("", 0),
            ("a|b", 0),
            ("ALL", 0),
            ("all|1", 0),
            ("+3", 0),
            ("1 2", 1),
            ("5 - 8", 1),
            ("1|2x", 3),
            ("1.5", 1),
            ("1\t|2", 1),
        ];
        for &(text, at) in bad {
            assert_eq!(
                IterationSpec::parse(text),
                Err(Error::InvalidIteration { at }),
                "{text:?}"
            );
        }
    }

    #[test]
    fn segments_classify_never_matching() {
        let spec = IterationSpec::parse("1|5-3||1-2-3|-5|4294967296|2-4").unwrap();
        let kinds: std::vec::Vec<SegmentKind> = spec.segments().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            [
                SegmentKind::Single(1),
                SegmentKind::Reversed(5, 3),
                SegmentKind::Empty,
                SegmentKind::Malformed,
                SegmentKind::Malformed,
                SegmentKind::Single(4_294_967_296),
                SegmentKind::Range(2, 4),
            ]
        );
        let never: std::vec::Vec<&str> = spec
            .segments()
            .filter(|s| s.never_matches())
            .map(|s| s.text)
            .collect();
        assert_eq!(never, ["5-3", "", "1-2-3", "-5", "4294967296"]);
        assert_eq!(IterationSpec::ALL.segments().count(), 0);
        assert_eq!(IterationSpec::ALL.as_str(), "all");
        assert!(IterationSpec::parse("all").unwrap().is_all());
    }

    proptest! {
        #[test]
        fn matches_like_naive_model(
            text in "[0-9|\\- ]{0,24}",
            k in prop_oneof![0u32..20, any::<u32>()],
        ) {
            match IterationSpec::parse(&text) {
                Ok(spec) => prop_assert_eq!(spec.matches(k), naive(&text, k)),
                Err(Error::InvalidIteration { at }) => {
                    // Only emptiness or a space inside a segment can be rejected here.
                    prop_assert!(text.is_empty() || text.as_bytes()[at] == b' ');
                    let inner_space = text.split('|').any(|s| s.trim_matches(' ').contains(' '));
                    prop_assert!(text.is_empty() || inner_space);
                }
                Err(e) => prop_assert!(false, "unexpected error {e:?}"),
            }
        }

        #[test]
        fn ranges_match_exactly_their_interval(lo in 0u32..1000, hi in 0u32..1000, k in 0u32..1100) {
            let text = std::format!("{lo}-{hi}");
            let spec = IterationSpec::parse(&text).unwrap();
            prop_assert_eq!(spec.matches(k), lo <= k && k <= hi);
            prop_assert_eq!(spec.segments().next().unwrap().never_matches(), lo > hi);
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,32}", k in any::<u32>()) {
            if let Ok(spec) = IterationSpec::parse(&text) {
                let _ = spec.matches(k);
                prop_assert!(text == "all" || text.bytes().all(|b| b.is_ascii_digit() || b == b'-' || b == b'|' || b == b' '));
            }
        }
    }
}
