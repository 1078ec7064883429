//! The flight recorder with device tensors (issue 24 item 5): a device that defers its copies
//! ([`DeviceTensor::copy_to_host_deferred`]) has its tensors held without the producer waiting
//! for the bus (the copies land when the step ends), with the same rows and files a copy made
//! at once gives, non-finite outputs found in report order, a failed copy reported, and a
//! synchronous copy whenever the budget or a `stop` policy needs the values now.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use dump_core::DType;
use dump_host::{DumpOptions, Dumper, Error, TensorRef};
use dump_stats::device::{DeviceError, DeviceStatistics, DeviceTensor, PendingCopy, StatsRequest};
use serde_json::{Value, json};

/// Opened by the test once every kernel call of a step has returned: a deferred copy lands
/// only then, so a producer that waited for one inside a kernel call would never return.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn set(&self, v: bool) {
        *self.open.lock().unwrap() = v;
        self.cv.notify_all();
    }
    /// Waits (at most 20 s) for the gate; whether it opened.
    fn wait(&self) -> bool {
        let g = self.open.lock().unwrap();
        let (g, _) = self
            .cv
            .wait_timeout_while(g, Duration::from_secs(20), |o| !*o)
            .unwrap();
        *g
    }
}

/// What the fake GPU counts.
#[derive(Default)]
struct Counters {
    sync_copies: AtomicUsize,
    deferred: AtomicUsize,
    landed: AtomicUsize,
}

/// A GPU tensor whose memory is a host vector: copies either at once or deferred (landing
/// through the gate), and no statistics of its own (the Dumper computes them on the host).
struct Gpu {
    data: Vec<u8>,
    shape: [usize; 2],
    defer: bool,
    fail: bool,
    gate: Arc<Gate>,
    n: Arc<Counters>,
}

struct Landing {
    data: Vec<u8>,
    fail: bool,
    gate: Arc<Gate>,
    n: Arc<Counters>,
}

impl PendingCopy for Landing {
    fn len(&self) -> usize {
        self.data.len()
    }
    fn wait_into(self: Box<Self>, dst: &mut [u8]) -> Result<(), DeviceError> {
        if !self.gate.wait() {
            return Err("the copy was waited for before the step ended".into());
        }
        if self.fail {
            return Err("Xid 79: GPU has fallen off the bus".into());
        }
        dst.copy_from_slice(&self.data);
        self.n.landed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl DeviceTensor for Gpu {
    fn dtype(&self) -> DType {
        DType::Float32
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn statistics(&self, _: &StatsRequest<'_>) -> Result<Option<DeviceStatistics>, DeviceError> {
        Err("no device statistics".into())
    }
    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), DeviceError> {
        self.n.sync_copies.fetch_add(1, Ordering::Relaxed);
        dst.copy_from_slice(&self.data);
        Ok(())
    }
    fn copy_to_host_deferred(&self) -> Result<Option<Box<dyn PendingCopy>>, DeviceError> {
        if !self.defer {
            return Ok(None);
        }
        self.n.deferred.fetch_add(1, Ordering::Relaxed);
        // The bytes as they are now (a copy ordered after the producer).
        Ok(Some(Box::new(Landing {
            data: self.data.clone(),
            fail: self.fail,
            gate: Arc::clone(&self.gate),
            n: Arc::clone(&self.n),
        })))
    }
}

fn root(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-flightdev-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn open(root: &Path, opdump: Option<Value>) -> Dumper {
    let mut doc = json!({
        "common_dump_settings": {
            "dump_mode": 0, "path": root.display().to_string(), "net_name": "Net",
            "iteration": "all", "saved_data": "full", "input_output": 0, "kernels": [],
            "support_device": [0]
        },
        "e2e_dump_settings": {"enable": true}
    });
    if let Some(o) = opdump {
        doc["opdump"] = o;
    }
    let env: HashMap<String, String> = HashMap::new();
    Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(doc.to_string().into_bytes())
        .unwrap()
}

const KERNELS: [(&str, &str); 3] = [
    ("MatMul", "Default/net/fc1-Dense/MatMul-op0"),
    ("ReLU", "Default/net/relu-ReLU/ReLU-op1"),
    ("Add", "Default/net/fc2-Dense/Add-op2"),
];

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Step `i` of a three-kernel net: each kernel's input is a host tensor, its output a GPU
/// tensor, except the last kernel's output (host). `nan_at`: that kernel's output and every
/// later one's hold a NaN. The gate opens after every kernel call returned, then the step
/// finishes.
fn run_step(
    d: &mut Dumper,
    i: u64,
    nan_at: Option<usize>,
    (defer, fail): (bool, bool),
    n: &Arc<Counters>,
) -> Result<(), Error> {
    let gate = Arc::new(Gate::default());
    let step = d.begin_step();
    let mut first = Ok(());
    for (k, (ty, name)) in KERNELS.iter().enumerate() {
        let x: Vec<f32> = (0..64)
            .map(|j| (i * 1000 + k as u64 * 100 + j) as f32)
            .collect();
        let mut y: Vec<f32> = x.iter().map(|v| v * 0.5).collect();
        if nan_at.is_some_and(|at| k >= at) {
            y[7] = f32::NAN;
        }
        let kernel = step.kernel(ty, name).unwrap();
        kernel.input(0, TensorRef::from_slice(&[8, 8], &x))?;
        let r = if k + 1 < KERNELS.len() {
            let gpu = Gpu {
                data: f32_bytes(&y),
                shape: [8, 8],
                defer,
                fail,
                gate: Arc::clone(&gate),
                n: Arc::clone(n),
            };
            kernel.output(0, TensorRef::device(&gpu))
        } else {
            kernel.output(0, TensorRef::from_slice(&[8, 8], &y))
        };
        if let Err(e) = r {
            first = first.and(Err(e));
            break;
        }
    }
    gate.set(true);
    let finished = step.finish();
    first.and(finished)
}

/// `statistic.csv` without its timestamp column, and the `.npy` files by name without the
/// timestamp field.
fn contents(dir: &Path) -> (Vec<String>, Vec<(String, Vec<u8>)>) {
    let csv = std::fs::read_to_string(dir.join("statistic.csv")).unwrap();
    let rows = csv
        .lines()
        .map(|l| {
            let mut c: Vec<&str> = l.split(',').collect();
            if c.len() > 4 {
                c.remove(4); // Timestamp
            }
            c.join(",")
        })
        .collect();
    let mut npy: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".npy"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let f: Vec<&str> = name.split('.').collect();
            // {type}.{name}.{task}.{stream}.{timestamp}.{io}.{slot}.{format}.{dtype}.npy
            let key = [&f[..4], &f[5..]].concat().join(".");
            (key, std::fs::read(e.path()).unwrap())
        })
        .collect();
    npy.sort();
    (rows, npy)
}

fn trigger(root: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root.join("rank_0/trigger.json")).unwrap())
        .unwrap()
}

#[test]
fn device_tensors_are_held_without_waiting_and_written_like_a_copy_made_at_once() {
    let recorder = Some(json!({"flight_recorder": {"steps": 2}}));
    let deferred = Arc::new(Counters::default());
    let at_once = Arc::new(Counters::default());
    let (ra, rb) = (root("deferred"), root("atonce"));
    let mut a = open(&ra, recorder.clone());
    let mut b = open(&rb, recorder);
    for i in 0..5 {
        // NaN from ReLU (a GPU output, checked when its copy lands) at step 4; Add's host
        // output, checked at once, is NaN too and reported later.
        let nan = (i == 4).then_some(1);
        run_step(&mut a, i, nan, (true, false), &deferred).unwrap();
        run_step(&mut b, i, nan, (false, false), &at_once).unwrap();
    }
    a.close().unwrap();
    b.close().unwrap();
    assert_eq!(
        deferred.sync_copies.load(Ordering::Relaxed),
        0,
        "never copied at once"
    );
    assert_eq!(
        deferred.deferred.load(Ordering::Relaxed),
        10,
        "2 GPU outputs x 5 steps"
    );
    assert_eq!(deferred.landed.load(Ordering::Relaxed), 10);
    assert_eq!(at_once.sync_copies.load(Ordering::Relaxed), 10);
    for s in [2, 3, 4] {
        let dir = |r: &Path| r.join(format!("rank_0/Net/0/{s}"));
        let (rows_a, npy_a) = contents(&dir(&ra));
        let (rows_b, npy_b) = contents(&dir(&rb));
        assert_eq!(rows_a.len(), 1 + 6, "{rows_a:?}");
        assert_eq!(
            rows_a, rows_b,
            "step {s}: rows in the same order and values"
        );
        assert_eq!(npy_a.len(), 6);
        assert_eq!(npy_a, npy_b, "step {s}: the same files, byte for byte");
    }
    assert!(!ra.join("rank_0/Net/0/1").exists());
    let (ta, tb) = (trigger(&ra), trigger(&rb));
    for t in [&ta, &tb] {
        assert_eq!(t["trigger"]["kernel"], KERNELS[1].1, "{t}");
        assert_eq!(t["first_nonfinite"]["kernel"], KERNELS[1].1, "{t}");
        assert_eq!(t["tensor_files"], 18);
    }
    std::fs::remove_dir_all(&ra).unwrap();
    std::fs::remove_dir_all(&rb).unwrap();
}

#[test]
fn a_failed_device_copy_is_returned_by_the_step_naming_the_kernel() {
    let r = root("fail");
    let n = Arc::new(Counters::default());
    let mut d = open(&r, Some(json!({"flight_recorder": {"steps": 2}})));
    let e = run_step(&mut d, 0, None, (true, true), &n).unwrap_err();
    let Error::Tensor {
        kernel,
        io,
        message,
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!((kernel.as_str(), *io), (KERNELS[0].1, "output"));
    assert!(
        message.contains("device copy failed") && message.contains("Xid 79"),
        "{message}"
    );
    // The recorder goes on: the next step's copies land and a user trigger writes both steps,
    // the failed tensors (rows and files) missing from the first.
    run_step(&mut d, 1, None, (true, false), &n).unwrap();
    d.trigger("check");
    d.close().unwrap();
    let (rows0, npy0) = contents(&r.join("rank_0/Net/0/0"));
    let (rows1, npy1) = contents(&r.join("rank_0/Net/0/1"));
    assert_eq!((rows0.len(), npy0.len()), (1 + 4, 4), "{rows0:?}");
    assert_eq!((rows1.len(), npy1.len()), (1 + 6, 6), "{rows1:?}");
    assert_eq!(trigger(&r)["tensors_let_go"], 2);
    std::fs::remove_dir_all(&r).unwrap();
}

#[test]
fn the_budget_or_a_stop_policy_copies_at_once() {
    // A budget that cannot hold a GPU output: copied at once (its row computed, its bytes let
    // go), never queued.
    let r = root("budget");
    let n = Arc::new(Counters::default());
    let mut d = open(&r, Some(json!({"flight_recorder": {"budget_bytes": 100}})));
    run_step(&mut d, 0, None, (true, false), &n).unwrap();
    d.close().unwrap();
    assert_eq!(n.deferred.load(Ordering::Relaxed), 0);
    assert_eq!(n.sync_copies.load(Ordering::Relaxed), 2);
    // `stop` needs a watched output's values inside the kernel call: copied at once, and the
    // call returns the error.
    let r2 = root("stop");
    let n = Arc::new(Counters::default());
    let mut d = open(
        &r2,
        Some(json!({"flight_recorder": {"steps": 1}, "on_nonfinite": "stop"})),
    );
    let e = run_step(&mut d, 0, Some(0), (true, false), &n).unwrap_err();
    assert!(
        matches!(&e, Error::NonFinite(at) if at.kernel == KERNELS[0].1),
        "{e}"
    );
    assert_eq!(n.deferred.load(Ordering::Relaxed), 0);
    assert_eq!(n.sync_copies.load(Ordering::Relaxed), 1);
    d.close().unwrap();
    for r in [r, r2] {
        let _ = std::fs::remove_dir_all(&r);
    }
}
