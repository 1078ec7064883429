//! `opdump ingest` on a serial device, as a user runs it on /dev/ttyUSB0: here the device is
//! the slave side of a pseudo-terminal this test opens, and the agent's side (the master) is
//! fed the Cortex-M4 agent's real stream (`tests/fixtures/agent/agent-stream.opstream`). That
//! stream holds bytes a terminal in its default (cooked) mode eats or rewrites (^C, ^D, CR,
//! ^S/^Q, DEL), so the rows equal the file ingest's only if opdump switched the terminal to raw
//! mode. Also: the run ends on `--idle` silence and on a hang-up, the terminal's settings are
//! restored, and serial-only flags on a file are refused.

use std::{
    fs::File,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use rustix::{
    pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt},
    termios::{LocalModes, tcgetattr},
};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/agent/agent-stream.opstream")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-serial-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config(dir: &Path) -> PathBuf {
    let p = dir.join("data_dump.json");
    std::fs::write(
        &p,
        r#"{"common_dump_settings": {"dump_mode": 0, "path": "/replaced/by/out",
        "net_name": "Net", "iteration": "all", "saved_data": "statistic", "input_output": 0,
        "kernels": [], "support_device": [0], "statistic_category": ["max", "min", "avg",
        "l2norm", "count", "nan count", "zero count", "md5"]},
        "e2e_dump_settings": {"enable": true}}"#,
    )
    .unwrap();
    p
}

/// Every `statistic.csv` under `root`, by iteration, Timestamp column masked (each ingest
/// stamps its own rows).
fn rows(root: &Path) -> Vec<(String, String)> {
    let dir = root.join("rank_0/Net/0");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| {
            let csv = std::fs::read_to_string(e.path().join("statistic.csv")).unwrap();
            let masked: String = csv
                .lines()
                .map(|l| {
                    let mut f: Vec<&str> = l.split(',').collect();
                    f[4] = "T";
                    f.join(",") + "\n"
                })
                .collect();
            (e.file_name().to_string_lossy().into_owned(), masked)
        })
        .collect();
    out.sort();
    out
}

/// A pseudo-terminal: the master (the "agent" side) and the slave's path (the "device").
fn pty() -> (File, String) {
    // CLOEXEC: an opdump child holding the master open would never see the hang-up.
    let master =
        openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("openpt");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let name = ptsname(&master, Vec::new()).expect("ptsname");
    (File::from(master), name.into_string().unwrap())
}

fn spawn_ingest(device: &str, cfg: &Path, out: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(["ingest", device, "--config"])
        .arg(cfg)
        .arg("--out")
        .arg(out)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run opdump")
}

/// Waits for ingest's "reading serial device" line (the terminal is raw from then on); returns
/// the stderr lines read so far and the reader for the rest.
fn wait_until_raw(child: &mut Child) -> (Vec<String>, BufReader<std::process::ChildStderr>) {
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "ingest ended before reading: {seen:?}"
        );
        let raw = line.contains("reading serial device");
        seen.push(line);
        if raw {
            return (seen, err);
        }
    }
}

fn finish(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("opdump ingest still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn file_ingest(dir: &Path, cfg: &Path) -> PathBuf {
    let out = dir.join("from-file");
    let o = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .arg("ingest")
        .arg(fixture())
        .arg("--config")
        .arg(cfg)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[test]
fn the_fixture_holds_bytes_a_cooked_terminal_would_rewrite() {
    let d = std::fs::read(fixture()).unwrap();
    // ^C (VINTR), ^D (VEOF), CR (ICRNL), ^Q/^S (IXON), DEL (VERASE).
    for b in [0x03u8, 0x04, 0x0d, 0x11, 0x13, 0x7f] {
        assert!(
            d.contains(&b),
            "byte {b:#04x} missing: the raw-mode test would prove less"
        );
    }
}

#[test]
fn a_serial_device_in_raw_mode_gives_the_file_ingests_rows_and_is_restored() {
    let dir = tmpdir("idle");
    let cfg = config(&dir);
    let expected = rows(&file_ingest(&dir, &cfg));
    assert_eq!(expected.len(), 6, "the agent dumps 6 of its 8 steps");

    let (mut master, device) = pty();
    let before = tcgetattr(&master).unwrap();
    assert!(before.local_modes.contains(LocalModes::ICANON));
    let out = dir.join("from-serial");
    let mut child = spawn_ingest(&device, &cfg, &out, &["--idle", "1", "--baud", "115200"]);
    let (seen, mut err) = wait_until_raw(&mut child);
    assert!(
        seen.last().unwrap().contains(&format!(
            "reading serial device {device} in raw mode, 115200 baud"
        )),
        "{seen:?}"
    );
    // As a UART delivers it: in pieces.
    let stream = std::fs::read(fixture()).unwrap();
    for chunk in stream.chunks(777) {
        master.write_all(chunk).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let start = Instant::now();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let o = finish(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(0), "{seen:?}{rest}");
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "--idle 1 took {:?}",
        start.elapsed()
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains(&format!("{} bytes", stream.len())),
        "{stdout}"
    );
    assert!(stdout.contains("; 0 problem(s)"), "{stdout}{rest}");
    assert_eq!(rows(&out), expected);
    // The terminal is back in its old mode.
    let after = tcgetattr(&master).unwrap();
    assert_eq!(after.local_modes, before.local_modes);
    assert_eq!(after.input_modes, before.input_modes);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hang_up_ends_the_stream_and_keeps_what_arrived() {
    let dir = tmpdir("hangup");
    let cfg = config(&dir);
    let expected = rows(&file_ingest(&dir, &cfg));
    let (mut master, device) = pty();
    let out = dir.join("from-serial");
    let mut child = spawn_ingest(&device, &cfg, &out, &[]);
    let (_, mut err) = wait_until_raw(&mut child);
    master
        .write_all(&std::fs::read(fixture()).unwrap())
        .unwrap();
    // Let it drain, then unplug: the slave's reads fail with EIO, which ends the stream.
    std::thread::sleep(Duration::from_millis(1500));
    drop(master);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let o = finish(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(0), "{rest}");
    assert_eq!(rows(&out), expected);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serial_flags_on_a_file_or_bad_values_are_refused() {
    let dir = tmpdir("flags");
    let cfg = config(&dir);
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_opdump"))
            .arg("ingest")
            .args(args)
            .arg("--config")
            .arg(&cfg)
            .output()
            .unwrap()
    };
    let f = fixture();
    let f = f.to_str().unwrap();
    let o = run(&[f, "--baud", "115200"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("--baud applies to a serial device") && e.contains(f),
        "{e}"
    );
    let o = run(&["-", "--idle", "3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--idle applies to a serial device"));
    let (_master, device) = pty();
    let o = run(&[&device, "--idle=-1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--idle -1: expected seconds greater than 0"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
