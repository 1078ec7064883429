//! Opening the Dumper of `demo` and `run`: config text, and the dump root `--out` names.
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

use super::demo::{absolute, with_path};

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
    let (text, root): (String, Option<PathBuf>) = match target.root {
        None => (target.text.to_owned(), None),
        Some(r) => (
            with_path(target.text, Path::new(STAND_IN))?,
            Some(absolute(r)),
        ),
    };
    let mut planned =
        DumpPlan::from_json(text.into_bytes(), env, opts).map_err(|e| e.to_string())?;
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
