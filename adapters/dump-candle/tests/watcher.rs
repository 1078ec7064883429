//! Watcher mode through dump-candle: a tapped tensor is watched (a clone of the candle
//! tensor, sharing its storage); a later kernel that writes into that storage in place
//! (`Tensor::slice_set`, as a KV cache does) is reported as the corrupting kernel, and a
//! forward that leaves it alone reports nothing.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
};

use candle_core::{Device, Tensor};
use dump_candle::{Tracer, tap};
use dump_host::{
    Dumper,
    config::{CorruptionPolicy, WatcherConfig},
    diag::Event,
    watcher::Corruption,
};

struct Tmp(PathBuf);
impl Tmp {
    fn new(tag: &str) -> Self {
        let d =
            std::env::temp_dir().join(format!("dump-candle-watch-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Tmp(d)
    }
}
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A forward of three tapped kernels; with `bug` the second one also writes into the first
/// one's output in place.
fn forward(bug: bool) -> Tensor {
    let a = Tensor::arange(0f32, 8.0, &Device::Cpu).unwrap();
    tap("a", "Arange", &a);
    let b = (&a * 2.0).unwrap();
    if bug {
        let junk = Tensor::new(&[99f32, 99.0], &Device::Cpu).unwrap();
        a.slice_set(&junk, 0, 3).unwrap();
    }
    tap("b", "Mul", &b);
    let c = (&b + 1.0).unwrap();
    tap("c", "Add", &c);
    c
}

#[test]
fn an_in_place_write_into_a_watched_tensor_names_the_kernel_and_stops_the_step() {
    let tmp = Tmp::new("slice-set");
    let found = Arc::new(Mutex::new(Vec::<Corruption>::new()));
    let f = Arc::clone(&found);
    let config = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        tmp.0.display()
    );
    let mut d = Dumper::builder()
        .watcher(
            WatcherConfig::new(["Arange-op0"], Vec::<&str>::new())
                .on_corruption(CorruptionPolicy::Stop),
        )
        .on_event(move |e: &Event| {
            if let Event::MemoryCorruption(c) = e {
                f.lock().unwrap().push((**c).clone());
            }
        })
        .open_json(config.into_bytes())
        .unwrap();
    let mut tracer = Tracer::new(0);
    // Two clean steps: nothing reported, the tensor read after b and c (and its own tap).
    for _ in 0..2 {
        tracer.step(&mut d, || forward(false)).unwrap();
    }
    assert!(found.lock().unwrap().is_empty());
    assert_eq!(d.watcher_counts(), (6, 0));
    // The buggy step: the corruption is seen after Mul-op1, whose tap follows the write.
    let e = tracer.step(&mut d, || forward(true)).unwrap_err();
    assert!(e.to_string().contains("memory corruption"), "{e}");
    let found = found.lock().unwrap().clone();
    assert_eq!(found.len(), 1, "{found:#?}");
    let c = &found[0];
    assert_eq!(
        (c.step, c.kernel.as_str(), c.watched.as_str()),
        (2, "Default/b/Mul-op1", "Default/a/Arange-op0")
    );
    assert_eq!(c.checked_since, "Default/a/Arange-op0");
    assert_eq!((c.before.max.as_str(), c.after.max.as_str()), ("7", "99"));
    d.close().unwrap();
    let csv = std::fs::read_to_string(tmp.0.join("rank_0/watcher.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2, "{csv}");
}
