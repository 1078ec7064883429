//! Crash-consistent files: written where no name shows them, then linked into place.
//!
//! On Linux a file is created unnamed in its target directory (`O_TMPFILE`), written, given its
//! mode and linked under its final name (`linkat` through `/proc/self/fd/N` with
//! `AT_SYMLINK_FOLLOW`, which needs no capability): one inode and one directory entry per file,
//! nothing under the final name until the file is whole, and nothing at all left by a crash.
//! Where the final name exists already, the file is linked under a temporary name and renamed
//! over it (as on the fallback path, a symlink there is replaced, never followed).
//!
//! The fallback, wherever `O_TMPFILE` is refused (`EOPNOTSUPP`, `EISDIR` or `EINVAL`: older
//! kernels, some FUSE, NFS or overlay file systems) or `/proc/self/fd` is missing: the file is
//! written under a temporary name (`.opdump-tmp.*`) and renamed into place. Only this path can
//! leave a temporary file after a crash. A refusal is remembered per file system (device
//! number), so it is not retried for every file.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, Write},
    os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
    sync::{
        Mutex, OnceLock, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

use super::faults::{self, FaultyFile};

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Prefix of temporary files; a crash can leave `.opdump-tmp.*` files behind (only where the
/// file system refuses unnamed files, see the module's documentation), never a truncated file
/// under a final name.
pub const TMP_PREFIX: &str = ".opdump-tmp.";

/// Mode bits of every file opdump writes (MindSpore: read-only for the owner).
pub(crate) const FILE_MODE: u32 = 0o400;

/// Fresh names tried before giving up when temporary names exist already.
const TMP_TRIES: u32 = 16;

/// Set to a value other than `0` or empty, files are always written under named temporaries
/// (the fallback path), as on a file system that refuses `O_TMPFILE`: for tests and diagnosis.
pub const NAMED_TEMPORARIES_ENV: &str = "OPDUMP_NAMED_TEMPORARIES";

/// Whether this process never tries unnamed files: [`NAMED_TEMPORARIES_ENV`] is set, or
/// `/proc/self/fd` (needed to link an unnamed file) is missing, or this is not Linux.
fn named_only() -> bool {
    static NAMED_ONLY: OnceLock<bool> = OnceLock::new();
    #[cfg(test)]
    if FORCE_NAMED.with(std::cell::Cell::get) {
        return true;
    }
    *NAMED_ONLY.get_or_init(|| {
        let forced =
            std::env::var_os(NAMED_TEMPORARIES_ENV).is_some_and(|v| !v.is_empty() && v != "0");
        forced
            || !cfg!(target_os = "linux")
            || !fs::metadata("/proc/self/fd").is_ok_and(|m| m.is_dir())
    })
}

#[cfg(test)]
thread_local! {
    /// Test-only: this thread writes through named temporaries (the fallback path).
    static FORCE_NAMED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Test-only: makes this thread's writes take the named-temporary fallback (`true`) or the
/// default path (`false`).
#[cfg(test)]
pub(crate) fn force_named_on_this_thread(on: bool) {
    FORCE_NAMED.with(|f| f.set(on));
}

/// Set once some file system refused `O_TMPFILE`; until then no `stat` is spent on looking the
/// directory's device up in [`REFUSED`].
static ANY_REFUSED: AtomicBool = AtomicBool::new(false);
/// Device numbers of the file systems that refused `O_TMPFILE`.
static REFUSED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

fn refused_on(dev: u64) -> bool {
    REFUSED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&dev)
}

fn remember_refusal(dev: u64) {
    let mut r = REFUSED.lock().unwrap_or_else(PoisonError::into_inner);
    if !r.contains(&dev) {
        r.push(dev);
    }
    ANY_REFUSED.store(true, Ordering::Relaxed);
}

/// Whether `e` is `open(O_TMPFILE)` being refused by the kernel or the file system (as opposed
/// to an ordinary failure such as a missing directory or a full disk).
fn is_refusal(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
    )
}

/// Creates an unnamed file in `dir`, which will become `final_path` (named in errors and
/// counted by the fault seam), open for writing (appending if `append`). `None` where unnamed
/// files are refused (this file system refused before, or refuses now): use [`create_tmp`].
pub(crate) fn create_unnamed(
    dir: &Path,
    final_path: &Path,
    append: bool,
) -> io::Result<Option<File>> {
    if named_only() {
        return Ok(None);
    }
    if ANY_REFUSED.load(Ordering::Relaxed)
        && let Ok(m) = fs::metadata(dir)
        && refused_on(m.dev())
    {
        return Ok(None);
    }
    #[cfg(target_os = "linux")]
    {
        let opened = faults::check(final_path).and_then(|()| {
            OpenOptions::new()
                .write(true)
                .append(append)
                .mode(0o600)
                .custom_flags(libc::O_TMPFILE)
                .open(dir)
        });
        match opened {
            Ok(f) => Ok(Some(f)),
            Err(e) if is_refusal(&e) => {
                if let Ok(m) = fs::metadata(dir) {
                    remember_refusal(m.dev());
                }
                Ok(None)
            }
            Err(e) => Err(at(final_path, "creating", e)),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (final_path, append);
        Ok(None)
    }
}

/// Creates a scratch file in `dir`, open for reading and writing, that no crash can leave
/// behind: unnamed (`O_TMPFILE`) where the file system allows, else under a fresh temporary
/// name ([`TMP_PREFIX`]), returned so that the caller removes it when done. `label` names the
/// file in errors and for the fault seam.
pub(crate) fn create_scratch(dir: &Path, label: &Path) -> io::Result<(File, Option<PathBuf>)> {
    #[cfg(target_os = "linux")]
    if !named_only()
        && (!ANY_REFUSED.load(Ordering::Relaxed)
            || !fs::metadata(dir).is_ok_and(|m| refused_on(m.dev())))
    {
        let opened = faults::check(label).and_then(|()| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .mode(0o600)
                .custom_flags(libc::O_TMPFILE)
                .open(dir)
        });
        match opened {
            Ok(f) => return Ok((f, None)),
            Err(e) if is_refusal(&e) => {
                if let Ok(m) = fs::metadata(dir) {
                    remember_refusal(m.dev());
                }
            }
            Err(e) => return Err(at(label, "creating", e)),
        }
    }
    let (f, path) = open_tmp(dir, false, true)?;
    Ok((f, Some(path)))
}

/// Links `file`, created by [`create_unnamed`], under `to`. Fails with `AlreadyExists` (never
/// replacing anything) when `to` exists; the error is the bare OS error.
pub(crate) fn link_unnamed(file: &File, to: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::{ffi::CString, os::unix::ffi::OsStrExt, os::unix::io::AsRawFd};
        let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .map_err(io::Error::other)?;
        let to = CString::new(to.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
        // SAFETY: `from` and `to` are NUL-terminated strings that outlive the call; linkat reads
        // them and keeps no pointer. The descriptor named by `from` is `file`'s, open for the
        // whole call.
        let r = unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, to);
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

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
    open_tmp(dir, append, false)
}

/// [`create_tmp`], also open for reading when `read`.
fn open_tmp(dir: &Path, append: bool, read: bool) -> io::Result<(File, PathBuf)> {
    let mut attempt = 0;
    loop {
        let tmp = tmp_name(dir, attempt);
        let opened = faults::check(&tmp).and_then(|()| {
            OpenOptions::new()
                .read(read)
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

/// Renames `tmp` over `final_path`; on failure `tmp` is removed and the error names both.
fn rename_into_place(tmp: &Path, final_path: &Path) -> io::Result<()> {
    let renamed = faults::check(final_path).and_then(|()| fs::rename(tmp, final_path));
    renamed.map_err(|e| {
        let _ = fs::remove_file(tmp);
        io::Error::new(
            e.kind(),
            format!(
                "renaming {} to {}: {e}",
                tmp.display(),
                final_path.display()
            ),
        )
    })
}

/// A file that appears under its final name whole or not at all, for writers that stream into
/// it (also with positioned writes from several threads, through [`file`](Self::file)).
///
/// [`create`](Self::create) opens an unnamed file in the target's directory (or, where the file
/// system refuses those, a file under a fresh temporary name, [`TMP_PREFIX`]);
/// [`commit`](Self::commit) gives it its mode and links (or renames) it into place, replacing an
/// existing file atomically (a symlink there is replaced, never followed). Dropped without a
/// commit (an error on the way), it leaves nothing; a crash leaves nothing either, except a
/// temporary file on the fallback path.
///
/// ```
/// use std::io::Write;
/// let dir = std::env::temp_dir().join(format!("opdump-whole-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("a.bin");
/// let w = dump_host::writer::WholeFile::create(&path, 0o644)?;
/// (&mut w.file()).write_all(b"half")?;
/// drop(w); // not committed: nothing under the name
/// assert!(!path.exists());
/// let w = dump_host::writer::WholeFile::create(&path, 0o644)?;
/// (&mut w.file()).write_all(b"whole")?;
/// w.commit()?;
/// assert_eq!(std::fs::read(&path)?, b"whole");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct WholeFile {
    file: File,
    final_path: PathBuf,
    /// The temporary name on the fallback path; `None` for an unnamed file (or once renamed).
    tmp: Option<PathBuf>,
    mode: u32,
}

impl WholeFile {
    /// Opens the file that will become `final_path` (its directory must exist), with `mode`
    /// once committed. The error names `final_path` (or the temporary name) and the OS error.
    pub fn create(final_path: &Path, mode: u32) -> io::Result<WholeFile> {
        let dir = final_path.parent().unwrap_or_else(|| Path::new("."));
        let (file, tmp) = match create_unnamed(dir, final_path, false)? {
            Some(file) => (file, None),
            None => {
                let (file, tmp) = create_tmp(dir, false)?;
                (file, Some(tmp))
            }
        };
        Ok(WholeFile {
            file,
            final_path: final_path.to_path_buf(),
            tmp,
            mode,
        })
    }

    /// The open file, for writes (`&File` is `Write`) and positioned writes.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The name the file will have.
    pub fn path(&self) -> &Path {
        &self.final_path
    }

    /// The temporary name the file has until [`commit`](Self::commit), on the fallback path
    /// for file systems without unnamed files; `None` for an unnamed file. A program that
    /// exits on a signal can remove it (a drop does that otherwise).
    pub fn temporary_path(&self) -> Option<&Path> {
        self.tmp.as_deref()
    }

    /// The name errors give while the file is written: the temporary name on the fallback
    /// path, else the final one.
    fn label(&self) -> &Path {
        self.tmp.as_deref().unwrap_or(&self.final_path)
    }

    /// The file behind the fault seam (for [`write_atomic`]).
    fn faulty(&mut self) -> FaultyFile<'_> {
        FaultyFile {
            path: self.tmp.as_deref().unwrap_or(&self.final_path),
            file: &mut self.file,
        }
    }

    /// Gives the file its mode and puts it under its final name. On an error nothing appears
    /// there and no temporary file stays; the error names the path that failed.
    pub fn commit(mut self) -> io::Result<()> {
        let label = self.label().to_path_buf();
        faults::check(&label)
            .and_then(|()| {
                self.file
                    .set_permissions(fs::Permissions::from_mode(self.mode))
            })
            .map_err(|e| at(&label, "setting the mode of", e))?;
        if let Some(tmp) = self.tmp.take() {
            return rename_into_place(&tmp, &self.final_path);
        }
        let final_path = &self.final_path;
        match faults::check(final_path).and_then(|()| link_unnamed(&self.file, final_path)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // The name is taken (a file of an earlier run, a symlink): link under a fresh
                // temporary name and rename that over it, as the named path does.
                let dir = final_path.parent().unwrap_or_else(|| Path::new("."));
                let mut attempt = 0;
                let tmp = loop {
                    let tmp = tmp_name(dir, attempt);
                    match faults::check(&tmp).and_then(|()| link_unnamed(&self.file, &tmp)) {
                        Ok(()) => break tmp,
                        Err(e)
                            if e.kind() == io::ErrorKind::AlreadyExists
                                && attempt + 1 < TMP_TRIES =>
                        {
                            attempt += 1;
                        }
                        Err(e) => return Err(at(&tmp, "linking", e)),
                    }
                };
                rename_into_place(&tmp, final_path)
            }
            Err(e) => Err(at(final_path, "linking into place", e)),
        }
    }
}

impl Drop for WholeFile {
    fn drop(&mut self) {
        // Not committed: the temporary file goes (an unnamed one goes with its descriptor).
        if let Some(tmp) = self.tmp.take() {
            let _ = fs::remove_file(tmp);
        }
    }
}

/// Writes `final_path` through `fill` into a [`WholeFile`]: on any error nothing appears under
/// `final_path`, no temporary file stays, and the error names the path that failed. Every write
/// of `fill` goes through the fault seam.
pub(crate) fn write_atomic(
    final_path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut FaultyFile<'_>) -> io::Result<()>,
) -> io::Result<()> {
    let mut w = WholeFile::create(final_path, mode)?;
    // Callers write in large pieces (dump_npy::write_to: one vectored write, or 1 MiB widened
    // chunks), so no BufWriter copy in between.
    fill(&mut w.faulty()).map_err(|e| at(w.label(), "writing", e))?;
    w.commit()
}

/// Writes `bytes` to `final_path` atomically (see [`write_atomic`]).
pub(crate) fn write_bytes_atomic(final_path: &Path, mode: u32, bytes: &[u8]) -> io::Result<()> {
    write_atomic(final_path, mode, |w| w.write_all(bytes))
}

/// The file-system type of `d` (`statfs`'s `f_type`).
#[cfg(test)]
fn fs_type(d: &Path) -> i64 {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(d.as_os_str().as_bytes()).unwrap();
    // SAFETY: all-zero bytes are a valid `statfs` (plain integers).
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `s` a writable statfs, both live for the call.
    assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut s) }, 0);
    #[allow(clippy::unnecessary_cast)]
    let t = s.f_type as i64;
    t
}

/// Test-only: whether writes in `d` take unnamed files: ext2/3/4 and tmpfs support `O_TMPFILE`
/// (since Linux 3.11 and 3.15).
#[cfg(test)]
pub(crate) fn supports_unnamed(d: &Path) -> bool {
    const EXT4: i64 = 0xEF53;
    const TMPFS: i64 = 0x0102_1994;
    !named_only() && matches!(fs_type(d), EXT4 | TMPFS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{cell::RefCell, rc::Rc};

    fn tmpdir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("opdump-atomic-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// Runs `f` once on each path: unnamed files (`false`) and the named fallback (`true`).
    fn both_paths(mut f: impl FnMut(bool)) {
        for named in [false, true] {
            force_named_on_this_thread(named);
            f(named);
        }
        force_named_on_this_thread(false);
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<_> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_scratch_file_is_unnamed_where_allowed_and_named_otherwise() {
        use std::io::{Read, Seek, SeekFrom};
        both_paths(|named| {
            let d = tmpdir(&format!("scratch-{named}"));
            let (mut f, path) = create_scratch(&d, &d.join("label")).unwrap();
            f.write_all(b"spilled bytes").unwrap();
            f.seek(SeekFrom::Start(8)).unwrap();
            let mut back = String::new();
            f.read_to_string(&mut back).unwrap();
            assert_eq!(back, "bytes");
            let listed = names(&d);
            match (named, path) {
                (false, None) => assert!(listed.is_empty(), "{listed:?}"),
                (true, Some(p)) => {
                    let n = p.file_name().unwrap().to_string_lossy().into_owned();
                    assert!(n.starts_with(TMP_PREFIX), "{n}");
                    assert_eq!(listed, vec![n]);
                }
                (named, path) => panic!("named {named}: path {path:?}"),
            }
            drop(f);
            fs::remove_dir_all(&d).unwrap();
        });
    }

    /// Lists `d` at every call of the fault seam during `f` (each open, write, chmod, link and
    /// rename of a write), returning every listing in order.
    fn listings_during(d: &Path, f: impl FnOnce()) -> Vec<Vec<String>> {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let (s, dir) = (Rc::clone(&seen), d.to_owned());
        faults::set_hook_on_this_thread(Some(Box::new(move |_| {
            s.borrow_mut().push(names(&dir));
        })));
        f();
        faults::set_hook_on_this_thread(None);
        Rc::try_unwrap(seen).unwrap().into_inner()
    }

    #[test]
    fn writes_with_mode_and_leaves_no_temp() {
        both_paths(|named| {
            let d = tmpdir(&format!("ok-{named}"));
            let p = d.join("a.npy");
            write_bytes_atomic(&p, 0o400, b"hello").unwrap();
            assert_eq!(fs::read(&p).unwrap(), b"hello");
            assert_eq!(
                fs::metadata(&p).unwrap().permissions().mode() & 0o777,
                0o400
            );
            assert_eq!(names(&d), ["a.npy"]);
            fs::remove_dir_all(&d).unwrap();
        });
    }

    #[test]
    fn no_temporary_name_ever_appears_on_ext4_and_tmpfs() {
        let mut dirs = vec![tmpdir("unnamed")];
        if Path::new("/dev/shm").is_dir() {
            let shm = Path::new("/dev/shm").join(format!("opdump-atomic-{}", std::process::id()));
            let _ = fs::remove_dir_all(&shm);
            fs::create_dir_all(&shm).unwrap();
            dirs.push(shm);
        }
        for d in &dirs {
            let p = d.join("a.npy");
            let seen = listings_during(d, || {
                write_atomic(&p, 0o400, |w| {
                    w.write_all(b"first half, ")?;
                    w.write_all(b"second half")
                })
                .unwrap();
            });
            // Calls: create, 2 writes, chmod, link.
            assert_eq!(seen.len(), 5, "{seen:?}");
            if supports_unnamed(d) {
                for l in &seen {
                    assert!(l.is_empty(), "{}: {l:?} seen before the link", d.display());
                }
            }
            assert_eq!(fs::read(&p).unwrap(), b"first half, second half");
            assert_eq!(names(d), ["a.npy"]);
            fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn the_fallback_writes_a_named_temporary_and_renames_it() {
        let d = tmpdir("fallback");
        let p = d.join("a.npy");
        force_named_on_this_thread(true);
        let seen = listings_during(&d, || write_bytes_atomic(&p, 0o400, b"x").unwrap());
        force_named_on_this_thread(false);
        // Calls: create, write, chmod, rename: the temporary name is there from the write on.
        assert_eq!(seen.len(), 4, "{seen:?}");
        assert!(seen[1][0].starts_with(TMP_PREFIX), "{seen:?}");
        assert!(seen[3][0].starts_with(TMP_PREFIX), "{seen:?}");
        assert_eq!(names(&d), ["a.npy"]);
        assert_eq!(fs::read(&p).unwrap(), b"x");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_existing_file_or_symlink_is_replaced_never_followed() {
        both_paths(|named| {
            let d = tmpdir(&format!("replace-{named}"));
            let p = d.join("a.npy");
            write_bytes_atomic(&p, 0o400, b"old run").unwrap();
            write_bytes_atomic(&p, 0o400, b"new").unwrap();
            assert_eq!(fs::read(&p).unwrap(), b"new");
            assert_eq!(
                fs::metadata(&p).unwrap().permissions().mode() & 0o777,
                0o400
            );
            let target = d.join("precious");
            fs::write(&target, b"keep").unwrap();
            let link = d.join("b.npy");
            std::os::unix::fs::symlink(&target, &link).unwrap();
            write_bytes_atomic(&link, 0o400, b"mine").unwrap();
            assert!(!fs::symlink_metadata(&link).unwrap().is_symlink());
            assert_eq!(fs::read(&link).unwrap(), b"mine");
            assert_eq!(fs::read(&target).unwrap(), b"keep");
            assert_eq!(names(&d), ["a.npy", "b.npy", "precious"]);
            fs::remove_dir_all(&d).unwrap();
        });
    }

    #[test]
    fn a_whole_file_written_at_offsets_appears_only_when_committed() {
        use std::os::unix::fs::FileExt;
        both_paths(|named| {
            let d = tmpdir(&format!("whole-{named}"));
            let p = d.join("c.npy");
            // Dropped before its commit: nothing under the name, no temporary file.
            let w = WholeFile::create(&p, 0o644).unwrap();
            w.file().write_all_at(b"half", 0).unwrap();
            assert_eq!(names(&d).len(), usize::from(named), "{:?}", names(&d));
            drop(w);
            assert_eq!(names(&d), Vec::<String>::new());
            // Pieces at their offsets (as threads write them), then the commit replaces an
            // existing file whole and gives the mode.
            fs::write(&p, b"old").unwrap();
            let w = WholeFile::create(&p, 0o640).unwrap();
            assert_eq!(w.path(), p);
            w.file().write_all_at(b"world", 6).unwrap();
            w.file().write_all_at(b"hello ", 0).unwrap();
            assert_eq!(fs::read(&p).unwrap(), b"old");
            w.commit().unwrap();
            assert_eq!(fs::read(&p).unwrap(), b"hello world");
            assert_eq!(
                fs::metadata(&p).unwrap().permissions().mode() & 0o777,
                0o640
            );
            assert_eq!(names(&d), ["c.npy"]);
            fs::remove_dir_all(&d).unwrap();
        });
    }

    #[test]
    fn failed_fill_leaves_nothing() {
        both_paths(|named| {
            let d = tmpdir(&format!("fail-{named}"));
            let p = d.join("b.npy");
            let err = write_atomic(&p, 0o400, |w| {
                w.write_all(b"partial")?;
                Err(io::Error::other("simulated failure"))
            })
            .unwrap_err();
            assert!(err.to_string().contains("simulated failure"), "{err}");
            assert!(!p.exists());
            assert_eq!(names(&d), Vec::<String>::new(), "temp file removed");
            // A failure replacing an existing file keeps the old one whole.
            write_bytes_atomic(&p, 0o400, b"whole").unwrap();
            assert!(write_atomic(&p, 0o400, |_| Err(io::Error::other("no"))).is_err());
            assert_eq!(fs::read(&p).unwrap(), b"whole");
            assert_eq!(names(&d), ["b.npy"]);
            fs::remove_dir_all(&d).unwrap();
        });
    }

    #[test]
    fn every_injected_fault_leaves_nothing_or_the_old_file() {
        use super::faults::{ARM_LOCK, Fault, arm, disarm};
        let _one_at_a_time = ARM_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
        both_paths(|named| {
            let d = tmpdir(&format!("faults-{named}"));
            let p = d.join("c.npy");
            // Calls of a fresh write: create, write, chmod, link (rename); of a replacing one
            // on the unnamed path, also the link under a temporary name.
            for nth in 1..=6 {
                for fault in Fault::ALL {
                    let _ = fs::remove_file(&p);
                    arm(&d, nth, fault);
                    let r = write_bytes_atomic(&p, 0o400, b"0123456789");
                    disarm();
                    match r {
                        Ok(()) => assert_eq!(fs::read(&p).unwrap(), b"0123456789"),
                        Err(_) => assert!(!p.exists(), "{nth} {fault:?}"),
                    }
                    assert!(names(&d).len() <= 1, "{nth} {fault:?}: {:?}", names(&d));
                    write_bytes_atomic(&p, 0o400, b"old").unwrap();
                    arm(&d, nth, fault);
                    let r = write_bytes_atomic(&p, 0o400, b"new");
                    disarm();
                    let now = fs::read(&p).unwrap();
                    assert_eq!(now, if r.is_ok() { &b"new"[..] } else { b"old" });
                    assert_eq!(names(&d), ["c.npy"], "{nth} {fault:?}");
                }
            }
            fs::remove_dir_all(&d).unwrap();
        });
    }

    #[test]
    fn leftover_temp_names_of_an_earlier_run_with_the_same_pid_are_skipped() {
        // An earlier process with this PID (PID 1 in a container) was killed and left its
        // temporary files: every name this process would try first exists already. The
        // fallback creates a temporary; the unnamed path needs one to replace a file.
        both_paths(|named| {
            let d = tmpdir(&format!("pid-reuse-{named}"));
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
            fs::write(&p, b"earlier").unwrap();
            write_bytes_atomic(&p, 0o400, b"new").unwrap();
            assert_eq!(fs::read(&p).unwrap(), b"new");
            assert_eq!(fs::read_dir(&d).unwrap().count(), before + 1);
            fs::remove_dir_all(&d).unwrap();
        });
    }

    #[test]
    fn an_error_names_the_path_tried() {
        both_paths(|named| {
            let d = tmpdir(&format!("err-path-{named}"));
            let missing = d.join("gone").join("x.npy");
            let e = write_bytes_atomic(&missing, 0o400, b"x").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::NotFound);
            let msg = e.to_string();
            let want = if named {
                format!("{}/{TMP_PREFIX}", d.join("gone").display())
            } else {
                missing.display().to_string()
            };
            assert!(msg.contains(&want), "{msg}");
            fs::remove_dir_all(&d).unwrap();
        });
    }

    #[test]
    fn a_read_only_directory_is_an_error_naming_the_path() {
        // Root ignores permission bits: a read-only tmpfs then (skipped where it cannot be
        // mounted); otherwise a directory without write permission.
        let base = tmpdir("ro");
        let ro = base.join("ro");
        // SAFETY: geteuid has no preconditions.
        let mount = if unsafe { libc::geteuid() } == 0 {
            let Some(t) = opdump_test_support::Tmpfs::mount(&ro, "64k") else {
                return;
            };
            t.remount_read_only().unwrap();
            Some(t)
        } else {
            fs::create_dir(&ro).unwrap();
            fs::set_permissions(&ro, fs::Permissions::from_mode(0o500)).unwrap();
            None
        };
        both_paths(|named| {
            let p = ro.join("x.npy");
            let e = write_bytes_atomic(&p, 0o400, b"x").unwrap_err();
            assert!(
                matches!(
                    e.kind(),
                    io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
                ),
                "{named}: {e:?}"
            );
            assert!(e.to_string().contains(&ro.display().to_string()), "{e}");
            assert!(!p.exists());
        });
        drop(mount);
        let _ = fs::set_permissions(&ro, fs::Permissions::from_mode(0o700));
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn refusals_are_told_from_ordinary_failures() {
        for e in [libc::EOPNOTSUPP, libc::EISDIR, libc::EINVAL] {
            assert!(is_refusal(&io::Error::from_raw_os_error(e)), "{e}");
        }
        for e in [
            libc::ENOENT,
            libc::EACCES,
            libc::EROFS,
            libc::ENOSPC,
            libc::EMFILE,
        ] {
            assert!(!is_refusal(&io::Error::from_raw_os_error(e)), "{e}");
        }
    }
}
