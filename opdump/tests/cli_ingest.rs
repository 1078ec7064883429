//! `opdump ingest` run as a user runs it: the binary as a subprocess on frame streams made here
//! from a small hand-written network (file, stdin, TCP on 127.0.0.1 with a sender killed
//! mid-stream, and streams damaged on purpose). The rows are checked against what the host
//! Dumper writes for the very same tensors.

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use dump_core::{
    DType,
    hash::md5,
    stats::summarize,
    wire::{
        BeginGraph, BeginStep, DTypeSet, EndStep, Frame, Hello, Io, KernelEntry, MAX_FRAME_LEN,
        MAX_WIRE_LEN, StatRecord, frame,
    },
};
use dump_host::{Dumper, TensorRef};

const CATEGORIES: &str = r#"["max", "min", "avg", "l2norm", "count", "nan count",
    "negative inf count", "positive inf count", "zero count", "md5"]"#;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-ingest-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config(dir: &Path, root: &Path) -> PathBuf {
    let p = dir.join("data_dump.json");
    std::fs::write(
        &p,
        format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
            "support_device": [0], "statistic_category": {CATEGORIES}}},
            "e2e_dump_settings": {{"enable": true}}}}"#,
            root.display()
        ),
    )
    .unwrap();
    p
}

/// The network's kernels: (type, name).
const KERNELS: [(&str, &str); 3] = [
    ("MatMul", "Default/fc1-Dense/MatMul-op0"),
    ("ReLU", "Default/relu-ReLU/ReLU-op1"),
    ("Softmax", "Default/Softmax-op2"),
];

/// One tensor of one step: kernel index, io, slot, shape, values.
struct T {
    kernel: usize,
    io: Io,
    slot: u32,
    shape: Vec<usize>,
    values: Vec<f32>,
}

/// A small real network (3x4 matmul, relu, softmax) for `steps` steps: its tensors per step.
fn network(steps: u32) -> Vec<Vec<T>> {
    let w: Vec<f32> = (0..12).map(|i| ((i * 7 % 11) as f32 - 5.0) / 4.0).collect();
    (0..steps)
        .map(|s| {
            let x: Vec<f32> = (0..4)
                .map(|i| (i as f32 - 1.5) * (s as f32 + 1.0))
                .collect();
            let y: Vec<f32> = (0..3)
                .map(|r| (0..4).map(|c| w[r * 4 + c] * x[c]).sum())
                .collect();
            let r: Vec<f32> = y.iter().map(|v| v.max(0.0)).collect();
            let m = r.iter().cloned().fold(f32::MIN, f32::max);
            let e: Vec<f32> = r.iter().map(|v| (v - m).exp()).collect();
            let z: f32 = e.iter().sum();
            let p: Vec<f32> = e.iter().map(|v| v / z).collect();
            let t = |kernel, io, slot, shape: &[usize], values: &[f32]| T {
                kernel,
                io,
                slot,
                shape: shape.to_vec(),
                values: values.to_vec(),
            };
            vec![
                t(0, Io::Input, 0, &[1, 4], &x),
                t(0, Io::Input, 1, &[3, 4], &w),
                t(0, Io::Output, 0, &[1, 3], &y),
                t(1, Io::Input, 0, &[1, 3], &y),
                t(1, Io::Output, 0, &[1, 3], &r),
                t(2, Io::Input, 0, &[1, 3], &r),
                t(2, Io::Output, 0, &[1, 3], &p),
            ]
        })
        .collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The agent's frames for `steps` steps, one wire-encoded frame each (seq from 0).
fn frames(steps: u32) -> Vec<Vec<u8>> {
    let mut f = vec![
        Frame::Hello(Hello {
            session: 7,
            agent: "test-agent 0.1".try_into().unwrap(),
            device: "host".try_into().unwrap(),
            dtypes: DTypeSet::of(&[DType::Float32]),
            md5: true,
            sample_cap: 0,
        }),
        Frame::BeginGraph(BeginGraph {
            graph_id: 0,
            kernels: KERNELS.len() as u32,
        }),
    ];
    for (i, (t, n)) in KERNELS.iter().enumerate() {
        f.push(Frame::Kernel(KernelEntry {
            graph_id: 0,
            index: i as u32,
            op_type: (*t).try_into().unwrap(),
            op: (*n).try_into().unwrap(),
        }));
    }
    for (step, tensors) in network(steps).iter().enumerate() {
        let iteration = step as u32;
        f.push(Frame::BeginStep(BeginStep {
            graph_id: 0,
            iteration,
        }));
        for t in tensors {
            let b = bytes(&t.values);
            let shape: Vec<u32> = t.shape.iter().map(|&d| d as u32).collect();
            let s = summarize(DType::Float32, &b, t.values.len())
                .unwrap()
                .unwrap();
            let mut r =
                StatRecord::new(KERNELS[t.kernel].1, t.io, t.slot, DType::Float32, &shape, s)
                    .unwrap()
                    .with_op_type(KERNELS[t.kernel].0)
                    .unwrap();
            r.iteration = iteration;
            r.md5 = Some(md5(&b));
            f.push(Frame::Stat(r));
        }
        f.push(Frame::EndStep(EndStep {
            graph_id: 0,
            iteration,
            records: tensors.len() as u32,
            dropped: 0,
        }));
    }
    f.iter()
        .enumerate()
        .map(|(seq, fr)| {
            let mut raw = [0u8; MAX_FRAME_LEN];
            let n = fr.build(seq as u32, &mut raw).unwrap();
            let mut wire = [0u8; MAX_WIRE_LEN];
            let w = frame::encode_wire(&raw[..n], &mut wire).unwrap();
            wire[..w].to_vec()
        })
        .collect()
}

/// What the host Dumper writes for the same network under `root`.
fn host_dump(dir: &Path, root: &Path, steps: u32) {
    let text = std::fs::read(config(dir, root)).unwrap();
    let mut d = Dumper::builder().open_json(text).unwrap();
    let order: Vec<&str> = KERNELS.iter().map(|k| k.1).collect();
    d.begin_graph(0, &order).unwrap();
    for tensors in network(steps) {
        let step = d.begin_step();
        for (i, (t, n)) in KERNELS.iter().enumerate() {
            let k = step.kernel(t, n).unwrap();
            for x in tensors.iter().filter(|x| x.kernel == i) {
                let b = bytes(&x.values);
                let r = TensorRef::host(DType::Float32, &x.shape, &b);
                match x.io {
                    Io::Input => k.input(x.slot, r).unwrap(),
                    Io::Output => k.output(x.slot, r).unwrap(),
                }
            }
        }
        step.finish().unwrap();
    }
    d.close().unwrap();
}

/// `statistic.csv` of iteration `it` with the Timestamp column (the 5th) blanked; `None` when
/// there is no file.
fn rows(root: &Path, it: u32) -> Option<String> {
    let csv =
        std::fs::read_to_string(root.join(format!("rank_0/Net/0/{it}/statistic.csv"))).ok()?;
    Some(
        csv.lines()
            .map(|l| {
                let mut f: Vec<&str> = l.split(',').collect();
                f[4] = "T";
                f.join(",") + "\n"
            })
            .collect(),
    )
}

fn ingest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .arg("ingest")
        .args(args)
        .output()
        .expect("run opdump")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn file_stream_rows_equal_the_host_dumpers() {
    let dir = tmpdir("file");
    let steps = 3;
    let stream: Vec<u8> = frames(steps).concat();
    let path = dir.join("run.opstream");
    std::fs::write(&path, &stream).unwrap();
    let (host, dev) = (dir.join("host"), dir.join("device"));
    host_dump(&dir, &host, steps);
    let cfg = config(&dir, Path::new("/nonexistent-replaced-by-out"));
    let o = ingest(&[
        path.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        dev.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("21 stat records -> 21 statistic rows"),
        "{out}"
    );
    assert!(text(&o.stderr).contains("agent `test-agent 0.1` on `host`, session 7"));
    for it in 0..steps {
        let (h, d) = (rows(&host, it).unwrap(), rows(&dev, it).unwrap());
        assert_eq!(h.lines().count(), 8, "{h}");
        assert_eq!(h, d, "iteration {it}");
    }
    // Same execution order, metadata, and no .npy.
    let order = "rank_0/execution_order/ms_execution_order_graph_0.csv";
    assert_eq!(
        std::fs::read(host.join(order)).unwrap(),
        std::fs::read(dev.join(order)).unwrap()
    );
    assert!(dev.join("rank_0/.dump_metadata").is_dir());
    let npy = walk(&dev)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "npy"));
    assert_eq!(npy.count(), 0);

    // The same stream from stdin.
    let stdin_out = dir.join("stdin");
    let mut child = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(["ingest", "-", "--config", cfg.to_str().unwrap(), "--out"])
        .arg(&stdin_out)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&stream).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(rows(&stdin_out, 2), rows(&host, 2));
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}

#[test]
fn damaged_frames_are_reported_with_offsets_and_skipped() {
    let dir = tmpdir("damaged");
    let f = frames(2);
    // Frames: 0 hello, 1 begin-graph, 2..5 kernels, 5 begin-step 0, 6..13 stats, 13 end-step,
    // 14 begin-step 1, 15..22 stats, 22 end-step.
    let mut stream = Vec::new();
    let mut offsets = Vec::new();
    for (i, fr) in f.iter().enumerate() {
        offsets.push(stream.len() as u64 + 1);
        let mut fr = fr.clone();
        if i == 7 {
            fr[10] ^= 0x40; // a flipped bit: CRC mismatch
        }
        stream.extend_from_slice(&fr);
        if i == 8 {
            stream.extend_from_slice(&f[8]); // duplicated
        }
        if i == 16 {
            stream.extend(std::iter::repeat_n(0x55u8, 3000)); // line noise, no delimiter
        }
    }
    // The last frame cut short: torn.
    stream.truncate(stream.len() - 5);
    let path = dir.join("damaged.bin");
    std::fs::write(&path, &stream).unwrap();
    let cfg = config(&dir, &dir.join("out"));
    let o = ingest(&[path.to_str().unwrap(), "--config", cfg.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let src = path.display().to_string();
    assert!(
        err.contains(&format!("{src}: offset {}: corrupt frame", offsets[7])),
        "{err}"
    );
    assert!(err.contains("duplicate frame (seq 8)"), "{err}");
    assert!(err.contains("over-long frame"), "{err}");
    assert!(err.contains("torn frame"), "{err}");
    assert!(
        err.contains("the agent sent 7 stat records, 6 arrived"),
        "{err}"
    );
    // Every intact record was kept: step 0 lost one (the corrupt one); the noise ends at the
    // next frame's opening delimiter, so step 1 lost nothing.
    let r0 = rows(&dir.join("out"), 0).unwrap();
    assert_eq!(r0.lines().count(), 1 + 6, "{r0}");
    assert!(!r0.contains("MatMul-op0,0,0,T,input,1"), "{r0}");
    let r1 = rows(&dir.join("out"), 1).unwrap();
    assert_eq!(r1.lines().count(), 1 + 7, "{r1}");
    // The torn frame was step 1's end-step: the step is still kept, and said to be unfinished.
    assert!(
        err.contains("iteration 1 has no end-step (its rows are kept)"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_exits_2_naming_what_is_wrong() {
    let dir = tmpdir("bad");
    let cfg = config(&dir, &dir.join("out"));
    let o = ingest(&["/nonexistent/stream.bin", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("cannot open /nonexistent/stream.bin"));
    let o = ingest(&["x", "--config", "/nonexistent/data_dump.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("cannot read /nonexistent/data_dump.json"));
    let tensor = dir.join("tensor.json");
    let t = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("\"statistic\",", "\"tensor\",");
    std::fs::write(&tensor, t).unwrap();
    let o = ingest(&["x", "--config", tensor.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("saved_data \"tensor\""),
        "{}",
        text(&o.stderr)
    );
    let o = ingest(&["tcp://256.0.0.1:1", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("cannot listen on tcp://256.0.0.1:1"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tcp_sender_killed_mid_stream_keeps_everything_before() {
    let dir = tmpdir("tcp");
    let f = frames(3);
    // Everything up to and including step 1's end-step (frame 22), then half of the next
    // frame: the sender dies there.
    let whole: Vec<u8> = f[..23].concat();
    let mut sent = whole.clone();
    sent.extend_from_slice(&f[23][..f[23].len() / 2]);
    let part = dir.join("part.bin");
    std::fs::write(&part, &sent).unwrap();
    let out = dir.join("out");
    let cfg = config(&dir, &out);
    let mut ingest = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args([
            "ingest",
            "tcp://127.0.0.1:0",
            "--config",
            cfg.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(ingest.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("opdump ingest: listening on tcp://")
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();
    let (host, port) = addr.rsplit_once(':').unwrap();
    // The sender: a separate process that writes the bytes and then hangs until killed.
    let mut sender = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec 3<>/dev/tcp/{host}/{port} && cat {} >&3 && exec sleep 60",
            part.display()
        ))
        .spawn()
        .expect("bash with /dev/tcp");
    // The rows are on disk while the sender is still connected.
    let t0 = Instant::now();
    while rows(&out, 1).map(|r| r.lines().count()) != Some(8) {
        assert!(t0.elapsed() < Duration::from_secs(30), "rows never arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    sender.kill().unwrap();
    sender.wait().unwrap();
    let o = ingest.wait_with_output().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert_eq!(o.status.code(), Some(1), "{rest}");
    assert!(rest.contains("torn frame"), "{rest}");
    assert!(text(&o.stdout).contains("14 stat records -> 14 statistic rows"));
    assert_eq!(rows(&out, 0).unwrap().lines().count(), 8);
    assert!(rows(&out, 2).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}
