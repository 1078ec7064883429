//! [`HostFile`]: an agent [`Sink`] that writes to a file on the host through semihosting (the
//! debugger or qemu does the I/O), buffered so that a frame costs one host call, not four.

use cortex_m_semihosting::nr;
use dump_core::agent::Sink;

/// Bytes buffered before a host call.
const BUF: usize = 512;

/// A host file opened for writing (truncated), as an agent sink.
pub struct HostFile {
    fd: usize,
    buf: [u8; BUF],
    len: usize,
    /// Bytes handed to the host so far.
    pub written: u64,
}

/// The host refused to open or write the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostIoError;

impl HostFile {
    /// Creates (or truncates) `path` on the host; `path` must end in `\0`.
    pub fn create(path: &str) -> Result<HostFile, HostIoError> {
        let bytes = path.as_bytes();
        if bytes.last() != Some(&0) {
            return Err(HostIoError);
        }
        let args = [
            bytes.as_ptr() as usize,
            nr::open::W_TRUNC_BINARY,
            bytes.len() - 1,
        ];
        // SAFETY: SYS_OPEN reads `bytes.len() - 1` bytes of the NUL-terminated name at a pointer
        // valid for that long (`bytes` lives across the call); it writes no guest memory.
        let fd = unsafe { cortex_m_semihosting::syscall(nr::OPEN, &args) };
        if fd as isize == -1 {
            return Err(HostIoError);
        }
        Ok(HostFile {
            fd,
            buf: [0; BUF],
            len: 0,
            written: 0,
        })
    }

    /// Writes out the buffered bytes.
    pub fn flush(&mut self) -> Result<(), HostIoError> {
        let mut rest = &self.buf[..self.len];
        while !rest.is_empty() {
            let args = [self.fd, rest.as_ptr() as usize, rest.len()];
            // SAFETY: SYS_WRITE reads `rest.len()` bytes at `rest.as_ptr()`, a live borrow of
            // `self.buf`; it writes no guest memory.
            let left = unsafe { cortex_m_semihosting::syscall(nr::WRITE, &args) };
            if left > rest.len() {
                return Err(HostIoError);
            }
            self.written += (rest.len() - left) as u64;
            rest = &rest[rest.len() - left..];
        }
        self.len = 0;
        Ok(())
    }

    /// Flushes and closes the file.
    pub fn close(mut self) -> Result<u64, HostIoError> {
        self.flush()?;
        let args = [self.fd];
        // SAFETY: SYS_CLOSE takes the handle SYS_OPEN gave; it touches no guest memory.
        let r = unsafe { cortex_m_semihosting::syscall(nr::CLOSE, &args) };
        if r == 0 {
            Ok(self.written)
        } else {
            Err(HostIoError)
        }
    }
}

impl Sink for HostFile {
    type Error = HostIoError;

    fn write(&mut self, mut bytes: &[u8]) -> Result<(), HostIoError> {
        while !bytes.is_empty() {
            if self.len == BUF {
                self.flush()?;
            }
            let n = bytes.len().min(BUF - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
        }
        Ok(())
    }
}
