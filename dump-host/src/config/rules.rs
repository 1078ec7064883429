//! Cross-field rules: MindSpore's coercions (op_debug_mode forcing other fields, stat_calc_mode
//! falling back to host, ...) and the statistic_category check, applied once both sections
//! have been read.

use serde_json::Value;

use super::DumpConfig;
use super::categories::{DEFAULT_CATEGORIES, check_category};
use super::common::Common;
use super::diagnostics::Diagnostics;
use super::e2e::E2eSettings;
use super::kernels::KernelFilter;
use super::read::describe;
use super::types::{
    Device, DumpMode, FileFormat, InputOutput, OpDebugMode, SavedData, StatCalcMode,
};

const C: &str = "common_dump_settings";

/// Applies the rules; returns the config if no error was recorded (before or here).
pub(crate) fn assemble(
    c: Common,
    mut e2e: E2eSettings,
    device: Device,
    e2e_enabled: bool,
    d: &mut Diagnostics,
) -> Option<DumpConfig> {
    let op_debug_mode = c.op_debug_mode.unwrap_or(OpDebugMode::Off);
    let mut dump_mode = c.dump_mode;
    let mut input_output = c.input_output;
    let mut iteration = c.iteration.clone();
    let mut saved_data = c.saved_data.unwrap_or(SavedData::Tensor);

    if op_debug_mode != OpDebugMode::Off && dump_mode.is_some_and(|m| m != DumpMode::All) {
        d.warn(
            format!("{C}.dump_mode"),
            "Overflow dump or exception dump do not support specify kernels, the dump_mode is set to 0",
        );
        dump_mode = Some(DumpMode::All);
    }
    if op_debug_mode == OpDebugMode::Overflow {
        if input_output.is_some_and(|io| io != InputOutput::Both) {
            d.warn(
                format!("{C}.input_output"),
                "overflow dump (op_debug_mode 3) dumps inputs and outputs: input_output is set to 0",
            );
            input_output = Some(InputOutput::Both);
        }
        if e2e.stat_calc_mode == StatCalcMode::Device && !e2e.enable {
            d.warn(
                "e2e_dump_settings.stat_calc_mode",
                "overflow dump with enable false cannot compute device statistics: stat_calc_mode is set to host",
            );
            e2e.stat_calc_mode = StatCalcMode::Host;
        }
    }
    if op_debug_mode == OpDebugMode::Exception {
        if device != Device::Ascend {
            d.warn(
                format!("{C}.op_debug_mode"),
                format!("MindSpore logs \"Abnormal dump is not supported on CPU/GPU backend.\" and dumps no kernel data; opdump on {device} dumps the inputs of every kernel the runtime reports as failed (Step::kernel_failed), never outputs or Parameters"),
            );
        }
        if e2e_enabled {
            if iteration.as_deref().is_some_and(|s| s != "all") {
                d.warn(
                    format!("{C}.iteration"),
                    "exception dump (op_debug_mode 4) sets iteration to \"all\"",
                );
            }
            iteration = iteration.map(|_| "all".to_owned());
            if e2e.sample_mode != 0 {
                d.warn(
                    "e2e_dump_settings.sample_mode",
                    "exception dump (op_debug_mode 4) sets sample_mode to 0",
                );
                sampling_off(&mut e2e);
            }
            if saved_data != SavedData::Tensor {
                d.warn(
                    format!("{C}.saved_data"),
                    "exception dump (op_debug_mode 4) sets saved_data to \"tensor\"",
                );
                saved_data = SavedData::Tensor;
            }
        }
    }
    if e2e.sample_mode == 1 && op_debug_mode == OpDebugMode::Overflow {
        d.warn(
            "e2e_dump_settings.sample_mode",
            "sample dump applies to op_debug_mode 0 only: overflow dump (op_debug_mode 3) writes whole tensors, sample_mode is set to 0",
        );
        sampling_off(&mut e2e);
    }
    if e2e.save_kernel_args && !e2e.enable {
        d.warn(
            "e2e_dump_settings.save_kernel_args",
            "save_kernel_args takes effect only when enable is true (MindSpore's documented rule): no kernel-args files are written; set enable to true to get them",
        );
        e2e.save_kernel_args = false;
    }
    if e2e.sample_mode == 1 && device != Device::Ascend {
        d.warn(
            "e2e_dump_settings.sample_mode",
            format!("sample dump is only supported on Ascend: sample_mode is set to 0 on {device}"),
        );
        sampling_off(&mut e2e);
    }
    if device == Device::Cpu && saved_data.statistics() {
        d.warn(
            format!("{C}.saved_data"),
            "MindSpore 2.10 rejects this on CPU (\"Dump Json parse failed, storing statistic dump is only supported on GPU and Ascend, please set saved_data to tensor or use a GPU or Ascend device\"); opdump accepts it and computes the statistics on the host",
        );
    }
    if e2e.stat_calc_mode == StatCalcMode::Device {
        // opdump extension: device statistics also work on GPU (dump-device-cuda); MindSpore
        // forces host statistics on every device but Ascend.
        if device == Device::Cpu {
            d.warn(
                "e2e_dump_settings.stat_calc_mode",
                format!("device statistics need a GPU or Ascend: stat_calc_mode is set to host on {device}"),
            );
            e2e.stat_calc_mode = StatCalcMode::Host;
        } else if saved_data != SavedData::Statistic {
            d.warn(
                "e2e_dump_settings.stat_calc_mode",
                format!("device statistics need saved_data \"statistic\" (got {:?}): stat_calc_mode is set to host", saved_data.as_str()),
            );
            e2e.stat_calc_mode = StatCalcMode::Host;
        }
    }

    let statistic_category = categories(&c, saved_data, e2e.stat_calc_mode, d);

    // Kernels: compile regexes (a config error here; MindSpore crashes) and warn about
    // selections that surprise.
    let dump_mode_v = dump_mode?;
    if dump_mode_v == DumpMode::Kernels {
        match KernelFilter::from_entries(&c.kernels) {
            Ok(f) if f.selects_all() => d.warn(
                format!("{C}.kernels"),
                "dump_mode 1 with no kernels entries dumps every kernel (as in MindSpore)",
            ),
            Ok(_) => {}
            Err(bad) => {
                for b in bad {
                    d.error(
                        format!("{C}.kernels[{}]", c.kernel_indices.get(b.index).copied().unwrap_or(b.index)),
                        format!("invalid regular expression in {:?}: {} (MindSpore aborts on an invalid regex; opdump uses Rust `regex` syntax, matched against the whole name)", b.entry, b.message),
                    );
                }
            }
        }
    } else if !c.kernels.is_empty() {
        d.warn(
            format!("{C}.kernels"),
            format!(
                "kernels is ignored because dump_mode is {}",
                dump_mode_v.as_u32()
            ),
        );
    }
    if d.has_errors() {
        return None;
    }
    Some(DumpConfig {
        device,
        dump_mode: dump_mode_v,
        path: c.path?,
        net_name: c.net_name?,
        iteration: iteration?,
        input_output: input_output?,
        kernels: c.kernels,
        support_device: c.support_device,
        op_debug_mode,
        overflow_number: c.overflow_number.unwrap_or(0),
        saved_data,
        initial_iteration: c.initial_iteration.unwrap_or(0),
        statistic_category: statistic_category?,
        file_format: c.file_format.unwrap_or(FileFormat::Bin),
        e2e_enabled,
        e2e,
        opdump: Default::default(),
    })
}

/// Turns sampling off as MindSpore's coercions do: `sample_num` goes back to its default too,
/// since it is read only with sample_mode 1 (so the effective config parses to the same one).
fn sampling_off(e2e: &mut E2eSettings) {
    e2e.sample_mode = 0;
    e2e.sample_num = E2eSettings::default().sample_num;
}

/// `statistic_category`: read only when statistics are saved; every name checked; duplicates
/// dropped with a warning (MindSpore 2.10 host mode de-duplicates); device mode keeps only
/// max/min/avg/l2norm.
fn categories(
    c: &Common,
    saved_data: SavedData,
    mode: StatCalcMode,
    d: &mut Diagnostics,
) -> Option<Vec<String>> {
    let path = format!("{C}.statistic_category");
    let defaults = || Some(DEFAULT_CATEGORIES.iter().map(|s| (*s).to_owned()).collect());
    let Some(raw) = &c.statistic_category else {
        return defaults();
    };
    if !saved_data.statistics() {
        // Not read by MindSpore in this mode, so not type-checked either.
        d.warn(
            path,
            format!(
                "statistic_category is ignored (and not checked) because saved_data is \"tensor\"; got {}",
                describe(raw)
            ),
        );
        return defaults();
    }
    let Value::Array(items) = raw else {
        d.error(
            path,
            format!(
                "Dump config parse failed, statistic_category should be array type; got {}, allowed: a JSON array of category names",
                describe(raw)
            ),
        );
        return None;
    };
    let mut out: Vec<String> = Vec::new();
    let mut seen: Vec<dump_stats::Category> = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Value::String(name) = item else {
            d.error(p, format!("Dump config parse failed, statistic_category elements should be string type; got {}", describe(item)));
            ok = false;
            continue;
        };
        let cat = match check_category(name) {
            Ok(cat) => cat,
            Err(msg) => {
                d.error(p, msg);
                ok = false;
                continue;
            }
        };
        if let Some(j) = seen.iter().position(|&s| s == cat) {
            d.warn(
                p,
                format!(
                    "duplicate statistic_category {name:?} is dropped: {:?} already selects the {} column (first occurrence wins)",
                    out[j],
                    cat.title()
                ),
            );
            continue;
        }
        if mode == StatCalcMode::Device && !cat.is_device() {
            d.warn(
                p,
                format!(
                    "device statistics support only max, min, avg and l2norm: {name:?} is dropped"
                ),
            );
            continue;
        }
        seen.push(cat);
        out.push(name.clone());
    }
    ok.then_some(out)
}
