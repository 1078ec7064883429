//! The Dumper against the real MindSpore 2.10 output of every shared reference case: run the
//! case's config (path rewritten to a temp dir) over the TinyNet-shaped kernel sequence and
//! compare the tree with the case's `tree.txt`, `result.json` and npy header bytes.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fs,
    path::{Path, PathBuf},
};

use dump_host::{DumpOptions, Dumper, Error, layout::sanitize};
use dump_npy::Bf16Mode;
use opdump_tests::{
    fsutil::{TempDir, file_name, npy_files, walk},
    reference::{Case, npy_key, reference_headers, reference_root},
    tinynet::{self, KERNELS, PARAMETERS},
};

const NAME_RE: &str = r"^[A-Za-z0-9]+\.[^.]+\.0\.0\.\d{16}\.(input|output)\.\d+\.DefaultFormat\.(Float32|Float16|BFloat16|Int32|Int64|Bool)\.npy$";

/// Every key the TinyNet sequence can produce (all kernels, all slots, parameters).
fn possible_keys() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for k in KERNELS {
        for (io, list) in [("input", k.inputs), ("output", k.outputs)] {
            for (slot, (d, _)) in list.iter().enumerate() {
                keys.insert(format!(
                    "{}.{}.{io}.{slot}.DefaultFormat.{}",
                    k.op_type,
                    sanitize(k.full_name),
                    d.cpu_name()
                ));
            }
        }
    }
    for (name, d, _) in PARAMETERS {
        keys.insert(format!(
            "Parameter.{}.output.0.DefaultFormat.{}",
            sanitize(name),
            d.cpu_name()
        ));
    }
    keys
}

/// Runs `case` into `tmp`; returns the rank dir MindSpore's tree says it should use.
fn run_case(case: &Case, tmp: &Path) -> Result<PathBuf, Error> {
    let env: BTreeMap<String, String> = case.env(tmp).into_iter().collect();
    let opts = DumpOptions {
        bf16: Bf16Mode::Raw, // MindSpore 2.10's bytes, to compare headers and sizes exactly
        ..DumpOptions::default()
    };
    let mut d = Dumper::builder()
        .env(&env)
        .options(opts.clone())
        .open_json(case.config_for(tmp))?;
    d.begin_graph(0, &tinynet::execution_order())?;
    for _ in 0..3 {
        let step = d.begin_step();
        tinynet::run_step(&step)?;
        step.finish()?;
    }
    d.close()?;
    let tree = fs::read_to_string(case.dir.join("tree.txt")).unwrap();
    let rank_rel = tree
        .lines()
        .filter_map(|l| l.strip_prefix("d\t700\t0\t"))
        .find(|rel| rel.ends_with("rank_0"))
        .expect("reference tree has a rank_0 dir")
        .to_owned();
    Ok(tmp.join(rank_rel))
}

fn check_accepted_case(root: &Path, name: &str, headers: &HashMap<String, Vec<u8>>) {
    let case = Case::load(root, name);
    assert!(case.accepted(), "{name} is an accepted case");
    let tmp = TempDir::new(name);
    let rank = run_case(&case, tmp.path()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(rank.is_dir(), "{name}: rank dir {} exists", rank.display());
    let possible = possible_keys();
    let re = regex::Regex::new(NAME_RE).unwrap();

    // Modes: every dir the Dumper made is 0700, every file 0400; no temp file is left.
    let entries = walk(tmp.path());
    assert!(!entries.is_empty());
    for e in &entries {
        let want = if e.is_dir { 0o700 } else { 0o400 };
        assert_eq!(e.mode, want, "{name}: mode of {}", e.path.display());
        assert!(
            !file_name(&e.path).starts_with(dump_host::writer::TMP_PREFIX),
            "{name}: temp file left: {}",
            e.path.display()
        );
    }
    assert!(case.tree_dir_modes().iter().all(|m| m == "700"));

    // Metadata.
    let meta = rank.join(".dump_metadata");
    assert_eq!(
        fs::read(meta.join("config.json")).unwrap(),
        br#"{"device_target":"CPU","ms_version":"2.10.0"}"#,
        "{name}: config.json"
    );
    assert_eq!(
        fs::read(meta.join("data_dump.json")).unwrap(),
        case.config_for(tmp.path()),
        "{name}: data_dump.json is a byte copy of the config"
    );

    // Execution order files.
    let eo = rank.join("execution_order");
    let mut want = String::from("NodeExecutionOrder-FullNameWithScope\n");
    for n in tinynet::execution_order() {
        want.push_str(n);
        want.push('\n');
    }
    assert_eq!(
        fs::read_to_string(eo.join("ms_execution_order_graph_0.csv")).unwrap(),
        want
    );
    let dirs = case.iteration_dirs();
    let global: String = dirs.iter().map(|d| format!("{d}\n")).collect();
    assert_eq!(
        fs::read_to_string(eo.join("ms_global_execution_order_graph_0.csv")).unwrap(),
        global,
        "{name}: global execution order lists exactly the dumped steps"
    );
    let ref_global = case
        .dir
        .join("files/dump/rank_0/execution_order/ms_global_execution_order_graph_0.csv");
    if let Ok(text) = fs::read_to_string(&ref_global) {
        assert_eq!(text, global, "{name}: same as MindSpore's file");
    }

    // Iteration dirs: exactly the reference's.
    let net = rank.join("TinyNet/0");
    let got_dirs: BTreeSet<String> = fs::read_dir(&net)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        got_dirs,
        dirs.iter().cloned().collect::<BTreeSet<_>>(),
        "{name}: iteration dirs"
    );
    assert!(
        !net.join("constants").exists(),
        "no constants/ on CPU (none given)"
    );

    // Files: per iteration, exactly the reference's files of the kernels this sequence has.
    let reference = case.tree_npy();
    for it in &dirs {
        let dir = net.join(it);
        let mut got = BTreeMap::new();
        for p in npy_files(&dir) {
            let f = file_name(&p);
            assert!(
                re.is_match(&f),
                "{name}: file name {f} has the reference's form"
            );
            let k = npy_key(&f).unwrap();
            let size = fs::metadata(&p).unwrap().len();
            assert!(
                got.insert(k, (p, size)).is_none(),
                "{name}: one file per tensor"
            );
        }
        let want: BTreeMap<String, u64> = reference
            .iter()
            .filter(|r| &r.iteration == it && possible.contains(&r.key))
            .map(|r| (r.key.clone(), r.size))
            .collect();
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{name}: files of iteration {it}"
        );
        assert!(!want.is_empty(), "{name}: iteration {it} dumps something");
        for (k, (p, size)) in &got {
            assert_eq!(*size, want[k], "{name}: size of {k} as in MindSpore's tree");
            let bytes = fs::read(p).unwrap();
            let h = &headers[k];
            assert_eq!(&bytes[..h.len()], &h[..], "{name}: npy header bytes of {k}");
            assert_eq!(h.len(), 128, "MindSpore's headers are 128 bytes");
        }
        assert!(
            !dir.join("statistic.csv").exists(),
            "saved_data tensor: no statistic.csv"
        );
    }
}

fn with_reference(f: impl FnOnce(&Path)) {
    if let Some(r) = reference_root() {
        f(&r)
    }
}

#[test]
fn tinynet_sequence_matches_the_reference_network() {
    with_reference(|root| {
        let headers = reference_headers(root);
        for k in possible_keys() {
            assert!(headers.contains_key(&k), "{k} is a file MindSpore dumped");
        }
    });
}

#[test]
fn a_tensor_all_io0_full_layout() {
    with_reference(|r| check_accepted_case(r, "a_tensor_all_io0", &reference_headers(r)));
}

#[test]
fn b_iteration_0_or_2_outputs_only() {
    with_reference(|r| {
        check_accepted_case(r, "b_iter_0or2_outputs", &reference_headers(r));
        // input_output 2: no input file at all (the generic check compared with MindSpore's).
        let case = Case::load(r, "b_iter_0or2_outputs");
        assert!(case.tree_npy().iter().all(|f| !f.key.contains(".input.")));
    });
}

#[test]
fn c_kernel_filters_exact_type_and_regex() {
    with_reference(|r| {
        let h = reference_headers(r);
        for c in [
            "c1_kernels_full_name",
            "c2_kernels_type_conv",
            "c3_kernels_regex_default",
        ] {
            check_accepted_case(r, c, &h);
        }
        // The type match `conv` also selects Parameters with conv in the name.
        let c2 = Case::load(r, "c2_kernels_type_conv");
        let params: BTreeSet<String> = c2
            .tree_npy()
            .into_iter()
            .filter(|f| f.key.starts_with("Parameter."))
            .map(|f| f.key)
            .collect();
        assert!(params.contains("Parameter.conv1_weight.output.0.DefaultFormat.Float32"));
        assert!(params.contains("Parameter.moments_conv1_weight.output.0.DefaultFormat.Float32"));
    });
}

#[test]
fn e14_dump_mode_1_with_empty_kernels_dumps_everything() {
    with_reference(|r| {
        check_accepted_case(r, "e14_dump_mode1_empty_kernels", &reference_headers(r));
    });
}

#[test]
fn f1_empty_path_roots_at_diagnostic_path_debug_dump() {
    with_reference(|r| {
        let case = Case::load(r, "f1_empty_path_env");
        assert!(case.config_text.contains(r#""path": """#));
        assert!(
            case.env(Path::new("/x"))
                .iter()
                .any(|(k, v)| k == "MS_DIAGNOSTIC_DATA_PATH" && v == "/x/diag")
        );
        check_accepted_case(r, "f1_empty_path_env", &reference_headers(r));
    });
}

#[test]
fn g1_initial_iteration_10() {
    with_reference(|r| {
        let case = Case::load(r, "g1_initial_iteration_10");
        assert_eq!(case.iteration_dirs(), ["10", "11", "12"]);
        check_accepted_case(r, "g1_initial_iteration_10", &reference_headers(r));
    });
}

#[test]
fn rejected_configs_are_rejected_with_mindspores_reason() {
    with_reference(|r| {
        for name in [
            "e03_relative_path",
            "e06_iteration_a_or_b",
            "e19_net_name_slash",
        ] {
            let case = Case::load(r, name);
            assert!(!case.accepted());
            let tmp = TempDir::new(name);
            let env: BTreeMap<String, String> = case.env(tmp.path()).into_iter().collect();
            let e = Dumper::builder()
                .env(&env)
                .options(DumpOptions::default())
                .open_json(case.config_for(tmp.path()))
                .expect_err(name);
            assert!(matches!(e, Error::Config(_)), "{name}: {e}");
            let msg = e.to_string();
            let want = case.error().unwrap();
            assert!(
                msg.contains(want),
                "{name}: {msg:?} should contain {want:?}"
            );
            assert!(walk(tmp.path()).is_empty(), "{name}: nothing written");
        }
    });
}

#[test]
fn d1_statistic_on_cpu_is_accepted_and_computed_on_the_host() {
    with_reference(|r| {
        let case = Case::load(r, "d1_statistic_cpu");
        assert!(!case.accepted(), "MindSpore rejects it");
        let tmp = TempDir::new("d1");
        let mut d = Dumper::builder()
            .env(&BTreeMap::<String, String>::new())
            .options(DumpOptions::default())
            .open_json(case.config_for(tmp.path()))
            .expect("opdump accepts saved_data statistic on CPU");
        d.begin_graph(0, &tinynet::execution_order()).unwrap();
        let step = d.begin_step();
        tinynet::run_step(&step).unwrap();
        step.finish().unwrap();
        let report = d.close().unwrap();
        let dir = tmp.path().join("dump/rank_0/TinyNet/0/0");
        assert!(npy_files(&dir).is_empty(), "statistic only: no npy");
        let csv = fs::read_to_string(dir.join("statistic.csv")).unwrap();
        let rows = csv.lines().count() - 1;
        assert_eq!(rows as u64, report.rows);
        assert_eq!(rows, possible_keys().len(), "one row per tensor");
        assert_eq!(
            csv.lines().next().unwrap(),
            "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,L2Norm Value"
        );
    });
}
