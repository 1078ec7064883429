//! Table-driven tests per key of `data_dump.json`: type errors, bounds, coercions, defaults,
//! environment, every-error-at-once, and the effective-config round trip.

mod support;

use dump_host::config::{
    Device, DumpMode, InputOutput, OpDebugMode, PrecisionMode, SavedData, StatCalcMode,
};
use serde_json::{Value, json};
use support::*;

const C: &str = "common_dump_settings";
const E: &str = "e2e_dump_settings";

#[test]
fn defaults_are_filled_in() {
    let mut doc = base();
    doc[C].as_object_mut().unwrap().remove("op_debug_mode");
    doc[C].as_object_mut().unwrap().remove("saved_data");
    doc[E] = json!({});
    let v = accepts(&doc, Device::Cpu);
    let c = &v.config;
    assert!(v.warnings.is_empty(), "{}", v.warnings);
    assert_eq!(c.op_debug_mode, OpDebugMode::Off);
    assert_eq!(c.saved_data, SavedData::Tensor);
    assert_eq!(c.initial_iteration, 0);
    assert_eq!(c.overflow_number, 0);
    assert_eq!(c.statistic_category, ["max", "min", "l2norm"]);
    assert!(!c.e2e.enable && c.e2e.trans_flag && !c.e2e.save_kernel_args);
    assert_eq!(c.e2e.stat_calc_mode, StatCalcMode::Host);
    assert_eq!(c.e2e.device_stat_precision_mode, PrecisionMode::High);
    assert_eq!((c.e2e.sample_mode, c.e2e.sample_num), (0, 100));
    assert_eq!(c.dump_mode, DumpMode::All);
    assert_eq!(c.input_output, InputOutput::Both);
    assert_eq!(c.support_device, [0, 1, 2, 3, 4, 5, 6, 7]);
}

#[test]
fn type_errors_per_key() {
    let uint_keys = [
        "dump_mode",
        "input_output",
        "op_debug_mode",
        "initial_iteration",
    ];
    for key in uint_keys {
        for bad in [
            json!("1"),
            json!(-1),
            json!(1.5),
            json!(1.0),
            json!(true),
            json!(null),
        ] {
            rejects(
                &with(C, key, Some(bad)),
                Device::Cpu,
                &format!("{C}.{key}"),
                &format!("Dump config parse failed, {key} should be unsigned int type"),
            );
        }
    }
    for key in ["path", "net_name", "iteration", "saved_data"] {
        rejects(
            &with(C, key, Some(json!(1))),
            Device::Cpu,
            &format!("{C}.{key}"),
            &format!("Dump config parse failed, {key} should be string type"),
        );
    }
    for key in ["kernels", "support_device"] {
        rejects(
            &with(C, key, Some(json!("0"))),
            Device::Cpu,
            &format!("{C}.{key}"),
            &format!("Dump config parse failed, {key} should be array type"),
        );
    }
    for key in ["enable", "trans_flag", "save_kernel_args"] {
        rejects(
            &with(E, key, Some(json!(1))),
            Device::Cpu,
            &format!("{E}.{key}"),
            "Dump Json Parse Failed. 'enable' should be boolean type",
        );
    }
    rejects(
        &with(E, "stat_calc_mode", Some(json!(0))),
        Device::Cpu,
        &format!("{E}.stat_calc_mode"),
        "Dump config parse failed, stat_calc_mode should be string type",
    );
    // overflow_number is type-checked only where it is read (op_debug_mode 3); elsewhere its
    // presence alone is the error (config_parity.rs covers every key and mode).
    let mut doc = with(C, "overflow_number", Some(json!(-2)));
    doc[C]["op_debug_mode"] = json!(3);
    rejects(
        &doc,
        Device::Cpu,
        &format!("{C}.overflow_number"),
        "overflow_number should be unsigned int type",
    );
}

#[test]
fn bounds_per_key() {
    let cases: &[(&str, &str, Value, &str)] = &[
        (
            C,
            "dump_mode",
            json!(3),
            "Dump config parse failed, dump_mode should be 0, 1 or 2, but got 3",
        ),
        (
            C,
            "dump_mode",
            json!(2),
            "Set dump is only supported in Ascend async dump. Please set dump_mode to 0 or 1.",
        ),
        (
            C,
            "dump_mode",
            json!(4_294_967_296u64),
            "dump_mode should be unsigned int type",
        ),
        (
            C,
            "input_output",
            json!(3),
            "Dump Json Parse Failed. input_output should be 0, 1, 2",
        ),
        (
            C,
            "op_debug_mode",
            json!(5),
            "Dump Json Parse Failed. op_debug_mode should be 0, 3, 4",
        ),
        (
            C,
            "saved_data",
            json!("tensors"),
            "Dump Json parse failed, saved_data only supports statistic, tensor, or full, but got: tensors. Please set saved_data to either statistic, tensor, or full",
        ),
        (
            C,
            "net_name",
            json!(""),
            "net_name only supports alphabetic, digit, or {'-', '_'}, but got: ",
        ),
        (
            C,
            "net_name",
            json!("Tiny.Net"),
            "net_name only supports alphabetic, digit, or {'-', '_'}, but got: Tiny.Net",
        ),
        (
            C,
            "path",
            json!("relative/dump"),
            "Dump path only support absolute path and should start with '/'",
        ),
        (
            C,
            "path",
            json!("/tmp/a.b"),
            "Dump path only support alphabets, digit or {'-', '_', '/'}, but got:/tmp/a.b",
        ),
        (C, "path", json!("/tmp/a b"), "but got:/tmp/a b"),
        (C, "path", json!("/tmp/é"), "but got:/tmp/é"),
        (
            C,
            "iteration",
            json!("ALL"),
            "iteration only supports digits, {'-', '|'}, or just \"all\" but got: ALL",
        ),
        (
            C,
            "iteration",
            json!(""),
            "iteration only supports digits, {'-', '|'}, or just \"all\" but got: ",
        ),
        (C, "iteration", json!("1 2"), "but got: 1 2"),
        (
            C,
            "overflow_number",
            json!(2),
            "overflow_number only need to be set when op_debug_mode is 3.",
        ),
        (
            E,
            "stat_calc_mode",
            json!("Host"),
            "Dump Json parse failed, 'stat_calc_mode' only supports 'host' or 'device', but got: Host. Please set 'stat_cal_mode' to 'host' or 'device'",
        ),
        (
            E,
            "device_stat_precision_mode",
            json!("mid"),
            "Dump Json parse failed, 'device_stat_precision_mode' only supports 'high' or 'low', but got: mid. Please set 'stat_cal_mode' to 'high' or 'low'",
        ),
        (
            E,
            "sample_mode",
            json!(2),
            "Dump Json Parse Failed. sample_mode should be 0, 1",
        ),
    ];
    for (sec, key, value, text) in cases {
        rejects(
            &with(sec, key, Some(value.clone())),
            Device::Cpu,
            &format!("{sec}.{key}"),
            text,
        );
    }
    // Accepted edges.
    accepts(&with(C, "path", Some(json!("/tmp/a-b_C/"))), Device::Cpu);
    accepts(&with(C, "net_name", Some(json!("a-B_9"))), Device::Cpu);
    accepts(&with(C, "dump_mode", Some(json!(2))), Device::Ascend);
    accepts(
        &with(C, "initial_iteration", Some(json!(4_294_967_295u32))),
        Device::Cpu,
    );
}

#[test]
fn missing_required_keys() {
    for key in [
        "dump_mode",
        "net_name",
        "iteration",
        "input_output",
        "kernels",
        "support_device",
    ] {
        rejects(
            &with(C, key, None),
            Device::Cpu,
            &format!("{C}.{key}"),
            &format!("Check dump json failed, {key} not found"),
        );
    }
    // path and op_debug_mode are optional under e2e.
    let v = parse_env(
        &with(C, "path", None),
        Device::Cpu,
        &[("MS_DIAGNOSTIC_DATA_PATH", "/diag")],
    )
    .unwrap();
    assert_eq!(v.config.path, "/diag/debug_dump");
    accepts(&with(C, "op_debug_mode", None), Device::Cpu);
    // Without the section.
    let mut doc = base();
    doc.as_object_mut().unwrap().remove(C);
    rejects(
        &doc,
        Device::Cpu,
        C,
        "Check dump json failed, common_dump_settings not found",
    );
}

#[test]
fn path_from_environment() {
    let doc = with(C, "path", Some(json!("")));
    let d = parse_env(&doc, Device::Cpu, &[]).unwrap_err();
    assert!(d.first_error().unwrap().message.contains(
        "Dump path is empty. Please set it in dump json file or environment variable `MS_DIAGNOSTIC_DATA_PATH`."
    ));
    let d = parse_env(&doc, Device::Cpu, &[("MS_DIAGNOSTIC_DATA_PATH", "")]).unwrap_err();
    assert!(
        d.first_error()
            .unwrap()
            .message
            .starts_with("Dump path is empty.")
    );
    let d = parse_env(&doc, Device::Cpu, &[("MS_DIAGNOSTIC_DATA_PATH", "/a.b")]).unwrap_err();
    let e = d.first_error().unwrap();
    assert!(e.path.contains("MS_DIAGNOSTIC_DATA_PATH"), "{e}");
    assert!(e.message.contains("but got:/a.b/debug_dump"), "{e}");
    let d = parse_env(&doc, Device::Cpu, &[("MS_DIAGNOSTIC_DATA_PATH", "rel")]).unwrap_err();
    assert!(d.first_error().unwrap().message.contains("absolute path"));
}

#[test]
fn op_debug_mode_coercions() {
    for m in [1, 2] {
        let v = accepts(&with(C, "op_debug_mode", Some(json!(m))), Device::Cpu);
        assert_eq!(v.config.op_debug_mode, OpDebugMode::Overflow);
        assert!(warns(&v, &format!("{C}.op_debug_mode"), "treated as 3"));
    }
    // 3 forces dump_mode 0 and input_output 0 and allows overflow_number.
    let mut doc = with(C, "op_debug_mode", Some(json!(3)));
    doc[C]["dump_mode"] = json!(1);
    doc[C]["kernels"] = json!(["conv"]);
    doc[C]["input_output"] = json!(2);
    doc[C]["overflow_number"] = json!(2);
    let v = accepts(&doc, Device::Cpu);
    assert_eq!(v.config.dump_mode, DumpMode::All);
    assert_eq!(v.config.input_output, InputOutput::Both);
    assert_eq!(v.config.overflow_number, 2);
    assert!(warns(
        &v,
        &format!("{C}.dump_mode"),
        "Overflow dump or exception dump do not support specify kernels, the dump_mode is set to 0"
    ));
    assert!(warns(
        &v,
        &format!("{C}.input_output"),
        "input_output is set to 0"
    ));
    // overflow_number needs 3 *after* coercion: op_debug_mode 1 allows it.
    let mut doc = with(C, "op_debug_mode", Some(json!(1)));
    doc[C]["overflow_number"] = json!(0);
    accepts(&doc, Device::Cpu);
    // 4 on CPU: warning; iteration all, saved_data tensor.
    let mut doc = with(C, "op_debug_mode", Some(json!(4)));
    doc[C]["iteration"] = json!("1|2");
    doc[C]["saved_data"] = json!("full");
    let v = accepts(&doc, Device::Cpu);
    assert_eq!(v.config.iteration, "all");
    assert_eq!(v.config.saved_data, SavedData::Tensor);
    assert!(warns(
        &v,
        &format!("{C}.op_debug_mode"),
        "Abnormal dump is not supported on CPU/GPU backend."
    ));
    // 3 with stat_calc_mode device and enable false on Ascend: forced host.
    let mut doc = with(C, "op_debug_mode", Some(json!(3)));
    doc[C]["saved_data"] = json!("statistic");
    doc[E] = json!({"enable": false, "stat_calc_mode": "device"});
    let v = accepts(&doc, Device::Ascend);
    assert_eq!(v.config.e2e.stat_calc_mode, StatCalcMode::Host);
}

#[test]
fn stat_calc_mode_rules() {
    let mut doc = with(C, "saved_data", Some(json!("statistic")));
    doc[E]["stat_calc_mode"] = json!("device");
    let v = accepts(&doc, Device::Ascend);
    assert_eq!(v.config.e2e.stat_calc_mode, StatCalcMode::Device);
    // opdump extension: GPU keeps device statistics (dump-device-cuda); CPU falls back.
    let v = accepts(&doc, Device::Gpu);
    assert_eq!(v.config.e2e.stat_calc_mode, StatCalcMode::Device);
    let v = accepts(&doc, Device::Cpu);
    assert_eq!(v.config.e2e.stat_calc_mode, StatCalcMode::Host);
    assert!(warns(
        &v,
        &format!("{E}.stat_calc_mode"),
        "need a GPU or Ascend"
    ));
    doc[C]["saved_data"] = json!("full");
    let v = accepts(&doc, Device::Ascend);
    assert_eq!(v.config.e2e.stat_calc_mode, StatCalcMode::Host);
    assert!(warns(
        &v,
        &format!("{E}.stat_calc_mode"),
        "need saved_data \"statistic\""
    ));
}

#[test]
fn statistic_category_rules() {
    let mut doc = with(C, "saved_data", Some(json!("statistic")));
    doc[C]["statistic_category"] = json!([
        "l2norm",
        "max",
        "md5",
        "hash:sha1",
        "max",
        "hash",
        "hash:md5"
    ]);
    let v = accepts(&doc, Device::Cpu);
    assert_eq!(
        v.config.statistic_category,
        ["l2norm", "max", "md5", "hash:sha1"]
    );
    assert!(warns(
        &v,
        &format!("{C}.statistic_category[4]"),
        "duplicate"
    ));
    let sha = "\"hash:sha1\" already selects the SHA1 column";
    assert!(warns(&v, &format!("{C}.statistic_category[5]"), sha));
    assert!(warns(
        &v,
        &format!("{C}.statistic_category[6]"),
        "already selects the MD5 column"
    ));
    // The CPU deviation is announced with MindSpore's text.
    assert!(warns(
        &v,
        &format!("{C}.saved_data"),
        "storing statistic dump is only supported on GPU and Ascend"
    ));
    // Every bad item reported.
    doc[C]["statistic_category"] = json!(["mean", 3, "max", "Max"]);
    let d = parse(&doc).unwrap_err();
    let errs: Vec<_> = d.errors().collect();
    assert_eq!(errs.len(), 3, "{d}");
    assert_eq!(errs[0].path, format!("{C}.statistic_category[0]"));
    assert!(errs[0].message.starts_with("The following statistic_category is invalid:mean, the valid statistic_category are as follows:['max', 'min', 'avg'"));
    assert!(errs[1].message.contains("should be string type"));
    assert!(errs[2].message.contains("did you mean \"max\""));
    // Not an array.
    doc[C]["statistic_category"] = json!("max");
    rejects(
        &doc,
        Device::Cpu,
        &format!("{C}.statistic_category"),
        "should be array type",
    );
    // Empty list: no statistic columns.
    doc[C]["statistic_category"] = json!([]);
    assert!(
        accepts(&doc, Device::Cpu)
            .config
            .statistic_category
            .is_empty()
    );
    // Device mode keeps max/min/avg/l2norm only.
    doc[C]["statistic_category"] = json!(["md5", "avg", "count", "max"]);
    doc[E]["stat_calc_mode"] = json!("device");
    let v = accepts(&doc, Device::Ascend);
    assert_eq!(v.config.statistic_category, ["avg", "max"]);
    // Ignored with saved_data tensor, even when invalid (MindSpore does not read it).
    let doc = with(C, "statistic_category", Some(json!(["bogus"])));
    let v = accepts(&doc, Device::Cpu);
    assert!(warns(&v, &format!("{C}.statistic_category"), "ignored"));
}

#[test]
fn iteration_warnings_and_spaced_form() {
    let v = accepts(
        &with(C, "iteration", Some(json!("0 | 5-8 | 100-120"))),
        Device::Cpu,
    );
    assert!(v.config.iteration_spec().matches(100));
    assert!(v.warnings.is_empty());
    let v = accepts(
        &with(C, "iteration", Some(json!("5-3|1-2-3|-5||7"))),
        Device::Cpu,
    );
    let p = format!("{C}.iteration");
    assert!(warns(&v, &p, "segment \"5-3\""));
    assert!(warns(&v, &p, "segment \"1-2-3\""));
    assert!(warns(&v, &p, "segment \"-5\""));
    assert!(warns(&v, &p, "segment \"\""));
    assert!(!warns(&v, &p, "matches no step"));
    let v = accepts(&with(C, "iteration", Some(json!("5-3"))), Device::Cpu);
    assert!(warns(&v, &p, "matches no step"));
}

#[test]
fn kernels_rules() {
    let mut doc = with(C, "dump_mode", Some(json!(1)));
    let v = accepts(&doc, Device::Cpu);
    assert!(warns(&v, &format!("{C}.kernels"), "dumps every kernel"));
    assert!(v.config.kernel_filter().unwrap().selects_all());
    doc[C]["kernels"] = json!(["Re LU", "ReLU", "", 5, "name-regex(a\\d+)"]);
    let v = accepts(&doc, Device::Cpu);
    assert_eq!(v.config.kernels, ["ReLU", "5", "name-regex(a\\d+)"]);
    assert!(warns(
        &v,
        &format!("{C}.kernels[1]"),
        "Duplicate dump kernel name:ReLU"
    ));
    assert!(warns(&v, &format!("{C}.kernels[2]"), "empty"));
    let f = v.config.kernel_filter().unwrap();
    assert!(f.matches("Default/ReLU-op1") && f.matches("a12") && !f.matches("a"));
    doc[C]["kernels"] = json!(["relu", "name-regex(a(b)", "", "name-regex(*)"]);
    let d = parse(&doc).unwrap_err();
    let paths: Vec<_> = d.errors().map(|e| e.path.clone()).collect();
    assert_eq!(
        paths,
        [format!("{C}.kernels[1]"), format!("{C}.kernels[3]")]
    );
    assert!(
        d.first_error()
            .unwrap()
            .message
            .contains("invalid regular expression")
    );
    // dump_mode 0: kernels ignored (even a bad regex), with a warning.
    let mut doc = base();
    doc[C]["kernels"] = json!(["name-regex(()"]);
    let v = accepts(&doc, Device::Cpu);
    assert!(warns(
        &v,
        &format!("{C}.kernels"),
        "ignored because dump_mode is 0"
    ));
}

#[test]
fn support_device_conversion() {
    let v = accepts(
        &with(C, "support_device", Some(json!([0, 1, 1, true, 2.7, -1]))),
        Device::Gpu,
    );
    assert_eq!(v.config.support_device, [0, 1, 2, u32::MAX]);
    let p = format!("{C}.support_device");
    assert!(warns(&v, &format!("{p}[2]"), "Duplicate support device:1"));
    assert!(warns(&v, &format!("{p}[3]"), "Duplicate support device:1"));
    assert!(warns(&v, &format!("{p}[4]"), "truncated to 2"));
    assert!(warns(&v, &format!("{p}[5]"), "wraps to 4294967295"));
    assert!(v.config.supports_device(2) && !v.config.supports_device(3));
    let cpu = accepts(&with(C, "support_device", Some(json!([]))), Device::Cpu);
    assert!(cpu.config.supports_device(9));
    let gpu = accepts(&with(C, "support_device", Some(json!([]))), Device::Gpu);
    assert!(!gpu.config.supports_device(0));
    rejects(
        &with(C, "support_device", Some(json!([0, "1"]))),
        Device::Cpu,
        &format!("{p}[1]"),
        "type must be number",
    );
}

#[test]
fn e2e_section_and_ascend_async() {
    let mut doc = base();
    doc.as_object_mut().unwrap().remove(E);
    let v = accepts(&doc, Device::Cpu);
    assert!(v.config.e2e_enabled && !v.config.e2e.present);
    assert!(warns(&v, E, "Dump Alert"));
    // Ascend without e2e: op_debug_mode is required and file_format is read.
    let mut doc = doc.clone();
    doc[C].as_object_mut().unwrap().remove("op_debug_mode");
    rejects(
        &doc,
        Device::Ascend,
        &format!("{C}.op_debug_mode"),
        "Check dump json failed, op_debug_mode not found",
    );
    doc[C]["op_debug_mode"] = json!(0);
    doc[C]["file_format"] = json!("npy");
    assert!(!accepts(&doc, Device::Ascend).config.e2e_enabled);
    doc[C]["file_format"] = json!("txt");
    rejects(
        &doc,
        Device::Ascend,
        &format!("{C}.file_format"),
        "file_format only supports bin or npy",
    );
    // Under e2e, file_format is ignored with a warning.
    let v = accepts(&with(C, "file_format", Some(json!("txt"))), Device::Cpu);
    assert!(warns(&v, &format!("{C}.file_format"), "ignored"));
    // Sampling is Ascend-only.
    let mut doc = base();
    doc[E] = json!({"sample_mode": 1, "sample_num": 20});
    assert_eq!(accepts(&doc, Device::Ascend).config.e2e.sample_num, 20);
    let v = accepts(&doc, Device::Cpu);
    assert_eq!(v.config.e2e.sample_mode, 0);
    assert!(warns(
        &v,
        &format!("{E}.sample_mode"),
        "only supported on Ascend"
    ));
}

#[test]
fn unknown_keys_and_document_errors() {
    let mut doc = base();
    let sec = doc[C].as_object_mut().unwrap();
    let it = sec.remove("iteration").unwrap();
    sec.insert("iteraton".into(), it);
    let d = parse(&doc).unwrap_err();
    assert_eq!(
        d.first_error().unwrap().message,
        "Check dump json failed, iteration not found"
    );
    assert!(
        d.warnings().any(|w| w.path == format!("{C}.iteraton")
            && w.message.contains("did you mean \"iteration\""))
    );
    let mut doc = base();
    doc["common_dump_setting"] = json!({});
    doc["async_dump_settings"] = json!({});
    let v = accepts(&doc, Device::Cpu);
    assert!(warns(
        &v,
        "common_dump_setting",
        "did you mean \"common_dump_settings\""
    ));
    assert!(warns(&v, "async_dump_settings", "1.x"));
    for (text, msg) in [
        ("{", "Parse dump json failed, error:"),
        ("{\"a\":1,}", "Parse dump json failed, error:"),
        ("[1]", "must be a JSON object"),
        (
            "{\"common_dump_settings\": 3}",
            "common_dump_settings should be an object",
        ),
    ] {
        let doc_err = dump_host::config::DumpConfig::from_json_str(
            text,
            &dump_host::config::ParseOptions::new(
                Device::Cpu,
                &std::collections::HashMap::<String, String>::new(),
            ),
        )
        .unwrap_err();
        assert!(doc_err.to_string().contains(msg), "{text}: {doc_err}");
    }
}

#[test]
fn every_error_at_once_in_mindspore_order() {
    let doc = json!({
        "common_dump_settings": {
            "dump_mode": 7, "path": "rel", "net_name": "a/b", "iteration": "x",
            "input_output": 9, "kernels": {}, "support_device": ["0"], "op_debug_mode": 6,
            "saved_data": "all", "initial_iteration": -1
        },
        "e2e_dump_settings": {"enable": "no", "sample_mode": 3}
    });
    let d = parse(&doc).unwrap_err();
    let paths: Vec<&str> = d.errors().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "e2e_dump_settings.enable",
            "e2e_dump_settings.sample_mode",
            "common_dump_settings.dump_mode",
            "common_dump_settings.path",
            "common_dump_settings.net_name",
            "common_dump_settings.iteration",
            "common_dump_settings.input_output",
            "common_dump_settings.kernels",
            "common_dump_settings.support_device[0]",
            "common_dump_settings.op_debug_mode",
            "common_dump_settings.saved_data",
            "common_dump_settings.initial_iteration",
        ],
        "{d}"
    );
}

#[test]
fn effective_json_round_trips() {
    let mut doc = base();
    doc[C]["op_debug_mode"] = json!(2);
    doc[C]["overflow_number"] = json!(5);
    doc[C]["saved_data"] = json!("full");
    doc[C]["statistic_category"] = json!(["max", "md5"]);
    doc[C]["path"] = json!("");
    doc[E]["sample_mode"] = json!(1);
    for device in [Device::Cpu, Device::Gpu, Device::Ascend] {
        let env = [("MS_DIAGNOSTIC_DATA_PATH", "/diag")];
        let v = parse_env(&doc, device, &env).unwrap();
        let eff = v.config.to_effective_json();
        assert_eq!(eff[C]["op_debug_mode"], json!(3));
        assert_eq!(eff[C]["path"], json!("/diag/debug_dump"));
        let again = parse_env(&eff, device, &[]).unwrap();
        let mut a = again.config.clone();
        a.e2e.present = v.config.e2e.present;
        assert_eq!(a, v.config, "{device}");
        assert_eq!(again.config.to_effective_json(), eff);
    }
}
