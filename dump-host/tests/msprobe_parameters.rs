//! A module call's parameters in msprobe's layout (issue 22, `Kernel::parameter`): msprobe
//! 26.2.0 ends every module's forward entry with `"parameters"` (`{}` for a module without
//! any), each parameter a tensor object keyed by its name, in the module's order
//! (tests/fixtures/msprobe/train_L0, real msprobe at L0). Written the same way, checked
//! against that dump's key order and value types; none at L1, for API calls, or in
//! MindSpore's layout.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use dump_host::{DumpOptions, Dumper, TensorRef};
use serde_json::Value;

fn root(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "opdump-msprobe-params-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn open(text: String) -> Dumper {
    Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(text.into_bytes())
        .unwrap()
}

fn msprobe(root: &Path, task: &str, level: &str) -> Dumper {
    open(format!(
        r#"{{"task": "{task}", "dump_path": "{}", "level": "{level}",
            "{task}": {{"scope": [], "list": [], "data_mode": ["all"]}}}}"#,
        root.display()
    ))
}

fn json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// The real msprobe 26.2.0 L0 dump of a two-Linear MLP (fc1, act, fc2).
fn real() -> Value {
    json(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/msprobe/train_L0/dump/step0/proc891/dump.json"),
    )
}

const W: [f32; 6] = [0.5, -1.5, 2.0, 0.25, -0.75, 1.0];
const B: [f32; 2] = [0.125, -3.0];

/// One step: `fc1` (a Linear module with weight and bias), `act` (a ReLU module, none), and
/// an API call reporting a parameter (ignored).
fn run(d: &mut Dumper) {
    let step = d.begin_step();
    let x = [1.0f32, -2.0, 3.0];
    let y = [0.5f32, -0.5];
    if let Some(k) = step.kernel("Linear", "Default/fc1-Linear/Linear-op0") {
        k.input(0, TensorRef::from_slice(&[1, 3], &x)).unwrap();
        k.output(0, TensorRef::from_slice(&[1, 2], &y)).unwrap();
        k.parameter("weight", TensorRef::from_slice(&[2, 3], &W))
            .unwrap();
        k.parameter("bias", TensorRef::from_slice(&[2], &B))
            .unwrap();
        // A second report of a name keeps the first.
        k.parameter("bias", TensorRef::from_slice(&[1], &[9.0f32]))
            .unwrap();
    }
    if let Some(k) = step.kernel("ReLU", "Default/act-ReLU/ReLU-op1") {
        k.input(0, TensorRef::from_slice(&[1, 2], &y)).unwrap();
        k.output(0, TensorRef::from_slice(&[1, 2], &[0.5f32, 0.0]))
            .unwrap();
    }
    if let Some(k) = step.kernel("Add", "Default/Add-op2") {
        k.output(0, TensorRef::from_slice(&[1, 2], &y)).unwrap();
        k.parameter("weight", TensorRef::from_slice(&[2, 3], &W))
            .unwrap();
    }
    step.finish().unwrap();
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

/// The JSON type of each member of an object, in order.
fn types(v: &Value) -> Vec<(&str, &'static str)> {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let t = match v {
                Value::Null => "null",
                Value::Bool(_) => "bool",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
            };
            (k.as_str(), t)
        })
        .collect()
}

#[test]
fn module_calls_carry_their_parameters_as_msprobe_writes_them() {
    let real = real();
    let theirs = &real["data"]["Module.fc1.Linear.forward.0"];
    for level in ["L0", "mix"] {
        let r = root(&format!("stats-{level}"));
        let mut d = msprobe(&r, "statistics", level);
        run(&mut d);
        assert_eq!(
            d.close().unwrap().rows,
            2 + 2 + 2 + u64::from(level == "mix")
        );
        let ours = json(&r.join("step0/rank0/dump.json"));
        let fc1 = &ours["data"]["Module.fc1.Linear.forward.0"];
        // The entry's keys and the parameters' names in msprobe's order.
        assert_eq!(keys(fc1), keys(theirs), "{level}");
        assert_eq!(keys(&fc1["parameters"]), ["weight", "bias"]);
        assert_eq!(keys(&theirs["parameters"]), ["weight", "bias"]);
        // Each parameter: the same keys, in order, with the same value types.
        for p in ["weight", "bias"] {
            assert_eq!(
                types(&fc1["parameters"][p]),
                types(&theirs["parameters"][p]),
                "{level} {p}"
            );
        }
        assert_eq!(
            fc1["parameters"]["weight"]["shape"],
            serde_json::json!([2, 3])
        );
        assert_eq!(fc1["parameters"]["weight"]["Max"], 2.0);
        assert_eq!(fc1["parameters"]["weight"]["Min"], -1.5);
        assert_eq!(fc1["parameters"]["bias"]["Min"], -3.0);
        assert_eq!(fc1["parameters"]["bias"]["Mean"], (0.125 - 3.0) / 2.0);
        // A module without parameters: `{}`, as msprobe's ReLU.
        let act = &ours["data"]["Module.act.ReLU.forward.0"];
        assert_eq!(act["parameters"], serde_json::json!({}));
        assert_eq!(
            real["data"]["Module.act.ReLU.forward.0"]["parameters"],
            serde_json::json!({})
        );
        assert_eq!(keys(act), keys(theirs));
        if level == "mix" {
            // An API call has no parameters key, whatever was reported.
            let add = &ours["data"]["Functional.Add.0.forward"];
            assert_eq!(keys(add), ["input_args", "input_kwargs", "output"]);
        }
        std::fs::remove_dir_all(&r).unwrap();
    }
}

#[test]
fn the_tensor_task_writes_each_parameter_file_as_msprobe_names_it() {
    let r = root("tensor");
    let mut d = msprobe(&r, "tensor", "L0");
    run(&mut d);
    d.close().unwrap();
    let dir = r.join("step0/rank0");
    let doc = json(&dir.join("dump.json"));
    let w = &doc["data"]["Module.fc1.Linear.forward.0"]["parameters"]["weight"];
    let name = "Module.fc1.Linear.forward.0.parameters.weight.npy";
    assert_eq!(w["data_name"], name);
    let arr = dump_npy::read_file(dir.join("dump_tensor_data").join(name)).unwrap();
    assert_eq!(arr.shape, [2, 3]);
    let vals: Vec<f32> = arr
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(vals, W);
    assert!(
        dir.join("dump_tensor_data/Module.fc1.Linear.forward.0.parameters.bias.npy")
            .exists()
    );
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn no_parameters_at_l1_nor_in_mindspores_layout() {
    // L1: every kernel is an API call, as in msprobe's L1 dumps (no parameters key).
    let r = root("l1");
    let mut d = msprobe(&r, "statistics", "L1");
    run(&mut d);
    assert_eq!(d.close().unwrap().rows, 2 + 2 + 1);
    let doc = json(&r.join("step0/rank0/dump.json"));
    for (name, entry) in doc["data"].as_object().unwrap() {
        assert_eq!(
            keys(entry),
            ["input_args", "input_kwargs", "output"],
            "{name}"
        );
    }
    std::fs::remove_dir_all(&r).unwrap();
    // MindSpore's layout: nothing for a kernel's parameters (its Parameters are the step's).
    let r = root("ms");
    let mut d = open(format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
            "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        r.display()
    ));
    run(&mut d);
    assert_eq!(d.close().unwrap().rows, 2 + 2 + 1);
    std::fs::remove_dir_all(&r).unwrap();
}
