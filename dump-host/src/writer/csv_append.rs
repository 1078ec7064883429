//! `statistic.csv`-style appends: a file never exists without its header, each row goes out in
//! a single `write(2)` and is all or nothing, and only a few files are held open.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, Write},
    os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
};

use super::{
    atomic_file::{at, create_tmp, create_unnamed, link_unnamed},
    faults,
};

/// Files held open at once; older ones are closed (and reopened when appended to again), so a
/// long run holds a constant number of descriptors whatever the number of steps.
pub const OPEN_FILES: usize = 8;

/// One open file and when it was last used.
#[derive(Debug)]
struct Held {
    path: PathBuf,
    file: Arc<Mutex<File>>,
    used: u64,
}

/// Appends rows to csv files shared by many threads.
///
/// - Files are opened with `O_APPEND`; every row goes out in one `write` call, so rows from
///   concurrent threads (or processes) never interleave.
/// - A row is all or nothing: after a short write (a full disk) the file is truncated back to
///   its length before the row, and the row is reported as failed.
/// - A file is created with its header and first row already in it (written to an unnamed
///   file, or a temporary one where the file system refuses those, then linked into place
///   without replacing anything), so it never exists without its
///   header, even when the disk fills up. Like MindSpore, an existing file is appended to (also
///   across runs).
/// - Symlinks are never followed (`O_NOFOLLOW`), and only regular files are appended to.
/// - At most [`OPEN_FILES`] files stay open (least recently used closed first).
/// - A file deleted while held open (its directory removed mid-run) is noticed before the next
///   row (`fstat` link count 0): the row goes to a new file at the path if the directory is
///   there again, and the loss is reported as an error.
#[derive(Debug, Default)]
pub(crate) struct CsvAppender {
    open: Mutex<(u64, Vec<Held>)>,
}

/// The open file for `path` and whether `row` already went in with the header.
enum Opened {
    Existing(File),
    Created(File),
}

impl CsvAppender {
    /// An appender with no open files.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Files held open now (at most [`OPEN_FILES`]); its tests check the bound.
    #[cfg(test)]
    pub(crate) fn open_files(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .len()
    }

    fn cached(&self, path: &Path) -> Option<Arc<Mutex<File>>> {
        let mut g = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let (clock, held) = &mut *g;
        *clock += 1;
        let h = held.iter_mut().find(|h| h.path == path)?;
        h.used = *clock;
        Some(Arc::clone(&h.file))
    }

    fn keep(&self, path: &Path, file: File) -> Arc<Mutex<File>> {
        let file = Arc::new(Mutex::new(file));
        let mut g = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let (clock, held) = &mut *g;
        *clock += 1;
        held.retain(|h| h.path != path);
        if held.len() >= OPEN_FILES
            && let Some(oldest) = held
                .iter()
                .enumerate()
                .min_by_key(|(_, h)| h.used)
                .map(|(i, _)| i)
        {
            // Closed once the last appender using it is done.
            held.swap_remove(oldest);
        }
        held.push(Held {
            path: path.to_owned(),
            file: Arc::clone(&file),
            used: *clock,
        });
        file
    }

    fn forget(&self, path: &Path) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .retain(|h| h.path != path);
    }

    /// Appends `row` (which must end in `\n`) to `path`; a file this call creates gets
    /// `header` first and permission bits `mode` (MindSpore: 0400 for its files; the file stays
    /// writable through the open handle).
    pub(crate) fn append(&self, path: &Path, header: &str, row: &str, mode: u32) -> io::Result<()> {
        if self.append_once(path, header, row, mode)? {
            return Ok(());
        }
        let how = match self.append_once(path, header, row, mode) {
            Ok(true) => "this row went to a new file".to_owned(),
            Ok(false) => "it was deleted again".to_owned(),
            Err(e) => format!("recreating it failed: {e}"),
        };
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{} was deleted while the dump was running (its earlier rows are lost); {how}",
                path.display()
            ),
        ))
    }

    /// One try of [`append`](Self::append): `Ok(false)` when the held file turned out deleted.
    fn append_once(&self, path: &Path, header: &str, row: &str, mode: u32) -> io::Result<bool> {
        let file = match self.cached(path) {
            Some(f) => f,
            None => match open_or_create(path, header, row, mode)? {
                Opened::Created(f) => {
                    self.keep(path, f);
                    return Ok(true);
                }
                Opened::Existing(f) => self.keep(path, f),
            },
        };
        let mut f = file.lock().unwrap_or_else(PoisonError::into_inner);
        let meta = faults::check(path)
            .and_then(|()| f.metadata())
            .map_err(|e| at(path, "checking", e))?;
        if meta.nlink() == 0 {
            // Deleted under us: rows written now would be lost.
            drop(f);
            self.forget(path);
            return Ok(false);
        }
        append_whole(&mut f, path, meta.len(), row)?;
        Ok(true)
    }

    /// Closes every open file (later appends reopen them).
    pub(crate) fn close_all(&self) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .clear();
    }
}

/// Writes `row` in one call at the end of `f` (`len` bytes long); on a short write the file
/// is cut back to `len`, so no partial row stays for the next one to be glued to.
fn append_whole(f: &mut File, path: &Path, len: u64, row: &str) -> io::Result<()> {
    let n = match faults::write(f, path, row.as_bytes()) {
        Ok(n) if n == row.len() => return Ok(()),
        Ok(n) => n,
        Err(e) => return Err(at(path, "appending to", e)),
    };
    // A short write on a regular file means the disk is full: report it, do not retry (a
    // retry would split the row across two writes).
    let cut = faults::check(path).and_then(|()| f.set_len(len));
    let undone = match cut {
        Ok(()) => "the partial row was removed".to_owned(),
        Err(e) => format!("removing the partial row failed: {e}"),
    };
    Err(io::Error::new(
        io::ErrorKind::StorageFull,
        format!(
            "{}: short write ({n} of {} bytes); {undone}",
            path.display(),
            row.len()
        ),
    ))
}

/// Opens `path` for appending, or creates it holding `header` and `row`.
fn open_or_create(path: &Path, header: &str, row: &str, mode: u32) -> io::Result<Opened> {
    loop {
        match open_existing(path) {
            Ok(f) => return Ok(Opened::Existing(f)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(at(path, "opening", e)),
        }
        if let Some(f) = create_with(path, header, row, mode)? {
            return Ok(Opened::Created(f));
        }
        // Another thread or process created it first: append to theirs.
    }
}

/// Creates `path` holding `header` + `row` without ever showing a file without its header:
/// written to an unnamed file (or, where the file system refuses those, a temporary file), then
/// hard-linked to `path`, which fails rather than replace an existing file. `None` when `path`
/// appeared meanwhile.
fn create_with(path: &Path, header: &str, row: &str, mode: u32) -> io::Result<Option<File>> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    if let Some(mut f) = create_unnamed(dir, path, true)? {
        // Nothing to remove on failure: an unnamed file goes with its descriptor.
        fill_new(&mut f, path, header, row, mode)?;
        return match faults::check(path).and_then(|()| link_unnamed(&f, path)) {
            Ok(()) => Ok(Some(f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(at(path, "linking into place", e)),
        };
    }
    let (mut f, tmp) = create_tmp(dir, true)?;
    let result = fill_new(&mut f, &tmp, header, row, mode).and_then(|()| {
        match faults::check(path).and_then(|()| fs::hard_link(&tmp, path)) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(at(path, "linking into place", e)),
        }
    });
    let _ = fs::remove_file(&tmp);
    Ok(result?.then_some(f))
}

/// Writes `header` and `row` into the new file `f` (at `path`, for errors and the fault seam)
/// in one `writev` (a step's rows are tens of KiB: not joined into one buffer first) and gives
/// it `mode`.
fn fill_new(f: &mut File, path: &Path, header: &str, row: &str, mode: u32) -> io::Result<()> {
    let total = header.len() + row.len();
    let parts = [
        io::IoSlice::new(header.as_bytes()),
        io::IoSlice::new(row.as_bytes()),
    ];
    let n = faults::FaultyFile { file: f, path }
        .write_vectored(&parts)
        .map_err(|e| at(path, "writing", e))?;
    if n != total {
        return Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!("{}: short write ({n} of {total} bytes)", path.display()),
        ));
    }
    faults::check(path)
        .and_then(|()| f.set_permissions(fs::Permissions::from_mode(mode)))
        .map_err(|e| at(path, "setting the mode of", e))
}

/// Opens an existing regular file for appending, never through a symlink. Files opdump wrote
/// are read-only (0400), like MindSpore's; to append in a later run, write permission is
/// granted on the file itself (through a descriptor, never through a link) for the open and the
/// original mode restored (the open descriptor stays writable).
fn open_existing(path: &Path) -> io::Result<File> {
    faults::check(path)?;
    // O_NONBLOCK: a FIFO planted at `path` fails at once (ENXIO) instead of blocking the run
    // until a reader appears; it changes nothing for a regular file.
    let append = || {
        OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
    };
    let f = match append() {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            let ro = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(path)?;
            let meta = ro.metadata()?;
            if !meta.is_file() {
                return Err(not_regular(path));
            }
            let mode = meta.permissions();
            let mut writable = mode.clone();
            writable.set_mode(mode.mode() | 0o200);
            ro.set_permissions(writable)?;
            let f = append();
            let _ = ro.set_permissions(mode);
            let f = f?;
            let now = f.metadata()?;
            if (now.dev(), now.ino()) != (meta.dev(), meta.ino()) {
                return Err(not_regular(path));
            }
            f
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "is a symbolic link; opdump never follows links inside the dump tree",
            ));
        }
        r => r?,
    };
    if !f.metadata()?.is_file() {
        return Err(not_regular(path));
    }
    Ok(f)
}

fn not_regular(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{} is not a regular file (or was replaced while opening)",
            path.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{fs, thread};

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("opdump-csv-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn concurrent_rows_never_interleave_or_get_lost() {
        let d = tmpdir("threads");
        let p = d.join("statistic.csv");
        let app = Arc::new(CsvAppender::new());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let app = Arc::clone(&app);
                let p = p.clone();
                thread::spawn(move || {
                    for i in 0..500 {
                        let row = format!("{t},{i},{}\n", "x".repeat(100 + (i % 50)));
                        app.append(&p, "T,I,X\n", &row, 0o400).unwrap();
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        // A later run appends to the (read-only) file without a second header.
        app.close_all();
        app.append(&p, "T,I,X\n", "9,0,late\n", 0o400).unwrap();
        let text = fs::read_to_string(&p).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("T,I,X"));
        let mut seen = std::collections::HashSet::new();
        for l in lines {
            let f: Vec<_> = l.split(',').collect();
            assert_eq!(f.len(), 3, "whole row: {l}");
            let i: usize = f[1].parse().unwrap();
            if f[2] != "late" {
                assert_eq!(f[2].len(), 100 + (i % 50));
            }
            assert!(seen.insert((f[0].to_owned(), i)));
        }
        assert_eq!(seen.len(), 8 * 500 + 1);
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o400
        );
        fs::remove_dir_all(&d).unwrap();
    }

    /// Open descriptors of this process.
    fn fds() -> usize {
        fs::read_dir("/proc/self/fd").unwrap().count()
    }

    #[test]
    fn a_thousand_files_hold_a_few_descriptors() {
        let d = tmpdir("fds");
        let app = CsvAppender::new();
        for i in 0..1000 {
            let sub = d.join(i.to_string());
            fs::create_dir(&sub).unwrap();
            app.append(&sub.join("statistic.csv"), "H\n", "r,\n", 0o400)
                .unwrap();
            assert!(app.open_files() <= OPEN_FILES);
        }
        // Other tests open files concurrently: allow for them, not for 1000 leaked handles.
        assert!(fds() < 200, "{} descriptors open", fds());
        for i in (0..1000).step_by(97) {
            let p = d.join(i.to_string()).join("statistic.csv");
            app.append(&p, "H\n", "s,\n", 0o400).unwrap();
            assert_eq!(fs::read_to_string(&p).unwrap(), "H\nr,\ns,\n");
        }
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlink_is_never_followed() {
        let d = tmpdir("link");
        let target = d.join("precious.txt");
        fs::write(&target, "keep\n").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o444)).unwrap();
        let link = d.join("statistic.csv");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let app = CsvAppender::new();
        let e = app.append(&link, "H\n", "r,\n", 0o400).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep\n");
        assert_eq!(
            fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o444,
            "never made writable through the link"
        );
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_fifo_in_place_of_a_csv_is_an_error_not_a_hang() {
        let d = tmpdir("fifo");
        let p = d.join("statistic.csv");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let app = CsvAppender::new();
        let e = app.append(&p, "H\n", "r,\n", 0o400).unwrap_err();
        assert!(e.to_string().contains("statistic.csv"), "{e}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_deleted_while_open_is_noticed_and_recreated() {
        let d = tmpdir("deleted");
        let sub = d.join("0");
        fs::create_dir(&sub).unwrap();
        let p = sub.join("statistic.csv");
        let app = CsvAppender::new();
        app.append(&p, "H\n", "a,\n", 0o400).unwrap();
        fs::remove_dir_all(&sub).unwrap();
        let e = app.append(&p, "H\n", "b,\n", 0o400).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains("was deleted"), "{e}");
        fs::create_dir(&sub).unwrap();
        app.append(&p, "H\n", "c,\n", 0o400).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "H\nc,\n");
        app.append(&p, "H\n", "d,\n", 0o400).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "H\nc,\nd,\n");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_new_csv_shows_no_temporary_name_and_the_fallback_cleans_up() {
        use super::super::atomic_file::{TMP_PREFIX, force_named_on_this_thread, supports_unnamed};
        use std::{cell::RefCell, rc::Rc};
        for named in [false, true] {
            let d = tmpdir(&format!("unnamed-{named}"));
            let p = d.join("statistic.csv");
            let seen = Rc::new(RefCell::new(Vec::new()));
            let (s, dir) = (Rc::clone(&seen), d.clone());
            faults::set_hook_on_this_thread(Some(Box::new(move |_| {
                for e in fs::read_dir(&dir).unwrap() {
                    s.borrow_mut()
                        .push(e.unwrap().file_name().to_string_lossy().into_owned());
                }
            })));
            force_named_on_this_thread(named);
            let app = CsvAppender::new();
            app.append(&p, "H\n", "a,\n", 0o400).unwrap();
            app.append(&p, "H\n", "b,\n", 0o400).unwrap();
            force_named_on_this_thread(false);
            faults::set_hook_on_this_thread(None);
            let seen = seen.take();
            // Seen from the seam: the temporary name on the fallback only (ext4 and tmpfs
            // take unnamed files; elsewhere the fallback may be taken either way).
            let tmp_seen = seen.iter().any(|n| n.starts_with(TMP_PREFIX));
            if named {
                assert!(tmp_seen, "{seen:?}");
            } else if supports_unnamed(&d) {
                assert!(!tmp_seen, "{seen:?}");
            }
            assert_eq!(fs::read_to_string(&p).unwrap(), "H\na,\nb,\n");
            assert_eq!(
                fs::metadata(&p).unwrap().permissions().mode() & 0o777,
                0o400
            );
            let names: Vec<_> = fs::read_dir(&d).unwrap().collect();
            assert_eq!(names.len(), 1, "no temporary file left");
            fs::remove_dir_all(&d).unwrap();
        }
    }

    #[test]
    fn a_short_write_leaves_whole_rows_and_a_header_always() {
        use super::faults::{ARM_LOCK, Fault, arm, disarm};
        let _one_at_a_time = ARM_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
        let d = tmpdir("short");
        let p = d.join("statistic.csv");
        let app = CsvAppender::new();
        // The first write (header + first row, in the temporary file) is cut short: no file.
        // Calls: open (not found), create the temporary file, write.
        arm(&d, 3, Fault::ShortWrite);
        assert!(app.append(&p, "H,H\n", "a,1,\n", 0o400).is_err());
        disarm();
        assert!(!p.exists(), "no csv without its header");
        app.append(&p, "H,H\n", "a,1,\n", 0o400).unwrap();
        // The next row's write (calls: fstat, write) is cut short: cut back to whole rows.
        arm(&d, 2, Fault::ShortWrite);
        let e = app.append(&p, "H,H\n", "bbbbbbbb,2,\n", 0o400).unwrap_err();
        disarm();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull, "{e}");
        app.append(&p, "H,H\n", "c,3,\n", 0o400).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "H,H\na,1,\nc,3,\n");
        let names: Vec<_> = fs::read_dir(&d).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left");
        fs::remove_dir_all(&d).unwrap();
    }
}
