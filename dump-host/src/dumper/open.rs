//! Opening a [`Dumper`]: from the environment, a config file, or config text.

use std::path::{Path, PathBuf};

use dump_npy::Bf16Mode;
use dump_stats::CategorySet;

use super::{DumpPlan, Dumper, MS_VERSION, Planned};
use crate::{
    Error,
    config::{
        ConfigDialect, Device, DumpConfig, DumpMode, E2eSettings, Env, FileFormat, InputOutput,
        KernelFilter, MsprobeConfig, MsprobeTask, NonFinitePolicy, OpDebugMode, ParseOptions,
        SavedData, env::rank_id, read_config_file,
    },
    writer::WriterConfig,
};

/// Run-time options that are not part of MindSpore's config.
#[derive(Clone, Debug)]
pub struct DumpOptions {
    /// The backend the config is validated for; decides the dtype spelling of file names
    /// (`Float32` on CPU, `float32` on GPU/Ascend). Default CPU.
    pub device: Device,
    /// This process's device id, checked against `support_device` off CPU. Default 0.
    pub device_id: u32,
    /// How bf16 tensors are stored: widened to `<f4` (default, numpy loads it) or raw `<E2`
    /// (MindSpore 2.10 on CPU, byte for byte).
    pub bf16: Bf16Mode,
    /// Writer threads, memory budget and the size from which tensors are written on the
    /// calling thread instead of copied and queued (default: up to 2 threads, 256 MiB, 8 MiB).
    pub writer: WriterConfig,
    /// Most bytes of `.npy` files this Dumper writes (`None`, the default: no limit). The
    /// first file that would pass it and all later ones are skipped, with one warning; their
    /// `statistic.csv` rows are still written, and [`DumpReport`](super::DumpReport) counts
    /// what was skipped. An opdump extension (MindSpore has no such cap).
    pub disk_budget_bytes: Option<u64>,
    /// `dump_mode` 2 (Ascend `set_dump`): the kernels the runtime marked for dump, by full name
    /// or by scope (a cell's scope marks every kernel inside it; see
    /// [`KernelFilter::marked`]). MindSpore reads the nodes' `dump` attribute; opdump cannot
    /// see the graph, so the runtime lists the marks here. Empty (the default): a dump_mode 2
    /// config dumps nothing, with a warning. Ignored in the other modes.
    pub set_dump: Vec<String>,
    /// A flight recorder overriding the config's `opdump.flight_recorder` (`None`, the
    /// default: the config's).
    pub flight_recorder: Option<crate::config::FlightRecorder>,
    /// A non-finite policy overriding the config's `opdump.on_nonfinite` (`None`: the
    /// config's, whose default is `record` with a flight recorder and `continue` without).
    pub on_nonfinite: Option<crate::config::NonFinitePolicy>,
    /// Watcher mode overriding the config's `opdump.watcher` (`None`, the default: the
    /// config's). The acl.json route gives
    /// [`WatcherConfig::from_acl`](crate::config::WatcherConfig::from_acl)'s here.
    pub watcher: Option<crate::config::WatcherConfig>,
    /// msprobe's layout: how long a finished call may wait before `dump.json` is republished
    /// with it. Zero (the default) hands every call to the step's journal thread as it
    /// finishes, which commits whatever has arrived at once; a longer interval
    /// groups calls: a call finishing at least this long after the previous publication
    /// publishes itself and the calls waiting before it (one write, one name switch), and
    /// the end of each step publishes the rest. A `kill -9` then loses from dump.json the
    /// calls finished since the last publication (never its validity, nor the tensor files).
    /// `OPDUMP_MSPROBE_COMMIT_MS`.
    pub msprobe_commit_interval: std::time::Duration,
}

impl Default for DumpOptions {
    fn default() -> Self {
        DumpOptions {
            device: Device::Cpu,
            device_id: 0,
            bf16: Bf16Mode::Widen,
            writer: WriterConfig::default(),
            disk_budget_bytes: None,
            set_dump: Vec::new(),
            flight_recorder: None,
            on_nonfinite: None,
            watcher: None,
            msprobe_commit_interval: std::time::Duration::ZERO,
        }
    }
}

impl DumpOptions {
    /// Defaults overridden by the environment:
    /// `OPDUMP_DEVICE` (`cpu`, `gpu`, `ascend`), `DEVICE_ID`, `OPDUMP_BF16` (`widen`, `raw`),
    /// `OPDUMP_WRITER_THREADS` (0 = synchronous), `OPDUMP_WRITER_NICE`
    /// ([`WriterConfig::nice`], 0 to 19), `OPDUMP_MEMORY_BUDGET_MB` and
    /// `OPDUMP_DIRECT_WRITE_MB` ([`WriterConfig::direct_write_bytes`] in MiB; 0 = every tensor
    /// on the calling thread) and `OPDUMP_DISK_BUDGET_MB`
    /// ([`disk_budget_bytes`](DumpOptions::disk_budget_bytes) in MiB) and
    /// `OPDUMP_MSPROBE_COMMIT_MS` ([`msprobe_commit_interval`](DumpOptions::msprobe_commit_interval)).
    pub fn from_env(env: &dyn Env) -> Result<Self, Error> {
        let mut o = DumpOptions::default();
        let bad = |var: &str, value: String, message: &str| Error::Env {
            var: var.into(),
            value,
            message: message.into(),
        };
        if let Some(v) = env.var("OPDUMP_DEVICE").filter(|v| !v.is_empty()) {
            o.device = v.parse().map_err(|m: crate::config::UnknownDevice| {
                bad("OPDUMP_DEVICE", v.clone(), &m.to_string())
            })?;
        }
        if let Some(id) = number(env, "DEVICE_ID", "expected a device number (0, 1, ...)")? {
            o.device_id = id;
        }
        if let Some(v) = env.var("OPDUMP_BF16").filter(|v| !v.is_empty()) {
            o.bf16 = match v.as_str() {
                "widen" => Bf16Mode::Widen,
                "raw" => Bf16Mode::Raw,
                _ => return Err(bad("OPDUMP_BF16", v, "allowed: widen (default), raw")),
            };
        }
        if let Some(n) = number(
            env,
            "OPDUMP_WRITER_THREADS",
            "expected 0 (synchronous) or a thread count",
        )? {
            o.writer.threads = n;
        }
        let mib = |var: &str, expected: &str| -> Result<Option<u64>, Error> {
            Ok(number::<u64>(env, var, expected)?.map(|mb| mb.saturating_mul(1 << 20)))
        };
        let usize_of = |b: u64| usize::try_from(b).unwrap_or(usize::MAX);
        if let Some(b) = mib("OPDUMP_MEMORY_BUDGET_MB", "expected mebibytes, e.g. 256")? {
            o.writer.budget_bytes = usize_of(b);
        }
        if let Some(b) = mib(
            "OPDUMP_DIRECT_WRITE_MB",
            "expected mebibytes, e.g. 8 (0 writes every tensor on the calling thread)",
        )? {
            o.writer.direct_write_bytes = usize_of(b);
        }
        if let Some(n) = number::<i32>(
            env,
            "OPDUMP_WRITER_NICE",
            "expected a nice value for the writer threads, 0 to 19 (0: the runtime's priority)",
        )? {
            if !(0..=19).contains(&n) {
                return Err(bad(
                    "OPDUMP_WRITER_NICE",
                    n.to_string(),
                    "expected a nice value for the writer threads, 0 to 19 (0: the runtime's priority)",
                ));
            }
            o.writer.nice = n;
        }
        if let Some(ms) = number::<u64>(
            env,
            "OPDUMP_MSPROBE_COMMIT_MS",
            "expected milliseconds between dump.json publications, e.g. 50 (0: every call)",
        )? {
            o.msprobe_commit_interval = std::time::Duration::from_millis(ms);
        }
        o.disk_budget_bytes = mib(
            "OPDUMP_DISK_BUDGET_MB",
            "expected mebibytes of .npy files to write at most, e.g. 10240 (unset: no limit)",
        )?;
        Ok(o)
    }
}

/// The number in environment variable `var` (`None` when unset or empty); an error naming the
/// variable, its value and `expected` when it is not one.
fn number<T: std::str::FromStr>(
    env: &dyn Env,
    var: &str,
    expected: &str,
) -> Result<Option<T>, Error> {
    let Some(v) = env.var(var).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match v.parse() {
        Ok(n) => Ok(Some(n)),
        Err(_) => Err(Error::Env {
            var: var.into(),
            value: v,
            message: expected.into(),
        }),
    }
}

impl DumpPlan {
    /// Reads the config file at `path` (a regular file of at most
    /// [`MAX_CONFIG_BYTES`](crate::config::MAX_CONFIG_BYTES)), validates it and resolves the
    /// plan: the one path `opdump check` and [`DumperBuilder::open_file`](crate::DumperBuilder::open_file) share.
    pub fn load(path: &Path, env: &dyn Env, opts: &DumpOptions) -> Result<Planned, Error> {
        Self::from_json(read_config_file(path)?, env, opts)
    }

    /// Validates config bytes (UTF-8 JSON, see [`DumpConfig::from_json_bytes`]) and resolves
    /// the plan with the rank from `env` and the run-time options.
    ///
    /// The dialect is detected first ([`ConfigDialect::detect`]): an msprobe `config.json`
    /// is validated with msprobe's rules ([`MsprobeConfig`]) and planned for msprobe's layout.
    pub fn from_json(bytes: Vec<u8>, env: &dyn Env, opts: &DumpOptions) -> Result<Planned, Error> {
        match ConfigDialect::detect(&bytes) {
            ConfigDialect::Msprobe => return Self::from_msprobe(bytes, env, opts),
            d @ (ConfigDialect::AclJson | ConfigDialect::Torchair) => {
                return Self::from_cann(bytes, d, env, opts);
            }
            ConfigDialect::MindSpore => {}
        }
        let v = DumpConfig::from_json_bytes(&bytes, &ParseOptions::new(opts.device, env))?;
        let mut warnings = v.warnings;
        if v.config.dump_mode == DumpMode::SetDump && opts.set_dump.is_empty() {
            warnings.warn(
                "common_dump_settings.dump_mode",
                "dump_mode 2 dumps only the kernels marked with set_dump (DumpOptions::set_dump); \
                 none is marked, so no kernel is dumped",
            );
        }
        let plan = DumpPlan::new(&v.config, bytes, rank_id(env)?, opts)?;
        Ok(Planned {
            plan,
            config: v.config,
            warnings,
            dialect: ConfigDialect::MindSpore,
        })
    }

    /// An msprobe `config.json`: validated, translated into the MindSpore settings it means
    /// (shared spec peers.md §4), planned for msprobe's layout.
    fn from_msprobe(bytes: Vec<u8>, env: &dyn Env, opts: &DumpOptions) -> Result<Planned, Error> {
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) => t,
            Err(e) => {
                let mut d = crate::config::Diagnostics::new();
                d.error(
                    "",
                    format!(
                        "the config is not UTF-8 text (invalid byte at offset {}); allowed: \
                         JSON text in UTF-8",
                        e.valid_up_to()
                    ),
                );
                return Err(Error::Config(d));
            }
        };
        let v = MsprobeConfig::from_json_str(text)?;
        let config = msprobe_as_mindspore(&v.config, opts.device);
        let mut plan = DumpPlan::new(&config, bytes, rank_id(env)?, opts)?;
        plan.layout = crate::layout::LayoutKind::Msprobe;
        plan.msprobe = Some(v.config);
        Ok(Planned {
            plan,
            config,
            warnings: v.warnings,
            dialect: ConfigDialect::Msprobe,
        })
    }

    /// An acl.json or torchair config: validated and translated
    /// ([`acl_request`](crate::config::acl::acl_request),
    /// [`torchair_request`](crate::config::torchair::torchair_request)) into the MindSpore
    /// settings it means (every kernel, the steps as the iteration, inputs/outputs from
    /// `dump_mode`) and planned for CANN's GE layout, its time directory taken now.
    fn from_cann(
        bytes: Vec<u8>,
        dialect: ConfigDialect,
        env: &dyn Env,
        opts: &DumpOptions,
    ) -> Result<Planned, Error> {
        let doc: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
            let mut d = crate::config::Diagnostics::new();
            d.error(
                "",
                format!("not JSON ({e}); a {} is a JSON object", dialect.describe()),
            );
            Error::Config(d)
        })?;
        let req = match dialect {
            ConfigDialect::AclJson => crate::config::acl::acl_request(&doc),
            _ => crate::config::torchair::torchair_request(&doc),
        }
        .map_err(Error::Config)?;
        let base = match &req.prefix {
            Some(p) => req.dump_path.join(p),
            None => req.dump_path.clone(),
        };
        let config = DumpConfig {
            device: opts.device,
            dump_mode: DumpMode::All,
            path: base.display().to_string(),
            net_name: req
                .model_name
                .clone()
                .unwrap_or_else(|| crate::layout::DEFAULT_MODEL_NAME.to_owned()),
            iteration: req.steps.clone(),
            input_output: req.input_output,
            kernels: Vec::new(),
            support_device: vec![opts.device_id],
            op_debug_mode: OpDebugMode::Off,
            overflow_number: 0,
            saved_data: if req.stats.is_some() {
                SavedData::Statistic
            } else {
                SavedData::Tensor
            },
            initial_iteration: 0,
            statistic_category: ["max", "min", "avg", "l2norm"].map(String::from).to_vec(),
            file_format: FileFormat::Npy,
            e2e_enabled: true,
            e2e: E2eSettings {
                present: true,
                enable: true,
                ..E2eSettings::default()
            },
            opdump: Default::default(),
        };
        let mut plan = DumpPlan::new(&config, bytes, rank_id(env)?, opts)?;
        if let Some(f) = plan.flight {
            return Err(Error::Plan(format!(
                "a flight recorder ({} steps) holds steps of MindSpore's or msprobe's layout; \
                 the GE layout of a {} writes each kernel as it ends: remove it",
                f.steps,
                dialect.describe()
            )));
        }
        if !req.npy && plan.on_nonfinite != NonFinitePolicy::Continue {
            return Err(Error::Plan(format!(
                "on_nonfinite {:?} watches the outputs MindSpore's and msprobe's layouts write; \
                 the GE layout of a {} gathers each kernel into one CANN file without that \
                 check: use continue (the default)",
                plan.on_nonfinite.as_str(),
                dialect.describe()
            )));
        }
        if plan.watcher.is_none() {
            // `dump_scene: watcher` (DumpOptions::watcher, when given, wins).
            plan.watcher = req.watcher.clone();
        }
        plan.root = base.clone();
        plan.layout = crate::layout::LayoutKind::Ge;
        plan.ge = Some(crate::layout::GeSettings {
            base,
            prefix: req.prefix,
            time: crate::layout::time_dir(crate::layout::now_us()),
            model_name: req.model_name,
            layers: req.layers,
            stats: req.stats,
            npy: req.npy,
        });
        Ok(Planned {
            plan,
            config,
            warnings: req.warnings,
            dialect,
        })
    }

    /// Resolves a validated config, its file's bytes, the rank and the run-time options.
    pub fn new(
        cfg: &DumpConfig,
        config_bytes: Vec<u8>,
        rank: u32,
        opts: &DumpOptions,
    ) -> Result<DumpPlan, Error> {
        let categories = CategorySet::parse(cfg.statistic_category.iter().map(String::as_str))
            .map_err(|e| Error::Plan(format!("common_dump_settings.statistic_category: {e}")))?;
        let flight = opts.flight_recorder.or(cfg.opdump.flight_recorder);
        let on_nonfinite = opts.on_nonfinite.unwrap_or(match cfg.opdump.on_nonfinite {
            Some(p) => p,
            None if flight.is_some() => NonFinitePolicy::Record,
            None => NonFinitePolicy::Continue,
        });
        check_watch(cfg.op_debug_mode, flight.as_ref(), on_nonfinite)?;
        let kernels = match cfg.dump_mode {
            DumpMode::SetDump => KernelFilter::marked(&opts.set_dump),
            _ => cfg.kernel_filter()?,
        };
        Ok(DumpPlan {
            root: PathBuf::from(&cfg.path),
            rank,
            net: cfg.net_name.clone(),
            iteration: cfg.iteration.clone(),
            initial_iteration: cfg.initial_iteration as u64,
            input_output: cfg.input_output,
            saved_data: cfg.saved_data,
            op_debug_mode: cfg.op_debug_mode,
            overflow_number: cfg.overflow_number,
            categories,
            sample: (cfg.e2e.sample_mode == 1).then_some(cfg.e2e.sample_num as usize),
            save_kernel_args: cfg.e2e.save_kernel_args,
            trans_flag: cfg.e2e.trans_flag,
            device_stats: cfg.e2e.stat_calc_mode == crate::config::StatCalcMode::Device,
            device_precision: match cfg.e2e.device_stat_precision_mode {
                crate::config::PrecisionMode::High => dump_stats::Precision::High,
                crate::config::PrecisionMode::Low => dump_stats::Precision::Low,
            },
            kernels,
            device: cfg.device,
            device_id: opts.device_id,
            support_device: cfg.support_device.clone(),
            config_bytes,
            ms_version: MS_VERSION.into(),
            bf16: opts.bf16,
            writer: opts.writer.clone(),
            disk_budget_bytes: opts.disk_budget_bytes,
            layout: crate::layout::LayoutKind::MindSpore,
            flight,
            on_nonfinite,
            watch: cfg.opdump.watch,
            watcher: opts.watcher.clone().or_else(|| cfg.opdump.watcher.clone()),
            msprobe: None,
            msprobe_commit_interval: opts.msprobe_commit_interval,
            ge: None,
        })
    }
}

/// The flight recorder and the non-finite policies work on normal dumps; `record` needs a
/// recorder (the config's section is checked the same way when it is read; this catches the
/// builder's settings).
pub(super) fn check_watch(
    op_debug_mode: crate::config::OpDebugMode,
    flight: Option<&crate::config::FlightRecorder>,
    policy: NonFinitePolicy,
) -> Result<(), Error> {
    if op_debug_mode != crate::config::OpDebugMode::Off
        && (flight.is_some() || policy != NonFinitePolicy::Continue)
    {
        return Err(Error::Plan(format!(
            "the flight recorder and on_nonfinite {:?} watch a normal dump; op_debug_mode is {}, \
             allowed with them: 0",
            policy.as_str(),
            op_debug_mode.as_u32()
        )));
    }
    if policy == NonFinitePolicy::Record && flight.is_none() {
        return Err(Error::Plan(
            "on_nonfinite \"record\" fires the flight recorder, and there is none; add one \
             (opdump.flight_recorder, DumperBuilder::flight_recorder) or use continue or stop"
                .into(),
        ));
    }
    if let Some(f) = flight
        && !(1..=crate::config::MAX_FLIGHT_STEPS).contains(&f.steps)
    {
        return Err(Error::Plan(format!(
            "flight recorder steps {}: allowed 1 to {}",
            f.steps,
            crate::config::MAX_FLIGHT_STEPS
        )));
    }
    Ok(())
}

/// The MindSpore settings an msprobe config means (peers.md §4's translation): every kernel
/// (msprobe's `list` and `scope` are applied to call names by the Dumper), the steps as the
/// iteration, statistics for the statistics task, statistics and files for the tensor and
/// overflow tasks, inputs/outputs from `data_mode`.
fn msprobe_as_mindspore(c: &MsprobeConfig, device: Device) -> DumpConfig {
    let dm = c.data_mode;
    DumpConfig {
        device,
        dump_mode: DumpMode::All,
        path: c.dump_path.clone(),
        net_name: "Net".into(),
        iteration: c.iteration(),
        input_output: match (dm.input, dm.output) {
            (true, false) => InputOutput::Inputs,
            (false, true) => InputOutput::Outputs,
            _ => InputOutput::Both,
        },
        kernels: Vec::new(),
        support_device: (0..8).collect(),
        op_debug_mode: if c.task == MsprobeTask::OverflowCheck {
            OpDebugMode::Overflow
        } else {
            OpDebugMode::Off
        },
        overflow_number: c.overflow_nums,
        saved_data: match c.task {
            MsprobeTask::Statistics => SavedData::Statistic,
            MsprobeTask::Tensor | MsprobeTask::OverflowCheck => SavedData::Full,
        },
        initial_iteration: 0,
        statistic_category: ["max", "min", "avg", "l2norm"].map(String::from).to_vec(),
        file_format: FileFormat::Npy,
        e2e_enabled: true,
        e2e: E2eSettings {
            present: true,
            enable: true,
            ..E2eSettings::default()
        },
        opdump: c.opdump.clone(),
    }
}

impl Dumper {
    /// The Dumper the process environment asks for: the config named by
    /// `MINDSPORE_DUMP_CONFIG` (disabled when unset or empty), options from
    /// [`DumpOptions::from_env`], warnings to stderr. The shortcut for
    /// `Dumper::builder().open_env()`; [`Dumper::builder`] sets anything else.
    pub fn from_env() -> Result<Dumper, Error> {
        Dumper::builder().open_env()
    }

    /// Starts a Dumper on a config read: its warnings go to `events` first.
    pub(super) fn from_planned(
        p: Planned,
        events: crate::diag::EventSink,
    ) -> Result<Dumper, Error> {
        for w in p.warnings.warnings() {
            events.emit(&crate::diag::Event::ConfigWarning(w.clone()));
        }
        Dumper::launch(p.plan, events)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn disk_budget_from_the_environment() {
        assert_eq!(
            DumpOptions::from_env(&env(&[])).unwrap().disk_budget_bytes,
            None
        );
        let o = DumpOptions::from_env(&env(&[("OPDUMP_DISK_BUDGET_MB", "5")])).unwrap();
        assert_eq!(o.disk_budget_bytes, Some(5 << 20));
        let o = DumpOptions::from_env(&env(&[("OPDUMP_DISK_BUDGET_MB", "0")])).unwrap();
        assert_eq!(o.disk_budget_bytes, Some(0));
        let e = DumpOptions::from_env(&env(&[("OPDUMP_DISK_BUDGET_MB", "10GB")])).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("OPDUMP_DISK_BUDGET_MB") && m.contains("10GB") && m.contains("mebibytes"),
            "{m}"
        );
    }

    #[test]
    fn writer_settings_from_the_environment() {
        let o = DumpOptions::from_env(&env(&[])).unwrap();
        assert_eq!(o.writer, WriterConfig::default());
        let o = DumpOptions::from_env(&env(&[
            ("OPDUMP_WRITER_THREADS", "1"),
            ("OPDUMP_MEMORY_BUDGET_MB", "64"),
            ("OPDUMP_DIRECT_WRITE_MB", "2"),
            ("OPDUMP_WRITER_NICE", "0"),
        ]))
        .unwrap();
        assert_eq!(
            o.writer,
            WriterConfig {
                threads: 1,
                budget_bytes: 64 << 20,
                direct_write_bytes: 2 << 20,
                nice: 0,
            }
        );
        assert_eq!(WriterConfig::default().nice, 10);
        let o = DumpOptions::from_env(&env(&[("OPDUMP_WRITER_NICE", "19")])).unwrap();
        assert_eq!(o.writer.nice, 19);
        for bad in ["20", "-5", "low"] {
            let e = DumpOptions::from_env(&env(&[("OPDUMP_WRITER_NICE", bad)])).unwrap_err();
            let m = e.to_string();
            assert!(
                m.contains("OPDUMP_WRITER_NICE") && m.contains(bad) && m.contains("0 to 19"),
                "{m}"
            );
        }
        let o = DumpOptions::from_env(&env(&[("OPDUMP_DIRECT_WRITE_MB", "0")])).unwrap();
        assert_eq!(o.writer.direct_write_bytes, 0);
        let o = DumpOptions::from_env(&env(&[("OPDUMP_DIRECT_WRITE_MB", "")])).unwrap();
        assert_eq!(
            o.writer.direct_write_bytes,
            WriterConfig::default().direct_write_bytes,
            "empty means unset"
        );
    }

    #[test]
    fn a_bad_direct_write_size_is_a_clear_error() {
        for bad in ["8MB", "-1", "1.5", "lots"] {
            let e = DumpOptions::from_env(&env(&[("OPDUMP_DIRECT_WRITE_MB", bad)])).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "environment variable OPDUMP_DIRECT_WRITE_MB={bad:?}: expected mebibytes, \
                     e.g. 8 (0 writes every tensor on the calling thread)"
                )
            );
        }
    }
}
