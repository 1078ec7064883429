//! `opdump run --config acl.json` (and a torchair config) on the CNN fixture with tract: CANN's
//! GE layout written by the Dumper, read back through `opdump inspect` and `opdump convert`
//! as subprocesses, every tensor bit-identical to the same run dumped in MindSpore's layout
//! (the tensors the kernels reported).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use dump_device_ascend::dumpfile::decode;
use opdump_test_support::files_below as files;

fn fixture(p: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/onnx")
        .join(p)
        .to_string_lossy()
        .into_owned()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-ge-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn opdump(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_opdump"));
    cmd.args(args);
    for v in [
        "MINDSPORE_DUMP_CONFIG",
        "MS_DIAGNOSTIC_DATA_PATH",
        "RANK_ID",
    ] {
        cmd.env_remove(v);
    }
    cmd.output().expect("run opdump")
}

fn ok(o: &Output) -> String {
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    out.into_owned()
}

/// `.npy` data of every file below `dir`, keyed by `(op_type, op_name, io, slot)` from
/// MindSpore's name `{type}.{name}.{task}.{stream}.{ts}.{io}.{slot}.{format}.{dtype}.npy`.
fn npy_by_tensor(dir: &Path) -> BTreeMap<(String, String, String, String), Vec<u8>> {
    let mut m = BTreeMap::new();
    for p in files(dir) {
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if !n.ends_with(".npy") {
            continue;
        }
        let f: Vec<&str> = n.split('.').collect();
        let key = (f[0].into(), f[1].into(), f[5].into(), f[6].into());
        let data = dump_npy::read_file(&p).unwrap().data;
        assert!(m.insert(key, data).is_none(), "{n} twice");
    }
    m
}

fn run_cnn(config: Option<&Path>, out: Option<&Path>) -> String {
    let x = format!("x={}", fixture("cnn/inputs/x.npy"));
    let model = fixture("cnn.onnx");
    let mut args = vec!["run", &model, "--input", &x, "--steps", "2"];
    let (c, o);
    if let Some(p) = config {
        c = p.to_string_lossy().into_owned();
        args.extend(["--config", &c]);
    }
    if let Some(p) = out {
        o = p.to_string_lossy().into_owned();
        args.extend(["--out", &o]);
    }
    ok(&opdump(&args))
}

#[test]
fn acl_json_run_writes_ge_files_that_inspect_and_convert_read_back_bit_identical() {
    let top = tmpdir("acl");
    let ge = top.join("ge");
    std::fs::create_dir_all(&ge).unwrap();
    let acl = top.join("acl.json");
    std::fs::write(
        &acl,
        format!(
            r#"{{"dump": {{"dump_path": "{}", "dump_mode": "all", "dump_step": "1",
                "dump_list": [{{"model_name": "cnn"}}]}}}}"#,
            ge.display()
        ),
    )
    .unwrap();
    let checked = opdump(&["check", acl.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&checked.stderr).contains("the Dumper runs from it"),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let out = run_cnn(Some(&acl), None);
    assert!(
        out.contains("wrote 7 CANN dump files") && out.contains("in CANN's GE layout"),
        "{out}"
    );
    // The same run in MindSpore's layout: what the kernels reported.
    let ms = top.join("ms");
    run_cnn(None, Some(&ms));

    // GE's tree: {time}/0/cnn/0/1/ (dump_step 1 only), one CANN file per kernel.
    let written = files(&ge);
    assert_eq!(written.len(), 7, "7 kernels: {written:?}");
    for f in &written {
        let rel: Vec<String> = f
            .strip_prefix(&ge)
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        assert_eq!(&rel[1..5], ["0", "cnn", "0", "1"], "{rel:?}");
        let bytes = std::fs::read(f).unwrap();
        decode(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }

    // inspect reads the tree as CANN's dialect: every tensor of step 1.
    let o = opdump(&["inspect", ge.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(ok(&o).as_bytes()).unwrap();
    assert_eq!(v["layout"], "cann", "{v:#}");
    let want = npy_by_tensor(&ms.join("rank_0/cnn/0/1"));
    // MindSpore's layout also holds the graph input as a Parameter: not a kernel tensor.
    let kernel_tensors = want.keys().filter(|k| k.0 != "Parameter").count();
    assert_eq!(v["tensors"], kernel_tensors, "{v:#}");

    // convert writes every tensor as .npy: byte for byte what the kernels reported.
    let conv = top.join("conv");
    ok(&opdump(&[
        "convert",
        ge.to_str().unwrap(),
        "--out",
        conv.to_str().unwrap(),
        "--layout",
        "mindspore",
    ]));
    let got = npy_by_tensor(&conv);
    assert_eq!(got.len(), kernel_tensors, "{:?}", got.keys());
    for (k, data) in &got {
        assert_eq!(Some(data), want.get(k), "{k:?}");
    }
    // compare pairs every tensor of the GE tree (read directly, and converted) with the
    // MindSpore dump's step 1, none diverging.
    for a in [&ge, &conv] {
        let o = opdump(&[
            "compare",
            a.to_str().unwrap(),
            ms.to_str().unwrap(),
            "--json",
        ]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["matched"], kernel_tensors, "{v:#}");
        assert_eq!(v["diverged"], 0, "{v:#}");
        assert_eq!(v["only_in_a"].as_array().map(Vec::len), Some(0), "{v:#}");
    }
    let _ = std::fs::remove_dir_all(&top);
}

#[test]
fn torchair_config_run_writes_under_the_rank_prefix_with_stats() {
    let top = tmpdir("torchair");
    let cfg = top.join("torchair.json");
    std::fs::write(
        &cfg,
        format!(
            r#"{{"enable_dump": true, "dump_path": "{}", "dump_data": "stats",
                "dump_mode": "output"}}"#,
            top.display()
        ),
    )
    .unwrap();
    run_cnn(Some(&cfg), None);
    let csvs: Vec<PathBuf> = files(&top.join("worldsize1_global_rank0"));
    assert_eq!(csvs.len(), 14, "7 kernels x 2 steps: {csvs:?}");
    for c in &csvs {
        assert!(c.to_string_lossy().ends_with(".csv"), "{}", c.display());
        let text = std::fs::read_to_string(c).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next().unwrap(),
            "Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,\
             Avg Value,Count,Nan Count,Negative Inf Count,Positive Inf Count"
        );
        for row in lines {
            assert!(row.starts_with("Output,"), "dump_mode output: {row}");
            assert_eq!(row.split(',').count(), 13, "{row}");
        }
    }
    let _ = std::fs::remove_dir_all(&top);
}

#[test]
fn check_says_when_a_valid_cann_config_does_not_run_and_why() {
    let top = tmpdir("check");
    let acl = top.join("acl.json");
    std::fs::write(
        &acl,
        format!(
            r#"{{"dump": {{"dump_path": "{}", "dump_debug": "on"}}}}"#,
            top.display()
        ),
    )
    .unwrap();
    let o = opdump(&["check", acl.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("error: dump.dump_debug: \"on\": overflow dump"),
        "{err}"
    );
    assert!(
        err.contains("is a valid CANN acl.json (dump: overflow), but opdump's Dumper does not run it (1 error above)"),
        "{err}"
    );
    let torchair = top.join("torchair.json");
    std::fs::write(
        &torchair,
        format!(
            r#"{{"dump_path": "{}", "debug": {{"data_dump": {{"type": "npy"}}}}}}"#,
            top.display()
        ),
    )
    .unwrap();
    let o = opdump(&["check", torchair.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(ok(&o).as_bytes()).unwrap();
    assert_eq!(v["opdump"]["layout"], "torchair npy", "{v:#}");
    assert_eq!(v["opdump"]["files"], "npy per tensor", "{v:#}");
    let _ = std::fs::remove_dir_all(&top);
}

#[test]
fn torchair_dump_config_path_is_read_and_its_options_override_it() {
    let top = tmpdir("merge");
    let acl = top.join("acl.json");
    std::fs::write(
        &acl,
        format!(
            r#"{{"dump": {{"dump_path": "{}", "dump_step": "1", "dump_data": "stats",
                "dump_list": [{{"model_name": "cnn"}}]}}}}"#,
            top.display()
        ),
    )
    .unwrap();
    let cfg = top.join("torchair.json");
    std::fs::write(
        &cfg,
        format!(
            r#"{{"enable_dump": true, "dump_path": "{}", "dump_config_path": "{}"}}"#,
            top.display(),
            acl.display()
        ),
    )
    .unwrap();
    run_cnn(Some(&cfg), None);
    // The acl.json's model and step; torchair's prefix, dump_mode all and dump_data tensor.
    let written = files(&top.join("worldsize1_global_rank0"));
    assert_eq!(written.len(), 7, "{written:?}");
    for f in &written {
        let rel: Vec<String> = f
            .strip_prefix(&top)
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        assert_eq!(&rel[2..6], ["0", "cnn", "0", "1"], "{rel:?}");
        let h = decode(&std::fs::read(f).unwrap()).unwrap();
        assert!(
            h.tensors
                .iter()
                .any(|t| t.kind == dump_device_ascend::dumpfile::TensorKind::Input),
            "dump_mode all"
        );
    }
    // Without enable_dump the acl.json alone decides, and --out cannot move it.
    std::fs::write(
        &cfg,
        format!(r#"{{"dump_config_path": "{}"}}"#, acl.display()),
    )
    .unwrap();
    let x = format!("x={}", fixture("cnn/inputs/x.npy"));
    let out = top.join("elsewhere");
    let o = opdump(&[
        "run",
        &fixture("cnn.onnx"),
        "--input",
        &x,
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the dump_path of the acl.json named by"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&top);
}
