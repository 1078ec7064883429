//! `e2e_dump_settings`: the section MindSpore reads first.

use serde_json::Value;

use super::diagnostics::Diagnostics;
use super::read::{Got, Section, describe};
use super::types::{PrecisionMode, StatCalcMode};

/// Every key MindSpore 2.10 reads in `e2e_dump_settings`.
pub const E2E_KEYS: [&str; 7] = [
    "enable",
    "trans_flag",
    "save_kernel_args",
    "stat_calc_mode",
    "device_stat_precision_mode",
    "sample_mode",
    "sample_num",
];

/// The values of `e2e_dump_settings`, defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct E2eSettings {
    /// Whether the section was present. Without it MindSpore still runs e2e dump on CPU/GPU
    /// (with the defaults below); on Ascend it selects the O2/async dump instead.
    pub present: bool,
    /// `enable` (default false): Ascend synchronous dump; no effect on CPU/GPU.
    pub enable: bool,
    /// `trans_flag` (default true): convert to host format (Ascend only).
    pub trans_flag: bool,
    /// `save_kernel_args` (default false): write `{op}.{name}.json` with kernel arguments.
    pub save_kernel_args: bool,
    /// `stat_calc_mode` (default `host`), after MindSpore's coercions.
    pub stat_calc_mode: StatCalcMode,
    /// `device_stat_precision_mode` (default `high`).
    pub device_stat_precision_mode: PrecisionMode,
    /// `sample_mode` (default 0): 1 dumps the first `sample_num` elements (Ascend only).
    pub sample_mode: u32,
    /// `sample_num` (default 100), read only when `sample_mode` is 1.
    pub sample_num: u32,
}

impl Default for E2eSettings {
    fn default() -> Self {
        E2eSettings {
            present: false,
            enable: false,
            trans_flag: true,
            save_kernel_args: false,
            stat_calc_mode: StatCalcMode::Host,
            device_stat_precision_mode: PrecisionMode::High,
            sample_mode: 0,
            sample_num: 100,
        }
    }
}

const BOOL_MSG: &str = "Dump Json Parse Failed. 'enable' should be boolean type";

/// Reads the section (`None` when absent), recording every problem.
pub(crate) fn parse_e2e(v: Option<&Value>, d: &mut Diagnostics) -> E2eSettings {
    let mut s = E2eSettings::default();
    let Some(v) = v else {
        d.warn(
            "e2e_dump_settings",
            "e2e_dump_settings not found: MindSpore warns \"[Dump Alert i/3]: For 'Dump', in the \
             scenario where 'backend' is 'ms_backend', please configure 'e2e_dump_setting', \
             otherwise there will be no data.\" three times and sleeps 3 s; opdump uses the \
             defaults without waiting",
        );
        return s;
    };
    let Value::Object(map) = v else {
        d.error(
            "e2e_dump_settings",
            format!(
                "Dump config parse failed, e2e_dump_settings should be an object; got {}",
                describe(v)
            ),
        );
        return s;
    };
    s.present = true;
    let sec = Section {
        name: "e2e_dump_settings",
        map,
    };
    if let Got::Val(b) = sec.boolean("enable", BOOL_MSG, d) {
        s.enable = b;
    }
    if let Got::Val(b) = sec.boolean("trans_flag", BOOL_MSG, d) {
        s.trans_flag = b;
    }
    if let Got::Val(b) = sec.boolean("save_kernel_args", BOOL_MSG, d) {
        s.save_kernel_args = b;
    }
    match sec.string(
        "stat_calc_mode",
        "Dump config parse failed, stat_calc_mode should be string type",
        d,
    ) {
        Got::Val("host") => s.stat_calc_mode = StatCalcMode::Host,
        Got::Val("device") => s.stat_calc_mode = StatCalcMode::Device,
        Got::Val(other) => d.error(
            sec.path("stat_calc_mode"),
            format!(
                "Dump Json parse failed, 'stat_calc_mode' only supports 'host' or 'device', but \
                 got: {other}. Please set 'stat_cal_mode' to 'host' or 'device'"
            ),
        ),
        _ => {}
    }
    match sec.string(
        "device_stat_precision_mode",
        "Dump config parse failed, device_stat_precision_mode should be string type",
        d,
    ) {
        Got::Val("high") => s.device_stat_precision_mode = PrecisionMode::High,
        Got::Val("low") => s.device_stat_precision_mode = PrecisionMode::Low,
        Got::Val(other) => d.error(
            sec.path("device_stat_precision_mode"),
            format!(
                "Dump Json parse failed, 'device_stat_precision_mode' only supports 'high' or \
                 'low', but got: {other}. Please set 'stat_cal_mode' to 'high' or 'low'"
            ),
        ),
        _ => {}
    }
    let sample_type = "Dump config parse failed, sample_mode should be unsigned int type";
    match sec.uint("sample_mode", sample_type, d) {
        Got::Val(m @ (0 | 1)) => s.sample_mode = m,
        Got::Val(m) => d.error(
            sec.path("sample_mode"),
            format!("Dump Json Parse Failed. sample_mode should be 0, 1; got {m}"),
        ),
        _ => {}
    }
    if s.sample_mode == 1 {
        // MindSpore's type error for sample_num names sample_mode; kept for compatibility.
        match sec.uint("sample_num", sample_type, d) {
            Got::Val(0) => d.error(
                sec.path("sample_num"),
                "Dump Json Parse Failed. sample_num should be greater than 0; got 0",
            ),
            Got::Val(n) => s.sample_num = n,
            _ => {}
        }
    } else if sec.raw("sample_num").is_some() {
        d.warn(
            sec.path("sample_num"),
            "sample_num is ignored because sample_mode is not 1",
        );
    }
    sec.unknown_keys(&E2E_KEYS, d);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(v: Value) -> (E2eSettings, Diagnostics) {
        let mut d = Diagnostics::new();
        let s = parse_e2e(Some(&v), &mut d);
        (s, d)
    }

    #[test]
    fn defaults() {
        let mut d = Diagnostics::new();
        let s = parse_e2e(None, &mut d);
        assert_eq!(s, E2eSettings::default());
        assert!(!d.has_errors());
        assert!(d.warnings().next().unwrap().message.contains("Dump Alert"));
        let (s, d) = run(json!({}));
        assert!(s.present && d.is_empty());
        assert_eq!((s.enable, s.trans_flag, s.sample_num), (false, true, 100));
    }

    #[test]
    fn every_error_at_once() {
        let (_, d) = run(json!({
            "enable": 1, "trans_flag": "yes", "save_kernel_args": null,
            "stat_calc_mode": "gpu", "device_stat_precision_mode": "mid",
            "sample_mode": 2, "sample_num": 0
        }));
        let e: Vec<_> = d
            .errors()
            .map(|e| (e.path.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(e.len(), 6, "{d}");
        assert_eq!(e[0].0, "e2e_dump_settings.enable");
        assert!(
            e[0].1
                .starts_with("Dump Json Parse Failed. 'enable' should be boolean type")
        );
        assert_eq!(e[1].0, "e2e_dump_settings.trans_flag");
        assert!(
            e[1].1
                .starts_with("Dump Json Parse Failed. 'enable' should be boolean type")
        );
        assert!(
            e[3].1
                .contains("only supports 'host' or 'device', but got: gpu.")
        );
        assert!(
            e[4].1
                .contains("only supports 'high' or 'low', but got: mid.")
        );
        assert!(
            e[5].1
                .starts_with("Dump Json Parse Failed. sample_mode should be 0, 1")
        );
        // sample_num is not read unless sample_mode is 1: a warning, no error.
        assert!(
            d.warnings()
                .any(|w| w.path == "e2e_dump_settings.sample_num")
        );
    }

    #[test]
    fn sample_num_rules() {
        let (s, d) = run(json!({"sample_mode": 1, "sample_num": 20}));
        assert_eq!((s.sample_mode, s.sample_num), (1, 20));
        assert!(d.is_empty());
        let (_, d) = run(json!({"sample_mode": 1, "sample_num": 0}));
        assert!(
            d.first_error()
                .unwrap()
                .message
                .starts_with("Dump Json Parse Failed. sample_num should be greater than 0")
        );
        let (_, d) = run(json!({"sample_mode": 1, "sample_num": "5"}));
        assert!(
            d.first_error()
                .unwrap()
                .message
                .starts_with("Dump config parse failed, sample_mode should be unsigned int type")
        );
        assert_eq!(
            d.first_error().unwrap().path,
            "e2e_dump_settings.sample_num"
        );
    }

    #[test]
    fn values_and_unknown_keys() {
        let (s, d) = run(
            json!({"stat_calc_mode": "device", "device_stat_precision_mode": "low", "enabel": true, "save_kernel_args": true}),
        );
        assert_eq!(s.stat_calc_mode, StatCalcMode::Device);
        assert_eq!(s.device_stat_precision_mode, PrecisionMode::Low);
        assert!(s.save_kernel_args);
        let w = d.warnings().next().unwrap();
        assert!(w.message.contains("did you mean \"enable\""), "{w}");
        let (_, d) = run(json!([1]));
        assert!(
            d.first_error()
                .unwrap()
                .message
                .contains("should be an object")
        );
    }
}
