//! Temporary directories and directory-tree listing.

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
};

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A fresh directory under the system temp dir, removed (with everything in it) on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `{tmp}/opdump-tests-{tag}-{pid}-{n}`.
    pub fn new(tag: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!(
            "opdump-tests-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Make directories writable again (tests chmod some) so removal succeeds for non-root.
        for e in walk(&self.path) {
            if e.is_dir {
                let _ = fs::set_permissions(&e.path, fs::Permissions::from_mode(0o700));
            }
        }
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// One entry of a directory tree.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Full path.
    pub path: PathBuf,
    /// `true` for a directory.
    pub is_dir: bool,
    /// Permission bits (`mode & 0o7777`).
    pub mode: u32,
    /// Size in bytes.
    pub size: u64,
}

/// Every entry below `root` (not `root` itself), depth first, sorted by path. Symlinks are
/// listed, not followed.
pub fn walk(root: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let Ok(md) = fs::symlink_metadata(e.path()) else {
                continue;
            };
            let is_dir = md.is_dir();
            if is_dir {
                stack.push(e.path());
            }
            out.push(Entry {
                path: e.path(),
                is_dir,
                mode: md.permissions().mode() & 0o7777,
                size: md.len(),
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The `.npy` files below `root`.
pub fn npy_files(root: &Path) -> Vec<PathBuf> {
    walk(root)
        .into_iter()
        .filter(|e| !e.is_dir && e.path.extension().is_some_and(|x| x == "npy"))
        .map(|e| e.path)
        .collect()
}

/// The file name of `p` as a `String`.
pub fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}
