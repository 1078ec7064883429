//! Which tool a config file is written for, from its keys: MindSpore's `data_dump.json`,
//! msprobe's `config.json`, CANN's `acl.json` or torchair's `dump_config` options.

use serde_json::Value;

/// msprobe's top-level keys that no other dialect uses.
const MSPROBE_ONLY: [&str; 4] = ["task", "level", "statistics", "tensor"];

/// torchair's `dump_config` options that no other dialect has at the top level.
const TORCHAIR_ONLY: [&str; 9] = [
    "enable_dump",
    "dump_mode",
    "quant_dumpable",
    "dump_step",
    "dump_layer",
    "dump_data",
    "dump_config_path",
    "data_dump_stage",
    super::torchair::DEBUG_KEY,
];

/// Which tool a config file is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigDialect {
    /// MindSpore's `data_dump.json` (`common_dump_settings`, ...).
    MindSpore,
    /// msprobe's `config.json` (`task`, `dump_path`, `level`, ...).
    Msprobe,
    /// CANN's `acl.json` (`{"dump": {…}}`; checked by [`super::acl::check_acl`]).
    AclJson,
    /// torchair's `dump_config` options written as a JSON object (`enable_dump`,
    /// `dump_path`, …; checked by [`super::torchair::check_torchair`]).
    Torchair,
}

impl ConfigDialect {
    /// What `opdump check` calls it.
    pub fn describe(self) -> &'static str {
        match self {
            ConfigDialect::MindSpore => "MindSpore data_dump.json",
            ConfigDialect::Msprobe => "msprobe config.json",
            ConfigDialect::AclJson => "CANN acl.json",
            ConfigDialect::Torchair => "torchair dump_config",
        }
    }

    /// Whether the Dumper runs from this dialect: every one does. MindSpore's config writes
    /// MindSpore's layout, msprobe's writes msprobe's, and an acl.json or torchair config
    /// writes CANN's GE layout ([`crate::layout::GeLayout`]: one CANN dump file or statistics
    /// csv per kernel, or torchair's npy files), translated by
    /// [`super::acl::acl_request`] and [`super::torchair::torchair_request`] (what they cannot
    /// honour is an error naming the key).
    pub fn runs(self) -> bool {
        true
    }

    /// Whether the config writes CANN's GE layout (an acl.json or a torchair config).
    pub fn is_cann(self) -> bool {
        matches!(self, ConfigDialect::AclJson | ConfigDialect::Torchair)
    }

    /// The dialect of config bytes, from a JSON object's top-level keys:
    /// `common_dump_settings` → MindSpore; a `dump` object → acl.json; msprobe's `task`,
    /// `level`, `statistics` or `tensor` (or only its `dump_path`) → msprobe; a torchair
    /// option → torchair; anything else (not JSON, not an object, no known key) → MindSpore,
    /// whose checks then report what is wrong.
    pub fn detect(bytes: &[u8]) -> ConfigDialect {
        let Ok(Value::Object(top)) = serde_json::from_slice::<Value>(bytes) else {
            return ConfigDialect::MindSpore;
        };
        let has = |keys: &[&str]| keys.iter().any(|k| top.contains_key(*k));
        if top.contains_key("common_dump_settings") {
            ConfigDialect::MindSpore
        } else if top.get("dump").is_some_and(Value::is_object) && !has(&MSPROBE_ONLY) {
            ConfigDialect::AclJson
        } else if has(&MSPROBE_ONLY) {
            ConfigDialect::Msprobe
        } else if has(&TORCHAIR_ONLY) {
            ConfigDialect::Torchair
        } else if top.contains_key("dump_path") {
            ConfigDialect::Msprobe
        } else {
            ConfigDialect::MindSpore
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_dialect_by_its_keys() {
        let d = |t: &str| ConfigDialect::detect(t.as_bytes());
        assert_eq!(
            d(r#"{"common_dump_settings": {}, "dump": {}}"#),
            ConfigDialect::MindSpore
        );
        assert_eq!(
            d(r#"{"dump": {"dump_path": "/d"}}"#),
            ConfigDialect::AclJson
        );
        assert_eq!(
            d(r#"{"task": "tensor", "dump_path": "/d"}"#),
            ConfigDialect::Msprobe
        );
        assert_eq!(d(r#"{"dump_path": "/d"}"#), ConfigDialect::Msprobe);
        assert_eq!(
            d(r#"{"enable_dump": true, "dump_path": "/d"}"#),
            ConfigDialect::Torchair
        );
        assert_eq!(d(r#"{"dump": 3}"#), ConfigDialect::MindSpore);
        assert_eq!(d("[]"), ConfigDialect::MindSpore);
        assert!(ConfigDialect::AclJson.runs() && ConfigDialect::Msprobe.runs());
        assert!(ConfigDialect::Torchair.is_cann() && !ConfigDialect::Msprobe.is_cann());
        assert_eq!(
            d(r#"{"debug": {"data_dump": {"type": "npy"}}, "dump_path": "/d"}"#),
            ConfigDialect::Torchair
        );
    }
}
