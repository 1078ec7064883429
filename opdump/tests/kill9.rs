//! Crash consistency: `opdump demo` is killed with SIGKILL in the middle of a dump; every
//! `.npy` under a final name must then load whole and every statistic.csv line must be whole.
//! Temporary files (`.opdump-tmp.*`) may remain; they never carry a final name.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use opdump_test_support::KillOnDrop;

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    walk(dir, &mut v);
    v
}

/// Fields of a csv line, commas inside double quotes kept in their field.
fn fields(line: &str) -> usize {
    let mut n = 1;
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => n += 1,
            _ => {}
        }
    }
    n
}

#[test]
fn sigkill_mid_dump_leaves_only_whole_files_and_rows() {
    let out = std::env::temp_dir().join(format!("opdump-kill9-{}", std::process::id()));
    let _ = fs::remove_dir_all(&out);
    let child = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args([
            "demo",
            "--steps",
            "100000",
            "--batch",
            "16",
            "--no-baseline",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start opdump demo");
    let mut child = KillOnDrop(child);
    // Wait until the dump is well under way (files in more than one state, and a step's rows
    // out: rows are written once per step), then SIGKILL.
    let start = Instant::now();
    loop {
        let all = files(&out);
        let n = all
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "npy"))
            .count();
        let rows = all
            .iter()
            .any(|p| p.file_name().is_some_and(|f| f == "statistic.csv"));
        if n >= 60 && rows {
            break;
        }
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("opdump demo ended before it could be killed: {status}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no dump files after 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.0.kill().expect("SIGKILL");
    let status = child.0.wait().unwrap();
    assert!(!status.success(), "killed, not finished");

    let all = files(&out);
    let mut npy = 0;
    let mut temps = 0;
    let mut rows = 0;
    for p in &all {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with(".opdump-tmp.") {
            temps += 1;
            continue;
        }
        if name.ends_with(".npy") {
            npy += 1;
            let f = dump_npy::read_file(p)
                .unwrap_or_else(|e| panic!("{} is truncated or corrupt: {e}", p.display()));
            let elems: usize = f.shape.iter().product();
            assert_eq!(f.data.len(), elems * f.dtype.size().unwrap());
        }
        if name == "statistic.csv" {
            let text = fs::read_to_string(p).unwrap();
            assert!(text.ends_with('\n'), "{}: last row is whole", p.display());
            let mut lines = text.lines();
            let header = fields(lines.next().unwrap());
            for l in lines {
                assert!(l.ends_with(','), "{}: row {l:?}", p.display());
                assert_eq!(fields(l), header + 1, "{}: row {l:?}", p.display());
                rows += 1;
            }
        }
    }
    assert!(npy >= 60, "{npy} npy files checked");
    assert!(rows > 0, "statistic rows checked");
    eprintln!("kill -9: {npy} whole npy files, {rows} whole rows, {temps} temp files left");

    // numpy agrees, when available (one process over the whole tree).
    let script = "import os,sys\nimport numpy as np\nn=0\nfor d,_,fs in os.walk(sys.argv[1]):\n    for f in fs:\n        if f.endswith('.npy'):\n            np.load(os.path.join(d,f)); n+=1\nprint(n)\n";
    if opdump_test_support::require(opdump_test_support::Prereq::Numpy) {
        let o = Command::new("python3")
            .args(["-c", script])
            .arg(&out)
            .output()
            .expect("run python3");
        assert!(
            o.status.success(),
            "numpy failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let n: usize = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
        assert_eq!(n, npy, "numpy loaded every npy");
    }
    let _ = fs::remove_dir_all(&out);
}

/// Starts `opdump demo` with `args` (output to `out`, nothing printed).
/// Polls until `ready` (the demo's trigger write under way), then SIGKILLs the demo and reaps
/// it; fails if the demo ends first or nothing happens within 120 s.
fn kill_once(child: &mut KillOnDrop, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(child.0.try_wait().unwrap().is_none(), "the demo ended");
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no trigger write"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.0.kill().expect("SIGKILL");
    child.0.wait().unwrap();
}

fn demo(out: &Path, args: &[&str]) -> KillOnDrop {
    let child = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(["demo", "--no-baseline", "--categories", "default", "--out"])
        .arg(out)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start opdump demo");
    KillOnDrop(child)
}

/// Checks what a killed run left: every `.npy` under a final name loads whole, every
/// statistic.csv is whole (the recorder writes each table in one piece), and `trigger.json`,
/// when present, is whole JSON written after every tensor file it counts.
fn check_flight_leftovers(out: &Path) -> (usize, bool) {
    let mut npy = 0;
    for p in files(out) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with(".opdump-tmp.") {
            continue;
        }
        if name.ends_with(".npy") {
            dump_npy::read_file(&p)
                .unwrap_or_else(|e| panic!("{} is truncated or corrupt: {e}", p.display()));
            npy += 1;
        }
        if name == "statistic.csv" {
            let text = fs::read_to_string(&p).unwrap();
            let mut lines = text.lines();
            let header = fields(lines.next().unwrap());
            assert!(text.ends_with('\n'));
            for l in lines {
                assert_eq!(fields(l), header + 1, "{}: row {l:?}", p.display());
            }
        }
    }
    let trigger = out.join("rank_0/trigger.json");
    let done = trigger.exists();
    if done {
        let t: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&trigger).unwrap()).expect("whole JSON");
        let counted = t["tensor_files"].as_u64().unwrap() as usize;
        assert_eq!(
            npy, counted,
            "trigger.json comes after every file it counts"
        );
    }
    (npy, done)
}

#[test]
fn sigkill_while_recording_leaves_nothing() {
    let out = std::env::temp_dir().join(format!("opdump-kill9-rec-{}", std::process::id()));
    let _ = fs::remove_dir_all(&out);
    let mut child = demo(&out, &["--steps", "100000", "--flight-recorder", "2"]);
    std::thread::sleep(Duration::from_millis(1500)); // several steps held in memory
    assert!(child.0.try_wait().unwrap().is_none(), "still running");
    child.0.kill().expect("SIGKILL");
    child.0.wait().unwrap();
    assert!(files(&out).is_empty(), "{:?}", files(&out));
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn sigkill_during_a_trigger_write_leaves_only_whole_files() {
    let out = std::env::temp_dir().join(format!("opdump-kill9-trig-{}", std::process::id()));
    let mut seen_partial = false;
    // The write of 4 steps (800+ files) takes a while; kill at the first files, a few tries
    // in case a run finished its write before the kill landed.
    for attempt in 0..3 {
        let _ = fs::remove_dir_all(&out);
        let mut child = demo(
            &out,
            &[
                "--steps",
                "100000",
                "--batch",
                "16",
                "--flight-recorder",
                "3",
                "--inject-nan",
                "3",
            ],
        );
        kill_once(&mut child, || files(&out).len() >= 5 + attempt * 40);
        let (npy, done) = check_flight_leftovers(&out);
        eprintln!("kill -9 during the trigger write: {npy} whole npy files, trigger.json {done}");
        if !done {
            seen_partial = true;
            break;
        }
    }
    assert!(seen_partial, "no kill landed inside a trigger write");
    let _ = fs::remove_dir_all(&out);
}

/// The flight recorder in msprobe's layout, killed during a trigger's write: every file under
/// a final name is whole, every `dump.json` there is whole JSON whose tensor files are all on
/// disk (a step's dump.json comes after its tensors), and `trigger.json` (at the dump path)
/// only after every tensor file it counts.
#[test]
fn sigkill_during_an_msprobe_trigger_write_leaves_only_whole_files() {
    let out = std::env::temp_dir().join(format!("opdump-kill9-mstrig-{}", std::process::id()));
    let config = std::env::temp_dir().join(format!("opdump-kill9-ms-{}.json", std::process::id()));
    fs::write(
        &config,
        r#"{"task": "tensor", "dump_path": "/tmp/unused", "rank": [], "step": [], "level": "mix",
            "tensor": {"scope": [], "list": [], "data_mode": ["all"], "file_format": "npy"}}"#,
    )
    .unwrap();
    let mut seen_partial = false;
    let mut seen_doc = false;
    for attempt in 0..4 {
        let _ = fs::remove_dir_all(&out);
        let mut child = demo(
            &out,
            &[
                "--config",
                config.to_str().unwrap(),
                "--steps",
                "100000",
                "--batch",
                "16",
                "--flight-recorder",
                "3",
                "--inject-nan",
                "3",
            ],
        );
        // The first tries kill among the tensor files, the last ones once a dump.json is
        // there (they come after every tensor file of their step).
        let has_doc = |out: &Path| files(out).iter().any(|p| p.ends_with("rank0/dump.json"));
        kill_once(&mut child, || {
            if attempt < 2 {
                files(&out).len() >= 5 + attempt * 150
            } else {
                has_doc(&out)
            }
        });
        let mut npy = 0;
        for p in files(&out) {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with(".opdump-tmp.") {
                continue;
            }
            if name.ends_with(".npy") {
                dump_npy::read_file(&p)
                    .unwrap_or_else(|e| panic!("{} is truncated or corrupt: {e}", p.display()));
                npy += 1;
            }
            if name == "dump.json" {
                seen_doc = true;
                let doc: serde_json::Value =
                    serde_json::from_str(&fs::read_to_string(&p).unwrap()).expect("whole JSON");
                let dir = p.parent().unwrap().join("dump_tensor_data");
                for (call, entry) in doc["data"].as_object().unwrap() {
                    for side in ["input_args", "output"] {
                        for t in entry[side].as_array().into_iter().flatten() {
                            let f = dir.join(t["data_name"].as_str().unwrap());
                            assert!(f.exists(), "{call}: {} not on disk", f.display());
                        }
                    }
                }
            }
        }
        let trigger = out.join("trigger.json");
        let done = trigger.exists();
        if done {
            let t: serde_json::Value =
                serde_json::from_str(&fs::read_to_string(&trigger).unwrap()).expect("whole JSON");
            assert_eq!(npy, t["tensor_files"].as_u64().unwrap() as usize);
        }
        eprintln!("kill -9 during the msprobe trigger write: {npy} npy, trigger.json {done}");
        seen_partial |= !done;
    }
    assert!(seen_partial, "no kill landed inside a trigger write");
    assert!(seen_doc, "no dump.json was checked");
    let _ = fs::remove_dir_all(&out);
    let _ = fs::remove_file(&config);
}
