//! [`TensorFile`]: one tensor's data, streamed in bounded chunks whatever holds it: an `.npy`
//! file, a PyTorch `.pt` file (torch.save's zip, msprobe's tensor task), or one `NAME.npy`
//! member of an `.npz` archive, named by the path `archive.npz/NAME.npy`, or output `K` of
//! iteration `I` of runner `R` in Polygraphy's saved outputs, named `results.json/R/I/K`
//! (decoded into memory: Polygraphy keeps arrays inline as base64).

use std::{
    fs::File,
    io::{Read, Seek, SeekFrom},
    path::{Path, PathBuf},
};

use dump_core::DType;
use dump_npy::{CHUNK, NpyReader};

use crate::{Error, pt};

/// An opened tensor: its description, and its data read from the first byte on.
#[derive(Debug)]
pub struct TensorFile {
    path: PathBuf,
    inner: Inner,
    /// The stored element type.
    pub dtype: DType,
    /// Fortran (column-major) order (`.npy` only).
    pub fortran_order: bool,
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Data bytes.
    pub data_len: u64,
}

#[derive(Debug)]
enum Inner {
    Npy(NpyReader),
    /// A file positioned at the data, with the bytes left.
    Raw(std::io::Take<File>),
    /// An array decoded into memory (Polygraphy's JSON holds arrays inline).
    Mem(std::io::Cursor<Vec<u8>>),
}

/// The JSON file and `(runner, iteration, output)` of a path `results.json/R/I/K`.
fn polygraphy_member(path: &Path) -> Option<(&Path, [usize; 3])> {
    if std::fs::symlink_metadata(path).is_ok() {
        return None;
    }
    let json = path.ancestors().nth(3)?;
    if json.extension().is_none_or(|e| e != "json")
        || !std::fs::symlink_metadata(json).is_ok_and(|m| m.is_file())
    {
        return None;
    }
    let rest = path.strip_prefix(json).ok()?;
    let ids: Vec<usize> = rest
        .components()
        .map(|c| c.as_os_str().to_str()?.parse().ok())
        .collect::<Option<_>>()?;
    Some((json, ids.try_into().ok()?))
}

/// The `.npz` archive and member of a path `archive.npz/NAME.npy` (the member may hold `/`,
/// as ONNX value names do) when `path` itself is no file and an ancestor is an `.npz` file.
pub(crate) fn npz_member(path: &Path) -> Option<(&Path, String)> {
    if std::fs::symlink_metadata(path).is_ok() {
        return None;
    }
    let archive = path.ancestors().skip(1).find(|a| {
        a.extension().is_some_and(|e| e == "npz")
            && std::fs::symlink_metadata(a).is_ok_and(|m| m.is_file())
    })?;
    let member = path.strip_prefix(archive).ok()?.to_str()?.to_owned();
    Some((archive, member))
}

impl TensorFile {
    /// Opens `path`: a `.pt` file by its extension, `archive.npz/NAME.npy` when `archive.npz`
    /// is a file, else an `.npy` file. Headers are validated and the data's extent checked
    /// against the file; nothing but small headers is read.
    pub fn open(path: &Path) -> Result<TensorFile, Error> {
        if path.extension().is_some_and(|e| e == "pt" || e == "pth") {
            let t = pt::open_pt(path)?;
            return Self::raw(path, t.dtype, false, t.shape, t.data_start, t.data_len);
        }
        if let Some((json, [r, i, k])) = polygraphy_member(path) {
            return Self::open_polygraphy(path, json, r, i, k);
        }
        if let Some((archive, member)) = npz_member(path) {
            return Self::open_npz_member(path, archive, &member);
        }
        let npy = NpyReader::open(path)?;
        Ok(TensorFile {
            path: path.to_path_buf(),
            dtype: npy.dtype,
            fortran_order: npy.fortran_order,
            shape: npy.shape.clone(),
            data_len: npy.data_len,
            inner: Inner::Npy(npy),
        })
    }

    fn raw(
        path: &Path,
        dtype: DType,
        fortran_order: bool,
        shape: Vec<usize>,
        start: u64,
        len: u64,
    ) -> Result<TensorFile, Error> {
        let file_path = if path.exists() {
            path
        } else {
            path.parent().unwrap_or(path)
        };
        let mut f = File::open(file_path).map_err(|e| Error::io(file_path, e))?;
        f.seek(SeekFrom::Start(start))
            .map_err(|e| Error::io(file_path, e))?;
        Ok(TensorFile {
            path: path.to_path_buf(),
            inner: Inner::Raw(f.take(len)),
            dtype,
            fortran_order,
            shape,
            data_len: len,
        })
    }

    fn open_npz_member(path: &Path, archive: &Path, member: &str) -> Result<TensorFile, Error> {
        let mut zip = pt::open_zip(archive, ".npz file")?;
        let file_len = std::fs::symlink_metadata(archive)
            .map_err(|e| Error::io(archive, e))?
            .len();
        // A leading `/` (ONNX value names) is lost when the path is split into components:
        // names are compared without it.
        let want = member.trim_start_matches('/');
        let i = (0..zip.len())
            .find(|&i| {
                zip.name_for_index(i)
                    .and_then(|n| n.ok())
                    .is_some_and(|n| n.trim_start_matches('/') == want)
            })
            .ok_or_else(|| Error::format(archive, format!("has no member {member:?}")))?;
        let (start, size) = pt::stored_member(&mut zip, i, archive, file_len)?;
        let prefix = pt::read_at(archive, start, size.min(12))?;
        let hlen = dump_npy::header_len_from_prefix(&prefix)
            .map_err(|e| Error::format(path, format!("not a valid .npy member: {e}")))?;
        if hlen as u64 > size {
            return Err(Error::format(
                path,
                format!(
                    "truncated .npy member: the header needs {hlen} bytes, the member has {size}"
                ),
            ));
        }
        let header = pt::read_at(archive, start, hlen as u64)?;
        let h = dump_npy::parse_header(&header)
            .map_err(|e| Error::format(path, format!("not a valid .npy member: {e}")))?;
        let data_len = h.data_len() as u64;
        if data_len != size - hlen as u64 {
            return Err(Error::format(
                path,
                format!(
                    "the header announces {data_len} data bytes ({} x {} of shape {:?}), the member holds {}",
                    h.elems(),
                    h.dtype(),
                    h.dims().collect::<Vec<_>>(),
                    size - hlen as u64
                ),
            ));
        }
        let (dtype, fortran, shape) = (h.dtype(), h.fortran_order(), h.dims().collect());
        let mut f = File::open(archive).map_err(|e| Error::io(archive, e))?;
        f.seek(SeekFrom::Start(start + hlen as u64))
            .map_err(|e| Error::io(archive, e))?;
        Ok(TensorFile {
            path: path.to_path_buf(),
            inner: Inner::Raw(f.take(data_len)),
            dtype,
            fortran_order: fortran,
            shape,
            data_len,
        })
    }

    fn open_polygraphy(
        path: &Path,
        json: &Path,
        r: usize,
        i: usize,
        k: usize,
    ) -> Result<TensorFile, Error> {
        let doc = crate::dialect::polygraphy::load(json)?;
        let bytes = crate::dialect::polygraphy::npy_bytes(&doc, r, i, k)
            .map_err(|m| Error::format(path, m))?;
        drop(doc);
        let bad = |e: dump_npy::Error| Error::format(path, format!("not a valid .npy array: {e}"));
        let hlen = dump_npy::header_len_from_prefix(&bytes).map_err(bad)?;
        let h = dump_npy::parse_header(bytes.get(..hlen).unwrap_or(&bytes)).map_err(bad)?;
        let data_len = h.data_len() as u64;
        if bytes.len() as u64 != hlen as u64 + data_len {
            return Err(Error::format(
                path,
                format!(
                    "the header announces {data_len} data bytes, the array holds {}",
                    bytes.len().saturating_sub(hlen)
                ),
            ));
        }
        let (dtype, fortran_order, shape) = (h.dtype(), h.fortran_order(), h.dims().collect());
        let mut cur = std::io::Cursor::new(bytes);
        cur.set_position(hlen as u64);
        Ok(TensorFile {
            path: path.to_path_buf(),
            inner: Inner::Mem(cur),
            dtype,
            fortran_order,
            shape,
            data_len,
        })
    }

    /// The path it was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of elements.
    pub fn elems(&self) -> usize {
        self.shape.iter().product()
    }

    /// Reads the data in order, handing each chunk (at most [`CHUNK`] bytes) to `each`;
    /// stops at the first error of `each`. One buffer of at most [`CHUNK`] bytes.
    pub fn for_each_chunk(
        &mut self,
        mut each: impl FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
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

    /// The open file, its path and where the data lies in it, for an `.npy` file (whose data is
    /// stored as is, so it can be mapped instead of read).
    pub(crate) fn mappable(&self) -> Option<(&File, &Path, u64)> {
        match &self.inner {
            Inner::Npy(n) => Some((n.file(), &self.path, n.data_offset())),
            _ => None,
        }
    }

    /// Reads the next `buf.len()` data bytes (for readers that pace two files together).
    pub fn read_chunk(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        match &mut self.inner {
            Inner::Npy(n) => n.read_chunk(buf).map_err(Error::from),
            Inner::Raw(f) => f.read_exact(buf).map_err(|e| {
                Error::format(&self.path, format!("reading data: {e} (the file shrank?)"))
            }),
            Inner::Mem(c) => c
                .read_exact(buf)
                .map_err(|e| Error::format(&self.path, format!("reading data: {e}"))),
        }
    }
}
