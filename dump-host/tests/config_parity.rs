//! Config parity with MindSpore (spec §1, "which keys are read when"): a key MindSpore does not
//! read in the configured mode is not type-checked either, so opdump warns instead of failing;
//! the same key in a mode where it is read is checked. And the mode rules of issue 12 point 4:
//! sampling only with op_debug_mode 0, save_kernel_args only with enable true, exception dump
//! off Ascend stated as opdump's documented behaviour.

mod support;

use dump_host::config::{Device, OpDebugMode};
use serde_json::{Value, json};
use support::*;

const C: &str = "common_dump_settings";
const E: &str = "e2e_dump_settings";

/// `base()` with each `(section, key, value)` set.
fn doc(sets: &[(&str, &str, Value)]) -> Value {
    let mut d = base();
    for (sec, key, v) in sets {
        if d.get(*sec).is_none() {
            d[*sec] = json!({});
        }
        d[*sec][*key] = v.clone();
    }
    d
}

/// What a row expects: `Warn(path)` (accepted, a warning at `path`) or `Error(path, text)`
/// (the first error is at `path` and contains `text`).
enum Want {
    Warn(&'static str),
    Error(&'static str, &'static str),
}

#[test]
fn keys_not_read_in_the_mode_warn_and_keys_read_are_checked() {
    use Want::*;
    let ignored_cat = "common_dump_settings.statistic_category";
    let rows: Vec<(&str, Device, Value, Want)> = vec![
        // statistic_category: read only with saved_data statistic/full.
        (
            "statistic_category of the wrong type, saved_data tensor",
            Device::Gpu,
            doc(&[(C, "statistic_category", json!(5))]),
            Warn(ignored_cat),
        ),
        (
            "statistic_category with a non-string element, saved_data tensor",
            Device::Gpu,
            doc(&[(C, "statistic_category", json!(["max", 1]))]),
            Warn(ignored_cat),
        ),
        (
            "statistic_category with an unknown name, saved_data tensor",
            Device::Gpu,
            doc(&[(C, "statistic_category", json!(["bogus"]))]),
            Warn(ignored_cat),
        ),
        (
            "statistic_category of the wrong type, saved_data statistic",
            Device::Gpu,
            doc(&[
                (C, "saved_data", json!("statistic")),
                (C, "statistic_category", json!(5)),
            ]),
            Error(ignored_cat, "statistic_category should be array type"),
        ),
        (
            "statistic_category with an unknown name, saved_data full",
            Device::Gpu,
            doc(&[
                (C, "saved_data", json!("full")),
                (C, "statistic_category", json!(["bogus"])),
            ]),
            Error(
                "common_dump_settings.statistic_category[0]",
                "The following statistic_category is invalid",
            ),
        ),
        (
            "statistic_category under exception dump (saved_data forced to tensor)",
            Device::Ascend,
            doc(&[
                (C, "op_debug_mode", json!(4)),
                (C, "saved_data", json!("statistic")),
                (C, "statistic_category", json!(7)),
            ]),
            Warn(ignored_cat),
        ),
        // sample_num: read only with sample_mode 1.
        (
            "sample_num of the wrong type, sample_mode absent",
            Device::Ascend,
            doc(&[(E, "sample_num", json!("x"))]),
            Warn("e2e_dump_settings.sample_num"),
        ),
        (
            "sample_num 0, sample_mode 0",
            Device::Ascend,
            doc(&[(E, "sample_mode", json!(0)), (E, "sample_num", json!(0))]),
            Warn("e2e_dump_settings.sample_num"),
        ),
        (
            "sample_num of the wrong type, sample_mode 1",
            Device::Ascend,
            doc(&[(E, "sample_mode", json!(1)), (E, "sample_num", json!("x"))]),
            Error(
                "e2e_dump_settings.sample_num",
                "sample_mode should be unsigned int type",
            ),
        ),
        // file_format: read only on Ascend without e2e_dump_settings.
        (
            "file_format of the wrong type under e2e",
            Device::Ascend,
            doc(&[(C, "file_format", json!(5))]),
            Warn("common_dump_settings.file_format"),
        ),
        (
            "file_format of the wrong type, Ascend without e2e",
            Device::Ascend,
            {
                let mut d = doc(&[(C, "file_format", json!(5))]);
                d.as_object_mut().unwrap().remove(E);
                d
            },
            Error(
                "common_dump_settings.file_format",
                "file_format should be string type",
            ),
        ),
        // overflow_number: read only with op_debug_mode 3; elsewhere its presence is the error.
        (
            "overflow_number of the wrong type, op_debug_mode 0",
            Device::Ascend,
            doc(&[(C, "overflow_number", json!("x"))]),
            Error(
                "common_dump_settings.overflow_number",
                "overflow_number only need to be set when op_debug_mode is 3.",
            ),
        ),
        (
            "overflow_number of the wrong type, op_debug_mode 3",
            Device::Ascend,
            doc(&[
                (C, "op_debug_mode", json!(3)),
                (C, "overflow_number", json!("x")),
            ]),
            Error(
                "common_dump_settings.overflow_number",
                "overflow_number should be unsigned int type",
            ),
        ),
        // kernels: must be an array always, its entries are read only with dump_mode 1.
        (
            "a bad regex in kernels, dump_mode 0",
            Device::Cpu,
            doc(&[(C, "kernels", json!(["name-regex(()"]))]),
            Warn("common_dump_settings.kernels"),
        ),
        (
            "a bad regex in kernels, dump_mode 1",
            Device::Cpu,
            doc(&[
                (C, "dump_mode", json!(1)),
                (C, "kernels", json!(["name-regex(()"])),
            ]),
            Error(
                "common_dump_settings.kernels[0]",
                "invalid regular expression",
            ),
        ),
        (
            "kernels not an array, dump_mode 0",
            Device::Cpu,
            doc(&[(C, "kernels", json!("conv"))]),
            Error(
                "common_dump_settings.kernels",
                "kernels should be array type",
            ),
        ),
        // e2e keys are read on every device, even where they have no effect.
        (
            "enable of the wrong type on CPU",
            Device::Cpu,
            doc(&[(E, "enable", json!(1))]),
            Error(
                "e2e_dump_settings.enable",
                "'enable' should be boolean type",
            ),
        ),
        (
            "support_device with a string on CPU",
            Device::Cpu,
            doc(&[(C, "support_device", json!(["0"]))]),
            Error(
                "common_dump_settings.support_device[0]",
                "support_device elements should be unsigned int type",
            ),
        ),
    ];
    for (what, device, d, want) in rows {
        match want {
            Warn(path) => {
                let v = match parse_env(&d, device, &[]) {
                    Ok(v) => v,
                    Err(diag) => panic!("{what}: should be accepted with a warning\n{diag}"),
                };
                assert!(
                    v.warnings.warnings().any(|w| w.path == path),
                    "{what}: no warning at {path}: {}",
                    v.warnings
                );
            }
            Error(path, text) => {
                let diag = match parse_env(&d, device, &[]) {
                    Ok(v) => panic!("{what}: should be rejected; warnings: {}", v.warnings),
                    Err(diag) => diag,
                };
                let e = diag.first_error().unwrap();
                assert_eq!(e.path, path, "{what}: {diag}");
                assert!(e.message.contains(text), "{what}: {:?}", e.message);
            }
        }
    }
}

#[test]
fn sampling_applies_to_op_debug_mode_0_only() {
    let sample = [(E, "sample_mode", json!(1)), (E, "sample_num", json!(4))];
    let v = accepts(&doc(&sample), Device::Ascend);
    assert_eq!((v.config.e2e.sample_mode, v.config.e2e.sample_num), (1, 4));
    let mut overflow = sample.to_vec();
    overflow.push((C, "op_debug_mode", json!(3)));
    let v = accepts(&doc(&overflow), Device::Ascend);
    assert_eq!(v.config.op_debug_mode, OpDebugMode::Overflow);
    assert_eq!(v.config.e2e.sample_mode, 0, "{}", v.warnings);
    assert!(warns(
        &v,
        "e2e_dump_settings.sample_mode",
        "op_debug_mode 0 only"
    ));
    // Found by the config_json fuzzer: a coerced sample_mode kept sample_num 4, so the effective
    // config (which omits sample_num with sample_mode 0) parsed to a different config.
    let exception = [
        sample[0].clone(),
        sample[1].clone(),
        (C, "op_debug_mode", json!(4)),
    ];
    for (d, device) in [
        (doc(&overflow), Device::Ascend),
        (doc(&sample), Device::Cpu),
        (doc(&exception), Device::Ascend),
    ] {
        let v = accepts(&d, device);
        assert_eq!(v.config.e2e.sample_num, 100, "{device}");
        let again = accepts(&v.config.to_effective_json(), device);
        assert_eq!(again.config, v.config, "{device}");
    }
}

#[test]
fn save_kernel_args_needs_enable_true() {
    for device in [Device::Cpu, Device::Gpu, Device::Ascend] {
        let v = accepts(
            &doc(&[
                (E, "enable", json!(true)),
                (E, "save_kernel_args", json!(true)),
            ]),
            device,
        );
        assert!(v.config.e2e.save_kernel_args, "{device}");
        let v = accepts(
            &doc(&[
                (E, "enable", json!(false)),
                (E, "save_kernel_args", json!(true)),
            ]),
            device,
        );
        assert!(!v.config.e2e.save_kernel_args, "{device}");
        assert!(warns(
            &v,
            "e2e_dump_settings.save_kernel_args",
            "only when enable is true"
        ));
        // The effective config says what runs, and parses to the same config.
        let eff = v.config.to_effective_json();
        assert_eq!(eff[E]["save_kernel_args"], json!(false));
    }
}

#[test]
fn exception_dump_off_ascend_states_what_opdump_does() {
    for device in [Device::Cpu, Device::Gpu] {
        let v = accepts(&doc(&[(C, "op_debug_mode", json!(4))]), device);
        let w = v
            .warnings
            .warnings()
            .find(|w| w.path == "common_dump_settings.op_debug_mode")
            .expect("a warning");
        assert!(w.message.contains("Abnormal dump is not supported"), "{w}");
        assert!(
            w.message.contains("dumps the inputs") && w.message.contains("kernel_failed"),
            "the warning must describe what the Dumper does: {w}"
        );
        assert!(!w.message.contains("writes no kernel data"), "{w}");
    }
}
