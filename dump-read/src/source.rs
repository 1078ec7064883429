//! Where a tensor's data lives, and the one reader that streams it in the host layout whatever
//! the container: a tensor file ([`TensorFile`]: `.npy`, PyTorch `.pt`, an `.npz` member), or a
//! payload inside a CANN dump file (at an offset, maybe in a device format that is converted
//! block by block on the way).

use std::{
    fs::File,
    io::{BufReader, Read, Seek, SeekFrom},
    path::{Path, PathBuf},
};

use dump_core::DType;
use dump_device_ascend::{Format, blocked::HostBlocks, dumpfile::CannFormat};
use dump_npy::CHUNK;
use dump_stats::{Hashes, StreamStats, TensorStats};

use crate::{Error, TensorFile};

/// The largest block a device-format conversion may hold in memory (FRACTAL_Z needs the whole
/// tensor; NC1HWC0 one `(n, c1)` plane set, FRACTAL_NZ one matrix): 64 MiB.
pub const MAX_CONVERT_BLOCK: usize = 64 << 20;

/// Where a tensor's bytes are.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorSource {
    /// A tensor file [`TensorFile`] opens: an `.npy`, a PyTorch `.pt`, an `.npz` member
    /// (`archive.npz/NAME.npy`).
    File(PathBuf),
    /// A payload inside a CANN dump file.
    Cann(Box<CannTensor>),
}

impl TensorSource {
    /// The file holding the tensor.
    pub fn path(&self) -> &Path {
        match self {
            TensorSource::File(p) => p,
            TensorSource::Cann(c) => &c.path,
        }
    }
}

/// One input or output payload of a CANN dump file.
#[derive(Clone, Debug, PartialEq)]
pub struct CannTensor {
    /// The dump file.
    pub path: PathBuf,
    /// File offset of the payload's first byte.
    pub offset: u64,
    /// Payload bytes (`size`; only the first `shape`-derived bytes are the tensor).
    pub size: u64,
    /// The element type.
    pub dtype: DType,
    /// The device format the payload is in.
    pub format: CannFormat,
    /// The device shape (`shape` of the message).
    pub device_shape: Vec<usize>,
    /// The conversion to the host layout, when the format has one and the `original_shape`
    /// fits; `None`: the payload is read as it is, in its device shape.
    pub to_host: Option<HostBlocks>,
}

impl CannTensor {
    /// The shape the reader yields: the host shape when converted, else the device shape.
    pub fn shape(&self) -> &[usize] {
        match &self.to_host {
            Some(p) => p.host_shape(),
            None => &self.device_shape,
        }
    }
}

/// A tensor opened for streaming: an `.npy` file's data, or a CANN payload in the layout its
/// [`CannTensor::to_host`] gives (device formats converted block by block). Read it with
/// [`read_chunk`](TensorStream::read_chunk) in pieces of any size summing to
/// [`data_len`](TensorStream::data_len); memory stays one device block plus a read buffer.
pub enum TensorStream {
    /// A tensor file.
    File(TensorFile),
    /// A CANN payload.
    Cann(Box<CannStream>),
}

impl TensorStream {
    /// Opens `src` (an `.npy` header is parsed; a CANN payload's range is checked against the
    /// file's length, naming the byte offset when it does not fit).
    pub fn open(src: &TensorSource) -> Result<TensorStream, Error> {
        TensorStream::open_inner(src)
    }
}

impl TensorStream {
    fn open_inner(src: &TensorSource) -> Result<TensorStream, Error> {
        Ok(match src {
            TensorSource::File(p) => TensorStream::File(TensorFile::open(p)?),
            TensorSource::Cann(c) => TensorStream::Cann(Box::new(CannStream::open(c)?)),
        })
    }

    /// The element type of the data.
    pub fn dtype(&self) -> DType {
        match self {
            TensorStream::File(n) => n.dtype,
            TensorStream::Cann(c) => c.dtype,
        }
    }

    /// Dimensions of the data read (row-major).
    pub fn shape(&self) -> &[usize] {
        match self {
            TensorStream::File(n) => &n.shape,
            TensorStream::Cann(c) => &c.shape,
        }
    }

    /// Whether the data is in Fortran order (an `.npy` that says so; never for CANN).
    pub fn fortran_order(&self) -> bool {
        match self {
            TensorStream::File(n) => n.fortran_order,
            TensorStream::Cann(_) => false,
        }
    }

    /// Data bytes (the storage of `shape` in `dtype`).
    pub fn data_len(&self) -> u64 {
        match self {
            TensorStream::File(n) => n.data_len,
            TensorStream::Cann(c) => c.data_len,
        }
    }

    /// For an `.npy` file: the open file, its path and where its data starts, so that the data
    /// can be mapped instead of read (see [`crate::mapped`]).
    pub(crate) fn mappable(&self) -> Option<(&std::fs::File, &Path, u64)> {
        match self {
            TensorStream::File(n) => n.mappable(),
            TensorStream::Cann(_) => None,
        }
    }

    /// Fills `buf` with the next data bytes.
    pub fn read_chunk(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        match self {
            TensorStream::File(n) => n.read_chunk(buf),
            TensorStream::Cann(c) if c.widen.is_some() => {
                // bf16 or float8 read, f32 handed out (exact).
                let from = c.widen.unwrap_or(DType::BFloat16);
                let unit = from.size().unwrap_or(2);
                let mut narrow = std::mem::take(&mut c.narrow);
                narrow.resize(buf.len() / 4 * unit, 0);
                let r = c.read_chunk(&mut narrow);
                let kernel = match from {
                    DType::Float8E4M3FN => dump_core::widen::f8e4m3fn_to_f32,
                    DType::Float8E5M2 => dump_core::widen::f8e5m2_to_f32,
                    DType::Float8E4M3FNUZ => dump_core::widen::f8e4m3fnuz_to_f32,
                    DType::Float8E5M2FNUZ => dump_core::widen::f8e5m2fnuz_to_f32,
                    _ => dump_core::widen::bf16_to_f32,
                };
                let widened =
                    kernel(&narrow, buf).map_err(|e| Error::format(&c.path, e.to_string()));
                c.narrow = narrow;
                r.and(widened.map(|_| ()))
            }
            TensorStream::Cann(c) => c.read_chunk(buf),
        }
    }

    /// Hands a bf16 or float8 CANN payload out as float32 (exact), the way opdump and
    /// MindSpore store bf16 (and msaccucmp float8) in `.npy` files, so the two pair element by
    /// element; `false` (nothing changed) for anything else.
    pub fn widen_to_f32(&mut self) -> bool {
        match self {
            TensorStream::Cann(c)
                if c.widen.is_none()
                    && matches!(
                        c.dtype,
                        DType::BFloat16 | DType::Float8E4M3FN | DType::Float8E5M2
                    ) =>
            {
                let unit = c.dtype.size().unwrap_or(2) as u64;
                c.widen = Some(c.dtype);
                c.dtype = DType::Float32;
                c.data_len = c.data_len / unit * 4;
                true
            }
            _ => false,
        }
    }
}

/// A CANN payload streamed in the host layout: one device block read, converted, handed out.
pub struct CannStream {
    path: PathBuf,
    file: BufReader<File>,
    dtype: DType,
    shape: Vec<usize>,
    data_len: u64,
    plan: HostBlocks,
    block: usize,
    src: Vec<u8>,
    out: Vec<u8>,
    at: usize,
    filled: usize,
    /// bf16 or float8 handed out as f32 ([`TensorStream::widen_to_f32`]): the payload's
    /// dtype; `narrow` holds its bytes.
    widen: Option<DType>,
    narrow: Vec<u8>,
}

impl CannStream {
    pub(crate) fn open(t: &CannTensor) -> Result<CannStream, Error> {
        let plan = match t.to_host {
            Some(p) => p,
            None => HostBlocks::new(Format::Nd, t.dtype, &t.device_shape, &t.device_shape, CHUNK)
                .map_err(|e| {
                Error::format(&t.path, format!("payload at byte {}: {e}", t.offset))
            })?,
        };
        let shape = plan.host_shape().to_vec();
        let elems: usize = shape.iter().product();
        let data_len = t.dtype.storage_bytes(elems).unwrap_or(0) as u64;
        let mut f = File::open(&t.path).map_err(|e| Error::io(&t.path, e))?;
        let file_len = f.metadata().map_err(|e| Error::io(&t.path, e))?.len();
        let dev_len: u64 = (0..plan.count()).map(|i| plan.src_bytes(i) as u64).sum();
        if t.offset.saturating_add(dev_len) > file_len {
            return Err(Error::format(
                &t.path,
                format!(
                    "payload at byte {} needs {dev_len} bytes but the file ends at byte {file_len} (truncated?)",
                    t.offset
                ),
            ));
        }
        f.seek(SeekFrom::Start(t.offset))
            .map_err(|e| Error::io(&t.path, e))?;
        Ok(CannStream {
            path: t.path.clone(),
            file: BufReader::with_capacity(CHUNK.min(dev_len.max(1) as usize), f),
            dtype: t.dtype,
            shape,
            data_len,
            plan,
            block: 0,
            src: Vec::new(),
            out: vec![0u8; plan.max_dst_bytes()],
            at: 0,
            filled: 0,
            widen: None,
            narrow: Vec::new(),
        })
    }

    fn read_chunk(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        let mut done = 0;
        while done < buf.len() {
            if self.at == self.filled {
                if self.block >= self.plan.count() {
                    return Err(Error::format(
                        &self.path,
                        "read past the end of the tensor's payload",
                    ));
                }
                let n = self.plan.src_bytes(self.block);
                self.src.resize(n, 0);
                let offset = self.file.stream_position().unwrap_or(0);
                self.file.read_exact(&mut self.src).map_err(|e| {
                    Error::format(
                        &self.path,
                        format!("cannot read {n} bytes at byte {offset}: {e}"),
                    )
                })?;
                self.filled = self
                    .plan
                    .convert(self.block, &self.src, &mut self.out)
                    .map_err(|e| Error::format(&self.path, format!("byte {offset}: {e}")))?;
                self.at = 0;
                self.block += 1;
            }
            let k = (self.filled - self.at).min(buf.len() - done);
            buf[done..done + k].copy_from_slice(&self.out[self.at..self.at + k]);
            self.at += k;
            done += k;
        }
        Ok(())
    }
}

/// Statistics (and the digests `hashes` asks for) of a CANN payload, streamed in the host
/// layout in [`CHUNK`]-byte pieces.
pub(crate) fn summarize_cann(t: &CannTensor, hashes: Hashes) -> Result<TensorStats, Error> {
    let mut s = CannStream::open(t)?;
    let elems: usize = s.shape.iter().product();
    let path = t.path.clone();
    let stats_err = |e: dump_stats::Error| {
        Error::format(
            &path,
            format!("cannot compute statistics of {} data: {e}", t.dtype),
        )
    };
    let mut acc = StreamStats::new(t.dtype, elems, hashes).map_err(stats_err)?;
    let mut left = s.data_len;
    let mut buf = vec![0u8; (CHUNK as u64).min(left) as usize];
    while left > 0 {
        let n = (left as usize).min(buf.len());
        s.read_chunk(&mut buf[..n])?;
        acc.update(&buf[..n]).map_err(stats_err)?;
        left -= n as u64;
    }
    acc.finish().map_err(stats_err)
}
