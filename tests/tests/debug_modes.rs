//! op_debug_mode 3 (overflow), 4 (exception) and sample_mode through the Dumper.

use std::{collections::BTreeSet, fs, path::Path};

use dump_core::DType;
use dump_host::{DumpOptions, Dumper, TensorRef, config::Device};
use opdump_tests::{
    config::{config, f32_bytes, no_env},
    csv::parse_statistic_csv,
    fsutil::{TempDir, file_name, npy_files},
    reference::npy_key,
};
use serde_json::json;

/// Kernels of the overflow tests: (name, input values, output values, output dtype).
fn overflow_kernels() -> Vec<(&'static str, Vec<f32>, Vec<f32>, DType)> {
    vec![
        (
            "Default/Finite-op0",
            vec![1.0, 2.0],
            vec![3.0, 4.0],
            DType::Float32,
        ),
        (
            "Default/NaNOut-op0",
            vec![1.0, 2.0],
            vec![f32::NAN, 1.0],
            DType::Float32,
        ),
        (
            "Default/NaNIn-op0",
            vec![f32::NAN, 2.0],
            vec![0.0, 1.0],
            DType::Float32,
        ),
        (
            "Default/InfOut-op0",
            vec![1.0, 2.0],
            vec![f32::INFINITY, 1.0],
            DType::Float32,
        ),
        (
            "Default/HalfInf-op0",
            vec![1.0, 2.0],
            vec![f32::NEG_INFINITY, 1.0],
            DType::Float16,
        ),
        (
            "Default/IntOut-op0",
            vec![1.0, 2.0],
            vec![7.0, 8.0],
            DType::Int32,
        ),
    ]
}

fn encode(dtype: DType, v: &[f32]) -> Vec<u8> {
    match dtype {
        DType::Float32 => f32_bytes(v),
        DType::Float16 => v
            .iter()
            .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
            .collect(),
        DType::Int32 => v.iter().flat_map(|x| (*x as i32).to_le_bytes()).collect(),
        other => panic!("{other}"),
    }
}

/// Runs the overflow kernels for one step with `overflow_number`; returns the dumped kernel
/// names (from the files) and the files' keys.
fn run_overflow(tmp: &Path, overflow_number: u32) -> (Vec<String>, BTreeSet<String>) {
    let cfg = config(
        tmp,
        json!({"op_debug_mode": 3, "overflow_number": overflow_number}),
        json!({}),
    );
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)
        .unwrap();
    d.begin_graph(0, &[]).unwrap();
    let step = d.begin_step();
    for (name, input, output, dt) in overflow_kernels() {
        let Some(k) = step.kernel("Op", name) else {
            continue;
        };
        let (i, o) = (f32_bytes(&input), encode(dt, &output));
        k.input(0, TensorRef::host(DType::Float32, &[2], &i))
            .unwrap();
        k.output(0, TensorRef::host(dt, &[2], &o)).unwrap();
        k.finish().unwrap();
    }
    step.finish().unwrap();
    d.close().unwrap();
    let files = npy_files(&tmp.join("rank_0/Net/0/0"));
    let keys: BTreeSet<String> = files
        .iter()
        .filter_map(|p| npy_key(&file_name(p)))
        .collect();
    // Kernels in the order their files were written (timestamps increase).
    let mut by_ts: Vec<(u64, String)> = files
        .iter()
        .map(|p| {
            let f = file_name(p);
            let p = dump_host::layout::TensorFileName::parse(&f).unwrap();
            (p.id.timestamp, p.id.op_name.to_owned())
        })
        .collect();
    by_ts.sort();
    let mut kernels: Vec<String> = Vec::new();
    for (_, n) in by_ts {
        if kernels.last() != Some(&n) {
            kernels.push(n);
        }
    }
    (kernels, keys)
}

#[test]
fn overflow_mode_dumps_only_kernels_with_nan_or_inf_outputs() {
    let tmp = TempDir::new("overflow");
    let (kernels, keys) = run_overflow(tmp.path(), 0);
    assert_eq!(
        kernels,
        [
            "Default_NaNOut-op0",
            "Default_InfOut-op0",
            "Default_HalfInf-op0"
        ],
        "NaN in an input only, finite floats and integers are not overflow"
    );
    // Inputs and outputs of an overflowing kernel are both dumped.
    assert!(keys.contains("Op.Default_NaNOut-op0.input.0.DefaultFormat.Float32"));
    assert!(keys.contains("Op.Default_NaNOut-op0.output.0.DefaultFormat.Float32"));
    assert!(keys.contains("Op.Default_HalfInf-op0.output.0.DefaultFormat.Float16"));
    assert_eq!(keys.len(), 6);
}

#[test]
fn overflow_number_stops_after_that_many_kernels() {
    let tmp = TempDir::new("overflow2");
    let (kernels, keys) = run_overflow(tmp.path(), 2);
    assert_eq!(kernels, ["Default_NaNOut-op0", "Default_InfOut-op0"]);
    assert_eq!(keys.len(), 4);
}

#[test]
fn exception_mode_dumps_only_the_failed_kernels_inputs() {
    let tmp = TempDir::new("exception");
    let cfg = config(
        tmp.path(),
        json!({"op_debug_mode": 4, "iteration": "1"}),
        json!({}),
    );
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)
        .unwrap();
    d.begin_graph(0, &["Default/Add-op0", "Default/Div-op0"])
        .unwrap();
    let a = f32_bytes(&[1.0, 2.0, 3.0]);
    let b = f32_bytes(&[0.0, 0.0, 0.0]);
    for step_no in 0..2u64 {
        let step = d.begin_step();
        assert!(
            step.kernel("Add", "Default/Add-op0").is_none(),
            "exception mode dumps no ordinary kernel"
        );
        if step_no == 0 {
            // iteration says "1", but exception dump ignores it (MindSpore sets "all").
            step.kernel_failed(
                "Div",
                "Default/Div-op0",
                &[
                    TensorRef::host(DType::Float32, &[3], &a),
                    TensorRef::host(DType::Float32, &[3], &b),
                ],
            )
            .unwrap();
        }
        step.finish().unwrap();
    }
    d.close().unwrap();
    let net = tmp.path().join("rank_0/Net/0");
    let files = npy_files(&net);
    let keys: Vec<String> = files
        .iter()
        .filter_map(|p| npy_key(&file_name(p)))
        .collect();
    assert_eq!(
        keys,
        [
            "Div.Default_Div-op0.input.0.DefaultFormat.Float32",
            "Div.Default_Div-op0.input.1.DefaultFormat.Float32"
        ]
    );
    assert!(
        files
            .iter()
            .all(|p| p.parent() == Some(net.join("0").as_path()))
    );
    let b_file = files
        .iter()
        .find(|p| file_name(p).contains(".input.1."))
        .unwrap();
    assert_eq!(dump_npy::read_file(b_file).unwrap().data, b);
    assert!(
        !tmp.path()
            .join("rank_0/execution_order/ms_global_execution_order_graph_0.csv")
            .exists(),
        "no global execution order with op_debug_mode 4 (as in MindSpore)"
    );
}

#[test]
fn sample_mode_keeps_the_first_sample_num_elements() {
    let tmp = TempDir::new("sample");
    let cfg = config(
        tmp.path(),
        json!({"saved_data": "full", "statistic_category": ["max", "min", "count"]}),
        json!({"sample_mode": 1, "sample_num": 20}),
    );
    // Sampling is an Ascend feature (MindSpore turns it off elsewhere).
    let opts = DumpOptions {
        device: Device::Ascend,
        device_id: 0,
        ..DumpOptions::default()
    };
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(opts.clone())
        .open_json(cfg)
        .unwrap();
    d.begin_graph(0, &[]).unwrap();
    let big: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let small: Vec<f32> = (0..6).map(|i| -(i as f32)).collect();
    let step = d.begin_step();
    let k = step.kernel("MatMul", "Default/MatMul-op0").unwrap();
    k.input(
        0,
        TensorRef::host(DType::Float32, &[10, 10], &f32_bytes(&big)),
    )
    .unwrap();
    k.output(
        0,
        TensorRef::host(DType::Float32, &[2, 3], &f32_bytes(&small)),
    )
    .unwrap();
    drop(k);
    step.finish().unwrap();
    d.close().unwrap();
    let dir = tmp.path().join("rank_0/Net/0/0");
    let files = npy_files(&dir);
    assert_eq!(files.len(), 2);
    for p in &files {
        let f = file_name(p);
        assert!(
            f.ends_with(".DefaultFormat.float32.npy"),
            "device spelling: {f}"
        );
        let npy = dump_npy::read_file(p).unwrap();
        if f.contains(".input.0.") {
            assert_eq!(npy.shape, [20]);
            assert_eq!(npy.data, f32_bytes(&big[..20]));
        } else {
            assert_eq!(npy.shape, [2, 3], "a tensor within sample_num is whole");
            assert_eq!(npy.data, f32_bytes(&small));
        }
    }
    let csv = parse_statistic_csv(&fs::read_to_string(dir.join("statistic.csv")).unwrap());
    let row = csv
        .rows
        .iter()
        .find(|r| r[csv.col("IO")] == "input")
        .unwrap();
    assert_eq!(row[csv.col("Shape")], "(20)");
    assert_eq!(row[csv.col("Data Size")], "80");
    assert_eq!(row[csv.col("Max Value")], "19");
    assert_eq!(row[csv.col("Count")], "20");
}
