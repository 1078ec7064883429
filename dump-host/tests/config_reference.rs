//! Every MindSpore 2.10 reference case (`tests/fixtures/reference/*/config.json` +
//! `result.json`): same accept/reject decision, and for rejected ones our first error contains
//! MindSpore's exact error text. Deliberate deviations (docs/compat.md) are checked explicitly.

use std::collections::HashMap;
use std::path::PathBuf;

use dump_host::Error;
use dump_host::config::{Device, DumpConfig, ParseOptions};
use serde_json::Value;

/// Cases where opdump deliberately decides differently (see docs/compat.md, "Config").
const DEVIATIONS: [&str; 1] = ["d1_statistic_cpu"];

#[test]
fn reference_decisions() {
    let Some(root) = opdump_test_support::reference_dir() else {
        return;
    };
    let dir = std::fs::read_dir(&root).unwrap();
    let mut cases: Vec<PathBuf> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("config.json").is_file() && p.join("result.json").is_file())
        // msprobe_* cases are msprobe's own dumps (another config dialect), not MindSpore's.
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("msprobe_"))
        })
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no cases under {}", root.display());
    let mut checked = 0;
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(case.join("config.json")).unwrap();
        let result: Value =
            serde_json::from_str(&std::fs::read_to_string(case.join("result.json")).unwrap())
                .unwrap();
        let rc = result["rc"].as_i64().expect("rc");
        let env: HashMap<String, String> = result["env"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| k.as_str() != "MINDSPORE_DUMP_CONFIG")
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let got = DumpConfig::from_json_str(&text, &ParseOptions::new(Device::Cpu, &env));
        if DEVIATIONS.contains(&name.as_str()) {
            let v = got.unwrap_or_else(|e| panic!("{name}: deviation should be accepted: {e}"));
            let ms = result["error"].as_str().unwrap();
            assert!(
                v.warnings.warnings().any(|w| w.message.contains(ms)),
                "{name}: a warning should quote MindSpore's error {ms:?}"
            );
        } else if rc == 0 {
            if let Err(e) = got {
                panic!("{name}: MindSpore accepted it, we reject: {e}");
            }
        } else {
            let ms = result["error"].as_str().expect("error text");
            match got {
                Ok(_) => panic!("{name}: MindSpore rejected it ({ms}), we accept"),
                Err(Error::Config(d)) => {
                    let first = d.first_error().unwrap();
                    assert!(
                        first.message.contains(ms),
                        "{name}: first error {first} should contain {ms:?}"
                    );
                }
                Err(e) => panic!("{name}: unexpected error kind {e}"),
            }
        }
        checked += 1;
    }
    println!("checked {checked} reference cases under {}", root.display());
}

#[test]
fn reference_facts_from_readme() {
    // f1: path "" + MS_DIAGNOSTIC_DATA_PATH gives {env}/debug_dump.
    let mut doc: Value = serde_json::from_str(
        r#"{"common_dump_settings": {"dump_mode": 0, "path": "", "net_name": "TinyNet",
            "iteration": "all", "input_output": 0, "kernels": [], "support_device": [0]},
            "e2e_dump_settings": {"enable": true}}"#,
    )
    .unwrap();
    let env: HashMap<String, String> = [(
        "MS_DIAGNOSTIC_DATA_PATH".to_owned(),
        "/ref/raw/diag".to_owned(),
    )]
    .into();
    let v =
        DumpConfig::from_json_str(&doc.to_string(), &ParseOptions::new(Device::Cpu, &env)).unwrap();
    assert_eq!(v.config.path, "/ref/raw/diag/debug_dump");
    // g5: initial_iteration 10 with "0-10" matches only step 10 of the offset counter.
    doc["common_dump_settings"]["path"] = "/d".into();
    doc["common_dump_settings"]["initial_iteration"] = 10.into();
    doc["common_dump_settings"]["iteration"] = "0-10".into();
    let v =
        DumpConfig::from_json_str(&doc.to_string(), &ParseOptions::new(Device::Cpu, &env)).unwrap();
    assert_eq!(v.config.initial_iteration, 10);
    let spec = v.config.iteration_spec();
    let dumped: Vec<u32> = (10..13).filter(|&k| spec.matches(k)).collect();
    assert_eq!(dumped, [10]);
}
