//! msprobe's `dump.json` trees read as a dialect: every shared msprobe 26.2.0 case, the
//! mapping of calls to records, Python's NaN tokens, construct.json and stack.json, and
//! hostile trees (problems named, never a panic).

use std::path::{Path, PathBuf};

use dump_core::DType;
use dump_read::{
    Dump,
    compare::{Divergence, Tolerances, compare},
    dialect::op_type_of,
};
use dump_stats::Io;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/msprobe")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-msp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn every_shared_msprobe_case_is_read() {
    for (case, steps, tensors, crc) in [
        ("torch_statistics", 2, 118, false),
        ("torch_md5", 2, 118, true),
        ("torch_tensor", 1, 59, false),
        ("mindspore_cpu_statistics", 1, 0, false),
    ] {
        let d = Dump::open(&fixtures().join(case)).unwrap();
        assert_eq!(d.dialect, "msprobe", "{case}");
        assert!(d.problems.is_empty(), "{case}: {:?}", d.problems);
        assert_eq!(d.tensors.len(), tensors, "{case}");
        let iters: std::collections::BTreeSet<u64> =
            d.tensors.iter().map(|t| t.iteration).collect();
        if tensors > 0 {
            assert_eq!(iters.len(), steps, "{case}");
        }
        for t in &d.tensors {
            let s = t.row_stats.as_ref().unwrap();
            assert_eq!(s.count, Some(t.elems().unwrap() as u64));
            assert!(
                s.max.is_some() && s.min.is_some(),
                "{case} {}",
                t.id.op_name
            );
            assert_eq!(s.crc32.is_some(), crc, "{case} {}", t.id.op_name);
        }
    }
    // Also found from the step directory and from the rank directory.
    let step = fixtures().join("torch_statistics/step1");
    assert_eq!(Dump::open(&step).unwrap().tensors.len(), 59);
    let d = Dump::open(&step.join("proc8348")).unwrap();
    assert_eq!(d.tensors.len(), 59);
    assert!(d.tensors.iter().all(|t| t.iteration == 1));
}

#[test]
fn calls_become_kernels_with_msprobes_names_slots_and_run_order() {
    let d = Dump::open(&fixtures().join("torch_tensor")).unwrap();
    let conv: Vec<_> = d
        .tensors
        .iter()
        .filter(|t| t.id.op_name == "Functional.conv2d.0.forward")
        .collect();
    assert_eq!(conv.len(), 3);
    assert!(conv.iter().all(|t| t.id.op_type == "conv2d"));
    let w = conv
        .iter()
        .find(|t| t.id.io == Io::Input && t.id.slot == 1)
        .unwrap();
    assert_eq!(
        (w.dtype, w.shape.clone()),
        (DType::Float32, vec![4, 1, 3, 3])
    );
    assert_eq!(w.row_stats.as_ref().unwrap().max, Some(0.31100738048553467));
    assert!(
        w.file()
            .unwrap()
            .ends_with("Functional.conv2d.0.forward.input.1.pt")
    );
    let out = conv.iter().find(|t| t.id.io == Io::Output).unwrap();
    assert_eq!(out.shape, vec![2, 4, 6, 6]);
    // Kernels in dump.json order: conv2d, relu, max_pool2d, linear, ...
    let k = d.kernels();
    let names: Vec<&str> = k.iter().take(4).map(|k| k.op_name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Functional.conv2d.0.forward",
            "Functional.relu.0.forward",
            "Functional.max_pool2d.0.forward",
            "Functional.linear.0.forward"
        ]
    );
    let bf16 = d
        .tensors
        .iter()
        .find(|t| t.id.op_name == "Tensor.__mul__.1.forward" && t.id.io == Io::Output)
        .unwrap();
    assert_eq!(bf16.dtype, DType::BFloat16);
    assert_eq!(
        op_type_of("Module.layer2.0.conv1.Conv2d.forward.0"),
        Some("Conv2d")
    );
    // msprobe 26.2.0 numbers the entry (`tools/msprobe_train.py`); opdump wrote it bare before.
    for name in [
        "Module.fc.Linear.parameters_grad.0",
        "Module.fc.Linear.parameters_grad",
        "Module.layer1.0.conv1.Linear.parameters_grad.12",
        "Module.Linear.parameters_grad.0",
    ] {
        assert_eq!(op_type_of(name), Some("Linear"), "{name}");
    }
    for name in [
        "Module.parameters_grad.0",
        "Module..parameters_grad",
        "Module.fc.Linear.parameters_grad.x",
    ] {
        assert_eq!(op_type_of(name), None, "{name}");
    }
    assert_eq!(op_type_of("Tensor.__iadd__.0.forward"), Some("__iadd__"));
    assert_eq!(op_type_of("nonsense"), None);
}

fn write_tree(root: &Path, dump_json: &str, construct: &str) -> PathBuf {
    let dir = root.join("step3/rank1");
    std::fs::create_dir_all(dir.join("dump_tensor_data")).unwrap();
    std::fs::write(dir.join("dump.json"), dump_json).unwrap();
    std::fs::write(dir.join("construct.json"), construct).unwrap();
    std::fs::write(
        dir.join("stack.json"),
        r#"{"0": [["Module.fc.Linear.forward.0"], ["File net.py, line 3, in forward, \n x = self.fc(x)"]]}"#,
    )
    .unwrap();
    dir
}

const T: &str = r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2]"#;

#[test]
fn pythons_nan_tokens_module_hierarchy_and_stacks_are_read() {
    let root = tmp("nan");
    let json = format!(
        r#"{{"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": null, "data": {{
  "Module.fc.Linear.forward.0": {{"input_args": [{T}, "Max": NaN, "Min": -Infinity, "Mean": NaN, "Norm": Infinity, "requires_grad": false}}],
     "input_kwargs": {{}}, "output": [{T}, "Max": 1.0, "Min": 0.5, "Mean": 0.75, "Norm": 1.1, "requires_grad": true}}],
     "parameters": {{"weight": {T}, "Max": 2.0, "Min": 1.0, "Mean": 1.5, "Norm": 2.2, "requires_grad": true}}}}}},
  "Functional.linear.0.forward": {{"input_args": [{T}, "Max": "NaN text stays text", "Min": 0.0, "Mean": 0.0, "Norm": 0.0}}, null, [{T}, "Max": 3.0, "Min": 3.0, "Mean": 3.0, "Norm": 4.2}}]],
     "input_kwargs": {{"bias": {T}, "Max": 0.1, "Min": 0.1, "Mean": 0.1, "Norm": 0.14}}}}, "output": [{T}, "Max": 9.0, "Min": 9.0, "Mean": 9.0, "Norm": 12.7, "md5": "0a1B2c3d"}}]}}
}}}}"#
    );
    write_tree(
        &root,
        &json,
        r#"{"Module.fc.Linear.forward.0": null, "Functional.linear.0.forward": ["Module.fc.Linear.forward.0", 0]}"#,
    );
    let d = Dump::open(&root).unwrap();
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let fc: Vec<_> = d
        .tensors
        .iter()
        .filter(|t| t.id.op_type == "Linear")
        .collect();
    assert_eq!(fc.len(), 3, "input, parameter weight, output");
    assert!(fc.iter().all(|t| (t.rank, t.iteration) == (1, 3)));
    let x = fc
        .iter()
        .find(|t| t.id.io == Io::Input && t.id.slot == 0)
        .unwrap();
    let s = x.row_stats.as_ref().unwrap();
    assert!(s.max.unwrap().is_nan() && s.avg.unwrap().is_nan());
    assert_eq!(
        (s.min, s.l2norm),
        (Some(f64::NEG_INFINITY), Some(f64::INFINITY))
    );
    assert_eq!(s.nonfinite(), Some(true));
    let weight = fc
        .iter()
        .find(|t| t.id.io == Io::Input && t.id.slot == 1)
        .unwrap();
    assert_eq!(weight.row_stats.as_ref().unwrap().max, Some(2.0));
    // Slots depth-first over every leaf: x 0, None 1, [w] 2, bias (kwarg) 3.
    let lin: Vec<_> = d
        .tensors
        .iter()
        .filter(|t| t.id.op_type == "linear")
        .collect();
    let slots: Vec<(Io, u32)> = lin.iter().map(|t| (t.id.io, t.id.slot)).collect();
    assert_eq!(
        slots,
        [
            (Io::Input, 0),
            (Io::Input, 2),
            (Io::Input, 3),
            (Io::Output, 0)
        ]
    );
    assert_eq!(
        lin[0].row_stats.as_ref().unwrap().max,
        None,
        "a string is no statistic"
    );
    assert_eq!(
        lin[3].row_stats.as_ref().unwrap().crc32.as_deref(),
        Some("0a1b2c3d")
    );
    // Timestamps follow dump.json's order.
    assert!(
        d.tensors
            .windows(2)
            .all(|w| w[0].id.timestamp < w[1].id.timestamp)
    );
    assert_eq!(d.modules.len(), 2);
    assert_eq!(
        d.modules[1].parent.as_deref(),
        Some("Module.fc.Linear.forward.0")
    );
    assert_eq!(d.modules[0].parent, None);
    assert_eq!(d.stacks.len(), 1);
    assert_eq!(
        d.stacks[0].0,
        (1, 3, "Module.fc.Linear.forward.0".to_owned())
    );
}

#[test]
fn hostile_dump_json_gives_problems_naming_the_file_never_a_panic() {
    for (what, json, words) in [
        ("not JSON", "{\"data\": ", "not valid JSON"),
        ("no data", "{\"task\": \"tensor\"}", "no \"data\" object"),
        (
            "a dtype opdump does not read",
            r#"{"data": {"Functional.x.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "torch.float8_e8m0fnu", "shape": [1]}]}}}"#,
            "dtype \"torch.float8_e8m0fnu\" is not one opdump reads",
        ),
        (
            "a negative dimension",
            r#"{"data": {"Functional.x.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [-1]}]}}}"#,
            "shape [-1] is not a list of non-negative integers",
        ),
        (
            "a data_name leaving the directory",
            r#"{"data": {"Functional.x.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1], "data_name": "../../etc/passwd"}]}}}"#,
            "is not a file name",
        ),
        (
            "a call that is not an object",
            r#"{"data": {"Functional.x.0.forward": 5}}"#,
            "not an object",
        ),
        (
            "arguments nested 100 deep",
            &format!(
                r#"{{"data": {{"Functional.x.0.forward": {{"input_args": {}1{}}}}}}}"#,
                "[".repeat(100),
                "]".repeat(100)
            ),
            "nest more than 64 deep",
        ),
        (
            "a name that is not msprobe's",
            r#"{"data": {"weird": {"output": []}}}"#,
            "not an msprobe call name",
        ),
    ] {
        let root = tmp("hostile");
        let dir = write_tree(&root, json, "{}");
        let d = Dump::open(&root).unwrap_or_else(|e| panic!("{what}: {e}"));
        let p = d
            .problems
            .iter()
            .find(|p| p.message.contains(words))
            .unwrap_or_else(|| panic!("{what}: {:?}", d.problems));
        assert_eq!(p.path, dir.join("dump.json"), "{what}");
    }
}

/// A `.pt` file dump.json lists but that is gone: a problem naming it, and the tensor still
/// compares by its statistics.
#[test]
fn a_missing_pt_is_a_problem_and_its_statistics_still_compare() {
    let root = tmp("missing");
    let a = root.join("a");
    copy_dir(&fixtures().join("torch_tensor"), &a);
    let gone = a.join("step0/proc8377/dump_tensor_data/Functional.relu.0.forward.output.0.pt");
    std::fs::remove_file(&gone).unwrap();
    let d = Dump::open(&a).unwrap();
    assert_eq!(d.problems.len(), 1);
    assert_eq!(d.problems[0].path, gone);
    assert!(
        d.problems[0].message.contains("listed in dump.json"),
        "{:?}",
        d.problems
    );
    let b = Dump::open(&fixtures().join("torch_tensor")).unwrap();
    let c = compare(&d, &b, &Tolerances::default(), 1, &|_, _| {});
    assert_eq!(c.pairs.len(), 59);
    assert_eq!(c.first_divergent, None);
    let relu = c
        .pairs
        .iter()
        .find(|p| d.tensors[p.a].file().is_none())
        .unwrap();
    assert!(matches!(
        relu.outcome,
        dump_read::compare::PairOutcome::Statistics { .. }
    ));
}

/// md5 mode: a CRC-32 that differs where the statistics agree is a divergence.
#[test]
fn a_changed_crc32_diverges_as_a_digest() {
    let root = tmp("crc");
    let a = root.join("a");
    copy_dir(&fixtures().join("torch_md5"), &a);
    let p = a.join("step0/proc8360/dump.json");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(
        &p,
        text.replacen("\"md5\": \"9be84ef5\"", "\"md5\": \"00000000\"", 1),
    )
    .unwrap();
    let (da, db) = (
        Dump::open(&a).unwrap(),
        Dump::open(&fixtures().join("torch_md5")).unwrap(),
    );
    let c = compare(&da, &db, &Tolerances::default(), 1, &|_, _| {});
    let first = &c.pairs[c.first_divergent.unwrap()];
    let t = &da.tensors[first.a];
    assert_eq!(
        (t.id.op_name.as_str(), t.io_slot().as_str()),
        ("Functional.conv2d.0.forward", "input.1")
    );
    assert_eq!(
        first.reasons,
        [Divergence::Digests {
            a: "00000000".into(),
            b: "9be84ef5".into()
        }]
    );
}

/// xor mode: `0x%016x` checksums compared as digests; a 0-d tensor's value is its statistics.
#[test]
fn xor_checksums_and_0d_values_are_read() {
    let write = |root: &Path, xor: &str| {
        write_tree(
            root,
            &format!(
                r#"{{"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": null, "data": {{
  "Tensor.__mul__.0.forward": {{"input_args": [{T}, "requires_grad": false, "md5": "{xor}"}},
     {{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [], "md5": 1.5}}], "input_kwargs": {{}}, "output": []}}}}}}"#
            ),
            "{}",
        );
    };
    let (a, b) = (tmp("xor-a"), tmp("xor-b"));
    write(&a, "0x00000000DEADBEEF");
    write(&b, "0x00000000deadbeef");
    let (da, db) = (Dump::open(&a).unwrap(), Dump::open(&b).unwrap());
    assert!(da.problems.is_empty(), "{:?}", da.problems);
    let s = da.tensors[0].row_stats.as_ref().unwrap();
    assert_eq!(
        (s.xor64.as_deref(), s.crc32.as_deref()),
        (Some("0x00000000deadbeef"), None)
    );
    let z = da.tensors[1].row_stats.as_ref().unwrap();
    assert_eq!((z.max, z.min, z.avg), (Some(1.5), Some(1.5), Some(1.5)));
    let c = compare(&da, &db, &Tolerances::default(), 1, &|_, _| {});
    assert_eq!(c.first_divergent, None);
    write(&b, "0x00000000deadbeee");
    let db = Dump::open(&b).unwrap();
    let c = compare(&da, &db, &Tolerances::default(), 1, &|_, _| {});
    let first = &c.pairs[c.first_divergent.unwrap()];
    assert_eq!(da.tensors[first.a].io_slot(), "input.0");
    assert!(
        matches!(first.reasons[0], Divergence::Digests { .. }),
        "{:?}",
        first.reasons
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// torch's float8 dtypes (msprobe summarises them as float32 values): read with their own
/// dtype; an unknown float8 variant is still a named problem.
#[test]
fn float8_dtype_strings_are_read() {
    let root = tmp("fp8");
    let t = |d: &str| format!(r#"{{"type": "torch.Tensor", "dtype": "{d}", "shape": [2]"#);
    let json = format!(
        r#"{{"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": null, "data": {{
  "Functional.linear.0.forward": {{"input_args": [{}, "Max": 448.0, "Min": -2.0, "Mean": 223.0, "Norm": 448.1}}, {}, "Max": 57344.0, "Min": 1.0, "Mean": 2.0, "Norm": 3.0}}, {}, "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0}}, {}, "Max": 240.0, "Min": -1.0, "Mean": 0.5, "Norm": 1.0}}, {}, "Max": 2.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0}}],
     "input_kwargs": {{}}, "output": [{}, "Max": 1.0, "Min": 1.0, "Mean": 1.0, "Norm": 1.4}}]}}
}}}}"#,
        t("torch.float8_e4m3fn"),
        t("torch.float8_e5m2"),
        t("torch.float8_e8m0fnu"),
        t("torch.float8_e4m3fnuz"),
        t("torch.float8_e5m2fnuz"),
        t("torch.uint4"),
    );
    write_tree(&root, &json, r#"{"Functional.linear.0.forward": null}"#);
    let d = Dump::open(&root).unwrap();
    let dtypes: Vec<(Io, u32, DType)> = d
        .tensors
        .iter()
        .map(|t| (t.id.io, t.id.slot, t.dtype))
        .collect();
    assert_eq!(
        dtypes,
        [
            (Io::Input, 0, DType::Float8E4M3FN),
            (Io::Input, 1, DType::Float8E5M2),
            (Io::Input, 3, DType::Float8E4M3FNUZ),
            (Io::Input, 4, DType::Float8E5M2FNUZ),
            (Io::Output, 0, DType::UInt4),
        ]
    );
    assert_eq!(d.tensors[0].row_stats.as_ref().unwrap().max, Some(448.0));
    assert_eq!(d.tensors[2].row_stats.as_ref().unwrap().max, Some(240.0));
    assert_eq!(d.problems.len(), 1, "{:?}", d.problems);
    assert!(
        format!("{:?}", d.problems[0]).contains("float8_e8m0fnu"),
        "{:?}",
        d.problems
    );
}
