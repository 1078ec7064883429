//! `MINDSPORE_DUMP_IGNORE_USELESS_OUTPUT`: whether reserved/dummy ("useless") outputs are dumped.

/// The environment variable MindSpore reads.
pub(super) const VAR: &str = "MINDSPORE_DUMP_IGNORE_USELESS_OUTPUT";

/// The useless-output policy: MindSpore skips outputs a kernel marks useless unless
/// `MINDSPORE_DUMP_IGNORE_USELESS_OUTPUT=0`; unset or `1` skips them; any other value is
/// warned about and means `1`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UselessOutputs {
    /// `true`: useless outputs are dumped like the others.
    pub dump: bool,
}

impl UselessOutputs {
    /// The policy for the variable's value (`None`: unset), and a warning for a value other
    /// than `0` or `1` (the caller shows it; dump-host never prints).
    pub fn from_value(value: Option<&str>) -> (Self, Option<String>) {
        match value {
            None | Some("1") => (UselessOutputs { dump: false }, None),
            Some("0") => (UselessOutputs { dump: true }, None),
            Some(other) => (
                UselessOutputs { dump: false },
                Some(format!(
                    "{VAR}={other:?} is not 0 or 1: using 1 (useless outputs are not dumped); \
                     set it to 0 to dump them"
                )),
            ),
        }
    }

    /// The policy from the environment (see [`from_value`](UselessOutputs::from_value)).
    pub fn from_env() -> (Self, Option<String>) {
        let v = std::env::var_os(VAR).map(|v| v.to_string_lossy().into_owned());
        Self::from_value(v.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_dumps_one_and_unset_skip_others_warn_and_skip() {
        assert_eq!(
            UselessOutputs::from_value(Some("0")),
            (UselessOutputs { dump: true }, None)
        );
        assert_eq!(
            UselessOutputs::from_value(Some("1")).0,
            UselessOutputs { dump: false }
        );
        assert_eq!(
            UselessOutputs::from_value(None),
            (UselessOutputs::default(), None)
        );
        let (p, w) = UselessOutputs::from_value(Some("yes"));
        assert!(!p.dump);
        let w = w.expect("a warning for an unknown value");
        assert!(
            w.contains(VAR) && w.contains("\"yes\"") && w.contains("0 or 1"),
            "{w}"
        );
    }
}
