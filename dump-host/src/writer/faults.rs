//! The fault-injection seam: every filesystem call the writer makes goes through `check` (or
//! a [`FaultyFile`] write), so a test can make the n-th call fail with `ENOSPC`, `EIO`,
//! `EACCES`, `EROFS`, `EMFILE` or a short write and then check that nothing was lost or
//! corrupted. Compiled always, armed only by tests (`cargo xtask hardening`,
//! `tests/tests/fault_injection.rs`); disarmed it costs one relaxed atomic load per call.
//!
//! The schedule is process-wide but only counts calls on paths under the directory it was armed
//! for, so tests dumping elsewhere in the same process are not disturbed; arm one at a time.

use std::{
    fs::File,
    io::{self, Write},
    path::{Path, PathBuf},
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering},
    },
};

/// What the failing call does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Fails with this `errno` (`libc::ENOSPC`, `libc::EIO`, ...).
    Errno(i32),
    /// A write writes half its bytes (at least one, if it has two) and reports success, as a
    /// full disk does; the write after it fails with `ENOSPC`. Calls that are not writes fail
    /// with `ENOSPC`.
    ShortWrite,
}

impl Fault {
    /// The faults a hardening run injects at every call: `ENOSPC`, `EIO`, `EACCES`, `EROFS`,
    /// `EMFILE` and a short write.
    pub const ALL: [Fault; 6] = [
        Fault::Errno(libc::ENOSPC),
        Fault::Errno(libc::EIO),
        Fault::Errno(libc::EACCES),
        Fault::Errno(libc::EROFS),
        Fault::Errno(libc::EMFILE),
        Fault::ShortWrite,
    ];
}

static ARMED: AtomicBool = AtomicBool::new(false);
/// Only calls on paths under this directory count.
static UNDER: Mutex<Option<PathBuf>> = Mutex::new(None);
static CALLS: AtomicU64 = AtomicU64::new(0);
static TARGET: AtomicU64 = AtomicU64::new(0);
/// The errno to inject, or [`SHORT`].
static ERRNO: AtomicI32 = AtomicI32::new(0);
/// Set when the short write was delivered: the next write fails with `ENOSPC`.
static DISK_FULL: AtomicBool = AtomicBool::new(false);
static INJECTED: AtomicU64 = AtomicU64::new(0);
const SHORT: i32 = -1;

/// Arms the seam for calls on paths under `under`: counting starts at 0 and call number `nth`
/// (1-based) fails with `fault`. `nth == 0` counts calls without failing any (to learn how
/// many a run makes).
pub fn arm(under: &Path, nth: u64, fault: Fault) {
    *UNDER.lock().unwrap_or_else(PoisonError::into_inner) = Some(under.to_owned());
    CALLS.store(0, Ordering::SeqCst);
    INJECTED.store(0, Ordering::SeqCst);
    DISK_FULL.store(false, Ordering::SeqCst);
    TARGET.store(if nth == 0 { u64::MAX } else { nth }, Ordering::SeqCst);
    ERRNO.store(
        match fault {
            Fault::Errno(e) => e,
            Fault::ShortWrite => SHORT,
        },
        Ordering::SeqCst,
    );
    ARMED.store(true, Ordering::SeqCst);
}

/// Disarms the seam; returns `(calls seen, faults injected)` since [`arm`].
pub fn disarm() -> (u64, u64) {
    ARMED.store(false, Ordering::SeqCst);
    DISK_FULL.store(false, Ordering::SeqCst);
    (
        CALLS.load(Ordering::SeqCst),
        INJECTED.load(Ordering::SeqCst),
    )
}

/// What this call does: `None` to go ahead, `Some(Err)` to fail, `Some(Ok(()))` for a write
/// that must be cut short.
fn decide(path: &Path, write: bool) -> Option<io::Result<()>> {
    #[cfg(test)]
    HOOK.with(|h| {
        if let Some(h) = h.borrow_mut().as_mut() {
            h(path);
        }
    });
    if !ARMED.load(Ordering::Relaxed) {
        return None;
    }
    let ours = UNDER
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_deref()
        .is_some_and(|u| path.starts_with(u));
    if !ours {
        return None;
    }
    let n = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
    let errno = ERRNO.load(Ordering::SeqCst);
    if write && DISK_FULL.load(Ordering::SeqCst) {
        return Some(Err(io::Error::from_raw_os_error(libc::ENOSPC)));
    }
    if n != TARGET.load(Ordering::SeqCst) {
        return None;
    }
    INJECTED.fetch_add(1, Ordering::SeqCst);
    Some(match errno {
        SHORT if write => {
            DISK_FULL.store(true, Ordering::SeqCst);
            Ok(())
        }
        SHORT => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
        e => Err(io::Error::from_raw_os_error(e)),
    })
}

/// A function of the current thread's test called at every call of the seam on that thread,
/// with the call's path, armed or not (to look at the directory between the calls of a write).
#[cfg(test)]
type Hook = Box<dyn FnMut(&Path)>;

#[cfg(test)]
thread_local! {
    static HOOK: std::cell::RefCell<Option<Hook>> = const { std::cell::RefCell::new(None) };
}

/// Test-only: calls `hook` at every call of the seam on this thread (`None` removes it).
#[cfg(test)]
pub(crate) fn set_hook_on_this_thread(hook: Option<Hook>) {
    HOOK.with(|h| *h.borrow_mut() = hook);
}

/// Test-only: held by every unit test that arms the seam, since the schedule is process-wide.
#[cfg(test)]
pub(crate) static ARM_LOCK: Mutex<()> = Mutex::new(());

/// Counts one filesystem call on `path` (open, mkdir, rename, chmod, ...) and fails it when
/// scheduled.
pub(crate) fn check(path: &Path) -> io::Result<()> {
    match decide(path, false) {
        None | Some(Ok(())) => Ok(()),
        Some(Err(e)) => Err(e),
    }
}

/// A file whose writes go through the seam (every `write`/`write_vectored` is one call).
#[derive(Debug)]
pub struct FaultyFile<'a> {
    pub(crate) file: &'a mut File,
    pub(crate) path: &'a Path,
}

/// Writes `buf` to `f` (at `path`) through the seam: one call of the schedule.
pub(crate) fn write(f: &mut File, path: &Path, buf: &[u8]) -> io::Result<usize> {
    match decide(path, true) {
        None => f.write(buf),
        Some(Ok(())) => f.write(&buf[..buf.len().div_ceil(2).min(buf.len().saturating_sub(1))]),
        Some(Err(e)) => Err(e),
    }
}

impl Write for FaultyFile<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        write(self.file, self.path, buf)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match decide(self.path, true) {
            None => self.file.write_vectored(bufs),
            Some(Ok(())) => {
                let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| b);
                self.file
                    .write(&first[..first.len().div_ceil(2).min(first.len().saturating_sub(1))])
            }
            Some(Err(e)) => Err(e),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nth_call_fails_and_a_short_write_fills_the_disk() {
        let d = std::env::temp_dir().join(format!("opdump-faults-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("f");
        let _one_at_a_time = ARM_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
        // Disarmed: nothing counted.
        assert!(check(&p).is_ok());
        arm(&d, 2, Fault::Errno(libc::EROFS));
        assert!(check(&p).is_ok());
        assert!(check(Path::new("/elsewhere")).is_ok(), "not counted");
        assert_eq!(check(&p).unwrap_err().raw_os_error(), Some(libc::EROFS));
        assert!(check(&p).is_ok());
        assert_eq!(disarm(), (3, 1));

        let mut f = File::create(&p).unwrap();
        arm(&d, 1, Fault::ShortWrite);
        assert_eq!(write(&mut f, &p, b"0123456789").unwrap(), 5);
        let e = write(&mut f, &p, b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(disarm(), (2, 1));
        assert_eq!(std::fs::read(&p).unwrap(), b"01234");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
