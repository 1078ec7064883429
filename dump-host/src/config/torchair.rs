//! torchair's `CompilerConfig().dump_config` options, written as a JSON object
//! (`{"enable_dump": true, "dump_path": "/dump", "dump_step": "0|2-4", …}`), validated as
//! torchair and then GE validate them, every problem at once (spec `peers.md` §5.1, §5.2).
//!
//! torchair accepts what GE later rejects (a trailing `|` in `dump_step`, `N-N`), so both
//! checks run: a message says which of the two refuses the value. [`torchair_request`]
//! translates accepted options into what opdump's Dumper writes (GE's layout below
//! `worldsize1_global_rank0/`, or torchair's npy files with `{"debug": {"data_dump":
//! {"type": "npy"}}}`).
//!
//! ```
//! use dump_host::config::torchair::check_torchair;
//!
//! let dir = std::env::temp_dir().display().to_string();
//! let ok = check_torchair(&serde_json::json!({"enable_dump": true, "dump_path": dir,
//!     "dump_step": "0|2-4", "dump_layer": "conv1 relu_1"})).unwrap();
//! assert_eq!(ok.dump_path_suffix, "worldsize1_global_rank0");
//!
//! let d = check_torchair(&serde_json::json!({"enable_dump": "yes", "dump_step": "3-3|",
//!     "dump_mod": "all"})).unwrap_err();
//! let paths: Vec<&str> = d.errors().map(|e| e.path.as_str()).collect();
//! assert_eq!(paths, ["dump_mod", "enable_dump", "dump_step", "dump_step"]);
//! ```

use std::path::Path;

use serde_json::Value;

use super::{
    Diagnostics,
    acl::{MAX_PARTS, kind, step_part},
};

/// torchair's `dump_config` options.
pub const TORCHAIR_KEYS: [&str; 9] = [
    "enable_dump",
    "dump_path",
    "dump_mode",
    "quant_dumpable",
    "dump_step",
    "dump_layer",
    "dump_data",
    "dump_config_path",
    "data_dump_stage",
];

/// What an accepted torchair `dump_config` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TorchairDump {
    /// `enable_dump`.
    pub enabled: bool,
    /// The directory torchair makes below `dump_path` (`worldsize{W}_global_rank{R}`; W = 1,
    /// R = 0 outside torch.distributed), where GE's layout starts.
    pub dump_path_suffix: String,
    /// Warnings.
    pub warnings: Diagnostics,
}

/// Validates a torchair `dump_config` written as a JSON object.
pub fn check_torchair(doc: &Value) -> Result<TorchairDump, Diagnostics> {
    let mut d = Diagnostics::new();
    let Some(m) = doc.as_object() else {
        d.error(
            "",
            format!(
                "torchair's dump_config is an object of options ({}), got {}",
                TORCHAIR_KEYS.join(", "),
                kind(doc)
            ),
        );
        return Err(d);
    };
    for k in m
        .keys()
        .filter(|k| !TORCHAIR_KEYS.contains(&k.as_str()) && *k != DEBUG_KEY)
    {
        d.error(
            k.as_str(),
            format!(
                "_DataDumpConfig has no option {k}; options: {}",
                TORCHAIR_KEYS.join(", ")
            ),
        );
    }
    let bool_of = |k: &str, d: &mut Diagnostics| match m.get(k) {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            d.error(k, format!("only True/False is allowed, got {v}"));
            false
        }
    };
    let enabled = bool_of("enable_dump", &mut d);
    check_debug(m.get(DEBUG_KEY), &mut d);
    bool_of("quant_dumpable", &mut d);
    let str_of = |k: &str, d: &mut Diagnostics| match m.get(k) {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(v) => {
            d.error(k, format!("must be a string, got {v}"));
            None
        }
    };
    for (k, allowed) in [
        ("dump_mode", &["input", "output", "all"][..]),
        ("dump_data", &["tensor", "stats"][..]),
        ("data_dump_stage", &["original", "optimized"][..]),
    ] {
        if let Some(v) = str_of(k, &mut d)
            && !allowed.contains(&v.as_str())
        {
            d.error(
                k,
                format!("{v:?} is not allowed; allowed: {}", allowed.join(", ")),
            );
        }
    }
    let path = str_of("dump_path", &mut d).unwrap_or_else(|| "./".to_owned());
    if (enabled || npy_asked(doc)) && !Path::new(&path).is_dir() {
        d.error(
            "dump_path",
            format!(
                "Please set legal dir path, {path} is not found or is not a file directory! (torchair does not create it)"
            ),
        );
    }
    if let Some(steps) = str_of("dump_step", &mut d)
        && !steps.is_empty()
    {
        check_steps(&steps, &mut d);
    }
    if let Some(layer) = str_of("dump_layer", &mut d)
        && let Some(c) = layer
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || " _/\\.".contains(*c)))
    {
        d.error(
            "dump_layer",
            format!(
                "{c:?} is not allowed in layer names (letters, digits, '_', '/', '\\', '.'; names are separated by spaces)"
            ),
        );
    }
    if let Some(p) = str_of("dump_config_path", &mut d) {
        if p.is_empty() {
            d.error("dump_config_path", "File path cannot be empty!");
        } else if !p.ends_with(".json") || !Path::new(&p).is_file() {
            d.error(
                "dump_config_path",
                format!("{p:?} must be an existing .json file (an acl.json)"),
            );
        }
    }
    if d.has_errors() {
        return Err(d);
    }
    let mut warnings = Diagnostics::new();
    if !enabled && !npy_asked(doc) {
        for k in m
            .keys()
            .filter(|k| !matches!(k.as_str(), "enable_dump" | "dump_config_path"))
        {
            warnings.warn(
                k.as_str(),
                "ignored: torchair emits the dump options only with enable_dump True",
            );
        }
    }
    Ok(TorchairDump {
        enabled,
        dump_path_suffix: "worldsize1_global_rank0".to_owned(),
        warnings,
    })
}

/// The key of torchair's eager dump settings (`config.debug.data_dump`), written as
/// `{"debug": {"data_dump": {"type": "npy"}}}` beside the `dump_config` options: the one
/// way to ask for torchair's npy files (`{node}-{target}.{INPUT|OUTPUT}.{i}.{time}.npy`).
pub const DEBUG_KEY: &str = "debug";

/// Whether the document asks for torchair's eager npy dump.
fn npy_asked(doc: &Value) -> bool {
    doc.pointer("/debug/data_dump/type").and_then(Value::as_str) == Some("npy")
}

/// `debug`: an object whose only key is `data_dump`, an object whose only key is `type`,
/// `"npy"`.
fn check_debug(v: Option<&Value>, d: &mut Diagnostics) {
    let Some(v) = v else { return };
    let ok = v.as_object().is_some_and(|m| {
        m.len() == 1
            && m.get("data_dump")
                .and_then(Value::as_object)
                .is_some_and(|dd| {
                    dd.len() == 1 && dd.get("type").and_then(Value::as_str) == Some("npy")
                })
    });
    if !ok {
        d.error(
            DEBUG_KEY,
            format!(
                "{v}: torchair's eager dump is written {{\"data_dump\": {{\"type\": \"npy\"}}}} \
                 (config.debug.data_dump.type = \"npy\"); nothing else is accepted here"
            ),
        );
    }
}

/// Validates a torchair config ([`check_torchair`]) and translates it into what the Dumper
/// writes, every problem at once. `dump_path` gains torchair's `worldsize1_global_rank0`;
/// `dump_mode` defaults to `all` (what torchair sends GE); `dump_layer`'s space-separated
/// names are matched exactly; `dump_data: stats` writes CANN's statistics csv with its
/// default columns (torchair has no `dump_stats`). `dump_config_path` names an acl.json that
/// is read and translated ([`super::acl::acl_request`], its problems reported under
/// `dump_config_path`); with `enable_dump` True the options override it (peers.md §5.1: the
/// dump path with torchair's prefix, `dump_mode`, `dump_data`, and `dump_step` / `dump_layer`
/// when set). Errors: `enable_dump` False without the npy dump or an acl.json (nothing to
/// run), an acl.json together with the npy dump.
/// `quant_dumpable` True and `data_dump_stage` are ignored with a warning (no quantisation
/// pass, no aclgraph in a Rust runtime).
pub fn torchair_request(doc: &Value) -> Result<super::acl::GeRequest, Diagnostics> {
    let checked = check_torchair(doc);
    let mut d = match &checked {
        Ok(_) => Diagnostics::new(),
        Err(d) => d.clone(),
    };
    let npy = npy_asked(doc);
    let s = |k: &str| doc.get(k).and_then(Value::as_str);
    let enabled = doc.get("enable_dump").and_then(Value::as_bool) == Some(true);
    // torchair hands GE the acl.json whenever it is set; the options override it.
    let acl = match s("dump_config_path").filter(|p| !p.is_empty() && checked.is_ok()) {
        Some(p) if npy => {
            d.error(
                "dump_config_path",
                format!("{p:?}: an acl.json asks for GE's layout, the npy dump for torchair's npy files; choose one"),
            );
            None
        }
        Some(p) => match read_acl(Path::new(p)) {
            Ok(r) => Some(r),
            Err(e) => {
                for item in e.errors() {
                    let at = if item.path.is_empty() {
                        String::new()
                    } else {
                        format!("{}: ", item.path)
                    };
                    d.error("dump_config_path", format!("{p}: {at}{}", item.message));
                }
                None
            }
        },
        None => None,
    };
    if !enabled && !npy && acl.is_none() && s("dump_config_path").is_none() {
        d.error(
            "enable_dump",
            "False (or absent): torchair dumps nothing; set it to true (or ask for the npy \
             dump, {\"debug\": {\"data_dump\": {\"type\": \"npy\"}}})",
        );
    }
    let checked = match checked {
        Ok(c) if !d.has_errors() => c,
        _ => return Err(d),
    };
    let mut warnings = checked.warnings;
    if let Some(mut r) = acl {
        for w in r.warnings.warnings() {
            warnings.warn("dump_config_path", format!("{}: {}", w.path, w.message));
        }
        if enabled {
            // GE receives both; the options win where torchair emits them.
            override_acl(&mut r, doc);
        }
        r.warnings = warnings;
        return Ok(r);
    }
    if doc.get("quant_dumpable").and_then(Value::as_bool) == Some(true) {
        warnings.warn(
            "quant_dumpable",
            "true keeps GE's pre-quantisation tensors; a Rust runtime has no quantisation \
             pass, so every kernel's tensors are dumped as reported; ignored",
        );
    }
    if let Some(v) = s("data_dump_stage") {
        warnings.warn(
            "data_dump_stage",
            format!("{v:?} applies to aclgraph (reduce-overhead) only; ignored"),
        );
    }
    let layers: Option<Vec<String>> = s("dump_layer")
        .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| !l.is_empty());
    let stats =
        (s("dump_data") == Some("stats")).then_some(crate::layout::GeStats { chosen: None });
    if npy && stats.is_some() {
        warnings.warn(
            "dump_data",
            "\"stats\" belongs to the graph-mode dump; the npy dump writes tensors",
        );
    }
    Ok(super::acl::GeRequest {
        dump_path: std::path::PathBuf::from(s("dump_path").unwrap_or("./")),
        prefix: Some(checked.dump_path_suffix),
        input_output: match s("dump_mode") {
            Some("input") => super::InputOutput::Inputs,
            Some("output") => super::InputOutput::Outputs,
            _ => super::InputOutput::Both,
        },
        steps: s("dump_step")
            .filter(|v| !v.is_empty())
            .unwrap_or("all")
            .to_owned(),
        model_name: Some(crate::layout::DEFAULT_MODEL_NAME.to_owned()),
        layers,
        stats: if npy { None } else { stats },
        npy,
        watcher: None,
        warnings,
    })
}

/// The acl.json at `path`, read (at most [`MAX_CONFIG_BYTES`](super::MAX_CONFIG_BYTES)) and
/// translated ([`super::acl::acl_request`]).
fn read_acl(path: &Path) -> Result<super::acl::GeRequest, Diagnostics> {
    let one = |m: String| {
        let mut d = Diagnostics::new();
        d.error("", m);
        d
    };
    let bytes = super::read_config_file(path).map_err(|e| one(e.to_string()))?;
    let doc: Value =
        serde_json::from_slice(&bytes).map_err(|e| one(format!("EP0004: not JSON ({e})")))?;
    if !doc.get("dump").is_some_and(Value::is_object) {
        return Err(one("EP0001: an acl.json has a `dump` object".to_owned()));
    }
    super::acl::acl_request(&doc)
}

/// The options torchair emits with `enable_dump` True, over the acl.json's settings: the dump
/// path (with the rank prefix), `dump_mode` (torchair always sends one, `all` by default),
/// `dump_data`, and `dump_step` and `dump_layer` when not empty.
fn override_acl(r: &mut super::acl::GeRequest, doc: &Value) {
    let s = |k: &str| doc.get(k).and_then(Value::as_str);
    r.dump_path = std::path::PathBuf::from(s("dump_path").unwrap_or("./"));
    r.prefix = Some("worldsize1_global_rank0".to_owned());
    r.input_output = match s("dump_mode") {
        Some("input") => super::InputOutput::Inputs,
        Some("output") => super::InputOutput::Outputs,
        _ => super::InputOutput::Both,
    };
    if let Some(v) = s("dump_step").filter(|v| !v.is_empty()) {
        r.steps = v.to_owned();
    }
    let layers: Vec<String> = s("dump_layer")
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    if !layers.is_empty() {
        r.layers = Some(layers);
    }
    match s("dump_data") {
        Some("stats") if r.stats.is_none() => {
            r.stats = Some(crate::layout::GeStats { chosen: None });
        }
        Some("stats") => {}
        _ => r.stats = None,
    }
}

/// torchair's regex (`N`, `N-M`, `|`-separated, a trailing `|` allowed), then GE's rules:
/// at most [`MAX_PARTS`] sets, `N < M` strictly, no empty set.
fn check_steps(v: &str, d: &mut Diagnostics) {
    let parts: Vec<&str> = v.split('|').collect();
    let torchair_ok = parts
        .iter()
        .enumerate()
        .all(|(i, p)| step_part(p).is_some() || (p.is_empty() && i + 1 == parts.len()));
    if !torchair_ok {
        d.error(
            "dump_step",
            format!(
                "Please set legal regex value format match {v:?}, correct example:0|1|2-5|6 (torchair)"
            ),
        );
        return;
    }
    if parts.len() > MAX_PARTS {
        d.error(
            "dump_step",
            format!("{} sets; GE allows at most {MAX_PARTS}", parts.len()),
        );
    }
    if parts.last().is_some_and(|p| p.is_empty()) {
        d.error(
            "dump_step",
            format!(
                "{v:?} ends in '|': torchair accepts it, GE rejects it; correct example:'0|5|10|50-100'"
            ),
        );
    }
    for p in parts {
        if let Some((a, Some(b))) = step_part(p)
            && a >= b
        {
            d.error(
                "dump_step",
                format!("{p:?}: the first step is >= second step (GE wants N < M)"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(doc: Value) -> Vec<String> {
        check_torchair(&doc)
            .unwrap_err()
            .errors()
            .map(|e| format!("{}: {}", e.path, e.message))
            .collect()
    }

    #[test]
    fn accepted_with_warnings_when_disabled() {
        let ok = check_torchair(&json!({"dump_mode": "output"})).unwrap();
        assert!(!ok.enabled);
        assert_eq!(ok.warnings.warnings().count(), 1);
        let dir = std::env::temp_dir().display().to_string();
        let ok = check_torchair(&json!({"enable_dump": true, "dump_path": dir,
            "dump_mode": "all", "dump_data": "stats", "quant_dumpable": false,
            "data_dump_stage": "optimized", "dump_step": "0|3-7"}))
        .unwrap();
        assert!(ok.enabled);
        assert!(ok.warnings.is_empty());
    }

    #[test]
    fn torchair_then_ge_step_rules() {
        let e = paths(json!({"dump_step": "1|a"}));
        assert_eq!(e.len(), 1);
        assert!(
            e[0].contains("correct example:0|1|2-5|6 (torchair)"),
            "{e:?}"
        );
        let e = paths(json!({"dump_step": "5-5|2-9|"}));
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].contains("ends in '|'"));
        assert!(e[1].contains("\"5-5\": the first step is >= second step"));
    }

    #[test]
    fn every_error_at_once() {
        let e = paths(json!({"enable_dump": true, "dump_path": "/no/such/dir",
            "dump_mode": "in", "dump_layer": "conv1;rm", "dump_config_path": "",
            "quant_dumpable": 1, "extra": 0}));
        assert_eq!(e.len(), 6, "{e:?}");
        assert!(e[0].starts_with("extra: _DataDumpConfig has no option extra"));
        assert!(
            e.iter()
                .any(|m| m.starts_with("dump_path: Please set legal dir path, /no/such/dir"))
        );
        assert!(
            e.iter()
                .any(|m| m.starts_with("dump_layer: ';' is not allowed"))
        );
        assert!(
            e.iter()
                .any(|m| m == "dump_config_path: File path cannot be empty!")
        );
        assert!(
            e.iter()
                .any(|m| m.starts_with("quant_dumpable: only True/False"))
        );
        assert!(
            e.iter()
                .any(|m| m.starts_with("dump_mode: \"in\" is not allowed"))
        );
    }

    #[test]
    fn each_option_translates() {
        use crate::config::InputOutput;
        let dir = std::env::temp_dir().display().to_string();
        let r = torchair_request(&json!({"enable_dump": true, "dump_path": dir})).unwrap();
        assert_eq!(r.dump_path, std::path::PathBuf::from(&dir));
        assert_eq!(r.prefix.as_deref(), Some("worldsize1_global_rank0"));
        assert_eq!(r.input_output, InputOutput::Both, "torchair sends all");
        assert_eq!(r.steps, "all");
        assert_eq!(r.model_name.as_deref(), Some("Net"));
        assert_eq!((r.layers, r.stats, r.npy), (None, None, false));
        let r = torchair_request(&json!({"enable_dump": true, "dump_path": dir,
            "dump_mode": "input", "dump_step": "0|2-4", "dump_layer": " conv1  relu_1 ",
            "dump_data": "stats", "quant_dumpable": true, "data_dump_stage": "original"}))
        .unwrap();
        assert_eq!(r.input_output, InputOutput::Inputs);
        assert_eq!(r.steps, "0|2-4");
        assert_eq!(r.layers, Some(vec!["conv1".into(), "relu_1".into()]));
        assert_eq!(r.stats, Some(crate::layout::GeStats { chosen: None }));
        let w: Vec<&str> = r.warnings.warnings().map(|w| w.path.as_str()).collect();
        assert_eq!(w, ["quant_dumpable", "data_dump_stage"]);
        let r = torchair_request(&json!({"dump_path": dir,
            "debug": {"data_dump": {"type": "npy"}}}))
        .unwrap();
        assert!(r.npy);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn hostile_options_every_error_at_once() {
        let e = torchair_request(&json!({"enable_dump": false, "dump_mode": "in",
            "debug": {"data_dump": {"type": "pt"}}, "dump_step": "3-1"}))
        .unwrap_err();
        let paths: Vec<&str> = e.errors().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["debug", "dump_mode", "dump_step", "enable_dump"]);
        let msgs: Vec<&str> = e.errors().map(|d| d.message.as_str()).collect();
        assert!(msgs[0].contains("\"pt\""), "{msgs:?}");
        // An acl.json that does not exist is torchair's error; one opdump cannot run is
        // reported under dump_config_path with its own key.
        let e = torchair_request(&json!({"dump_config_path": "/x/acl.json"})).unwrap_err();
        let paths: Vec<&str> = e.errors().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["dump_config_path"]);
        let dir = std::env::temp_dir().join(format!("opdump-torchair-acl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let acl = dir.join("acl.json");
        std::fs::write(
            &acl,
            json!({"dump": {"dump_path": dir, "dump_debug": "on"}}).to_string(),
        )
        .unwrap();
        let e = torchair_request(&json!({"dump_config_path": acl})).unwrap_err();
        let got: Vec<String> = e
            .errors()
            .map(|d| format!("{}: {}", d.path, d.message))
            .collect();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with(&format!(
                "dump_config_path: {}: dump.dump_debug: \"on\"",
                acl.display()
            )),
            "{got:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dump_config_path_is_read_and_the_options_override_it() {
        use crate::config::InputOutput;
        let dir =
            std::env::temp_dir().join(format!("opdump-torchair-merge-{}", std::process::id()));
        let other = dir.join("other");
        std::fs::create_dir_all(&other).unwrap();
        let acl = dir.join("acl.json");
        std::fs::write(
            &acl,
            json!({"dump": {"dump_path": dir, "dump_mode": "input", "dump_step": "2",
                "dump_data": "stats", "dump_stats": ["Max"],
                "dump_list": [{"model_name": "bert", "layer": ["a"]}]}})
            .to_string(),
        )
        .unwrap();
        // enable_dump False: the acl.json as it is.
        let r = torchair_request(&json!({"dump_config_path": acl})).unwrap();
        assert_eq!(
            (r.dump_path.as_path(), r.prefix.as_deref()),
            (dir.as_path(), None)
        );
        assert_eq!(r.input_output, InputOutput::Inputs);
        assert_eq!(r.steps, "2");
        assert_eq!(r.model_name.as_deref(), Some("bert"));
        assert_eq!(r.layers, Some(vec!["a".to_owned()]));
        assert_eq!(
            r.stats.as_ref().and_then(|s| s.chosen.clone()),
            Some(vec![crate::layout::GeStat::Max])
        );
        // enable_dump True: the options torchair emits win.
        let r = torchair_request(&json!({"enable_dump": true, "dump_config_path": acl,
            "dump_path": other, "dump_layer": "b c"}))
        .unwrap();
        assert_eq!(r.dump_path, other);
        assert_eq!(r.prefix.as_deref(), Some("worldsize1_global_rank0"));
        assert_eq!(
            r.input_output,
            InputOutput::Both,
            "dump_mode all by default"
        );
        assert_eq!(r.steps, "2", "an empty dump_step leaves the acl.json's");
        assert_eq!(r.layers, Some(vec!["b".to_owned(), "c".to_owned()]));
        assert_eq!(r.stats, None, "dump_data tensor by default");
        assert_eq!(r.model_name.as_deref(), Some("bert"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
