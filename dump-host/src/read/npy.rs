//! `.npy` files opened for streaming: the header is parsed and checked against the file size
//! (never trusted for an allocation), then the data is read in fixed chunks of [`CHUNK`] bytes
//! into one reused buffer, so memory per open file is bounded whatever the tensor's size.

use std::{
    fs::File,
    io::Read,
    path::{Path, PathBuf},
};

use dump_core::DType;

use crate::Error;

/// Bytes per read: large enough for few syscalls, small enough that the chunk is still in L2
/// when the second consumer (a hash, the other side of a pair) reads it. A multiple of 8 so
/// every chunk holds whole elements of every dtype.
pub const CHUNK: usize = 1 << 20;

/// An `.npy` file whose header has been read and validated; the data follows.
#[derive(Debug)]
pub struct NpyStream {
    path: PathBuf,
    file: File,
    /// The descr as written (`<f4`, `<E2`, `|b1`).
    pub descr: String,
    /// The dtype the descr names.
    pub dtype: DType,
    /// Fortran (column-major) order.
    pub fortran_order: bool,
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Data bytes the header announces (checked against the file's size).
    pub data_len: u64,
}

/// An [`Error::Io`] for `path`.
pub(crate) fn io_err(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

impl NpyStream {
    /// Opens `path`, reads and validates its header, and checks that the file holds exactly
    /// the data the header announces. Refuses anything but a regular file (a FIFO would block,
    /// a device would never end) and never follows a symlink.
    pub fn open(path: &Path) -> Result<NpyStream, Error> {
        let meta = std::fs::symlink_metadata(path).map_err(|e| io_err(path, e))?;
        if !meta.file_type().is_file() {
            return Err(io_err(
                path,
                "not a regular file (symlinks, FIFOs and devices are not read)",
            ));
        }
        let mut file = File::open(path).map_err(|e| io_err(path, e))?;
        let total = file.metadata().map_err(|e| io_err(path, e))?.len();
        let mut prefix = [0u8; 12];
        let got = read_full(&mut file, &mut prefix).map_err(|e| io_err(path, e))?;
        let bad = |e: dump_npy::Error| io_err(path, format!("not a valid .npy file: {e}"));
        let header_len = dump_npy::header_len_from_prefix(&prefix[..got]).map_err(bad)?;
        if header_len as u64 > total {
            return Err(io_err(
                path,
                format!(
                    "truncated .npy: the header needs {header_len} bytes, the file has {total}"
                ),
            ));
        }
        // Bounded by dump_npy::MAX_HEADER_LEN (checked by header_len_from_prefix).
        let mut header = vec![0u8; header_len];
        let head = got.min(header_len);
        header[..head].copy_from_slice(&prefix[..head]);
        let rest = &mut header[head..];
        if !rest.is_empty() {
            file.read_exact(rest).map_err(|e| io_err(path, e))?;
        }
        let h = dump_npy::parse_header(&header).map_err(bad)?;
        let actual = total - header_len as u64;
        if h.data_len() as u64 != actual {
            return Err(io_err(
                path,
                format!(
                    "{} .npy: the header announces {} data bytes ({} x {} of shape {:?}), the file holds {actual}",
                    if (h.data_len() as u64) > actual {
                        "truncated"
                    } else {
                        "oversized"
                    },
                    h.data_len(),
                    h.elems(),
                    h.dtype(),
                    h.dims().collect::<Vec<_>>()
                ),
            ));
        }
        // Data already read with the 12-byte prefix (a tiny version-1 header): re-seek.
        if got > header_len {
            use std::io::{Seek, SeekFrom};
            file.seek(SeekFrom::Start(header_len as u64))
                .map_err(|e| io_err(path, e))?;
        }
        Ok(NpyStream {
            path: path.to_path_buf(),
            file,
            descr: h.descr().to_owned(),
            dtype: h.dtype(),
            fortran_order: h.fortran_order(),
            shape: h.dims().collect(),
            data_len: h.data_len() as u64,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of elements.
    pub fn elems(&self) -> usize {
        self.shape.iter().product()
    }

    /// Reads the data in order, handing each chunk (at most [`CHUNK`] bytes, whole elements)
    /// to `each`; stops at the first error of `each`. The buffer is allocated once, at most
    /// [`CHUNK`] bytes. A file that shrinks while it is read gives an error naming it.
    pub fn for_each_chunk(
        &mut self,
        mut each: impl FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut buf = vec![0u8; CHUNK.min(self.data_len as usize)];
        let mut left = self.data_len;
        while left > 0 {
            let n = (left as usize).min(buf.len());
            self.file
                .read_exact(&mut buf[..n])
                .map_err(|e| io_err(&self.path, format!("reading data: {e}")))?;
            each(&buf[..n])?;
            left -= n as u64;
        }
        Ok(())
    }

    /// Reads the next `buf.len()` data bytes (for readers that pace two files together).
    pub fn read_chunk(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        self.file
            .read_exact(buf)
            .map_err(|e| io_err(&self.path, format!("reading data: {e}")))
    }
}

/// Reads until `buf` is full or the end; returns the bytes read.
fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
