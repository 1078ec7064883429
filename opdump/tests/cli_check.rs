//! `opdump check` run as a process: exit codes and output.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn opdump(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_opdump"));
    cmd.args(args);
    for v in [
        "MINDSPORE_DUMP_CONFIG",
        "MS_DIAGNOSTIC_DATA_PATH",
        "RANK_ID",
        "RANK",
    ] {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run opdump")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn valid() -> Value {
    json!({
        "common_dump_settings": {
            "dump_mode": 1, "path": "/tmp/opdump-cli/dump", "net_name": "Net", "iteration": "0|5-3",
            "input_output": 0, "kernels": ["conv"], "support_device": [0], "iteraton": "x"
        },
        "e2e_dump_settings": {"enable": true}
    })
}

#[test]
fn valid_config_prints_effective_json_and_warnings() {
    let dir = tmpdir("valid");
    let f = dir.join("cfg.json");
    std::fs::write(&f, valid().to_string()).unwrap();
    let out = opdump(&["check", f.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let eff: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(eff["common_dump_settings"]["saved_data"], json!("tensor"));
    assert_eq!(eff["common_dump_settings"]["initial_iteration"], json!(0));
    assert_eq!(eff["e2e_dump_settings"]["trans_flag"], json!(true));
    assert_eq!(eff["e2e_dump_settings"]["stat_calc_mode"], json!("host"));
    let err = text(&out.stderr);
    assert!(
        err.contains("warning: common_dump_settings.iteration: segment \"5-3\""),
        "{err}"
    );
    assert!(err.contains("did you mean \"iteration\""), "{err}");
    assert!(err.contains("ok: ") && err.contains("2 warnings"), "{err}");
    // The printed config is itself valid.
    let f2 = dir.join("eff.json");
    std::fs::write(&f2, &out.stdout).unwrap();
    let again = opdump(&["check", f2.to_str().unwrap()], &[]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert_eq!(again.stdout, out.stdout);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn invalid_config_prints_every_error_and_exits_2() {
    let dir = tmpdir("invalid");
    let f = dir.join("cfg.json");
    let mut doc = valid();
    doc["common_dump_settings"]["net_name"] = json!("a/b");
    doc["common_dump_settings"]["input_output"] = json!(7);
    doc["common_dump_settings"]["path"] = json!("rel");
    std::fs::write(&f, doc.to_string()).unwrap();
    let out = opdump(&["check", f.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    for needle in [
        "error: common_dump_settings.path: Dump path only support absolute path and should start with '/'",
        "error: common_dump_settings.net_name: net_name only supports alphabetic, digit, or {'-', '_'}, but got: a/b",
        "error: common_dump_settings.input_output: Dump Json Parse Failed. input_output should be 0, 1, 2",
        "has 3 errors",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in\n{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unreadable_and_bad_input_files() {
    let out = opdump(&["check", "/no/such/dir/cfg.json"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("Dump file:/no/such/dir/cfg.json open failed. Errno:2"));
    let dir = tmpdir("bad");
    for (name, bytes, needle) in [
        ("bin.json", &b"\xff\xfe{}"[..], "not UTF-8"),
        ("empty.json", &b""[..], "Parse dump json failed, error:"),
        (
            "syntax.json",
            &b"{\"a\": }"[..],
            "Parse dump json failed, error:",
        ),
        ("array.json", &b"[]"[..], "must be a JSON object"),
    ] {
        let f = dir.join(name);
        std::fs::write(&f, bytes).unwrap();
        let out = opdump(&["check", f.to_str().unwrap()], &[]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(
            text(&out.stderr).contains(needle),
            "{name}: {}",
            text(&out.stderr)
        );
    }
    // A directory is refused before it is opened, naming what it is.
    let out = opdump(&["check", dir.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("is a directory, not a regular file"),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn config_from_environment_when_no_file_given() {
    let dir = tmpdir("env");
    let f = dir.join("cfg.json");
    std::fs::write(&f, valid().to_string()).unwrap();
    let out = opdump(
        &["check"],
        &[("MINDSPORE_DUMP_CONFIG", f.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let txt = dir.join("cfg.txt");
    std::fs::write(&txt, valid().to_string()).unwrap();
    let out = opdump(
        &["check"],
        &[("MINDSPORE_DUMP_CONFIG", txt.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .contains("[DataDump] dump config file suffix only supports json! But got:.txt")
    );
    // Given explicitly, a non-.json name is checked but warned about.
    let out = opdump(&["check", txt.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("MindSpore would refuse this file"));
    let out = opdump(&["check"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("MINDSPORE_DUMP_CONFIG is not set"));
    // path "" takes MS_DIAGNOSTIC_DATA_PATH.
    let mut doc = valid();
    doc["common_dump_settings"]["path"] = json!("");
    std::fs::write(&f, doc.to_string()).unwrap();
    let out = opdump(
        &["check", f.to_str().unwrap()],
        &[("MS_DIAGNOSTIC_DATA_PATH", "/diag")],
    );
    assert_eq!(out.status.code(), Some(0));
    let eff: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        eff["common_dump_settings"]["path"],
        json!("/diag/debug_dump")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn device_option_and_help() {
    let dir = tmpdir("device");
    let f = dir.join("cfg.json");
    let mut doc = valid();
    doc["common_dump_settings"]["dump_mode"] = json!(2);
    std::fs::write(&f, doc.to_string()).unwrap();
    let p = f.to_str().unwrap();
    assert_eq!(opdump(&["check", p], &[]).status.code(), Some(2));
    assert_eq!(
        opdump(&["check", p, "--device", "ascend"], &[])
            .status
            .code(),
        Some(0)
    );
    let out = opdump(&["check", p, "--device", "npu"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cpu, gpu, ascend"));
    let out = opdump(&["check", "--help"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    assert!(
        help.contains("MINDSPORE_DUMP_CONFIG") && help.contains("--device"),
        "{help}"
    );
    let out = opdump(&[], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("check"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// CANN's acl.json: detected by its `dump` object, checked with CANN's rules and codes, every
/// error at once on a line naming the file; a valid one is summarised, and the Dumper refuses
/// to run from it with a clear reason.
#[test]
fn acl_json_is_detected_and_checked_with_canns_codes() {
    let dir = tmpdir("acl");
    let good = dir.join("acl.json");
    std::fs::write(
        &good,
        json!({"dump": {"dump_path": dir.to_str().unwrap(), "dump_mode": "all",
            "dump_list": [{"model_name": "resnet", "layer": ["conv1"]}],
            "dump_data": "stats", "dump_stats": ["Max", "Nan"]}})
        .to_string(),
    )
    .unwrap();
    let o = opdump(&["check", good.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["dump"], "operators");
    assert_eq!(summary["stats_only"], true);
    assert!(text(&o.stderr).contains("is a valid CANN acl.json (dump: operators"));

    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        json!({"dump": {"dump_path": "/no/such/dir", "dump_mode": "both",
            "dump_debug": "on", "dump_op_switch": "on", "dump_step": "7-3"}})
        .to_string(),
    )
    .unwrap();
    let o = opdump(&["check", bad.to_str().unwrap()], &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let p = bad.display().to_string();
    for needle in [
        format!(
            "{p}: error: dump.dump_mode: EP0002: \"both\" is not allowed; allowed: input, output, all"
        ),
        format!("{p}: error: dump.dump_debug: EP0005: dump_debug \"on\""),
        format!(
            "{p}: error: dump.dump_path: EP0003: \"/no/such/dir\" must be an existing directory"
        ),
        format!("{p}: error: dump.dump_step: EP0003: \"7-3\": the first step is greater"),
        format!("error: {p} has 4 errors (CANN acl.json): not a valid dump config"),
    ] {
        assert!(err.contains(&needle), "missing {needle:?} in\n{err}");
    }
    // The Dumper runs from it: check says so and how, and `opdump demo --config` writes
    // CANN's statistics csv per kernel in GE's layout.
    assert!(
        text(&o_good_stderr(&good)).contains("the Dumper runs from it"),
        "{}",
        text(&o_good_stderr(&good))
    );
    assert_eq!(summary["opdump"]["layout"], "GE");
    assert_eq!(summary["opdump"]["model_name"], "resnet");
    assert_eq!(summary["opdump"]["files"], "statistics csv per kernel");
    let all = dir.join("all.json");
    std::fs::write(
        &all,
        json!({"dump": {"dump_path": dir.to_str().unwrap(), "dump_mode": "all",
            "dump_list": [{"model_name": "lenet"}], "dump_data": "stats"}})
        .to_string(),
    )
    .unwrap();
    let o = opdump(
        &["demo", "--config", all.to_str().unwrap(), "--steps", "1"],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let time = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().len() == 14)
        .expect("a {time} directory");
    let step = time.path().join("0/lenet/0/0");
    let csvs: Vec<_> = std::fs::read_dir(&step)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !csvs.is_empty() && csvs.iter().all(|n| n.ends_with(".csv")),
        "{csvs:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `opdump check`'s stderr for `f`.
fn o_good_stderr(f: &std::path::Path) -> Vec<u8> {
    opdump(&["check", f.to_str().unwrap()], &[]).stderr
}

/// torchair's dump_config options as JSON: torchair's checks, then GE's.
#[test]
fn torchair_dump_config_is_checked_as_torchair_then_ge_would() {
    let dir = tmpdir("torchair");
    let f = dir.join("torchair.json");
    std::fs::write(
        &f,
        json!({"enable_dump": true, "dump_path": "/no/such/dir", "dump_step": "3-3|",
            "dump_layer": "conv1;x", "dump_mod": "all"})
        .to_string(),
    )
    .unwrap();
    let o = opdump(&["check", f.to_str().unwrap()], &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for needle in [
        "error: dump_mod: _DataDumpConfig has no option dump_mod",
        "error: dump_path: Please set legal dir path, /no/such/dir is not found",
        "error: dump_step: \"3-3|\" ends in '|': torchair accepts it, GE rejects it",
        "error: dump_step: \"3-3\": the first step is >= second step",
        "error: dump_layer: ';' is not allowed",
        "has 5 errors (torchair dump_config)",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in\n{err}");
    }
    std::fs::write(
        &f,
        json!({"enable_dump": true, "dump_path": dir.to_str().unwrap()}).to_string(),
    )
    .unwrap();
    let o = opdump(&["check", f.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["ge_dump_path_suffix"], "worldsize1_global_rank0");
    std::fs::remove_dir_all(&dir).unwrap();
}
