//! A small tmpfs for full-disk and read-only tests, unmounted on drop.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::{
    Prereq, check,
    process::{mount_tmpfs, run_ok},
};

/// A tmpfs mounted on a directory; unmounted (lazily, so open files do not block it) and the
/// empty mount point removed on drop.
#[derive(Debug)]
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount -o size=`, e.g. `"2m"`, `"256k"`) on `dir` (created if
    /// needed). `None` when it cannot be mounted: the test skips, or fails with `CI=true`
    /// ([`Prereq::Tmpfs`], see [`check`]).
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        check(Prereq::Tmpfs, mount_tmpfs(dir, size)).then(|| Tmpfs {
            path: dir.to_path_buf(),
        })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remounts it read-only (root bypasses permission bits; a read-only mount does not).
    pub fn remount_read_only(&self) -> Result<(), String> {
        run_ok(
            Command::new("mount")
                .args(["-o", "remount,ro"])
                .arg(&self.path),
        )
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = run_ok(Command::new("umount").arg("-l").arg(&self.path));
        let _ = std::fs::remove_dir(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mounted_tmpfs_is_full_at_its_size_and_read_only_after_remount() {
        let dir = std::env::temp_dir().join(format!("opdump-tmpfs-test-{}", std::process::id()));
        let Some(t) = Tmpfs::mount(&dir, "64k") else {
            return;
        };
        let big = vec![7u8; 256 << 10];
        let e = std::fs::write(t.path().join("big"), &big).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28), "ENOSPC expected: {e}");
        t.remount_read_only().unwrap();
        let e = std::fs::write(t.path().join("small"), b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(30), "EROFS expected: {e}");
        drop(t);
        assert!(!dir.exists(), "unmounted and the mount point removed");
    }
}
