//! `opdump check [CONFIG.json] [--device cpu|gpu|ascend]`: a MindSpore `data_dump.json`, an
//! msprobe `config.json`, a CANN `acl.json` or torchair's `dump_config` options, the dialect
//! detected and named.

mod cann;

use std::io::Write;
use std::path::PathBuf;

use dump_host::config::env::{DUMP_CONFIG_VAR, check_json_suffix, dump_config_path};
use dump_host::config::{ConfigDialect, Device, Env, read_config_file};
use dump_host::{DumpOptions, DumpPlan, Error};

use super::outcome::{Failure, Outcome, Verdict};

/// Arguments of `opdump check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config file: MindSpore's data_dump.json, msprobe's config.json, CANN's acl.json
    /// (`{"dump": {...}}`, CANN's EP000x codes) or torchair's dump_config options as a JSON
    /// object (the dialect is detected from its keys and named in the result; each is checked
    /// with its own tool's rules; the Dumper runs from each: MindSpore's layout, msprobe's,
    /// CANN's GE layout). Without it, the file named by the MINDSPORE_DUMP_CONFIG environment
    /// variable is checked (with MindSpore's rules: it must exist and end in `.json`).
    pub config: Option<PathBuf>,
    /// The device the config is checked for: cpu, gpu or ascend (case-insensitive); default:
    /// OPDUMP_DEVICE, else cpu, as for the Dumper. Some rules depend on it (dump_mode 2,
    /// sampling needs Ascend, device statistics a GPU or Ascend; support_device is ignored on
    /// CPU; saved_data statistic/full on CPU is accepted with a warning).
    #[arg(long, value_parser = parse_device)]
    pub device: Option<Device>,
}

fn parse_device(s: &str) -> Result<Device, dump_host::config::UnknownDevice> {
    s.parse()
}

/// Runs `check`: the effective config on `out`, warnings and errors on `err`.
///
/// The config goes through [`DumpPlan::load`], the path a Dumper opens it with (with the
/// options a Dumper would take from the environment), so `check` accepts exactly what runs.
pub fn run(args: &Args, env: &dyn Env, out: &mut dyn Write, err: &mut dyn Write) -> Outcome {
    let mut opts = match DumpOptions::from_env(env) {
        Ok(o) => o,
        Err(e) => {
            return Err(Failure::Invalid(e.to_string()));
        }
    };
    if let Some(d) = args.device {
        opts.device = d;
    }
    let device = opts.device;
    let path = match &args.config {
        Some(p) => {
            if let Err(msg) = check_json_suffix(&p.to_string_lossy()) {
                let _ = writeln!(
                    err,
                    "warning: {}: MindSpore would refuse this file through {DUMP_CONFIG_VAR}: {msg}",
                    p.display()
                );
            }
            p.clone()
        }
        None => match dump_config_path(env) {
            Ok(Some(p)) => p,
            Ok(None) => {
                return Err(Failure::Invalid(format!(
                    "no config file given and {DUMP_CONFIG_VAR} is not set (usage: opdump check CONFIG.json)"
                )));
            }
            Err(e) => {
                return Err(Failure::Invalid(e.to_string()));
            }
        },
    };
    // The dialect decides the rules; an unreadable file is reported by the load below.
    let bytes = read_config_file(&path).ok();
    let dialect = bytes
        .as_deref()
        .map_or(ConfigDialect::MindSpore, ConfigDialect::detect);
    if let (Some(b), true) = (bytes.as_deref(), dialect.is_cann()) {
        return cann::check(&path, dialect, b, (env, &opts), out, err);
    }
    // msprobe's lines name the file: its users run one config per job and grep logs.
    let prefix = match dialect {
        ConfigDialect::MindSpore => String::new(),
        _ => format!("{}: ", path.display()),
    };
    match DumpPlan::load(&path, env, &opts) {
        Ok(v) => {
            let effective = match &v.plan.msprobe {
                Some(m) => m.to_effective_json(),
                None => v.config.to_effective_json(),
            };
            let text = serde_json::to_string_pretty(&effective)
                .unwrap_or_else(|e| format!("{{\"error\": \"cannot print config: {e}\"}}"));
            let _ = writeln!(out, "{text}");
            for w in v.warnings.warnings() {
                let _ = writeln!(err, "{prefix}{w}");
            }
            let n = v.warnings.warnings().count();
            let _ = writeln!(
                err,
                "ok: {} is a valid dump config ({}) for {} ({n} warning{})",
                path.display(),
                v.dialect.describe(),
                device,
                if n == 1 { "" } else { "s" }
            );
            Ok(Verdict::Clean)
        }
        Err(Error::Config(d)) => {
            for item in d.all() {
                let _ = writeln!(err, "{prefix}{item}");
            }
            let n = d.errors().count();
            Err(Failure::Invalid(format!(
                "{} has {n} error{} ({}, for {}): not a valid dump config",
                path.display(),
                if n == 1 { "" } else { "s" },
                dialect.describe(),
                device
            )))
        }
        Err(e) => Err(Failure::Invalid(e.to_string())),
    }
}
