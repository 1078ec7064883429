//! Dumper unit tests that need crate internals; end-to-end tests live in the `tests/` crate.

use std::{collections::HashMap, path::Path};

use dump_core::DType;

use crate::{DumpOptions, Dumper, TensorRef};

fn dumper(root: &Path, saved: &str, extra_e2e: &str) -> Dumper {
    dumper_on(root, saved, extra_e2e, crate::config::Device::Cpu)
}

fn dumper_on(root: &Path, saved: &str, extra_e2e: &str, device: crate::config::Device) -> Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "{saved}", "input_output": 0, "kernels": [],
        "support_device": [0]}}, "e2e_dump_settings": {{"enable": true{extra_e2e}}}}}"#,
        root.display()
    );
    let env: HashMap<String, String> = HashMap::new();
    let opts = DumpOptions {
        device,
        ..DumpOptions::default()
    };
    Dumper::builder()
        .env(&env)
        .options(opts.clone())
        .open_json(text.into_bytes())
        .unwrap()
}

fn root(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-dumper-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn npy_files(dir: &Path) -> Vec<(String, dump_npy::NpyFile)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "npy"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                dump_npy::read_file(&p).unwrap(),
            )
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[cfg(feature = "ascend")]
#[test]
fn nhwc_tensor_is_converted_only_with_trans_flag() {
    // NHWC [1, 2, 2, 3] holding value = 100*h + 10*w + c; NCHW element (c, h, w) must hold it.
    let nhwc: Vec<f32> = (0..2)
        .flat_map(|h| (0..2).flat_map(move |w| (0..3).map(move |c| (100 * h + 10 * w + c) as f32)))
        .collect();
    let bytes = f32_bytes(&nhwc);
    for trans in [true, false] {
        let r = root(&format!("trans{trans}"));
        let mut d = dumper(&r, "tensor", &format!(r#", "trans_flag": {trans}"#));
        let step = d.begin_step();
        let k = step.kernel("Conv2D", "Default/Conv2D-op0").unwrap();
        // Device-format bytes are a device tensor like any other: dump-device-ascend's
        // `DeviceTensor` implements the contract, and the Dumper has no Ascend branch.
        let t = dump_device_ascend::DeviceTensor {
            format: dump_device_ascend::Format::parse("NHWC").unwrap(),
            dtype: DType::Float32,
            device_shape: &[1, 2, 2, 3],
            host_shape: &[1, 3, 2, 2],
            data: &bytes,
        };
        k.output(0, TensorRef::device(&t).with_format("NHWC"))
            .unwrap();
        drop(k);
        step.finish().unwrap();
        d.close().unwrap();
        let files = npy_files(&r.join("rank_0/Net/0/0"));
        assert_eq!(files.len(), 1);
        let (name, npy) = &files[0];
        let vals: Vec<f32> = npy
            .data
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        if trans {
            assert!(
                name.ends_with(".output.0.DefaultFormat.Float32.npy"),
                "{name}"
            );
            assert_eq!(npy.shape, vec![1, 3, 2, 2]);
            let want: Vec<f32> = (0..3)
                .flat_map(|c| {
                    (0..2).flat_map(move |h| (0..2).map(move |w| (100 * h + 10 * w + c) as f32))
                })
                .collect();
            assert_eq!(vals, want);
        } else {
            assert!(name.ends_with(".output.0.NHWC.Float32.npy"), "{name}");
            assert_eq!(npy.shape, vec![1, 2, 2, 3]);
            assert_eq!(vals, nhwc);
        }
        let _ = std::fs::remove_dir_all(&r);
    }
}

#[test]
fn mindspore_add_example_rows() {
    let r = root("add");
    let mut d = dumper(&r, "statistic", "");
    let (a, b) = ([1f32, 2., 3., 4., 5., 6.], [7f32, 8., 9., 10., 11., 12.]);
    let sum: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let step = d.begin_step();
    if let Some(k) = step.kernel("Add", "Default/Add-op0") {
        k.input(0, TensorRef::host(DType::Float32, &[2, 3], &f32_bytes(&a)))
            .unwrap();
        k.input(1, TensorRef::host(DType::Float32, &[2, 3], &f32_bytes(&b)))
            .unwrap();
        k.output(
            0,
            TensorRef::host(DType::Float32, &[2, 3], &f32_bytes(&sum)),
        )
        .unwrap();
    }
    step.finish().unwrap();
    d.close().unwrap();
    let csv = std::fs::read_to_string(r.join("rank_0/Net/0/0/statistic.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,L2Norm Value"
    );
    let tails: Vec<String> = lines[1..]
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f[..4], ["Add", "Default_Add-op0", "0", "0"]);
            format!("{}|{}|{}", f[5], f[6], f[7..].join(","))
        })
        .collect();
    assert_eq!(
        tails,
        [
            "input|0|24,float32,\"(2,3)\",6,1,9.53939,",
            "input|1|24,float32,\"(2,3)\",12,7,23.6432,",
            "output|0|24,float32,\"(2,3)\",18,8,32.9242,",
        ]
    );
    assert!(csv.ends_with(",\n"));
    let _ = std::fs::remove_dir_all(&r);
}

#[test]
fn sampling_keeps_the_first_elements() {
    let r = root("sample");
    // Sampling is an Ascend feature (MindSpore sets sample_mode to 0 on CPU and GPU).
    let ascend = crate::config::Device::Ascend;
    let mut d = dumper_on(
        &r,
        "full",
        r#", "sample_mode": 1, "sample_num": 20"#,
        ascend,
    );
    let v: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let step = d.begin_step();
    step.kernel("Mul", "Default/Mul-op0")
        .unwrap()
        .output(
            0,
            TensorRef::host(DType::Float32, &[10, 10], &f32_bytes(&v)),
        )
        .unwrap();
    step.finish().unwrap();
    d.close().unwrap();
    let dir = r.join("rank_0/Net/0/0");
    let files = npy_files(&dir);
    assert!(
        files[0].0.ends_with(".output.0.DefaultFormat.float32.npy"),
        "{}",
        files[0].0
    );
    assert_eq!(files[0].1.shape, vec![20]);
    assert_eq!(files[0].1.data, f32_bytes(&v[..20]));
    let csv = std::fs::read_to_string(dir.join("statistic.csv")).unwrap();
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .ends_with(",80,float32,\"(20)\",19,0,49.6991,"),
        "{csv}"
    );
    let _ = std::fs::remove_dir_all(&r);
}

#[test]
fn constants_once_per_graph() {
    let r = root("const");
    let mut d = dumper(&r, "tensor", "");
    let v = f32_bytes(&[0.0, 0.1, 0.2]);
    for _ in 0..3 {
        d.constant(
            0,
            "Default/data-1",
            TensorRef::host(DType::Float32, &[3], &v),
        )
        .unwrap();
    }
    d.constant(
        1,
        "Default/data-1",
        TensorRef::host(DType::Float32, &[3], &v),
    )
    .unwrap();
    d.close().unwrap();
    for g in ["0", "1"] {
        let files = npy_files(&r.join("rank_0/Net").join(g).join("constants"));
        assert_eq!(files.len(), 1, "graph {g}");
        assert!(files[0].0.starts_with("Parameter.Default_data-1.0.0."));
        assert!(files[0].0.ends_with(".output.0.DefaultFormat.Float32.npy"));
        assert_eq!(files[0].1.data, v);
    }
    let _ = std::fs::remove_dir_all(&r);
}

#[test]
fn ascend_device_statistics_rows() {
    // spec §10: fp16 [40000 x 3] mean overflows to inf in low mode, stays 40000 in high mode.
    let v: Vec<u8> = [40000f32; 3]
        .iter()
        .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
        .collect();
    for (mode, avg) in [("high", "40000"), ("low", "inf")] {
        let r = root(&format!("devstat-{mode}"));
        let text = format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
            "support_device": [0], "statistic_category": ["max", "avg", "l2norm"]}},
            "e2e_dump_settings": {{"enable": true, "stat_calc_mode": "device",
            "device_stat_precision_mode": "{mode}"}}}}"#,
            r.display()
        );
        let opts = DumpOptions {
            device: crate::config::Device::Ascend,
            ..DumpOptions::default()
        };
        let env: HashMap<String, String> = HashMap::new();
        let mut d = Dumper::builder()
            .env(&env)
            .options(opts.clone())
            .open_json(text.into_bytes())
            .unwrap();
        let step = d.begin_step();
        step.kernel("Add", "Default/Add-op0")
            .unwrap()
            .output(0, TensorRef::host(DType::Float16, &[3], &v))
            .unwrap();
        step.finish().unwrap();
        d.close().unwrap();
        let csv = std::fs::read_to_string(r.join("rank_0/Net/0/0/statistic.csv")).unwrap();
        let row = csv.lines().nth(1).unwrap();
        let tail: Vec<&str> = row.split(',').skip(7).collect();
        assert_eq!(tail[..3], ["6", "float16", "\"(3)\""], "{row}");
        assert_eq!(tail[3], "40000", "{row}");
        assert_eq!(tail[4], avg, "{mode}: {row}");
        let _ = std::fs::remove_dir_all(&r);
    }
}

#[test]
fn a_dump_that_wrote_nothing_says_why() {
    let make = |tag: &str, common: &str| {
        let r = root(tag);
        let text = format!(
            r#"{{"common_dump_settings": {{"dump_mode": {common}, "path": "{}", "net_name": "Net",
            "saved_data": "statistic", "input_output": 0, "support_device": [0]}},
            "e2e_dump_settings": {{"enable": true}}}}"#,
            r.display()
        );
        let env: HashMap<String, String> = HashMap::new();
        let d = Dumper::builder()
            .env(&env)
            .options(DumpOptions::default())
            .open_json(text.into_bytes())
            .unwrap();
        (r, d)
    };
    let all = r#"0, "iteration": "all", "kernels": []"#;
    let run = |d: &mut Dumper, steps: usize, tensor: bool| {
        let v = f32_bytes(&[1.0, 2.0]);
        for _ in 0..steps {
            let step = d.begin_step();
            if let Some(k) = step.kernel("Add", "Default/Add-op0")
                && tensor
            {
                k.output(0, TensorRef::host(DType::Float32, &[2], &v))
                    .unwrap();
            }
            // Only write failures (the writes-failed case) may end a step with an error.
            if let Err(e) = step.finish() {
                assert!(matches!(e, crate::Error::Write(_)), "{e}");
            }
        }
        let report = d.progress();
        d.nothing_dumped(&report)
            .map(|why| crate::diag::Event::NothingDumped(why).to_string())
    };

    let (r, mut d) = make("nothing-no-step", all);
    let w = run(&mut d, 0, true).unwrap();
    assert!(w.contains("no step was begun"), "{w}");
    let _ = std::fs::remove_dir_all(&r);

    let (r, mut d) = make("nothing-iteration", r#"0, "iteration": "7", "kernels": []"#);
    let w = run(&mut d, 3, true).unwrap();
    assert!(
        w.contains(r#"iteration "7" matched none of the 3 step(s) run (steps 0..=2)"#),
        "{w}"
    );
    let _ = std::fs::remove_dir_all(&r);

    let (r, mut d) = make(
        "nothing-kernels",
        r#"1, "iteration": "all", "kernels": ["Default/Conv2D-op9"]"#,
    );
    let w = run(&mut d, 2, true).unwrap();
    assert!(
        w.contains(
            r#"2 step(s) were selected but no kernel matched `kernels` ["Default/Conv2D-op9"]"#
        ),
        "{w}"
    );
    let _ = std::fs::remove_dir_all(&r);

    let (r, mut d) = make("nothing-empty", all);
    let w = run(&mut d, 1, false).unwrap();
    assert!(w.contains("no kernel reported a non-empty tensor"), "{w}");
    let _ = std::fs::remove_dir_all(&r);

    // Defect (issue 13, 11): with every write failing (here the rank directory is a regular
    // file; a dump root that is one is refused up front; EROFS and ENOSPC go the same way) the
    // warning blamed the kernel filter.
    let (r, mut d) = {
        let r = root("nothing-writes-failed");
        let _ = std::fs::remove_dir_all(&r);
        std::fs::create_dir_all(&r).unwrap();
        std::fs::write(r.join("rank_0"), b"not a directory").unwrap();
        let text = format!(
            r#"{{"common_dump_settings": {{"dump_mode": 1, "path": "{}", "net_name": "Net",
            "iteration": "all", "kernels": ["Default/Add-op0"], "saved_data": "statistic",
            "input_output": 0, "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
            r.display()
        );
        let env: HashMap<String, String> = HashMap::new();
        (
            r,
            Dumper::builder()
                .env(&env)
                .options(DumpOptions::default())
                .events(crate::diag::EventSink::ignore())
                .open_json(text.into_bytes())
                .unwrap(),
        )
    };
    let w = run(&mut d, 2, true).unwrap();
    assert!(
        w.contains("2 step(s) were selected but every write failed (")
            && w.contains(&format!("the first: {}", r.display()))
            && !w.contains("kernels"),
        "{w}"
    );
    let _ = std::fs::remove_dir_all(&r);

    let (r, mut d) = make("nothing-something", all);
    assert_eq!(run(&mut d, 1, true), None, "a row was written");
    let _ = std::fs::remove_dir_all(&r);
}

/// A Dumper with `statistic_category` `cats` (JSON list) and `saved_data` `saved`.
fn dumper_cats(root: &Path, saved: &str, cats: &str, extra_common: &str) -> Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "{saved}", "input_output": 0, "kernels": [],
        "support_device": [0], "statistic_category": {cats}{extra_common}}},
        "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    let env: HashMap<String, String> = HashMap::new();
    Dumper::builder()
        .env(&env)
        .options(DumpOptions::default())
        .open_json(text.into_bytes())
        .unwrap()
}

/// `statistic.csv` of step 0 with the Timestamp column (the 5th) blanked.
fn rows_without_timestamp(root: &Path) -> String {
    let csv = std::fs::read_to_string(root.join("rank_0/Net/0/0/statistic.csv")).unwrap();
    csv.lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split(',').collect();
            if f.len() > 4 {
                f[4] = "T";
            }
            f.join(",") + "\n"
        })
        .collect()
}

#[test]
fn summary_rows_equal_byte_rows() {
    let tensors: [(&str, &str, Vec<f32>, [usize; 2]); 3] = [
        (
            "Add",
            "Default/Add-op0",
            vec![1.5, -2.0, 0.0, 3.25, 7.0, -0.5],
            [2, 3],
        ),
        (
            "Relu",
            "Default/Relu-op1",
            vec![f32::NAN, 2.0, f32::INFINITY, 0.0],
            [2, 2],
        ),
        (
            "MatMul",
            "Default/MatMul-op2",
            vec![1e-7, 3e9, -4.5, 2.0],
            [4, 1],
        ),
    ];
    let cats = r#"["max", "min", "avg", "l2norm", "count", "negative zero count",
        "positive zero count", "nan count", "negative inf count", "positive inf count",
        "zero count", "md5"]"#;
    let (a, b) = (root("bytes-rows"), root("summary-rows"));
    let mut host = dumper_cats(&a, "statistic", cats, "");
    let mut agent = dumper_cats(&b, "statistic", cats, "");
    let (hs, ags) = (host.begin_step(), agent.begin_step());
    for (t, n, v, shape) in &tensors {
        let bytes = f32_bytes(v);
        let k = hs.kernel(t, n).unwrap();
        k.input(0, TensorRef::host(DType::Float32, shape, &bytes))
            .unwrap();
        k.output(0, TensorRef::host(DType::Float32, shape, &bytes))
            .unwrap();
        let s = dump_core::stats::summarize(DType::Float32, &bytes, v.len())
            .unwrap()
            .unwrap();
        let md5 = Some(dump_core::hash::md5(&bytes));
        let k = ags.kernel(t, n).unwrap();
        k.input_summary(0, DType::Float32, shape, s, md5).unwrap();
        k.output_summary(0, DType::Float32, shape, s, md5).unwrap();
    }
    hs.finish().unwrap();
    ags.finish().unwrap();
    assert_eq!(host.close().unwrap().rows, 6);
    assert_eq!(agent.close().unwrap().rows, 6);
    let (x, y) = (rows_without_timestamp(&a), rows_without_timestamp(&b));
    assert_eq!(x.lines().count(), 7, "{x}");
    assert_eq!(x, y);
    // No .npy for a summary.
    assert!(npy_files(&b.join("rank_0/Net/0/0")).is_empty());
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn summary_rows_refuse_what_a_summary_cannot_give() {
    let s = dump_core::stats::summarize(DType::Float32, &f32_bytes(&[1.0, 2.0]), 2)
        .unwrap()
        .unwrap();
    type Case<'a> = (&'a str, &'a str, Option<[u8; 16]>, &'a [usize], &'a str);
    let cases: [Case<'_>; 4] = [
        ("tensor", r#"["max"]"#, None, &[2], "saved_data \"tensor\""),
        (
            "statistic",
            r#"["max", "md5"]"#,
            None,
            &[2],
            "without an MD5",
        ),
        (
            "statistic",
            r#"["hash:sha1"]"#,
            Some([0; 16]),
            &[2],
            "\"sha1\"",
        ),
        (
            "statistic",
            r#"["max"]"#,
            None,
            &[3],
            "counts 2 elements but shape [3] holds 3",
        ),
    ];
    for (i, (saved, cats, md5, shape, want)) in cases.into_iter().enumerate() {
        let r = root(&format!("summary-refused-{i}"));
        let mut d = dumper_cats(&r, saved, cats, "");
        let step = d.begin_step();
        let k = step.kernel("Add", "Default/Add-op0").unwrap();
        let e = k
            .output_summary(0, DType::Float32, shape, s, md5)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want) && e.contains("Default/Add-op0"), "{e}");
        drop(k);
        step.finish().unwrap();
        assert_eq!(d.close().unwrap().rows, 0);
        let _ = std::fs::remove_dir_all(&r);
    }
}

/// A statistic Dumper under `root` with `dump_mode`, `kernels` (a JSON list), `iteration`
/// and the extra common settings `extra`.
fn filtered(root: &Path, dump_mode: u32, kernels: &str, iteration: &str, extra: &str) -> Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": {dump_mode}, "path": "{}", "net_name": "Net",
        "iteration": "{iteration}", "saved_data": "statistic", "input_output": 0,
        "kernels": {kernels}, "support_device": [0]{extra}}},
        "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(text.into_bytes())
        .unwrap()
}

/// Graph input `x` into `Default/conv1/Conv-op0`, then `Default/relu1/Relu-op1`.
fn two_kernels() -> crate::graph::Graph {
    use crate::graph::{Graph, Input, Node, Output, Parameter};
    let node = |op: &str, name: &str, input: Input| Node {
        name: name.into(),
        op_type: op.into(),
        inputs: vec![input],
        outputs: vec![Output::new(&format!("{name}:0"), None, &[])],
        scope: String::new(),
        source: None,
    };
    let mut g = Graph::new("kernel_graph0");
    g.parameters.push(Parameter::input("x", None, &[]));
    g.nodes
        .push(node("Conv", "Default/conv1/Conv-op0", Input::Parameter(0)));
    g.nodes.push(node(
        "Relu",
        "Default/relu1/Relu-op1",
        Input::Node { node: 0, output: 0 },
    ));
    g
}

/// `dumps_nothing` of steps 0..n of `d` on the two-kernel graph.
fn quiet_steps(d: &mut Dumper, n: usize) -> Vec<bool> {
    d.begin_graph_with(0, &two_kernels()).unwrap();
    (0..n).map(|_| d.begin_step().dumps_nothing()).collect()
}

#[test]
fn a_step_dumps_nothing_only_when_no_kernel_or_parameter_of_its_graph_can_be_dumped() {
    let r = root("quiet");
    let mut disabled = Dumper::disabled();
    assert_eq!(quiet_steps(&mut disabled, 2), [true, true]);

    // The iteration filter decides per step.
    let mut d = filtered(&r.join("it"), 0, "[]", "0|2", "");
    assert_eq!(quiet_steps(&mut d, 4), [false, true, false, true]);

    // A kernels filter that rejects every kernel and the graph input: every step.
    let mut d = filtered(&r.join("none"), 1, r#"["no-such-kernel"]"#, "all", "");
    assert_eq!(quiet_steps(&mut d, 2), [true, true]);
    // ... but not after `begin_graph`: its kernels are named by an execution order.
    d.begin_graph(0, &["Default/no-such-kernel"]).unwrap();
    assert!(!d.begin_step().dumps_nothing());

    // One kernel selected (by name or op type), or only the graph input: not quiet.
    for kernels in [
        r#"["Default/relu1/Relu-op1"]"#,
        r#"["conv"]"#,
        r#"["name-regex(x)"]"#,
    ] {
        let mut d = filtered(&r.join("one"), 1, kernels, "all", "");
        assert_eq!(quiet_steps(&mut d, 1), [false], "{kernels}");
        // Asking marked no entry used.
        assert_eq!(d.plan().unwrap().kernels.unused_entries().len(), 1);
    }

    // Exception and overflow dumps look at every kernel whatever the filter.
    for mode in [3, 4] {
        let extra = format!(r#", "op_debug_mode": {mode}"#);
        let mut d = filtered(&r.join("debug"), 1, r#"["no-such-kernel"]"#, "all", &extra);
        assert_eq!(quiet_steps(&mut d, 1), [false], "op_debug_mode {mode}");
    }

    // Watcher mode reads kernels the filter rejects.
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 1, "path": "{}", "net_name": "Net",
        "iteration": "all", "saved_data": "statistic", "input_output": 0,
        "kernels": ["no-such-kernel"], "support_device": [0]}},
        "e2e_dump_settings": {{"enable": true}}}}"#,
        r.join("watch").display()
    );
    let mut d = Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions::default())
        .on_event(|_| {})
        .watcher(crate::config::WatcherConfig::new(
            ["Default/conv1/Conv-op0".to_owned()],
            Vec::<String>::new(),
        ))
        .open_json(text.into_bytes())
        .unwrap();
    assert_eq!(quiet_steps(&mut d, 1), [false]);
    drop(d);
    let _ = std::fs::remove_dir_all(&r);
}

#[test]
fn graph_tokens_name_one_description_of_one_dumper() {
    let r = root("tokens");
    let g = two_kernels();
    let (mut a, mut b) = (
        filtered(&r.join("a"), 0, "[]", "all", ""),
        filtered(&r.join("b"), 0, "[]", "all", ""),
    );
    assert_eq!(a.graph_token(0), None);
    a.begin_graph_with(0, &g).unwrap();
    b.begin_graph_with(0, &g).unwrap();
    let ta = a.graph_token(0).unwrap();
    assert_ne!(
        Some(ta),
        b.graph_token(0),
        "two Dumpers never share a token"
    );
    a.begin_graph_with(0, &g).unwrap();
    assert_eq!(a.graph_token(0), Some(ta), "the same description is kept");
    let mut other = g.clone();
    other.nodes.pop();
    a.begin_graph_with(0, &other).unwrap();
    let t2 = a.graph_token(0).unwrap();
    assert_ne!(t2, ta, "a new description, a new token");
    a.begin_graph_with(0, &g).unwrap();
    assert_ne!(
        a.graph_token(0),
        Some(ta),
        "described again: not the old token"
    );
    assert_eq!(a.graph_token(1), None);
    drop((a, b));
    let _ = std::fs::remove_dir_all(&r);
}

#[test]
fn the_parsed_iteration_selects_the_steps_its_text_does() {
    use dump_core::iteration::IterationSpec;
    let r = root("selected");
    let steps = [
        0u64,
        1,
        2,
        3,
        5,
        7,
        9,
        10,
        u64::from(u32::MAX) - 1,
        u64::from(u32::MAX),
        u64::from(u32::MAX) + 1,
        u64::MAX,
    ];
    for (i, text) in [
        "all",
        "0",
        "0|2",
        " 1 | 3 ",
        "1-3|7",
        "5-3|7",
        "1||2",
        "1-2-3|9",
        "-5|5-",
        "99999999999999999999|2",
        "4294967295",
        "4294967290-4294967300",
        "3-3",
    ]
    .into_iter()
    .enumerate()
    {
        let d = filtered(&r.join(i.to_string()), 0, "[]", text, "");
        let spec = IterationSpec::parse(text).unwrap();
        for n in steps {
            let want = n <= u64::from(u32::MAX) && spec.matches(n as u32);
            assert_eq!(d.step_active(n), want, "iteration {text:?}, step {n}");
        }
    }
    let _ = std::fs::remove_dir_all(&r);
}

#[test]
fn next_step_dumps_nothing_answers_what_the_next_step_will_say() {
    let r = root("next-quiet");
    let check = |d: &mut Dumper, graph: u32, n: usize| {
        let mut said = Vec::new();
        for _ in 0..n {
            let before = d.next_step_dumps_nothing(graph);
            assert_eq!(
                before,
                d.next_step_dumps_nothing(graph),
                "asking changes nothing"
            );
            d.switch_graph(graph);
            assert_eq!(
                before,
                d.begin_step().dumps_nothing(),
                "step {}",
                said.len()
            );
            said.push(before);
        }
        said
    };
    let mut disabled = Dumper::disabled();
    assert_eq!(check(&mut disabled, 0, 2), [true, true]);
    disabled.begin_graph_with(0, &two_kernels()).unwrap();
    assert_eq!(check(&mut disabled, 0, 2), [true, true]);

    let mut d = filtered(&r.join("it"), 0, "[]", "0|2", "");
    d.begin_graph_with(0, &two_kernels()).unwrap();
    assert_eq!(check(&mut d, 0, 4), [false, true, false, true]);
    // An undescribed graph: only the iteration is known.
    assert_eq!(check(&mut d, 1, 2), [true, true], "steps 4 and 5");

    let mut d = filtered(&r.join("none"), 1, r#"["no-such-kernel"]"#, "all", "");
    d.begin_graph_with(0, &two_kernels()).unwrap();
    assert_eq!(check(&mut d, 0, 2), [true, true]);
    assert_eq!(check(&mut d, 1, 1), [false], "graph 1 is not described");
    d.begin_graph(0, &["Default/no-such-kernel"]).unwrap();
    assert_eq!(check(&mut d, 0, 1), [false], "named by an execution order");

    let mut d = filtered(&r.join("one"), 1, r#"["Default/relu1/Relu-op1"]"#, "1", "");
    d.begin_graph_with(0, &two_kernels()).unwrap();
    assert_eq!(check(&mut d, 0, 3), [true, false, true]);
    drop(d);
    let _ = std::fs::remove_dir_all(&r);
}

/// A step's end queues the copies it gathered for hashing, and the rows waiting for their
/// digests reach their file at a later step's end even when that step dumps nothing (its
/// row flush answers from one flag when nothing is pending): no `flush` or `close` needed.
#[test]
fn rows_waiting_for_digests_reach_their_file_at_a_later_step_that_dumps_nothing() {
    let r = root("digests-later");
    let mut d = dumper_cats(&r, "full", r#"["max", "md5"]"#, "");
    let bytes = f32_bytes(&[1.0, 2.0]);
    let step = d.begin_step();
    let k = step.kernel("Relu", "Default/Relu-op0").unwrap();
    k.output(0, TensorRef::host(DType::Float32, &[2], &bytes))
        .unwrap();
    drop(k);
    step.finish().unwrap();
    let csv = r.join("rank_0/Net/0/0/statistic.csv");
    let mut rows = 0;
    for _ in 0..1000 {
        d.begin_step().finish().unwrap(); // no kernel reported: nothing of its own
        rows = std::fs::read_to_string(&csv).map_or(0, |t| t.lines().count());
        if rows > 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    if rows != 2 {
        // Closing would wait for digests that no job computes: fail instead of hanging.
        std::mem::forget(d);
        panic!("{rows} lines in statistic.csv; want the header and the row before any close");
    }
    let report = d.close().unwrap();
    assert_eq!((report.rows, report.files), (1, 1), "{report:?}");
    let _ = std::fs::remove_dir_all(&r);
}

/// `begin_dumping_step` against `begin_step` + `dumps_nothing` + `finish` on the same configs:
/// the same steps dump, the same rows are written (a `save` after each step included), the
/// step counter moves alike, and `close` reports and warns alike.
#[test]
fn begin_dumping_step_ends_the_steps_that_dump_nothing_as_begin_step_and_finish_do() {
    use std::sync::{Arc, Mutex};
    let r = root("dumping-step");
    let drive = |at: &Path, (mode, kernels, iteration): (u32, &str, &str), dumping: bool| {
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&events);
        let text = format!(
            r#"{{"common_dump_settings": {{"dump_mode": {mode}, "path": "{}", "net_name": "Net",
            "iteration": "{iteration}", "saved_data": "statistic", "input_output": 0,
            "kernels": {kernels}, "support_device": [0]}},
            "e2e_dump_settings": {{"enable": true}}}}"#,
            at.display()
        );
        let mut d = Dumper::builder()
            .env(&HashMap::<String, String>::new())
            .options(DumpOptions::default())
            .on_event(move |e| seen.lock().unwrap().push(format!("{e:?}")))
            .open_json(text.into_bytes())
            .unwrap();
        d.begin_graph_with(0, &two_kernels()).unwrap();
        let x = f32_bytes(&[1.0, -2.0]);
        let mut quiet = Vec::new();
        for _ in 0..4 {
            let report = |st: &crate::Step| {
                if let Some(k) = st.kernel("Relu", "Default/relu1/Relu-op1") {
                    k.output(0, TensorRef::host(DType::Float32, &[2], &x))
                        .unwrap();
                }
            };
            if dumping {
                match d.begin_dumping_step().unwrap() {
                    None => quiet.push(true),
                    Some(st) => {
                        quiet.push(false);
                        report(&st);
                        st.finish().unwrap();
                    }
                }
            } else {
                let st = d.begin_step();
                quiet.push(st.dumps_nothing());
                report(&st);
                st.finish().unwrap();
            }
            d.save("loss", TensorRef::host(DType::Float32, &[2], &x))
                .unwrap();
        }
        let next = d.next_step();
        let report = d.close().unwrap();
        let root = at.display().to_string();
        let events: Vec<String> = events
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.replace(&root, "ROOT"))
            .collect();
        let mut rows = Vec::new();
        for s in 0..4 {
            let csv = at.join(format!("rank_0/Net/0/{s}/statistic.csv"));
            if let Ok(t) = std::fs::read_to_string(csv) {
                rows.push((
                    s,
                    t.lines()
                        .map(|l| l.split(',').nth(1).unwrap().to_owned())
                        .collect::<Vec<_>>(),
                ));
            }
        }
        (quiet, next, report, events, rows)
    };
    for (i, config) in [
        (0, "[]", "0|2"),
        (1, r#"["no-such-kernel"]"#, "all"),
        (1, r#"["Default/relu1/Relu-op1"]"#, "1-2"),
        (0, "[]", "9"),
    ]
    .into_iter()
    .enumerate()
    {
        let a = drive(&r.join(format!("{i}-step")), config, false);
        let b = drive(&r.join(format!("{i}-dumping")), config, true);
        assert_eq!(a, b, "config {config:?}");
        if i == 0 {
            assert_eq!(a.0, [false, true, false, true]);
            let names: Vec<String> = ["Op Name", "Default_relu1_Relu-op1", "loss"]
                .map(String::from)
                .to_vec();
            assert_eq!(a.4, [(0, names.clone()), (2, names)]);
        }
    }
    let _ = std::fs::remove_dir_all(&r);
}
