//! `statistic_category` names. The names and their meaning are owned by
//! [`dump_stats::Category`]; this module words the config errors (MindSpore's text) and says
//! which names select the same column.

use dump_stats::Category;

use super::suggest::did_you_mean;

/// Every name MindSpore 2.10 accepts in `statistic_category`, in its order (spec §1.2 "\[next\]").
pub const STATISTIC_CATEGORIES: [&str; 15] = dump_stats::category::VALID_NAMES;

/// The default list when `statistic_category` is absent.
pub const DEFAULT_CATEGORIES: [&str; 3] = ["max", "min", "l2norm"];

/// The categories device statistics (`stat_calc_mode` `device`) can compute.
pub const DEVICE_CATEGORIES: [&str; 4] = ["max", "min", "avg", "l2norm"];

/// MindSpore's list of valid names as it prints it: `['max', 'min', ...]`.
pub(super) fn valid_list_text() -> String {
    let quoted: Vec<String> = STATISTIC_CATEGORIES
        .iter()
        .map(|c| format!("'{c}'"))
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// Checks one category name; the error is MindSpore's message plus a suggestion.
pub(crate) fn check_category(name: &str) -> Result<Category, String> {
    if let Ok(c) = Category::parse(name) {
        return Ok(c);
    }
    let mut msg = format!(
        "The following statistic_category is invalid:{name}, the valid statistic_category are as follows:{}",
        valid_list_text()
    );
    if let Some(s) = did_you_mean(name, &STATISTIC_CATEGORIES) {
        msg.push_str(&format!("; did you mean {s:?}?"));
    }
    Err(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_all_fifteen_and_rejects_others() {
        for c in STATISTIC_CATEGORIES {
            assert!(check_category(c).is_ok(), "{c}");
        }
        assert_eq!(check_category("hash"), check_category("hash:sha1"));
        assert_eq!(check_category("md5"), Ok(Category::Md5));
        for bad in ["Max", "sha1", "mean", "", "nan  count"] {
            let e = check_category(bad).unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "The following statistic_category is invalid:{bad}, "
                )),
                "{e}"
            );
            assert!(e.contains("['max', 'min', 'avg', 'count', "), "{e}");
        }
        assert!(
            check_category("l2nrom")
                .unwrap_err()
                .contains("did you mean \"l2norm\"")
        );
        assert!(DEFAULT_CATEGORIES.iter().all(|c| check_category(c).is_ok()));
        assert!(DEVICE_CATEGORIES.iter().all(|c| check_category(c).is_ok()));
    }
}
