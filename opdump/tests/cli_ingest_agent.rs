//! The Cortex-M4 agent's real stream (`tests/fixtures/agent/agent-stream.opstream`, captured by
//! `cargo xtask agent-qemu`, which checks it is still what the firmware sends) through the CLI
//! as a user runs it: `opdump ingest` gives the `statistic.csv` the host Dumper writes for the
//! same network recomputed on the host (`firmware/src/net.rs`, compiled in here), byte for byte
//! but for the Timestamp column; `opdump inspect` and `opdump compare` read the stream directly.

#[path = "../../firmware/src/net.rs"]
#[allow(dead_code)]
mod net;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use dump_core::DType;
use dump_host::{Dumper, TensorRef};

/// The firmware's plan: weight seed, steps run, steps dumped.
const WEIGHT_SEED: u32 = 0x0BAD_5EED;
const STEPS: u32 = 8;
const DUMPED: [u32; 6] = [0, 2, 3, 5, 6, 7];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/agent/agent-stream.opstream")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-agent-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config(dir: &Path, root: &Path, iteration: &str) -> PathBuf {
    let p = dir.join(format!("data_dump_{}.json", iteration.replace('|', "_")));
    std::fs::write(
        &p,
        format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "{iteration}", "saved_data": "statistic", "input_output": 0,
            "kernels": [], "support_device": [0], "statistic_category": ["max", "min", "avg",
            "l2norm", "count", "negative zero count", "positive zero count", "nan count",
            "negative inf count", "positive inf count", "zero count", "md5"]}},
            "e2e_dump_settings": {{"enable": true}}}}"#,
            root.display()
        ),
    )
    .unwrap();
    p
}

/// The host Dumper on the same network, same steps.
fn host_dump(cfg: &Path) {
    let mut d = Dumper::builder()
        .open_json(std::fs::read(cfg).unwrap())
        .unwrap();
    let order: Vec<&str> = net::KERNELS.iter().map(|k| k.1).collect();
    d.begin_graph(0, &order).unwrap();
    let weights = net::Weights::seeded(WEIGHT_SEED);
    let mut act = net::Activations::ZERO;
    for step in 0..STEPS {
        let x = net::input(step);
        let s = d.begin_step();
        net::run(&weights, &x, &mut act, |kernel, tensors| {
            let (t, n) = net::KERNELS[kernel];
            let Some(k) = s.kernel(t, n) else { return };
            for t in tensors {
                let shape: Vec<usize> = t.shape.iter().map(|&d| d as usize).collect();
                let b: &[u8] = bytemuck::cast_slice(t.data);
                let r = TensorRef::host(DType::Float32, &shape, b);
                if t.output {
                    k.output(t.slot, r).unwrap();
                } else {
                    k.input(t.slot, r).unwrap();
                }
            }
        });
        s.finish().unwrap();
    }
    d.close().unwrap();
}

fn masked(root: &Path, it: u32) -> String {
    let p = root.join(format!("rank_0/Net/0/{it}/statistic.csv"));
    let csv = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    csv.lines()
        .map(|l| {
            // Shapes are quoted ("(1,4)"): only the first five fields are split off.
            let f: Vec<&str> = l.splitn(6, ',').collect();
            format!("{},{},{},{},T,{}\n", f[0], f[1], f[2], f[3], f[5])
        })
        .collect()
}

fn opdump(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .output()
        .expect("run opdump")
}

#[test]
fn qemu_agent_stream_gives_the_host_dumpers_rows() {
    let dir = tmpdir("rows");
    let (host, dev) = (dir.join("host"), dir.join("device"));
    host_dump(&config(&dir, &host, "0|2-3|5-7"));
    let cfg = config(&dir, &dev, "all");
    let stream = fixture();
    let o = opdump(&[
        "ingest",
        stream.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("132 stat records -> 132 statistic rows"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(err.contains("on `cortex-m4"), "{err}");
    for it in DUMPED {
        let (h, d) = (masked(&host, it), masked(&dev, it));
        assert_eq!(h.lines().count(), 23, "{h}");
        assert_eq!(h, d, "iteration {it}");
    }
    for it in [1, 4] {
        assert!(!dev.join(format!("rank_0/Net/0/{it}")).exists());
    }
    let order = "rank_0/execution_order/ms_execution_order_graph_0.csv";
    assert_eq!(
        std::fs::read(host.join(order)).unwrap(),
        std::fs::read(dev.join(order)).unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn inspect_and_compare_read_the_stream_directly() {
    let dir = tmpdir("dialect");
    let host = dir.join("host");
    host_dump(&config(&dir, &host, "0|2-3|5-7"));
    let stream = fixture();
    let s = stream.to_str().unwrap();
    // The firmware's network overflows at step 7 (its conv output goes NaN): inspect finds it
    // in the device's stream, exit code 1.
    let o = opdump(&["inspect", s]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("(stream layout): 132 tensors, 48 kernels"),
        "{out}"
    );
    assert!(
        out.contains("first non-finite operator: rank 0 iteration 7 graph 0: Conv2D"),
        "{out}"
    );
    // Device run vs host run of the same network: no divergence.
    let o = opdump(&["compare", s, host.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A damaged copy: the problem is reported with its offset, the rest still read.
    let mut bytes = std::fs::read(&stream).unwrap();
    bytes[5000] ^= 0x10;
    let bad = dir.join("bad.opstream");
    std::fs::write(&bad, &bytes).unwrap();
    let o = opdump(&["inspect", bad.to_str().unwrap(), "--json"]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(all.contains("Corrupt"), "{all}");
    let _ = std::fs::remove_dir_all(&dir);
}
