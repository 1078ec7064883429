//! Output files written whole: the bytes go to a temp file beside the target, which is then
//! renamed over it. A Ctrl-C while it is written removes the temp file (the handler knows every
//! temp file in flight), so the target is either the old file, the complete new one, or absent.

use std::{
    io::Write,
    path::{Path, PathBuf},
    sync::{Mutex, Once},
};

static IN_FLIGHT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static HANDLER: Once = Once::new();

/// Installs the Ctrl-C handler once: it removes the temp files in flight and exits with 130.
pub fn install_interrupt_handler() {
    HANDLER.call_once(|| {
        // A failure to install (another handler exists) only loses the cleanup.
        let _ = ctrlc::set_handler(|| {
            if let Ok(list) = IN_FLIGHT.lock() {
                for p in list.iter() {
                    let _ = std::fs::remove_file(p);
                }
            }
            std::process::exit(130);
        });
    });
}

/// Writes `bytes` to `path` through a temp file and a rename. The error names the path and
/// the OS error.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    install_interrupt_handler();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| format!("{}: not a file path", path.display()))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{name}.opdump-tmp-{}", std::process::id()));
    if let Ok(mut l) = IN_FLIGHT.lock() {
        l.push(tmp.clone());
    }
    let result = (|| {
        let mut f = std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
        f.write_all(bytes)
            .and_then(|()| f.sync_all())
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    if let Ok(mut l) = IN_FLIGHT.lock() {
        l.retain(|p| p != &tmp);
    }
    result
}
