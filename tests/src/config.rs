//! Dump configs for tests.

use std::{collections::BTreeMap, path::Path};

use serde_json::{Value, json};

/// A `data_dump.json` dumping into `root` with net `Net`: dump_mode 0, iteration all,
/// saved_data tensor, input_output 0, then the keys of `common` and `e2e` (objects) override
/// or add to `common_dump_settings` and `e2e_dump_settings`.
pub fn config(root: &Path, common: Value, e2e: Value) -> Vec<u8> {
    let mut c = json!({
        "dump_mode": 0,
        "path": root.to_string_lossy(),
        "net_name": "Net",
        "iteration": "all",
        "saved_data": "tensor",
        "input_output": 0,
        "kernels": [],
        "support_device": [0, 1, 2, 3, 4, 5, 6, 7],
        "op_debug_mode": 0
    });
    let mut e = json!({"enable": true, "trans_flag": true});
    for (base, patch) in [(&mut c, common), (&mut e, e2e)] {
        if let (Some(b), Value::Object(p)) = (base.as_object_mut(), patch) {
            for (k, v) in p {
                b.insert(k, v);
            }
        }
    }
    serde_json::to_vec_pretty(&json!({"common_dump_settings": c, "e2e_dump_settings": e}))
        .expect("serialise config")
}

/// Every statistic category, in MindSpore's list order (the names of `Category::ALL`).
pub const ALL_CATEGORIES: [&str; 13] = {
    let mut names = [""; 13];
    let mut i = 0;
    while i < names.len() {
        names[i] = dump_stats::Category::ALL[i].name();
        i += 1;
    }
    names
};

/// An empty environment.
pub fn no_env() -> BTreeMap<String, String> {
    BTreeMap::new()
}

/// `f32` values as little-endian bytes.
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
