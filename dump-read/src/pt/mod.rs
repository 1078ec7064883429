//! PyTorch `.pt` files (what `torch.save(tensor)` writes, and msprobe's tensor task): a zip
//! archive of `{prefix}/data.pkl` (a pickle naming the storage, dtype, offset, size and
//! stride) and `{prefix}/data/{key}` (the storage's raw little-endian bytes, stored
//! uncompressed). [`open_pt`] reads the pickle ([`pickle`]: a small subset interpreter with
//! hard limits) and locates the tensor's bytes in the file; the caller streams them.
//!
//! Also [`stored_member`], the zip lookup the `.npz` reader shares.

pub(crate) mod pickle;

use std::{fs::File, io::Read, path::Path};

use dump_core::DType;

use crate::Error;

/// Entries of a `.pt` or `.npz` archive read at most.
pub(crate) const MAX_ENTRIES: usize = 1 << 16;

/// Where a tensor's bytes lie in a `.pt` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PtTensor {
    /// Element type.
    pub(crate) dtype: DType,
    /// Dimensions.
    pub(crate) shape: Vec<usize>,
    /// Offset of the first data byte in the file.
    pub(crate) data_start: u64,
    /// Data bytes (elements times the dtype's size).
    pub(crate) data_len: u64,
}

/// Opens `path` as a zip archive (a regular file, never a symlink), checking the entry count.
pub(crate) fn open_zip(path: &Path, what: &str) -> Result<zip::ZipArchive<File>, Error> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.file_type().is_file() {
        return Err(Error::format(
            path,
            "not a regular file (symlinks, FIFOs and devices are not read)",
        ));
    }
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let zip = zip::ZipArchive::new(file).map_err(|e| Error::Zip {
        path: path.to_path_buf(),
        what: format!("not a {what} (a zip archive)"),
        source: e,
    })?;
    if zip.len() > MAX_ENTRIES {
        return Err(Error::format(
            path,
            format!(
                "{} zip entries, more than the {MAX_ENTRIES} read",
                zip.len()
            ),
        ));
    }
    Ok(zip)
}

/// The data offset and size of entry `index`, which must be stored uncompressed and lie
/// within the file (`file_len`).
pub(crate) fn stored_member(
    zip: &mut zip::ZipArchive<File>,
    index: usize,
    path: &Path,
    file_len: u64,
) -> Result<(u64, u64), Error> {
    let e = zip.by_index_raw(index).map_err(|e| Error::Zip {
        path: path.to_path_buf(),
        what: format!("zip entry {index} unreadable"),
        source: e,
    })?;
    let name = e.name().map(|n| n.into_owned()).unwrap_or_default();
    if e.compression() != zip::CompressionMethod::Stored {
        return Err(Error::format(
            path,
            format!(
                "zip entry {name:?} is compressed ({:?}); opdump streams stored entries only (torch.save and numpy.savez store; numpy.savez_compressed does not)",
                e.compression()
            ),
        ));
    }
    let size = e.size();
    let start = e
        .data_start()
        .ok_or_else(|| Error::format(path, format!("zip entry {name:?}: data offset unknown")))?;
    if start.checked_add(size).is_none_or(|end| end > file_len) {
        return Err(Error::format(
            path,
            format!(
                "zip entry {name:?} claims {size} bytes at offset {start}, past the end of the {file_len}-byte file"
            ),
        ));
    }
    Ok((start, size))
}

/// Reads the tensor description of the `.pt` file at `path` and locates its bytes: the
/// storage must be stored uncompressed, little-endian, and the tensor contiguous within it
/// (msprobe and `torch.save` of a contiguous tensor write exactly that).
pub(crate) fn open_pt(path: &Path) -> Result<PtTensor, Error> {
    let mut zip = open_zip(path, "PyTorch .pt file")?;
    let file_len = std::fs::symlink_metadata(path)
        .map_err(|e| Error::io(path, e))?
        .len();
    let names: Vec<String> = zip
        .file_names()
        .filter_map(|n| n.ok().map(|n| n.into_owned()))
        .collect();
    let pkl: Vec<&String> = names
        .iter()
        .filter(|n| *n == "data.pkl" || n.ends_with("/data.pkl"))
        .collect();
    let [pkl] = pkl.as_slice() else {
        return Err(Error::format(
            path,
            format!(
                "{} entries named {{prefix}}/data.pkl, expected exactly one (torch.save's archive)",
                pkl.len()
            ),
        ));
    };
    let prefix = pkl.strip_suffix("data.pkl").expect("filtered").to_owned();
    if let Some(i) = zip.index_for_name(&format!("{prefix}byteorder")) {
        let (start, size) = stored_member(&mut zip, i, path, file_len)?;
        let text = read_at(path, start, size.min(16))?;
        if size > 16 || text != b"little" {
            return Err(Error::format(
                path,
                format!(
                    "byteorder is {:?}; opdump reads little-endian storages only",
                    String::from_utf8_lossy(&text)
                ),
            ));
        }
    }
    let i = zip.index_for_name(pkl).expect("listed");
    let (start, size) = stored_member(&mut zip, i, path, file_len)?;
    if size > pickle::MAX_PICKLE {
        return Err(Error::format(
            path,
            format!(
                "{pkl} is {size} bytes, more than the {} a plain tensor's pickle needs",
                pickle::MAX_PICKLE
            ),
        ));
    }
    let bytes = read_at(path, start, size)?;
    let meta = pickle::tensor_of(&bytes).map_err(|m| Error::format(path, format!("{pkl}: {m}")))?;
    let es = meta.dtype.size().expect("storage dtypes have a byte size") as u64;
    let elems = meta
        .shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
        .filter(|&e| {
            meta.offset
                .checked_add(e)
                .is_some_and(|end| end <= meta.storage_elems)
        })
        .ok_or_else(|| {
            Error::format(
                path,
                format!(
                    "a tensor of shape {:?} at offset {} does not fit its storage of {} elements",
                    meta.shape, meta.offset, meta.storage_elems
                ),
            )
        })?;
    let mut want = 1i64;
    for (d, (&n, &s)) in meta.shape.iter().zip(&meta.stride).enumerate().rev() {
        if n > 1 && s != want {
            return Err(Error::format(
                path,
                format!(
                    "stride {:?} of shape {:?} is not contiguous (dimension {d}); opdump reads contiguous tensors (msprobe saves contiguous clones)",
                    meta.stride, meta.shape
                ),
            ));
        }
        want = want.saturating_mul(n as i64);
    }
    let storage = format!("{prefix}data/{}", meta.key);
    let i = zip.index_for_name(&storage).ok_or_else(|| {
        Error::format(
            path,
            format!(
                "the pickle names storage {:?} but the archive has no {storage}",
                meta.key
            ),
        )
    })?;
    let (start, size) = stored_member(&mut zip, i, path, file_len)?;
    let need = meta.storage_elems.checked_mul(es);
    if need.is_none_or(|n| n > size) {
        return Err(Error::format(
            path,
            format!(
                "{storage} holds {size} bytes, less than {} elements of {}",
                meta.storage_elems, meta.dtype
            ),
        ));
    }
    Ok(PtTensor {
        dtype: meta.dtype,
        shape: meta.shape,
        data_start: start + meta.offset * es,
        data_len: elems * es,
    })
}

/// `len` bytes of `path` from `start` (small reads: pickles, byte order, headers).
pub(crate) fn read_at(path: &Path, start: u64, len: u64) -> Result<Vec<u8>, Error> {
    use std::io::{Seek, SeekFrom};
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    f.seek(SeekFrom::Start(start))
        .map_err(|e| Error::io(path, e))?;
    let mut buf = Vec::new();
    f.take(len)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(path, e))?;
    if buf.len() as u64 != len {
        return Err(Error::format(
            path,
            format!(
                "truncated: {len} bytes expected at offset {start}, {} there",
                buf.len()
            ),
        ));
    }
    Ok(buf)
}
