//! `opdump check` on CANN's `acl.json` and torchair's `dump_config` options: every error at
//! once with CANN's codes, what the config asks CANN to dump, and whether opdump's Dumper
//! runs it (the config is planned as the Dumper plans it: what it cannot honour is an error
//! naming the key).

use std::io::Write;
use std::path::Path;

use dump_host::config::{
    ConfigDialect, Diagnostics, Env,
    acl::{AclDumpKind, check_acl},
    torchair::check_torchair,
};
use dump_host::{DumpOptions, DumpPlan, Error};
use serde_json::{Value, json};

use crate::cli::outcome::{Failure, Outcome, Verdict};

/// Checks `bytes` (the file at `path`, detected as `dialect`): the summary as JSON on `out`,
/// warnings and errors on `err`.
pub(super) fn check(
    path: &Path,
    dialect: ConfigDialect,
    bytes: &[u8],
    (env, opts): (&dyn Env, &DumpOptions),
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Outcome {
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| {
        Failure::Invalid(format!(
            "{}: not JSON ({e}); a {} is a JSON object",
            path.display(),
            dialect.describe()
        ))
    })?;
    let checked = match dialect {
        ConfigDialect::AclJson => check_acl(&doc).map(|a| {
            let kind = match a.kind {
                AclDumpKind::None => "none",
                AclDumpKind::Exception => "exception",
                AclDumpKind::Overflow => "overflow",
                AclDumpKind::Operators => "operators",
            };
            let summary = json!({"dialect": "acl.json", "dump": kind,
                "stats_only": a.stats_only, "watcher": a.watcher});
            (summary, a.warnings, format!("dump: {kind}"))
        }),
        _ => check_torchair(&doc).map(|t| {
            let summary = json!({"dialect": "torchair", "enable_dump": t.enabled,
                "ge_dump_path_suffix": t.dump_path_suffix});
            let what = if t.enabled {
                "dump enabled"
            } else {
                "dump disabled"
            };
            (summary, t.warnings, what.to_owned())
        }),
    };
    let print = |d: &Diagnostics, err: &mut dyn Write| {
        for item in d.all() {
            let _ = writeln!(err, "{}: {item}", path.display());
        }
    };
    // Valid for CANN: planned as the Dumper plans it (what it cannot run is an error).
    let valid_for_cann = checked.as_ref().ok().map(|c| c.2.clone());
    let checked = checked.and_then(|(mut summary, _, what)| {
        match DumpPlan::from_json(bytes.to_vec(), env, opts) {
            Ok(p) => {
                if let Some(g) = &p.plan.ge {
                    summary["opdump"] = json!({
                        "layout": if g.npy { "torchair npy" } else { "GE" },
                        "root": g.base.display().to_string(),
                        "model_name": g.model_name,
                        "layers": g.layers,
                        "steps": p.plan.iteration,
                        "input_output": p.plan.input_output.as_u32(),
                        "files": match (&g.stats, g.npy) {
                            (_, true) => "npy per tensor",
                            (Some(_), _) => "statistics csv per kernel",
                            (None, _) => "CANN dump file per kernel",
                        },
                    });
                }
                Ok((summary, p.warnings, what))
            }
            Err(Error::Config(d)) => Err(d),
            Err(e) => {
                let mut d = Diagnostics::new();
                d.error("", e.to_string());
                Err(d)
            }
        }
    });
    match checked {
        Ok((summary, warnings, what)) => {
            let _ = writeln!(out, "{summary:#}");
            print(&warnings, err);
            let n = warnings.warnings().count();
            let _ = writeln!(
                err,
                "ok: {} is a valid {} ({what}; {n} warning{}); the Dumper runs from it",
                path.display(),
                dialect.describe(),
                if n == 1 { "" } else { "s" }
            );
            Ok(Verdict::Clean)
        }
        Err(d) => {
            print(&d, err);
            let n = d.errors().count();
            Err(Failure::Invalid(match valid_for_cann {
                Some(what) => format!(
                    "{} is a valid {} ({what}), but opdump's Dumper does not run it ({n} \
                     error{} above)",
                    path.display(),
                    dialect.describe(),
                    if n == 1 { "" } else { "s" },
                ),
                None => format!(
                    "{} has {n} error{} ({}): not a valid dump config",
                    path.display(),
                    if n == 1 { "" } else { "s" },
                    dialect.describe()
                ),
            }))
        }
    }
}
