//! A device tensor streamed: the device hands over chunks
//! ([`DeviceTensor::copy_chunks`]; CUDA: pinned buffers, the next chunk copying while this one
//! is consumed) that feed the statistics and digests ([`StreamStats`]) and the `.npy` file
//! ([`NpyStream`], which keeps split bf16 elements and widens int4 nibbles and uint1 bits on the
//! way) on the caller's thread, so no host copy of the whole tensor is held. The row and the
//! file equal the copy path's bit for bit, however the device cuts the chunks.

use dump_npy::{IoSink, NpyStream};
use dump_stats::{
    Hashes, StreamStats,
    device::{DeviceError, DeviceTensor},
};

use super::{DeviceView, Emit, Owner, To, rows::RowStats, rows::RowTensor};
use crate::{
    Error,
    dumper::tensor_files::NpyOut,
    writer::{FILE_MODE, WriteFailure, write_atomic},
};

/// Bytes of the buffer bf16, int4 and uint1 are widened through (one `write` each).
const WIDEN_SCRATCH: usize = 1 << 20;

impl Emit<'_> {
    /// Streams `v` (`elems` elements, `len` bytes) into its file and, when statistics are
    /// saved, its row. A device failure is the tensor's error and leaves no file.
    pub(super) fn stream(
        &self,
        to: &To<'_>,
        who: Owner<'_>,
        v: &DeviceView<'_>,
        elems: usize,
        len: usize,
    ) -> Result<(), Error> {
        let bad = |message: String| who.error(message);
        let p = &self.plan;
        let ts = self.out.tree.timestamp();
        let name = self.out.tree.tensor_file(who.id(ts), v.format, v.dtype);
        if self.ensure(to).is_err() {
            return Ok(()); // recorded; returned at step end / close
        }
        let files = &self.out.files;
        let npy = files.prepare(&self.out.tables, to.dir, name, (v.dtype, v.shape), len)?;
        let rows = p.saved_data.statistics();
        // Statistics are also computed (without a row) when the output is watched.
        let mut stats = if rows || self.watches(who, v.dtype) {
            let hashes = if rows {
                Hashes::for_categories(&p.categories)
            } else {
                Hashes::default()
            };
            Some(StreamStats::new(v.dtype, elems, hashes).map_err(|e| bad(e.to_string()))?)
        } else {
            None
        };
        let want_stats = stats.is_some();
        // msprobe's digests, from the same chunks (the row's `md5`).
        let layout = self.out.tree.layout();
        let mut crc = (rows && layout.wants_crc32()).then(dump_core::hash::crc32::Crc32::new);
        let mut xor = (rows && layout.wants_xor64()).then(dump_core::hash::xor64::Xor64::new);
        let mut feed = |chunk: &[u8]| -> Result<(), DeviceError> {
            if let Some(c) = crc.as_mut() {
                c.update(chunk);
            }
            if let Some(x) = xor.as_mut() {
                x.update(chunk);
            }
            match stats.as_mut() {
                Some(s) => Ok(s.update(chunk)?),
                None => Ok(()),
            }
        };
        let mut device_error = None;
        match npy {
            Some(out) => files.writer().run_direct(|| {
                let written = write_atomic(&out.path, FILE_MODE, |f| {
                    stream_npy(f, &out, v.device, len, &mut feed).map_err(|e| match e {
                        StreamError::Write(e) => e,
                        StreamError::Source(e) => {
                            device_error = Some(e);
                            std::io::Error::other("the device copy failed")
                        }
                    })
                });
                match written {
                    // A device failure is the tensor's error (below), not a write failure.
                    Err(_) if device_error.is_some() => Ok(()),
                    Ok(()) => {
                        files.writer().written().add(out.file_len);
                        Ok(())
                    }
                    r => r.map_err(|error| WriteFailure {
                        path: out.path.clone(),
                        error,
                    }),
                }
            }),
            // The disk budget refused the file: the row still needs the statistics.
            None if want_stats => device_error = v.device.copy_chunks(&mut feed).err(),
            None => {}
        }
        if let Some(e) = device_error {
            return Err(bad(format!("device copy failed: {e}")));
        }
        let Some(stats) = stats else {
            return Ok(());
        };
        let t = RowTensor {
            ts,
            dtype: v.dtype,
            shape: v.shape,
            data_size: len,
            crc32: crc.map(|c| c.finish()),
            xor64: xor.map(|x| x.finish()),
        };
        let row = stats.finish().map_err(|e| e.to_string()).and_then(|s| {
            if let Some(sm) = &s.summary {
                self.saw(to, who, v.dtype, sm);
            }
            match rows {
                true => self.append_row(to, who, t, RowStats::Host(&s)),
                false => Ok(()),
            }
        });
        row.map_err(bad)
    }
}

/// Why [`stream_npy`] stopped.
enum StreamError {
    /// Writing the file failed.
    Write(std::io::Error),
    /// The device (or the statistics fed from it) failed.
    Source(DeviceError),
}

/// Writes `out`'s header, then the tensor's `len` bytes as `d` hands them over (widened where
/// the options say so), each chunk fed to `feed` first. Every chunk is consumed even after a
/// write error, so that the statistics still see the whole tensor; the first write error is
/// returned at the end.
fn stream_npy(
    f: &mut dyn std::io::Write,
    out: &NpyOut,
    d: &dyn DeviceTensor,
    len: usize,
    feed: &mut dyn FnMut(&[u8]) -> Result<(), DeviceError>,
) -> Result<(), StreamError> {
    let layout = dump_npy::NpyLayout::new(out.dtype, &out.shape, len, out.opts)
        .map_err(|e| StreamError::Write(std::io::Error::other(e.to_string())))?;
    let mut scratch = vec![0u8; if layout.widens() { WIDEN_SCRATCH } else { 0 }];
    let mut w = NpyStream::new(
        IoSink(f),
        out.dtype,
        &out.shape,
        len,
        out.opts,
        &mut scratch,
    )
    .map_err(StreamError::Write)?;
    let mut write_error = None;
    d.copy_chunks(&mut |chunk| {
        feed(chunk)?;
        if write_error.is_none() {
            write_error = w.write(chunk).err();
        }
        Ok(())
    })
    .map_err(StreamError::Source)?;
    if let Some(e) = write_error {
        return Err(StreamError::Write(e));
    }
    w.finish().map(|_| ()).map_err(StreamError::Write)
}
