//! Where a tensor's data lives, and the one reader that streams it in the host layout whatever
//! the container: a tensor file ([`TensorFile`]: `.npy`, PyTorch `.pt`, an `.npz` member), or a
//! payload inside a CANN dump file (at an offset, maybe in a device format that is converted
//! block by block on the way).

use std::{
    fs::File,
    path::{Path, PathBuf},
};

use dump_core::DType;
use dump_device_ascend::{Format, blocked::HostBlocks, dumpfile::CannFormat};
use dump_npy::CHUNK;
use dump_stats::{Hashes, StreamStats, TensorStats};

use crate::{Error, TensorFile};

/// The largest block a device-format conversion may hold in memory (FRACTAL_Z_3D needs the
/// whole tensor, FRACTAL_Z a band of output channels; NC1HWC0 one `(n, c1)` plane set,
/// FRACTAL_NZ one matrix): 64 MiB.
pub const MAX_CONVERT_BLOCK: usize = 64 << 20;

/// Device bytes read per positioned read: consecutive blocks are read together up to this
/// size (a block larger than it is read alone), then converted one after the other.
pub const READ_BATCH: usize = 2 << 20;

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

thread_local! {
    /// Buffers of finished [`CannStream`]s kept for the next one on the same thread, so that
    /// a thread converting many tensors does not allocate, fault in and zero its read and
    /// convert buffers again for each (at most two of at most [`SPARE_MAX`] bytes each).
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The largest buffer kept for reuse ([`READ_BATCH`] plus a block, rounded up).
const SPARE_MAX: usize = 8 << 20;

/// A buffer from this thread's spares (stale contents, any length), or a new empty one.
fn spare() -> Vec<u8> {
    SPARE
        .try_with(|s| s.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

impl Drop for CannStream {
    fn drop(&mut self) {
        for b in [std::mem::take(&mut self.src), std::mem::take(&mut self.out)] {
            if b.capacity() == 0 || b.capacity() > SPARE_MAX {
                continue;
            }
            let _ = SPARE.try_with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < 2 {
                    s.push(b);
                }
            });
        }
    }
}

/// A CANN payload streamed in the host layout: device blocks read with positioned reads (up to
/// [`READ_BATCH`] bytes of consecutive blocks at once, a banded FRACTAL_Z block gathered row
/// by row), the bytes ahead of them asked of the kernel in advance (8 MiB, Linux), converted,
/// handed out ([`next_piece`](CannStream::next_piece) without a copy).
pub struct CannStream {
    path: PathBuf,
    file: File,
    /// File offset of the payload.
    offset: u64,
    dtype: DType,
    shape: Vec<usize>,
    data_len: u64,
    plan: HostBlocks,
    block: usize,
    /// One past the last block read ([`CannStream::open_range`]).
    end: usize,
    src: Vec<u8>,
    out: Vec<u8>,
    at: usize,
    filled: usize,
    /// bf16 or float8 handed out as f32 ([`TensorStream::widen_to_f32`]): the payload's
    /// dtype; `narrow` holds its bytes.
    widen: Option<DType>,
    narrow: Vec<u8>,
    /// Device bytes up to which the kernel was asked to read ahead ([`CannStream::read_ahead`]).
    advised: usize,
    /// Reads from the page cache alone ([`read_cached`]) work on this file (until one says
    /// they are not supported).
    nowait: bool,
}

/// Device bytes asked for ahead of the blocks being read ([`CannStream::read_ahead`]).
const READ_AHEAD: usize = 8 << 20;

/// Bytes asked for per `posix_fadvise` call ([`CannStream::read_ahead`]).
const READ_AHEAD_PIECE: usize = 512 << 10;

/// The most device bytes one read asks ahead for within its span, from where it reads (a banded
/// FRACTAL_Z block's rows span its whole weight: a weight up to this size is asked for at once,
/// a larger one this much at a time, ahead of the rows as they are read).
const READ_AHEAD_SPAN: usize = 256 << 20;

/// The device bytes to ask the kernel for before a read at device byte `here` of a block whose
/// reads span `span` (in a payload of `end` device bytes), when everything below `advised` was
/// asked for already: from `here` (within the span) to [`READ_AHEAD_SPAN`] past it, at most to
/// the span's end, then [`READ_AHEAD`] more; empty when none of it is new.
fn ahead_window(
    advised: usize,
    here: usize,
    span: &std::ops::Range<usize>,
    end: usize,
) -> std::ops::Range<usize> {
    let lo = here.clamp(span.start, span.end.max(span.start));
    let to = span
        .end
        .min(lo.saturating_add(READ_AHEAD_SPAN))
        .saturating_add(READ_AHEAD)
        .min(end);
    let from = advised.max(lo);
    from..to.max(from)
}

impl CannStream {
    /// Opens the payload `t` (its range checked against the file's length, naming the byte
    /// offset when it does not fit).
    pub fn open(t: &CannTensor) -> Result<CannStream, Error> {
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
        let f = File::open(&t.path).map_err(|e| Error::io(&t.path, e))?;
        let file_len = f.metadata().map_err(|e| Error::io(&t.path, e))?.len();
        // The last byte any block reads, found without walking the blocks (a hostile
        // header may declare billions of them).
        let dev_len = plan.src_extent() as u64;
        if t.offset.saturating_add(dev_len) > file_len {
            return Err(Error::format(
                &t.path,
                format!(
                    "payload at byte {} needs {dev_len} bytes but the file ends at byte {file_len} (truncated?)",
                    t.offset
                ),
            ));
        }
        Ok(CannStream {
            path: t.path.clone(),
            file: f,
            offset: t.offset,
            dtype: t.dtype,
            shape,
            data_len,
            plan,
            block: 0,
            end: plan.count(),
            src: spare(),
            out: spare(),
            at: 0,
            filled: 0,
            widen: None,
            narrow: Vec::new(),
            advised: 0,
            nowait: true,
        })
    }

    /// Asks the kernel to start reading the device bytes `window` ([`ahead_window`]) with
    /// `posix_fadvise(WILLNEED)` (Linux): a payload on disk is read while the previous blocks
    /// convert, and a banded FRACTAL_Z block's scattered row reads find their pages in memory.
    /// Cached pages cost a lookup; errors are ignored (advice only).
    fn read_ahead(&mut self, window: std::ops::Range<usize>) {
        let (from, to) = (window.start, window.end);
        if to <= from {
            return;
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            // The kernel reads at most the device's read-ahead or request size per call
            // (often 128 KiB to 8 MiB): ask in pieces under that.
            for a in (from..to).step_by(READ_AHEAD_PIECE) {
                let n = (to - a).min(READ_AHEAD_PIECE);
                if let (Ok(at), Ok(len)) = (
                    libc::off_t::try_from(self.offset + a as u64),
                    libc::off_t::try_from(n),
                ) {
                    // SAFETY: posix_fadvise only reads its integer arguments; the descriptor
                    // is this stream's open file.
                    let _ = unsafe {
                        libc::posix_fadvise(
                            self.file.as_raw_fd(),
                            at,
                            len,
                            libc::POSIX_FADV_WILLNEED,
                        )
                    };
                }
            }
        }
        self.advised = to;
    }

    /// Opens the payload `t` to read only its blocks `blocks` (of [`CannTensor::to_host`], or
    /// of the plain copy): their converted bytes are the data from
    /// [`data_offset`](Self::data_offset)`(blocks.start)` on, so that several readers, one per
    /// range, convert one tensor in parallel. A range past the last block is an error.
    pub fn open_range(t: &CannTensor, blocks: std::ops::Range<usize>) -> Result<CannStream, Error> {
        let mut s = CannStream::open(t)?;
        if blocks.start > blocks.end || blocks.end > s.plan.count() {
            return Err(Error::format(
                &t.path,
                format!(
                    "blocks {}..{} of a payload of {} blocks",
                    blocks.start,
                    blocks.end,
                    s.plan.count()
                ),
            ));
        }
        s.block = blocks.start;
        s.end = blocks.end;
        Ok(s)
    }

    /// Number of blocks the payload is read in (see [`open_range`](Self::open_range)).
    pub fn blocks(&self) -> usize {
        self.plan.count()
    }

    /// Device bytes of block `i` (to balance ranges).
    pub fn block_src_bytes(&self, i: usize) -> usize {
        self.plan.src_bytes(i)
    }

    /// Where block `i`'s converted bytes start in the data.
    pub fn data_offset(&self, i: usize) -> u64 {
        (0..i.min(self.plan.count()))
            .map(|k| self.plan.dst_bytes(k) as u64)
            .sum()
    }

    /// The element type of the data.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Dimensions of the data (the host shape when converted, else the device shape).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Data bytes (the storage of `shape` in `dtype`).
    pub fn data_len(&self) -> u64 {
        self.data_len
    }

    /// Whether the payload is read as it is stored (no conversion): its bytes are the data.
    pub fn is_copy(&self) -> bool {
        self.plan.is_copy()
    }

    /// File offset of the payload's first byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next converted bytes, as many as the next read gave (up to about [`READ_BATCH`]
    /// bytes), borrowed from the stream; `None` after the last. Do not mix with
    /// [`read_chunk`](Self::read_chunk) on one stream.
    pub fn next_piece(&mut self) -> Result<Option<&[u8]>, Error> {
        if self.at == self.filled && !self.fill()? {
            return Ok(None);
        }
        let (at, end) = (self.at, self.filled);
        self.at = end;
        Ok(Some(&self.out[at..end]))
    }

    /// Reads and converts the next blocks into `out`; `false` when every block was read.
    fn fill(&mut self) -> Result<bool, Error> {
        let count = self.end;
        if self.block >= count {
            return Ok(false);
        }
        // Consecutive single-run blocks, up to READ_BATCH bytes (at least one block).
        let first = self.plan.src_span(self.block);
        let mut last = self.block + 1;
        let mut len = first.len();
        if first.pieces == 1 {
            while last < count {
                let s = self.plan.src_span(last);
                if s.pieces != 1 || s.offset != first.offset + len || len + s.len() > READ_BATCH {
                    break;
                }
                len += s.len();
                last += 1;
            }
        }
        let span_end = first.offset + (first.pieces.max(1) - 1) * first.stride + first.piece;
        let span = first.offset..span_end.max(first.offset + len);
        let at = self.offset + first.offset as u64;
        let read_err = |path: &Path, e: std::io::Error, n: usize, at: u64| {
            Error::format(path, format!("cannot read {n} bytes at byte {at}: {e}"))
        };
        if self.plan.is_copy() {
            // The bytes are the data: read them straight into `out` (grown when too short;
            // stale bytes past what is read are never handed out).
            if self.out.len() < len {
                self.out.resize(len, 0);
            }
            self.read_run(true, 0..len, at, &span)
                .map_err(|e| read_err(&self.path, e, len, at))?;
            self.filled = len;
        } else {
            if self.src.len() < len {
                self.src.resize(len, 0);
            }
            if first.pieces == 1 {
                self.read_run(false, 0..len, at, &span)
                    .map_err(|e| read_err(&self.path, e, len, at))?;
            } else if first.piece > 0 {
                for q in 0..first.pieces {
                    let p = at + (q * first.stride) as u64;
                    let into = q * first.piece..(q + 1) * first.piece;
                    self.read_run(false, into, p, &span)
                        .map_err(|e| read_err(&self.path, e, first.piece, p))?;
                }
            }
            let need = (last - self.block) * self.plan.max_dst_bytes();
            if self.out.len() < need {
                self.out.resize(need, 0);
            }
            let (mut from, mut to) = (0usize, 0usize);
            for i in self.block..last {
                let n = self.plan.src_bytes(i);
                to += self
                    .plan
                    .convert(i, &self.src[from..from + n], &mut self.out[to..])
                    .map_err(|e| {
                        let byte = self.offset + self.plan.src_span(i).offset as u64;
                        Error::format(&self.path, format!("byte {byte}: {e}"))
                    })?;
                from += n;
            }
            self.filled = to;
        }
        self.at = 0;
        self.block = last;
        Ok(true)
    }

    /// Reads the file's bytes from `at` into `out[into]` (`src[into]` unless `to_out`): first
    /// what the page cache holds, without waiting ([`read_cached`]); only when that falls
    /// short is the kernel asked to read ahead over `span` (device bytes) and the rest read,
    /// waiting. So a cached payload costs no advice calls at all.
    fn read_run(
        &mut self,
        to_out: bool,
        into: std::ops::Range<usize>,
        at: u64,
        span: &std::ops::Range<usize>,
    ) -> std::io::Result<()> {
        let want = into.len();
        let got = if self.nowait {
            let buf = if to_out {
                &mut self.out[into.clone()]
            } else {
                &mut self.src[into.clone()]
            };
            match read_cached(&self.file, buf, at) {
                Some(n) if n == want => return Ok(()),
                Some(n) => n,
                None => {
                    self.nowait = false;
                    0
                }
            }
        } else {
            0
        };
        // From this read on: a banded block's later rows lie past its span's start, and the
        // advice follows them through a span larger than READ_AHEAD_SPAN.
        let here = usize::try_from(at.saturating_sub(self.offset)).unwrap_or(usize::MAX);
        let window = ahead_window(self.advised, here, span, self.plan.src_extent());
        self.read_ahead(window);
        let buf = if to_out {
            &mut self.out[into]
        } else {
            &mut self.src[into]
        };
        read_at(&self.file, &mut buf[got..], at + got as u64)
    }

    /// Fills `buf` with the next data bytes.
    pub fn read_chunk(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        let mut done = 0;
        while done < buf.len() {
            if self.at == self.filled && !self.fill()? {
                return Err(Error::format(
                    &self.path,
                    "read past the end of the tensor's payload",
                ));
            }
            let k = (self.filled - self.at).min(buf.len() - done);
            buf[done..done + k].copy_from_slice(&self.out[self.at..self.at + k]);
            self.at += k;
            done += k;
        }
        Ok(())
    }
}

/// Reads into `buf` from byte `at` of `f` only what the page cache holds, never waiting for the
/// disk (`preadv2` with `RWF_NOWAIT`, Linux with glibc): the bytes read (0 when the first page
/// is not cached, or on an error, which the waiting read that follows reports); `None` where
/// such reads are not supported (that file system, that kernel, or this target).
fn read_cached(f: &File, buf: &mut [u8], at: u64) -> Option<usize> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::fd::AsRawFd;
        let off = libc::off_t::try_from(at).ok()?;
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: `iov` describes `buf`, writable for its whole length and borrowed for the
        // call; the descriptor is `f`'s, open for the call.
        let n = unsafe { libc::preadv2(f.as_raw_fd(), &iov, 1, off, libc::RWF_NOWAIT) };
        if let Ok(n) = usize::try_from(n) {
            return Some(n);
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS) => None,
            _ => Some(0),
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = (f, buf, at);
        None
    }
}

/// Fills `buf` from byte `at` of `f` (a positioned read on Unix; seek and read elsewhere).
fn read_at(f: &File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(f, buf, at)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = f;
        f.seek(SeekFrom::Start(at))?;
        f.read_exact(buf)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The read-ahead windows of a banded FRACTAL_Z block whose rows span a 600 MiB weight,
    /// one 512-byte row piece every 128 KiB, each read asking for its window: the advice
    /// follows the rows to the weight's end (it stopped at 264 MiB, READ_AHEAD_SPAN past the
    /// span's start plus READ_AHEAD), never asks for a byte twice, and never asks for more
    /// than READ_AHEAD_SPAN + READ_AHEAD at once. A single-run read asks for its bytes and
    /// READ_AHEAD more; one inside what was asked for asks for nothing.
    #[test]
    fn read_ahead_follows_a_banded_block_through_a_large_weight() {
        let end = 600usize << 20;
        let span = 512..end;
        let mut advised = 0;
        let mut windows = Vec::new();
        for here in (512..end).step_by(128 << 10) {
            let w = ahead_window(advised, here, &span, end);
            if !w.is_empty() {
                assert!(w.start >= advised && w.start <= here.max(advised), "{w:?}");
                assert!(w.len() <= READ_AHEAD_SPAN + READ_AHEAD, "{w:?}");
                advised = w.end;
                windows.push(w);
            }
        }
        assert_eq!(advised, end, "{windows:?}");
        assert_eq!(windows[0], 512..512 + READ_AHEAD_SPAN + READ_AHEAD);
        // A run of 2 MiB at 10 MiB: its bytes and READ_AHEAD more; then a read inside that
        // asks for nothing, and one past it only for what is new.
        let run = (10 << 20)..(12 << 20);
        assert_eq!(
            ahead_window(0, run.start, &run, end),
            (10 << 20)..(12 << 20) + READ_AHEAD
        );
        assert!(ahead_window((12 << 20) + READ_AHEAD, 11 << 20, &run, end).is_empty());
        let next = (12 << 20)..(14 << 20);
        assert_eq!(
            ahead_window((12 << 20) + READ_AHEAD, next.start, &next, end),
            (12 << 20) + READ_AHEAD..(14 << 20) + READ_AHEAD
        );
        // Near the payload's end the window stops there.
        let last = (end - 1024)..end;
        assert_eq!(ahead_window(0, last.start, &last, end), last);
    }

    /// A FRACTAL_Z weight in bands of output channels, read from a file through positioned
    /// gathers: every element where the FRACTAL_Z index math puts it (N and C not multiples of
    /// 16), the same through `next_piece` and `read_chunk`, and a truncated payload is an
    /// error naming the byte offset.
    #[test]
    fn banded_fractal_z_is_gathered_from_the_file() {
        let (n, c, h, w) = (37usize, 21usize, 2usize, 3usize);
        let (c1, n1) = (c.div_ceil(16), n.div_ceil(16));
        let dev_shape = [c1 * h * w, n1, 16, 16];
        let dev_elems: usize = dev_shape.iter().product();
        // Distinct 2-byte elements: element k holds k + 1.
        let dev: Vec<u8> = (0..dev_elems)
            .flat_map(|k| (k as u16 + 1).to_le_bytes())
            .collect();
        let dir = std::env::temp_dir().join(format!("dump-read-fz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("Conv2D.w.1.2.3");
        let mut file = vec![0xEEu8; 77];
        file.extend_from_slice(&dev);
        file.extend_from_slice(&[0xDD; 5]);
        std::fs::write(&path, &file).unwrap();
        // One N0 block per band: three bands, the last with 5 channels.
        let per_n1 = dev_shape[0] * 16 * 16 * 2;
        let plan = HostBlocks::with_band(
            Format::FractalZ,
            DType::Float16,
            &dev_shape,
            &[n, c, h, w],
            1 << 20,
            per_n1,
        )
        .unwrap();
        assert_eq!(plan.count(), 3);
        let t = CannTensor {
            path: path.clone(),
            offset: 77,
            size: dev.len() as u64,
            dtype: DType::Float16,
            format: CannFormat(4),
            device_shape: dev_shape.to_vec(),
            to_host: Some(plan),
        };
        let mut want = Vec::new();
        for ni in 0..n {
            for ci in 0..c {
                for hi in 0..h {
                    for wi in 0..w {
                        let row = ((ci / 16) * h + hi) * w + wi;
                        let k = ((row * n1 + ni / 16) * 16 + ni % 16) * 16 + ci % 16;
                        want.extend_from_slice(&dev[k * 2..k * 2 + 2]);
                    }
                }
            }
        }
        let mut s = CannStream::open(&t).unwrap();
        assert_eq!(s.data_len(), want.len() as u64);
        let mut got = Vec::new();
        while let Some(p) = s.next_piece().unwrap() {
            got.extend_from_slice(p);
        }
        assert_eq!(got, want);
        let mut s = CannStream::open(&t).unwrap();
        let mut chunked = vec![0u8; want.len()];
        for piece in chunked.chunks_mut(1000) {
            s.read_chunk(piece).unwrap();
        }
        assert_eq!(chunked, want);
        assert!(s.read_chunk(&mut [0u8; 1]).is_err(), "nothing past the end");
        // The file cut inside the last row: refused at open, naming the payload's offset.
        std::fs::write(&path, &file[..77 + dev.len() - 3]).unwrap();
        let e = CannStream::open(&t).err().unwrap().to_string();
        assert!(
            e.contains("payload at byte 77") && e.contains("truncated"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Consecutive blocks are read together (NC1HWC0 planes, plain copies): the pieces handed
    /// out are larger than one block, bounded by the read batch, and concatenate to the data.
    #[test]
    fn consecutive_blocks_are_read_in_batches() {
        let dir = std::env::temp_dir().join(format!("dump-read-batch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("Add.a.1.2.3");
        // NC1HWC0 (3, 2, 64, 64, 16) of NCHW (3, 20, 64, 64): 128 KiB per (n, c1) block.
        let dev_shape = [3usize, 2, 64, 64, 16];
        let dev_elems: usize = dev_shape.iter().product();
        let dev: Vec<u8> = (0..dev_elems)
            .flat_map(|k| ((k % 65521) as u16).to_le_bytes())
            .collect();
        std::fs::write(&path, &dev).unwrap();
        let host = [3usize, 20, 64, 64];
        let plan =
            HostBlocks::new(Format::Nc1hwc0, DType::Float16, &dev_shape, &host, 1 << 20).unwrap();
        let t = CannTensor {
            path: path.clone(),
            offset: 0,
            size: dev.len() as u64,
            dtype: DType::Float16,
            format: CannFormat(3),
            device_shape: dev_shape.to_vec(),
            to_host: Some(plan),
        };
        let mut s = CannStream::open(&t).unwrap();
        let (mut got, mut pieces) = (Vec::new(), 0);
        while let Some(p) = s.next_piece().unwrap() {
            assert!(p.len() <= READ_BATCH);
            got.extend_from_slice(p);
            pieces += 1;
        }
        assert!(
            pieces < plan.count(),
            "{pieces} pieces for {} blocks",
            plan.count()
        );
        let mut want = Vec::new();
        for ni in 0..3 {
            for ci in 0..20 {
                for p in 0..64 * 64 {
                    let k = ((ni * 2 + ci / 16) * 64 * 64 + p) * 16 + ci % 16;
                    want.extend_from_slice(&dev[k * 2..k * 2 + 2]);
                }
            }
        }
        assert_eq!(got, want);
        // Ranges of blocks, each from its data offset: the same bytes in parallel pieces.
        let count = plan.count();
        let mut stitched = vec![0u8; want.len()];
        for r in [0..5, 5..5, 5..count - 1, count - 1..count] {
            let mut s = CannStream::open_range(&t, r.clone()).unwrap();
            let mut at = s.data_offset(r.start) as usize;
            while let Some(p) = s.next_piece().unwrap() {
                stitched[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
            assert_eq!(at as u64, s.data_offset(r.end), "{r:?}");
        }
        assert_eq!(stitched, want);
        assert!(CannStream::open_range(&t, 0..count + 1).is_err());
        // The buffers of the streams above are reused on this thread: a small payload read
        // after them is its own bytes, nothing stale.
        let small = CannTensor {
            offset: 3,
            size: 10,
            dtype: DType::UInt8,
            format: CannFormat(2),
            device_shape: vec![10],
            to_host: None,
            ..t.clone()
        };
        let mut s = CannStream::open(&small).unwrap();
        assert_eq!(s.next_piece().unwrap(), Some(&dev[3..13]));
        assert_eq!(s.next_piece().unwrap(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Which of the 4 KiB pages of `file` in `range` are in the page cache (`mincore`).
    #[cfg(target_os = "linux")]
    fn resident(file: &File, range: std::ops::Range<usize>) -> Vec<bool> {
        use std::os::fd::AsRawFd;
        let len = file.metadata().unwrap().len() as usize;
        // SAFETY: a read-only shared mapping of the whole file, unmapped below; mincore only
        // writes one byte per page into `v`, which has room for every page.
        unsafe {
            let m = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(m, libc::MAP_FAILED);
            let mut v = vec![0u8; len.div_ceil(4096)];
            assert_eq!(libc::mincore(m, len, v.as_mut_ptr()), 0);
            libc::munmap(m, len);
            v[range.start / 4096..range.end / 4096]
                .iter()
                .map(|b| b & 1 == 1)
                .collect()
        }
    }

    /// Reading a payload that is not in the page cache asks the kernel for the bytes ahead:
    /// after the first piece (2 MiB) of a 16 MiB payload, the pages 2 to 10 MiB in come in
    /// without being read, and those past the read-ahead stay out.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_payload_on_disk_is_read_ahead_of_the_blocks() {
        use std::os::fd::AsRawFd;
        // Beside the build (on the disk that holds the checkout), not in TMPDIR (which may be
        // a tmpfs, whose pages cannot be dropped).
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target")
            .join(format!("dump-read-ahead-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("Cast.c.1.2.3");
        let size = 16usize << 20;
        std::fs::write(&path, vec![7u8; size]).unwrap();
        let f = File::open(&path).unwrap();
        f.sync_all().unwrap();
        // SAFETY: plain advice on this open file.
        let dropped =
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(dropped, 0);
        let kept = resident(&f, 0..size).iter().any(|&r| r);
        let probe = if kept {
            Err(format!(
                "{} keeps its pages in memory (a tmpfs?)",
                dir.display()
            ))
        } else {
            Ok(())
        };
        if !opdump_test_support::check(opdump_test_support::Prereq::DiskPages, probe) {
            return;
        }
        let t = CannTensor {
            path: path.clone(),
            offset: 0,
            size: size as u64,
            dtype: DType::UInt8,
            format: CannFormat(2),
            device_shape: vec![size],
            to_host: None,
        };
        let mut s = CannStream::open(&t).unwrap();
        let first = s.next_piece().unwrap().unwrap().len();
        assert_eq!(first, READ_BATCH);
        let ahead = READ_BATCH..READ_BATCH + READ_AHEAD;
        let start = std::time::Instant::now();
        while !resident(&f, ahead.clone()).iter().all(|&r| r) {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(20),
                "pages {ahead:?} not read ahead: {:?}",
                resident(&f, ahead.clone())
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let past = resident(&f, READ_BATCH + READ_AHEAD + (1 << 20)..size);
        assert!(
            past.iter().any(|&r| !r),
            "everything past the read-ahead is cached too"
        );
        drop(s);
        // Once the whole payload is cached, reading it asks nothing ahead: every read is
        // served by the page cache alone (RWF_NOWAIT, supported on ext4 and xfs).
        std::fs::read(&path).unwrap();
        let mut s = CannStream::open(&t).unwrap();
        let mut n = 0;
        while let Some(p) = s.next_piece().unwrap() {
            assert!(p.iter().all(|&b| b == 7));
            n += p.len();
        }
        assert_eq!(n, size);
        assert!(s.nowait, "reads from the page cache alone are refused here");
        assert_eq!(s.advised, 0, "a cached payload was read ahead");
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
