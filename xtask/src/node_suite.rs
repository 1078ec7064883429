//! `cargo xtask node-suite --dir DIR`: the ONNX backend node tests through every runtime of
//! `opdump run`, each output compared with the expected one by `opdump compare`.
//!
//! DIR is what `python3 tools/node_suite.py DIR` writes from the pinned `onnx` wheel (one
//! folder per test: `model.onnx`, `inputs/{j}.npy`, `expected/{output}.npy`, and
//! `manifest.tsv`). For each test and runtime, as a user would:
//!
//! 1. `opdump run DIR/T/model.onnx --runtime RT --input NAME=inputs/J.npy.. --out WORK`, killed
//!    after `--timeout` seconds (a **hang**); exit 101, a signal, or a panic message that
//!    opdump did not catch is a **panic**; exit 1 or 2 with an `error:` line is a **clean
//!    error** (the runtime cannot load or run the model, or opdump refuses an input), any
//!    other failure **unclean**;
//! 2. on exit 0, `opdump compare WORK DIR/T/expected --json --rtol 1e-3 --atol 1e-7` (the
//!    backend suite's own default tolerances; integers and bool exact): **ok** when every
//!    expected output is paired and none diverges, **wrong** when one diverges (the runtime
//!    computed another value: opdump dumps what the runtime returned), **unchecked** when an
//!    expected output is not in the dump (opdump dumps kernels; an output that is a graph
//!    input or a constant folded away has no kernel).
//!
//! Tests whose inputs or outputs are sequences, maps or optionals are **skipped** (listed in
//! the manifest). Results: one csv row per (test, runtime) in `target/node-suite/results.csv`
//! and a markdown table of counts per runtime in `target/node-suite/summary.md`
//! (BENCHMARKS.md holds the last one). Not part of `cargo xtask test`: it takes minutes.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use crate::toolchain::workspace_root;

/// The outcome of one test on one runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Ok,
    CleanError,
    Wrong,
    Unchecked,
    Unclean,
    Panic,
    Hang,
}

impl Outcome {
    const ALL: [Outcome; 7] = [
        Outcome::Ok,
        Outcome::CleanError,
        Outcome::Wrong,
        Outcome::Unchecked,
        Outcome::Unclean,
        Outcome::Panic,
        Outcome::Hang,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::CleanError => "clean error",
            Outcome::Wrong => "wrong",
            Outcome::Unchecked => "unchecked",
            Outcome::Unclean => "unclean",
            Outcome::Panic => "panic",
            Outcome::Hang => "hang",
        }
    }
}

/// One test of the manifest.
struct Test {
    name: String,
    inputs: Vec<String>,
    skip: Option<String>,
}

struct Options {
    dir: PathBuf,
    opdump: Option<PathBuf>,
    runtimes: Vec<String>,
    timeout: Duration,
    jobs: usize,
    filter: Option<String>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        dir: PathBuf::new(),
        opdump: None,
        runtimes: vec!["tract".into(), "ort".into(), "candle".into()],
        timeout: Duration::from_secs(30),
        jobs: std::thread::available_parallelism().map_or(2, |n| n.get()),
        filter: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("node-suite: {a} needs {what}"))
        };
        match a.as_str() {
            "--dir" => o.dir = PathBuf::from(value("a directory")?),
            "--opdump" => o.opdump = Some(PathBuf::from(value("a path")?)),
            "--runtimes" => {
                o.runtimes = value("a list")?.split(',').map(str::to_owned).collect();
                if let Some(r) = o
                    .runtimes
                    .iter()
                    .find(|r| !["tract", "ort", "candle"].contains(&r.as_str()))
                {
                    return Err(format!(
                        "node-suite: --runtimes {r:?}: runtimes are tract, ort and candle"
                    ));
                }
            }
            "--timeout" => {
                let v = value("seconds")?;
                let s: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| format!("node-suite: --timeout {v:?}: positive seconds"))?;
                o.timeout = Duration::from_secs_f64(s);
            }
            "--jobs" => {
                let v = value("a count")?;
                o.jobs = v
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n > 0)
                    .ok_or_else(|| format!("node-suite: --jobs {v:?}: a positive count"))?;
            }
            "--filter" => o.filter = Some(value("a substring")?),
            other => return Err(format!("node-suite: unknown argument {other:?}\n\n{USAGE}")),
        }
    }
    if o.dir.as_os_str().is_empty() {
        return Err(format!("node-suite: --dir is required\n\n{USAGE}"));
    }
    Ok(o)
}

const USAGE: &str =
    "usage: cargo xtask node-suite --dir DIR [--opdump PATH] [--runtimes tract,ort,candle]
                        [--timeout SECS] [--jobs N] [--filter SUBSTRING]

DIR: python3 -m pip install -r tools/node_suite.requirements.txt && python3 tools/node_suite.py DIR
Without --opdump, builds `cargo build --release -p opdump --features candle,ort` first.
ONNX Runtime needs ORT_DYLIB_PATH=$(bash adapters/dump-ort/ci/fetch-ort.sh).";

fn manifest(dir: &Path) -> Result<Vec<Test>, String> {
    let path = dir.join("manifest.tsv");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (make the suite with `python3 tools/node_suite.py {}`)",
            path.display(),
            dir.display()
        )
    })?;
    let mut tests = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 4 || f[0].is_empty() || f[0].contains(['/', '\\']) || f[0] == ".." {
            return Err(format!(
                "{}:{}: expected test, inputs, outputs, skip separated by tabs, got {line:?}",
                path.display(),
                n + 1
            ));
        }
        tests.push(Test {
            name: f[0].to_owned(),
            inputs: f[1]
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            skip: f[3].strip_prefix("skip:").map(str::to_owned),
        });
    }
    Ok(tests)
}

/// Runs `cmd` with stdout and stderr read by two threads (pipes, not files: a full disk
/// must not hide a run's error line), killed after `timeout`: `None` when it timed out, else
/// its exit code (`-1` for a signal), stdout and stderr (lossy: a runtime's message may quote
/// bytes that are not UTF-8).
fn run_timed(mut cmd: Command, timeout: Duration) -> Option<(i32, String, String)> {
    let mut child = match cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Some((-2, String::new(), format!("cannot start: {e}"))),
    };
    fn drain(r: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    }
    let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    status.map(|s| (s.code().unwrap_or(-1), out, err))
}

/// The first `error:` line of `stderr`, shortened.
/// Whether a run's detail says the binary was built without its runtime.
fn lacks_runtime(detail: &str) -> bool {
    detail.contains("was built without the")
}

fn error_line(stderr: &str) -> Option<String> {
    let l = stderr.lines().find(|l| l.starts_with("error: "))?;
    Some(l.chars().take(240).collect())
}

fn one(
    opdump: &Path,
    suite: &Path,
    t: &Test,
    rt: &str,
    work: &Path,
    timeout: Duration,
) -> (Outcome, String) {
    let _ = std::fs::remove_dir_all(work);
    if let Err(e) = std::fs::create_dir_all(work) {
        return (Outcome::Unclean, format!("{}: {e}", work.display()));
    }
    let dir = suite.join(&t.name);
    let mut cmd = Command::new(opdump);
    cmd.arg("run")
        .arg(dir.join("model.onnx"))
        .args(["--runtime", rt, "--out"])
        .arg(work.join("dump"))
        .env_remove("MINDSPORE_DUMP_CONFIG");
    for (j, name) in t.inputs.iter().enumerate() {
        let f = dir.join("inputs").join(format!("{j}.npy"));
        if f.is_file() {
            cmd.arg("--input").arg(format!("{name}={}", f.display()));
        }
    }
    let outcome = match run_timed(cmd, timeout) {
        None => (
            Outcome::Hang,
            format!("opdump run still running after {timeout:?}"),
        ),
        Some((code, _, err)) => {
            let uncaught = err.contains("panicked at") && !err.contains("(caught)");
            match code {
                0 => compare(opdump, &dir, work, timeout),
                _ if uncaught || code == 101 || code == -1 => (
                    Outcome::Panic,
                    err.lines()
                        .find(|l| l.contains("panicked"))
                        .unwrap_or("")
                        .chars()
                        .take(240)
                        .collect(),
                ),
                1 | 2 => match error_line(&err) {
                    Some(l) => (Outcome::CleanError, l),
                    None => (
                        Outcome::Unclean,
                        format!("exit {code} without an error line"),
                    ),
                },
                _ => (
                    Outcome::Unclean,
                    format!("exit {code}: {}", err.lines().next().unwrap_or("")),
                ),
            }
        }
    };
    let _ = std::fs::remove_dir_all(work);
    outcome
}

/// `opdump compare` of the dump against the expected outputs.
fn compare(opdump: &Path, dir: &Path, work: &Path, timeout: Duration) -> (Outcome, String) {
    let expected = dir.join("expected");
    let n_expected = std::fs::read_dir(&expected).map_or(0, |r| r.count());
    let mut cmd = Command::new(opdump);
    cmd.arg("compare")
        .arg(work.join("dump"))
        .arg(&expected)
        .args(["--json", "--rtol", "1e-3", "--atol", "1e-7"]);
    let Some((code, out, err)) = run_timed(cmd, timeout) else {
        return (Outcome::Hang, "opdump compare still running".into());
    };
    if code == 101 || code == -1 {
        return (
            Outcome::Panic,
            format!("opdump compare: {}", err.lines().next().unwrap_or("")),
        );
    }
    let Ok(j) = serde_json::from_str::<serde_json::Value>(&out) else {
        return (
            Outcome::Unchecked,
            format!(
                "opdump compare exit {code}: {}",
                error_line(&err).unwrap_or_default()
            ),
        );
    };
    let matched = j["matched"].as_u64().unwrap_or(0) as usize;
    let diverged = j["diverged"].as_u64().unwrap_or(0);
    if diverged > 0 {
        let f = &j["first_divergent"];
        return (
            Outcome::Wrong,
            format!(
                "{} {} {}: {}",
                f["op_name"].as_str().unwrap_or(""),
                f["io"].as_str().unwrap_or(""),
                f["slot"],
                f["reasons"][0].as_str().unwrap_or("")
            )
            .chars()
            .take(240)
            .collect(),
        );
    }
    if matched < n_expected {
        return (
            Outcome::Unchecked,
            format!(
                "{} of {n_expected} expected outputs are not in the dump",
                n_expected - matched
            ),
        );
    }
    (Outcome::Ok, String::new())
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Runs the suite (see the module docs).
pub fn run(args: &[String]) -> Result<(), String> {
    let o = parse(args)?;
    let tests = manifest(&o.dir)?;
    if o.runtimes.iter().any(|r| r == "ort")
        && std::env::var_os("ORT_DYLIB_PATH").is_none_or(|p| p.is_empty())
    {
        return Err(
            "node-suite: ONNX Runtime needs ORT_DYLIB_PATH=$(bash adapters/dump-ort/ci/fetch-ort.sh), or --runtimes tract,candle".into(),
        );
    }
    let root = workspace_root();
    let opdump = match &o.opdump {
        Some(p) => p.clone(),
        None => {
            crate::toolchain::run_step(
                std::ffi::OsStr::new(&std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())),
                &root,
                &[
                    "build",
                    "--release",
                    "-p",
                    "opdump",
                    "--features",
                    "candle,ort",
                ]
                .map(String::from),
            )?;
            root.join("target/release/opdump")
        }
    };
    let out_dir = root.join("target/node-suite");
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let selected: Vec<&Test> = tests
        .iter()
        .filter(|t| {
            o.filter
                .as_ref()
                .is_none_or(|f| t.name.contains(f.as_str()))
        })
        .collect();
    let jobs: Vec<(usize, &str)> = selected
        .iter()
        .enumerate()
        .filter(|(_, t)| t.skip.is_none())
        .flat_map(|(i, _)| o.runtimes.iter().map(move |r| (i, r.as_str())))
        .collect();
    // A binary without one of the runtimes would count every run of it as a clean error:
    // refuse it before the suite (the first test per runtime) and after it (the binary may
    // have been rebuilt meanwhile, as a `cargo test -p opdump` without features does).
    if let Some(probe) = selected.iter().find(|t| t.skip.is_none()) {
        for rt in &o.runtimes {
            let work = out_dir.join("work-probe");
            let (_, detail) = one(&opdump, &o.dir, probe, rt, &work, o.timeout);
            if lacks_runtime(&detail) {
                return Err(format!("node-suite: {}: {detail}", opdump.display()));
            }
        }
    }
    eprintln!(
        "node-suite: {} tests ({} skipped: sequence/map/optional values), {} runs on {} threads, timeout {:?}",
        selected.len(),
        selected.iter().filter(|t| t.skip.is_some()).count(),
        jobs.len(),
        o.jobs,
        o.timeout
    );
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, String, Outcome, String)>> = Mutex::new(Vec::new());
    let started = Instant::now();
    std::thread::scope(|s| {
        for w in 0..o.jobs {
            let (jobs, next, results, selected, opdump, out_dir, o) =
                (&jobs, &next, &results, &selected, &opdump, &out_dir, &o);
            s.spawn(move || {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(i, rt)) = jobs.get(k) else { break };
                    let work = out_dir.join(format!("work-{w}"));
                    let (outcome, detail) = one(opdump, &o.dir, selected[i], rt, &work, o.timeout);
                    let mut r = results.lock().unwrap_or_else(|p| p.into_inner());
                    r.push((i, rt.to_owned(), outcome, detail));
                    if r.len() % 200 == 0 {
                        eprintln!(
                            "  {} of {} runs, {:.0} s",
                            r.len(),
                            jobs.len(),
                            started.elapsed().as_secs_f64()
                        );
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some((_, rt, _, detail)) = results.iter().find(|r| lacks_runtime(&r.3)) {
        return Err(format!(
            "node-suite: {} lost the {rt} runtime during the suite (rebuilt meanwhile?): {detail}; no results written",
            opdump.display()
        ));
    }
    results.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut csv = String::from("test,runtime,outcome,detail\n");
    let mut counts: BTreeMap<&str, BTreeMap<Outcome, usize>> = BTreeMap::new();
    for (i, rt, outcome, detail) in &results {
        let _ = writeln!(
            csv,
            "{},{rt},{},{}",
            selected[*i].name,
            outcome.as_str(),
            csv_field(detail)
        );
        *counts
            .entry(rt.as_str())
            .or_default()
            .entry(*outcome)
            .or_insert(0) += 1;
    }
    for t in selected.iter().filter(|t| t.skip.is_some()) {
        let _ = writeln!(
            csv,
            "{},all,skipped,{}",
            t.name,
            csv_field(t.skip.as_deref().unwrap_or(""))
        );
    }
    let mut md = format!(
        "| runtime | {} | total |\n|---|{}---|\n",
        Outcome::ALL.map(Outcome::as_str).join(" | "),
        "---|".repeat(Outcome::ALL.len())
    );
    for rt in &o.runtimes {
        let c = counts.get(rt.as_str()).cloned().unwrap_or_default();
        let cells: Vec<String> = Outcome::ALL
            .iter()
            .map(|k| c.get(k).copied().unwrap_or(0).to_string())
            .collect();
        let _ = writeln!(
            md,
            "| {rt} | {} | {} |",
            cells.join(" | "),
            c.values().sum::<usize>()
        );
    }
    let csv_path = out_dir.join("results.csv");
    let md_path = out_dir.join("summary.md");
    std::fs::write(&csv_path, csv).map_err(|e| format!("{}: {e}", csv_path.display()))?;
    std::fs::write(&md_path, &md).map_err(|e| format!("{}: {e}", md_path.display()))?;
    println!("{md}");
    println!(
        "{} runs in {:.0} s; per test: {}; table: {}",
        results.len(),
        started.elapsed().as_secs_f64(),
        csv_path.display(),
        md_path.display()
    );
    let bad: usize = counts
        .values()
        .map(|c| {
            [Outcome::Panic, Outcome::Hang, Outcome::Unclean]
                .iter()
                .map(|k| c.get(k).copied().unwrap_or(0))
                .sum::<usize>()
        })
        .sum();
    if bad > 0 {
        return Err(format!(
            "{bad} runs panicked, hung or failed without a clean error (see {})",
            csv_path.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_binary_without_a_runtime_is_recognised_by_its_error() {
        for rt in [
            "the candle runtime (cargo feature `candle`)",
            "the ONNX Runtime runner (cargo feature `ort`)",
        ] {
            assert!(lacks_runtime(&format!(
                "error: this opdump was built without {rt}"
            )));
        }
        assert!(!lacks_runtime(
            "error: candle-onnx failed at node \"a\" (Add, #0): shape"
        ));
    }

    use super::*;

    fn manifest_of(text: &str) -> Result<Vec<Test>, String> {
        let dir = std::env::temp_dir().join(format!("node-suite-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("manifest.tsv"), text).unwrap();
        let r = manifest(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    #[test]
    fn manifest_rows_and_hostile_ones() {
        let t = manifest_of("# header\ntest_add\tx,y\tsum\t\ntest_seq\ts\to\tskip:sequence_type\n")
            .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            (t[0].name.as_str(), t[0].inputs.clone()),
            ("test_add", vec!["x".into(), "y".into()])
        );
        assert_eq!(t[0].skip, None);
        assert_eq!(t[1].skip.as_deref(), Some("sequence_type"));
        for bad in [
            "a\tb\n",
            "../x\ta\tb\t\n",
            "x/y\ta\tb\t\n",
            "\ta\tb\t\n",
            "..\ta\tb\t\n",
        ] {
            let e = manifest_of(bad).err().unwrap_or_default();
            assert!(
                e.contains("manifest.tsv:1: expected test, inputs"),
                "{bad:?}: {e}"
            );
        }
        let e = manifest(Path::new("/nonexistent/suite")).err().unwrap();
        assert!(e.contains("tools/node_suite.py /nonexistent/suite"), "{e}");
    }

    #[test]
    fn an_error_line_is_the_first_line_starting_with_error() {
        assert_eq!(
            error_line("warning: x\nerror: candle-onnx failed\n   0: bt\n").as_deref(),
            Some("error: candle-onnx failed")
        );
        assert_eq!(error_line("thread 'main' panicked at x\n"), None);
        assert_eq!(
            error_line(&format!("error: {}", "y".repeat(500))).map(|l| l.chars().count()),
            Some(240)
        );
    }

    #[test]
    fn a_run_past_its_timeout_is_killed() {
        let mut cmd = Command::new("sleep");
        cmd.arg("5");
        let start = Instant::now();
        assert!(run_timed(cmd, Duration::from_millis(200)).is_none());
        assert!(start.elapsed() < Duration::from_secs(3));
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "echo out; echo 'error: no' >&2; printf '\\377' >&2; exit 2",
        ]);
        let (code, out, err) = run_timed(cmd, Duration::from_secs(5)).unwrap();
        assert_eq!((code, out.as_str()), (2, "out\n"));
        assert!(err.starts_with("error: no\n"), "{err:?}");
    }

    #[test]
    fn arguments_are_checked() {
        let args = |a: &[&str]| parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(args(&[]).err().unwrap().contains("--dir is required"));
        assert!(
            args(&["--dir", "d", "--runtimes", "tract,onnx"])
                .err()
                .unwrap()
                .contains("\"onnx\"")
        );
        assert!(
            args(&["--dir", "d", "--timeout", "0"])
                .err()
                .unwrap()
                .contains("positive seconds")
        );
        assert!(
            args(&["--dir", "d", "--jobs", "x"])
                .err()
                .unwrap()
                .contains("a positive count")
        );
        assert!(
            args(&["--dir"])
                .err()
                .unwrap()
                .contains("--dir needs a directory")
        );
        let o = args(&[
            "--dir",
            "d",
            "--runtimes",
            "ort",
            "--timeout",
            "2.5",
            "--jobs",
            "3",
        ])
        .unwrap();
        assert_eq!(
            (o.runtimes, o.timeout, o.jobs),
            (vec!["ort".to_string()], Duration::from_millis(2500), 3)
        );
    }
}
