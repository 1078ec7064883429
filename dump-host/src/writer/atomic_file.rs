//! Crash-consistent files: written under a temporary name, then renamed into place.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, Write},
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::Path,
    sync::atomic::{AtomicU64, Ordering},
};

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Prefix of temporary files; a crash can leave `.opdump-tmp.*` files behind, never a truncated
/// file under a final name.
pub const TMP_PREFIX: &str = ".opdump-tmp.";

/// Writes `final_path` through `fill`: the bytes go to a temporary file in the same directory,
/// which is flushed, given `mode` and renamed over `final_path` (atomic on POSIX). On any error
/// the temporary file is removed and nothing appears under `final_path`.
pub fn write_atomic(
    final_path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let dir = final_path.parent().unwrap_or_else(|| Path::new("."));
    let tmp = dir.join(format!(
        "{TMP_PREFIX}{}.{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        // Callers write in large pieces (dump_npy::write_to: one vectored write, or 1 MiB
        // widened chunks), so no BufWriter copy in between.
        fill(&mut file)?;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        drop(file);
        fs::rename(&tmp, final_path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes `bytes` to `final_path` atomically (see [`write_atomic`]).
pub fn write_bytes_atomic(final_path: &Path, mode: u32, bytes: &[u8]) -> io::Result<()> {
    write_atomic(final_path, mode, |w| w.write_all(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("opdump-atomic-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn writes_with_mode_and_leaves_no_temp() {
        let d = tmpdir("ok");
        let p = d.join("a.npy");
        write_bytes_atomic(&p, 0o400, b"hello").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"hello");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o400
        );
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn failed_fill_leaves_nothing() {
        let d = tmpdir("fail");
        let p = d.join("b.npy");
        let err = write_atomic(&p, 0o400, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("simulated failure"))
        });
        assert!(err.is_err());
        assert!(!p.exists());
        assert_eq!(fs::read_dir(&d).unwrap().count(), 0, "temp file removed");
        fs::remove_dir_all(&d).unwrap();
    }
}
