//! Watcher mode's settings: `opdump.watcher` in a MindSpore (or msprobe) config, and the
//! translation of CANN's `acl.json` watcher scene (`dump_scene: watcher`, `dump_list` items
//! with `layer` and `watcher_nodes`).
//!
//! ```json
//! "opdump": {
//!   "watcher": {
//!     "nodes": ["Default/network/conv1/Conv2D-op0"],
//!     "layer": ["Default/network/relu/ReLU-op1", "Add-op3"],
//!     "on_corruption": "stop"
//!   }
//! }
//! ```
//!
//! - `nodes` (required, non-empty): the kernels whose outputs are watched (CANN's
//!   `watcher_nodes`): a kernel's full scope name, or its last `/` component.
//! - `layer` (optional): the kernels after which the watched outputs are summarised again
//!   (CANN's `layer`); absent or empty: after every kernel.
//! - `on_corruption`: what a watched output changed by a kernel that is not its writer does:
//!   `continue` (reported in `watcher.csv` and as an event, the default), `record` (also
//!   fires the flight recorder, which needs one) or `stop` (the runtime's
//!   [`Step::kernel_ran`](crate::Step::kernel_ran) call returns
//!   [`Error::MemoryCorruption`](crate::Error::MemoryCorruption)).
//!
//! The engine is in `dumper/watcher.rs`; docs/watcher.md shows a whole run.

use serde_json::Value;

use super::diagnostics::Diagnostics;
use super::read::{Got, Section, describe};

/// Every key of `opdump.watcher`.
pub const WATCHER_KEYS: [&str; 3] = ["nodes", "layer", "on_corruption"];

/// What a detected memory corruption does (`opdump.watcher.on_corruption`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CorruptionPolicy {
    /// Reported (`watcher.csv`, an event) and the run goes on.
    #[default]
    Continue,
    /// Reported, and fires the flight recorder (which writes the steps it holds).
    Record,
    /// Reported, and [`Step::kernel_ran`](crate::Step::kernel_ran) returns
    /// [`Error::MemoryCorruption`](crate::Error::MemoryCorruption): the runtime's cue to stop.
    Stop,
}

impl CorruptionPolicy {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CorruptionPolicy::Continue => "continue",
            CorruptionPolicy::Record => "record",
            CorruptionPolicy::Stop => "stop",
        }
    }
}

impl std::str::FromStr for CorruptionPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "continue" => Ok(CorruptionPolicy::Continue),
            "record" => Ok(CorruptionPolicy::Record),
            "stop" => Ok(CorruptionPolicy::Stop),
            _ => Err(format!(
                "unknown corruption policy {s:?}; allowed: continue, record, stop"
            )),
        }
    }
}

/// One group of watched outputs: CANN's `dump_list` item of the watcher scene.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchItem {
    /// The kernels whose outputs are watched (`watcher_nodes`): a full scope name or its last
    /// `/` component.
    pub nodes: Vec<String>,
    /// The kernels after which they are checked (`layer`); empty: after every kernel.
    pub layer: Vec<String>,
}

/// Watcher mode: which outputs are watched, after which kernels they are checked, and what a
/// corruption does. Build it in Rust, read it from `opdump.watcher`, or translate an
/// `acl.json` with [`WatcherConfig::from_acl`]; give it to
/// [`DumperBuilder::watcher`](crate::DumperBuilder::watcher) or
/// [`DumpOptions::watcher`](crate::DumpOptions::watcher).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatcherConfig {
    /// The groups (one per `dump_list` item of an acl.json; `opdump.watcher` gives one).
    pub items: Vec<WatchItem>,
    /// What a corruption does.
    pub on_corruption: CorruptionPolicy,
}

/// Whether kernel `full_name` is named by `pattern`: the full name, or its last `/`
/// component (CANN's names are the op names; MindSpore's kernels carry a scope).
pub(crate) fn names(pattern: &str, full_name: &str) -> bool {
    pattern == full_name || full_name.rsplit('/').next() == Some(pattern)
}

impl WatcherConfig {
    /// One group watching `nodes`, checked after every kernel of `layer` (empty: every
    /// kernel); corruption is reported and the run goes on.
    pub fn new<S: Into<String>>(
        nodes: impl IntoIterator<Item = S>,
        layer: impl IntoIterator<Item = S>,
    ) -> Self {
        WatcherConfig {
            items: vec![WatchItem {
                nodes: nodes.into_iter().map(Into::into).collect(),
                layer: layer.into_iter().map(Into::into).collect(),
            }],
            on_corruption: CorruptionPolicy::Continue,
        }
    }

    /// The same, with `policy` for a corruption.
    pub fn on_corruption(mut self, policy: CorruptionPolicy) -> Self {
        self.on_corruption = policy;
        self
    }

    /// Whether kernel `full_name`'s outputs are watched.
    pub fn watches(&self, full_name: &str) -> bool {
        self.items
            .iter()
            .any(|i| i.nodes.iter().any(|n| names(n, full_name)))
    }

    /// Every problem of a config built in Rust (the JSON readers report the same ones with
    /// their key paths): no group, a group without nodes, an empty name.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.items.is_empty() {
            p.push("watcher: no group of watched nodes".to_owned());
        }
        for (i, it) in self.items.iter().enumerate() {
            if it.nodes.is_empty() {
                p.push(format!("watcher.items[{i}].nodes: must not be empty"));
            }
            for (k, list) in [("nodes", &it.nodes), ("layer", &it.layer)] {
                if list.iter().any(String::is_empty) {
                    p.push(format!("watcher.items[{i}].{k}: names must not be empty"));
                }
            }
        }
        p
    }

    /// The watcher scene of an `acl.json` document: validates it as [`check_acl`] does (every
    /// error at once) and returns `Some` with one group per `dump_list` item when its
    /// `dump_scene` is `watcher`, `None` for any other accepted document.
    ///
    /// ```
    /// use dump_host::config::WatcherConfig;
    ///
    /// let doc = serde_json::json!({"dump": {
    ///     "dump_path": std::env::temp_dir(), "dump_scene": "watcher",
    ///     "dump_list": [{"layer": ["conv1", "relu1"], "watcher_nodes": ["add_1"]}]}});
    /// let w = WatcherConfig::from_acl(&doc).unwrap().unwrap();
    /// assert_eq!(w.items[0].nodes, ["add_1"]);
    /// assert_eq!(w.items[0].layer, ["conv1", "relu1"]);
    /// ```
    ///
    /// [`check_acl`]: crate::config::acl::check_acl
    pub fn from_acl(doc: &Value) -> Result<Option<WatcherConfig>, Diagnostics> {
        let acl = super::acl::check_acl(doc)?;
        Ok(Self::from_checked_acl(&acl, doc))
    }

    /// [`from_acl`](WatcherConfig::from_acl) for a document [`check_acl`] already accepted
    /// as `acl` (what the acl.json route of the Dumper calls).
    ///
    /// [`check_acl`]: crate::config::acl::check_acl
    pub fn from_checked_acl(acl: &super::acl::AclDump, doc: &Value) -> Option<WatcherConfig> {
        if !acl.watcher {
            return None;
        }
        let strings = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let items = doc
            .get("dump")
            .and_then(|d| d.get("dump_list"))
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .map(|it| WatchItem {
                        nodes: strings(it.get("watcher_nodes")),
                        layer: strings(it.get("layer")),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(WatcherConfig {
            items,
            on_corruption: CorruptionPolicy::Continue,
        })
    }
}

const SEC: &str = "opdump.watcher";

/// Reads `opdump.watcher`, recording every problem. `None` only when it is not an object; a
/// section with errors is still returned (the config is rejected anyway) so that the checks
/// that need the rest of the config report their problems too.
pub(crate) fn parse_watcher(v: &Value, d: &mut Diagnostics) -> Option<WatcherConfig> {
    let Value::Object(map) = v else {
        d.error(
            SEC,
            format!(
                "opdump.watcher should be an object; got {}, allowed: {{\"nodes\": [\"KERNEL\"], \
                 \"layer\": [\"KERNEL\"], \"on_corruption\": \"continue\"}} (layer and \
                 on_corruption optional)",
                describe(v)
            ),
        );
        return None;
    };
    let sec = Section { name: SEC, map };
    sec.unknown_keys(&WATCHER_KEYS, d);
    let names = |key: &str, required: bool, d: &mut Diagnostics| -> Vec<String> {
        let what = format!("{SEC}.{key} should be an array of kernel names");
        match sec.array(key, &what, d) {
            Got::Val(a) => {
                let mut out = Vec::with_capacity(a.len());
                for (i, x) in a.iter().enumerate() {
                    match x.as_str() {
                        Some(s) if !s.is_empty() => out.push(s.to_owned()),
                        _ => {
                            d.error(
                                format!("{SEC}.{key}[{i}]"),
                                format!(
                                    "got {}, allowed: a non-empty kernel name (a full scope \
                                     name or its last component)",
                                    describe(x)
                                ),
                            );
                        }
                    }
                }
                if required && a.is_empty() {
                    d.error(
                        sec.path(key),
                        "must not be empty: name the kernels whose outputs are watched \
                         (CANN's watcher_nodes)",
                    );
                }
                out
            }
            Got::Absent if required => {
                d.error(
                    sec.path(key),
                    "required: the kernels whose outputs are watched (CANN's watcher_nodes)",
                );
                Vec::new()
            }
            Got::Absent | Got::Bad => Vec::new(),
        }
    };
    let nodes = names("nodes", true, d);
    let layer = names("layer", false, d);
    let mut w = WatcherConfig {
        items: vec![WatchItem { nodes, layer }],
        on_corruption: CorruptionPolicy::Continue,
    };
    match sec.string(
        "on_corruption",
        "opdump.watcher.on_corruption should be a string",
        d,
    ) {
        Got::Val(p) => match p.parse() {
            Ok(p) => w.on_corruption = p,
            Err(m) => d.error(sec.path("on_corruption"), m),
        },
        Got::Bad | Got::Absent => {}
    }
    Some(w)
}

/// `opdump.watcher` as JSON (one group; the effective config `opdump check` prints).
pub(crate) fn to_json(w: &WatcherConfig) -> Value {
    let all = |f: fn(&WatchItem) -> &Vec<String>| -> Vec<String> {
        w.items.iter().flat_map(|i| f(i).iter().cloned()).collect()
    };
    let mut m = serde_json::Map::new();
    m.insert("nodes".into(), all(|i| &i.nodes).into());
    if w.items.iter().any(|i| !i.layer.is_empty()) {
        m.insert("layer".into(), all(|i| &i.layer).into());
    }
    m.insert("on_corruption".into(), w.on_corruption.as_str().into());
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(v: Value) -> Vec<(String, String)> {
        let mut d = Diagnostics::new();
        parse_watcher(&v, &mut d);
        assert!(d.has_errors(), "{v}");
        d.errors()
            .map(|e| (e.path.clone(), e.message.clone()))
            .collect()
    }

    #[test]
    fn reads_nodes_layer_and_policy() {
        let mut d = Diagnostics::new();
        let w = parse_watcher(
            &json!({"nodes": ["Conv2D-op0"], "layer": ["Add-op2"], "on_corruption": "stop"}),
            &mut d,
        )
        .unwrap();
        assert!(d.is_empty(), "{d}");
        assert_eq!(
            w,
            WatcherConfig::new(["Conv2D-op0"], ["Add-op2"]).on_corruption(CorruptionPolicy::Stop)
        );
        assert!(w.watches("Default/net/Conv2D-op0"));
        assert!(!w.watches("Default/net/Conv2D-op01"));
        assert!(w.problems().is_empty());
    }

    #[test]
    fn every_error_at_once_naming_key_and_value() {
        let e = errors(json!({"nodes": [], "layer": ["ok", 3, ""], "on_corruption": "halt"}));
        let paths: Vec<&str> = e.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "opdump.watcher.nodes",
                "opdump.watcher.layer[1]",
                "opdump.watcher.layer[2]",
                "opdump.watcher.on_corruption"
            ]
        );
        assert!(e[1].1.contains("got 3"), "{e:?}");
        assert!(e[3].1.contains("\"halt\"") && e[3].1.contains("continue, record, stop"));
        let e = errors(json!({"layer": "Add"}));
        assert_eq!(e[0].0, "opdump.watcher.nodes");
        assert!(e[0].1.starts_with("required"), "{e:?}");
        assert_eq!(e[1].0, "opdump.watcher.layer");
        let e = errors(json!(["a"]));
        assert_eq!(e[0].0, "opdump.watcher");
    }

    #[test]
    fn acl_watcher_scene_becomes_one_group_per_item() {
        let p = std::env::temp_dir();
        let doc = json!({"dump": {"dump_path": p, "dump_scene": "watcher", "dump_list": [
            {"layer": ["conv1"], "watcher_nodes": ["add_1", "mul_2"]},
            {"watcher_nodes": ["relu_3"]}]}});
        let w = WatcherConfig::from_acl(&doc).unwrap().unwrap();
        assert_eq!(w.items.len(), 2);
        assert_eq!(w.items[0].nodes, ["add_1", "mul_2"]);
        assert!(w.items[1].layer.is_empty());
        assert!(w.problems().is_empty());
        let plain = json!({"dump": {"dump_path": p, "dump_list": [{"model_name": "m"}]}});
        assert_eq!(WatcherConfig::from_acl(&plain).unwrap(), None);
        // The acl rules still hold: watcher_nodes is required in the watcher scene.
        let bad = json!({"dump": {"dump_path": p, "dump_scene": "watcher", "dump_list": [{}]}});
        assert!(WatcherConfig::from_acl(&bad).is_err());
    }

    #[test]
    fn rust_built_configs_are_checked() {
        let w = WatcherConfig::new(Vec::<String>::new(), vec![String::new()]);
        assert_eq!(w.problems().len(), 2, "{:?}", w.problems());
        assert_eq!(WatcherConfig::default().problems().len(), 1);
    }
}
