//! Opening the Dumper of `demo` and `run`: config text, and the dump root `--out` names. Its
//! path helpers ([`absolute`], [`with_path`]) also serve `ingest`, which opens its Dumper
//! itself.
//!
//! MindSpore's rule for a config's `path` (absolute; only letters, digits, `-`, `_` and `/`)
//! stays on the `path` key of a config file, where MindSpore applies it. A command-line
//! `--out` is any path the operating system accepts (dots, spaces, `..`, the current folder):
//! the config is validated with a stand-in `path`, and the resolved plan's root is then the
//! `--out` path made absolute. The copy of the config in `.dump_metadata/data_dump.json`
//! names the real root. docs/compat.md records the deviation.

use std::path::{Path, PathBuf};

use dump_host::{
    DumpOptions, DumpPlan, Dumper,
    config::Env,
    diag::{Event, EventSink},
};

/// The `path` the config is validated with when `--out` replaces it (MindSpore's rules
/// accept it; it is never written to).
pub(crate) const STAND_IN: &str = "/opdump-out";

/// Where the dump goes and whose config it is.
pub(crate) struct Target<'a> {
    /// The config text (JSON).
    pub(crate) text: &'a str,
    /// `--out` (or the command's default folder), relative to the current folder or
    /// absolute; `None` keeps the config's `path`.
    pub(crate) root: Option<&'a Path>,
    /// The config is opdump's own embedded one: its warnings are about opdump's choices, not
    /// the user's, and are not raised.
    pub(crate) embedded: bool,
}

/// Validates the config, sets the root and opens a Dumper; the error is the message to print.
pub(crate) fn open(
    target: &Target<'_>,
    env: &dyn Env,
    opts: &DumpOptions,
    events: EventSink,
) -> Result<Dumper, String> {
    let cann = dump_host::config::ConfigDialect::detect(target.text.as_bytes()).is_cann();
    let (text, root): (String, Option<PathBuf>) = match target.root {
        None => (target.text.to_owned(), None),
        // CANN's `dump_path` must be an existing directory (CANN checks it): the real root,
        // created here, goes into the config.
        Some(r) if cann => {
            let root = absolute(r);
            std::fs::create_dir_all(&root)
                .map_err(|e| format!("{}: cannot create the dump folder: {e}", root.display()))?;
            (with_path(target.text, &root)?, None)
        }
        Some(r) => (
            with_path(target.text, Path::new(STAND_IN))?,
            Some(absolute(r)),
        ),
    };
    let mut planned =
        DumpPlan::from_json(text.into_bytes(), env, opts).map_err(|e| e.to_string())?;
    // A torchair config that only names an acl.json (dump_config_path, enable_dump false)
    // dumps where that acl.json says: `--out` cannot move it.
    if let (true, Some(r), Some(g)) = (cann, target.root, planned.plan.ge.as_ref())
        && !g.base.starts_with(absolute(r))
    {
        return Err(format!(
            "--out {}: the dump goes to {}, the dump_path of the acl.json named by \
             dump_config_path (torchair's options override it only with enable_dump true)",
            r.display(),
            g.base.display()
        ));
    }
    if let Some(root) = root {
        planned.plan.config_bytes = with_path(target.text, &root)?.into_bytes();
        planned.plan.root = root;
    }
    if !target.embedded {
        for w in planned.warnings.warnings() {
            events.emit(&Event::ConfigWarning(w.clone()));
        }
    }
    Dumper::builder()
        .events(events)
        .open_plan(planned.plan)
        .map_err(|e| e.to_string())
}

/// `p` made absolute against the current folder (unchanged when that cannot be read).
pub(crate) fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_owned()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_owned())
    }
}

/// `text` with its dump root set to `root`: `common_dump_settings.path` (MindSpore),
/// `dump_path` (msprobe, torchair) or `dump.dump_path` (acl.json).
pub(crate) fn with_path(text: &str, root: &Path) -> Result<String, String> {
    use dump_host::config::ConfigDialect;
    let mut v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let root = serde_json::Value::String(root.to_string_lossy().into_owned());
    let dialect = ConfigDialect::detect(text.as_bytes());
    if dialect == ConfigDialect::AclJson {
        v.get_mut("dump")
            .and_then(|d| d.as_object_mut())
            .ok_or("no dump object")?
            .insert("dump_path".into(), root);
    } else if matches!(dialect, ConfigDialect::Msprobe | ConfigDialect::Torchair) {
        // msprobe's config.json: the root is `dump_path`.
        v.as_object_mut()
            .ok_or("the config is not a JSON object")?
            .insert("dump_path".into(), root);
    } else {
        let common = v
            .get_mut("common_dump_settings")
            .and_then(|c| c.as_object_mut())
            .ok_or("no common_dump_settings object")?;
        common.insert("path".into(), root);
    }
    serde_json::to_string_pretty(&v).map_err(|e| e.to_string())
}
