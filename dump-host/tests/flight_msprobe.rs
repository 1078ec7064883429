//! The flight recorder with an msprobe `config.json`: refused when the Dumper opens, with the
//! reason, instead of writing `dump.json` documents that name tensors the recorder holds and
//! may never write (what an earlier build did: every step's `dump.json` on disk while the
//! `.npy` files it listed stayed in memory).

use std::collections::HashMap;

use dump_host::{DumpOptions, Dumper, config::FlightRecorder};

#[test]
fn a_flight_recorder_with_msprobes_layout_is_refused_with_the_reason() {
    let root = std::env::temp_dir().join(format!("opdump-flight-msprobe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let text = format!(
        r#"{{"task": "tensor", "dump_path": "{}", "rank": [], "step": [], "level": "L1",
            "tensor": {{"file_format": "npy"}}}}"#,
        root.display()
    );
    let env: HashMap<String, String> = HashMap::new();
    let e = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .on_event(|_| {})
        .flight_recorder(FlightRecorder::default())
        .open_json(text.clone().into_bytes())
        .expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("flight recorder cannot run with msprobe's layout"),
        "{msg}"
    );
    assert!(msg.contains("data_dump.json"), "{msg}");
    assert!(!root.exists(), "nothing is created");
    // Without a recorder the same config opens.
    let d = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(text.into_bytes())
        .unwrap();
    drop(d);
    let _ = std::fs::remove_dir_all(&root);
}
