//! A serial device as `opdump ingest`'s source: the terminal is switched to raw mode for the
//! run (no echo, no line editing, no CR/LF translation, no ^C/^D/^S handling: a COBS frame is
//! binary, and a cooked terminal would eat or rewrite its bytes), optionally set to a baud rate,
//! and put back as it was when the reader is dropped.
//!
//! The reader waits for bytes with `poll` in 100 ms slices, so the run can end on `--idle`
//! silence or Ctrl-C without a blocked read; a hung-up device (a USB adapter unplugged, a pty
//! whose other side closed: `POLLHUP`, then end of file or `EIO` from the read) ends the stream
//! like end of file, after the bytes still buffered.

use std::{
    fs::File,
    io::{self, Read},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use rustix::{
    event::{PollFd, PollFlags, Timespec, poll},
    termios::{self, OptionalActions, SpecialCodeIndex, Termios},
};

/// How long one wait for bytes lasts before the stop flag and the idle time are looked at.
const SLICE: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 100_000_000,
};

/// How a serial source is read.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SerialOptions {
    /// The line speed to set; `None` keeps the device's.
    pub(crate) baud: Option<u32>,
    /// End the stream after this long without a byte; `None` waits for a hang-up or Ctrl-C.
    pub(crate) idle: Option<Duration>,
}

/// A terminal in raw mode; restores the saved settings on drop.
pub(crate) struct SerialReader {
    file: File,
    saved: Termios,
    idle: Option<Duration>,
    last_byte: Instant,
    stop: Arc<AtomicBool>,
}

/// Whether `file` is a terminal (a serial device or a pty).
pub(crate) fn is_terminal(file: &File) -> bool {
    termios::isatty(file)
}

impl SerialReader {
    /// Switches `file` (a terminal) to raw mode with `opts`; `stop` ends the stream when set.
    /// The error names the device and what could not be set.
    pub(crate) fn open(
        file: File,
        path: &str,
        opts: SerialOptions,
        stop: Arc<AtomicBool>,
    ) -> Result<SerialReader, String> {
        let saved = termios::tcgetattr(&file)
            .map_err(|e| format!("{path}: cannot read the terminal settings: {e}"))?;
        let mut raw = saved.clone();
        raw.make_raw();
        // A read returns as soon as one byte is there (poll says when).
        raw.special_codes[SpecialCodeIndex::VMIN] = 1;
        raw.special_codes[SpecialCodeIndex::VTIME] = 0;
        if let Some(b) = opts.baud {
            raw.set_speed(b).map_err(|e| {
                format!(
                    "{path}: --baud {b}: the device does not take this speed ({e}); common \
                     speeds: 9600, 115200, 460800, 921600"
                )
            })?;
        }
        termios::tcsetattr(&file, OptionalActions::Now, &raw)
            .map_err(|e| format!("{path}: cannot switch the terminal to raw mode: {e}"))?;
        Ok(SerialReader {
            file,
            saved,
            idle: opts.idle,
            last_byte: Instant::now(),
            stop,
        })
    }
}

impl Read for SerialReader {
    /// Blocks until bytes arrive; `Ok(0)` (the end) on a hang-up once nothing is left to read,
    /// after `idle` of silence, or once `stop` is set.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            let mut fds = [PollFd::new(&self.file, PollFlags::IN)];
            match poll(&mut fds, Some(&SLICE)) {
                Ok(0) => {
                    if self.idle.is_some_and(|d| self.last_byte.elapsed() >= d) {
                        return Ok(0);
                    }
                    continue;
                }
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            // Readable, hung up or in error: the read says which (with VMIN 1 it returns the
            // buffered bytes, or 0 / EIO once the device is gone).
            match self.file.read(buf) {
                Ok(n) => {
                    self.last_byte = Instant::now();
                    return Ok(n);
                }
                // EIO: the other side hung up (Linux reports it for a closed pty or a
                // disconnected tty).
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => {
                    return Ok(0);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for SerialReader {
    fn drop(&mut self) {
        // Best effort: a device that went away cannot be restored, and nothing depends on it.
        let _ = termios::tcsetattr(&self.file, OptionalActions::Now, &self.saved);
    }
}
