//! Where MindSpore 2.10 puts things under the dump root.
//!
//! ```text
//! {path}/rank_{rank}/
//!   .dump_metadata/data_dump.json, config.json
//!   {net}/{graph}/{iteration}/   tensors, statistic.csv, mapping.csv, kernel-args *.json
//!   {net}/{graph}/constants/
//!   execution_order/ms_execution_order_graph_{graph}.csv
//!   execution_order/ms_global_execution_order_graph_{graph}.csv
//! ```

use std::{
    fs, io,
    os::unix::fs::{DirBuilderExt, MetadataExt},
    path::{Component, Path, PathBuf},
};

use crate::writer::faults;

/// The directory tree of one rank's dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpTree {
    rank_dir: PathBuf,
    net: String,
}

impl DumpTree {
    /// The tree for `root` (the config's `path`), `rank` and `net_name`.
    ///
    /// `net` must already be validated (`[A-Za-z0-9_-]+`); the config parser guarantees it.
    pub fn new(root: &Path, rank: u32, net: &str) -> Self {
        DumpTree {
            rank_dir: root.join(format!("rank_{rank}")),
            net: net.to_owned(),
        }
    }

    /// The dump root (the config's `path`).
    pub fn root(&self) -> &Path {
        self.rank_dir.parent().unwrap_or_else(|| Path::new("."))
    }

    /// Checks that the dump root is usable: absent (it will be created), or a directory owned
    /// by this process's effective user (a symlink to one is fine: the user named it). Anything
    /// else is refused with a message saying what it is and what is allowed (the caller names
    /// the path: [`Error::Path`](crate::Error::Path)).
    pub(crate) fn check_root(&self) -> Result<(), String> {
        let root = self.root();
        let meta = match fs::metadata(root) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("the dump path cannot be read: {e}")),
        };
        if !meta.is_dir() {
            return Err(
                "the dump path is not a directory; `path` must name a directory (or a \
                        path to create one at)"
                    .to_owned(),
            );
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(format!(
                "the dump path is owned by uid {}, not by this process (uid {me}); opdump only \
                 dumps into a directory the process owns",
                meta.uid()
            ));
        }
        Ok(())
    }

    /// `{path}/rank_{rank}`.
    pub fn rank_dir(&self) -> &Path {
        &self.rank_dir
    }

    /// `{rank}/.dump_metadata`.
    pub fn metadata_dir(&self) -> PathBuf {
        self.rank_dir.join(".dump_metadata")
    }

    /// `{rank}/{net}/{graph}/{iteration}`.
    pub fn iteration_dir(&self, graph: u32, iteration: u64) -> PathBuf {
        self.rank_dir
            .join(&self.net)
            .join(graph.to_string())
            .join(iteration.to_string())
    }

    /// `{rank}/{net}/{graph}/constants`.
    pub fn constants_dir(&self, graph: u32) -> PathBuf {
        self.rank_dir
            .join(&self.net)
            .join(graph.to_string())
            .join("constants")
    }

    /// `{rank}/execution_order`.
    pub fn execution_order_dir(&self) -> PathBuf {
        self.rank_dir.join("execution_order")
    }

    /// `execution_order/ms_execution_order_graph_{graph}.csv`.
    pub fn execution_order_csv(&self, graph: u32) -> PathBuf {
        self.execution_order_dir()
            .join(format!("ms_execution_order_graph_{graph}.csv"))
    }

    /// `execution_order/ms_global_execution_order_graph_{graph}.csv`.
    pub fn global_execution_order_csv(&self, graph: u32) -> PathBuf {
        self.execution_order_dir()
            .join(format!("ms_global_execution_order_graph_{graph}.csv"))
    }
}

/// Creates `dir` and every missing directory between `root` and it (mode 0700), never
/// following a symlink below `root`: an existing component that is a symlink or not a
/// directory is an error naming it. (`root` itself is the user's choice and may be a link.) A
/// `dir` outside `root` is created as a whole.
pub fn create_dir_nofollow(root: &Path, dir: &Path) -> io::Result<()> {
    let mut b = fs::DirBuilder::new();
    b.mode(0o700);
    let Ok(rel) = dir.strip_prefix(root) else {
        faults::check(dir)?;
        return b.recursive(true).create(dir);
    };
    faults::check(root)?;
    // One `stat` when the root is there (nearly always), instead of a failing `mkdir` and a
    // `stat`.
    if !fs::metadata(root).is_ok_and(|m| m.is_dir()) {
        b.recursive(true).create(root)?;
    }
    let mut cur = root.to_path_buf();
    let mut components = rel.components().peekable();
    while let Some(c) = components.next() {
        let Component::Normal(c) = c else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: `..` or `.` inside the dump tree", dir.display()),
            ));
        };
        cur.push(c);
        faults::check(&cur)?;
        // A directory above the new one usually exists: one `lstat` checks it (the `mkdir`
        // that would fail with EEXIST before it is skipped). The last one is usually new:
        // `mkdir` first.
        let exists = components.peek().is_some()
            && fs::symlink_metadata(&cur).is_ok_and(|m| m.is_dir() && !m.file_type().is_symlink());
        if exists {
            continue;
        }
        match b.recursive(false).create(&cur) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let meta = fs::symlink_metadata(&cur)?;
                if meta.file_type().is_symlink() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "{} is a symbolic link; opdump never follows links inside the dump \
                             tree",
                            cur.display()
                        ),
                    ));
                }
                if !meta.is_dir() {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{} exists and is not a directory", cur.display()),
                    ));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_made_without_following_links_and_roots_are_checked() {
        let base = std::env::temp_dir().join(format!("opdump-paths-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let root = base.join("dump");
        let t = DumpTree::new(&root, 0, "Net");
        assert_eq!(t.root(), root);
        assert_eq!(t.check_root(), Ok(()), "absent: will be created");
        let it = t.iteration_dir(0, 1);
        create_dir_nofollow(&root, &it).unwrap();
        assert!(it.is_dir());
        assert_eq!(t.check_root(), Ok(()));
        // A link inside the tree is refused, and nothing is created through it.
        let elsewhere = base.join("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join("rank_0/Net/1")).unwrap();
        let e = create_dir_nofollow(&root, &t.iteration_dir(1, 0)).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
        // A file where a directory must go.
        fs::write(root.join("rank_0/Net/2"), b"").unwrap();
        let e = create_dir_nofollow(&root, &t.iteration_dir(2, 0)).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
        // Roots that are not a directory of ours.
        let file = base.join("file");
        fs::write(&file, b"").unwrap();
        let e = DumpTree::new(&file, 0, "Net").check_root().unwrap_err();
        assert!(e.contains("is not a directory"), "{e}");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let theirs = base.join("theirs");
            fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(4321), None).unwrap();
            let e = DumpTree::new(&theirs, 0, "Net").check_root().unwrap_err();
            assert!(e.contains("owned by uid 4321"), "{e}");
        }
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn layout_matches_reference() {
        let t = DumpTree::new(Path::new("/ref/raw/a/dump"), 0, "TinyNet");
        assert_eq!(
            t.iteration_dir(0, 2),
            Path::new("/ref/raw/a/dump/rank_0/TinyNet/0/2")
        );
        assert_eq!(
            t.metadata_dir(),
            Path::new("/ref/raw/a/dump/rank_0/.dump_metadata")
        );
        assert_eq!(
            t.global_execution_order_csv(1),
            Path::new(
                "/ref/raw/a/dump/rank_0/execution_order/ms_global_execution_order_graph_1.csv"
            )
        );
        assert_eq!(
            t.constants_dir(3),
            Path::new("/ref/raw/a/dump/rank_0/TinyNet/3/constants")
        );
    }
}
