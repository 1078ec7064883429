//! `opdump inspect` and `opdump compare` on msprobe's dumps, run as a user runs them: the
//! binary as a subprocess on every shared msprobe 26.2.0 case (tests/fixtures/msprobe), on an
//! msprobe dump against itself, and against copies perturbed on purpose.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/msprobe")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-mspcli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn opdump(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .output()
        .expect("run opdump")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
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

#[test]
fn inspect_reads_every_shared_msprobe_case() {
    for (case, summary) in [
        ("torch_statistics", "118 tensors, 46 kernels"),
        ("torch_md5", "118 tensors, 46 kernels"),
        ("torch_tensor", "59 tensors, 23 kernels"),
        ("mindspore_cpu_statistics", "0 tensors, 0 kernels"),
    ] {
        let dir = fixtures().join(case);
        let o = opdump(&[Path::new("inspect"), &dir]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{case}: {out}\n{err}");
        assert!(out.contains("(msprobe layout)"), "{case}: {out}");
        assert!(out.contains(summary), "{case}: {out}");
        assert!(!err.contains("warning"), "{case}: {err}");
    }
    // The tensor task's .pt files are read: Tensor.__mul__.2's output is all zeros (the
    // statistics rows alone say only "constant 0").
    let o = opdump(&[Path::new("inspect"), &fixtures().join("torch_tensor")]);
    assert!(
        text(&o)
            .0
            .contains("Tensor.__mul__.2.forward output.0: all zeros")
    );
}

/// A real msprobe training dump (L0, forward and backward; `tools/msprobe_train.py`, an MLP
/// whose learning rate makes it diverge): `inspect` reads its `parameters_grad.0` entries
/// without a warning and prints each parameter's trend, all four exploding, and names the
/// first non-finite operator, a forward activation of step 3.
#[test]
fn inspect_gives_msprobe_parameter_gradients_their_trend() {
    let dir = fixtures().join("train_L0/dump");
    let o = opdump(&[Path::new("inspect"), &dir]);
    let (out, err) = text(&o);
    assert!(!err.contains("warning"), "{err}");
    assert!(out.contains("(4 of 4 flagged;"), "{out}");
    for p in ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"] {
        let row = out
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(p))
            .unwrap_or_else(|| panic!("no row for {p}: {out}"));
        assert!(row.contains("exploding"), "{row}");
    }
    assert!(
        out.contains("first non-finite operator: rank 0 iteration 3"),
        "{out}"
    );
}

#[test]
fn an_msprobe_dump_compared_with_itself_matches_everywhere() {
    for case in ["torch_statistics", "torch_md5", "torch_tensor"] {
        let dir = fixtures().join(case);
        let o = opdump(&[Path::new("compare"), &dir, &dir]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{case}: {out}\n{err}");
        assert!(
            out.contains("first divergent operator: none"),
            "{case}: {out}"
        );
        assert!(
            err.contains("(0 only in A, 0 only in B): all within tolerance"),
            "{case}: {err}"
        );
    }
}

/// One statistic of `Functional.linear.0.forward`'s output changed in a copy: compare exits 1
/// and names that call first; with its `.pt` file's bytes changed instead, the same.
#[test]
fn a_perturbed_copy_diverges_first_at_the_perturbed_api() {
    let tmp = tmpdir("perturbed");
    let stats = tmp.join("stats");
    copy_dir(&fixtures().join("torch_statistics"), &stats);
    let p = stats.join("step0/proc8348/dump.json");
    let json = std::fs::read_to_string(&p).unwrap();
    let at = json.find("\"Functional.linear.0.forward\"").unwrap();
    let out_at = at + json[at..].find("\"output\"").unwrap();
    let max_at = out_at + json[out_at..].find("\"Max\": ").unwrap() + "\"Max\": ".len();
    let end = max_at + json[max_at..].find(',').unwrap();
    std::fs::write(&p, format!("{}9.5{}", &json[..max_at], &json[end..])).unwrap();
    let o = opdump(&[
        Path::new("compare"),
        &stats,
        &fixtures().join("torch_statistics"),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("first divergent operator: rank 0 iteration 0 graph 0: linear Functional.linear.0.forward output.0"),
        "{out}"
    );
    assert!(out.contains("max differs: 9.5 vs"), "{out}");

    // The tensor task: one float of the .pt storage scaled, the statistics left as they were.
    let tensors = tmp.join("tensors");
    copy_dir(&fixtures().join("torch_tensor"), &tensors);
    let pt =
        tensors.join("step0/proc8377/dump_tensor_data/Functional.linear.0.forward.output.0.pt");
    let mut bytes = std::fs::read(&pt).unwrap();
    // The storage is the last-but-two entry's data: find the 40 bytes of 10 floats by value.
    let d = dump_read::TensorFile::open(&pt).unwrap();
    assert_eq!(d.data_len, 40);
    let data = bytes
        .windows(4)
        .position(|w| {
            let v = f32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            f64::from(v) == -0.14405977725982666
        })
        .expect("the min of the output lies in the storage");
    let v = f32::from_le_bytes(bytes[data..data + 4].try_into().unwrap()) * 1.01;
    bytes[data..data + 4].copy_from_slice(&v.to_le_bytes());
    std::fs::write(&pt, bytes).unwrap();
    let o = opdump(&[
        Path::new("compare"),
        &tensors,
        &fixtures().join("torch_tensor"),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("first divergent operator: rank 0 iteration 0 graph 0: linear Functional.linear.0.forward output.0"),
        "{out}"
    );
}

/// Statistics-only dumps whose shapes differ diverge, as tensor dumps do: the relu output
/// recorded as [4, 2, 6, 6] against [2, 4, 6, 6] has the same statistics (a transposed output
/// would too). Before, pairs compared by their statistics alone skipped the shape check and
/// were within tolerance. A view op's shape whose element count passes `usize` is a shape
/// divergence, not a panic (its element count once overflowed).
#[test]
fn statistics_only_pairs_whose_shapes_differ_diverge() {
    let tmp = tmpdir("shapes");
    let edit = |dir: &Path, f: &dyn Fn(&mut serde_json::Value)| {
        copy_dir(&fixtures().join("torch_statistics"), dir);
        let p = dir.join("step0/proc8348/dump.json");
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        f(&mut v["data"]);
        std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    };
    let a = tmp.join("a");
    edit(&a, &|d| {
        let shape = &mut d["Functional.relu.0.forward"]["output"][0]["shape"];
        assert_eq!(*shape, serde_json::json!([2, 4, 6, 6]));
        *shape = serde_json::json!([4, 2, 6, 6]);
    });
    let o = opdump(&[
        Path::new("compare"),
        &a,
        &fixtures().join("torch_statistics"),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("first divergent operator: rank 0 iteration 0 graph 0: relu Functional.relu.0.forward output.0"),
        "{out}"
    );
    assert!(
        out.contains("shapes differ: [4, 2, 6, 6] vs [2, 4, 6, 6]"),
        "{out}"
    );

    // A view op on both sides (relu's record under Tensor.view's name), A's output with a
    // shape past usize.
    let with_view = |huge: bool| {
        move |d: &mut serde_json::Value| {
            let mut view = d["Functional.relu.0.forward"].clone();
            if huge {
                view["output"][0]["shape"] = serde_json::json!([4294967296u64, 4294967296u64, 4]);
            }
            d["Tensor.view.0.forward"] = view;
        }
    };
    let (va, vb) = (tmp.join("va"), tmp.join("vb"));
    edit(&va, &with_view(true));
    edit(&vb, &with_view(false));
    let o = opdump(&[Path::new("compare"), &va, &vb]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        out.contains("view Tensor.view.0.forward output.0")
            && out.contains("shapes differ: [4294967296, 4294967296, 4] vs [2, 4, 6, 6]"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn a_missing_pt_file_is_a_warning_naming_it_and_its_statistics_compare() {
    let tmp = tmpdir("missing");
    let a = tmp.join("a");
    copy_dir(&fixtures().join("torch_tensor"), &a);
    let gone = a.join("step0/proc8377/dump_tensor_data/Functional.relu.0.forward.output.0.pt");
    std::fs::remove_file(&gone).unwrap();
    let o = opdump(&[Path::new("compare"), &a, &fixtures().join("torch_tensor")]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        err.contains(&format!("{}: listed in dump.json", gone.display())),
        "{err}"
    );
    assert!(
        err.contains("compared 59 pairs (0 only in A, 0 only in B): all within tolerance"),
        "{err}"
    );
}
