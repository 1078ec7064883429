//! `.npy` files opened for streaming (feature `std`): the header is parsed and checked against
//! the file size (never trusted for an allocation), then the data is read in fixed chunks of
//! [`CHUNK`] bytes into one reused buffer, so memory per open file is bounded whatever the
//! tensor's size.
//!
//! ```
//! use dump_core::DType;
//! use dump_npy::{NpyReader, WriteOptions, write_file};
//!
//! let path = std::env::temp_dir().join(format!("npy-reader-doc-{}.npy", std::process::id()));
//! let data: Vec<u8> = [1.0f32, 2.0, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect();
//! write_file(&path, DType::Float32, &[3], &data, WriteOptions::default()).unwrap();
//!
//! let mut r = NpyReader::open(&path).unwrap();
//! assert_eq!((r.dtype, r.shape.as_slice(), r.data_len), (DType::Float32, &[3][..], 12));
//! let mut seen = Vec::new();
//! r.for_each_chunk(|c| {
//!     seen.extend_from_slice(c);
//!     Ok::<(), dump_npy::FileError>(())
//! })
//! .unwrap();
//! assert_eq!(seen, data);
//! std::fs::remove_file(&path).unwrap();
//! ```

use std::{
    fmt,
    fs::File,
    io::{self, Read},
    path::{Path, PathBuf},
};

use dump_core::DType;

use crate::Error;

/// Bytes per read: large enough for few syscalls, small enough that the chunk is still in L2
/// when the second consumer (a hash, the other side of a pair) reads it. A multiple of 8 so
/// every chunk holds whole elements of every dtype.
pub const CHUNK: usize = 1 << 20;

/// Why an `.npy` file could not be opened or read; [`FileError`] adds the path.
#[derive(Debug)]
#[non_exhaustive]
pub enum FileErrorKind {
    /// The operating system refused (the `io::Error` is kept).
    Io(io::Error),
    /// Reading the data after the header failed.
    Data(io::Error),
    /// Not a regular file (symlinks, FIFOs and devices are not read).
    NotRegularFile,
    /// The header is not a valid `.npy` header.
    Format(Error),
    /// The file ends inside the header.
    TruncatedHeader {
        /// Bytes the header needs.
        header_len: usize,
        /// Bytes in the file.
        file_len: u64,
    },
    /// The data after the header is not the size the header announces.
    DataLength {
        /// Data bytes the header announces.
        announced: u64,
        /// Data bytes the file holds.
        holds: u64,
        /// Elements the header announces.
        elems: usize,
        /// The dtype the header names.
        dtype: DType,
        /// The shape the header gives.
        shape: Vec<usize>,
    },
}

/// An `.npy` file that could not be opened or read: the path and why.
#[derive(Debug)]
pub struct FileError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub kind: FileErrorKind,
}

impl FileError {
    fn new(path: &Path, kind: FileErrorKind) -> FileError {
        FileError {
            path: path.to_path_buf(),
            kind,
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path.display())?;
        match &self.kind {
            FileErrorKind::Io(e) => write!(f, "{e}"),
            FileErrorKind::Data(e) => write!(f, "reading data: {e}"),
            FileErrorKind::NotRegularFile => {
                f.write_str("not a regular file (symlinks, FIFOs and devices are not read)")
            }
            FileErrorKind::Format(e) => write!(f, "not a valid .npy file: {e}"),
            FileErrorKind::TruncatedHeader {
                header_len,
                file_len,
            } => write!(
                f,
                "truncated .npy: the header needs {header_len} bytes, the file has {file_len}"
            ),
            FileErrorKind::DataLength {
                announced,
                holds,
                elems,
                dtype,
                shape,
            } => write!(
                f,
                "{} .npy: the header announces {announced} data bytes ({elems} x {dtype} of shape {shape:?}), the file holds {holds}",
                if announced > holds {
                    "truncated"
                } else {
                    "oversized"
                },
            ),
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            FileErrorKind::Io(e) | FileErrorKind::Data(e) => Some(e),
            FileErrorKind::Format(e) => Some(e),
            _ => None,
        }
    }
}

/// An `.npy` file whose header has been read and validated; the data follows.
#[derive(Debug)]
pub struct NpyReader {
    path: PathBuf,
    file: File,
    /// Where the data starts in the file (the header's length).
    data_offset: u64,
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

impl NpyReader {
    /// Opens `path`, reads and validates its header, and checks that the file holds exactly
    /// the data the header announces. Refuses anything but a regular file (a FIFO would block,
    /// a device would never end) and never follows a symlink.
    pub fn open(path: &Path) -> Result<NpyReader, FileError> {
        let err = |kind| FileError::new(path, kind);
        let meta = std::fs::symlink_metadata(path).map_err(|e| err(FileErrorKind::Io(e)))?;
        if !meta.file_type().is_file() {
            return Err(err(FileErrorKind::NotRegularFile));
        }
        let mut file = File::open(path).map_err(|e| err(FileErrorKind::Io(e)))?;
        let total = file
            .metadata()
            .map_err(|e| err(FileErrorKind::Io(e)))?
            .len();
        let mut prefix = [0u8; 12];
        let got = read_full(&mut file, &mut prefix).map_err(|e| err(FileErrorKind::Io(e)))?;
        let header_len = crate::header_len_from_prefix(&prefix[..got])
            .map_err(|e| err(FileErrorKind::Format(e)))?;
        if header_len as u64 > total {
            return Err(err(FileErrorKind::TruncatedHeader {
                header_len,
                file_len: total,
            }));
        }
        // Bounded by MAX_HEADER_LEN (checked by header_len_from_prefix).
        let mut header = vec![0u8; header_len];
        let head = got.min(header_len);
        header[..head].copy_from_slice(&prefix[..head]);
        let rest = &mut header[head..];
        if !rest.is_empty() {
            file.read_exact(rest)
                .map_err(|e| err(FileErrorKind::Io(e)))?;
        }
        let h = crate::parse_header(&header).map_err(|e| err(FileErrorKind::Format(e)))?;
        let actual = total - header_len as u64;
        if h.data_len() as u64 != actual {
            return Err(err(FileErrorKind::DataLength {
                announced: h.data_len() as u64,
                holds: actual,
                elems: h.elems(),
                dtype: h.dtype(),
                shape: h.dims().collect(),
            }));
        }
        // Data already read with the 12-byte prefix (a tiny version-1 header): re-seek.
        if got > header_len {
            use std::io::{Seek, SeekFrom};
            file.seek(SeekFrom::Start(header_len as u64))
                .map_err(|e| err(FileErrorKind::Io(e)))?;
        }
        Ok(NpyReader {
            path: path.to_path_buf(),
            file,
            data_offset: header_len as u64,
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

    /// The open file (for readers that map its data instead of reading it).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where the data starts in the file: the header's length.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Number of elements.
    pub fn elems(&self) -> usize {
        self.shape.iter().product()
    }

    /// Reads the data in order, handing each chunk (at most [`CHUNK`] bytes, whole elements)
    /// to `each`; stops at the first error of `each`. The buffer is allocated once, at most
    /// [`CHUNK`] bytes. A file that shrinks while it is read gives an error naming it.
    pub fn for_each_chunk<E: From<FileError>>(
        &mut self,
        mut each: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut buf = vec![0u8; CHUNK.min(self.data_len as usize)];
        let mut left = self.data_len;
        while left > 0 {
            let n = (left as usize).min(buf.len());
            self.read_chunk(&mut buf[..n])?;
            each(&buf[..n])?;
            left -= n as u64;
        }
        Ok(())
    }

    /// Reads the next `buf.len()` data bytes (for readers that pace two files together).
    pub fn read_chunk(&mut self, buf: &mut [u8]) -> Result<(), FileError> {
        self.file
            .read_exact(buf)
            .map_err(|e| FileError::new(&self.path, FileErrorKind::Data(e)))
    }
}

/// Reads until `buf` is full or the end; returns the bytes read.
fn read_full(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
