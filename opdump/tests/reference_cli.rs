//! `opdump compare` of a Rust run's dump against plain reference arrays (an `.npz`, a
//! directory of `NAME.npy`), run as a subprocess: tensors pair by the ONNX value name the run's
//! `graphs/*.ir` gives (the `value` rule). Fixtures: tests/fixtures/reference_arrays (made by
//! its make.py with numpy).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/reference_arrays")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-refcli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn opdump(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .output()
        .expect("run opdump")
}

fn npy_f32(v: &[f32]) -> Vec<u8> {
    let mut b = vec![0u8; 128];
    let n = dump_npy::encode_header("<f4", &[v.len()], &mut b).unwrap();
    b.truncate(n);
    b.extend(v.iter().flat_map(|x| x.to_le_bytes()));
    b
}

/// A Rust run's dump in MindSpore's layout under `root`: graph 0's `ir` (the adapters'
/// graphs/*.ir) and iteration 0's `.npy` files of f32 values.
fn write_run(root: &Path, ir: &str, files: &[(&str, &[f32])]) {
    let g = root.join("rank_0/graphs");
    std::fs::create_dir_all(&g).unwrap();
    std::fs::write(g.join("ms_output_trace_code_graph_0.ir"), ir).unwrap();
    let it = root.join("rank_0/Net/0/0");
    std::fs::create_dir_all(&it).unwrap();
    for (name, v) in files {
        std::fs::write(it.join(name), npy_f32(v)).unwrap();
    }
}

/// A Rust run's dump: a Relu defining value `r` and an Add defining `s`, with the Add's output
/// `add_out`.
fn rust_run(root: &Path, add_out: &[f32]) -> PathBuf {
    write_run(
        root,
        "  %0(r) = Relu(%para1_x)\n      # Fullname with scope: (Default/relu-Relu-op0)\n  %1(s) = Add(%0, %para2_w)\n      # Fullname with scope: (Default/add-Add-op1)\n",
        &[
            (
                "Relu.Default_relu-Relu-op0.0.0.10.output.0.DefaultFormat.float32.npy",
                &[1.0f32, 2.0][..],
            ),
            (
                "Add.Default_add-Add-op1.0.0.20.output.0.DefaultFormat.float32.npy",
                add_out,
            ),
        ],
    );
    root.to_path_buf()
}

/// `opdump compare A B --json`: its exit code is `code` (stderr shown otherwise); the report.
fn compare_json(a: &Path, b: &Path, code: i32) -> serde_json::Value {
    let o = opdump(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    json(&o)
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[test]
fn a_rust_run_pairs_with_an_npz_and_an_npy_directory_by_value_name() {
    let tmp = tmpdir("pairs");
    let good = rust_run(&tmp.join("good"), &[3.0, 1.0]);
    let npz = fixtures().join("ref.npz");
    let dir = fixtures().join("ref_npy");
    let poly = fixtures().join("polygraphy.json");
    for reference in [&npz, &dir, &poly] {
        let j = compare_json(&good, reference, 0);
        let pairs = j["pairs"].as_array().unwrap();
        let rules: Vec<&str> = pairs.iter().map(|p| p["rule"].as_str().unwrap()).collect();
        assert_eq!(rules, ["value", "value"], "{reference:?}");
        let only_b = j["only_in_b"].as_array().map_or(0, Vec::len);
        assert_eq!(
            only_b,
            usize::from(reference == &npz),
            "the npz's third array has no node"
        );
    }
    // The Add's output off by 1%: exit 1, the Add named first, its reference named beside it.
    let bad = rust_run(&tmp.join("bad"), &[3.03, 1.0]);
    let j = compare_json(&bad, &npz, 1);
    assert_eq!(j["first_divergent"]["op_name"], "Default_add-Add-op1");
    assert_eq!(j["first_divergent"]["b_op_name"], "s");
    assert_eq!(j["first_divergent"]["rule"], "value");
}

#[test]
fn inspect_reads_reference_arrays_including_slashed_onnx_names() {
    let npz = fixtures().join("ref.npz");
    let o = opdump(&["inspect", npz.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("(npz layout): 3 tensors, 3 kernels"), "{out}");
    let o = opdump(&["inspect", fixtures().join("ref_npy").to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("(npy-dir layout): 2 tensors, 2 kernels"),
        "{out}"
    );
    // A compressed archive: each member a warning saying what to do instead.
    let c = fixtures().join("compressed.npz");
    let o = opdump(&["inspect", c.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("zip entry \"r.npy\" is compressed")
            && err.contains("numpy.savez_compressed does not"),
        "{err}"
    );
    // Not a zip at all: an error naming the file.
    let tmp = tmpdir("bad");
    let not_npz = tmp.join("x.npz");
    std::fs::write(&not_npz, b"not a zip").unwrap();
    let o = opdump(&["inspect", not_npz.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0));
    assert!(err.contains("not a .npz file (a zip archive)"), "{err}");
}

/// A Rust run's kernel with three outputs (an ONNX Split, as ONNX Runtime's dump holds it: one
/// kernel, the further outputs' value names on `# Output value k` rows) pairs each output with
/// the reference array of its value, not only the first; a change in the second is named.
#[test]
fn every_output_of_a_multi_output_kernel_pairs_with_its_reference_array() {
    let tmp = tmpdir("multi");
    let run = |root: &Path, second: &[f32]| {
        write_run(
            root,
            "  %0(s0) = Split(%para1_x)\n      # Fullname with scope: (Default/split/Split-op0)\n      # In file onnx node #0 \"split\" (Split)\n      # Output value 1: s1\n      # Output value 2: s2\n  %1(c) = Concat(%0[2], %0[0])\n      # Fullname with scope: (Default/concat/Concat-op0)\n",
            &[
                (
                    "Split.Default_split_Split-op0.0.0.10.input.0.DefaultFormat.float32.npy",
                    &[1.0f32, 2.0, 3.0][..],
                ),
                (
                    "Split.Default_split_Split-op0.0.0.10.output.0.DefaultFormat.float32.npy",
                    &[1.0][..],
                ),
                (
                    "Split.Default_split_Split-op0.0.0.10.output.1.DefaultFormat.float32.npy",
                    second,
                ),
                (
                    "Split.Default_split_Split-op0.0.0.10.output.2.DefaultFormat.float32.npy",
                    &[3.0][..],
                ),
                (
                    "Concat.Default_concat_Concat-op0.0.0.20.output.0.DefaultFormat.float32.npy",
                    &[3.0, 1.0][..],
                ),
            ],
        );
    };
    let reference = tmp.join("ref");
    std::fs::create_dir_all(&reference).unwrap();
    for (name, v) in [
        ("s0", &[1.0f32][..]),
        ("s1", &[2.0][..]),
        ("s2", &[3.0][..]),
        ("c", &[3.0, 1.0][..]),
    ] {
        std::fs::write(reference.join(format!("{name}.npy")), npy_f32(v)).unwrap();
    }
    run(&tmp.join("good"), &[2.0]);
    let j = compare_json(&tmp.join("good"), &reference, 0);
    let pairs: Vec<(String, u64, String)> = j["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["a"]["op_type"].as_str().unwrap().to_owned(),
                p["a"]["slot"].as_u64().unwrap(),
                p["b"]["op_name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want = [
        ("Split", 0, "s0"),
        ("Split", 1, "s1"),
        ("Split", 2, "s2"),
        ("Concat", 0, "c"),
    ]
    .map(|(t, s, v)| (t.to_owned(), s, v.to_owned()));
    assert_eq!(pairs, want);
    assert!(
        j["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["rule"] == "value")
    );
    assert_eq!(j["only_in_b"].as_array().map_or(0, Vec::len), 0);
    // The second output off: exit 1, that output named first, beside its own array.
    run(&tmp.join("bad"), &[2.5]);
    let j = compare_json(&tmp.join("bad"), &reference, 1);
    assert_eq!(j["first_divergent"]["op_name"], "Default_split_Split-op0");
    assert_eq!(j["first_divergent"]["slot"], 1);
    assert_eq!(j["first_divergent"]["b_op_name"], "s1");
}
