//! [`DumpReader`]: decodes the header and message from any [`Read`], then hands out each
//! tensor's metadata and its bytes in caller-sized chunks, so a file of any size is processed
//! in memory bounded by the message (and [`Limits::max_message_len`]).

use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};

use super::container::{
    HEADER_LEN, Plan, inline_allowed, pick_error, place_binary, place_inline, plan,
};
use super::error::DumpFileError;
use super::header::{DumpHeader, Limits, TensorMeta};
use super::message;

/// Streams one CANN dump file from a [`Read`].
///
/// The v2 (binary) variant reads only the 8-byte header and the message up front; tensor bytes
/// are read when asked for, in order. The v1 (inline) variant is one protobuf message, so the
/// whole file (at most [`Limits::max_message_len`]) is held in memory.
///
/// Tensors come in payload order ([`next_tensor`](DumpReader::next_tensor)); bytes of a tensor
/// not read are skipped when the next one is asked for.
#[derive(Debug)]
pub struct DumpReader<R> {
    src: R,
    header: DumpHeader,
    /// Bytes read during `open` that are still needed: from file offset `head_start`.
    head: Vec<u8>,
    head_start: u64,
    /// `true` when the whole file is in `head` (v1): tensors are served from memory, in any
    /// order.
    in_memory: bool,
    /// File offset of the next byte handed out.
    pos: u64,
    /// File offset of the source's next byte (streamed variant).
    src_pos: u64,
    /// Next tensor index for `next_tensor`.
    next: usize,
    /// The tensor being read and its bytes not yet handed out.
    current: Option<(usize, u64)>,
}

/// Reads from `r` until `buf` holds `n` bytes (the file's first `n`).
fn fill<R: Read>(r: &mut R, buf: &mut Vec<u8>, n: u64, what: &str) -> Result<(), DumpFileError> {
    let have = buf.len() as u64;
    if have >= n {
        return Ok(());
    }
    let got = r
        .by_ref()
        .take(n - have)
        .read_to_end(buf)
        .map_err(|source| DumpFileError::Io {
            offset: buf.len() as u64,
            source,
        })?;
    if have + (got as u64) < n {
        return Err(DumpFileError::UnexpectedEof {
            offset: buf.len() as u64,
            reading: what.to_owned(),
        });
    }
    Ok(())
}

impl<R: Read> DumpReader<R> {
    /// Reads the header and message of a file of `file_len` bytes from `src` (positioned at
    /// its first byte), with the default [`Limits`].
    pub fn open(src: R, file_len: u64) -> Result<Self, DumpFileError> {
        Self::open_with(src, file_len, Limits::default())
    }

    /// [`open`](DumpReader::open) under `limits`.
    pub fn open_with(mut src: R, file_len: u64, limits: Limits) -> Result<Self, DumpFileError> {
        if file_len <= HEADER_LEN {
            return Err(DumpFileError::TooShort { file_len });
        }
        let mut head = Vec::new();
        fill(&mut src, &mut head, file_len.min(12), "header")?;
        let first = head[0];
        let (v2_error, fit) = match plan(&head, file_len, &limits)? {
            Plan::Binary { message_len } => {
                let end = HEADER_LEN + message_len;
                fill(&mut src, &mut head, end, "message")?;
                // end <= head.len() after fill.
                let msg = &head[HEADER_LEN as usize..end as usize];
                match message::decode(msg, HEADER_LEN, limits)
                    .and_then(|m| place_binary(m, message_len, file_len))
                {
                    Ok(header) => {
                        let src_pos = head.len() as u64;
                        head.drain(..end as usize);
                        return Ok(DumpReader {
                            src_pos,
                            src,
                            header,
                            head,
                            head_start: end,
                            in_memory: false,
                            pos: end,
                            next: 0,
                            current: None,
                        });
                    }
                    Err(e) => (e, true),
                }
            }
            Plan::InlineOnly { error } => (error, false),
        };
        match inline_allowed(first, file_len, &limits) {
            Ok(true) => {}
            Ok(false) => return Err(v2_error),
            Err(e) => return Err(pick_error(fit, first, v2_error, e)),
        }
        if let Err(e) = fill(&mut src, &mut head, file_len, "file") {
            return Err(pick_error(fit, first, v2_error, e));
        }
        let header = match message::decode(&head, 0, limits) {
            Ok(m) => place_inline(m, file_len).ok_or(v2_error)?,
            Err(v1_error) => return Err(pick_error(fit, first, v2_error, v1_error)),
        };
        Ok(DumpReader {
            src,
            header,
            head,
            head_start: 0,
            in_memory: true,
            pos: 0,
            src_pos: file_len,
            next: 0,
            current: None,
        })
    }

    /// The decoded header: the message's fields and every tensor's metadata.
    pub fn header(&self) -> &DumpHeader {
        &self.header
    }

    /// The header, giving up the reader.
    pub fn into_header(self) -> DumpHeader {
        self.header
    }

    /// The underlying reader.
    pub fn into_inner(self) -> R {
        self.src
    }

    /// File offset of the next byte [`read_chunk`](DumpReader::read_chunk) hands out.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The next tensor in payload order, skipping any unread bytes of the current one; `None`
    /// after the last. Its bytes then come from [`read_chunk`](DumpReader::read_chunk).
    pub fn next_tensor(&mut self) -> Result<Option<&TensorMeta>, DumpFileError> {
        let i = self.next;
        let Some(t) = self.header.tensors.get(i) else {
            self.current = None;
            return Ok(None);
        };
        let (offset, size) = (t.offset, t.size);
        if self.in_memory {
            self.pos = offset;
        } else {
            self.current = None;
            self.skip_to(offset, i)?;
        }
        self.current = Some((i, size));
        self.next = i + 1;
        Ok(self.header.tensors.get(i))
    }

    /// Reads the current tensor's next bytes into `buf`: returns how many (at most
    /// `buf.len()`, possibly fewer), 0 when the tensor is done or none is current. Ends the
    /// input early and you get [`DumpFileError::UnexpectedEof`] naming the tensor.
    pub fn read_chunk(&mut self, buf: &mut [u8]) -> Result<usize, DumpFileError> {
        let Some((i, left)) = self.current else {
            return Ok(0);
        };
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        if n == 0 {
            return Ok(0);
        }
        let got = self.read_some(&mut buf[..n], i)?;
        self.current = Some((i, left - got as u64));
        Ok(got)
    }

    /// Copies the rest of the current tensor's bytes to `out` through a 64 KiB buffer; returns
    /// how many were copied.
    pub fn copy_tensor<W: Write>(&mut self, out: &mut W) -> Result<u64, DumpFileError> {
        let mut buf = vec![0u8; 64 << 10];
        let mut total = 0u64;
        loop {
            let n = self.read_chunk(&mut buf)?;
            if n == 0 {
                return Ok(total);
            }
            out.write_all(&buf[..n])
                .map_err(|source| DumpFileError::Io {
                    offset: self.pos,
                    source,
                })?;
            total += n as u64;
        }
    }

    fn what(&self, i: usize) -> String {
        self.header
            .tensors
            .get(i)
            .map_or_else(|| "tensor data".to_owned(), |t| t.id().to_string())
    }

    /// Reads at most `buf.len()` bytes at `self.pos`, at least one.
    fn read_some(&mut self, buf: &mut [u8], i: usize) -> Result<usize, DumpFileError> {
        let head_end = self.head_start + self.head.len() as u64;
        if self.pos >= self.head_start && self.pos < head_end {
            // pos - head_start < head.len(), so both conversions are in range.
            let from = (self.pos - self.head_start) as usize;
            let avail = &self.head[from..];
            let n = avail.len().min(buf.len());
            buf[..n].copy_from_slice(&avail[..n]);
            self.pos += n as u64;
            if !self.in_memory && from + n == self.head.len() {
                // The streamed payload bytes read with the message are used up.
                self.head = Vec::new();
                self.head_start = self.pos;
            }
            return Ok(n);
        }
        if self.in_memory {
            return Err(DumpFileError::UnexpectedEof {
                offset: self.pos,
                reading: self.what(i),
            });
        }
        loop {
            match self.src.read(buf) {
                Ok(0) => {
                    return Err(DumpFileError::UnexpectedEof {
                        offset: self.pos,
                        reading: self.what(i),
                    });
                }
                Ok(n) => {
                    let n = n.min(buf.len());
                    self.pos += n as u64;
                    self.src_pos += n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(DumpFileError::Io {
                        offset: self.pos,
                        source,
                    });
                }
            }
        }
    }

    /// Skips forward to file offset `to` (streamed payloads come in increasing order).
    fn skip_to(&mut self, to: u64, i: usize) -> Result<(), DumpFileError> {
        let mut scratch = [0u8; 64 << 10];
        while self.pos < to {
            let n = usize::try_from(to - self.pos)
                .unwrap_or(usize::MAX)
                .min(scratch.len());
            self.read_some(&mut scratch[..n], i)?;
        }
        Ok(())
    }
}

impl<R: Read + Seek> DumpReader<R> {
    /// Makes tensor `i` (payload order) the current one by seeking, forwards or backwards,
    /// without reading the bytes in between; the next [`next_tensor`](DumpReader::next_tensor)
    /// gives tensor `i + 1`. `None` when there is no tensor `i`. The source must be positioned
    /// as [`open`](DumpReader::open) left it or by earlier calls (offsets are file offsets
    /// counted from where `open` started reading).
    pub fn seek_tensor(&mut self, i: usize) -> Result<Option<&TensorMeta>, DumpFileError> {
        let Some(t) = self.header.tensors.get(i) else {
            return Ok(None);
        };
        let (offset, size) = (t.offset, t.size);
        if !self.in_memory && offset != self.pos {
            let delta =
                i64::try_from(i128::from(offset) - i128::from(self.src_pos)).map_err(|_| {
                    DumpFileError::Io {
                        offset,
                        source: std::io::Error::other("seek distance does not fit an i64"),
                    }
                })?;
            self.src
                .seek(SeekFrom::Current(delta))
                .map_err(|source| DumpFileError::Io { offset, source })?;
            self.head = Vec::new();
            self.head_start = offset;
            self.src_pos = offset;
        }
        self.pos = offset;
        self.current = Some((i, size));
        self.next = i + 1;
        Ok(self.header.tensors.get(i))
    }
}
