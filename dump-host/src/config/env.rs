//! Environment variables a dump reads, behind the [`Env`] trait so tests can inject a map
//! instead of mutating the process environment.
//!
//! * `MINDSPORE_DUMP_CONFIG`: the config file ([`dump_config_path`]). Unset or empty means
//!   dump is disabled.
//! * `MS_DIAGNOSTIC_DATA_PATH`: used as `{value}/debug_dump` when the config's `path` is absent
//!   or empty.
//! * The rank id ([`rank_id`]): the first of `RANK_ID` (MindSpore/Ascend launchers), `RANK`
//!   (torchrun, msrun) and `OMPI_COMM_WORLD_RANK` (mpirun) that is set and non-empty; 0 when
//!   none is.
//!
//! ```
//! use std::collections::HashMap;
//! use dump_host::config::env::{rank_id, Env};
//!
//! let env: HashMap<String, String> = [("RANK".to_owned(), "3".to_owned())].into();
//! assert_eq!(rank_id(&env).unwrap(), 3);
//! assert_eq!(rank_id(&HashMap::<String, String>::new()).unwrap(), 0);
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use crate::Error;

/// The variable naming the config file.
pub const DUMP_CONFIG_VAR: &str = "MINDSPORE_DUMP_CONFIG";
/// The variable giving the default dump root.
pub const DIAGNOSTIC_PATH_VAR: &str = "MS_DIAGNOSTIC_DATA_PATH";
/// The variables giving the rank id, in the order they are tried.
pub const RANK_VARS: [&str; 3] = ["RANK_ID", "RANK", "OMPI_COMM_WORLD_RANK"];

/// Read access to environment variables.
pub trait Env {
    /// The value of `name`, or `None` when unset (or not valid Unicode).
    fn var(&self, name: &str) -> Option<String>;
}

/// The real process environment.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl Env for HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

impl Env for BTreeMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

/// The config file named by `MINDSPORE_DUMP_CONFIG`, resolved like MindSpore: `None` if the
/// variable is unset or empty (dump disabled); otherwise the real path (symlinks resolved),
/// which must exist, and the text after its last `.` must be exactly `json`.
pub fn dump_config_path(env: &dyn Env) -> Result<Option<PathBuf>, Error> {
    let Some(value) = env.var(DUMP_CONFIG_VAR).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let real = std::fs::canonicalize(&value).map_err(|e| Error::Env {
        var: DUMP_CONFIG_VAR.to_owned(),
        value: value.clone(),
        message: format!("Get dump config file failed: {e}"),
    })?;
    check_json_suffix(&real.to_string_lossy()).map_err(|e| Error::Env {
        var: DUMP_CONFIG_VAR.to_owned(),
        value,
        message: e.to_string(),
    })?;
    Ok(Some(real))
}

/// A config path MindSpore refuses: the text after its last `.` is not exactly `json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotJson {
    /// The (real) path.
    pub path: String,
    /// The text after its last `.`, or `None` when it has no `.`.
    pub suffix: Option<String>,
}

impl std::fmt::Display for NotJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.suffix {
            None => write!(
                f,
                "Invalid json file name:{} (the file name must end in .json)",
                self.path
            ),
            Some(s) => write!(
                f,
                "[DataDump] dump config file suffix only supports json! But got:.{s} (the real path is {})",
                self.path
            ),
        }
    }
}

impl std::error::Error for NotJson {}

/// MindSpore's suffix rule on a (real) path: the text after the last `.` must be `json`.
pub fn check_json_suffix(path: &str) -> Result<(), NotJson> {
    match path.rfind('.') {
        Some(i) if &path[i + 1..] == "json" => Ok(()),
        i => Err(NotJson {
            path: path.to_owned(),
            suffix: i.map(|i| path[i + 1..].to_owned()),
        }),
    }
}

/// `MS_DIAGNOSTIC_DATA_PATH` if set and non-empty.
pub fn diagnostic_data_path(env: &dyn Env) -> Option<String> {
    env.var(DIAGNOSTIC_PATH_VAR).filter(|v| !v.is_empty())
}

/// The rank id: the first of [`RANK_VARS`] that is set and non-empty, parsed as a decimal
/// `u32` (surrounding whitespace allowed); 0 when none is set. A value that is not a number
/// is an error naming the variable.
pub fn rank_id(env: &dyn Env) -> Result<u32, Error> {
    for var in RANK_VARS {
        let Some(value) = env.var(var).filter(|v| !v.is_empty()) else {
            continue;
        };
        return value.trim().parse::<u32>().map_err(|_| Error::Env {
            var: var.to_owned(),
            value: value.clone(),
            message: format!("the rank id must be an integer from 0 to {}", u32::MAX),
        });
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn rank_precedence_and_errors() {
        assert_eq!(rank_id(&env(&[])).unwrap(), 0);
        assert_eq!(rank_id(&env(&[("OMPI_COMM_WORLD_RANK", "5")])).unwrap(), 5);
        assert_eq!(
            rank_id(&env(&[("RANK", "2"), ("OMPI_COMM_WORLD_RANK", "5")])).unwrap(),
            2
        );
        assert_eq!(
            rank_id(&env(&[("RANK_ID", " 7 "), ("RANK", "2")])).unwrap(),
            7
        );
        assert_eq!(rank_id(&env(&[("RANK_ID", ""), ("RANK", "2")])).unwrap(), 2);
        for bad in ["-1", "x", "1.5", "99999999999"] {
            let e = rank_id(&env(&[("RANK", bad)])).unwrap_err().to_string();
            assert!(
                e.contains("RANK") && e.contains(bad) && e.contains("integer"),
                "{e}"
            );
        }
    }

    #[test]
    fn suffix_rule() {
        assert!(check_json_suffix("/a/b/c.json").is_ok());
        let e = check_json_suffix("/a/b/c.JSON").unwrap_err().to_string();
        assert!(
            e.starts_with("[DataDump] dump config file suffix only supports json! But got:.JSON"),
            "{e}"
        );
        let e = check_json_suffix("/a.d/config").unwrap_err().to_string();
        assert!(e.contains("But got:.d/config"), "{e}");
        assert!(
            check_json_suffix("/a/config")
                .unwrap_err()
                .to_string()
                .starts_with("Invalid json file name:/a/config")
        );
    }

    #[test]
    fn config_path_resolution() {
        assert_eq!(dump_config_path(&env(&[])).unwrap(), None);
        assert_eq!(
            dump_config_path(&env(&[(DUMP_CONFIG_VAR, "")])).unwrap(),
            None
        );
        let e = dump_config_path(&env(&[(DUMP_CONFIG_VAR, "/no/such/file.json")])).unwrap_err();
        assert!(e.to_string().contains("Get dump config file failed"), "{e}");
        let dir = std::env::temp_dir().join(format!("opdump-env-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("c.json");
        let bad = dir.join("c.txt");
        std::fs::write(&good, "{}").unwrap();
        std::fs::write(&bad, "{}").unwrap();
        let got = dump_config_path(&env(&[(DUMP_CONFIG_VAR, good.to_str().unwrap())])).unwrap();
        assert_eq!(got, Some(std::fs::canonicalize(&good).unwrap()));
        let e = dump_config_path(&env(&[(DUMP_CONFIG_VAR, bad.to_str().unwrap())])).unwrap_err();
        assert!(
            e.to_string()
                .contains("suffix only supports json! But got:.txt"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn diagnostic_path() {
        assert_eq!(
            diagnostic_data_path(&env(&[(DIAGNOSTIC_PATH_VAR, "")])),
            None
        );
        assert_eq!(
            diagnostic_data_path(&env(&[(DIAGNOSTIC_PATH_VAR, "/d")])).as_deref(),
            Some("/d")
        );
        assert!(ProcessEnv.var("OPDUMP_SURELY_UNSET_VARIABLE_H5").is_none());
    }
}
