//! Checks shared by the ONNX runtime adapters' tests (included with `#[path]` from each
//! adapter's `tests/` and opdump's `run` tests): the fixtures of tests/fixtures/onnx (made by gen.py), a Dumper on a
//! temporary root, and the full-dump check every adapter must pass — execution order,
//! file and row counts, constants, every node output against onnx.reference's
//! intermediates (atol 1e-5), and numpy loading every file.
#![allow(dead_code)]

use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
};

use dump_core::DType;
use dump_host::{
    DumpOptions, Dumper,
    graph::Graph,
    layout::{TensorFileName, sanitize},
};

/// tests/fixtures/onnx of the workspace (found upwards from the crate using this file).
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|a| a.join("tests/fixtures/onnx"))
        .find(|p| p.is_dir())
        .expect("tests/fixtures/onnx above the crate")
}

/// The bytes of fixture model `name`.
pub fn model_bytes(name: &str) -> Vec<u8> {
    let p = fixtures().join(format!("{name}.onnx"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A temporary dump root, removed on drop.
pub struct Tmp(pub PathBuf);

impl Tmp {
    /// A fresh directory for test `tag`.
    pub fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!(
            "{}-{tag}-{}",
            env!("CARGO_PKG_NAME"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        Tmp(d)
    }

    /// `rank_0` under the root.
    pub fn rank(&self) -> PathBuf {
        self.0.join("rank_0")
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Dumper writing under `root` (net `Net`, every iteration and kernel) with the extra
/// `common_dump_settings` entries `common` (`, "saved_data": "full"`).
pub fn dumper(root: &Path, common: &str) -> Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "input_output": 0, "kernels": [], "support_device": [0]{common}}},
        "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    let env = HashMap::<String, String>::new();
    Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .open_json(text.into_bytes())
        .unwrap()
}

/// The inputs of fixture `model`: `(name, npy file)`.
pub fn inputs(model: &str) -> Vec<(String, dump_npy::NpyFile)> {
    let dir = fixtures().join(model).join("inputs");
    let mut v: Vec<(String, dump_npy::NpyFile)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let p = e.unwrap().path();
            let name = file_name(&p).trim_end_matches(".npy").to_owned();
            (name, dump_npy::read_file(&p).unwrap())
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The float32 input `x` of fixture `model`: its shape and values.
pub fn x_f32(model: &str) -> (Vec<usize>, Vec<f32>) {
    let p = fixtures().join(model).join("inputs/x.npy");
    let f = dump_npy::read_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(f.dtype, DType::Float32, "{}", p.display());
    let v = f
        .data
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (f.shape, v)
}

/// Asserts that a run returned the same output names as the plain run (a model's declared
/// outputs, whatever the step dumped).
pub fn assert_same_outputs<A, B>(got: &HashMap<String, A>, want: &HashMap<String, B>) {
    let mut got: Vec<&String> = got.keys().collect();
    let mut want: Vec<&String> = want.keys().collect();
    got.sort();
    want.sort();
    assert_eq!(
        got, want,
        "the model's declared outputs, whatever the step dumps"
    );
}

/// The values of an `.npy` file as f64 (f16/bf16/f32/f64 widened, int8/uint8 exact), NaN kept.
pub fn values(p: &Path) -> (Vec<usize>, Vec<f64>) {
    let f = dump_npy::read_file(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let v = match f.dtype {
        DType::Float32 => f
            .data
            .chunks(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        DType::Float64 => f
            .data
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        DType::Float16 => f
            .data
            .chunks(2)
            .map(|c| half::f16::from_le_bytes(c.try_into().unwrap()).to_f64())
            .collect(),
        DType::BFloat16 => f
            .data
            .chunks(2)
            .map(|c| half::bf16::from_le_bytes(c.try_into().unwrap()).to_f64())
            .collect(),
        DType::UInt8 => f.data.iter().map(|&b| f64::from(b)).collect(),
        DType::Int8 => f.data.iter().map(|&b| f64::from(b as i8)).collect(),
        other => panic!("{}: unexpected dtype {other}", p.display()),
    };
    (f.shape, v)
}

/// The `.npy` files directly in `dir`, sorted.
pub fn npy_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "npy"));
    v.sort();
    v
}

/// The file name of `p`.
pub fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// The one file in `dir` of kernel `kernel` (full name), `io` (`input`/`output`) and `slot`.
pub fn kernel_file(dir: &Path, kernel: &str, io: &str, slot: usize) -> PathBuf {
    let want = sanitize(kernel);
    let got: Vec<PathBuf> = npy_in(dir)
        .into_iter()
        .filter(|p| {
            let name = file_name(p);
            let f = TensorFileName::parse(&name).unwrap();
            f.id.op_name == want && f.id.io.as_str() == io && f.id.slot as usize == slot
        })
        .collect();
    assert_eq!(got.len(), 1, "{kernel} {io} {slot} in {}", dir.display());
    got[0].clone()
}

/// Asserts that `got` equals `want` element-wise within `atol` (NaN equal to NaN).
pub fn assert_close(what: &str, got: &Path, want: &Path, atol: f64) {
    let (gs, gv) = values(got);
    let (ws, wv) = values(want);
    assert_eq!(gs, ws, "{what}: shape");
    for (i, (a, b)) in gv.iter().zip(&wv).enumerate() {
        let same = (a.is_nan() && b.is_nan()) || (a - b).abs() <= atol || a == b;
        assert!(same, "{what}[{i}]: {a} vs {b}");
    }
}

/// numpy loads every file (skipped with the reason without python3/numpy, failing on CI).
pub fn python_numpy_loads(files: &[PathBuf]) {
    if !opdump_test_support::require(opdump_test_support::Prereq::Numpy) {
        return;
    }
    let script =
        "import sys, numpy\nfor p in sys.argv[1:]:\n    numpy.load(p)\nprint(len(sys.argv) - 1)";
    let o = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(files)
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "numpy could not load the dump: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        files.len().to_string()
    );
}

/// Whether `libonnxruntime` is available (`ORT_DYLIB_PATH`); otherwise the test skips with
/// the reason, or fails on CI.
pub fn onnx_runtime_available() -> bool {
    opdump_test_support::require(opdump_test_support::Prereq::OnnxRuntime)
}

/// The full-dump check: `steps` steps of fixture `model` dumped with `saved_data: full`
/// under `rank` by an adapter that described the model as `g`.
pub fn check_full_dump(model: &str, rank: &Path, g: &Graph, steps: usize) {
    // Execution order: the graph's, node by node; every step in the global order.
    let csv = std::fs::read_to_string(rank.join("execution_order/ms_execution_order_graph_0.csv"))
        .unwrap();
    let mut want = String::from("NodeExecutionOrder-FullNameWithScope\n");
    for n in g.execution_order() {
        want.push_str(n);
        want.push('\n');
    }
    assert_eq!(csv, want);
    let global: String = (0..steps).map(|s| format!("{s}\n")).collect();
    let got =
        std::fs::read_to_string(rank.join("execution_order/ms_global_execution_order_graph_0.csv"))
            .unwrap();
    assert_eq!(got, global);
    for ext in ["ir", "pb"] {
        let p = rank.join(format!("graphs/ms_output_trace_code_graph_0.{ext}"));
        assert!(p.is_file(), "{}", p.display());
    }

    // Counts: every kernel input and output, plus each graph input as a Parameter.
    let graph_inputs = g.parameters.iter().filter(|p| !p.is_weight).count();
    let per_step = g
        .nodes
        .iter()
        .map(|n| n.inputs.len() + n.outputs.len())
        .sum::<usize>()
        + graph_inputs;
    let mut all = Vec::new();
    for step in 0..steps {
        let dir = rank.join("Net/0").join(step.to_string());
        let files = npy_in(&dir);
        assert_eq!(files.len(), per_step, "step {step}: {files:?}");
        let rows = std::fs::read_to_string(dir.join("statistic.csv"))
            .unwrap()
            .lines()
            .count();
        assert_eq!(
            rows,
            per_step + 1,
            "step {step}: header + one row per tensor"
        );
        all.extend(files);
    }
    let consts = npy_in(&rank.join("Net/0/constants"));
    let weights = g.parameters.iter().filter(|p| p.is_weight).count();
    assert_eq!(consts.len(), weights, "{consts:?}");

    // Every node output that is an ONNX value with a reference equals it, every step.
    let mut checked = BTreeSet::new();
    for n in &g.nodes {
        for (slot, o) in n.outputs.iter().enumerate() {
            let want = fixtures()
                .join(model)
                .join(format!("expected/{}.npy", o.value));
            if !want.is_file() {
                continue;
            }
            for step in 0..steps {
                let dir = rank.join("Net/0").join(step.to_string());
                let got = kernel_file(&dir, &n.name, "output", slot);
                assert_close(&o.value, &got, &want, 1e-5);
            }
            checked.insert(o.value.clone());
        }
    }
    let expected: BTreeSet<String> = std::fs::read_dir(fixtures().join(model).join("expected"))
        .unwrap()
        .map(|e| {
            file_name(&e.unwrap().path())
                .trim_end_matches(".npy")
                .to_owned()
        })
        .collect();
    assert_eq!(checked, expected, "every ONNX value was dumped and checked");

    all.extend(consts);
    python_numpy_loads(&all);
}

/// The sanitised kernel names dumped in `dir` (one per kernel, sorted).
pub fn kernels_in(dir: &Path) -> Vec<String> {
    let set: BTreeSet<String> = npy_in(dir)
        .iter()
        .map(|p| {
            TensorFileName::parse(&file_name(p))
                .unwrap()
                .id
                .op_name
                .to_owned()
        })
        .collect();
    set.into_iter().collect()
}

/// The NaN hunt: with `op_debug_mode: 3` only the `log1` kernel and those after it (whose
/// outputs carry its NaN) are dumped, and no constants.
pub fn check_nan_hunt(rank: &Path, g: &Graph) {
    let mut after_log: Vec<String> = g
        .nodes
        .iter()
        .skip_while(|n| !n.name.contains("log1"))
        .map(|n| sanitize(&n.name))
        .collect();
    assert!(!after_log.is_empty(), "no log1 kernel in {:?}", g.nodes);
    after_log.sort();
    assert_eq!(kernels_in(&rank.join("Net/0/0")), after_log);
    assert!(
        !rank.join("Net/0/constants").exists(),
        "no constants in an overflow dump"
    );
}

/// Splits one csv line on commas outside double quotes.
fn split_row(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().expect("non-empty").push(c),
        }
    }
    out
}

/// The rows of `{dir}/statistic.csv` by `(Op Name, IO, Slot)`, each as column -> field.
pub fn stat_rows(dir: &Path) -> HashMap<(String, String, String), HashMap<String, String>> {
    let text = std::fs::read_to_string(dir.join("statistic.csv"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut lines = text.lines();
    let header = split_row(lines.next().expect("header"));
    let mut out = HashMap::new();
    for l in lines {
        let row: HashMap<String, String> = header.iter().cloned().zip(split_row(l)).collect();
        let key = (
            row["Op Name"].clone(),
            row["IO"].clone(),
            row["Slot"].clone(),
        );
        assert!(out.insert(key, row).is_none(), "duplicate row {l}");
    }
    out
}

/// A Dumper under `root` with a flight recorder of `steps` steps that stops at the first
/// non-finite output (`opdump.on_nonfinite` "stop"), tensors only.
pub fn stopping_dumper(root: &Path, steps: u32) -> Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "input_output": 0, "kernels": [], "support_device": [0],
        "saved_data": "tensor"}},
        "e2e_dump_settings": {{"enable": true}},
        "opdump": {{"flight_recorder": {{"steps": {steps}}}, "on_nonfinite": "stop"}}}}"#,
        root.display()
    );
    let env = HashMap::<String, String>::new();
    Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .open_json(text.into_bytes())
        .unwrap()
}

/// `nan_source`'s input with every element above 10: Log stays finite.
pub fn finite_nan_source_input() -> (Vec<usize>, Vec<f32>) {
    (vec![2, 3], vec![12., 13., 14., 15., 16., 17.])
}

/// The checks of a stop at `nan_source`'s Log at step `step` with a recorder of 2 steps:
/// the error names the Log node's output 0 at that step; the recorder wrote exactly the two
/// steps before and that step; the stopped step holds no file of the nodes after Log; and
/// trigger.json names the kernel.
pub fn check_stop_at_log(rank: &Path, at: &dump_host::NonFiniteAt, step: u64) {
    assert!(at.kernel.contains("log1"), "{at}");
    assert_eq!((at.step, at.io, at.slot), (step, "output", 0), "{at}");
    assert!(at.nan > 0, "{at}");
    let mut steps: Vec<u64> = std::fs::read_dir(rank.join("Net/0"))
        .unwrap()
        .filter_map(|e| file_name(&e.unwrap().path()).parse().ok())
        .collect();
    steps.sort();
    assert_eq!(steps, [step - 2, step - 1, step]);
    let last: Vec<String> = npy_in(&rank.join(format!("Net/0/{step}")))
        .iter()
        .map(|p| file_name(p))
        .collect();
    assert!(last.iter().any(|n| n.contains("log1")), "{last:?}");
    assert!(
        !last
            .iter()
            .any(|n| n.contains("mul1") || n.contains("add1")),
        "{last:?}"
    );
    let t = std::fs::read_to_string(rank.join("trigger.json")).unwrap();
    assert!(t.contains(&format!("\"kernel\": \"{}\"", at.kernel)), "{t}");
    assert!(t.contains("\"kind\": \"nonfinite\""), "{t}");
}

/// The exception dump of `gather_oob` (x -> Add (doubled) -> Gather at index 7 of 4, which
/// fails -> Mul) under `rank`: the failed Gather's two inputs only, input 0 computed again by
/// the graph cut before it (Add doubled 0, 1, 2, 3), input 1 the index 7; no diagnostics.
pub fn check_gather_oob_exception(rank: &Path, error: &str, diagnostics: &[String]) {
    let files = npy_in(&rank.join("Net/0/0"));
    let names: Vec<String> = files.iter().map(|p| file_name(p)).collect();
    assert_eq!(
        names.len(),
        2,
        "the failed node's two inputs only: {names:?}; {error}; {diagnostics:?}"
    );
    assert!(
        names[0].starts_with("Gather.")
            && names[0].contains("gather1")
            && names[0].contains(".input.0."),
        "{names:?}"
    );
    assert!(names[1].contains(".input.1."), "{names:?}");
    let doubled = dump_npy::read_file(&files[0]).unwrap();
    let want: Vec<u8> = [0f32, 2.0, 4.0, 6.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(doubled.data, want);
    assert_eq!(
        dump_npy::read_file(&files[1]).unwrap().data,
        7i64.to_le_bytes()
    );
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
}

/// A statistic Dumper under `root` with `dump_mode`, `kernels` (a JSON list) and `iteration`.
pub fn filtered_dumper(root: &Path, dump_mode: u32, kernels: &str, iteration: &str) -> Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": {dump_mode}, "path": "{}", "net_name": "Net",
        "iteration": "{iteration}", "saved_data": "statistic", "input_output": 0,
        "kernels": {kernels}, "support_device": [0]}},
        "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    let env = HashMap::<String, String>::new();
    Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(text.into_bytes())
        .unwrap()
}

/// The step directories of graph 0 under the dump root `root` (`rank_0/Net/0/{n}`), sorted.
pub fn dumped_steps(root: &Path) -> Vec<u64> {
    let mut steps: Vec<u64> = std::fs::read_dir(root.join("rank_0/Net/0"))
        .map(|r| {
            r.filter_map(|e| file_name(&e.unwrap().path()).parse().ok())
                .collect()
        })
        .unwrap_or_default();
    steps.sort();
    steps
}

/// The `statistic.csv` rows of step `step` under the dump root `root` (header left out).
pub fn rows_of_step(root: &Path, step: u64) -> Vec<String> {
    let p = root.join(format!("rank_0/Net/0/{step}/statistic.csv"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    text.lines().skip(1).map(str::to_owned).collect()
}

/// Issue 28 item 2: steps that dump nothing take the adapter's fast path, and that path
/// neither dumps what it should not nor skips what it should. `step` runs one step of
/// fixture `cnn` through one adapter (the same adapter for every call, as a program keeps
/// one) on the Dumper given. Under `root`:
/// - a statistic dump of every kernel gives the rows of a full step;
/// - `iteration` `0|2` over 4 steps: steps 0 and 2 in full, nothing of 1 and 3;
/// - a `kernels` filter that rejects everything: no step directory at all;
/// - a `kernels` filter selecting only the graph input `x`: its Parameter row, every step;
/// - a disabled Dumper, then an enabled one on the same adapter (enabled mid-run): the
///   enabled Dumper's steps in full;
/// - `stop` then `start` on one Dumper: the stopped step dumps nothing, the next in full.
pub fn check_quiet_steps(root: &Path, step: &mut dyn FnMut(&mut Dumper)) {
    let rows_per_step = {
        let at = root.join("all");
        let mut d = dumper(&at, r#", "saved_data": "statistic""#);
        step(&mut d);
        let g = d.graph(0).expect("the adapter described its graph").clone();
        d.close().unwrap();
        let n = g
            .nodes
            .iter()
            .map(|n| n.inputs.len() + n.outputs.len())
            .sum::<usize>()
            + g.parameters.iter().filter(|p| !p.is_weight).count();
        assert_eq!(rows_of_step(&at, 0).len(), n, "a full statistic step");
        n
    };

    let at = root.join("iteration");
    let mut d = filtered_dumper(&at, 0, "[]", "0|2");
    for _ in 0..4 {
        step(&mut d);
    }
    d.close().unwrap();
    assert_eq!(dumped_steps(&at), [0, 2], "iteration 0|2");
    for s in [0, 2] {
        assert_eq!(rows_of_step(&at, s).len(), rows_per_step, "step {s}");
    }

    let at = root.join("rejects-all");
    let mut d = filtered_dumper(&at, 1, r#"["no-such-kernel"]"#, "all");
    for _ in 0..2 {
        step(&mut d);
    }
    let report = d.close().unwrap();
    assert_eq!((report.rows, report.files), (0, 0), "{report:?}");
    assert!(dumped_steps(&at).is_empty(), "{:?}", dumped_steps(&at));
    assert_eq!(report.unused_kernels, ["no-such-kernel"]);

    let at = root.join("input-only");
    let mut d = filtered_dumper(&at, 1, r#"["name-regex(x)"]"#, "all");
    for _ in 0..2 {
        step(&mut d);
    }
    d.close().unwrap();
    assert_eq!(dumped_steps(&at), [0, 1]);
    for s in [0, 1] {
        let rows = rows_of_step(&at, s);
        assert_eq!(rows.len(), 1, "step {s}: {rows:?}");
        assert!(rows[0].starts_with("Parameter,x,"), "{rows:?}");
    }

    let mut off = Dumper::disabled();
    step(&mut off);
    step(&mut off);
    let at = root.join("enabled-mid-run");
    let mut d = filtered_dumper(&at, 0, "[]", "all");
    step(&mut d);
    step(&mut d);
    d.close().unwrap();
    assert_eq!(dumped_steps(&at), [0, 1]);
    for s in [0, 1] {
        assert_eq!(rows_of_step(&at, s).len(), rows_per_step, "step {s}");
    }

    let at = root.join("stop-start");
    let mut d = filtered_dumper(&at, 0, "[]", "all");
    d.stop();
    step(&mut d);
    d.start();
    step(&mut d);
    d.close().unwrap();
    assert_eq!(dumped_steps(&at), [1], "the stopped step 0 dumps nothing");
    assert_eq!(rows_of_step(&at, 1).len(), rows_per_step);
}
