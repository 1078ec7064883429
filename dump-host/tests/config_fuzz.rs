//! Fuzz: arbitrary JSON values, mutations of valid configs and arbitrary text never make the
//! config reader panic; whatever it accepts re-parses from its effective JSON; whatever it
//! rejects has at least one error. Cases: env `OPDUMP_FUZZ_CASES` (default 256 for CI).

use std::collections::HashMap;

use dump_host::Error;
use dump_host::config::{COMMON_KEYS, Device, DumpConfig, E2E_KEYS, ParseOptions};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn cases() -> u32 {
    std::env::var("OPDUMP_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(|n| json!(n)),
        (0u64..12).prop_map(|n| json!(n)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[ -~]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("all"),
            Just("0|2"),
            Just("5-3"),
            Just("host"),
            Just("device"),
            Just("statistic"),
            Just("full"),
            Just("tensor"),
            Just(""),
            Just("/tmp/x"),
            Just("name-regex(("),
            Just("name-regex(.*)"),
            Just("max"),
            Just("hash:md5"),
            Just("high"),
            Just("low"),
        ]
        .prop_map(|s| Value::String(s.to_owned())),
        ".{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-z_]{0,10}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

fn valid() -> Value {
    json!({
        "common_dump_settings": {
            "op_debug_mode": 0, "dump_mode": 0, "path": "/tmp/d", "net_name": "N",
            "iteration": "all", "saved_data": "tensor", "input_output": 0, "kernels": [],
            "support_device": [0]
        },
        "e2e_dump_settings": {"enable": true, "trans_flag": true}
    })
}

/// A valid config with some keys replaced by arbitrary values or removed.
fn arb_mutated() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        prop::sample::select(COMMON_KEYS.to_vec()).prop_map(|k| ("common_dump_settings", k)),
        prop::sample::select(E2E_KEYS.to_vec()).prop_map(|k| ("e2e_dump_settings", k)),
    ];
    prop::collection::vec((key, prop::option::of(arb_json())), 1..6).prop_map(|muts| {
        let mut doc = valid();
        for ((sec, k), v) in muts {
            let s = doc[sec].as_object_mut().expect("section");
            match v {
                Some(v) => s.insert(k.to_owned(), v),
                None => s.remove(k),
            };
        }
        doc
    })
}

fn check(text: &str, device: Device) -> Result<(), TestCaseError> {
    let env: HashMap<String, String> =
        [("MS_DIAGNOSTIC_DATA_PATH".to_owned(), "/diag".to_owned())].into();
    let opts = ParseOptions::new(device, &env);
    match DumpConfig::from_json_str(text, &opts) {
        Ok(v) => {
            prop_assert!(!v.warnings.has_errors());
            let eff = v.config.to_effective_json().to_string();
            let again = DumpConfig::from_json_str(&eff, &opts);
            prop_assert!(
                again.is_ok(),
                "effective config rejected: {eff}: {:?}",
                again.err()
            );
            let mut a = again.unwrap().config;
            a.e2e.present = v.config.e2e.present;
            prop_assert_eq!(a, v.config);
        }
        Err(Error::Config(d)) => {
            prop_assert!(d.has_errors());
            prop_assert!(d.errors().all(|e| !e.message.is_empty()));
        }
        Err(e) => prop_assert!(false, "unexpected error kind: {e}"),
    }
    Ok(())
}

fn arb_device() -> impl Strategy<Value = Device> {
    prop::sample::select(vec![Device::Cpu, Device::Gpu, Device::Ascend])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn mutated_configs(doc in arb_mutated(), device in arb_device()) {
        check(&doc.to_string(), device)?;
    }

    #[test]
    fn arbitrary_documents(doc in arb_json(), device in arb_device()) {
        check(&doc.to_string(), device)?;
        let wrapped = json!({"common_dump_settings": doc.clone(), "e2e_dump_settings": doc});
        check(&wrapped.to_string(), device)?;
    }

    #[test]
    fn arbitrary_text(text in "\\PC{0,64}", device in arb_device()) {
        check(&text, device)?;
    }
}
