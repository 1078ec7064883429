//! [`DumpPlan`]: the resolved settings a [`crate::Dumper`] runs on (config + environment +
//! run-time options), in the form the hot path wants.

use std::path::PathBuf;

use dump_npy::Bf16Mode;
use dump_stats::{
    CategorySet,
    device::{StatsKind, StatsRequest},
};

use crate::{
    config::{Device, Diagnostics, DumpConfig, InputOutput, KernelFilter, OpDebugMode, SavedData},
    layout::DTypeSpelling,
    writer::WriterConfig,
};

/// Everything the Dumper needs to know, resolved.
#[derive(Debug)]
pub struct DumpPlan {
    /// Dump root (`path`, or `$MS_DIAGNOSTIC_DATA_PATH/debug_dump`).
    pub root: PathBuf,
    /// Rank id (`rank_{id}` directory).
    pub rank: u32,
    /// `net_name`.
    pub net: String,
    /// The `iteration` spec text (`all`, `0|5-8`).
    pub iteration: String,
    /// `initial_iteration`: the first value of the step counter.
    pub initial_iteration: u64,
    /// Which of inputs/outputs are dumped.
    pub input_output: InputOutput,
    /// `.npy` files, statistics, or both.
    pub saved_data: SavedData,
    /// Normal, overflow (3) or exception (4) dump.
    pub op_debug_mode: OpDebugMode,
    /// Overflowing kernels to dump before stopping (0 = no limit).
    pub overflow_number: u32,
    /// statistic.csv columns, in order.
    pub categories: CategorySet,
    /// `sample_mode` 1: dump only the first `sample_num` elements.
    pub sample: Option<usize>,
    /// Write `{type}.{scope}.json` kernel-argument files.
    pub save_kernel_args: bool,
    /// `stat_calc_mode: device`: statistics of device tensors are computed on the device
    /// (statistic-only dumps; GPU through dump-device-cuda, Ascend through its backend).
    pub device_stats: bool,
    /// `device_stat_precision_mode`: how Ascend device statistics accumulate avg/l2norm.
    pub device_precision: dump_stats::Precision,
    /// Convert tensors in Ascend device formats to their host shape (`DefaultFormat`).
    pub trans_flag: bool,
    /// Which kernels are dumped.
    pub kernels: KernelFilter,
    /// The backend the config targets (decides the dtype spelling in file names).
    pub device: Device,
    /// Device id of this process (checked against `support_device` off CPU).
    pub device_id: u32,
    /// `support_device` (ignored on CPU).
    pub support_device: Vec<u32>,
    /// The config file's bytes, copied into `.dump_metadata/data_dump.json`.
    pub config_bytes: Vec<u8>,
    /// `ms_version` in `.dump_metadata/config.json`.
    pub ms_version: String,
    /// How bf16 tensors are stored (default: widened to `<f4` so numpy can load them).
    pub bf16: Bf16Mode,
    /// Background writer settings (threads, memory budget).
    pub writer: WriterConfig,
    /// Most bytes of `.npy` files to write (`None`: no limit); see [`DumpOptions::disk_budget_bytes`](super::DumpOptions::disk_budget_bytes).
    pub disk_budget_bytes: Option<u64>,
    /// The output layout written (the dialect of the config read).
    pub layout: crate::layout::LayoutKind,
    /// The flight recorder (`opdump.flight_recorder`, or the builder's): `None` writes every
    /// selected step as usual.
    pub flight: Option<crate::config::FlightRecorder>,
    /// What a non-finite watched output does (`opdump.on_nonfinite`, or the builder's).
    pub on_nonfinite: crate::config::NonFinitePolicy,
    /// Which outputs are watched (`opdump.watch`).
    pub watch: crate::config::Watch,
    /// Watcher mode (`opdump.watcher`, [`DumpOptions::watcher`](super::DumpOptions::watcher),
    /// or an acl.json watcher scene translated by
    /// [`WatcherConfig::from_acl`](crate::config::WatcherConfig::from_acl)); `None`: off.
    pub watcher: Option<crate::config::WatcherConfig>,
    /// The msprobe config this plan was made from (`None` for a MindSpore config): level,
    /// task, summary mode, `list` and `scope`, rank filter.
    pub msprobe: Option<crate::config::MsprobeConfig>,
    /// msprobe's layout: how long finished calls may wait before dump.json is republished
    /// with them ([`DumpOptions::msprobe_commit_interval`](super::DumpOptions::msprobe_commit_interval)).
    pub msprobe_commit_interval: std::time::Duration,
    /// CANN's GE layout (an acl.json or torchair config): its directories, model name, layer
    /// filter, statistics columns, npy mode. `None` for the other layouts.
    pub ge: Option<crate::layout::GeSettings>,
}

/// A config read, validated and resolved: what [`DumpPlan::load`] and [`DumpPlan::from_json`]
/// return, and the only way `opdump check` and a [`crate::Dumper`] read a config, so a config
/// one of them rejects the other rejects too.
#[derive(Debug)]
pub struct Planned {
    /// The plan a Dumper runs on.
    pub plan: DumpPlan,
    /// The effective config (what `opdump check` prints).
    pub config: DumpConfig,
    /// The config's warnings, then the plan's (for example dump_mode 2 with nothing marked).
    pub warnings: Diagnostics,
    /// Which tool's config it was.
    pub dialect: crate::config::ConfigDialect,
}

/// The MindSpore version opdump's output corresponds to, written as `ms_version` in
/// `.dump_metadata/config.json`.
pub const MS_VERSION: &str = "2.10.0";

impl DumpPlan {
    /// The dtype spelling of file names for the configured backend.
    pub fn spelling(&self) -> DTypeSpelling {
        match self.device {
            Device::Cpu => DTypeSpelling::Cpu,
            Device::Gpu | Device::Ascend => DTypeSpelling::Device,
        }
    }

    /// The semantics of statistic rows: Ascend device semantics (spec §7) with
    /// `stat_calc_mode: device` on Ascend, MindSpore's host semantics otherwise.
    pub fn stats_kind(&self) -> StatsKind {
        if self.device == Device::Ascend && self.device_stats {
            StatsKind::Device
        } else {
            StatsKind::Host
        }
    }

    /// What the Dumper asks a device tensor for: the configured precision and categories in
    /// the row semantics of [`stats_kind`](DumpPlan::stats_kind).
    pub fn stats_request(&self) -> StatsRequest<'_> {
        StatsRequest {
            precision: self.device_precision,
            categories: &self.categories,
            kind: self.stats_kind(),
        }
    }

    /// Whether this process's device is selected: always on CPU, elsewhere when `device_id` is
    /// in `support_device` (MindSpore silently disables the dump otherwise).
    pub fn device_selected(&self) -> bool {
        if let Some(m) = &self.msprobe {
            // msprobe filters by rank (`[]`: every rank), whatever the device.
            return m.rank.is_empty() || m.rank.contains(&self.rank);
        }
        self.device == Device::Cpu || self.support_device.contains(&self.device_id)
    }
}
