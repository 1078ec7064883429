//! `opdump check` (run as a process) and the Dumper read a config through one path: a table of
//! configs goes through both, and each is accepted by both or rejected by both. Plus the input
//! bounds: special files (FIFO, `/dev/zero`, a directory) are refused at once, a config over
//! the size bound is refused, and 160,000 `kernels` entries are checked in seconds.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use dump_host::{DumpOptions, Dumper};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-parity-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `opdump` with exactly `env`, killing it after `limit`. Its output goes to files (a
/// large effective config would fill a pipe nobody reads yet).
fn opdump(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Output {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = std::env::temp_dir().join(format!("opdump-parity-{}-out{n}", std::process::id()));
    let (out_p, err_p) = (base.with_extension("stdout"), base.with_extension("stderr"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_p).unwrap())
        .stderr(std::fs::File::create(&err_p).unwrap())
        .spawn()
        .expect("run opdump");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "opdump {args:?} still running after {limit:?} (killed); stderr: {}",
                std::fs::read_to_string(&err_p).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = Output {
        status,
        stdout: std::fs::read(&out_p).unwrap(),
        stderr: std::fs::read(&err_p).unwrap(),
    };
    let _ = (std::fs::remove_file(out_p), std::fs::remove_file(err_p));
    out
}

/// Opens a Dumper on `path` as `Dumper::from_env` would with `env`, on another thread, failing
/// the test if it does not return within `limit`. `Ok` when the Dumper opened.
fn dumper(path: &Path, env: &[(&str, &str)], limit: Duration) -> Result<(), String> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let path = path.to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = DumpOptions::from_env(&env)
            .and_then(|opts| {
                Dumper::builder()
                    .env(&env)
                    .options(opts.clone())
                    .open_file(&path)
            })
            .and_then(|mut d| d.close().map(|_| ()))
            .map_err(|e| e.to_string());
        let _ = tx.send(r);
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the Dumper did not open within {limit:?}"))
}

/// Environment variables of one row.
type Vars<'a> = Vec<(&'a str, &'a str)>;

fn config(root: &Path, common_extra: &str) -> String {
    format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "input_output": 0, "kernels": [], "support_device": [0]{common_extra}}},
        "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    )
}

#[test]
fn check_and_the_dumper_accept_and_reject_the_same_configs() {
    let dir = tmpdir("table");
    let root = dir.join("dump");
    let valid = config(&root, "").into_bytes();
    let mut non_utf8 = config(&root, "")
        .replace("\"Net\"", "\"N\u{e9}t\"")
        .into_bytes();
    // Latin-1 é instead of UTF-8: one invalid byte inside a string.
    let at = non_utf8.windows(2).position(|w| w == [0xc3, 0xa9]).unwrap();
    non_utf8.splice(at..at + 2, [0xe9]);
    let too_large = dir.join("too_large.json");
    std::fs::File::create(&too_large)
        .unwrap()
        .set_len(dump_host::config::MAX_CONFIG_BYTES + 1)
        .unwrap();
    let put = |name: &str, bytes: Vec<u8>| {
        let f = dir.join(name);
        std::fs::write(&f, bytes).unwrap();
        f
    };
    let valid_f = put("valid.json", valid);
    let mode2 = put(
        "mode2.json",
        config(&root, r#", "dump_mode": 2"#).into_bytes(),
    );
    // (what, config file, environment, accepted?)
    let rows: Vec<(&str, PathBuf, Vars<'_>, bool)> = vec![
        ("valid", valid_f.clone(), vec![], true),
        ("not UTF-8", put("utf8.json", non_utf8), vec![], false),
        (
            "JSON syntax",
            put("syntax.json", b"{\"common_dump_settings\": ".to_vec()),
            vec![],
            false,
        ),
        (
            "bad regex in dump_mode 1",
            put(
                "regex.json",
                config(&root, r#", "dump_mode": 1, "kernels": ["name-regex(()"]"#).into_bytes(),
            ),
            vec![],
            false,
        ),
        (
            "statistic_category not read with saved_data tensor",
            put(
                "category.json",
                config(&root, r#", "statistic_category": 5"#).into_bytes(),
            ),
            vec![],
            true,
        ),
        (
            "bad RANK_ID",
            valid_f.clone(),
            vec![("RANK_ID", "abc")],
            false,
        ),
        (
            "bad OPDUMP_BF16",
            valid_f.clone(),
            vec![("OPDUMP_BF16", "half")],
            false,
        ),
        ("dump_mode 2 on CPU", mode2.clone(), vec![], false),
        (
            "dump_mode 2 on Ascend",
            mode2,
            vec![("OPDUMP_DEVICE", "ascend")],
            true,
        ),
        ("over the size bound", too_large, vec![], false),
        ("a directory", dir.clone(), vec![], false),
    ];
    for (what, file, env, accepted) in rows {
        let out = opdump(
            &["check", file.to_str().unwrap()],
            &env,
            Duration::from_secs(30),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let checked = out.status.code() == Some(0);
        let opened = dumper(&file, &env, Duration::from_secs(30));
        assert_eq!(
            checked,
            accepted,
            "{what}: opdump check exit {:?}: {stderr}",
            out.status.code()
        );
        assert_eq!(
            opened.is_ok(),
            accepted,
            "{what}: the Dumper gave {opened:?}"
        );
        if !accepted {
            assert!(
                stderr.contains(&file.display().to_string())
                    || stderr.contains("RANK_ID")
                    || stderr.contains("OPDUMP_BF16"),
                "{what}: the error names the file or the variable: {stderr}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn special_files_are_refused_at_once() {
    let dir = tmpdir("special");
    let fifo = dir.join("fifo.json");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "mkfifo is needed for this test"
        );
        eprintln!("skipped the FIFO case: mkfifo failed");
    }
    let mut cases: Vec<(PathBuf, &str)> = vec![(PathBuf::from("/dev/zero"), "character device")];
    if fifo.exists() {
        cases.push((fifo.clone(), "FIFO"));
    }
    for (p, kind) in cases {
        let start = Instant::now();
        let out = opdump(
            &["check", p.to_str().unwrap()],
            &[],
            Duration::from_secs(10),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", p.display());
        assert!(
            stderr.contains(&p.display().to_string()) && stderr.contains(kind),
            "{stderr}"
        );
        assert!(stderr.contains("not a regular file"), "{stderr}");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        let e = dumper(&p, &[], Duration::from_secs(10)).unwrap_err();
        assert!(e.contains(kind), "{e}");
        // `opdump demo --config` reads its config the same way.
        let out = opdump(
            &["demo", "--config", p.to_str().unwrap()],
            &[],
            Duration::from_secs(10),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "demo: {stderr}");
        assert!(stderr.contains(kind), "demo: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn many_kernels_are_checked_in_seconds() {
    let dir = tmpdir("kernels");
    let names: Vec<String> = (0..160_000)
        .map(|i| format!("\"Default/network/layer{}/Conv2D-op{i}\"", i % 997))
        .collect();
    let extra = format!(
        r#", "dump_mode": 1, "kernels": [{}, {}]"#,
        names.join(","),
        names[0]
    );
    let f = dir.join("kernels.json");
    std::fs::write(&f, config(&dir.join("dump"), &extra)).unwrap();
    let start = Instant::now();
    let out = opdump(
        &["check", f.to_str().unwrap()],
        &[],
        Duration::from_secs(120),
    );
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("Duplicate dump kernel name:Default/network/layer0/Conv2D-op0"));
    // Linear work takes about 2 s of CPU in a debug build; the bound is loose because the
    // machine may be busy. Quadratic de-duplication (1.3e10 string comparisons, 22 s in a
    // release build) is far above it.
    assert!(took < Duration::from_secs(60), "check took {took:?}");
    // The Dumper reads the same config as fast (its 160,000 unused-kernel events at close are
    // not what is measured here).
    let start = Instant::now();
    let mut d = Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions::default())
        .events(dump_host::diag::EventSink::ignore())
        .open_file(&f)
        .unwrap();
    let took = start.elapsed();
    d.close().unwrap();
    assert!(
        took < Duration::from_secs(60),
        "the Dumper took {took:?} to open"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
