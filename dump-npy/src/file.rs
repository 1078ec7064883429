//! `std` helpers: whole-file reading into an owned [`NpyFile`], and writing to a path.

use std::{
    cell::RefCell,
    fs::File,
    io::{self, Read},
    path::Path,
};

use dump_core::DType;

use crate::{
    Error, IoSink, WriteOptions, header_len_from_prefix, parse_header, read::parse_header_opaque,
    write::MIN_SCRATCH_LEN, write_npy, write_npy_with_scratch,
};

/// An `.npy` file read into memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyFile {
    /// Major format version: 1, 2 or 3.
    pub version: u8,
    /// The descr as written in the header.
    pub descr: String,
    /// The dtype the descr names.
    pub dtype: DType,
    /// `true` for Fortran (column-major) data order.
    pub fortran_order: bool,
    /// The dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Header length, i.e. where the data starts in the file.
    pub data_offset: usize,
    /// The data bytes, exactly as stored.
    pub data: Vec<u8>,
}

/// Reads and validates a whole `.npy` file.
///
/// Never allocates more than the file's real size: the header length is checked against
/// [`crate::MAX_HEADER_LEN`] and the file size before its buffer is allocated, and the data
/// length the header announces must equal the rest of the file. Format errors come back as
/// [`io::ErrorKind::InvalidData`] wrapping an [`Error`].
pub fn read_file(path: impl AsRef<Path>) -> io::Result<NpyFile> {
    let mut f = File::open(path.as_ref())?;
    let file_len = f.metadata()?.len();
    read_from(&mut f, file_len)
}

/// [`read_file`], also accepting ml_dtypes' opaque descrs ([`crate::read::opaque_carrier`]:
/// `<V1`, `<f1`, `<V2`); such a file comes back with the carrier dtype and
/// [`NpyFile::is_opaque`] true, its bytes as stored.
pub fn read_file_opaque(path: impl AsRef<Path>) -> io::Result<NpyFile> {
    let mut f = File::open(path.as_ref())?;
    let file_len = f.metadata()?.len();
    read_from_with(&mut f, file_len, true)
}

impl NpyFile {
    /// Whether the descr is one of ml_dtypes' opaque ones (the element type is not in the
    /// file; `dtype` is only the carrier of its bytes).
    pub fn is_opaque(&self) -> bool {
        DType::from_npy_descr(&self.descr).is_none()
            && crate::read::opaque_carrier(&self.descr).is_some()
    }
}

/// [`read_file`] over any reader that yields exactly `total_len` bytes.
pub fn read_from(reader: &mut impl Read, total_len: u64) -> io::Result<NpyFile> {
    read_from_with(reader, total_len, false)
}

fn read_from_with(reader: &mut impl Read, total_len: u64, opaque: bool) -> io::Result<NpyFile> {
    let total = usize::try_from(total_len).map_err(|_| Error::ShapeOverflow)?;
    let mut prefix = [0u8; 12];
    let prefix_len = total.min(12);
    reader.read_exact(&mut prefix[..prefix_len])?;
    let header_len = header_len_from_prefix(&prefix[..prefix_len])?;
    if header_len > total {
        return Err(Error::Truncated {
            what: "header",
            needed: header_len,
            available: total,
        }
        .into());
    }
    // A version 1.0 header may be shorter than the 12 prefix bytes read: the rest is data.
    let in_prefix = prefix_len.min(header_len);
    let mut header = vec![0u8; header_len];
    header[..in_prefix].copy_from_slice(&prefix[..in_prefix]);
    reader.read_exact(&mut header[in_prefix..])?;
    let leftover = &prefix[in_prefix..prefix_len];
    let h = if opaque {
        parse_header_opaque(&header)?
    } else {
        parse_header(&header)?
    };
    let actual = total - header_len;
    if h.data_len() != actual {
        return Err(Error::DataLength {
            expected: h.data_len(),
            actual,
        }
        .into());
    }
    // `leftover` is at most `actual` bytes: both end at the same place in the file.
    let mut data = vec![0u8; actual];
    data[..leftover.len()].copy_from_slice(leftover);
    reader.read_exact(&mut data[leftover.len()..])?;
    Ok(NpyFile {
        version: h.version(),
        descr: h.descr().to_owned(),
        dtype: h.dtype(),
        fortran_order: h.fortran_order(),
        shape: h.dims().collect(),
        data_offset: h.data_offset(),
        data,
    })
}

/// Widening scratch of [`write_to`] and [`write_file`]: up to 1 MiB on the heap, so that a
/// widened tensor reaches the file in few large `write` calls (each call costs a syscall and an
/// inode time update; with 64 KiB chunks a widened write runs at about half the plain speed).
/// The buffer is kept per thread and reused, so a thread that has written a widened tensor
/// holds on to at most this many bytes.
pub const FILE_SCRATCH_LEN: usize = 1 << 20;

std::thread_local! {
    /// The reused widening scratch of this thread (fresh pages would cost a fault each).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Writes the tensor as `.npy` into `writer`; returns the bytes written.
///
/// Same bytes as [`write_npy`]; widening goes through a heap buffer of up to
/// [`FILE_SCRATCH_LEN`] bytes (only allocated when the tensor is widened). Nothing is written
/// when validation fails (`InvalidInput`).
pub fn write_to(
    mut writer: impl io::Write,
    dtype: DType,
    shape: &[usize],
    data: &[u8],
    opts: WriteOptions,
) -> io::Result<usize> {
    let layout = crate::NpyLayout::new(dtype, shape, data.len(), opts)?;
    if !layout.widens() && layout.header_len() <= VECTORED_HEADER_MAX {
        // Header and data in one vectored write: one syscall instead of two on a `File`.
        let mut head = [0u8; VECTORED_HEADER_MAX];
        let n = crate::encode_header(layout.descr(), shape, &mut head)?;
        write_all_vectored(
            &mut writer,
            &mut [io::IoSlice::new(&head[..n]), io::IoSlice::new(data)],
        )?;
        return Ok(layout.file_len());
    }
    let mut sink = IoSink(writer);
    if layout.widens() {
        let len = FILE_SCRATCH_LEN.min(layout.data_len()).max(MIN_SCRATCH_LEN);
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut buf) => {
                if buf.len() < len {
                    buf.resize(len, 0);
                }
                write_npy_with_scratch(&mut sink, dtype, shape, data, opts, &mut buf[..len])
            }
            // Only if the writer itself calls `write_to` on this thread.
            Err(_) => {
                write_npy_with_scratch(&mut sink, dtype, shape, data, opts, &mut vec![0u8; len])
            }
        })
    } else {
        write_npy(&mut sink, dtype, shape, data, opts)
    }
}

/// Headers up to this size go out together with the data in one vectored write.
const VECTORED_HEADER_MAX: usize = 4096;

/// `write_all` for several buffers (std's `write_all_vectored` is not stable yet).
fn write_all_vectored(w: &mut impl io::Write, mut bufs: &mut [io::IoSlice<'_>]) -> io::Result<()> {
    io::IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "failed to write the whole .npy file",
                ));
            }
            Ok(n) => io::IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Creates (or truncates) `path` and writes the tensor with [`write_to`]; returns the file
/// size. Validation happens before the file is created.
pub fn write_file(
    path: impl AsRef<Path>,
    dtype: DType,
    shape: &[usize],
    data: &[u8],
    opts: WriteOptions,
) -> io::Result<usize> {
    crate::NpyLayout::new(dtype, shape, data.len(), opts)?;
    write_to(File::create(path.as_ref())?, dtype, shape, data, opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unwrap_npy_error(e: io::Error) -> Error {
        *e.get_ref()
            .and_then(|inner| inner.downcast_ref::<Error>())
            .expect("an opdump Error inside the io::Error")
    }

    #[test]
    fn reads_what_it_writes() {
        let dir = std::env::temp_dir().join(format!("dump-npy-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.npy");
        let data: Vec<u8> = (0..48u8).collect();
        let n = write_file(&path, DType::Float64, &[2, 3], &data, WriteOptions::new()).unwrap();
        assert_eq!(n, 128 + 48);
        let f = read_file(&path).unwrap();
        assert_eq!(
            (
                f.version,
                f.descr.as_str(),
                f.dtype,
                f.fortran_order,
                f.data_offset
            ),
            (1, "<f8", DType::Float64, false, 128)
        );
        assert_eq!(f.shape, [2, 3]);
        assert_eq!(f.data, data);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn write_to_matches_write_npy() {
        // 600k bf16 values: the widened data (2.4 MB) takes three 1 MiB scratch chunks.
        let data: Vec<u8> = (0..1_200_000u32).map(|i| (i * 31 % 251) as u8).collect();
        for (dtype, shape) in [
            (DType::BFloat16, vec![600_000]),
            (DType::Int4, vec![3, 800_000]),
            (DType::UInt1, vec![9_600_000]),
            (DType::UInt8, vec![1_200_000]),
        ] {
            let bytes = &data[..dtype.storage_bytes(shape.iter().product()).unwrap()];
            let mut want = Vec::new();
            write_npy(&mut want, dtype, &shape, bytes, WriteOptions::new()).unwrap();
            let mut got = Vec::new();
            assert_eq!(
                write_to(&mut got, dtype, &shape, bytes, WriteOptions::new()).unwrap(),
                want.len()
            );
            assert!(got == want, "{dtype}");
        }
        // A writer that takes at most 7 bytes per call, vectored or not.
        struct Trickle(Vec<u8>);
        impl io::Write for Trickle {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                let n = buf.len().min(7);
                self.0.extend_from_slice(&buf[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        for dtype in [DType::Float32, DType::BFloat16] {
            let bytes = &data[..4000];
            let mut want = Vec::new();
            write_npy(
                &mut want,
                dtype,
                &[1000 * 4 / dtype.size().unwrap()],
                bytes,
                WriteOptions::new(),
            )
            .unwrap();
            let mut t = Trickle(Vec::new());
            write_to(
                &mut t,
                dtype,
                &[1000 * 4 / dtype.size().unwrap()],
                bytes,
                WriteOptions::new(),
            )
            .unwrap();
            assert!(t.0 == want, "{dtype}");
        }
        // A writer that accepts nothing is an error, not a loop.
        struct Full;
        impl io::Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Ok(0)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let e = write_to(Full, DType::Int8, &[2], &[1, 2], WriteOptions::new()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WriteZero);
        let mut untouched = Vec::new();
        let e = write_to(&mut untouched, DType::Int4, &[3], &[0], WriteOptions::new()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(untouched.is_empty());
    }

    #[test]
    fn hostile_lengths_are_errors_before_allocation() {
        // Claims a 1 MiB header in a 12-byte "file".
        let claim = b"\x93NUMPY\x02\x00\xf4\xff\x0f\x00";
        let e = read_from(&mut &claim[..], claim.len() as u64).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(matches!(
            unwrap_npy_error(e),
            Error::Truncated { what: "header", .. }
        ));
        // Claims 2^60 elements with a tiny file.
        let mut file = vec![0u8; 128];
        crate::encode_header("<f8", &[1 << 60], &mut file).unwrap();
        let e = read_from(&mut &file[..], 128).unwrap_err();
        assert_eq!(
            unwrap_npy_error(e),
            Error::DataLength {
                expected: 8 << 60,
                actual: 0
            }
        );
        // A 10-byte v1 prefix with HLEN 0 (found by the fuzzer): the 12-byte prefix read
        // overlaps the data; the empty dict is an error, not a panic.
        let e = read_from(&mut &b"\x93NUMPY\x01\x00\x00\x00\x00\x00"[..], 12).unwrap_err();
        assert_eq!(
            unwrap_npy_error(e),
            Error::Syntax {
                at: 0,
                expected: "'{' starting the header dict"
            }
        );
        // Too short to hold even the prefix.
        let e = read_from(&mut &b"\x93NU"[..], 3).unwrap_err();
        assert!(matches!(unwrap_npy_error(e), Error::Truncated { .. }));
        // Validation happens before the file is created.
        let bad = std::env::temp_dir().join("dump-npy-never-created.npy");
        let e = write_file(&bad, DType::Float32, &[3], &[0; 4], WriteOptions::new()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(!bad.exists());
    }
}
