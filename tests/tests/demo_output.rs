//! The demo network (LeNet-5, f16 and bf16 branches) dumped with saved_data "full" and every
//! statistic category: numpy loads every file with the values the Dumper was given, and
//! statistic.csv is whole and pairs with the files. Also MindSpore's own Add example.

use std::{
    collections::{BTreeSet, HashMap},
    fs,
    process::Command,
};

use dump_core::{DType, hash};
use dump_host::{DumpOptions, Dumper, Step, TensorRef, layout::sanitize};
use opdump::demo::{LeNet, Tracer, View};
use opdump_test_support::{Prereq, require};
use opdump_tests::{
    config::{ALL_CATEGORIES, config, f32_bytes, no_env},
    csv::parse_statistic_csv,
    fsutil::{TempDir, file_name, npy_files},
};
use serde_json::json;

/// Forwards the network's kernels to a step and remembers every tensor's bytes as numpy will
/// load them (bf16 widened to f32), keyed by `(step, file-name key)`.
struct Recorder<'a> {
    step: &'a Step,
    seen: &'a mut HashMap<(u64, String), Vec<u8>>,
}

fn as_loaded(v: &View<'_>) -> Vec<u8> {
    if v.dtype == DType::BFloat16 {
        v.data
            .chunks_exact(2)
            .flat_map(|c| [0, 0, c[0], c[1]])
            .collect()
    } else {
        v.data.to_vec()
    }
}

impl Tracer for Recorder<'_> {
    fn wants(&mut self, op_type: &str, full_name: &str) -> bool {
        self.step.kernel(op_type, full_name).is_some()
    }
    fn kernel(
        &mut self,
        op_type: &str,
        full_name: &str,
        inputs: &[View<'_>],
        outputs: &[View<'_>],
    ) {
        let k = self.step.kernel(op_type, full_name).expect("wanted");
        for (io, list) in [("input", inputs), ("output", outputs)] {
            for (slot, v) in list.iter().enumerate() {
                let t = TensorRef::host(v.dtype, v.shape, v.data);
                if io == "input" {
                    k.input(slot as u32, t).unwrap();
                } else {
                    k.output(slot as u32, t).unwrap();
                }
                let key = format!("{op_type}.{}.{io}.{slot}", sanitize(full_name));
                self.seen.insert((self.step.iteration(), key), as_loaded(v));
            }
        }
    }
    fn parameter(&mut self, name: &str, v: View<'_>) {
        self.step
            .parameter(name, TensorRef::host(v.dtype, v.shape, v.data))
            .unwrap();
        let key = format!("Parameter.{}.output.0", sanitize(name));
        self.seen
            .insert((self.step.iteration(), key), as_loaded(&v));
    }
}

/// `{type}.{name}.{io}.{slot}` of a file name.
fn tensor_key(file: &str) -> String {
    let p = dump_host::layout::TensorFileName::parse(file).expect("MindSpore-style name");
    format!(
        "{}.{}.{}.{}",
        p.id.op_type,
        p.id.op_name,
        p.id.io.as_str(),
        p.id.slot
    )
}

#[test]
fn numpy_loads_every_demo_file_with_the_values_given_and_csv_pairs_with_files() {
    let tmp = TempDir::new("demo");
    let cfg = config(
        tmp.path(),
        json!({"net_name": "LeNet5", "saved_data": "full", "statistic_category": ALL_CATEGORIES}),
        json!({}),
    );
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)
        .unwrap();
    let mut net = LeNet::new(2);
    let order = net.execution_order();
    d.begin_graph(0, &order.iter().map(String::as_str).collect::<Vec<_>>())
        .unwrap();
    let mut seen = HashMap::new();
    for _ in 0..2 {
        let step = d.begin_step();
        let loss = net.step(&mut Recorder {
            step: &step,
            seen: &mut seen,
        });
        assert!(loss.is_finite());
        step.finish().unwrap();
    }
    let report = d.close().unwrap();
    let files = npy_files(tmp.path());
    assert_eq!(files.len() as u64, report.files);
    assert_eq!(files.len(), seen.len(), "one file per tensor reported");
    let dtypes: BTreeSet<String> = files
        .iter()
        .map(|p| file_name(p).rsplit('.').nth(1).unwrap().to_owned())
        .collect();
    for want in ["Float32", "Float16", "BFloat16"] {
        assert!(
            dtypes.contains(want),
            "the demo has {want} tensors: {dtypes:?}"
        );
    }

    // statistic.csv of each iteration dir.
    let titles: Vec<&str> = opdump::cli::stats::all_categories()
        .iter()
        .map(|c| c.title())
        .collect();
    for it in ["0", "1"] {
        let dir = tmp.path().join("rank_0/LeNet5/0").join(it);
        let csv = parse_statistic_csv(&fs::read_to_string(dir.join("statistic.csv")).unwrap());
        assert_eq!(&csv.header[10..], &titles[..], "one column per category");
        let in_dir = npy_files(&dir);
        assert_eq!(csv.rows.len(), in_dir.len(), "one row per npy in {it}");
        let from_files: BTreeSet<(String, String)> = in_dir
            .iter()
            .map(|p| {
                let f = file_name(p);
                let ts = f.split('.').nth(4).unwrap().to_owned();
                (tensor_key(&f), ts)
            })
            .collect();
        let (ty, name, io, slot, ts) = (
            csv.col("Op Type"),
            csv.col("Op Name"),
            csv.col("IO"),
            csv.col("Slot"),
            csv.col("Timestamp"),
        );
        let from_rows: BTreeSet<(String, String)> = csv
            .rows
            .iter()
            .map(|r| {
                (
                    format!("{}.{}.{}.{}", r[ty], r[name], r[io], r[slot]),
                    r[ts].clone(),
                )
            })
            .collect();
        assert_eq!(from_rows, from_files, "rows carry their npy's timestamp");
        // md5 column = md5 of the tensor the Dumper was given (bf16: of its 2-byte values).
        let md5 = csv.col("MD5");
        let dt = csv.col("Data Type");
        for r in &csv.rows {
            let key = format!("{}.{}.{}.{}", r[ty], r[name], r[io], r[slot]);
            let loaded = &seen[&(it.parse().unwrap(), key.clone())];
            let raw: Vec<u8> = if r[dt] == "bfloat16" {
                loaded.chunks_exact(4).flat_map(|c| [c[2], c[3]]).collect()
            } else {
                loaded.clone()
            };
            assert_eq!(r[md5], hash::hex(&hash::md5(&raw)).as_str(), "md5 of {key}");
        }
    }

    // numpy: one python process loads every file and prints dtype, shape and an md5 of the
    // loaded array's bytes.
    let script = r#"
import hashlib, os, sys
import numpy as np
for dp, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        if f.endswith('.npy'):
            a = np.load(os.path.join(dp, f))
            print(os.path.basename(dp), f, a.dtype.str, hashlib.md5(np.ascontiguousarray(a).tobytes()).hexdigest())
"#;
    if !require(Prereq::Numpy) {
        return;
    }
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(tmp.path())
        .output()
        .expect("run python3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "numpy failed: {stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), files.len(), "numpy loaded every file");
    for l in lines {
        let f: Vec<&str> = l.split(' ').collect();
        let [it, file, descr, md5] = f[..] else {
            panic!("{l}")
        };
        let it: u64 = it.parse().unwrap();
        let given = &seen[&(it, tensor_key(file))];
        assert_eq!(
            md5,
            hash::hex(&hash::md5(given)).as_str(),
            "values of {file}"
        );
        if file.ends_with(".BFloat16.npy") {
            assert_eq!(descr, "<f4", "bf16 widened for numpy");
        }
    }
}

#[test]
fn mindspore_add_example_rows() {
    let tmp = TempDir::new("add");
    let cfg = config(tmp.path(), json!({"saved_data": "full"}), json!({}));
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)
        .unwrap();
    d.begin_graph(0, &["Default/Add-op0"]).unwrap();
    let (x, y) = (
        f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        f32_bytes(&[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]),
    );
    let z = f32_bytes(&[8.0, 10.0, 12.0, 14.0, 16.0, 18.0]);
    let step = d.begin_step();
    let k = step.kernel("Add", "Default/Add-op0").unwrap();
    k.input(0, TensorRef::host(DType::Float32, &[2, 3], &x))
        .unwrap();
    k.input(1, TensorRef::host(DType::Float32, &[2, 3], &y))
        .unwrap();
    k.output(0, TensorRef::host(DType::Float32, &[2, 3], &z))
        .unwrap();
    drop(k);
    step.finish().unwrap();
    d.close().unwrap();
    let dir = tmp.path().join("rank_0/Net/0/0");
    let text = fs::read_to_string(dir.join("statistic.csv")).unwrap();
    let csv = parse_statistic_csv(&text);
    assert_eq!(
        text.lines().next().unwrap(),
        "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,L2Norm Value"
    );
    let got: Vec<(String, String, String, String, String)> = csv
        .rows
        .iter()
        .map(|r| {
            (
                format!("{}.{}", r[0], r[1]),
                format!("{}{}", r[5], r[6]),
                r[csv.col("Min Value")].clone(),
                r[csv.col("Max Value")].clone(),
                r[csv.col("L2Norm Value")].clone(),
            )
        })
        .collect();
    let want = [
        ("input0", "1", "6", "9.53939"),
        ("input1", "7", "12", "23.6432"),
        ("output0", "8", "18", "32.9242"),
    ];
    assert_eq!(got.len(), 3);
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.0, "Add.Default_Add-op0");
        assert_eq!((g.1.as_str(), g.2.as_str(), g.3.as_str(), g.4.as_str()), w);
    }
    for r in &csv.rows {
        assert_eq!(r[csv.col("Shape")], "(2,3)");
        assert_eq!(r[csv.col("Data Size")], "24");
        assert_eq!(r[csv.col("Data Type")], "float32");
    }
    let out = npy_files(&dir)
        .into_iter()
        .find(|p| file_name(p).contains(".output.0."))
        .unwrap();
    let npy = dump_npy::read_file(&out).unwrap();
    assert_eq!(
        (npy.shape.as_slice(), npy.data.as_slice()),
        (&[2usize, 3][..], &z[..])
    );
}
