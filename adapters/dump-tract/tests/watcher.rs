//! Watcher mode through dump-tract: a watched node's output is held (a clone of its TValue)
//! and read again after every later node; a correct model run over several steps reports no
//! corruption, and the handles are released with each step.

#[path = "../../testsupport/onnx_fixtures.rs"]
mod support;

use std::{
    collections::HashMap,
    sync::{Arc as StdArc, Mutex},
};

use dump_host::{
    DumpOptions, Dumper,
    config::{CorruptionPolicy, WatcherConfig},
    diag::Event,
};
use dump_tract::{TractDump, tract_onnx::prelude::*};
use support::{Tmp, fixtures, x_f32};

fn plan(model: &str) -> Arc<TypedSimplePlan> {
    tract_onnx::onnx()
        .model_for_path(fixtures().join(format!("{model}.onnx")))
        .unwrap()
        .into_typed()
        .unwrap()
        .into_runnable()
        .unwrap()
}

fn input(model: &str) -> TVec<TValue> {
    let (shape, v) = x_f32(model);
    tvec!(Tensor::from_shape(&shape, &v).unwrap().into_tvalue())
}

#[test]
fn a_correct_model_over_several_steps_reports_no_corruption() {
    let tmp = Tmp::new("watch-clean");
    let plan = plan("cnn");
    let mut td = TractDump::new(&plan, 0);
    let names: Vec<String> = td.graph().nodes.iter().map(|n| n.name.clone()).collect();
    assert!(names.len() >= 3, "{names:?}");
    // Watch the first kernel's output (by its last name component, as CANN names ops) and
    // the third's (by full name): every later kernel reads them again.
    let short = names[0].rsplit('/').next().unwrap().to_owned();
    let watcher = WatcherConfig::new([short, names[2].clone()], Vec::<String>::new())
        .on_corruption(CorruptionPolicy::Stop);
    let events = StdArc::new(Mutex::new(Vec::new()));
    let ev = StdArc::clone(&events);
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        tmp.0.display()
    );
    let env = HashMap::<String, String>::new();
    let mut d = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .watcher(watcher)
        .on_event(move |e: &Event| {
            if matches!(
                e,
                Event::MemoryCorruption(_) | Event::WatchedUnreadable { .. }
            ) {
                ev.lock().unwrap().push(e.to_string());
            }
        })
        .open_json(text.into_bytes())
        .unwrap();
    let mut state = plan.spawn().unwrap();
    let steps = 4;
    let mut outputs = Vec::new();
    for _ in 0..steps {
        outputs.push(td.run(&mut d, &mut state, input("cnn")).unwrap());
    }
    // Same results every step (the watcher changes nothing), and no report.
    assert!(outputs.windows(2).all(|w| w[0] == w[1]));
    assert!(
        events.lock().unwrap().is_empty(),
        "{:?}",
        events.lock().unwrap()
    );
    assert!(
        td.diagnostics().iter().all(|l| !l.contains("watcher")),
        "{:?}",
        td.diagnostics()
    );
    // Every kernel from a watched one on read its (single) output again, its own run
    // included, in every step: the watcher really ran.
    let k = names.len() as u64;
    let (reads, found) = d.watcher_counts();
    assert_eq!(found, 0);
    assert_eq!(reads, steps * (k + (k - 2)), "{k} kernels");
    d.close().unwrap();
    assert!(!tmp.0.join("rank_0/watcher.csv").exists());
    // The statistic dump ran as usual beside it.
    assert!(tmp.0.join("rank_0/Net/0/3/statistic.csv").exists());
}

#[test]
fn without_watcher_mode_no_handle_is_taken() {
    let tmp = Tmp::new("watch-off");
    let plan = plan("cnn");
    let mut td = TractDump::new(&plan, 0);
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        tmp.0.display()
    );
    let env = HashMap::<String, String>::new();
    let mut d = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .open_json(text.into_bytes())
        .unwrap();
    let mut state = plan.spawn().unwrap();
    td.run(&mut d, &mut state, input("cnn")).unwrap();
    assert_eq!(d.watcher_counts(), (0, 0));
    d.close().unwrap();
}
