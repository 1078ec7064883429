//! `opdump inspect`, `opdump compare` and streaming `opdump stats`, run as a user runs them:
//! the binary as a subprocess on real MindSpore 2.10 dumps (shared/reference) and on trees
//! made hostile on purpose.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use serde_json::Value;

/// The MindSpore reference output (the trimmed copy in tests/fixtures, or
/// `$OPDUMP_REFERENCE_DIR`); `None` (printing why) when absent, a failure with `CI=true`.
fn reference() -> Option<PathBuf> {
    opdump_test_support::reference_dir()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-ic-{}-{name}", std::process::id()));
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

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Two 2-step demo dumps under `tmp` (default statistic columns, `extra` flags added): `clean`,
/// and `bad` with a NaN injected at step 1. Returns both directories and `bad`'s stdout.
fn demo_dumps(tmp: &Path, extra: &[&str]) -> (PathBuf, PathBuf, String) {
    let (clean, bad) = (tmp.join("clean"), tmp.join("bad"));
    let mut out = String::new();
    for (dir, inject) in [(&clean, None), (&bad, Some("1"))] {
        let mut args = vec![
            "demo",
            "--out",
            dir.to_str().unwrap(),
            "--steps",
            "2",
            "--batch",
            "2",
            "--no-baseline",
            "--categories",
            "default",
        ];
        args.extend_from_slice(extra);
        if let Some(s) = inject {
            args.extend(["--inject-nan", s]);
        }
        let o = opdump(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        out = String::from_utf8_lossy(&o.stdout).into_owned();
    }
    (clean, bad, out)
}

/// A writable copy of a reference case's dump (the originals are mode 0400).
fn copy_dump(reference: &Path, case: &str, to: &Path) -> PathBuf {
    let src = reference.join(case).join("files/dump");
    let st = Command::new("cp")
        .args(["-r", "--no-preserve=mode"])
        .arg(&src)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
    to.join("dump")
}

/// The `.npy` files of iteration `it` whose name starts with `prefix`.
fn find(dump: &Path, it: u32, prefix: &str) -> PathBuf {
    let dir = dump.join(format!("rank_0/TinyNet/0/{it}"));
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    v.sort();
    v.into_iter()
        .next()
        .unwrap_or_else(|| panic!("no {prefix}* in {}", dir.display()))
}

/// Rewrites the f32 data of `path` (MindSpore's 128-byte header) with `f`.
fn edit_f32(path: &Path, f: impl Fn(usize, f32) -> f32) {
    let mut b = std::fs::read(path).unwrap();
    for (i, c) in b[128..].chunks_exact_mut(4).enumerate() {
        let v = f(i, f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        c.copy_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}

#[test]
fn a_reference_dump_compared_with_itself_matches_everywhere() {
    let Some(r) = reference() else { return };
    let d = r.join("a_tensor_all_io0/files/dump");
    let d = d.to_str().unwrap();
    let o = opdump(&["compare", d, d, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json_of(&o);
    assert_eq!(j["matched"], 414, "every tensor of the 3 iterations pairs");
    assert_eq!(j["first_divergent"], Value::Null);
    assert_eq!(j["only_in_a"].as_array().unwrap().len(), 0);
    assert_eq!(j["only_in_b"].as_array().unwrap().len(), 0);
    for p in j["pairs"].as_array().unwrap() {
        assert_eq!(p["rule"], "name");
        assert_eq!(p["pairing"], "exact", "same name: {p}");
        assert_eq!(p["diverged"], false, "{p}");
        if p["outcome"]["kind"] == "elements" {
            assert_eq!(p["outcome"]["metrics"]["max_abs_error"], 0.0);
        }
    }
    // bf16 (`<E2`), 0-d and bool tensors were compared element-wise too.
    let kinds: Vec<&str> = j["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["outcome"]["kind"] == "elements")
        .map(|p| p["a"]["dtype"].as_str().unwrap())
        .collect();
    for dt in ["bfloat16", "float16", "bool", "int64", "float32"] {
        assert!(kinds.contains(&dt), "no {dt} pair compared: {kinds:?}");
    }
}

#[test]
fn cases_that_differ_by_config_leave_only_the_expected_tensors_unpaired() {
    let Some(r) = reference() else { return };
    // b: iteration 0|2, outputs only (a sample of its files is kept). Every one of its
    // tensors pairs by name with the full dump and is bit-identical (MindSpore's runs are).
    let a = r.join("a_tensor_all_io0/files/dump");
    let b = r.join("b_iter_0or2_outputs/files/dump");
    let o = opdump(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json_of(&o);
    assert_eq!(j["only_in_b"].as_array().unwrap().len(), 0);
    let pairs = j["pairs"].as_array().unwrap();
    assert!(pairs.len() >= 5);
    for p in pairs {
        assert_eq!(p["a"]["io"], "output");
        assert!(p["a"]["iteration"] == 0 || p["a"]["iteration"] == 2, "{p}");
    }
    // Every input and every iteration-1 tensor of A is unpaired.
    let only_a = j["only_in_a"].as_array().unwrap();
    assert_eq!(only_a.len(), 414 - pairs.len());
    let inputs = only_a.iter().filter(|t| t["io"] == "input").count();
    assert!(inputs > 100, "{inputs}");
}

#[test]
fn inspect_names_the_kernel_whose_output_got_a_nan() {
    let Some(r) = reference() else { return };
    let tmp = tmpdir("nan");
    let d = copy_dump(&r, "a_tensor_all_io0", &tmp);
    let o = opdump(&["inspect", d.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "clean dump: {}", stderr(&o));
    assert_eq!(json_of(&o)["first_nonfinite"], Value::Null);
    // A NaN in the ReLU output of iteration 1: later kernels' files still hold finite data,
    // so the ReLU is the kernel with finite inputs and a non-finite output.
    let f = find(
        &d,
        1,
        "ReLU.Default_network-WithLossCell__backbone-TinyNet_relu-ReLU_ReLU-op0.",
    );
    let f = if f.to_string_lossy().contains(".output.") {
        f
    } else {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let out: Vec<_> = std::fs::read_dir(f.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy();
                n.starts_with(name.split(".0.0.").next().unwrap()) && n.contains(".output.0.")
            })
            .collect();
        out[0].clone()
    };
    edit_f32(&f, |i, v| if i == 3 { f32::NAN } else { v });
    let html = tmp.join("inspect.html");
    let o = opdump(&[
        "inspect",
        d.to_str().unwrap(),
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j = json_of(&o);
    let first = &j["first_nonfinite"];
    assert_eq!(first["op_type"], "ReLU", "{first}");
    assert_eq!(
        first["op_name"],
        "Default_network-WithLossCell__backbone-TinyNet_relu-ReLU_ReLU-op0"
    );
    assert_eq!(
        (
            first["iteration"].clone(),
            first["io"].clone(),
            first["slot"].clone()
        ),
        (1.into(), "output".into(), 0.into())
    );
    assert_eq!(
        (first["rank"].clone(), first["graph"].clone()),
        (0.into(), 0.into())
    );
    assert_eq!(first["basis"], "finite_inputs");
    assert_eq!(first["stats"]["nan_count"], 1);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("First non-finite operator") && page.contains("<svg"));
    // The text report names it too.
    let o = opdump(&["inspect", d.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "ReLU Default_network-WithLossCell__backbone-TinyNet_relu-ReLU_ReLU-op0 output.0"
        ),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn compare_names_first_the_kernel_whose_output_was_scaled_by_1_001() {
    let Some(r) = reference() else { return };
    let tmp = tmpdir("scaled");
    let d = copy_dump(&r, "a_tensor_all_io0", &tmp);
    let orig = r.join("a_tensor_all_io0/files/dump");
    let f = find(
        &d,
        0,
        "MaxPool.Default_network-WithLossCell__backbone-TinyNet_pool-MaxPool2d_MaxPool-op0.",
    );
    let f = std::fs::read_dir(f.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("MaxPool.Default") && n.contains(".output.0.")
        })
        .unwrap();
    edit_f32(&f, |_, v| v * 1.001);
    let csv = tmp.join("pairs.csv");
    let html = tmp.join("compare.html");
    let o = opdump(&[
        "compare",
        d.to_str().unwrap(),
        orig.to_str().unwrap(),
        "--json",
        "--csv",
        csv.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j = json_of(&o);
    let first = &j["first_divergent"];
    assert_eq!(first["op_type"], "MaxPool", "{first}");
    assert_eq!(first["io"], "output");
    assert_eq!(first["iteration"], 0);
    let m = &first["metrics"];
    assert!(
        m["cosine"].as_f64().unwrap() > 0.999_999,
        "scaling keeps cosine 1: {m}"
    );
    assert!(m["not_close"].as_u64().unwrap() > 0);
    assert_eq!(j["diverged"], 1, "only the scaled file differs");
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("rank,iteration,graph,op_type,op_name,io,slot,")
    );
    assert_eq!(lines.clone().count(), 414);
    assert_eq!(lines.filter(|l| l.contains(",true,")).count(), 1);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("First divergent operator") && page.contains("MaxPool"));
    // The page links the highlighted row from the top and from the pair's plot points, whose
    // tooltips name it; the scaling shows on the log-scale relative error plot.
    let hl = page.find(r#"" class="hl">"#).expect("a highlighted row");
    let n = &page[page[..hl].rfind("row-").unwrap() + 4..hl];
    assert!(
        page.contains(&format!(r##"<a id="first" href="#row-{n}">"##)),
        "row {n}"
    );
    assert!(page.contains(&format!(r##"<a href="#row-{n}"><circle"##)));
    assert!(page.contains(&format!("<title>#{n} MaxPool Default_network")));
    let rel = format!("#{n} MaxPool");
    let at = page
        .find("max relative error per pair, kernel outputs (log scale")
        .unwrap();
    let point = &page[at..][page[at..].find(&rel).unwrap()..];
    let value: f64 = point
        [point.find("max rel error: ").unwrap() + 15..point.find("</title>").unwrap()]
        .parse()
        .unwrap();
    assert!((9e-4..1.1e-3).contains(&value), "{value}");
    // The default tolerance can be loosened: 1e-2 relative accepts the scaling.
    let o = opdump(&[
        "compare",
        d.to_str().unwrap(),
        orig.to_str().unwrap(),
        "--rtol",
        "1e-2",
        "--atol",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = opdump(&[
        "compare",
        d.to_str().unwrap(),
        orig.to_str().unwrap(),
        "--tol",
        "float99=1,1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown dtype \"float99\""),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// A rank directory holding `files` (name, bytes) in iteration 0.
fn tree(root: &Path, files: &[(&str, Vec<u8>)]) -> PathBuf {
    let it = root.join("rank_0/Net/0/0");
    std::fs::create_dir_all(&it).unwrap();
    for (n, b) in files {
        std::fs::write(it.join(n), b).unwrap();
    }
    root.to_path_buf()
}

fn npy_f32(v: &[f32]) -> Vec<u8> {
    let mut b = vec![0u8; 128];
    let n = dump_npy::encode_header("<f4", &[v.len()], &mut b).unwrap();
    b.truncate(n);
    b.extend(v.iter().flat_map(|x| x.to_le_bytes()));
    b
}

/// A statistic.csv row whose shape has more elements than `usize` counts (dims 2^32 · 2^32 ·
/// 4): inspect and compare go on without a panic, and the other rows still count. Its element
/// count once overflowed in the byte total (a panic in a debug build, a wrapped total in
/// release).
#[test]
fn a_statistic_row_whose_shape_overflows_is_no_panic() {
    let tmp = tmpdir("shape-overflow");
    let header = "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,NaN Count\n";
    let csv = format!(
        "{header}Add,Default_Add-op0,0,0,10,output,0,12,float32,\"(3)\",3,1,0,\n\
         Mul,Default_Mul-op1,0,0,20,output,0,12,float32,\"(4294967296,4294967296,4)\",2,1,0,\n"
    );
    let d = tree(&tmp.join("d"), &[("statistic.csv", csv.into_bytes())]);
    let o = opdump(&["inspect", d.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("inspected 2 tensors of 2 kernels"), "{err}");
    let o = opdump(&["compare", d.to_str().unwrap(), d.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn hostile_trees_give_clear_messages_and_never_a_panic() {
    let tmp = tmpdir("hostile");
    let good = npy_f32(&[1.0, 2.0, 3.0]);
    let mut truncated = npy_f32(&[1.0, 2.0, 3.0, 4.0]);
    truncated.truncate(truncated.len() - 5);
    let header = "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,NaN Count\n";
    let csv = format!(
        "{header}Add,Default_Add-op0,0,0,10,output,0,12,float32,\"(3)\",3,1,0,\n\
         Mul,Default_Mul-op1,0,0,20,output,0,12,float32,\"(3)\",nan,nan,1,\n\
         Sub,Default_Sub-op2,0,0,30,outp\n"
    );
    let d = tree(
        &tmp.join("d"),
        &[
            (
                "Add.Default_Add-op0.0.0.10.output.0.DefaultFormat.float32.npy",
                good.clone(),
            ),
            (
                "Add.Default_Add-op0.0.0.9.input.0.DefaultFormat.float32.npy",
                good.clone(),
            ),
            (
                "Neg.Default_Neg-op3.0.0.40.output.0.DefaultFormat.float32.npy",
                truncated,
            ),
            ("weird name.npy", good.clone()),
            ("statistic.csv", csv.into_bytes()),
        ],
    );
    let o = opdump(&["inspect", d.to_str().unwrap(), "--json"]);
    let err = stderr(&o);
    // The Mul row says NaN, but the truncated Neg file could not be read: trouble outranks
    // the finding (exit 2, as in compare); the report still names the NaN.
    assert!(o.status.code() == Some(2), "{err}");
    assert!(
        err.contains("first non-finite: ") && err.contains("; 1 could not be read"),
        "{err}"
    );
    assert!(
        err.contains("error: 1 tensor could not be inspected: its data could not be read"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("Neg.Default_Neg-op3") && err.contains("truncated .npy"),
        "{err}"
    );
    assert!(
        err.contains("row for Mul.Default_Mul-op1 output.0 (timestamp 20) has no .npy file"),
        "{err}"
    );
    assert!(
        err.contains("statistic.csv: line 4:"),
        "cut-off row named by line: {err}"
    );
    assert!(
        err.contains("weird name.npy: file name not of the form"),
        "{err}"
    );
    let j = json_of(&o);
    assert_eq!(j["first_nonfinite"]["op_name"], "Default_Mul-op1");
    assert_eq!(j["first_nonfinite"]["basis"], "first_nonfinite_output");
    // Missing statistic.csv: statistics come from the files.
    std::fs::remove_file(d.join("rank_0/Net/0/0/statistic.csv")).unwrap();
    let o = opdump(&["inspect", d.to_str().unwrap(), "--json"]);
    let err = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "the truncated file is unread: {err}"
    );
    assert!(
        err.contains("all finite among those read, 1 could not be read"),
        "{err}"
    );
    let j = json_of(&o);
    assert_eq!(j["tensors"], 3);
    let errors = j["errors"].as_array().unwrap();
    assert_eq!(
        errors.len(),
        1,
        "the truncated file has no statistics: {errors:?}"
    );
    assert_eq!(errors[0]["op_name"], "Default_Neg-op3");
    // Without the truncated file: every tensor read, all finite, exit 0.
    std::fs::remove_file(
        d.join("rank_0/Net/0/0/Neg.Default_Neg-op3.0.0.40.output.0.DefaultFormat.float32.npy"),
    )
    .unwrap();
    let o = opdump(&["inspect", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains(": all finite\n"), "{}", stderr(&o));
    // Not a dump, not a directory, a missing directory: exit 2 naming the path.
    for bad in [
        tmp.join("nothing-here"),
        d.join("rank_0/Net/0/0/weird name.npy"),
    ] {
        let o = opdump(&["inspect", bad.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains(bad.to_str().unwrap()), "{}", stderr(&o));
    }
    let empty = tmpdir("empty");
    let o = opdump(&["compare", empty.to_str().unwrap(), d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no dump found"), "{}", stderr(&o));
    // A shape mismatch between two dumps is a divergence, not an error.
    let e = tree(
        &tmp.join("e"),
        &[(
            "Add.Default_Add-op0.0.0.10.output.0.DefaultFormat.float32.npy",
            npy_f32(&[1.0, 2.0]),
        )],
    );
    let o = opdump(&[
        "compare",
        e.to_str().unwrap(),
        d.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j = json_of(&o);
    assert!(
        j["first_divergent"]["reasons"][0]
            .as_str()
            .unwrap()
            .contains("shapes differ")
    );
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::remove_dir_all(&empty);
}

#[test]
fn stats_streams_a_huge_sparse_file_and_still_reports_the_others() {
    let tmp = tmpdir("sparse");
    // 2 GiB of f32 zeros announced and present (sparse: no disk used), under a 1 GiB address
    // space limit: reading the file whole cannot even be attempted.
    let big = tmp.join("Add.Default_Add-op0.0.0.1.output.0.DefaultFormat.Float32.npy");
    let elems: usize = 1 << 29;
    let mut b = vec![0u8; 128];
    let n = dump_npy::encode_header("<f4", &[elems], &mut b).unwrap();
    b.truncate(n);
    std::fs::write(&big, &b).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&big).unwrap();
    f.set_len((n + elems * 4) as u64).unwrap();
    let bad = tmp.join("bad.npy");
    std::fs::write(&bad, b"not an npy").unwrap();
    let small = tmp.join("small.npy");
    std::fs::write(&small, npy_f32(&[1.0, -2.0])).unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 1048576; exec {} stats {} {} {} --category max --category min --category count",
            env!("CARGO_BIN_EXE_opdump"),
            big.display(),
            bad.display(),
            small.display()
        ))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "one bad file: exit 2. stderr: {err}"
    );
    assert!(
        out.contains(&format!(",0,0,{elems},")),
        "the huge file's row: {out}"
    );
    assert!(out.contains(",-2,"), "the file after the bad one: {out}");
    assert!(
        err.contains("bad.npy") && err.contains("not a valid .npy"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn the_demos_injected_nan_is_found_by_inspect_and_compare() {
    let tmp = tmpdir("demo");
    let (clean, bad, out) = demo_dumps(&tmp, &[]);
    assert!(out.contains("step 1: injected a NaN into the dumped ReLU Default/network-WithLossCell/_backbone-LeNet5/relu-ReLU/ReLU-op0 output.0"), "{out}");
    let o = opdump(&["inspect", bad.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let f = &json_of(&o)["first_nonfinite"];
    assert_eq!(
        f["op_name"],
        "Default_network-WithLossCell__backbone-LeNet5_relu-ReLU_ReLU-op0"
    );
    assert_eq!(
        (f["iteration"].as_u64(), f["io"].as_str()),
        (Some(1), Some("output"))
    );
    let o = opdump(&[
        "compare",
        bad.to_str().unwrap(),
        clean.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j = json_of(&o);
    let f = &j["first_divergent"];
    assert_eq!(
        f["op_name"],
        "Default_network-WithLossCell__backbone-LeNet5_relu-ReLU_ReLU-op0"
    );
    assert_eq!(f["iteration"], 1);
    assert_eq!(f["metrics"]["nonfinite_mismatch"], 1);
    assert_eq!(j["only_in_a"].as_array().unwrap().len(), 0);
    let o = opdump(&["compare", clean.to_str().unwrap(), clean.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&tmp);
}

/// `opdump compare D D --html HTML` with `OPDUMP_NAMED_TEMPORARIES=named`.
fn compare_html(d: &Path, html: &Path, named: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_opdump"));
    c.arg("compare")
        .args([d, d])
        .arg("--html")
        .arg(html)
        .env("OPDUMP_NAMED_TEMPORARIES", named);
    c
}

/// Ctrl-C, on both of `WholeFile`'s paths (unnamed files, and the named temporaries of file
/// systems without them, which the handler removes), and `kill -9` (nothing to remove: the
/// page is unnamed until whole) leave no partial or hidden file.
#[test]
fn ctrl_c_leaves_no_partial_output_file() {
    let Some(r) = reference() else { return };
    for (signal, named) in [("-INT", "0"), ("-INT", "1"), ("-KILL", "0")] {
        let tmp = tmpdir(&format!("sigint{signal}{named}"));
        let d = r.join("a_tensor_all_io0/files/dump");
        let html = tmp.join("out.html");
        let mut child = compare_html(&d, &html, named)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let _ = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status();
        let st = child.wait().unwrap();
        let left: Vec<String> = std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if st.code() == Some(130) || st.code().is_none() {
            assert!(
                left.is_empty(),
                "{signal} {named}: interrupted, yet left {left:?}"
            );
        } else {
            // It finished before the signal: the page is complete.
            let page = std::fs::read_to_string(&html).unwrap();
            assert!(page.trim_end().ends_with("</html>"), "{left:?}");
            assert_eq!(left, ["out.html"]);
        }
        let _ = std::fs::remove_dir_all(&tmp);
    }
}

/// A report that does not fit on its file system (ENOSPC, on both of `WholeFile`'s paths) is
/// an error naming it; an earlier report there stays as it was and no temporary file is left.
/// Needs `mount` (root): without it the test says why it skips, and fails when `CI=true`.
#[test]
fn a_report_that_cannot_be_written_names_it_and_keeps_the_old_one() {
    let Some(r) = reference() else { return };
    let d = r.join("a_tensor_all_io0/files/dump");
    for named in ["0", "1"] {
        let mount = std::env::temp_dir().join(format!(
            "opdump-report-enospc-{}-{named}",
            std::process::id()
        ));
        let Some(fs_) = opdump_test_support::Tmpfs::mount(&mount, "1m") else {
            return;
        };
        let html = fs_.path().join("out.html");
        std::fs::write(&html, "old page").unwrap();
        // All but two pages taken: the old page keeps one, the report needs more than one.
        std::fs::write(fs_.path().join("filler"), vec![1u8; (1 << 20) - 8192]).unwrap();
        let o = compare_html(&d, &html, named).output().unwrap();
        let e = stderr(&o);
        assert_ne!(o.status.code(), Some(0), "{named}: {e}");
        assert!(
            e.contains(&format!(
                "writing {}: No space left on device",
                html.display()
            )),
            "{named}: {e}"
        );
        let mut left: Vec<String> = std::fs::read_dir(fs_.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["filler", "out.html"], "{named}");
        assert_eq!(
            std::fs::read_to_string(&html).unwrap(),
            "old page",
            "{named}"
        );
        drop(fs_);
        let _ = std::fs::remove_dir(&mount);
    }
}

/// A dump of two kernels, outputs only, with a graph file: `{a}` (Relu, value `r`) feeds `{b}`
/// (Add, value `s`).
fn graph_dump(root: &Path, a: &str, b: &str, b_out: &[f32]) -> PathBuf {
    let g = root.join("rank_0/graphs");
    std::fs::create_dir_all(&g).unwrap();
    std::fs::write(
        g.join("ms_output_trace_code_graph_0.ir"),
        format!(
            "  %0(r) = Relu(%para1_x)\n      # Fullname with scope: (Default/{a})\n  %1(s) = Add(%0, %para2_w)\n      # Fullname with scope: (Default/{b})\n"
        ),
    )
    .unwrap();
    tree(
        root,
        &[
            (
                &format!("Relu.Default_{a}.0.0.10.output.0.DefaultFormat.float32.npy"),
                npy_f32(&[1.0, 2.0]),
            ),
            (
                &format!("Add.Default_{b}.0.0.20.output.0.DefaultFormat.float32.npy"),
                npy_f32(b_out),
            ),
        ],
    )
}

#[test]
fn graph_files_give_producers_to_inspect_and_value_names_to_compare() {
    let tmp = tmpdir("graph");
    let bad = graph_dump(&tmp.join("bad"), "Relu-op0", "Add-op1", &[f32::NAN, 1.0]);
    let o = opdump(&["inspect", bad.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let f = &json_of(&o)["first_nonfinite"];
    assert_eq!(f["op_name"], "Default_Add-op1");
    assert_eq!(
        f["basis"], "finite_producers",
        "inputs not dumped, producer finite: {f}"
    );
    // Another runtime named the kernels differently; the graphs' value names pair them.
    let other = graph_dump(
        &tmp.join("other"),
        "relu_node-Relu-op7",
        "add_node-Add-op9",
        &[3.0, 1.0],
    );
    let o = opdump(&[
        "compare",
        other.to_str().unwrap(),
        bad.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j = json_of(&o);
    let rules: Vec<&str> = j["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["value", "value"]);
    for p in j["pairs"].as_array().unwrap() {
        assert_eq!(p["pairing"], "mapped", "paired by value name: {p}");
    }
    assert_eq!(j["first_divergent"]["pairing"], "mapped");
    assert_eq!(j["first_divergent"]["op_name"], "Default_add_node-Add-op9");
    // The text table says so too, in its own column before the rule.
    let o = opdump(&["compare", other.to_str().unwrap(), bad.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("    # pairing rule  iter op_type"), "{text}");
    assert_eq!(text.matches(" mapped  value ").count(), 2, "{text}");
    assert_eq!(j["first_divergent"]["b_op_name"], "Default_Add-op1");
    // Without graph files the run order pairs them, op types checked.
    std::fs::remove_dir_all(other.join("rank_0/graphs")).unwrap();
    let o = opdump(&[
        "compare",
        other.to_str().unwrap(),
        bad.to_str().unwrap(),
        "--json",
    ]);
    let j = json_of(&o);
    let rules: Vec<&str> = j["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["order", "order"]);
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn statistic_only_dumps_are_inspected_and_compared_from_their_rows() {
    let tmp = tmpdir("statonly");
    // MindSpore's default columns only: max, min, l2norm (no counts).
    let (clean, bad, _) = demo_dumps(&tmp, &["--saved-data", "statistic"]);
    let o = opdump(&["inspect", bad.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let f = &json_of(&o)["first_nonfinite"];
    assert_eq!(
        f["op_name"],
        "Default_network-WithLossCell__backbone-LeNet5_relu-ReLU_ReLU-op0"
    );
    assert_eq!(
        f["basis"], "finite_inputs",
        "finite max/min of the inputs prove them finite: {f}"
    );
    let o = opdump(&[
        "compare",
        bad.to_str().unwrap(),
        clean.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j = json_of(&o);
    let p = j["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["diverged"] == true)
        .unwrap();
    assert_eq!(p["outcome"]["kind"], "statistics");
    assert_eq!(p["a"]["op_type"], "ReLU");
    assert_eq!(j["first_divergent"]["iteration"], 1);
    // The same run dumped as tensors only: its statistics come from the files and match the
    // rows of the statistic-only dump.
    let tensors = tmp.join("tensors");
    let o = opdump(&[
        "demo",
        "--out",
        tensors.to_str().unwrap(),
        "--steps",
        "2",
        "--batch",
        "2",
        "--no-baseline",
        "--saved-data",
        "tensor",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = opdump(&[
        "compare",
        tensors.to_str().unwrap(),
        clean.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json_of(&o);
    assert_eq!(j["only_in_a"].as_array().unwrap().len(), 0);
    assert!(
        j["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["outcome"]["kind"] == "statistics")
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn inspect_finds_a_nan_that_only_an_input_row_holds() {
    // ONNX Runtime's LSTM kept its output finite while its input held a NaN: a statistic-only
    // dump whose one NaN is in an input row.
    let tmp = tmpdir("nan-input");
    let header = "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,NaN Count\n";
    let csv = format!(
        "{header}Relu,Default_Relu-op0,0,0,5,input,0,12,float32,\"(3)\",3,1,0\n\
         Relu,Default_Relu-op0,0,0,6,output,0,12,float32,\"(3)\",3,1,0\n\
         LSTM,Default_LSTM-op1,0,0,10,input,0,12,float32,\"(3)\",3,1,0\n\
         LSTM,Default_LSTM-op1,0,0,11,input,1,12,float32,\"(3)\",nan,nan,1\n\
         LSTM,Default_LSTM-op1,0,0,12,output,0,12,float32,\"(3)\",0.5,-0.5,0\n\
         Add,Default_Add-op2,0,0,20,input,0,12,float32,\"(3)\",0.5,-0.5,0\n\
         Add,Default_Add-op2,0,0,21,output,0,12,float32,\"(3)\",1,0,0\n"
    );
    let d = tree(&tmp.join("d"), &[("statistic.csv", csv.into_bytes())]);
    let o = opdump(&["inspect", d.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json_of(&o);
    assert!(
        v["first_nonfinite"].is_null(),
        "no output is non-finite: {v}"
    );
    let t = &v["first_nonfinite_tensor"];
    assert_eq!(t["op_name"], "Default_LSTM-op1", "{t}");
    assert_eq!(
        (t["io"].as_str(), t["slot"].as_u64()),
        (Some("input"), Some(1)),
        "{t}"
    );
    assert_eq!(t["origin"], "kernel_input", "{t}");

    let o = opdump(&["inspect", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("every tensor is finite"), "{text}");
    assert!(
        text.contains("none (every kernel output is finite, but not every tensor)")
            && text.contains("first non-finite tensor in run order: ")
            && text.contains("Default_LSTM-op1 input.1")
            && text.contains("a graph input, a weight, a constant"),
        "{text}"
    );
    assert!(
        stderr(&o).contains("first non-finite tensor: "),
        "{}",
        stderr(&o)
    );

    // The same dump with the NaN removed: exit 0 and "every tensor is finite".
    let csv = std::fs::read_to_string(d.join("rank_0/Net/0/0/statistic.csv"))
        .unwrap()
        .replace("nan,nan,1", "3,1,0");
    std::fs::write(d.join("rank_0/Net/0/0/statistic.csv"), csv).unwrap();
    let o = opdump(&["inspect", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("none (every tensor is finite)"));
}

fn npy_f32_shaped(shape: &[usize], v: &[f32]) -> Vec<u8> {
    let mut b = vec![0u8; 128];
    let n = dump_npy::encode_header("<f4", shape, &mut b).unwrap();
    b.truncate(n);
    b.extend(v.iter().flat_map(|x| x.to_le_bytes()));
    b
}

/// A one-kernel dump whose output is `v` in `shape`, with its statistic.csv row (max, min).
fn one_tensor_dump(root: &Path, shape: &[usize], v: &[f32]) -> PathBuf {
    let max = v.iter().copied().fold(f32::MIN, f32::max);
    let min = v.iter().copied().fold(f32::MAX, f32::min);
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let csv = format!(
        "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value\n\
         Add,Default_Add-op0,0,0,10,output,0,{},float32,\"({})\",{max:e},{min:e}\n",
        v.len() * 4,
        dims.join(",")
    );
    tree(
        root,
        &[
            (
                "Add.Default_Add-op0.0.0.10.output.0.DefaultFormat.float32.npy",
                npy_f32_shaped(shape, v),
            ),
            ("statistic.csv", csv.into_bytes()),
        ],
    )
}

#[test]
fn compare_pairs_squeezed_shapes_by_value_and_scales_atol_with_the_tensor() {
    let tmp = tmpdir("truthful");
    let cmp = |a: &[usize], va: &[f32], b: &[usize], vb: &[f32], tag: &str| {
        let da = one_tensor_dump(&tmp.join(format!("{tag}-a")), a, va);
        let db = one_tensor_dump(&tmp.join(format!("{tag}-b")), b, vb);
        let o = opdump(&[
            "compare",
            da.to_str().unwrap(),
            db.to_str().unwrap(),
            "--json",
        ]);
        (o.status.code(), json_of(&o))
    };
    let v = [1.0f32, -2.0, 3.0, 0.5];
    // [1, 1, 4] against [4]: the same elements, compared by value, with a note.
    let (code, j) = cmp(&[1, 1, 4], &v, &[4], &v, "squeeze");
    assert_eq!(code, Some(0), "{j}");
    let p = &j["pairs"][0];
    assert_eq!(p["outcome"]["kind"], "elements", "{p}");
    assert!(
        p["notes"][0]
            .as_str()
            .unwrap()
            .contains("[1, 1, 4] and [4] differ only in dimensions of size 1"),
        "{p}"
    );
    // A real difference across the squeeze is still found...
    let w = [1.0f32, -2.0, 3.5, 0.5];
    let (code, _) = cmp(&[1, 1, 4], &w, &[4], &v, "squeeze-diff");
    assert_eq!(code, Some(1));
    // ...and shapes that are not a squeeze of each other still diverge.
    let (code, j) = cmp(&[2, 2], &v, &[4], &v, "reshape");
    assert_eq!(code, Some(1), "{j}");

    // Rounding next to zero in a tensor of magnitude 50: |a-b| = 3e-6 > the old fixed 1e-6,
    // but within rtol/10 * 50 = 5e-4.
    let big = [50.0f32, -20.0, 1e-7, 3.0];
    let big_a = [50.0f32, -20.0, 3.1e-6, 3.0];
    let (code, j) = cmp(&[4], &big_a, &[4], &big, "magnitude");
    assert_eq!(code, Some(0), "{j}");
    assert!((j["pairs"][0]["tolerance"]["atol"].as_f64().unwrap() - 5e-4).abs() < 1e-9);
    // A 1% change of activations around 1e-7: inside the old fixed atol 1e-6, now found.
    let tiny = [1e-7f32, -2e-7, 3e-8, 5e-8];
    let tiny_a: Vec<f32> = tiny.iter().map(|x| x * 1.01).collect();
    let (code, j) = cmp(&[4], &tiny_a, &[4], &tiny, "tiny");
    assert_eq!(code, Some(1), "{j}");
    // Without B's statistic row the fixed default atol (1e-6) applies.
    let da = one_tensor_dump(&tmp.join("norow-a"), &[4], &tiny_a);
    let db = one_tensor_dump(&tmp.join("norow-b"), &[4], &tiny);
    std::fs::remove_file(db.join("rank_0/Net/0/0/statistic.csv")).unwrap();
    let o = opdump(&[
        "compare",
        da.to_str().unwrap(),
        db.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        json_of(&o)["pairs"][0]["tolerance"]["atol"].as_f64(),
        Some(1e-6)
    );
    // A fixed --atol restores the fixed rule.
    let da = one_tensor_dump(&tmp.join("fixed-a"), &[4], &tiny_a);
    let db = one_tensor_dump(&tmp.join("fixed-b"), &[4], &tiny);
    let o = opdump(&[
        "compare",
        da.to_str().unwrap(),
        db.to_str().unwrap(),
        "--atol",
        "1e-6",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A compare that pairs nothing is an error (exit 2), never "every pair within tolerance":
/// a reference directory whose only array has a dtype opdump cannot read (numpy's opaque
/// `|V1`, as ml_dtypes saves a type numpy lacks), and, both ways round, an empty reference.
/// The report is still printed; the error names the side without tensors and why.
#[test]
fn a_compare_that_pairs_nothing_is_an_error() {
    let tmp = tmpdir("nothing");
    let a = tree(
        &tmp.join("a"),
        &[(
            "Add.Add-op1.0.0.1.output.0.DefaultFormat.float32.npy",
            npy_f32(&[1.0, 2.0]),
        )],
    );
    let opaque = tmp.join("opaque");
    std::fs::create_dir_all(&opaque).unwrap();
    let mut v1 = vec![0u8; 128];
    let n = dump_npy::encode_header("|V1", &[4], &mut v1).unwrap();
    v1.truncate(n);
    v1.extend([0u8; 4]);
    std::fs::write(opaque.join("x.npy"), v1).unwrap();
    for (x, y) in [(&a, &opaque), (&opaque, &a)] {
        let o = opdump(&["compare", x.to_str().unwrap(), y.to_str().unwrap()]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("error: nothing was compared"), "{err}");
        assert!(
            err.contains("holds 0 readable tensors, 1 problems listed above"),
            "{err}"
        );
        assert!(err.contains("x.npy: not a valid .npy file"), "{err}");
        assert!(String::from_utf8_lossy(&o.stdout).contains("0 pairs"));
    }
    // With --json the report is still the JSON document on stdout.
    let o = opdump(&[
        "compare",
        "--json",
        a.to_str().unwrap(),
        opaque.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(json_of(&o)["pairs"].as_array().map(Vec::len), Some(0));
    // The same dump against itself pairs and exits 0: the rule is about pairs, not names.
    let o = opdump(&["compare", a.to_str().unwrap(), a.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&tmp);
}

/// A pair with a file that cannot be read (truncated after the dump was written) is trouble,
/// not a divergence: it is listed as unreadable, never named the first divergent operator, and
/// the exit code is 2 (as `diff` reports trouble over differences), also when another pair
/// really diverges; the error names the file and what is wrong with it.
#[test]
fn a_pair_whose_file_cannot_be_read_is_an_error_not_a_divergence() {
    let Some(r) = reference() else { return };
    let tmp = tmpdir("unreadable");
    let (a, b) = (tmp.join("a"), tmp.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let a = copy_dump(&r, "a_tensor_all_io0", &a);
    let b = copy_dump(&r, "a_tensor_all_io0", &b);
    let cut = find(
        &b,
        0,
        "Add.Default_network-WithLossCell__backbone-TinyNet_Add-op0.",
    );
    let len = std::fs::metadata(&cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len - 4)
        .unwrap();
    let cut_name = cut.file_name().unwrap().to_string_lossy().into_owned();
    let run = || {
        opdump(&[
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--json",
        ])
    };
    let o = run();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("error: 1 pair could not be compared: a file of it could not be read"),
        "{err}"
    );
    assert!(
        err.contains(&format!("error: B: {}", cut.display())) && err.contains("truncated .npy"),
        "{err}"
    );
    assert!(
        err.contains("1 could not be read, the others within tolerance"),
        "{err}"
    );
    let j = json_of(&o);
    assert_eq!(
        j["first_divergent"],
        Value::Null,
        "an unreadable pair is no divergence"
    );
    assert_eq!(j["diverged"], 0);
    let bad: Vec<&Value> = j["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["unreadable"] == true)
        .collect();
    assert_eq!(bad.len(), 1, "one unreadable pair");
    assert_eq!(bad[0]["diverged"], false);
    assert!(
        bad[0]["reasons"][0].as_str().unwrap().contains(&cut_name),
        "{}",
        bad[0]
    );
    // A real divergence elsewhere: still exit 2, and the divergent pair (not the unreadable
    // one) is the first divergent operator.
    let f = find(
        &a,
        0,
        "MaxPool.Default_network-WithLossCell__backbone-TinyNet_pool-MaxPool2d_MaxPool-op0.",
    );
    edit_f32(&f, |_, v| v * 1.5 + 1.0);
    let o = run();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("1 diverge, 1 could not be read"), "{err}");
    let j = json_of(&o);
    assert_eq!(
        j["first_divergent"]["op_type"], "MaxPool",
        "{}",
        j["first_divergent"]
    );
    assert_eq!(j["diverged"], 1);
    let _ = std::fs::remove_dir_all(&tmp);
}
