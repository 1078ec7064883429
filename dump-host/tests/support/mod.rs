//! Shared helpers for the config integration tests (included with `mod support;`).
#![allow(dead_code)]

use std::collections::HashMap;

use dump_host::Error;
use dump_host::config::{Device, Diagnostics, DumpConfig, ParseOptions, Validated};
use serde_json::{Value, json};

/// A valid CPU config like the shared reference cases.
pub fn base() -> Value {
    json!({
        "common_dump_settings": {
            "op_debug_mode": 0,
            "dump_mode": 0,
            "path": "/tmp/opdump-test/dump",
            "net_name": "TinyNet",
            "iteration": "all",
            "saved_data": "tensor",
            "input_output": 0,
            "kernels": [],
            "support_device": [0, 1, 2, 3, 4, 5, 6, 7]
        },
        "e2e_dump_settings": {"enable": true, "trans_flag": true}
    })
}

/// `base()` with `section.key` set to `v` (`None` removes it).
pub fn with(section: &str, key: &str, v: Option<Value>) -> Value {
    let mut doc = base();
    let sec = doc[section].as_object_mut().expect("section exists");
    match v {
        Some(v) => {
            sec.insert(key.to_owned(), v);
        }
        None => {
            sec.remove(key);
        }
    }
    doc
}

/// Parses `doc` for `device` with `env`.
pub fn parse_env(
    doc: &Value,
    device: Device,
    env: &[(&str, &str)],
) -> Result<Validated, Diagnostics> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    match DumpConfig::from_json_str(&doc.to_string(), &ParseOptions::new(device, &env)) {
        Ok(v) => Ok(v),
        Err(Error::Config(d)) => Err(d),
        Err(e) => panic!("unexpected error kind: {e}"),
    }
}

/// Parses `doc` for CPU with an empty environment.
pub fn parse(doc: &Value) -> Result<Validated, Diagnostics> {
    parse_env(doc, Device::Cpu, &[])
}

/// Asserts `doc` is rejected and the first error is at `path` and contains `text`.
#[track_caller]
pub fn rejects(doc: &Value, device: Device, path: &str, text: &str) -> Diagnostics {
    let d = parse_env(doc, device, &[]).expect_err(&format!("should be rejected: {doc}"));
    let e = d.first_error().expect("an error");
    assert_eq!(e.path, path, "{d}");
    assert!(
        e.message.contains(text),
        "{:?} should contain {text:?}",
        e.message
    );
    d
}

/// Asserts `doc` is accepted and returns it.
#[track_caller]
pub fn accepts(doc: &Value, device: Device) -> Validated {
    match parse_env(doc, device, &[]) {
        Ok(v) => v,
        Err(d) => panic!("should be accepted: {doc}\n{d}"),
    }
}

/// Whether some warning at `path` contains `text`.
pub fn warns(v: &Validated, path: &str, text: &str) -> bool {
    v.warnings
        .warnings()
        .any(|w| w.path == path && w.message.contains(text))
}
