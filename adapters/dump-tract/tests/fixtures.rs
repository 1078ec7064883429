//! dump-tract on the ONNX fixtures (tests/fixtures/onnx, made by gen.py): counts, execution
//! order, every node's tensor against onnx.reference's intermediates, numpy, the NaN hunt.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::{Path, PathBuf},
};

use dump_core::DType;
use dump_host::{
    DumpOptions, Dumper,
    layout::{TensorFileName, sanitize},
};

fn parse_file_name(name: &str) -> Option<TensorFileName<'_>> {
    TensorFileName::parse(name)
}
use dump_tract::{TractDump, tract_onnx::prelude::*};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/onnx")
}

struct Tmp(PathBuf);
impl Tmp {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("dump-tract-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Tmp(d)
    }
}
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dumper(root: &Path, common: &str) -> Dumper {
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

fn plan(model: &str) -> Arc<TypedSimplePlan> {
    tract_onnx::onnx()
        .model_for_path(fixtures().join(format!("{model}.onnx")))
        .unwrap()
        .into_typed()
        .unwrap()
        .into_runnable()
        .unwrap()
}

/// The f32 values of an `.npy` file (f16 widened), NaN kept.
fn values(p: &Path) -> (Vec<usize>, Vec<f32>) {
    let f = dump_npy::read_file(p).unwrap();
    let v = match f.dtype {
        DType::Float32 => f
            .data
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        DType::Float16 => f
            .data
            .chunks(2)
            .map(|c| half::f16::from_le_bytes(c.try_into().unwrap()).to_f32())
            .collect(),
        other => panic!("{}: unexpected dtype {other}", p.display()),
    };
    (f.shape, v)
}

fn input(model: &str) -> TVec<TValue> {
    let (shape, v) = values(&fixtures().join(format!("{model}/inputs/x.npy")));
    tvec!(Tensor::from_shape(&shape, &v).unwrap().into_tvalue())
}

fn npy_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "npy"));
    v.sort();
    v
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// Runs `model` for `steps` steps with `common` settings; returns the dump root's rank dir,
/// the adapter (graph, diagnostics) and the plan.
fn run(
    tmp: &Tmp,
    model: &str,
    common: &str,
    steps: usize,
) -> (PathBuf, TractDump, Arc<TypedSimplePlan>) {
    let plan = plan(model);
    let mut state = plan.spawn().unwrap();
    let mut d = dumper(&tmp.0, common);
    let mut td = TractDump::new(&plan, 0);
    for _ in 0..steps {
        td.run(&mut d, &mut state, input(model)).unwrap();
    }
    d.close().unwrap();
    (tmp.0.join("rank_0"), td, plan)
}

fn python_numpy_loads(files: &[PathBuf]) {
    let script =
        "import sys, numpy\nfor p in sys.argv[1:]:\n    numpy.load(p)\nprint(len(sys.argv) - 1)";
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(files)
        .output();
    match out {
        Ok(o) if o.status.success() => {
            assert_eq!(
                String::from_utf8_lossy(&o.stdout).trim(),
                files.len().to_string()
            );
        }
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named 'numpy'") => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "numpy is missing on CI"
            );
            eprintln!("skipping the numpy check: python3 has no numpy");
        }
        Ok(o) => panic!(
            "numpy could not load the dump: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "python3 missing on CI: {e}"
            );
            eprintln!("skipping the numpy check: no python3 ({e})");
        }
    }
}

#[test]
fn cnn_two_full_steps_match_plan_order_counts_reference_values_and_numpy() {
    let tmp = Tmp::new("cnn");
    let (rank, td, plan) = run(&tmp, "cnn", r#", "saved_data": "full""#, 2);
    let g = td.graph();
    assert!(td.diagnostics().is_empty(), "{:?}", td.diagnostics());

    // execution order: the plan's, node by node
    let csv = std::fs::read_to_string(rank.join("execution_order/ms_execution_order_graph_0.csv"))
        .unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "NodeExecutionOrder-FullNameWithScope");
    let model = plan.model();
    let plan_names: Vec<String> = plan
        .order_without_consts()
        .iter()
        .map(|&id| model.node(id))
        .filter(|n| !n.inputs.is_empty() || n.op().name() != "Source")
        .map(|n| format!("Default/{}/{}-op", n.name, n.op().name()))
        .collect();
    assert_eq!(lines.len() - 1, plan_names.len(), "{csv}");
    for (line, want) in lines[1..].iter().zip(&plan_names) {
        assert!(line.starts_with(want.as_str()), "{line} vs {want}");
    }
    assert_eq!(
        std::fs::read_to_string(rank.join("execution_order/ms_global_execution_order_graph_0.csv"))
            .unwrap(),
        "0\n1\n"
    );
    for ext in ["ir", "pb"] {
        assert!(
            rank.join(format!("graphs/ms_output_trace_code_graph_0.{ext}"))
                .is_file()
        );
    }

    // counts: per step every kernel's inputs and outputs plus the graph input, one row each
    let per_step: usize = g
        .nodes
        .iter()
        .map(|n| n.inputs.len() + n.outputs.len())
        .sum::<usize>()
        + 1;
    let mut all = Vec::new();
    for step in ["0", "1"] {
        let dir = rank.join("Net/0").join(step);
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
    assert!(
        weights >= 4,
        "conv and gemm weights and biases are constants: {weights}"
    );
    assert_eq!(consts.len(), weights, "{consts:?}");

    // every node output that is an ONNX value equals the reference intermediate
    let mut checked = BTreeSet::new();
    for n in &g.nodes {
        for (slot, o) in n.outputs.iter().enumerate() {
            let want = fixtures().join(format!("cnn/expected/{}.npy", o.value));
            if !want.is_file() {
                continue;
            }
            let (wshape, wv) = values(&want);
            for step in ["0", "1"] {
                let dir = rank.join("Net/0").join(step);
                let got: Vec<PathBuf> = npy_in(&dir)
                    .into_iter()
                    .filter(|p| {
                        let name = file_name(p);
                        let f = parse_file_name(&name).unwrap();
                        f.id.op_name == sanitize(&n.name)
                            && f.id.io.as_str() == "output"
                            && f.id.slot == slot as u32
                    })
                    .collect();
                assert_eq!(got.len(), 1, "{} output {slot} in step {step}", n.name);
                let (gshape, gv) = values(&got[0]);
                assert_eq!(gshape, wshape, "{}", o.value);
                for (a, b) in gv.iter().zip(&wv) {
                    assert!((a - b).abs() <= 1e-5, "{}: {a} vs {b}", o.value);
                }
            }
            checked.insert(o.value.clone());
        }
    }
    let expected: BTreeSet<String> = std::fs::read_dir(fixtures().join("cnn/expected"))
        .unwrap()
        .map(|e| {
            file_name(&e.unwrap().path())
                .trim_end_matches(".npy")
                .to_owned()
        })
        .collect();
    assert_eq!(
        checked, expected,
        "every ONNX value of the model was dumped and checked"
    );

    all.extend(consts);
    python_numpy_loads(&all);
}

#[test]
fn nan_hunt_dumps_the_log_kernel_and_what_follows_it_only() {
    let tmp = Tmp::new("nan");
    let (rank, td, _) = run(
        &tmp,
        "nan_source",
        r#", "saved_data": "tensor", "op_debug_mode": 3"#,
        1,
    );
    let mut kernels: BTreeMap<String, usize> = BTreeMap::new();
    for p in npy_in(&rank.join("Net/0/0")) {
        let name = file_name(&p);
        let f = parse_file_name(&name).unwrap();
        *kernels.entry(f.id.op_name.to_owned()).or_default() += 1;
    }
    let g = td.graph();
    let after_log: Vec<String> = g
        .nodes
        .iter()
        .skip_while(|n| !n.name.contains("log1"))
        .map(|n| sanitize(&n.name))
        .collect();
    assert!(!after_log.is_empty(), "no log1 kernel in {:?}", g.nodes);
    assert_eq!(kernels.keys().cloned().collect::<Vec<_>>(), {
        let mut v = after_log.clone();
        v.sort();
        v
    });
    assert!(
        !rank.join("Net/0/constants").exists(),
        "no constants in an overflow dump"
    );
}

#[test]
fn f16_cast_pair_dumps_float16_tensors_equal_to_the_reference() {
    let tmp = Tmp::new("f16");
    let (rank, td, _) = run(
        &tmp,
        "cast_f16",
        r#", "saved_data": "tensor", "input_output": 2"#,
        1,
    );
    let files = npy_in(&rank.join("Net/0/0"));
    let mut f16 = 0;
    for n in &td.graph().nodes {
        let o = &n.outputs[0];
        let got: Vec<&PathBuf> = files
            .iter()
            .filter(|p| parse_file_name(&file_name(p)).unwrap().id.op_name == sanitize(&n.name))
            .collect();
        assert_eq!(got.len(), 1, "{}", n.name);
        let f = parse_file_name(&file_name(got[0])).unwrap().dtype;
        f16 += usize::from(f == DType::Float16);
        let want = fixtures().join(format!("cast_f16/expected/{}.npy", o.value));
        if want.is_file() {
            assert_eq!(values(got[0]).1, values(&want).1, "{}", o.value);
        }
    }
    assert!(
        f16 >= 2,
        "the cast to f16 and the f16 add dump Float16 files"
    );
}

#[test]
fn run_dumped_is_one_call_per_step_and_plain_tract_when_disabled() {
    let tmp = Tmp::new("one-call");
    let plan = plan("cnn");
    let mut state = plan.spawn().unwrap();
    let plain = state.run(input("cnn")).unwrap();
    let mut d = dumper(&tmp.0, r#", "saved_data": "statistic""#);
    for _ in 0..2 {
        let out = dump_tract::run_dumped(&mut d, &mut state, input("cnn")).unwrap();
        assert_eq!(
            out[0].as_plain_ram().unwrap().as_bytes(),
            plain[0].as_plain_ram().unwrap().as_bytes()
        );
    }
    let g = d.graph(0).expect("the graph was described").clone();
    assert_eq!(g.nodes.len(), 7);
    d.close().unwrap();
    let rank = tmp.0.join("rank_0");
    for step in ["0", "1"] {
        let csv =
            std::fs::read_to_string(rank.join("Net/0").join(step).join("statistic.csv")).unwrap();
        let per_step: usize = g
            .nodes
            .iter()
            .map(|n| n.inputs.len() + n.outputs.len())
            .sum::<usize>()
            + 1;
        assert_eq!(csv.lines().count(), per_step + 1, "{csv}");
    }
    assert!(
        rank.join("graphs/ms_output_trace_code_graph_0.ir")
            .is_file()
    );

    let mut off = Dumper::disabled();
    let out = dump_tract::run_dumped(&mut off, &mut state, input("cnn")).unwrap();
    assert_eq!(
        out[0].as_plain_ram().unwrap().as_bytes(),
        plain[0].as_plain_ram().unwrap().as_bytes()
    );
    assert!(
        off.graph(0).is_none(),
        "a disabled Dumper is not even told about the graph"
    );
}

#[test]
fn two_plans_on_one_dumper_alternate_between_their_graphs() {
    let tmp = Tmp::new("two-graphs");
    let (cnn, add2) = (plan("cnn"), plan("add2"));
    let (mut s1, mut s2) = (cnn.spawn().unwrap(), add2.spawn().unwrap());
    let mut d = dumper(&tmp.0, r#", "saved_data": "statistic""#);
    let (mut t1, mut t2) = (TractDump::new(&cnn, 0), TractDump::new(&add2, 1));
    let ab = || {
        let v = |n: &str| values(&fixtures().join(format!("add2/inputs/{n}.npy")));
        let ((sa, a), (sb, b)) = (v("a"), v("b"));
        tvec!(
            Tensor::from_shape(&sa, &a).unwrap().into_tvalue(),
            Tensor::from_shape(&sb, &b).unwrap().into_tvalue()
        )
    };
    for _ in 0..2 {
        t1.run(&mut d, &mut s1, input("cnn")).unwrap();
        t2.run(&mut d, &mut s2, ab()).unwrap();
    }
    d.close().unwrap();
    let net = tmp.0.join("rank_0/Net");
    let dirs = |g: &str| {
        let mut v: Vec<String> = std::fs::read_dir(net.join(g))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(dirs("0"), ["0", "2"]);
    assert_eq!(dirs("1"), ["1", "3"]);
    let rows = std::fs::read_to_string(net.join("1/3/statistic.csv")).unwrap();
    assert_eq!(
        rows.lines().count(),
        1 + 3 + 3 + 2,
        "add1, mul1 and the two inputs: {rows}"
    );
    for g in ["0", "1"] {
        let ir = tmp
            .0
            .join(format!("rank_0/graphs/ms_output_trace_code_graph_{g}.ir"));
        assert!(ir.is_file());
    }
}

/// With the ONNX nodes, every kernel's source row names the node tract made it from: cnn's
/// Gemm is an `EinSum` helper (no ONNX output) and an `Add` (the Gemm's output), its Relu a
/// `Max` under another name; Conv stays itself. Without them the rows name tract's node only.
#[test]
fn source_rows_name_the_onnx_node_of_every_kernel() {
    let model = tract_onnx::onnx()
        .model_for_path(fixtures().join("cnn.onnx"))
        .unwrap();
    let onnx = dump_tract::OnnxNodes::of(&model);
    assert_eq!(onnx.len(), 6, "six ONNX nodes, no inputs or initializers");
    let plan = model.into_typed().unwrap().into_runnable().unwrap();
    let rows: Vec<(String, String)> = TractDump::with_onnx_nodes(&plan, 0, &onnx)
        .graph()
        .nodes
        .iter()
        .map(|n| (n.op_type.clone(), n.source.clone().unwrap()))
        .collect();
    let row = |op: &str| {
        rows.iter()
            .find(|(o, _)| o == op)
            .map(|(_, r)| r.as_str())
            .unwrap_or_else(|| panic!("{op}: {rows:?}"))
    };
    assert!(
        row("Conv").ends_with(r#" "conv1" (Conv); onnx node "conv1"; outputs 0->0"#),
        "{rows:?}"
    );
    assert!(
        row("EinSum").ends_with(r#" "fc1.ab" (EinSum); onnx node "fc1" decomposed; outputs none"#),
        "{rows:?}"
    );
    assert!(
        row("Add").ends_with(r#" "fc1" (Add); onnx node "fc1" decomposed; outputs 0->0"#),
        "{rows:?}"
    );
    assert!(
        row("Max").ends_with(r#" "relu1.low" (Max); onnx node "relu1" decomposed; outputs 0->0"#),
        "{rows:?}"
    );
    let plain = TractDump::new(&plan, 0);
    assert!(
        plain
            .graph()
            .nodes
            .iter()
            .all(|n| !n.source.as_deref().unwrap().contains("onnx node")),
        "no ONNX nodes given, none named"
    );
}

/// A Dumper with a flight recorder of `steps` steps that stops at the first non-finite
/// output (`opdump.on_nonfinite` "stop").
fn stopping_dumper(root: &Path, steps: u32) -> Dumper {
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

#[test]
fn stop_at_the_first_nan_returns_the_log_kernel_and_the_recorder_writes_the_steps_before() {
    let tmp = Tmp::new("stop");
    let plan = plan("nan_source");
    let mut state = plan.spawn().unwrap();
    let mut d = stopping_dumper(&tmp.0, 2);
    // Steps 0..3 are finite (every x above 10); step 3 gets the fixture's input: Log of a
    // negative number.
    let finite = tvec!(
        Tensor::from_shape(&[2, 3], &[12f32, 13., 14., 15., 16., 17.])
            .unwrap()
            .into_tvalue()
    );
    for _ in 0..3 {
        dump_tract::run_dumped(&mut d, &mut state, finite.clone()).unwrap();
    }
    assert!(!tmp.0.exists(), "nothing written before the NaN");
    let e = dump_tract::run_dumped(&mut d, &mut state, input("nan_source")).unwrap_err();
    let dump_tract::Error::Dump(dump_host::Error::NonFinite(at)) = &e else {
        panic!("expected a non-finite stop, got {e}")
    };
    assert!(at.kernel.contains("log1"), "{at}");
    assert_eq!((at.step, at.io, at.slot), (3, "output", 0));
    assert!(at.nan > 0, "{at}");
    d.close().unwrap();
    let rank = tmp.0.join("rank_0");
    let mut steps: Vec<String> = std::fs::read_dir(rank.join("Net/0"))
        .unwrap()
        .map(|e| file_name(&e.unwrap().path()))
        .filter(|n| n != "constants")
        .collect();
    steps.sort();
    assert_eq!(steps, ["1", "2", "3"]);
    // The stopped step ends at Log: nothing of the nodes after it.
    let last: Vec<String> = npy_in(&rank.join("Net/0/3"))
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

#[test]
fn save_kernel_args_writes_the_attributes_of_the_onnx_node_each_kernel_came_from() {
    use dump_tract::{
        TractRunner,
        dump_onnx::{HostTensor, LoadOptions, OnnxRuntime},
    };
    let tmp = Tmp::new("args");
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true, "save_kernel_args": true}}}}"#,
        tmp.0.display()
    );
    let env = HashMap::<String, String>::new();
    let mut d = Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .open_json(text.into_bytes())
        .unwrap();
    let mut r = TractRunner::load(&fixtures().join("cnn.onnx"), &LoadOptions::default()).unwrap();
    let (shape, v) = values(&fixtures().join("cnn/inputs/x.npy"));
    let declared = r.inputs();
    r.set_inputs(vec![HostTensor {
        name: declared[0].name.clone(),
        dtype: dump_core::DType::Float32,
        shape,
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }])
    .unwrap();
    r.step(&mut d).unwrap();
    d.close().unwrap();
    let dir = tmp.0.join("rank_0/Net/0/0");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let json = |prefix: &str| -> String {
        let f = names
            .iter()
            .find(|n| n.starts_with(prefix) && n.ends_with(".json"))
            .unwrap_or_else(|| panic!("no {prefix}*.json in {names:?}"));
        std::fs::read_to_string(dir.join(f)).unwrap()
    };
    // The Conv kernel carries conv1's attributes (MindSpore's format: sorted keys, values as
    // strings); both kernels tract made of the Gemm carry the Gemm's.
    let conv = json("Conv.");
    assert!(conv.contains("\"kernel_shape\": \"[3, 3]\""), "{conv}");
    let (einsum, add) = (json("EinSum."), json("Add."));
    assert_eq!(einsum, add, "one ONNX node, one set of arguments");
    assert!(einsum.contains("\"transB\""), "{einsum}");
    assert_eq!(json("Max."), "null", "Relu has no attributes");
}
