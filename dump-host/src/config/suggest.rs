//! "Did you mean" for unknown keys and values: the closest known word by edit distance.

/// Levenshtein distance between two strings, by `char`.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        core::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The candidate closest to `word` (case-insensitively), if it is close enough to be a typo:
/// at most 2 edits, and at most a third of the longer word.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let n = word.chars().count();
    // The distance is at least the difference in length: a word more than 2 longer or shorter
    // than every candidate (a long unknown key, say) costs no distance computation.
    let near = |c: &str| c.chars().count().abs_diff(n) <= 2;
    if !candidates.iter().any(|c| near(c)) {
        return None;
    }
    let lw = word.to_ascii_lowercase();
    candidates
        .iter()
        .filter(|c| near(c))
        .map(|&c| (edit_distance(&lw, &c.to_ascii_lowercase()), c))
        .filter(|&(d, c)| d <= 2 && d * 3 <= lw.chars().count().max(c.chars().count()))
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("iteraton", "iteration"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn suggestions() {
        let keys = ["iteration", "input_output", "net_name"];
        assert_eq!(did_you_mean("iteraton", &keys), Some("iteration"));
        assert_eq!(did_you_mean("Net_Name", &keys), Some("net_name"));
        assert_eq!(did_you_mean("netname", &keys), Some("net_name"));
        assert_eq!(did_you_mean("completely_else", &keys), None);
        assert_eq!(did_you_mean("ab", &["cd"]), None);
        // A candidate 2 longer is still found; 3 longer is not a typo.
        assert_eq!(did_you_mean("iterati", &keys), Some("iteration"));
        assert_eq!(did_you_mean("iterat", &keys), None);
        assert_eq!(did_you_mean(&"x".repeat(100_000), &keys), None);
    }
}
