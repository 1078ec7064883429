//! Watcher mode on a custom engine: an arena whose buggy kernel writes one element past its
//! own output, into a watched output. The watcher must name that kernel, and nothing else.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use dump_core::DType;
use dump_host::{
    Dumper, Error, Step, TensorRef,
    config::{CorruptionPolicy, FlightRecorder, WatcherConfig},
    diag::Event,
    watcher::{Corruption, RawView, WATCHER_CSV_HEADER},
};

struct Tmp(PathBuf);
impl Tmp {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("opdump-watcher-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Tmp(d)
    }
}
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn config(root: &Path, extra: &str) -> Vec<u8> {
    format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}{extra}}}"#,
        root.display()
    )
    .into_bytes()
}

/// A toy engine: one f32 arena, three 16-element slots, kernels writing through the one raw
/// pointer the arena hands out (so the views the watcher holds stay valid).
struct Arena {
    buf: Vec<f32>,
    base: *mut f32,
}

const N: usize = 16;
const A: usize = 0; // Buggy's output
const B: usize = N; // Producer's output: the watched tensor
const C: usize = 2 * N; // Consumer's output

impl Arena {
    fn new() -> Self {
        let mut buf = vec![0.0f32; 3 * N];
        let base = buf.as_mut_ptr();
        Arena { buf, base }
    }

    fn write(&mut self, at: usize, v: f32) {
        assert!(at < self.buf.len());
        // SAFETY: `at` is inside the arena (checked above); every write goes through `base`,
        // and no reference into the buffer is alive.
        unsafe { self.base.add(at).write(v) }
    }

    fn read(&self, at: usize) -> f32 {
        assert!(at < self.buf.len());
        // SAFETY: as in `write`.
        unsafe { self.base.add(at).read() }
    }

    /// A view of slot `at` for the watcher.
    fn view(&self, at: usize) -> RawView {
        // SAFETY: the arena outlives every step of these tests, all its writes happen on the
        // test's thread between Step calls, and the slot is inside the buffer.
        unsafe { RawView::new(self.base.add(at) as *const u8, N * 4, DType::Float32, &[N]) }
            .unwrap()
    }
}

/// Runs one step of the toy model: Producer writes B, Consumer writes C from B, Buggy writes
/// A from C, one element too many when `bug` (into B[0]), then Tail writes C again. With
/// `twice` Producer runs again at the end (its own rewrite). `prep` first reuses B's slot
/// as scratch (a legitimate write before Producer runs in this step). Returns the
/// errors of `kernel_ran` by kernel.
fn run_step(
    arena: &mut Arena,
    step: &Step,
    seed: f32,
    (bug, twice, prep): (bool, bool, bool),
) -> Vec<(String, Error)> {
    let mut errors = Vec::new();
    let mut ran = |step: &Step, op: &str, name: &str| {
        if let Err(e) = step.kernel_ran(op, name) {
            errors.push((name.to_owned(), e));
        }
    };
    if prep {
        for i in 0..N {
            arena.write(B + i, -1.0);
        }
        ran(step, "Prep", "Default/net/Prep-op4");
    }
    let producer = |arena: &mut Arena, step: &Step, k: f32| {
        for i in 0..N {
            arena.write(B + i, seed + k + i as f32);
        }
        if step.watches("Default/net/Producer-op0") {
            step.watch_output("Default/net/Producer-op0", 0, arena.view(B))
                .unwrap();
        }
    };
    producer(arena, step, 0.0);
    ran(step, "Producer", "Default/net/Producer-op0");
    for i in 0..N {
        let v = arena.read(B + i) * 2.0;
        arena.write(C + i, v);
    }
    ran(step, "Consumer", "Default/net/Consumer-op1");
    // The bug: `..=N` writes A[N], which is B[0].
    let end = if bug { N + 1 } else { N };
    for i in 0..end {
        let v = arena.read(C + i % N) + 1000.0;
        arena.write(A + i, v);
    }
    ran(step, "Buggy", "Default/net/Buggy-op2");
    for i in 0..N {
        let v = arena.read(A + i) - 1.0;
        arena.write(C + i, v);
    }
    ran(step, "Tail", "Default/net/Tail-op3");
    if twice {
        producer(arena, step, 100.0);
        ran(step, "Producer", "Default/net/Producer-op0");
    }
    errors
}

fn events() -> (
    Arc<Mutex<Vec<Corruption>>>,
    impl Fn(&Event) + Send + Sync + 'static,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    (seen, move |e: &Event| {
        if let Event::MemoryCorruption(c) = e {
            s.lock().unwrap().push((**c).clone());
        }
    })
}

#[test]
fn an_out_of_bounds_write_into_a_watched_output_names_the_kernel_that_made_it() {
    let tmp = Tmp::new("oob");
    let (seen, sink) = events();
    let mut d = Dumper::builder()
        .on_event(sink)
        .watcher(WatcherConfig::new(["Producer-op0"], []))
        .open_json(config(&tmp.0, ""))
        .unwrap();
    let mut arena = Arena::new();
    // Step 0 is clean; step 1 has the bug; step 2 is clean again and reuses the watched
    // slot as scratch before Producer runs; Producer also runs twice in it.
    for (n, flags) in [
        (false, false, false),
        (true, false, false),
        (false, true, true),
    ]
    .into_iter()
    .enumerate()
    {
        let step = d.begin_step();
        let errors = run_step(&mut arena, &step, n as f32, flags);
        assert!(
            errors.is_empty(),
            "continue never fails a kernel: {errors:?}"
        );
        assert_eq!(step.watched_outputs(), 1);
        step.finish().unwrap();
    }
    // Read after every kernel once Producer has run (its own runs re-read it to re-baseline
    // an in-place writer): 4 a step, + Producer's second run in step 2; Prep ran before
    // anything was watched in step 2 (step 1's handle was released), so it read nothing.
    assert_eq!(d.watcher_counts(), (4 + 4 + 5, 1));
    d.close().unwrap();

    let found = seen.lock().unwrap().clone();
    assert_eq!(found.len(), 1, "{found:#?}");
    let c = &found[0];
    assert_eq!(
        (c.step, c.kernel.as_str(), c.op_type.as_str()),
        (1, "Default/net/Buggy-op2", "Buggy")
    );
    assert_eq!(c.checked_since, "Default/net/Consumer-op1");
    assert_eq!(
        (c.watched.as_str(), c.slot),
        ("Default/net/Producer-op0", 0)
    );
    assert_eq!((c.dtype, c.shape.as_slice()), (DType::Float32, &[N][..]));
    // Before: 1 + i for i in 0..16 (step 1's seed). After: B[0] = C[0] + 1000 = 2 + 1000.
    assert_eq!((c.before.min.as_str(), c.before.max.as_str()), ("1", "16"));
    assert_eq!((c.after.min.as_str(), c.after.max.as_str()), ("2", "1002"));
    assert_ne!(c.before.md5, c.after.md5);

    let csv = std::fs::read_to_string(tmp.0.join("rank_0/watcher.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(WATCHER_CSV_HEADER.trim_end()));
    let row = lines.next().unwrap();
    assert!(
        row.starts_with("1,0,Buggy,Default/net/Buggy-op2,Default/net/Consumer-op1,Default/net/Producer-op0,0,float32,16,"),
        "{row}"
    );
    assert_eq!(lines.next(), None);
}

#[test]
fn with_layer_the_change_is_seen_at_the_next_layer_kernel_and_stop_fails_it() {
    let tmp = Tmp::new("layer");
    let w = WatcherConfig::new(["Default/net/Producer-op0"], ["Tail-op3"])
        .on_corruption(CorruptionPolicy::Stop);
    let mut d = Dumper::builder()
        .watcher(w)
        .open_json(config(&tmp.0, ""))
        .unwrap();
    let mut arena = Arena::new();
    let step = d.begin_step();
    let errors = run_step(&mut arena, &step, 0.0, (true, false, false));
    step.finish().unwrap();
    // Only Tail is checked: the change made by Buggy is seen there, since Producer.
    assert_eq!(errors.len(), 1, "{errors:?}");
    let (at, e) = &errors[0];
    assert_eq!(at, "Default/net/Tail-op3");
    let Error::MemoryCorruption(c) = e else {
        panic!("{e}")
    };
    assert_eq!(c.kernel, "Default/net/Tail-op3");
    assert_eq!(c.checked_since, "Default/net/Producer-op0");
    assert!(e.to_string().contains("Producer-op0"), "{e}");
    assert_eq!(d.watcher_counts(), (2, 1)); // Producer's own run, then Tail
    d.close().unwrap();
}

#[test]
fn record_fires_the_flight_recorder_with_the_corruption_as_its_reason() {
    let tmp = Tmp::new("record");
    let mut d = Dumper::builder()
        .flight_recorder(FlightRecorder {
            steps: 1,
            ..FlightRecorder::default()
        })
        .watcher(WatcherConfig::new(["Producer-op0"], []).on_corruption(CorruptionPolicy::Record))
        .open_json(config(&tmp.0, ""))
        .unwrap();
    let mut arena = Arena::new();
    for bug in [false, true] {
        let step = d.begin_step();
        if let Some(k) = step.kernel("Producer", "Default/net/Producer-op0") {
            k.output(0, TensorRef::from_slice(&[1], &[1.0f32])).unwrap();
        }
        assert!(run_step(&mut arena, &step, 0.0, (bug, false, false)).is_empty());
        step.finish().unwrap();
    }
    d.close().unwrap();
    let trigger = std::fs::read_to_string(tmp.0.join("rank_0/trigger.json")).unwrap();
    assert!(
        trigger.contains("memory corruption") && trigger.contains("Buggy-op2"),
        "{trigger}"
    );
}

#[test]
fn handles_are_released_when_the_step_ends() {
    let tmp = Tmp::new("release");
    let mut d = Dumper::builder()
        .watcher(WatcherConfig::new(["Add-op0"], []))
        .open_json(config(&tmp.0, ""))
        .unwrap();
    let data: Arc<Vec<f32>> = Arc::new(vec![1.0, 2.0, 3.0]);
    for finish in [true, false] {
        let step = d.begin_step();
        let held = Arc::clone(&data);
        let handle =
            move |f: &mut dyn FnMut(TensorRef<'_>)| f(TensorRef::from_slice(&[3], &held[..]));
        step.watch_output("Default/Add-op0", 0, handle).unwrap();
        // Not a watched kernel: nothing is held for it.
        let other = Arc::clone(&data);
        step.watch_output(
            "Default/Mul-op1",
            0,
            move |f: &mut dyn FnMut(TensorRef<'_>)| f(TensorRef::from_slice(&[3], &other[..])),
        )
        .unwrap();
        step.kernel_ran("Mul", "Default/Mul-op1").unwrap();
        assert_eq!(step.watched_outputs(), 1);
        assert_eq!(Arc::strong_count(&data), 2);
        if finish {
            step.finish().unwrap();
        } else {
            drop(step);
        }
        assert_eq!(Arc::strong_count(&data), 1, "finish={finish}");
    }
    assert_eq!(d.watcher_counts(), (2, 0));
    d.close().unwrap();
}

#[test]
fn config_section_and_bad_values() {
    let tmp = Tmp::new("config");
    let good = r#", "opdump": {"watcher": {"nodes": ["Producer-op0"], "layer": ["Tail-op3"]}}"#;
    let d = Dumper::builder().open_json(config(&tmp.0, good)).unwrap();
    let w = d.plan().unwrap().watcher.clone().unwrap();
    assert_eq!(w, WatcherConfig::new(["Producer-op0"], ["Tail-op3"]));
    drop(d);
    let bad = r#", "opdump": {"watcher": {"nodes": "Producer-op0", "layer": [""],
        "on_corruption": "halt"}}"#;
    let e = Dumper::builder()
        .open_json(config(&tmp.0, bad))
        .unwrap_err()
        .to_string();
    for key in ["nodes:", "layer[0]:", "on_corruption:"] {
        assert!(e.contains(&format!("opdump.watcher.{key}")), "{key}: {e}");
    }
    assert!(
        e.contains("\"Producer-op0\" (a string)") && e.contains("\"halt\""),
        "{e}"
    );
    let record = r#", "opdump": {"watcher": {"nodes": ["P"], "on_corruption": "record"}}"#;
    let e = Dumper::builder()
        .open_json(config(&tmp.0, record))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("opdump.watcher.on_corruption") && e.contains("flight recorder"),
        "{e}"
    );
    // A Rust-built config is checked when the Dumper opens.
    let e = Dumper::builder()
        .watcher(WatcherConfig::new(Vec::<String>::new(), vec![]))
        .open_json(config(&tmp.0, ""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nodes: must not be empty"), "{e}");
    // A RawView whose length does not hold the shape is refused.
    let v = [0u8; 8];
    // SAFETY: `v` outlives the (refused) view.
    let r = unsafe { RawView::new(v.as_ptr(), 8, DType::Float32, &[3]) };
    assert!(r.unwrap_err().to_string().contains("12 bytes"));
}

#[test]
fn an_msprobe_config_s_opdump_section_runs_the_watcher_and_the_csv_is_at_the_dump_root() {
    let tmp = Tmp::new("msprobe");
    let config = format!(
        r#"{{"task": "statistics", "dump_path": "{}", "level": "L1",
            "statistics": {{"scope": [], "list": [], "data_mode": ["all"]}},
            "opdump": {{"watcher": {{"nodes": ["Producer-op0"], "on_corruption": "stop"}}}}}}"#,
        tmp.0.display()
    );
    let mut d = Dumper::builder().open_json(config.into_bytes()).unwrap();
    let mut arena = Arena::new();
    let step = d.begin_step();
    let errors = run_step(&mut arena, &step, 0.0, (true, false, false));
    step.finish().unwrap();
    let names: Vec<&str> = errors.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["Default/net/Buggy-op2"]);
    d.close().unwrap();
    let csv = std::fs::read_to_string(tmp.0.join("watcher.csv")).unwrap();
    assert!(csv.lines().nth(1).unwrap().contains("Buggy-op2"), "{csv}");
}
