//! The effective config written back as MindSpore JSON (what `opdump check` prints).

use serde_json::{Map, Value, json};

use super::DumpConfig;
use super::types::OpDebugMode;

/// Every key with its effective value. Keys MindSpore would reject or ignore in this
/// combination (overflow_number without op_debug_mode 3, sample_num without sample_mode 1,
/// statistic_category with saved_data tensor, file_format under e2e) are left out, so the
/// output is itself a valid config that parses to the same [`DumpConfig`].
pub(crate) fn to_json(c: &DumpConfig) -> Value {
    let mut common = Map::new();
    common.insert("dump_mode".into(), json!(c.dump_mode.as_u32()));
    common.insert("path".into(), json!(c.path));
    common.insert("net_name".into(), json!(c.net_name));
    common.insert("iteration".into(), json!(c.iteration));
    common.insert("input_output".into(), json!(c.input_output.as_u32()));
    common.insert("kernels".into(), json!(c.kernels));
    common.insert("support_device".into(), json!(c.support_device));
    common.insert("op_debug_mode".into(), json!(c.op_debug_mode.as_u32()));
    if c.op_debug_mode == OpDebugMode::Overflow {
        common.insert("overflow_number".into(), json!(c.overflow_number));
    }
    common.insert("saved_data".into(), json!(c.saved_data.as_str()));
    common.insert("initial_iteration".into(), json!(c.initial_iteration));
    if c.saved_data.statistics() {
        common.insert("statistic_category".into(), json!(c.statistic_category));
    }
    if !c.e2e_enabled {
        common.insert("file_format".into(), json!(c.file_format.as_str()));
    }
    let mut top = Map::new();
    top.insert("common_dump_settings".into(), Value::Object(common));
    if c.e2e.present || c.e2e_enabled {
        let e = &c.e2e;
        let mut e2e = Map::new();
        e2e.insert("enable".into(), json!(e.enable));
        e2e.insert("trans_flag".into(), json!(e.trans_flag));
        e2e.insert("save_kernel_args".into(), json!(e.save_kernel_args));
        e2e.insert("stat_calc_mode".into(), json!(e.stat_calc_mode.as_str()));
        e2e.insert(
            "device_stat_precision_mode".into(),
            json!(e.device_stat_precision_mode.as_str()),
        );
        e2e.insert("sample_mode".into(), json!(e.sample_mode));
        if e.sample_mode == 1 {
            e2e.insert("sample_num".into(), json!(e.sample_num));
        }
        top.insert("e2e_dump_settings".into(), Value::Object(e2e));
    }
    if let Some(own) = super::opdump::to_json(&c.opdump) {
        top.insert("opdump".into(), own);
    }
    Value::Object(top)
}
