//! The Linux agent example (`examples/linux_agent.rs`, compiled in here) run end to end as an
//! edge box would: `opdump ingest tcp://127.0.0.1:0` listens, the agent streams the firmware's
//! network over TCP, and the `statistic.csv` files ingest writes equal, row for row (but for
//! the Timestamp column, which the agent does not send), those ingest writes from the qemu
//! Cortex-M4 agent's captured stream: the same library gives the same rows on both devices.

#[path = "../examples/linux_agent.rs"]
#[allow(dead_code)]
mod linux_agent;

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

/// The steps the firmware's plan dumps.
const DUMPED: [u32; 6] = [0, 2, 3, 5, 6, 7];

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-linux-agent-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config(dir: &Path, root: &Path) -> PathBuf {
    let p = dir.join(format!(
        "{}.json",
        root.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(
        &p,
        format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "all", "saved_data": "statistic", "input_output": 0,
            "kernels": [], "support_device": [0], "statistic_category": ["max", "min", "avg",
            "l2norm", "count", "nan count", "md5"]}},
            "e2e_dump_settings": {{"enable": true}}}}"#,
            root.display()
        ),
    )
    .unwrap();
    p
}

/// The rows of iteration `it` with the Timestamp column masked.
fn masked(root: &Path, it: u32) -> String {
    let p = root.join(format!("rank_0/Net/0/{it}/statistic.csv"));
    let csv = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    csv.lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(6, ',').collect();
            format!("{},{},{},{},T,{}\n", f[0], f[1], f[2], f[3], f[5])
        })
        .collect()
}

#[test]
fn the_linux_agent_over_tcp_gives_the_qemu_agents_rows() {
    let dir = tmpdir("tcp");
    let (tcp_out, qemu_out) = (dir.join("tcp"), dir.join("qemu"));

    let mut ingest = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(["ingest", "tcp://127.0.0.1:0", "--config"])
        .arg(config(&dir, &tcp_out))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start opdump ingest");
    let mut err = BufReader::new(ingest.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("opdump ingest: listening on tcp://")
        .unwrap_or_else(|| panic!("no listening line: {line:?}"))
        .to_owned();
    linux_agent::run(&addr).expect("the agent streams to ingest");
    let o = ingest.wait_with_output().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert_eq!(o.status.code(), Some(0), "{rest}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("132 stat records -> 132 statistic rows"),
        "{stdout}"
    );

    // The qemu agent's captured stream through the same command.
    let stream =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/agent/agent-stream.opstream");
    let q = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .arg("ingest")
        .arg(&stream)
        .arg("--config")
        .arg(config(&dir, &qemu_out))
        .output()
        .unwrap();
    assert_eq!(
        q.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&q.stderr)
    );

    for it in DUMPED {
        let (a, b) = (masked(&tcp_out, it), masked(&qemu_out, it));
        assert!(a.lines().count() > 1, "iteration {it} has rows");
        assert_eq!(
            a, b,
            "iteration {it}: the Linux agent's rows against the qemu agent's"
        );
    }
    for it in [1, 4] {
        assert!(
            !tcp_out.join(format!("rank_0/Net/0/{it}")).exists(),
            "iteration {it} is outside the agent's plan"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
