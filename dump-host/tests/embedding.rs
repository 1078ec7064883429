//! The API as a runtime embeds it (issue 12, design 6): a [`Step`] stored in the runtime's
//! struct, a thread-local or another thread; [`Kernel::finish`] returning the overflow-mode
//! write result; the builder; [`TensorRef::from_slice`]; events delivered to the options' sink
//! instead of printed.

use std::{
    cell::RefCell,
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use dump_host::{
    DumpOptions, Dumper, Step, TensorRef,
    diag::{EmptyReason, Event, EventSink},
};

fn root(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-embed-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A config dumping tensors of every kernel at `root`, with `common` merged into
/// `common_dump_settings`.
fn config(root: &Path, common: serde_json::Value) -> String {
    let mut c = serde_json::json!({
        "dump_mode": 0, "path": root.display().to_string(), "net_name": "Net",
        "iteration": "all", "saved_data": "tensor", "input_output": 0, "kernels": [],
        "support_device": [0]
    });
    for (k, v) in common.as_object().unwrap() {
        c[k] = v.clone();
    }
    serde_json::json!({"common_dump_settings": c, "e2e_dump_settings": {"enable": true}})
        .to_string()
}

fn no_env() -> HashMap<String, String> {
    HashMap::new()
}

/// A sink collecting events, and what it collected.
fn collecting() -> (EventSink, Arc<Mutex<Vec<Event>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    (
        EventSink::new(move |e| s.lock().unwrap().push(e.clone())),
        seen,
    )
}

fn open(root: &Path, common: serde_json::Value) -> Dumper {
    Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .events(EventSink::ignore())
        .open_json(config(root, common))
        .unwrap()
}

fn npy_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".npy"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn assert_send_sync_static<T: Send + Sync + 'static>() {}

/// A runtime that keeps the step of the running iteration in its own state.
struct Runtime {
    dumper: Dumper,
    step: Option<Step>,
}

impl Runtime {
    fn begin(&mut self) {
        self.step = Some(self.dumper.begin_step());
    }

    fn run_kernel(&self, name: &str, x: &[f32]) {
        let step = self.step.as_ref().unwrap();
        if let Some(k) = step.kernel("Add", name) {
            k.output(0, TensorRef::from_slice(&[x.len()], x)).unwrap();
        }
    }

    fn end(&mut self) {
        self.step.take().unwrap().finish().unwrap();
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Step>> = const { RefCell::new(None) };
}

#[test]
fn a_step_lives_in_a_struct_a_thread_local_and_another_thread() {
    assert_send_sync_static::<Step>();
    let r = root("hold");
    let mut rt = Runtime {
        dumper: open(&r, serde_json::json!({})),
        step: None,
    };
    rt.dumper.begin_graph(0, &[]).unwrap();

    // Step 0: held in the runtime's struct between calls.
    rt.begin();
    rt.run_kernel("Default/Add-op0", &[1.0, 2.0]);
    rt.end();

    // Step 1: held in a thread-local; kernels report through it from a free function.
    CURRENT.with(|c| *c.borrow_mut() = Some(rt.dumper.begin_step()));
    let report = |name: &str| {
        CURRENT.with(|c| {
            let c = c.borrow();
            let k = c.as_ref().unwrap().kernel("Mul", name).unwrap();
            k.output(0, TensorRef::from_slice(&[2], &[3i32, 4]))
                .unwrap();
        })
    };
    report("Default/Mul-op0");
    CURRENT.with(|c| c.borrow_mut().take().unwrap().finish().unwrap());

    // Step 2: handed to a worker thread, which reports and finishes it.
    let step = rt.dumper.begin_step();
    std::thread::spawn(move || {
        let k = step.kernel("Cast", "Default/Cast-op0").unwrap();
        k.output(0, TensorRef::from_slice(&[3], &[true, false, true]))
            .unwrap();
        drop(k);
        step.finish().unwrap();
    })
    .join()
    .unwrap();

    let report = rt.dumper.close().unwrap();
    assert_eq!(report.files, 3);
    let it = |n: u32| r.join(format!("rank_0/Net/0/{n}"));
    let names: Vec<Vec<String>> = (0..3).map(|n| npy_names(&it(n))).collect();
    assert!(names[0][0].starts_with("Add.Default_Add-op0."), "{names:?}");
    assert!(names[0][0].ends_with(".output.0.DefaultFormat.Float32.npy"));
    assert!(names[1][0].ends_with(".output.0.DefaultFormat.Int32.npy"));
    assert!(names[2][0].ends_with(".output.0.DefaultFormat.Bool.npy"));
    let bool_file = std::fs::read(it(2).join(&names[2][0])).unwrap();
    assert_eq!(&bool_file[bool_file.len() - 3..], &[1, 0, 1]);
    let _ = std::fs::remove_dir_all(&r);
}

#[test]
fn a_step_held_past_close_dumps_nothing() {
    let r = root("after-close");
    let mut d = open(&r, serde_json::json!({}));
    let step = d.begin_step();
    d.close().unwrap();
    assert!(
        step.kernel("Add", "Default/Add-op0").is_none(),
        "closed: not wanted"
    );
    step.parameter("w", TensorRef::from_slice(&[1], &[1.0f64]))
        .unwrap();
    step.finish().unwrap();
    assert!(npy_names(&r.join("rank_0/Net/0/0")).is_empty());
    let _ = std::fs::remove_dir_all(&r);
}

/// `Kernel::finish` used to return `()` and drop the result of the overflow-mode writes.
#[test]
fn kernel_finish_returns_the_overflow_write_result() {
    let r = root("overflow");
    let mut d = open(&r, serde_json::json!({"op_debug_mode": 3}));
    d.begin_graph(0, &[]).unwrap();
    let step = d.begin_step();
    let k = step.kernel("Add", "Default/Add-op0").unwrap();
    // Input 0 has more dimensions than an .npy header can hold: accepted when held (its bytes
    // match its shape), refused when its file is written at `finish`.
    let dims = vec![1usize; 400_000];
    k.input(0, TensorRef::from_slice(&dims, &[1.0f32])).unwrap();
    k.output(0, TensorRef::from_slice(&[2], &[f32::NAN, 1.0]))
        .unwrap();
    let e = k.finish().unwrap_err();
    assert!(
        matches!(e, dump_host::Error::Tensor { .. }),
        "the failed write of the held input is returned: {e}"
    );
    let ok = step.kernel("Mul", "Default/Mul-op0").unwrap();
    ok.output(0, TensorRef::from_slice(&[1], &[f32::INFINITY]))
        .unwrap();
    ok.finish().unwrap();
    step.finish().unwrap();
    d.close().unwrap();
    let files = npy_names(&r.join("rank_0/Net/0/0"));
    assert!(
        files
            .iter()
            .any(|f| f.starts_with("Add.") && f.contains(".output.0.")),
        "the overflowed output was still written: {files:?}"
    );
    assert!(files.iter().any(|f| f.starts_with("Mul.")), "{files:?}");
    let _ = std::fs::remove_dir_all(&r);
}

#[test]
fn the_builder_reads_a_config_file_env_and_options() {
    let r = root("builder");
    std::fs::create_dir_all(r.parent().unwrap()).unwrap();
    let cfg = r.with_extension("json");
    std::fs::write(
        &cfg,
        config(
            &r,
            serde_json::json!({"dump_mode": 1, "kernels": ["Default/Never-op0"]}),
        ),
    )
    .unwrap();
    let (sink, seen) = collecting();
    // The config named through the injected environment, as MindSpore reads it.
    let env: HashMap<String, String> = [(
        "MINDSPORE_DUMP_CONFIG".to_owned(),
        cfg.display().to_string(),
    )]
    .into();
    let mut d = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .events(sink.clone())
        .open_env()
        .unwrap();
    assert!(d.is_enabled());
    assert_eq!(d.plan().unwrap().root, r);
    d.begin_step().finish().unwrap();
    d.close().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.contains(&Event::UnusedKernel {
            entry: "Default/Never-op0".into()
        }),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|e| matches!(
            e,
            Event::NothingDumped(EmptyReason::KernelsMatchedNone { .. })
        )),
        "{seen:?}"
    );

    // config_file + an environment without MINDSPORE_DUMP_CONFIG: the file is used.
    let d = Dumper::builder()
        .env(&no_env())
        .events(EventSink::ignore())
        .open_file(&cfg)
        .unwrap();
    assert!(d.is_enabled());
    // No config anywhere: disabled.
    let d = Dumper::builder().env(&no_env()).open_env().unwrap();
    assert!(!d.is_enabled());
    // A bad option in the environment is the builder's error when no options are given.
    let bad: HashMap<String, String> =
        [("OPDUMP_WRITER_THREADS".to_owned(), "many".to_owned())].into();
    let e = Dumper::builder().env(&bad).open_file(&cfg).unwrap_err();
    assert!(e.to_string().contains("OPDUMP_WRITER_THREADS"), "{e}");
    let _ = std::fs::remove_file(&cfg);
    let _ = std::fs::remove_dir_all(&r);
}

#[test]
fn warnings_go_to_the_sink_not_stderr() {
    let r = root("events");
    let (sink, seen) = collecting();
    // Device 3 is not in support_device on GPU: dump disabled, with an event.
    let opts = DumpOptions {
        device: dump_host::config::Device::Gpu,
        device_id: 3,
        ..DumpOptions::default()
    };
    let d = Dumper::builder()
        .env(&no_env())
        .options(opts)
        .on_event(move |e| sink.emit(e))
        .open_json(config(&r, serde_json::json!({})))
        .unwrap();
    assert!(!d.is_enabled());
    assert!(
        seen.lock().unwrap().contains(&Event::DeviceNotSelected {
            device_id: 3,
            support_device: vec![0]
        }),
        "{:?}",
        seen.lock().unwrap()
    );

    // The disk budget: one event when reached, one summary at close.
    let (sink, seen) = collecting();
    let opts = DumpOptions {
        disk_budget_bytes: Some(0),
        ..DumpOptions::default()
    };
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(opts)
        .events(sink)
        .open_json(config(&r, serde_json::json!({})))
        .unwrap();
    let step = d.begin_step();
    for i in 0..3 {
        let name = format!("Default/Add-op{i}");
        let k = step.kernel("Add", &name).unwrap();
        k.output(0, TensorRef::from_slice(&[2], &[1.0f32, 2.0]))
            .unwrap();
    }
    step.finish().unwrap();
    d.close().unwrap();
    let seen = seen.lock().unwrap();
    let reached: Vec<_> = seen
        .iter()
        .filter(|e| matches!(e, Event::DiskBudgetReached { .. }))
        .collect();
    assert_eq!(reached.len(), 1, "{seen:?}");
    assert!(
        reached[0]
            .to_string()
            .starts_with("[opdump] disk budget of 0 bytes reached: Add.")
    );
    assert!(seen.contains(&Event::DiskBudgetSummary {
        skipped_files: 3,
        skipped_bytes: 3 * 136,
        written_bytes: 0
    }));
    let _ = std::fs::remove_dir_all(&r);
}

/// The child half of [`the_default_sink_survives_an_unwritable_stderr`]: a threaded Dumper
/// whose every write fails (the root is a regular file), warning through the default sink.
fn dump_into_a_file_with_the_default_sink(root: &Path) {
    // Every write fails: `rank_0` is a file (a root that is not a directory is refused at open).
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(root.join("rank_0"), b"not a directory").unwrap();
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default()) // events: the default stderr sink
        .open_json(config(root, serde_json::json!({})))
        .unwrap();
    let mut failed = 0;
    for _ in 0..3 {
        let step = d.begin_step();
        for i in 0..50 {
            let name = format!("Default/Add-op{i}");
            if let Some(k) = step.kernel("Add", &name) {
                k.output(0, TensorRef::from_slice(&[4], &[1.0f32; 4]))
                    .unwrap();
            }
        }
        failed += u64::from(step.finish().is_err());
    }
    failed += u64::from(d.close().is_err());
    assert!(failed > 0, "the failures were returned");
    let _ = std::fs::remove_dir_all(root);
    std::process::exit(0);
}

/// Issue 13, defect 1: the library's `eprintln!` panicked when stderr could not be written
/// (`/dev/full`, a pipe whose reader exited), in a writer thread that then never released its
/// budget, so `close` hung. The default sink ignores write errors: the run completes. Runs
/// itself as a child process (stderr is process-wide) under a time limit.
#[test]
fn the_default_sink_survives_an_unwritable_stderr() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    if let Ok(root) = std::env::var("OPDUMP_EMBED_CHILD_ROOT") {
        dump_into_a_file_with_the_default_sink(Path::new(&root));
    }
    for (what, closed_pipe) in [("/dev/full", false), ("a closed pipe", true)] {
        let root = root(if closed_pipe {
            "stderr-pipe"
        } else {
            "stderr-full"
        });
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "the_default_sink_survives_an_unwritable_stderr",
            "--nocapture",
        ])
        .env("OPDUMP_EMBED_CHILD_ROOT", &root)
        .stdout(Stdio::null());
        if closed_pipe {
            cmd.stderr(Stdio::piped());
        } else {
            cmd.stderr(std::fs::File::create("/dev/full").unwrap());
        }
        let mut child = cmd.spawn().unwrap();
        drop(child.stderr.take()); // no reader: writes get EPIPE
        let start = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if start.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("stderr = {what}: the dump hung");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "stderr = {what}: {status}");
        let _ = std::fs::remove_dir_all(&root);
    }
}

/// Issue 12, defect 1 at the library level: `opdump`'s old `main` held `stderr().lock()` for
/// the whole run while a writer thread reported a failed write with `eprintln!` (waiting for
/// that lock while holding the error log's mutex, which the main thread then needed). A host
/// program may hold the lock the same way: the default sink writes to descriptor 2 without
/// Rust's `Stderr` lock and outside every opdump lock, so the run completes. (Checked: with a
/// sink that writes through `std::io::stderr()` this test times out.)
#[test]
fn a_host_holding_the_stderr_lock_does_not_deadlock_the_dump() {
    // 1 MiB: directories fit, tensor files soon fail with ENOSPC on the writer threads. No
    // tmpfs here: skipped, or failed with CI=true.
    let Some(fs) = opdump_test_support::Tmpfs::mount(&root("stderr-lock"), "1m") else {
        return;
    };
    let r = fs.path().join("dump");
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let held = std::io::stderr().lock(); // held across every Dumper call below
        let mut d = Dumper::builder()
            .env(&no_env())
            .options(DumpOptions::default()) // 2 writer threads, the default stderr sink
            .open_json(config(&r, serde_json::json!({})))
            .unwrap();
        let x = vec![1.0f32; 64 << 10]; // 256 KiB: queued to the writer threads
        let mut failures = 0;
        for _ in 0..3 {
            let step = d.begin_step();
            for i in 0..8 {
                let name = format!("Default/Add-op{i}");
                if let Some(k) = step.kernel("Add", &name) {
                    k.output(0, TensorRef::from_slice(&[x.len()], &x)).unwrap();
                }
            }
            failures += u64::from(step.finish().is_err());
        }
        failures += u64::from(d.close().is_err());
        drop(held);
        let _ = done_tx.send(failures);
    });
    let failures = done_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the dump deadlocked with a host holding stderr's lock");
    assert!(failures > 0, "the failed writes (ENOSPC) were returned");
    let dir = fs.path().to_owned();
    drop(fs);
    let _ = std::fs::remove_dir(&dir);
}
