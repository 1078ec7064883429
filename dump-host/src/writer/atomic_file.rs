//! Crash-consistent files: written under a temporary name, then renamed into place.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, Write},
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
    time::{SystemTime, UNIX_EPOCH},
};

use super::faults::{self, FaultyFile};

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Prefix of temporary files; a crash can leave `.opdump-tmp.*` files behind, never a truncated
/// file under a final name.
pub const TMP_PREFIX: &str = ".opdump-tmp.";

/// Mode bits of every file opdump writes (MindSpore: read-only for the owner).
pub(crate) const FILE_MODE: u32 = 0o400;

/// Fresh names tried before giving up when temporary names exist already.
const TMP_TRIES: u32 = 16;

/// A temporary name no other writer uses: the process id, a per-process sequence number and
/// the clock's nanoseconds mixed with the try number, so a reused PID (PID 1 in containers after
/// a killed run) meeting an old run's leftover picks another name on the next try.
fn tmp_name(dir: &Path, attempt: u32) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let salt = u64::from(nanos) ^ (u64::from(attempt) << 32);
    dir.join(format!(
        "{TMP_PREFIX}{}.{}.{salt:x}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ))
}

/// `error` with `path` and what was being done in its message (its kind is kept).
pub(crate) fn at(path: &Path, doing: &str, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{doing} {}: {error}", path.display()))
}

/// Creates a new temporary file in `dir` (never following a symlink), retrying with a fresh
/// name while one exists.
pub(crate) fn create_tmp(dir: &Path, append: bool) -> io::Result<(File, PathBuf)> {
    let mut attempt = 0;
    loop {
        let tmp = tmp_name(dir, attempt);
        let opened = faults::check(&tmp).and_then(|()| {
            OpenOptions::new()
                .write(true)
                .append(append)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)
        });
        match opened {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt + 1 < TMP_TRIES => {
                attempt += 1;
            }
            Err(e) => return Err(at(&tmp, "creating", e)),
        }
    }
}

/// Writes `final_path` through `fill`: the bytes go to a temporary file in the same directory
/// (a fresh name, retried if it exists), which is given `mode` and renamed over `final_path`
/// (atomic on POSIX; a symlink there is replaced, never followed). On any error the temporary
/// file is removed, nothing appears under `final_path`, and the error names the path that
/// failed.
pub(crate) fn write_atomic(
    final_path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut FaultyFile<'_>) -> io::Result<()>,
) -> io::Result<()> {
    let dir = final_path.parent().unwrap_or_else(|| Path::new("."));
    let (mut file, tmp) = create_tmp(dir, false)?;
    let result = (|| {
        // Callers write in large pieces (dump_npy::write_to: one vectored write, or 1 MiB
        // widened chunks), so no BufWriter copy in between.
        fill(&mut FaultyFile {
            file: &mut file,
            path: &tmp,
        })
        .map_err(|e| at(&tmp, "writing", e))?;
        faults::check(&tmp)
            .and_then(|()| file.set_permissions(fs::Permissions::from_mode(mode)))
            .map_err(|e| at(&tmp, "setting the mode of", e))?;
        drop(file);
        faults::check(final_path)
            .and_then(|()| fs::rename(&tmp, final_path))
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "renaming {} to {}: {e}",
                        tmp.display(),
                        final_path.display()
                    ),
                )
            })
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes `bytes` to `final_path` atomically (see [`write_atomic`]).
pub(crate) fn write_bytes_atomic(final_path: &Path, mode: u32, bytes: &[u8]) -> io::Result<()> {
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

    #[test]
    fn leftover_temp_names_of_an_earlier_run_with_the_same_pid_are_skipped() {
        // An earlier process with this PID (PID 1 in a container) was killed and left its
        // temporary files: every name this process would try first exists already.
        let d = tmpdir("pid-reuse");
        let pid = std::process::id();
        let next = SEQ.load(Ordering::Relaxed);
        for seq in next..next + 64 {
            for salt in 0..4u64 {
                // Old-style names and new-style names with a few salts.
                fs::write(d.join(format!("{TMP_PREFIX}{pid}.{seq}")), b"old").unwrap();
                fs::write(d.join(format!("{TMP_PREFIX}{pid}.{seq}.{salt:x}")), b"old").unwrap();
            }
        }
        let before = fs::read_dir(&d).unwrap().count();
        let p = d.join("c.npy");
        write_bytes_atomic(&p, 0o400, b"new").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert_eq!(fs::read_dir(&d).unwrap().count(), before + 1);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_error_names_the_temporary_path_tried() {
        let d = tmpdir("err-path");
        let missing = d.join("gone").join("x.npy");
        let e = write_bytes_atomic(&missing, 0o400, b"x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("{}/{TMP_PREFIX}", d.join("gone").display())),
            "{msg}"
        );
        fs::remove_dir_all(&d).unwrap();
    }
}
