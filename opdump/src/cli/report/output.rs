//! Output files written whole, through dump-host's [`WholeFile`]: unnamed until complete, then
//! linked into place, so the target is either the old file, the complete new one, or absent,
//! also after a `kill -9`. Where the file system has no unnamed files, `WholeFile` writes
//! under a temporary name: a Ctrl-C while it is written removes that name (the handler knows
//! every temporary name in flight).

use std::{
    io::Write,
    path::{Path, PathBuf},
    sync::{Mutex, Once, OnceLock},
};

use dump_host::writer::WholeFile;

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

/// Mode of the files opdump writes whole: `0o644` less the process's umask (read from
/// `/proc/self/status`; 022 where it cannot be read).
pub(crate) fn out_mode() -> u32 {
    static MODE: OnceLock<u32> = OnceLock::new();
    *MODE.get_or_init(|| {
        let umask = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Umask:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            })
            .unwrap_or(0o022);
        0o644 & !umask
    })
}

/// Writes `bytes` to `path` whole or not at all (an earlier file there stays until then),
/// synced before it takes the name, with the Ctrl-C handler installed (reports). The error
/// names the path and the OS error.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    install_interrupt_handler();
    whole(path, bytes, true)
}

/// [`write_atomic`] without the sync and the handler, for a command's many outputs
/// (`convert`'s `.bin`, `.json` and csv files).
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), String> {
    whole(path, bytes, false)
}

fn whole(path: &Path, bytes: &[u8], sync: bool) -> Result<(), String> {
    if path.file_name().is_none() {
        return Err(format!("{}: not a file path", path.display()));
    }
    let w = WholeFile::create(path, out_mode()).map_err(|e| e.to_string())?;
    let tmp = w.temporary_path().map(Path::to_path_buf);
    if let (Some(t), Ok(mut l)) = (&tmp, IN_FLIGHT.lock()) {
        l.push(t.clone());
    }
    let result = (&mut w.file())
        .write_all(bytes)
        .and_then(|()| if sync { w.file().sync_all() } else { Ok(()) })
        .map_err(|e| format!("writing {}: {e}", path.display()))
        .and_then(|()| w.commit().map_err(|e| e.to_string()));
    if let (Some(t), Ok(mut l)) = (&tmp, IN_FLIGHT.lock()) {
        l.retain(|p| p != t);
    }
    result
}
