//! Tensor data read through memory maps instead of `read` copies (Linux), for `compare`'s
//! lockstep pass over two files: the kernels read the page cache directly, which saves the
//! copy that was a quarter of compare's CPU time.
//!
//! Memory stays bounded: a file is mapped one [`WINDOW`] at a time (populated when mapped),
//! and each window is unmapped before the next is mapped.
//!
//! **A file that shrinks while it is mapped** would make the next access to a page past its
//! new end raise `SIGBUS`, which kills the process. opdump never writes a finished file in
//! place, but other tools may. So a `SIGBUS` handler is installed once: a fault inside a
//! window this thread has registered maps a page of zeros over the missing page, marks the
//! window, and lets the read go on. The caller asks [`Mapped::lost`] after each block and
//! reports an error naming the file instead of using what it computed. A fault anywhere else
//! is handed to the handler that was there before (or the default action, which ends the
//! process as it would have without opdump).

use std::{
    cell::Cell,
    fs::File,
    os::fd::AsRawFd,
    path::{Path, PathBuf},
    sync::OnceLock,
};

use crate::Error;

/// Bytes mapped at once per file.
pub(crate) const WINDOW: usize = 4 << 20;

/// Windows a thread can have registered at once (compare maps one per side).
const SLOTS: usize = 2;

thread_local! {
    /// The address ranges of this thread's windows (`(0, 0)`: free).
    static RANGES: Cell<[(usize, usize); SLOTS]> = const { Cell::new([(0, 0); SLOTS]) };
    /// Per slot: a page of its window went missing (the file shrank).
    static LOST: Cell<[bool; SLOTS]> = const { Cell::new([false; SLOTS]) };
}

/// The `SIGBUS` disposition before ours, kept once ours is installed.
static PREVIOUS: OnceLock<Option<libc::sigaction>> = OnceLock::new();

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096)
}

/// The `SIGBUS` handler: see the module's docs.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for a handler installed with SA_SIGINFO.
    let addr = unsafe { (*info).si_addr() } as usize;
    // Const-initialised thread locals without destructors: reading them allocates nothing
    // and is safe in a signal handler.
    let ranges = RANGES.try_with(Cell::get).unwrap_or([(0, 0); SLOTS]);
    if let Some(slot) = ranges.iter().position(|&(s, e)| s <= addr && addr < e) {
        let page = addr & !(page_size() - 1);
        // SAFETY: MAP_FIXED replaces exactly one page of this thread's own window (registered
        // while it is mapped) with a private page of zeros; nothing else refers to it, and the
        // window is unmapped whole later. mmap is a plain system call, safe in a handler.
        let r = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                page_size(),
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if r != libc::MAP_FAILED {
            let _ = LOST.try_with(|l| {
                let mut v = l.get();
                v[slot] = true;
                l.set(v);
            });
            return;
        }
    }
    // Not ours: what was there before.
    match PREVIOUS.get().copied().flatten() {
        Some(prev) if prev.sa_sigaction != libc::SIG_DFL && prev.sa_sigaction != libc::SIG_IGN => {
            if prev.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler was installed with SA_SIGINFO, so it has this
                // signature; it is called as the kernel would have called it.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(prev.sa_sigaction) };
                f(sig, info, ctx);
            } else {
                // SAFETY: a handler installed without SA_SIGINFO takes the signal number only.
                let f: extern "C" fn(libc::c_int) =
                    unsafe { std::mem::transmute(prev.sa_sigaction) };
                f(sig);
            }
        }
        prev => {
            // The default action: restore it and return, so that the faulting access runs
            // again and the process ends as it would have without this handler.
            let dfl = prev.unwrap_or_else(|| {
                // SAFETY: an all-zero sigaction is SIG_DFL with no flags and an empty mask.
                unsafe { std::mem::zeroed() }
            });
            // SAFETY: sigaction with a valid struct; async-signal-safe.
            unsafe {
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        }
    }
}

/// Installs the handler once per process; `false` when that failed (then nothing is mapped).
fn install() -> bool {
    PREVIOUS
        .get_or_init(|| {
            // SAFETY: plain sigaction calls with structs initialised here; the handler only
            // touches const-initialised thread locals and the PREVIOUS cell, which is set by
            // the time a mapped read can fault (this runs before the first mapping).
            unsafe {
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut prev) != 0 {
                    return None;
                }
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_sigbus as *const () as usize;
                act.sa_flags = libc::SA_SIGINFO;
                libc::sigemptyset(&mut act.sa_mask);
                if libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut()) != 0 {
                    return None;
                }
                Some(prev)
            }
        })
        .is_some()
}

/// A file's data range `[start, start + len)`, handed out block by block from windows mapped
/// one at a time.
#[derive(Debug)]
pub(crate) struct Mapped<'f> {
    file: &'f File,
    path: PathBuf,
    slot: usize,
    /// File offset of the next byte handed out, and of the range's end.
    pos: u64,
    end: u64,
    /// The current window: its address, length, and the file offset it starts at.
    window: Option<(usize, usize, u64)>,
}

impl<'f> Mapped<'f> {
    /// Maps `len` bytes of `file` from `start` lazily, as `slot` (0 or 1) of this thread; `None`
    /// when mapping is not available (the `SIGBUS` handler could not be installed).
    pub(crate) fn new(
        file: &'f File,
        path: &Path,
        slot: usize,
        start: u64,
        len: u64,
    ) -> Option<Mapped<'f>> {
        if slot >= SLOTS || !install() {
            return None;
        }
        Some(Mapped {
            file,
            path: path.to_path_buf(),
            slot,
            pos: start,
            end: start.checked_add(len)?,
            window: None,
        })
    }

    /// The next `n` bytes (`n` at most [`WINDOW`]), valid until the next call.
    pub(crate) fn next(&mut self, n: usize) -> Result<&[u8], Error> {
        let n64 = n as u64;
        if n > WINDOW || self.end - self.pos < n64 {
            return Err(Error::format(
                &self.path,
                "read past the end of the tensor's data",
            ));
        }
        let inside = self
            .window
            .is_some_and(|(_, len, off)| self.pos >= off && self.pos + n64 <= off + len as u64);
        if !inside {
            self.unmap();
            self.map_from(self.pos)?;
        }
        let (addr, _, off) = self.window.unwrap_or((0, 0, 0));
        let at = (self.pos - off) as usize;
        self.pos += n64;
        // SAFETY: `[at, at + n)` lies inside the mapped window (checked above or just mapped
        // to cover it); the window stays mapped until the next call takes `&mut self`. Pages
        // that go missing (the file shrank) are replaced by zeros by the handler and reported
        // by `lost`, never left unmapped.
        Ok(unsafe { std::slice::from_raw_parts((addr + at) as *const u8, n) })
    }

    /// Whether a page of the window went missing since the last call (the file shrank while
    /// it was read): what was computed from the last blocks is not the file's data.
    pub(crate) fn lost(&self) -> Option<Error> {
        let slot = self.slot;
        let hit = LOST.with(|l| {
            let mut v = l.get();
            let h = v[slot];
            v[slot] = false;
            l.set(v);
            h
        });
        hit.then(|| {
            Error::format(
                &self.path,
                format!(
                    "the file shrank while it was read (before byte {}); compare it again once nothing writes it",
                    self.pos
                ),
            )
        })
    }

    /// Maps the window that starts at the page holding `from`.
    fn map_from(&mut self, from: u64) -> Result<(), Error> {
        let page = page_size() as u64;
        let off = from & !(page - 1);
        let len = (self.end - off).min(WINDOW as u64 + (from - off)) as usize;
        // SAFETY: a read-only private mapping of an open file at a page-aligned offset, at an
        // address of the kernel's choosing: it touches no existing memory. MAP_POPULATE maps
        // the (usually cached) pages now instead of one fault at a time.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_POPULATE,
                self.file.as_raw_fd(),
                off as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::format(
                &self.path,
                format!(
                    "mapping {len} bytes at byte {off}: {}",
                    std::io::Error::last_os_error()
                ),
            ));
        }
        let addr = p as usize;
        self.window = Some((addr, len, off));
        RANGES.with(|r| {
            let mut v = r.get();
            v[self.slot] = (addr, addr + len);
            r.set(v);
        });
        Ok(())
    }

    fn unmap(&mut self) {
        if let Some((addr, len, _)) = self.window.take() {
            RANGES.with(|r| {
                let mut v = r.get();
                v[self.slot] = (0, 0);
                r.set(v);
            });
            // SAFETY: exactly the mapping `map_from` made (pages the handler replaced are part
            // of it); no slice into it outlives `&mut self`, which this call holds.
            unsafe {
                libc::munmap(addr as *mut libc::c_void, len);
            }
        }
    }
}

impl Drop for Mapped<'_> {
    fn drop(&mut self) {
        self.unmap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(name: &str, bytes: &[u8]) -> (PathBuf, File) {
        let dir = std::env::temp_dir().join(format!("opdump-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        let f = File::open(&p).unwrap();
        (p, f)
    }

    #[test]
    fn blocks_across_windows_equal_the_file() {
        let data: Vec<u8> = (0..WINDOW * 2 + 12345)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        let (p, f) = file_with("blocks", &data);
        // Start at an unaligned offset, as an .npy's data does.
        let start = 128u64;
        let mut m = Mapped::new(&f, &p, 0, start, data.len() as u64 - start).unwrap();
        let mut at = start as usize;
        for n in [1usize, 4096, 1 << 20, WINDOW, 3, WINDOW - 7] {
            let n = n.min(data.len() - at);
            let got = m.next(n).unwrap();
            assert_eq!(got, &data[at..at + n], "block at {at} of {n}");
            at += n;
            assert!(m.lost().is_none());
        }
        let rest = data.len() - at;
        assert_eq!(m.next(rest).unwrap(), &data[at..]);
        assert!(m.next(1).is_err(), "past the end");
        std::fs::remove_file(&p).unwrap();
        let _ = std::fs::remove_dir(p.parent().unwrap());
    }

    /// The file shrinks after its window was mapped: reading the missing pages gives zeros and
    /// a report naming the file, not a SIGBUS that ends the process.
    #[test]
    fn a_file_that_shrinks_while_mapped_is_an_error_not_a_crash() {
        let data = vec![7u8; 1 << 20];
        let (p, f) = file_with("shrinks", &data);
        let mut m = Mapped::new(&f, &p, 1, 0, data.len() as u64).unwrap();
        assert_eq!(m.next(4096).unwrap(), &data[..4096]);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(8192)
            .unwrap();
        let block = m.next(64 << 10).unwrap();
        // The page still in the file reads as before, the ones cut off as zeros.
        assert_eq!(&block[..4096], &data[..4096]);
        assert!(block[8192..].iter().all(|&b| b == 0));
        let e = m.lost().expect("the shrink is reported").to_string();
        assert!(
            e.contains("shrinks") && e.contains("shrank while it was read"),
            "{e}"
        );
        assert!(m.lost().is_none(), "reported once");
        drop(m);
        std::fs::remove_file(&p).unwrap();
        let _ = std::fs::remove_dir(p.parent().unwrap());
    }
}
