//! The flight recorder and the non-finite policies (issue 24): the `opdump` config section,
//! what is held and what is written on a trigger (exactly the last N steps and the trigger
//! step, `trigger.json` naming the kernel), nothing written without a trigger, the byte
//! budget, a user trigger from another thread, `max_triggers`, `watch`, and `stop`.

mod support;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use dump_host::{
    DumpOptions, Dumper, Error, TensorRef,
    config::{Device, FlightRecorder, NonFinitePolicy},
    diag::Event,
};
use serde_json::{Value, json};

fn root(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-flight-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A config of every kernel at `root` (`saved_data` as given) with `opdump` as its section.
fn config(root: &Path, saved_data: &str, opdump: Option<Value>) -> String {
    let mut doc = json!({
        "common_dump_settings": {
            "dump_mode": 0, "path": root.display().to_string(), "net_name": "Net",
            "iteration": "all", "saved_data": saved_data, "input_output": 0, "kernels": [],
            "support_device": [0]
        },
        "e2e_dump_settings": {"enable": true}
    });
    if let Some(o) = opdump {
        doc["opdump"] = o;
    }
    doc.to_string()
}

type Events = Arc<Mutex<Vec<Event>>>;

fn open(root: &Path, saved: &str, opdump: Value) -> (Dumper, Events) {
    let events: Events = Arc::default();
    let sink = Arc::clone(&events);
    let env: HashMap<String, String> = HashMap::new();
    let d = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .on_event(move |e| sink.lock().unwrap().push(e.clone()))
        .open_json(config(root, saved, Some(opdump)).into_bytes())
        .unwrap();
    (d, events)
}

const KERNELS: [(&str, &str); 3] = [
    ("MatMul", "Default/net/fc1-Dense/MatMul-op0"),
    ("ReLU", "Default/net/relu-ReLU/ReLU-op1"),
    ("Add", "Default/net/fc2-Dense/Add-op2"),
];

/// One step of a three-kernel net: each kernel's input and output of 64 f32; `nan_at` puts a
/// NaN into that kernel's output (and every later one's, as a real net would). Returns the
/// first error a kernel call gave.
fn run_step(d: &mut Dumper, i: u64, nan_at: Option<usize>) -> Result<(), Error> {
    let step = d.begin_step();
    let mut first = Ok(());
    for (n, (ty, name)) in KERNELS.iter().enumerate() {
        let x: Vec<f32> = (0..64).map(|j| (i * 100 + j) as f32).collect();
        let mut y = x.clone();
        if nan_at.is_some_and(|k| n >= k) {
            y[3] = f32::NAN;
        }
        if let Some(k) = step.kernel(ty, name) {
            k.input(0, TensorRef::from_slice(&[8, 8], &x))?;
            if let Err(e) = k.output(0, TensorRef::from_slice(&[8, 8], &y)) {
                if first.is_ok() {
                    first = Err(e);
                }
                if matches!(first, Err(Error::NonFinite(_))) {
                    break; // what a runtime does: stop at the kernel
                }
            }
        }
    }
    step.finish()?;
    first
}

/// Every file below `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn step_dirs(root: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(root.join("rank_0/Net/0"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn trigger(root: &Path, name: &str) -> Value {
    let text = std::fs::read_to_string(root.join("rank_0").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn nan_at_step_5_writes_steps_3_4_5_and_the_trigger_naming_the_kernel() {
    let root = root("nan");
    let (mut d, events) = open(&root, "full", json!({"flight_recorder": {"steps": 2}}));
    for i in 0..8 {
        run_step(&mut d, i, (i == 5).then_some(1)).unwrap();
        if i < 5 {
            assert!(
                !root.exists(),
                "nothing is written before the trigger (step {i})"
            );
        }
    }
    d.close().unwrap();
    assert_eq!(step_dirs(&root), [3, 4, 5]);
    for s in [3, 4, 5] {
        let dir = root.join(format!("rank_0/Net/0/{s}"));
        let npy = files(&dir).iter().filter(|f| f.ends_with(".npy")).count();
        assert_eq!(npy, 6, "3 kernels x (input, output) at step {s}");
        let csv = std::fs::read_to_string(dir.join("statistic.csv")).unwrap();
        assert_eq!(csv.lines().count(), 1 + 6, "{csv}");
        assert!(csv.starts_with("Op Type,Op Name,"), "{csv}");
    }
    let t = trigger(&root, "trigger.json");
    assert_eq!(t["trigger"]["kind"], "nonfinite");
    assert_eq!(t["trigger"]["kernel"], KERNELS[1].1);
    assert_eq!(t["trigger"]["step"], 5);
    assert_eq!(t["trigger"]["tensor"], "output.0");
    assert_eq!(t["trigger"]["nan"], 1);
    assert_eq!(t["first_nonfinite"]["kernel"], KERNELS[1].1);
    let written: Vec<u64> = t["steps_written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_u64().unwrap())
        .collect();
    assert_eq!(written, [3, 4, 5]);
    assert_eq!(t["tensor_files"], 18);
    assert_eq!(
        (&t["write_failures"], &t["write_failure"]),
        (&json!(0), &Value::Null)
    );
    let order = std::fs::read_to_string(
        root.join("rank_0/execution_order/ms_global_execution_order_graph_0.csv"),
    )
    .unwrap();
    assert_eq!(order, "3\n4\n5\n");
    assert!(root.join("rank_0/.dump_metadata/data_dump.json").exists());
    let wrote = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, Event::FlightRecorderWrote { .. }))
        .count();
    assert_eq!(wrote, 1);
    // Steps 6 and 7 also hold NaN-free data and were never written (one trigger).
    assert!(!root.join("rank_0/trigger_2.json").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

/// A trigger whose files partly fail (step 4's directory is a file in the way, as a full or
/// read-only disk fails a write) still writes `trigger.json`, and it says how many files
/// failed and names one, instead of looking complete; the other steps are written whole.
#[test]
fn a_trigger_whose_files_fail_says_so_in_trigger_json() {
    let root = root("fail");
    std::fs::create_dir_all(root.join("rank_0/Net/0")).unwrap();
    std::fs::write(root.join("rank_0/Net/0/4"), b"in the way").unwrap();
    let (mut d, _events) = open(&root, "full", json!({"flight_recorder": {"steps": 2}}));
    for i in 0..5 {
        run_step(&mut d, i, None).unwrap();
    }
    // The trigger's write runs on its own thread from step 5's finish; its failure comes back
    // from the next call that collects write failures (here `flush`, else `close`).
    let r5 = run_step(&mut d, 5, Some(1));
    let flushed = d.flush();
    assert!(
        matches!(r5, Err(Error::Write(_))) || matches!(flushed, Err(Error::Write(_))),
        "{r5:?} {flushed:?}"
    );
    let _ = d.close();
    let t = trigger(&root, "trigger.json");
    let failed = t["write_failures"].as_u64().unwrap();
    assert!(failed >= 1, "step 4's directory: {t}");
    let why = t["write_failure"].as_str().unwrap();
    assert!(why.contains("Net/0/4"), "{why}");
    for s in [3, 5] {
        let dir = root.join(format!("rank_0/Net/0/{s}"));
        let npy = files(&dir).iter().filter(|f| f.ends_with(".npy")).count();
        assert_eq!(npy, 6, "step {s}");
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn no_anomaly_writes_nothing_at_all() {
    let root = root("quiet");
    let (mut d, events) = open(&root, "full", json!({"flight_recorder": {}}));
    for i in 0..10 {
        run_step(&mut d, i, None).unwrap();
    }
    assert!(d.flight_recorder_bytes() > 0, "tensors are held");
    let report = d.close().unwrap();
    assert_eq!((report.files, report.rows), (0, 0));
    assert!(!root.exists(), "{:?}", files(&root));
    let ev = events.lock().unwrap();
    assert!(
        !ev.iter().any(|e| !matches!(e, Event::ConfigWarning(_))),
        "no warning but the config's for a quiet run: {ev:?}"
    );
}

#[test]
fn an_early_trigger_writes_the_steps_there_are() {
    let root = root("early");
    let (mut d, _) = open(&root, "tensor", json!({"flight_recorder": {"steps": 3}}));
    run_step(&mut d, 0, None).unwrap();
    run_step(&mut d, 1, Some(0)).unwrap();
    d.close().unwrap();
    assert_eq!(step_dirs(&root), [0, 1]);
    assert!(
        !root.join("rank_0/Net/0/1/statistic.csv").exists(),
        "saved_data tensor: no rows"
    );
    let t = trigger(&root, "trigger.json");
    assert_eq!(t["trigger"]["kernel"], KERNELS[0].1);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_budget_keeps_every_row_and_the_latest_tensors() {
    let root = root("budget");
    // One step holds 6 tensors of 256 bytes; 2 steps + the current would need 4608 bytes.
    let budget = 2500;
    let (mut d, events) = open(
        &root,
        "full",
        json!({"flight_recorder": {"steps": 2, "budget_bytes": budget}}),
    );
    for i in 0..6 {
        run_step(&mut d, i, None).unwrap();
        assert!(
            d.flight_recorder_bytes() <= budget,
            "step {i}: {}",
            d.flight_recorder_bytes()
        );
    }
    run_step(&mut d, 6, Some(2)).unwrap();
    d.close().unwrap();
    assert_eq!(step_dirs(&root), [4, 5, 6]);
    let mut npy = 0;
    for s in [4, 5, 6] {
        let dir = root.join(format!("rank_0/Net/0/{s}"));
        let csv = std::fs::read_to_string(dir.join("statistic.csv")).unwrap();
        assert_eq!(csv.lines().count(), 7, "every row kept at step {s}");
        npy += files(&dir).iter().filter(|f| f.ends_with(".npy")).count();
    }
    assert!(npy > 0 && npy < 18, "{npy}");
    // The latest are preferred: the trigger step is whole.
    let last = files(&root.join("rank_0/Net/0/6"));
    assert_eq!(
        last.iter().filter(|f| f.ends_with(".npy")).count(),
        6,
        "{last:?}"
    );
    let t = trigger(&root, "trigger.json");
    assert_eq!(t["tensors_let_go"].as_u64().unwrap() as usize, 18 - npy);
    let said = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, Event::FlightBudgetReached { .. }))
        .count();
    assert_eq!(said, 1, "said once");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_zero_budget_records_statistics_only() {
    let root = root("zero");
    let (mut d, _) = open(
        &root,
        "full",
        json!({"flight_recorder": {"budget_bytes": 0}}),
    );
    for i in 0..3 {
        run_step(&mut d, i, (i == 2).then_some(0)).unwrap();
    }
    d.close().unwrap();
    let all = files(&root);
    assert!(!all.iter().any(|f| f.ends_with(".npy")), "{all:?}");
    assert_eq!(
        all.iter().filter(|f| f.ends_with("statistic.csv")).count(),
        3
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_user_trigger_from_another_thread() {
    let root = root("user");
    let (mut d, _) = open(&root, "statistic", json!({"flight_recorder": {"steps": 1}}));
    let handle = d.trigger_handle();
    for i in 0..6 {
        if i == 4 {
            let h = handle.clone();
            std::thread::spawn(move || assert!(h.trigger("loss spike: 9.1 > 3 x mean")))
                .join()
                .unwrap();
        }
        run_step(&mut d, i, None).unwrap();
    }
    d.close().unwrap();
    assert_eq!(step_dirs(&root), [3, 4]);
    let t = trigger(&root, "trigger.json");
    assert_eq!(t["trigger"]["kind"], "user");
    assert_eq!(t["trigger"]["reason"], "loss spike: 9.1 > 3 x mean");
    assert_eq!(t["trigger"]["step"], 4);
    assert_eq!(t["first_nonfinite"], Value::Null);
    drop(d);
    assert!(!handle.trigger("after the Dumper is gone"));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_user_trigger_between_steps_writes_at_close() {
    let root = root("user-close");
    let (mut d, _) = open(&root, "statistic", json!({"flight_recorder": {"steps": 2}}));
    for i in 0..4 {
        run_step(&mut d, i, None).unwrap();
    }
    assert!(d.trigger("the loop ended badly"));
    d.close().unwrap();
    assert_eq!(step_dirs(&root), [2, 3]);
    assert_eq!(trigger(&root, "trigger.json")["trigger"]["step"], 3);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn max_triggers_caps_the_writes_and_says_so_once() {
    let root = root("cap");
    let (mut d, events) = open(&root, "statistic", json!({"flight_recorder": {"steps": 1}}));
    for i in 0..8 {
        run_step(&mut d, i, (i == 2 || i == 5 || i == 6).then_some(2)).unwrap();
    }
    d.close().unwrap();
    assert_eq!(step_dirs(&root), [1, 2]);
    assert!(!root.join("rank_0/trigger_2.json").exists());
    let ev = events.lock().unwrap();
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, Event::FlightTriggersExhausted { step: 5, .. }))
            .count(),
        1,
        "{ev:?}"
    );
    drop(ev);
    std::fs::remove_dir_all(&root).unwrap();

    let root = self::root("cap2");
    let (mut d, _) = open(
        &root,
        "statistic",
        json!({"flight_recorder": {"steps": 1, "max_triggers": 0}}),
    );
    for i in 0..8 {
        run_step(&mut d, i, (i == 2 || i == 5 || i == 6).then_some(2)).unwrap();
    }
    d.close().unwrap();
    // The ring starts again after each write: step 6's trigger holds no step 5.
    assert_eq!(step_dirs(&root), [1, 2, 4, 5, 6]);
    assert_eq!(trigger(&root, "trigger_2.json")["trigger"]["step"], 5);
    assert_eq!(
        trigger(&root, "trigger_3.json")["steps_written"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn watch_overflow_checks_only_f16_f32_bf16() {
    let root = root("watch");
    let (mut d, _) = open(
        &root,
        "statistic",
        json!({"flight_recorder": {}, "watch": "overflow"}),
    );
    let step = d.begin_step();
    if let Some(k) = step.kernel("Cast", "Default/Cast-op0") {
        k.output(0, TensorRef::from_slice(&[2], &[1.0f64, f64::NAN]))
            .unwrap();
    }
    step.finish().unwrap();
    assert!(!root.exists(), "a float64 NaN is no overflow");
    let step = d.begin_step();
    if let Some(k) = step.kernel("Cast", "Default/Cast-op0") {
        k.output(0, TensorRef::from_slice(&[2], &[1.0f32, f32::INFINITY]))
            .unwrap();
    }
    step.finish().unwrap();
    d.close().unwrap();
    let t = trigger(&root, "trigger.json");
    assert_eq!(t["trigger"]["kind"], "overflow");
    assert_eq!(t["trigger"]["pos_inf"], 1);
    assert_eq!(t["trigger"]["dtype"], "float32");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn stop_returns_the_error_naming_kernel_step_and_tensor_and_writes_the_ring() {
    let root = root("stop");
    let (mut d, _) = open(
        &root,
        "tensor",
        json!({"flight_recorder": {"steps": 2}, "on_nonfinite": "stop"}),
    );
    for i in 0..3 {
        run_step(&mut d, i, None).unwrap();
    }
    let e = run_step(&mut d, 3, Some(1)).unwrap_err();
    let Error::NonFinite(at) = &e else {
        panic!("{e}")
    };
    assert_eq!(
        (at.kernel.as_str(), at.step, at.io, at.slot),
        (KERNELS[1].1, 3, "output", 0)
    );
    assert_eq!(at.nan, 1);
    let m = e.to_string();
    assert!(
        m.contains(KERNELS[1].1) && m.contains("step 3") && m.contains("output 0"),
        "{m}"
    );
    d.close().unwrap();
    assert_eq!(step_dirs(&root), [1, 2, 3]);
    // The stopped step holds what ran: MatMul's two tensors and ReLU's.
    let stopped = files(&root.join("rank_0/Net/0/3"));
    assert_eq!(
        stopped.iter().filter(|f| f.ends_with(".npy")).count(),
        4,
        "{stopped:?}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn stop_without_a_recorder_dumps_as_usual_and_returns_the_error() {
    let root = root("stop-plain");
    let (mut d, _) = open(&root, "statistic", json!({"on_nonfinite": "stop"}));
    run_step(&mut d, 0, None).unwrap();
    let e = run_step(&mut d, 1, Some(2)).unwrap_err();
    assert!(matches!(&e, Error::NonFinite(at) if at.kernel == KERNELS[2].1 && at.step == 1));
    d.close().unwrap();
    assert_eq!(step_dirs(&root), [0, 1], "a normal dump of every step");
    assert!(!root.join("rank_0/trigger.json").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_builder_turns_the_recorder_on_and_a_dropped_step_still_writes() {
    let root = root("builder");
    let env: HashMap<String, String> = HashMap::new();
    let mut d = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .events(dump_host::diag::EventSink::ignore())
        .flight_recorder(FlightRecorder {
            steps: 1,
            ..FlightRecorder::default()
        })
        .on_nonfinite(NonFinitePolicy::Stop)
        .open_json(config(&root, "tensor", None).into_bytes())
        .unwrap();
    assert_eq!(d.plan().unwrap().on_nonfinite, NonFinitePolicy::Stop);
    run_step(&mut d, 0, None).unwrap();
    {
        let step = d.begin_step();
        let k = step.kernel("Div", "Default/Div-op0").unwrap();
        let e = k.output(0, TensorRef::from_slice(&[1], &[f32::NEG_INFINITY]));
        assert!(matches!(e, Err(Error::NonFinite(ref at)) if at.neg_inf == 1));
        // The runtime bails out without finishing the step.
    }
    assert_eq!(step_dirs(&root), [0, 1]);
    d.close().unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn constants_and_graph_files_wait_for_the_trigger() {
    let root = root("consts");
    let (mut d, _) = open(&root, "full", json!({"flight_recorder": {"steps": 1}}));
    d.begin_graph(0, &[KERNELS[0].1, KERNELS[1].1, KERNELS[2].1])
        .unwrap();
    d.constant(
        0,
        "fc1.weight",
        TensorRef::from_slice(&[2], &[0.5f32, 0.25]),
    )
    .unwrap();
    run_step(&mut d, 0, None).unwrap();
    assert!(!root.exists());
    run_step(&mut d, 1, Some(0)).unwrap();
    d.close().unwrap();
    let all = files(&root);
    assert!(
        all.iter()
            .any(|f| f.starts_with("rank_0/Net/0/constants/Parameter.fc1_weight")),
        "{all:?}"
    );
    assert!(all.contains(&"rank_0/execution_order/ms_execution_order_graph_0.csv".to_owned()));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_opdump_section_is_read_and_checked() {
    use support::{accepts, rejects};
    let mut doc = support::base();
    doc["opdump"] = json!({"flight_recorder": {}});
    let v = accepts(&doc, Device::Cpu);
    assert_eq!(
        v.config.opdump.flight_recorder,
        Some(FlightRecorder::default())
    );
    assert_eq!(
        FlightRecorder::default(),
        FlightRecorder {
            steps: 2,
            budget_bytes: 1 << 30,
            max_triggers: 1,
            l2norm_growth: None,
        }
    );
    assert_eq!(v.config.opdump.policy(), NonFinitePolicy::Record);
    // The effective config keeps the section, defaults filled in, and reads back the same.
    let eff = v.config.to_effective_json();
    assert_eq!(eff["opdump"]["flight_recorder"]["budget_bytes"], 1u64 << 30);
    assert_eq!(eff["opdump"]["watch"], "nonfinite");
    assert_eq!(accepts(&eff, Device::Cpu).config, v.config);
    let mut stop = support::base();
    stop["opdump"] = json!({"on_nonfinite": "stop", "watch": "overflow"});
    let v = accepts(&stop, Device::Cpu);
    let eff = v.config.to_effective_json();
    assert_eq!(
        eff["opdump"],
        json!({"on_nonfinite": "stop", "watch": "overflow"})
    );
    assert_eq!(accepts(&eff, Device::Cpu).config, v.config);

    doc["opdump"] = json!({"flight_recorder": {"steps": 0}});
    rejects(
        &doc,
        Device::Cpu,
        "opdump.flight_recorder.steps",
        "allowed: 1 to 1000",
    );
    doc["opdump"] = json!({"flight_recorder": {"budget_bytes": "1G"}});
    rejects(
        &doc,
        Device::Cpu,
        "opdump.flight_recorder.budget_bytes",
        "\"1G\" (a string)",
    );
    doc["opdump"] = json!({"flight_recorder": 2});
    rejects(
        &doc,
        Device::Cpu,
        "opdump.flight_recorder",
        "should be an object",
    );
    doc["opdump"] = json!({"on_nonfinite": "halt"});
    rejects(
        &doc,
        Device::Cpu,
        "opdump.on_nonfinite",
        "allowed: continue, record, stop",
    );
    doc["opdump"] = json!({"on_nonfinite": "record"});
    rejects(&doc, Device::Cpu, "opdump.on_nonfinite", "there is none");
    doc["opdump"] = json!({"watch": "inf"});
    rejects(&doc, Device::Cpu, "opdump.watch", "allowed: nonfinite");
    doc["opdump"] = json!([]);
    rejects(&doc, Device::Cpu, "opdump", "should be an object");
    let mut ov = support::base();
    ov["common_dump_settings"]["op_debug_mode"] = json!(3);
    ov["opdump"] = json!({"flight_recorder": {}});
    rejects(
        &ov,
        Device::Cpu,
        "opdump.flight_recorder",
        "op_debug_mode is 3",
    );

    doc["opdump"] = json!({"flight_recorder": {"step": 3}, "on_nonfinte": "stop"});
    let v = accepts(&doc, Device::Cpu);
    assert!(support::warns(
        &v,
        "opdump.flight_recorder.step",
        "did you mean \"steps\""
    ));
    assert!(support::warns(
        &v,
        "opdump.on_nonfinte",
        "did you mean \"on_nonfinite\""
    ));
    // Without the section nothing changes, and no unknown-key warning names it.
    let mut plain = support::base();
    plain["opdump"] = json!({});
    let v = accepts(&plain, Device::Cpu);
    assert_eq!(v.config.opdump.policy(), NonFinitePolicy::Continue);
    assert!(!v.warnings.warnings().any(|w| w.path == "opdump"));
}

/// Peak resident set of this process in KiB (`VmHWM` of /proc/self/status).
#[cfg(target_os = "linux")]
fn vm_hwm_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Step shape of the fast producer: 16 kernels, each with one 4 MiB input, 12 steps.
const CHILD_KERNELS: usize = 16;
const CHILD_MIB: usize = 4;

/// The fast producer, run in a child process by
/// `the_budget_bounds_memory_under_a_fast_producer` (this test does nothing unless
/// `OPDUMP_FLIGHT_RSS_CHILD` holds the budget in MiB): a recorder of 4 steps under that
/// budget, fed 12 steps of 16 tensors of 4 MiB (a memcpy each, no statistics), then prints
/// its peak RSS.
#[cfg(target_os = "linux")]
#[test]
fn rss_child() {
    let Ok(budget) = std::env::var("OPDUMP_FLIGHT_RSS_CHILD") else {
        return;
    };
    let budget: u64 = budget.parse::<u64>().unwrap() << 20;
    let root = root(&format!("rss-{budget}"));
    let (mut d, _) = open(
        &root,
        "tensor",
        json!({"flight_recorder": {"steps": 4, "budget_bytes": budget}}),
    );
    let x: Vec<f32> = (0..CHILD_MIB << 18).map(|i| i as f32).collect();
    let before = vm_hwm_kib();
    let mut held_max = 0;
    for _ in 0..12 {
        let step = d.begin_step();
        for k in 0..CHILD_KERNELS {
            let name = format!("Default/net/MatMul-op{k}");
            if let Some(kernel) = step.kernel("MatMul", &name) {
                kernel
                    .input(0, TensorRef::from_slice(&[x.len()], &x))
                    .unwrap();
            }
        }
        step.finish().unwrap();
        held_max = held_max.max(d.flight_recorder_bytes());
    }
    let after = vm_hwm_kib();
    d.close().unwrap();
    assert!(!root.exists(), "no trigger: nothing written");
    println!(
        "FLIGHT_RSS growth_kib={} held_max={held_max}",
        after - before
    );
}

#[cfg(target_os = "linux")]
#[test]
fn the_budget_bounds_memory_under_a_fast_producer() {
    let child = |budget_mib: u64| -> (u64, u64) {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "rss_child", "--nocapture", "--test-threads=1"])
            .env("OPDUMP_FLIGHT_RSS_CHILD", budget_mib.to_string())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = text
            .lines()
            .find_map(|l| l.split_once("FLIGHT_RSS").map(|(_, r)| r))
            .unwrap_or_else(|| panic!("{text}"));
        let num = |key: &str| -> u64 {
            let v = line.split(key).nth(1).unwrap();
            v.split_whitespace().next().unwrap().parse().unwrap()
        };
        (num("growth_kib=") << 10, num("held_max="))
    };
    let step_bytes = ((CHILD_KERNELS * CHILD_MIB) as u64) << 20;
    let (small, small_held) = child(24);
    let (big, big_held) = child(1024);
    eprintln!(
        "peak RSS growth: budget 24 MiB {} MiB (held at most {} MiB); budget 1 GiB {} MiB \
         (held at most {} MiB)",
        small >> 20,
        small_held >> 20,
        big >> 20,
        big_held >> 20
    );
    assert!(small_held <= 24 << 20, "{small_held}");
    // The recorder holds at most its budget (room is made before a copy is allocated): the
    // process grows by about as much, allocator slack aside.
    assert!(small <= (24 + 6) << 20, "{} MiB", small >> 20);
    // Unbounded enough to hold 4 steps and the current one: the measurement sees it.
    assert_eq!(big_held, 5 * step_bytes);
    assert!(big >= 4 * step_bytes, "{} MiB", big >> 20);
}

/// Minor page faults of this process so far (field 10 of /proc/self/stat).
#[cfg(target_os = "linux")]
fn minflt() -> u64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &s[s.rfind(')').unwrap() + 2..];
    after.split_whitespace().nth(7).unwrap().parse().unwrap()
}

/// In the steady state the ring recycles the buffers of the step that left it: holding a
/// step's tensors touches no fresh page (a page fault per 4 KiB would cost more than the copy).
#[cfg(target_os = "linux")]
#[test]
fn the_steady_state_allocates_no_fresh_memory() {
    let root = root("steady");
    let (mut d, _) = open(&root, "tensor", json!({"flight_recorder": {"steps": 2}}));
    let x: Vec<f32> = (0..1 << 16).map(|i| i as f32).collect(); // 256 KiB
    let sizes = [1usize << 16, 1 << 10, 3 << 12, 1 << 16, 7];
    let mut faults = Vec::new();
    for _ in 0..8 {
        let before = minflt();
        let step = d.begin_step();
        for (k, n) in sizes.iter().cycle().take(40).enumerate() {
            let name = format!("Default/net/MatMul-op{k}");
            if let Some(kernel) = step.kernel("MatMul", &name) {
                kernel
                    .input(0, TensorRef::from_slice(&[*n], &x[..*n]))
                    .unwrap();
            }
        }
        step.finish().unwrap();
        faults.push(minflt() - before);
    }
    d.close().unwrap();
    // The first three steps fill the ring and the current step (about 4.6 MiB: ~1100 pages);
    // from then on the step leaving the ring gives its buffers to the next.
    assert!(faults[..3].iter().all(|&f| f > 500), "{faults:?}");
    assert!(faults[4..].iter().all(|&f| f < 50), "{faults:?}");
}

#[test]
fn the_l2norm_growth_rule_fires_on_a_spike_against_the_ring_median() {
    let root = root("growth");
    let (mut d, _) = open(
        &root,
        "statistic",
        json!({"flight_recorder": {"steps": 3, "l2norm_growth": 10}}),
    );
    // The output's l2norm: 1, 1.5, 2, 2.5 (growing, never 10x the median), then 50 at step 4.
    for (i, scale) in [1.0f32, 1.5, 2.0, 2.5, 50.0, 1.0].into_iter().enumerate() {
        let step = d.begin_step();
        if let Some(k) = step.kernel("MatMul", "Default/fc-Dense/MatMul-op0") {
            k.output(0, TensorRef::from_slice(&[1], &[scale])).unwrap();
        }
        if let Some(k) = step.kernel("Add", "Default/fc-Dense/Add-op1") {
            k.output(0, TensorRef::from_slice(&[1], &[i as f32 + 1.0]))
                .unwrap();
        }
        // All zeros, then 5 from step 3: a median of 0 says nothing about growth.
        if let Some(k) = step.kernel("Mul", "Default/gate/Mul-op2") {
            let v = if i < 3 { 0.0f32 } else { 5.0 };
            k.output(0, TensorRef::from_slice(&[1], &[v])).unwrap();
        }
        step.finish().unwrap();
    }
    d.close().unwrap();
    assert_eq!(step_dirs(&root), [1, 2, 3, 4]);
    let t = trigger(&root, "trigger.json");
    assert_eq!(t["trigger"]["kind"], "l2norm_growth");
    assert_eq!(t["trigger"]["kernel"], "Default/fc-Dense/MatMul-op0");
    assert_eq!(t["trigger"]["step"], 4);
    assert_eq!(t["trigger"]["l2norm"], 50.0);
    assert_eq!(t["trigger"]["ring_median"], 2.0);
    assert_eq!(t["first_nonfinite"], Value::Null);

    let mut doc = support::base();
    doc["opdump"] = json!({"flight_recorder": {"l2norm_growth": 1}});
    support::rejects(
        &doc,
        Device::Cpu,
        "opdump.flight_recorder.l2norm_growth",
        "greater than 1",
    );
    doc["opdump"] = json!({"flight_recorder": {"l2norm_growth": "10x"}});
    support::rejects(
        &doc,
        Device::Cpu,
        "opdump.flight_recorder.l2norm_growth",
        "a JSON number",
    );
    doc["opdump"] = json!({"flight_recorder": {"l2norm_growth": 2.5}});
    let v = support::accepts(&doc, Device::Cpu);
    assert_eq!(
        v.config.opdump.flight_recorder.unwrap().l2norm_growth,
        Some(2.5)
    );
    let eff = v.config.to_effective_json();
    assert_eq!(support::accepts(&eff, Device::Cpu).config, v.config);
}

/// A trigger's write runs on a thread of its own: the step that fired returns and the next
/// step runs while the write is still going (held here in its last event until the test lets
/// it go); `flush` waits for it.
#[test]
fn a_trigger_is_written_on_its_own_thread_while_the_producer_goes_on() {
    use std::sync::{
        Condvar,
        atomic::{AtomicBool, Ordering},
    };
    let root = root("async");
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let timed_out = Arc::new(AtomicBool::new(false));
    let thread_name: Arc<Mutex<Option<String>>> = Arc::default();
    let (g, t, name) = (
        Arc::clone(&gate),
        Arc::clone(&timed_out),
        Arc::clone(&thread_name),
    );
    let env: HashMap<String, String> = HashMap::new();
    let mut d = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .on_event(move |e| {
            if matches!(e, Event::FlightRecorderWrote { .. }) {
                *name.lock().unwrap() = std::thread::current().name().map(str::to_owned);
                let open = g.0.lock().unwrap();
                let (open, r) =
                    g.1.wait_timeout_while(open, std::time::Duration::from_secs(20), |o| !*o)
                        .unwrap();
                drop(open);
                t.store(r.timed_out(), Ordering::Relaxed);
            }
        })
        .open_json(
            config(
                &root,
                "full",
                Some(json!({"flight_recorder": {"steps": 1}})),
            )
            .into_bytes(),
        )
        .unwrap();
    for i in 0..3 {
        run_step(&mut d, i, (i == 2).then_some(0)).unwrap();
    }
    // The write of steps 1 and 2 is held in its event: the producer goes on regardless.
    run_step(&mut d, 3, None).unwrap();
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    d.flush().unwrap();
    assert!(
        !timed_out.load(Ordering::Relaxed),
        "the write blocked the producer"
    );
    assert_eq!(
        thread_name.lock().unwrap().as_deref(),
        Some("opdump-trigger")
    );
    assert_eq!(trigger(&root, "trigger.json")["trigger"]["step"], 2);
    assert_eq!(step_dirs(&root), [1, 2]);
    d.close().unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}
