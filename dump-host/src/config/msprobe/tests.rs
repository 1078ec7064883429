use super::*;
use crate::config::ConfigDialect;

fn errors(text: &str) -> Vec<(String, String)> {
    match MsprobeConfig::from_json_str(text) {
        Ok(v) => panic!("accepted: {v:?}"),
        Err(Error::Config(d)) => d
            .errors()
            .map(|e| (e.path.clone(), e.message.clone()))
            .collect(),
        Err(e) => panic!("{e}"),
    }
}

const REFERENCE: &str = r#"{
  "task": "statistics",
  "dump_path": "/ref/raw/msprobe_torch_md5/dump",
  "rank": [],
  "step": [],
  "level": "L1",
  "async_dump": false,
  "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "md5"}
}"#;

#[test]
fn the_reference_configs_are_valid() {
    let v = MsprobeConfig::from_json_str(REFERENCE).unwrap();
    assert!(v.warnings.is_empty(), "{}", v.warnings);
    let c = v.config;
    assert_eq!(c.task, MsprobeTask::Statistics);
    assert_eq!(c.summary_mode, SummaryMode::Md5);
    assert_eq!(c.data_mode, DataMode::ALL);
    assert_eq!(c.iteration(), "all");
    assert_eq!(c.dump_path, "/ref/raw/msprobe_torch_md5/dump");
    // Parsing the effective config again gives the same config.
    let again = MsprobeConfig::from_json_str(&c.to_effective_json().to_string()).unwrap();
    assert_eq!(again.config, c);
}

#[test]
fn defaults_fill_in() {
    let c = MsprobeConfig::from_json_str(r#"{"dump_path": "/d"}"#)
        .unwrap()
        .config;
    assert_eq!(c.task, MsprobeTask::Statistics);
    assert_eq!(c.level, MsprobeLevel::L1);
    assert!(c.rank.is_empty() && c.step.is_empty() && c.list.is_empty());
    assert!(!c.precision_high && !c.async_dump);
}

#[test]
fn steps_and_ranks_expand_sort_and_dedup() {
    let c = MsprobeConfig::from_json_str(
        r#"{"dump_path": "/d", "step": ["3-5", 1, 4, "0-0"], "rank": [2, "0-1"]}"#,
    )
    .unwrap()
    .config;
    assert_eq!(c.step, [0, 1, 3, 4, 5]);
    assert_eq!(c.rank, [0, 1, 2]);
    assert_eq!(c.iteration(), "0-1|3-5");
    let big = MsprobeConfig::from_json_str(r#"{"dump_path": "/d", "step": ["0-999999", 7]}"#)
        .unwrap()
        .config;
    assert_eq!(big.step.len(), 1_000_000);
    assert_eq!(big.iteration(), "0-999999");
    assert!(
        dump_core::iteration::IterationSpec::parse(&big.iteration())
            .unwrap()
            .matches(999_999)
    );
}

#[test]
fn every_error_at_once_with_key_value_and_what_is_allowed() {
    let text = r#"{
      "task": "statistic",
      "dump_path": "/home/abc++/dump",
      "rank": [-1, "5-3", "x", 1.5, 1000000],
      "step": "all",
      "level": "L3",
      "async_dump": "yes",
      "precision": "medium"
    }"#;
    let e = errors(text);
    let paths: Vec<&str> = e.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "task",
            "dump_path",
            "rank[0]",
            "rank[1]",
            "rank[2]",
            "rank[3]",
            "rank[4]",
            "step",
            "level",
            "async_dump",
            "precision"
        ]
    );
    let msg = |p: &str| e.iter().find(|(q, _)| q == p).unwrap().1.clone();
    assert!(
        msg("task").contains("task is invalid, it should be one of")
            && msg("task").contains("\"statistic\"")
    );
    assert!(
        msg("dump_path").contains("contains special characters")
            && msg("dump_path").contains("abc++")
    );
    assert!(msg("rank[1]").contains("left boundary 5 cannot be greater than the right 3"));
    assert!(msg("rank[2]").contains("only supports formats like \"3-5\""));
    assert!(msg("rank[3]").contains("must be an integer or string"));
    assert!(msg("rank[4]").contains("1000000 is out of range"));
    assert!(msg("level").contains("\"L3\"") && msg("level").contains("allowed: L0"));
    assert!(msg("async_dump").contains("\"yes\"") && msg("async_dump").contains("true or false"));
    assert!(msg("precision").contains("\"medium\"") && msg("precision").contains("\"high\""));
}

#[test]
fn task_section_rules() {
    let e = errors(
        r#"{"dump_path": "/d", "task": "statistics", "level": "L1", "statistics": {
            "scope": ["Functional.conv2d.0.forward"], "list": [3, ""],
            "data_mode": ["all", "input"], "summary_mode": "sha"}}"#,
    );
    let paths: Vec<&str> = e.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "statistics.scope",
            "statistics.list[0]",
            "statistics.list[1]",
            "statistics.data_mode",
            "statistics.summary_mode"
        ]
    );
    assert!(e[0].1.contains("two names"));
    assert!(e[3].1.contains("'all' cannot be combined"));
    assert!(e[4].1.contains("summary_mode is an invalid string") && e[4].1.contains("\"sha\""));
}

#[test]
fn scope_names_follow_the_level() {
    let cfg = |level: &str, a: &str, b: &str| {
        format!(
            r#"{{"dump_path": "/d", "level": "{level}", "statistics": {{"scope": ["{a}", "{b}"]}}}}"#
        )
    };
    let api = "Functional.conv2d.0.forward";
    let module = "Module.conv1.Conv2d.forward.0";
    assert!(MsprobeConfig::from_json_str(&cfg("L1", api, api)).is_ok());
    assert!(MsprobeConfig::from_json_str(&cfg("L0", module, module)).is_ok());
    assert!(MsprobeConfig::from_json_str(&cfg("mix", api, module)).is_ok());
    let e = errors(&cfg("L1", api, module));
    assert_eq!(e[0].0, "statistics.scope[1]");
    assert!(e[0].1.contains("not valid at level L1"));
    let e = errors(&cfg("L0", "conv1", module));
    assert_eq!(e[0].0, "statistics.scope[0]");
}

#[test]
fn async_dump_rules() {
    let e = errors(
        r#"{"dump_path": "/d", "task": "tensor", "async_dump": true, "tensor": {"list": []}}"#,
    );
    assert_eq!(e[0].0, "tensor.list");
    assert!(
        e[0].1
            .contains("async_dump is true in tensor task, the parameters list cannot be empty")
    );
    let e =
        errors(r#"{"dump_path": "/d", "async_dump": true, "statistics": {"summary_mode": "md5"}}"#);
    assert_eq!(e[0].0, "statistics.summary_mode");
    let ok = MsprobeConfig::from_json_str(
        r#"{"dump_path": "/d", "task": "tensor", "async_dump": true, "tensor": {"list": ["relu"]}}"#,
    )
    .unwrap();
    assert!(
        ok.warnings
            .warnings()
            .any(|w| w.message.contains("may cause OOM"))
    );
}

#[test]
fn data_mode_resolves_axes() {
    let c = |dm: &str| {
        MsprobeConfig::from_json_str(&format!(
            r#"{{"dump_path": "/d", "statistics": {{"data_mode": {dm}}}}}"#
        ))
        .unwrap()
        .config
        .data_mode
    };
    assert_eq!(c(r#"["all"]"#), DataMode::ALL);
    let f_in = c(r#"["forward", "input"]"#);
    assert!(f_in.input && !f_in.output && f_in.forward && !f_in.backward);
    assert_eq!(f_in.to_list(), ["input", "forward"]);
    let out = c(r#"["output"]"#);
    assert!(!out.input && out.output && out.forward && out.backward);
    let e = errors(r#"{"dump_path": "/d", "statistics": {"data_mode": ["in"]}}"#);
    assert_eq!(e[0].0, "statistics.data_mode[0]");
    let e = errors(r#"{"dump_path": "/d", "statistics": {"data_mode": []}}"#);
    assert!(e[0].1.contains("empty"));
}

#[test]
fn tasks_opdump_does_not_run_and_other_sections() {
    let e = errors(r#"{"dump_path": "/d", "task": "free_benchmark"}"#);
    assert!(e[0].1.contains("opdump does not run"), "{e:?}");
    let e = errors(r#"{"dump_path": "/d", "task": "tensor", "tensor": {"file_format": "bin"}}"#);
    assert_eq!(e[0].0, "tensor.file_format");
    let e = errors(
        r#"{"dump_path": "/d", "task": "overflow_check", "overflow_check": {"overflow_nums": 0}}"#,
    );
    assert_eq!(e[0].0, "overflow_check.overflow_nums");
    let c = MsprobeConfig::from_json_str(
        r#"{"dump_path": "/d", "task": "overflow_check", "overflow_check": {"overflow_nums": -1}}"#,
    )
    .unwrap()
    .config;
    assert_eq!(c.overflow_nums, 0);
    let e = errors(r#"{"dump_path": "/d", "statistics": "all"}"#);
    assert_eq!(e[0].0, "statistics");
    let e = errors(r#"{"task": "tensor"}"#);
    assert_eq!(e[0].0, "dump_path");
    assert!(e[0].1.starts_with("Dump path is empty."));
}

#[test]
fn hostile_documents_are_errors_not_panics() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let huge_name = format!(r#"{{"dump_path": "/{}"}}"#, "a".repeat(300));
    let long_path = format!(r#"{{"dump_path": "/{}"}}"#, "a/".repeat(3000));
    for text in [
        "",
        "null",
        "[]",
        "\"task\"",
        "{\"task\": ",
        &deep,
        &huge_name,
        &long_path,
        r#"{"dump_path": "/d", "level": null, "task": {}}"#,
        r#"{"dump_path": "/d", "rank": [99999999999999999999999]}"#,
        r#"{"dump_path": "/d", "statistics": {"scope": {}, "list": "relu", "data_mode": [1,2,3,4,5]}}"#,
    ] {
        let e = MsprobeConfig::from_json_str(text).unwrap_err();
        let Error::Config(d) = e else { panic!("{e}") };
        assert!(d.has_errors(), "{text:.60}");
        assert!(d.errors().all(|e| !e.message.is_empty()));
    }
}

#[test]
fn unknown_keys_warn_with_a_suggestion() {
    let v = MsprobeConfig::from_json_str(r#"{"dump_path": "/d", "levle": "L0"}"#).unwrap();
    let w: Vec<_> = v.warnings.warnings().collect();
    assert_eq!(w[0].path, "levle");
    assert!(
        w[0].message.contains("\"levle\" is ignored"),
        "{}",
        w[0].message
    );
}

#[test]
fn dialect_detection() {
    assert_eq!(
        ConfigDialect::detect(REFERENCE.as_bytes()),
        ConfigDialect::Msprobe
    );
    assert_eq!(
        ConfigDialect::detect(br#"{"common_dump_settings": {}, "task": "x"}"#),
        ConfigDialect::MindSpore
    );
    assert_eq!(ConfigDialect::detect(b"not json"), ConfigDialect::MindSpore);
    assert_eq!(ConfigDialect::detect(b"{}"), ConfigDialect::MindSpore);
}

#[test]
fn name_forms() {
    assert!(is_api_name("Functional.conv2d.0.forward"));
    assert!(is_api_name("Tensor.__add__.12.backward"));
    assert!(!is_api_name("Foo.conv2d.0.forward"));
    assert!(!is_api_name("Functional.conv2d.x.forward"));
    assert!(is_module_name("Module.layer1.0.conv1.Conv2d.forward.0"));
    assert!(is_module_name("Cell.net.Dense.backward.3"));
    assert!(!is_module_name("Module.conv1.Conv2d.forward"));
}

/// msprobe 26's `summary_mode: "xor"` is accepted (and kept by the effective config); other
/// strings and other types are refused naming the three allowed modes.
#[test]
fn summary_mode_xor_is_accepted_and_others_refused() {
    let v = MsprobeConfig::from_json_str(
        r#"{"dump_path": "/d", "statistics": {"summary_mode": "xor"}}"#,
    )
    .unwrap();
    assert!(v.warnings.is_empty(), "{}", v.warnings);
    assert_eq!(v.config.summary_mode, SummaryMode::Xor);
    let again = MsprobeConfig::from_json_str(&v.config.to_effective_json().to_string()).unwrap();
    assert_eq!(again.config.summary_mode, SummaryMode::Xor);
    for bad in [r#""XOR""#, r#""xor64""#, "1", r#"["xor"]"#] {
        let e = errors(&format!(
            r#"{{"dump_path": "/d", "statistics": {{"summary_mode": {bad}}}}}"#
        ));
        assert_eq!(e.len(), 1, "{bad}: {e:?}");
        assert_eq!(e[0].0, "statistics.summary_mode", "{bad}");
        assert!(
            e[0].1.contains(r#"allowed: "statistics", "md5" or "xor""#),
            "{bad}: {}",
            e[0].1
        );
    }
}

/// opdump's own `opdump` section (the flight recorder, the non-finite policy) is read from an
/// msprobe config as from a MindSpore one: no unknown-key warning, its rules checked, kept by
/// the effective config.
#[test]
fn the_opdump_section_is_read_checked_and_kept() {
    let text = r#"{"task": "tensor", "dump_path": "/tmp/d", "level": "mix",
        "opdump": {"flight_recorder": {"steps": 3, "budget_bytes": 1048576},
                   "on_nonfinite": "stop"}}"#;
    let v = MsprobeConfig::from_json_str(text).unwrap();
    assert!(v.warnings.is_empty(), "{}", v.warnings);
    let c = v.config;
    let r = c.opdump.flight_recorder.unwrap();
    assert_eq!((r.steps, r.budget_bytes, r.max_triggers), (3, 1 << 20, 1));
    assert_eq!(
        c.opdump.on_nonfinite,
        Some(crate::config::NonFinitePolicy::Stop)
    );
    let eff = c.to_effective_json();
    assert_eq!(eff["opdump"]["flight_recorder"]["steps"], 3);
    let again = MsprobeConfig::from_json_str(&eff.to_string()).unwrap();
    assert_eq!(again.config, c);
    // Without the section: none in the effective config, and the same defaults as before.
    let plain = MsprobeConfig::from_json_str(REFERENCE).unwrap().config;
    assert!(plain.opdump.flight_recorder.is_none());
    assert!(plain.to_effective_json().get("opdump").is_none());
    // Its rules, with the path: a bad step count; a recorder with overflow_check.
    let e = errors(
        r#"{"task": "statistics", "dump_path": "/tmp/d",
            "opdump": {"flight_recorder": {"steps": 0}, "watch": "nan"}}"#,
    );
    let paths: Vec<&str> = e.iter().map(|(p, _)| p.as_str()).collect();
    assert!(paths.contains(&"opdump.flight_recorder.steps"), "{e:?}");
    assert!(paths.contains(&"opdump.watch"), "{e:?}");
    let e = errors(
        r#"{"task": "overflow_check", "dump_path": "/tmp/d",
            "opdump": {"flight_recorder": {}}}"#,
    );
    assert!(
        e.iter()
            .any(|(p, m)| p == "opdump.flight_recorder" && m.contains("op_debug_mode")),
        "{e:?}"
    );
}
