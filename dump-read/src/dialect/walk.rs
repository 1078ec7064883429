//! Listing a dump directory the way every dialect does: entries of one kind (directories or
//! regular files), never through a symlink, with UTF-8 names, sorted by name.

use std::{
    fs,
    path::{Path, PathBuf},
};

/// Entries of `dir` whose type passes `keep` (symlinks are neither files nor directories
/// here), as `(name, path)` sorted by name; unreadable directories and non-UTF-8 names give
/// nothing.
fn entries(dir: &Path, keep: impl Fn(&fs::FileType) -> bool) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| keep(&t)))
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .collect();
    out.sort();
    out
}

/// Sub-directories of `dir` (no symlinks), sorted by name.
pub(crate) fn subdirs(dir: &Path) -> Vec<(String, PathBuf)> {
    entries(dir, fs::FileType::is_dir)
}

/// Regular files of `dir` (no symlinks), sorted by name.
pub(crate) fn files(dir: &Path) -> Vec<(String, PathBuf)> {
    entries(dir, fs::FileType::is_file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_sorted_and_no_symlinks() {
        let d = std::env::temp_dir().join(format!("dump-read-walk-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(d.join("b_dir")).unwrap();
        fs::create_dir_all(d.join("a_dir")).unwrap();
        fs::write(d.join("z.npy"), b"x").unwrap();
        fs::write(d.join("c.csv"), b"x").unwrap();
        std::os::unix::fs::symlink(d.join("a_dir"), d.join("link_dir")).unwrap();
        std::os::unix::fs::symlink(d.join("z.npy"), d.join("link.npy")).unwrap();
        let names = |v: Vec<(String, PathBuf)>| v.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_eq!(names(subdirs(&d)), ["a_dir", "b_dir"]);
        assert_eq!(names(files(&d)), ["c.csv", "z.npy"]);
        assert!(subdirs(&d.join("missing")).is_empty());
        fs::remove_dir_all(&d).unwrap();
    }
}
