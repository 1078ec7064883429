//! The Dumper run from an acl.json or a torchair config writes CANN's GE layout: directories,
//! one CANN dump file per kernel whose bytes decode (with dump-device-ascend's decoder) to
//! exactly the tensors reported, the statistics csv, torchair's prefix and npy names.

use std::{collections::HashMap, path::PathBuf};

use dump_core::DType;
use dump_device_ascend::dumpfile::{CannDType, CannFormat, TensorKind, decode};
use dump_host::{DumpOptions, Dumper, TensorRef, writer::WriterConfig};
use opdump_test_support::files_below as files;

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-ge-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn open(config: String, opts: DumpOptions) -> Dumper {
    let env = HashMap::<String, String>::new();
    Dumper::builder()
        .env(&env)
        .options(opts)
        .open_json(config.into_bytes())
        .unwrap()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Runs `steps` steps of two kernels: a Conv2D with two inputs and one output, an Add of
/// float16 with one input and one output (values depend on the step).
fn run(d: &mut Dumper, steps: u32) {
    for step in 0..steps {
        let s = d.begin_step();
        let x: Vec<f32> = (0..6).map(|i| i as f32 + step as f32).collect();
        let w = [0.5f32, -1.25];
        let y = [f32::NAN, f32::INFINITY, -3.0];
        if let Some(k) = s.kernel("Conv2D", "Default/net/conv1-Conv2d/Conv2D-op0") {
            k.input(0, TensorRef::from_slice(&[2, 3], &x)).unwrap();
            k.input(1, TensorRef::from_slice(&[2], &w)).unwrap();
            k.output(0, TensorRef::from_slice(&[3], &y)).unwrap();
        }
        let h: Vec<u8> = [1.0f32, -2.0]
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
            .collect();
        if let Some(k) = s.kernel("Add", "Default/net/Add-op1") {
            k.input(0, TensorRef::host(DType::Float16, &[2], &h))
                .unwrap();
            k.output(0, TensorRef::host(DType::Float16, &[2], &h))
                .unwrap();
        }
        s.finish().unwrap();
    }
}

#[test]
fn acl_json_writes_one_cann_file_per_kernel_that_decodes_to_the_reported_bytes() {
    let root = tmp("acl");
    let config = format!(
        r#"{{"dump": {{"dump_path": "{}", "dump_mode": "all", "dump_step": "0|2",
            "dump_list": [{{"model_name": "res.net v1"}}]}}}}"#,
        root.display()
    );
    let mut d = open(config, DumpOptions::default());
    d.begin_graph(7, &[]).unwrap();
    run(&mut d, 3);
    let report = d.close().unwrap();
    assert_eq!(report.files, 4, "two kernels in steps 0 and 2");
    let all = files(&root);
    assert_eq!(all.len(), 4, "{all:?}");
    for f in &all {
        let rel: Vec<String> = f
            .strip_prefix(&root)
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        // {time}/{device_id}/{model_name}/{model_id}/{data_index}/{file}
        assert_eq!(rel.len(), 6, "{rel:?}");
        assert!(
            rel[0].len() == 14 && rel[0].bytes().all(|b| b.is_ascii_digit()),
            "{rel:?}"
        );
        assert_eq!(&rel[1..4], ["0", "res_net_v1", "7"]);
        assert!(rel[4] == "0" || rel[4] == "2", "{rel:?}");
        let name: Vec<&str> = rel[5].split('.').collect();
        assert_eq!(name.len(), 5, "{name:?}");
        assert_eq!(name[3], "0", "stream 0");
        assert_eq!(name[4].len(), 16, "16-digit µs timestamp: {name:?}");
        let bytes = std::fs::read(f).unwrap();
        let h = decode(&bytes).unwrap();
        assert_eq!(h.version, "2.0");
        assert_eq!(h.payload_end, bytes.len() as u64, "no trailing bytes");
        let step: f32 = rel[4].parse().unwrap();
        match name[0] {
            "Conv2D" => {
                assert_eq!(
                    (name[1], name[2]),
                    ("Default_net_conv1-Conv2d_Conv2D-op0", "0")
                );
                assert_eq!(h.op_name, "Default/net/conv1-Conv2d/Conv2D-op0");
                let x: Vec<f32> = (0..6).map(|i| i as f32 + step).collect();
                let want = [
                    (TensorKind::Input, 0, vec![2u64, 3], f32_bytes(&x)),
                    (TensorKind::Input, 1, vec![2], f32_bytes(&[0.5, -1.25])),
                    (
                        TensorKind::Output,
                        0,
                        vec![3],
                        f32_bytes(&[f32::NAN, f32::INFINITY, -3.0]),
                    ),
                ];
                assert_eq!(h.tensors.len(), 3);
                for (kind, i, shape, data) in want {
                    let t = h.tensor(kind, i).unwrap();
                    assert_eq!(t.data_type, CannDType::FLOAT);
                    assert_eq!(t.format, CannFormat::ND);
                    assert_eq!(t.shape, shape);
                    assert_eq!(t.original_shape.as_deref(), Some(&shape[..]));
                    assert_eq!(t.bytes_in(&bytes), Some(&data[..]), "{kind:?} {i}");
                }
            }
            "Add" => {
                assert_eq!(name[2], "1", "the step's second kernel: task 1");
                let t = h.tensor(TensorKind::Output, 0).unwrap();
                assert_eq!(t.data_type, CannDType::FLOAT16);
                assert_eq!(t.bytes_in(&bytes), Some(&[0x00, 0x3C, 0x00, 0xC0][..]));
            }
            other => panic!("unexpected op type {other}"),
        }
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn layers_filter_kernels_and_dump_mode_filters_tensors() {
    let root = tmp("layers");
    let config = format!(
        r#"{{"dump": {{"dump_path": "{}", "dump_list": [{{"model_name": "m",
            "layer": ["Default/net/Add-op1"]}}]}}}}"#,
        root.display()
    );
    let mut d = open(config, DumpOptions::default());
    assert!(d.may_dump_kernel("Default/net/Add-op1"));
    assert!(!d.may_dump_kernel("Default/net/conv1-Conv2d/Conv2D-op0"));
    run(&mut d, 1);
    d.close().unwrap();
    let all = files(&root);
    assert_eq!(all.len(), 1, "{all:?}");
    let h = decode(&std::fs::read(&all[0]).unwrap()).unwrap();
    assert_eq!(h.op_name, "Default/net/Add-op1");
    // dump_mode absent: CANN's default, outputs only.
    assert_eq!(h.tensors.len(), 1);
    assert_eq!(h.tensors[0].kind, TensorKind::Output);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn single_op_dump_has_no_model_directories() {
    let root = tmp("single");
    let config = format!(
        r#"{{"dump": {{"dump_path": "{}", "dump_op_switch": "on", "dump_mode": "input"}}}}"#,
        root.display()
    );
    let mut d = open(
        config,
        DumpOptions {
            device_id: 3,
            ..DumpOptions::default()
        },
    );
    run(&mut d, 2);
    d.close().unwrap();
    let all = files(&root);
    assert_eq!(all.len(), 4, "{all:?}");
    for f in &all {
        let rel = f.strip_prefix(&root).unwrap();
        assert_eq!(rel.components().count(), 3, "{rel:?}");
        assert_eq!(rel.parent().unwrap().file_name().unwrap(), "3");
        let h = decode(&std::fs::read(f).unwrap()).unwrap();
        assert!(h.tensors.iter().all(|t| t.kind == TensorKind::Input));
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn stats_write_cann_csv_per_kernel() {
    let root = tmp("stats");
    let config = format!(
        r#"{{"dump": {{"dump_path": "{}", "dump_mode": "all", "dump_data": "stats",
            "dump_stats": ["L2norm", "Max", "Nan"], "dump_list": [{{"model_name": "m"}}]}}}}"#,
        root.display()
    );
    let mut d = open(config, DumpOptions::default());
    run(&mut d, 1);
    d.close().unwrap();
    let all = files(&root);
    assert_eq!(all.len(), 2, "{all:?}");
    let conv = all
        .iter()
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("Conv2D.")
        })
        .unwrap();
    assert!(conv.to_str().unwrap().ends_with(".csv"));
    let text = std::fs::read_to_string(conv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "Input/Output,Index,Data Size,Data Type,Format,Shape,Count,Max Value,Nan Count,l2norm",
            // 0..5: max 5, l2norm sqrt(55)
            &format!("Input,0,24,DT_FLOAT,ND,2x3,6,5,0,{}", 55f64.sqrt()),
            &format!(
                "Input,1,8,DT_FLOAT,ND,2,2,0.5,0,{}",
                (0.25f64 + 1.5625).sqrt()
            ),
            "Output,0,12,DT_FLOAT,ND,3,3,nan,1,nan",
        ]
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_kernel_larger_than_the_direct_write_size_spills_and_reads_back_the_same() {
    let root = tmp("spill");
    let config = format!(
        r#"{{"dump": {{"dump_path": "{}", "dump_mode": "all",
            "dump_list": [{{"model_name": "m"}}]}}}}"#,
        root.display()
    );
    let opts = DumpOptions {
        writer: WriterConfig {
            threads: 1,
            budget_bytes: 1 << 20,
            direct_write_bytes: 1000,
            nice: 0,
        },
        ..DumpOptions::default()
    };
    let mut d = open(config, opts);
    let a: Vec<f32> = (0..300).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..200).map(|i| -(i as f32)).collect();
    let s = d.begin_step();
    {
        let k = s.kernel("MatMul", "MatMul-op0").unwrap();
        // Reported out of order: outputs first. 1200 bytes: already over the direct size.
        k.output(0, TensorRef::from_slice(&[300], &a)).unwrap();
        // The kernel spills now, to a file no crash can leave behind: nothing is named yet
        // (unless named temporaries are forced: then the one named file is removed at the end).
        let forced = std::env::var_os(dump_host::writer::NAMED_TEMPORARIES_ENV)
            .is_some_and(|v| !v.is_empty() && v != "0");
        let mid = files(&root);
        assert!(
            forced
                || mid.iter().all(|p| !p
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(dump_host::writer::TMP_PREFIX)),
            "{mid:?}"
        );
        k.input(0, TensorRef::from_slice(&[200], &b)).unwrap();
        let e = k.input(0, TensorRef::from_slice(&[200], &b)).unwrap_err();
        assert!(e.to_string().contains("reported twice"), "{e}");
    }
    s.finish().unwrap();
    d.close().unwrap();
    let all = files(&root);
    assert_eq!(all.len(), 1, "the spill file is gone: {all:?}");
    let bytes = std::fs::read(&all[0]).unwrap();
    let h = decode(&bytes).unwrap();
    let input = h.tensor(TensorKind::Input, 0).unwrap();
    let output = h.tensor(TensorKind::Output, 0).unwrap();
    assert!(input.offset < output.offset, "inputs first");
    assert_eq!(input.bytes_in(&bytes), Some(&f32_bytes(&b)[..]));
    assert_eq!(output.bytes_in(&bytes), Some(&f32_bytes(&a)[..]));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn torchair_config_writes_under_its_rank_prefix() {
    let root = tmp("torchair");
    let config = format!(
        r#"{{"enable_dump": true, "dump_path": "{}", "dump_step": "1",
            "dump_layer": "add_1 other"}}"#,
        root.display()
    );
    let mut d = open(config, DumpOptions::default());
    run(&mut d, 1);
    let h = [0u8; 4];
    for _ in 0..2 {
        let s = d.begin_step();
        assert!(
            s.kernel("Conv2D", "conv_1").is_none(),
            "not a dump_layer name"
        );
        if let Some(k) = s.kernel("Add", "add_1") {
            k.input(0, TensorRef::host(DType::Float16, &[2], &h))
                .unwrap();
            k.output(0, TensorRef::host(DType::Float16, &[2], &h))
                .unwrap();
        }
        s.finish().unwrap();
    }
    d.close().unwrap();
    let all = files(&root);
    assert_eq!(all.len(), 1, "{all:?}");
    let rel: Vec<String> = all[0]
        .strip_prefix(&root)
        .unwrap()
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    assert_eq!(rel[0], "worldsize1_global_rank0");
    assert_eq!(&rel[2..6], ["0", "Net", "0", "1"]);
    assert!(rel[6].starts_with("Add.add_1.0.0."), "{rel:?}");
    let h = decode(&std::fs::read(&all[0]).unwrap()).unwrap();
    // torchair sends dump_mode all.
    assert_eq!(h.tensors.len(), 2);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn torchair_npy_dump_names() {
    let root = tmp("npy");
    let config = format!(
        r#"{{"dump_path": "{}", "debug": {{"data_dump": {{"type": "npy"}}}}}}"#,
        root.display()
    );
    let mut d = open(config, DumpOptions::default());
    run(&mut d, 1);
    d.close().unwrap();
    let all = files(&root);
    assert_eq!(all.len(), 5, "{all:?}");
    let conv_in1 = all
        .iter()
        .find(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.starts_with("Default_net_conv1-Conv2d_Conv2D-op0-Conv2D.INPUT.1.")
        })
        .unwrap_or_else(|| panic!("{all:?}"));
    let rel = conv_in1.strip_prefix(&root).unwrap();
    assert!(
        rel.starts_with("worldsize1_global_rank0/graph_0/0"),
        "{rel:?}"
    );
    let n = conv_in1.file_name().unwrap().to_str().unwrap();
    let time = n.split('.').nth(3).unwrap();
    assert_eq!(time.len(), 20, "%Y%m%d%H%M%S%f: {n}");
    let bytes = std::fs::read(conv_in1).unwrap();
    assert!(bytes.ends_with(&f32_bytes(&[0.5, -1.25])));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_ge_layout_refuses_a_flight_recorder_and_a_non_finite_stop() {
    let root = tmp("refuse");
    let config = format!(
        r#"{{"dump": {{"dump_path": "{}", "dump_list": [{{"model_name": "m"}}]}}}}"#,
        root.display()
    );
    let env = HashMap::<String, String>::new();
    let e = Dumper::builder()
        .env(&env)
        .flight_recorder(dump_host::config::FlightRecorder::default())
        .open_json(config.clone().into_bytes())
        .unwrap_err()
        .to_string();
    assert!(e.contains("flight recorder"), "{e}");
    let e = Dumper::builder()
        .env(&env)
        .on_nonfinite(dump_host::config::NonFinitePolicy::Stop)
        .open_json(config.into_bytes())
        .unwrap_err()
        .to_string();
    assert!(e.contains("on_nonfinite \"stop\""), "{e}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn what_the_dumper_cannot_run_is_an_error_naming_key_and_value() {
    let dir = std::env::temp_dir().display().to_string();
    for (config, want) in [
        (
            format!(r#"{{"dump": {{"dump_path": "{dir}", "dump_debug": "on"}}}}"#),
            "dump.dump_debug",
        ),
        (
            format!(r#"{{"dump": {{"dump_path": "{dir}", "dump_list": []}}}}"#),
            "nothing to dump",
        ),
        (
            format!(r#"{{"enable_dump": false, "dump_path": "{dir}"}}"#),
            "enable_dump",
        ),
    ] {
        let env = HashMap::<String, String>::new();
        let e = Dumper::builder()
            .env(&env)
            .open_json(config.clone().into_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{config}: {e}");
    }
}

#[test]
fn a_device_tensor_keeps_its_device_format_and_both_shapes() {
    let root = tmp("device");
    let config = format!(
        r#"{{"dump": {{"dump_path": "{}", "dump_list": [{{"model_name": "m"}}]}}}}"#,
        root.display()
    );
    let mut d = open(config, DumpOptions::default());
    // NC1HWC0 float16 of host shape [1, 3, 1, 1]: one C1 block of 16 channels, 3 used.
    let data: Vec<u8> = (0..16u16)
        .flat_map(|c| half::f16::from_f32(c as f32).to_le_bytes())
        .collect();
    let t = dump_device_ascend::DeviceTensor {
        format: dump_device_ascend::Format::parse("NC1HWC0").unwrap(),
        dtype: DType::Float16,
        device_shape: &[1, 1, 1, 1, 16],
        host_shape: &[1, 3, 1, 1],
        data: &data,
    };
    let s = d.begin_step();
    s.kernel("Conv2D", "conv")
        .unwrap()
        .output(0, TensorRef::device(&t))
        .unwrap();
    s.finish().unwrap();
    d.close().unwrap();
    let all = files(&root);
    assert_eq!(all.len(), 1, "{all:?}");
    let bytes = std::fs::read(&all[0]).unwrap();
    let h = decode(&bytes).unwrap();
    let o = h.tensor(TensorKind::Output, 0).unwrap();
    assert_eq!(o.format, CannFormat::NC1HWC0);
    assert_eq!(o.data_type, CannDType::FLOAT16);
    assert_eq!(o.shape, [1, 1, 1, 1, 16]);
    assert_eq!(o.original_shape.as_deref(), Some(&[1u64, 3, 1, 1][..]));
    assert_eq!(o.bytes_in(&bytes), Some(&data[..]));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn stats_from_precomputed_summaries_and_their_refusal_in_tensor_mode() {
    let root = tmp("summary");
    let config = |data: &str| {
        format!(
            r#"{{"dump": {{"dump_path": "{}", "dump_data": "{data}",
                "dump_list": [{{"model_name": "m"}}]}}}}"#,
            root.display()
        )
    };
    let mut s = dump_core::Summary::EMPTY;
    for v in [1.0, 2.0, 6.0] {
        s.push(v);
    }
    let mut d = open(config("stats"), DumpOptions::default());
    let step = d.begin_step();
    {
        let k = step.kernel("Relu", "relu").unwrap();
        k.output_summary(0, DType::Float32, &[3], s, None).unwrap();
        let e = k
            .output_summary(0, DType::Float32, &[3], s, None)
            .unwrap_err();
        assert!(e.to_string().contains("reported twice"), "{e}");
        let e = k
            .output_summary(1, DType::Float32, &[4], s, None)
            .unwrap_err();
        assert!(e.to_string().contains("counts 3 elements"), "{e}");
    }
    step.finish().unwrap();
    d.close().unwrap();
    let all = files(&root);
    assert_eq!(all.len(), 1, "{all:?}");
    let text = std::fs::read_to_string(&all[0]).unwrap();
    assert_eq!(
        text.lines().nth(1),
        Some("Output,0,12,DT_FLOAT,ND,3,6,1,3,3,0,0,0")
    );
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    let mut d = open(config("tensor"), DumpOptions::default());
    let step = d.begin_step();
    let e = step
        .kernel("Relu", "relu")
        .unwrap()
        .output_summary(0, DType::Float32, &[3], s, None)
        .unwrap_err();
    assert!(e.to_string().contains("holds the tensor's bytes"), "{e}");
    drop(step);
    d.close().unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}

/// `dump_scene: watcher` from an acl.json: the watched node's output is dumped in the GE
/// layout, read again after each `layer` kernel, and a change made while another kernel ran
/// is reported in `.opdump/watcher.csv` naming that kernel.
#[test]
fn acl_json_watcher_scene_reports_a_change_naming_the_kernel_that_ran() {
    use std::sync::{Arc, Mutex};
    let root = tmp("watcher");
    let acl = format!(
        r#"{{"dump": {{"dump_path": "{}", "dump_scene": "watcher",
        "dump_list": [{{"layer": ["Default/net/Mul-op1", "Default/net/Sub-op2"],
                        "watcher_nodes": ["Default/net/Add-op0"]}}]}}}}"#,
        root.display()
    );
    let mut d = open(acl, DumpOptions::default());
    let watched = Arc::new(Mutex::new(vec![1.0f32, 2.0, 3.0, 4.0]));
    for step in 0..2u32 {
        let s = d.begin_step();
        *watched.lock().unwrap() = vec![1.0, 2.0, 3.0, 4.0 + step as f32];
        let now = watched.lock().unwrap().clone();
        if let Some(k) = s.kernel("Add", "Default/net/Add-op0") {
            k.output(0, TensorRef::from_slice(&[4], &now)).unwrap();
        }
        assert!(s.watches("Default/net/Add-op0"));
        let w = Arc::clone(&watched);
        s.watch_output(
            "Default/net/Add-op0",
            0,
            move |f: &mut dyn FnMut(TensorRef<'_>)| {
                let v = w.lock().unwrap();
                f(TensorRef::from_slice(&[4], &v[..]))
            },
        )
        .unwrap();
        s.kernel_ran("Add", "Default/net/Add-op0").unwrap();
        // Step 1 only: Mul writes past its own output into the watched one.
        if step == 1 {
            watched.lock().unwrap()[2] = -7.0;
        }
        s.kernel_ran("Mul", "Default/net/Mul-op1").unwrap();
        s.kernel_ran("Sub", "Default/net/Sub-op2").unwrap();
        s.finish().unwrap();
    }
    d.close().unwrap();
    let all = files(&root);
    // What is dumped: the watched node's output, one CANN file per step.
    let dumped: Vec<&PathBuf> = all
        .iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("Add."))
        })
        .collect();
    assert_eq!(dumped.len(), 2, "{all:?}");
    assert!(
        !all.iter()
            .any(|p| p.to_string_lossy().contains("Mul.") || p.to_string_lossy().contains("Sub.")),
        "{all:?}"
    );
    let csv = all
        .iter()
        .find(|p| p.ends_with(".opdump/watcher.csv"))
        .unwrap_or_else(|| panic!("no watcher.csv in {all:?}"));
    let text = std::fs::read_to_string(csv).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(
        rows[0].starts_with("1,")
            && rows[0].contains("Mul,Default/net/Mul-op1,")
            && rows[0].contains("Default/net/Add-op0"),
        "{text}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}
