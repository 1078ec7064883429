//! `dump.json`, kept a complete JSON document after every call and after a `kill -9`,
//! without rewriting it (docs/msprobe.md, "Crash safety").
//!
//! Calls are committed by the step's [`JournalThread`], which commits at once every call
//! handed over since its last commit (the caller groups them further when
//! [`DumpOptions::msprobe_commit_interval`](crate::DumpOptions::msprobe_commit_interval) is
//! set).
//!
//! Two twin files each hold the header, the entries written so far and the closing suffix;
//! `dump.json` names one of them. A commit appends to the twin `dump.json` does **not** name:
//! the entries it lacks from the previous commit, the new ones and the suffix, written over its
//! old suffix (one positioned write, O(entries) bytes). Then the names switch atomically:
//!
//! - on Linux, `renameat2(RENAME_EXCHANGE)` swaps `dump.json` and `.dump.json.next` (one
//!   system call);
//! - elsewhere, or where the file system cannot exchange, the twins are `.dump.json.0` and
//!   `.dump.json.1`, and a fresh hard link to the written one is renamed over `dump.json`.
//!
//! Whatever moment a process dies at, `dump.json` is one of two complete documents: the one
//! with every committed call, or the one before it. Each entry is written twice in all (once
//! per twin); nothing is ever rewritten.
//!
//! At the end of the step (on a writer thread) the other twin's name is removed and
//! `dump.json` is made read-only. After a crash the hidden twin stays behind.

use std::{
    fs::{File, OpenOptions},
    io,
    path::{Path, PathBuf},
};

/// The closing suffix of the `data` object and the document.
const SUFFIX: &[u8] = b"\n }\n}\n";

/// How the names switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Switch {
    /// `renameat2(RENAME_EXCHANGE)` of `dump.json` and `.dump.json.next`.
    Exchange,
    /// A hard link to `.dump.json.{0,1}` renamed over `dump.json`.
    Link,
}

/// The crash-safe writer of one `dump.json`.
#[derive(Debug)]
pub(crate) struct Journal {
    dir: PathBuf,
    switch: Switch,
    twins: [File; 2],
    /// Where each twin's suffix starts (the end of its last entry).
    end: [u64; 2],
    /// The twin `dump.json` links to.
    current: usize,
    /// The last committed entry (with its separator), which the other twin lacks.
    lag: Vec<u8>,
    /// Entries committed.
    entries: u64,
}

/// The hidden twin's name under [`Switch::Exchange`].
const NEXT: &str = ".dump.json.next";

/// Swaps the names `a` and `b` atomically (Linux `renameat2(RENAME_EXCHANGE)`); an error
/// where the system or the file system cannot.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    use std::{ffi::CString, os::unix::ffi::OsStrExt};
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::other("NUL in a path"))
    };
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: both pointers are NUL-terminated strings that live across the call; renameat2
    // reads them and keeps no reference. AT_FDCWD with absolute or relative paths as `rename`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "no renameat2"))
}

fn twin_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!(".dump.json.{i}"))
}

#[cfg(unix)]
fn write_at(f: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_all_at(bytes, offset)
}

#[cfg(not(unix))]
fn write_at(mut f: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    f.seek(SeekFrom::Start(offset))?;
    f.write_all(bytes)
}

/// Creates `path` anew (never through a symlink: a leftover of an earlier run is removed
/// first, and `create_new` refuses anything put there in between), readable and writable by
/// the owner only.
fn create_twin(path: &Path) -> io::Result<File> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut o = OpenOptions::new();
    o.read(true).write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)
}

/// A whole document: `header`, the `members` of `data` and the closing suffix, byte for byte
/// what [`Journal`] leaves after committing the same members (the flight recorder writes a
/// held step's `dump.json` at once, through a temporary name and a rename).
pub(crate) fn whole<S: AsRef<str>>(header: &str, members: &[S]) -> Vec<u8> {
    let len: usize = members.iter().map(|m| m.as_ref().len() + 2).sum();
    let mut buf = Vec::with_capacity(header.len() + len + SUFFIX.len());
    buf.extend_from_slice(header.as_bytes());
    for (i, m) in members.iter().enumerate() {
        buf.extend_from_slice(if i == 0 { b"\n" } else { b",\n" });
        buf.extend_from_slice(m.as_ref().as_bytes());
    }
    buf.extend_from_slice(SUFFIX);
    buf
}

/// Points `dir/dump.json` at twin `i`: a hard link under a temporary name renamed over it.
fn publish(dir: &Path, i: usize) -> io::Result<()> {
    let tmp = dir.join(".dump.json.link");
    let twin = twin_path(dir, i);
    if let Err(e) = std::fs::hard_link(&twin, &tmp) {
        if e.kind() != io::ErrorKind::AlreadyExists {
            return Err(e);
        }
        // Left by a run killed between its link and its rename.
        std::fs::remove_file(&tmp)?;
        std::fs::hard_link(&twin, &tmp)?;
    }
    std::fs::rename(&tmp, dir.join("dump.json"))
}

impl Journal {
    /// Starts `dir/dump.json` with `header` (the document up to and including `"data": {`)
    /// and no entry.
    pub(crate) fn create(dir: &Path, header: &[u8]) -> io::Result<Journal> {
        Self::create_with(dir, header, true)
    }

    /// [`create`](Journal::create), trying the exchange only when `try_exchange`.
    fn create_with(dir: &Path, header: &[u8], try_exchange: bool) -> io::Result<Journal> {
        let fresh = |path: &Path| -> io::Result<File> {
            let f = create_twin(path)?;
            write_at(&f, header, 0)?;
            write_at(&f, SUFFIX, header.len() as u64)?;
            Ok(f)
        };
        let end = header.len() as u64;
        let journal = |switch, a, b| Journal {
            dir: dir.to_owned(),
            switch,
            twins: [a, b],
            end: [end, end],
            current: 0,
            lag: Vec::new(),
            entries: 0,
        };
        // Exchange where the system can: both twins are written, their names swapped once to
        // see that it works, then one becomes dump.json.
        if try_exchange {
            let (next, new) = (dir.join(NEXT), dir.join(".dump.json.new"));
            let b = fresh(&next)?;
            let a = fresh(&new)?;
            if exchange(&new, &next).is_ok() {
                // The swap moved `a` to NEXT and `b` to `.new`: `b` becomes dump.json.
                std::fs::rename(&new, dir.join("dump.json"))?;
                return Ok(journal(Switch::Exchange, b, a));
            }
            std::fs::remove_file(&next)?;
            std::fs::remove_file(&new)?;
        }
        let a = fresh(&twin_path(dir, 0))?;
        let b = fresh(&twin_path(dir, 1))?;
        publish(dir, 0)?;
        Ok(journal(Switch::Link, a, b))
    }

    /// Appends `"name": {...}` members of `data` (without separators) and publishes them,
    /// all at once.
    pub(crate) fn commit<S: AsRef<str>>(&mut self, members: &[S]) -> io::Result<()> {
        if members.is_empty() {
            return Ok(());
        }
        let target = 1 - self.current;
        let len: usize = members.iter().map(|m| m.as_ref().len() + 2).sum();
        let mut buf = Vec::with_capacity(self.lag.len() + len + SUFFIX.len());
        buf.extend_from_slice(&self.lag);
        let entries_start = buf.len();
        for (i, m) in members.iter().enumerate() {
            let first = self.entries == 0 && i == 0;
            buf.extend_from_slice(if first { b"\n" } else { b",\n" });
            buf.extend_from_slice(m.as_ref().as_bytes());
        }
        let entries_end = buf.len();
        buf.extend_from_slice(SUFFIX);
        write_at(&self.twins[target], &buf, self.end[target])?;
        match self.switch {
            Switch::Exchange => exchange(&self.dir.join(NEXT), &self.dir.join("dump.json"))?,
            Switch::Link => publish(&self.dir, target)?,
        }
        self.end[target] += entries_end as u64;
        self.current = target;
        self.lag.clear();
        self.lag.extend_from_slice(&buf[entries_start..entries_end]);
        self.entries += members.len() as u64;
        Ok(())
    }

    /// Entries committed so far.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> u64 {
        self.entries
    }

    /// Ends the document: the twins' names go (`dump.json` keeps its data) and `dump.json`
    /// becomes read-only for its owner.
    pub(crate) fn close(self) -> io::Result<()> {
        match self.switch {
            Switch::Exchange => std::fs::remove_file(self.dir.join(NEXT))?,
            Switch::Link => {
                for i in 0..2 {
                    std::fs::remove_file(twin_path(&self.dir, i))?;
                }
            }
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let f = &self.twins[self.current];
            f.set_permissions(std::fs::Permissions::from_mode(crate::writer::FILE_MODE))?;
        }
        Ok(())
    }
}

/// What the step's thread is asked: members to commit, or to answer once everything sent
/// before is committed.
enum Msg {
    Members(Vec<String>),
    Flush(std::sync::mpsc::Sender<()>),
}

/// A step's [`Journal`] on a thread of its own: the runtime's thread hands each finished
/// call's member over (a channel send) and goes on, while this thread creates `dump.json` and
/// commits, each time, every member that arrived since its last commit. The document is as
/// crash-safe as with commits on the caller's thread (every commit is the journal's); what a
/// kill -9 can lose is only the members sent and not yet committed, never the document's
/// validity. [`flush`](JournalThread::flush) waits until every member sent is in `dump.json`.
#[derive(Debug)]
pub(crate) struct JournalThread {
    tx: std::sync::mpsc::Sender<Msg>,
    thread: std::thread::JoinHandle<(Option<Journal>, Option<io::Error>)>,
}

impl JournalThread {
    /// Starts the thread that creates `dir` (under the dump tree's `root`, never through a
    /// link) and `dir/dump.json` with `header`, and commits what it is sent; an error when
    /// the system cannot start a thread.
    pub(crate) fn spawn(root: PathBuf, dir: PathBuf, header: String) -> io::Result<JournalThread> {
        let (tx, rx) = std::sync::mpsc::channel::<Msg>();
        let thread = std::thread::Builder::new()
            .name("opdump-dump.json".into())
            .spawn(move || {
                let mut journal = None;
                let mut error = None;
                let created = crate::layout::create_dir_nofollow(&root, &dir)
                    .and_then(|()| Journal::create(&dir, header.as_bytes()));
                match created {
                    Ok(j) => journal = Some(j),
                    Err(e) => error = Some(e),
                }
                while let Ok(first) = rx.recv() {
                    let mut members = Vec::new();
                    let mut acks = Vec::new();
                    for m in std::iter::once(first).chain(rx.try_iter()) {
                        match m {
                            Msg::Members(v) => members.extend(v),
                            Msg::Flush(ack) => acks.push(ack),
                        }
                    }
                    // After a failed commit (or creation) nothing more is attempted; the
                    // first error is returned when the thread is joined.
                    if error.is_none()
                        && let Some(j) = journal.as_mut()
                        && let Err(e) = j.commit(&members)
                    {
                        error = Some(e);
                    }
                    for ack in acks {
                        let _ = ack.send(());
                    }
                }
                (journal, error)
            })?;
        Ok(JournalThread { tx, thread })
    }

    /// Hands `members` over; `false` when the thread is gone (it panicked).
    pub(crate) fn send(&self, members: Vec<String>) -> bool {
        self.tx.send(Msg::Members(members)).is_ok()
    }

    /// Waits until every member sent before is committed (or failed).
    pub(crate) fn flush(&self) {
        let (ack, done) = std::sync::mpsc::channel();
        if self.tx.send(Msg::Flush(ack)).is_ok() {
            let _ = done.recv();
        }
    }

    /// Commits what is left and ends the thread: the journal (`None` when dump.json could not
    /// be created) and the first error.
    pub(crate) fn finish(self) -> (Option<Journal>, Option<io::Error>) {
        let JournalThread { tx, thread } = self;
        drop(tx);
        thread.join().unwrap_or_else(|_| {
            (
                None,
                Some(io::Error::other("the thread writing dump.json panicked")),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("opdump-journal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn read(dir: &Path) -> serde_json::Value {
        let text = std::fs::read_to_string(dir.join("dump.json")).unwrap();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    #[test]
    fn every_commit_leaves_a_complete_document() {
        for exchange in [true, false] {
            commits(exchange);
        }
    }

    fn commits(try_exchange: bool) {
        let t = tempdir(&format!("commit-{try_exchange}"));
        let header = b"{\n \"task\": \"statistics\",\n \"data\": {";
        let mut j = Journal::create_with(&t, header, try_exchange).unwrap();
        if !try_exchange {
            assert_eq!(j.switch, Switch::Link);
        }
        assert_eq!(read(&t)["data"], serde_json::json!({}));
        for i in 0..7 {
            j.commit(&[format!("  \"call.{i}\": {{\"n\": {i}}}")])
                .unwrap();
            let doc = read(&t);
            let data = doc["data"].as_object().unwrap();
            assert_eq!(data.len(), i + 1);
            assert_eq!(data[&format!("call.{i}")]["n"], i);
            // Both twins are complete documents: the published one and the one a step behind.
            let names = match j.switch {
                Switch::Exchange => [t.join("dump.json"), t.join(NEXT)],
                Switch::Link => [twin_path(&t, 0), twin_path(&t, 1)],
            };
            for (k, name) in names.iter().enumerate() {
                let text = std::fs::read_to_string(name).unwrap();
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                let n = v["data"].as_object().unwrap().len();
                assert!(n == i + 1 || n == i, "twin {k}: {n} entries after {i}");
            }
        }
        assert_eq!(j.entries(), 7);
        j.close().unwrap();
        let left: Vec<_> = std::fs::read_dir(&t)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["dump.json"]);
        assert_eq!(read(&t)["data"].as_object().unwrap().len(), 7);
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn the_thread_commits_what_it_is_sent_and_flush_waits_for_it() {
        let t = tempdir("thread");
        let header = "{\n \"data\": {".to_owned();
        let j = JournalThread::spawn(t.clone(), t.join("step0/rank0"), header.clone()).unwrap();
        let t = t.join("step0/rank0");
        let mut sent = Vec::new();
        for i in 0..50 {
            let m = format!("  \"call.{i}\": {i}");
            sent.push(m.clone());
            assert!(j.send(vec![m]));
            if i % 10 == 9 {
                j.flush();
                // Everything sent is in dump.json once flush returns, in order.
                let doc = read(&t);
                let keys: Vec<&String> = doc["data"].as_object().unwrap().keys().collect();
                assert_eq!(keys.len(), i + 1);
                assert_eq!(keys[i], &format!("call.{i}"));
            }
        }
        let (journal, error) = j.finish();
        assert!(error.is_none());
        journal.unwrap().close().unwrap();
        assert_eq!(
            std::fs::read(t.join("dump.json")).unwrap(),
            whole(&header, &sent)
        );
        // A directory that cannot hold dump.json: the error comes back at the end, flushes
        // still return.
        // (a file where the directory should be)
        std::fs::write(t.join("file"), b"").unwrap();
        let j = JournalThread::spawn(t.clone(), t.join("file/deeper"), header).unwrap();
        assert!(j.send(vec!["  \"a\": 1".into()]));
        j.flush();
        let (journal, error) = j.finish();
        assert!(journal.is_none());
        assert!(error.is_some());
        std::fs::remove_dir_all(t.parent().unwrap().parent().unwrap()).unwrap();
    }

    #[test]
    fn a_whole_document_is_the_journals_bytes() {
        let t = tempdir("whole");
        let header = "{\n \"task\": \"tensor\",\n \"data\": {";
        let members = [
            "  \"a.0\": {\"n\": 0}",
            "  \"b.0\": {\"n\": 1}",
            "  \"c.0\": 2",
        ];
        let mut j = Journal::create(&t, header.as_bytes()).unwrap();
        j.commit(&members[..1]).unwrap();
        j.commit(&members[1..]).unwrap();
        j.close().unwrap();
        assert_eq!(
            std::fs::read(t.join("dump.json")).unwrap(),
            whole(header, &members)
        );
        let none: [&str; 0] = [];
        let empty: serde_json::Value = serde_json::from_slice(&whole(header, &none)).unwrap();
        assert_eq!(empty["data"], serde_json::json!({}));
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn a_planted_symlink_is_never_followed() {
        let t = tempdir("symlink");
        let victim = t.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        #[cfg(unix)]
        for name in [
            ".dump.json.0",
            ".dump.json.1",
            NEXT,
            ".dump.json.new",
            ".dump.json.link",
        ] {
            std::os::unix::fs::symlink(&victim, t.join(name)).unwrap();
        }
        let mut j = Journal::create(&t, b"{\"data\": {").unwrap();
        j.commit(&["\"a\": 1", "\"b\": 2"]).unwrap();
        j.commit(&["\"c\": 3"]).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(read(&t)["data"]["a"], 1);
        assert_eq!(read(&t)["data"]["c"], 3);
        std::fs::remove_dir_all(&t).unwrap();
    }
}
