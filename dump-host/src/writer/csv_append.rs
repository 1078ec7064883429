//! `statistic.csv`-style appends: header once, each row in a single `write(2)`.

use std::{
    collections::HashMap,
    fs::{File, OpenOptions},
    io::{self, Write},
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
};

/// Appends rows to csv files shared by many threads.
///
/// Files are opened with `O_APPEND`; every row goes out in one `write` call, so rows from
/// concurrent threads (or processes) never interleave. A file created by this appender gets its
/// header first. Like MindSpore, an existing file is appended to (also across runs).
#[derive(Debug, Default)]
pub struct CsvAppender {
    open: Mutex<HashMap<PathBuf, Arc<Mutex<File>>>>,
}

impl CsvAppender {
    /// An appender with no open files.
    pub fn new() -> Self {
        Self::default()
    }

    fn handle(&self, path: &Path, header: &str, mode: u32) -> io::Result<Arc<Mutex<File>>> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = open.get(path) {
            return Ok(Arc::clone(f));
        }
        let file = match OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(mode)
            .open(path)
        {
            Ok(mut f) => {
                f.write_all(header.as_bytes())?;
                f
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => open_existing(path)?,
            Err(e) => return Err(e),
        };
        let f = Arc::new(Mutex::new(file));
        open.insert(path.to_owned(), Arc::clone(&f));
        Ok(f)
    }

    /// Appends `row` (which must end in `\n`) to `path`, writing `header` first if this call
    /// creates the file with permission bits `mode` (MindSpore: 0400 for its files; the file
    /// stays writable through the open handle).
    pub fn append(&self, path: &Path, header: &str, row: &str, mode: u32) -> io::Result<()> {
        let f = self.handle(path, header, mode)?;
        let mut f = f.lock().unwrap_or_else(PoisonError::into_inner);
        let n = f.write(row.as_bytes())?;
        if n != row.len() {
            // A short write on a regular file means the disk is full: report it, do not retry
            // (a retry would split the row across two writes).
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!("short write ({n} of {} bytes)", row.len()),
            ));
        }
        Ok(())
    }

    /// Closes every open file (later appends reopen them).
    pub fn close_all(&self) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// Opens an existing file for appending. Files opdump wrote are read-only (0400), like
/// MindSpore's; to append in a later run, write permission is granted for the open and the
/// original mode restored (the open descriptor stays writable).
fn open_existing(path: &Path) -> io::Result<File> {
    match OpenOptions::new().append(true).open(path) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            let mode = std::fs::metadata(path)?.permissions();
            let mut writable = mode.clone();
            writable.set_mode(mode.mode() | 0o200);
            std::fs::set_permissions(path, writable)?;
            let f = OpenOptions::new().append(true).open(path);
            let _ = std::fs::set_permissions(path, mode);
            f
        }
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{fs, thread};

    #[test]
    fn concurrent_rows_never_interleave_or_get_lost() {
        let d = std::env::temp_dir().join(format!("opdump-csv-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
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
        fs::remove_dir_all(&d).unwrap();
    }
}
