//! CANN's GE layout on the Dumper's side ([`crate::layout::GeLayout`] names the
//! directories): a kernel's tensors are gathered ([`GeKernel`]) and written when the kernel
//! ends, as one CANN dump file (`u64` message length, the `DumpData` message made by
//! dump-device-ascend's encoder, every input then every output payload) or, for
//! `dump_data: stats`, one statistics csv.
//!
//! Memory: the gathered copies of one kernel are held until it ends, then handed to the
//! writer threads as one job that waits for room in the writer's byte budget (so queued
//! kernels never hold more than the budget). A kernel whose gathered bytes would reach the
//! size the writer writes on the calling thread ([`WriterConfig::direct_write_bytes`], or the
//! whole budget, whichever is smaller) spills instead: its payloads go to a temporary file in
//! the kernel's directory (unnamed where the file system allows, so a crash leaves nothing
//! behind) as they are reported, and the dump file is assembled from it on the
//! calling thread at the kernel's end, in 1 MiB pieces. So a runtime thread holds at most that
//! size of copies besides the budget, whatever the kernel's size.
//!
//! [`WriterConfig::direct_write_bytes`]: crate::writer::WriterConfig::direct_write_bytes

use std::{
    borrow::Cow,
    fs::File,
    io::{Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    sync::Arc,
};

use dump_core::{DType, Summary};
use dump_device_ascend::dumpfile::{
    CannDType, CannFormat, Container, DumpHeader, TensorKind, TensorMeta, encode_message,
};
use dump_stats::device::Layout;

use super::{
    shared::Shared,
    tensor::{Source, TensorRef},
};
use crate::{
    Error,
    layout::{GeStats, Io, NAME_MAX, ge_file_name},
    writer::{FILE_MODE, WriteFailure, write_atomic},
};

/// The piece size payloads are copied from a spill file in.
const COPY_CHUNK: usize = 1 << 20;

/// One tensor of a kernel.
struct Gathered {
    io: Io,
    slot: u32,
    dtype: DType,
    data_type: CannDType,
    format: CannFormat,
    /// The stored (device) shape.
    shape: Vec<usize>,
    /// The logical (host) shape: `original_shape`.
    host_shape: Vec<usize>,
    size: u64,
    payload: Payload,
}

/// Where a gathered tensor's bytes (or statistics) are.
enum Payload {
    /// A copy in memory.
    Mem(Vec<u8>),
    /// At this offset of the kernel's spill file.
    Spilled(u64),
    /// `dump_data: stats`: its statistics (`None`: the dtype has none).
    Stats(Option<Summary>),
}

/// The spill file of a kernel too large to hold: unnamed where the file system allows, so a
/// crash leaves nothing behind; else a temporary name, removed when done.
struct Spill {
    file: File,
    /// What errors call it (the temporary name, or the label of an unnamed file).
    path: PathBuf,
    /// The temporary name to remove (`None`: the file is unnamed).
    named: Option<PathBuf>,
    len: u64,
}

/// A kernel's tensors, gathered until it ends.
#[derive(Default)]
pub(crate) struct GeKernel {
    tensors: Vec<Gathered>,
    /// Bytes of copies held in memory.
    held: usize,
    spill: Option<Spill>,
    /// A spill file could not be written: the kernel's file is not written (the failure is in
    /// the writer's log).
    failed: bool,
}

impl Drop for Spill {
    fn drop(&mut self) {
        if let Some(p) = &self.named {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The CANN format number of a format name (`DefaultFormat`, an empty name: ND).
fn cann_format(name: &str) -> Option<CannFormat> {
    match name {
        "" | "DefaultFormat" => Some(CannFormat::ND),
        n => CannFormat::from_name(n),
    }
}

fn elements(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

impl GeKernel {
    /// Gathers tensor `io` `slot` of kernel `kernel`, whose file goes to `dir`.
    pub(crate) fn add(
        &mut self,
        s: &Shared,
        dir: &Path,
        (kernel, io, slot): (&str, Io, u32),
        t: &TensorRef<'_>,
    ) -> Result<(), Error> {
        let bad = |message: String| Error::Tensor {
            kernel: kernel.to_owned(),
            io: io.as_str(),
            slot,
            message,
        };
        if self.tensors.iter().any(|g| g.io == io && g.slot == slot) {
            return Err(bad(
                "reported twice; a CANN dump file holds each input and output once".into(),
            ));
        }
        let (shape, host_shape, format_name, bytes): (&[usize], &[usize], &str, Cow<'_, [u8]>) =
            match t.source {
                Source::Device(d) => {
                    let (host, fmt) = match d.layout() {
                        Layout::Default => (d.shape(), t.format),
                        Layout::Device { format, host_shape } => (host_shape, format),
                    };
                    let len = elements(d.shape())
                        .and_then(|n| d.dtype().storage_bytes(n))
                        .ok_or_else(|| bad(format!("shape {:?} overflows", d.shape())))?;
                    let mut v = vec![0u8; len];
                    d.copy_to_host(&mut v)
                        .map_err(|e| bad(format!("device copy failed: {e}")))?;
                    (d.shape(), host, fmt, Cow::Owned(v))
                }
                _ => (t.shape, t.shape, t.format, t.contiguous().map_err(bad)?),
            };
        let dtype = t.dtype();
        let data_type = CannDType::from_dtype(dtype);
        if data_type.dtype() != Some(dtype) {
            return Err(bad(format!(
                "{dtype} has no CANN data type (OutputDataType); a CANN dump file cannot hold it"
            )));
        }
        let format = cann_format(format_name).ok_or_else(|| {
            bad(format!(
                "format {format_name:?} has no CANN number (OutputFormat); known: ND, NCHW, \
                 NHWC, NC1HWC0, FRACTAL_Z, FRACTAL_NZ, ..."
            ))
        })?;
        let size = bytes.len() as u64;
        let payload = match &s.plan.ge.as_ref().and_then(|g| g.stats.as_ref()) {
            Some(_) => {
                let n = elements(shape).unwrap_or(0);
                Payload::Stats(dump_core::stats::summarize(dtype, &bytes, n).ok().flatten())
            }
            None => self.keep(s, dir, bytes).map_err(bad)?,
        };
        self.tensors.push(Gathered {
            io,
            slot,
            dtype,
            data_type,
            format,
            shape: shape.to_vec(),
            host_shape: host_shape.to_vec(),
            size,
            payload,
        });
        Ok(())
    }

    /// Gathers statistics computed elsewhere (`dump_data: stats` only).
    pub(crate) fn add_summary(
        &mut self,
        (kernel, io, slot): (&str, Io, u32),
        (dtype, shape): (DType, &[usize]),
        summary: Summary,
        stats_mode: bool,
    ) -> Result<(), Error> {
        let bad = |message: String| Error::Tensor {
            kernel: kernel.to_owned(),
            io: io.as_str(),
            slot,
            message,
        };
        if !stats_mode {
            return Err(bad(
                "the GE layout's CANN dump file holds the tensor's bytes; precomputed \
                 statistics carry none (dump_data \"stats\" takes them)"
                    .into(),
            ));
        }
        if self.tensors.iter().any(|g| g.io == io && g.slot == slot) {
            return Err(bad(
                "reported twice; a CANN statistics csv holds each input and output once".into(),
            ));
        }
        let data_type = CannDType::from_dtype(dtype);
        if data_type.dtype() != Some(dtype) {
            return Err(bad(format!(
                "{dtype} has no CANN data type (OutputDataType)"
            )));
        }
        let size = elements(shape)
            .and_then(|n| dtype.storage_bytes(n))
            .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
        if summary.count != size_elems(shape) {
            return Err(bad(format!(
                "the summary counts {} elements, the shape {shape:?} holds {}",
                summary.count,
                size_elems(shape)
            )));
        }
        self.tensors.push(Gathered {
            io,
            slot,
            dtype,
            data_type,
            format: CannFormat::ND,
            shape: shape.to_vec(),
            host_shape: shape.to_vec(),
            size: size as u64,
            payload: Payload::Stats(Some(summary)),
        });
        Ok(())
    }

    /// Keeps `bytes`: a copy in memory, or in the spill file once the kernel is too large to
    /// hold.
    fn keep(&mut self, s: &Shared, dir: &Path, bytes: Cow<'_, [u8]>) -> Result<Payload, String> {
        let writer = s.out.files.writer();
        let total = self.held.saturating_add(bytes.len());
        // A synchronous writer writes every file here anyway: hold up to its budget.
        let too_large = if writer.is_sync() {
            total > writer.budget().limit()
        } else {
            writer.writes_direct(total)
        };
        let spill = self.spill.is_some() || too_large;
        if !spill || self.failed {
            if self.failed {
                return Ok(Payload::Spilled(0));
            }
            self.held = total;
            return Ok(Payload::Mem(bytes.into_owned()));
        }
        if self.spill.is_none() && self.start_spill(s, dir).is_err() {
            self.failed = true;
            return Ok(Payload::Spilled(0));
        }
        let Some(sp) = self.spill.as_mut() else {
            return Ok(Payload::Spilled(0));
        };
        let at = sp.len;
        match sp.file.write_all(&bytes) {
            Ok(()) => {
                sp.len += bytes.len() as u64;
                Ok(Payload::Spilled(at))
            }
            Err(e) => {
                writer.errors().record(sp.path.clone(), e);
                self.failed = true;
                Ok(Payload::Spilled(0))
            }
        }
    }

    /// Creates the spill file in `dir` and moves the copies held so far into it.
    fn start_spill(&mut self, s: &Shared, dir: &Path) -> Result<(), ()> {
        s.out.tree.ensure_dir(dir)?;
        let errors = s.out.files.writer().errors();
        let label = dir.join("(ge spill file)");
        let (file, named) = match crate::writer::create_scratch(dir, &label) {
            Ok(f) => f,
            Err(e) => {
                errors.record(label, e);
                return Err(());
            }
        };
        let path = named.clone().unwrap_or(label);
        let mut sp = Spill {
            file,
            path,
            named,
            len: 0,
        };
        for g in &mut self.tensors {
            if let Payload::Mem(b) = &g.payload {
                if let Err(e) = sp.file.write_all(b) {
                    errors.record(sp.path.clone(), e);
                    return Err(());
                }
                let n = b.len() as u64;
                g.payload = Payload::Spilled(sp.len);
                sp.len += n;
            }
        }
        self.held = 0;
        self.spill = Some(sp);
        Ok(())
    }

    /// Writes the kernel's file into `dir`: the CANN dump file (on a writer thread, or here
    /// from the spill file), or the statistics csv. Nothing for a kernel that reported no
    /// tensor. Failures go to the writer's log.
    pub(crate) fn finish(
        mut self,
        s: &Shared,
        dir: &Path,
        (op_type, op_name, task_id): (&str, &str, u32),
    ) {
        if self.tensors.is_empty() || self.failed || s.out.tree.ensure_dir(dir).is_err() {
            return;
        }
        // Inputs, then outputs, each by index: the payload order of a CANN file.
        self.tensors.sort_by_key(|g| (g.io != Io::Input, g.slot));
        let ts = s.out.tree.timestamp();
        let name = ge_file_name(op_type, op_name, task_id, 0, ts);
        let stats = s.plan.ge.as_ref().and_then(|g| g.stats.clone());
        let (file, long) = short_name(&name, if stats.is_some() { ".csv" } else { "" });
        let path = dir.join(&file);
        let writer = s.out.files.writer();
        let tally = Arc::clone(writer.written());
        let mapping = long.map(|l| (dir.join("mapping.csv"), format!("{file},{l}\n")));
        if let Some(stats) = stats {
            let text = csv(&stats, &self.tensors);
            let cost = text.len();
            writer.submit(
                cost,
                Box::new(move || {
                    write_atomic(&path, FILE_MODE, |w| w.write_all(text.as_bytes())).map_err(
                        |error| WriteFailure {
                            path: path.clone(),
                            error,
                        },
                    )?;
                    tally.add(text.len() as u64);
                    append_mapping(mapping)
                }),
            );
            return;
        }
        let header = header(op_name, ts, &self.tensors);
        let msg = encode_message(&header);
        let total = 8 + msg.len() as u64 + self.tensors.iter().map(|g| g.size).sum::<u64>();
        match self.spill.take() {
            None => {
                let payloads: Vec<Vec<u8>> = self
                    .tensors
                    .into_iter()
                    .map(|g| match g.payload {
                        Payload::Mem(b) => b,
                        _ => Vec::new(),
                    })
                    .collect();
                let cost = self.held + msg.len();
                writer.submit(
                    cost,
                    Box::new(move || {
                        write_atomic(&path, FILE_MODE, |w| {
                            w.write_all(&(msg.len() as u64).to_le_bytes())?;
                            w.write_all(&msg)?;
                            for p in &payloads {
                                w.write_all(p)?;
                            }
                            Ok(())
                        })
                        .map_err(|error| WriteFailure {
                            path: path.clone(),
                            error,
                        })?;
                        tally.add(total);
                        append_mapping(mapping)
                    }),
                );
            }
            Some(mut sp) => {
                let tensors = &self.tensors;
                writer.run_direct(|| {
                    write_atomic(&path, FILE_MODE, |w| {
                        w.write_all(&(msg.len() as u64).to_le_bytes())?;
                        w.write_all(&msg)?;
                        let mut buf = vec![0u8; COPY_CHUNK];
                        for g in tensors {
                            match &g.payload {
                                Payload::Mem(b) => w.write_all(b)?,
                                Payload::Spilled(at) => {
                                    sp.file.seek(SeekFrom::Start(*at))?;
                                    let mut left = g.size;
                                    while left > 0 {
                                        let n = left.min(COPY_CHUNK as u64) as usize;
                                        sp.file.read_exact(&mut buf[..n])?;
                                        w.write_all(&buf[..n])?;
                                        left -= n as u64;
                                    }
                                }
                                Payload::Stats(_) => {}
                            }
                        }
                        Ok(())
                    })
                    .map_err(|error| WriteFailure {
                        path: path.clone(),
                        error,
                    })?;
                    tally.add(total);
                    append_mapping(mapping)
                });
                // `sp` drops here: the spill file is removed.
            }
        }
    }
}

fn size_elems(shape: &[usize]) -> u64 {
    shape.iter().map(|&d| d as u64).product()
}

/// The `DumpData` message's header of the gathered tensors (sorted: inputs, outputs).
fn header(op_name: &str, ts: u64, tensors: &[Gathered]) -> DumpHeader {
    let inputs = tensors.iter().filter(|g| g.io == Io::Input).count();
    let metas = tensors
        .iter()
        .enumerate()
        .map(|(ordinal, g)| {
            let kind = match g.io {
                Io::Input => TensorKind::Input,
                Io::Output => TensorKind::Output,
            };
            TensorMeta {
                kind,
                // A file numbers tensors by position within their kind (no field holds the
                // index): a runtime reporting slots 0 and 2 only reads back as 0 and 1.
                index: if g.io == Io::Input {
                    ordinal
                } else {
                    ordinal - inputs
                },
                ordinal,
                data_type: g.data_type,
                format: g.format,
                sub_format: 0,
                shape: g.shape.iter().map(|&d| d as u64).collect(),
                original_shape: Some(g.host_shape.iter().map(|&d| d as u64).collect()),
                size: g.size,
                offset: 0,
                address: 0,
                address_offset: 0,
                arg_index: None,
                input_type: 0,
                buffer_type: 0,
                original_op: None,
                dim_range: Vec::new(),
            }
        })
        .collect();
    DumpHeader {
        container: Container::Binary { message_len: 0 },
        version: "2.0".into(),
        dump_time: ts,
        op_name: op_name.to_owned(),
        attrs: Vec::new(),
        dfx_message: String::new(),
        tensors: metas,
        file_len: 0,
        payload_end: 0,
    }
}

/// The statistics csv of the gathered tensors.
fn csv(stats: &GeStats, tensors: &[Gathered]) -> String {
    let mut text = stats.header();
    for g in tensors {
        let Payload::Stats(sm) = &g.payload else {
            continue;
        };
        let dt = match g.data_type.name() {
            Some(n) => format!("DT_{n}"),
            None => format!("DT_{}", g.data_type.0),
        };
        let fmt = g.format.name().unwrap_or("ND");
        text.push_str(&stats.row(
            (g.io, g.slot),
            (g.size, &dt, fmt),
            &g.host_shape,
            size_elems(&g.shape),
            sm.as_ref(),
            g.dtype,
        ));
    }
    text
}

/// The file name to write for `name` + `ext` and, when it is longer than the file system
/// allows, the long name it stands for: adump's scheme, a decimal hash listed in the
/// directory's `mapping.csv` (`hash,original`). The hash is FNV-1a 64 (adump's libstdc++
/// `std::hash` digits cannot be reproduced; readers only look the name up).
fn short_name(name: &str, ext: &str) -> (String, Option<String>) {
    let full = format!("{name}{ext}");
    if full.len() <= NAME_MAX {
        return (full, None);
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (format!("{h}{ext}"), Some(full))
}

/// Appends a `mapping.csv` line (one `write` of a short line on an `O_APPEND` file).
fn append_mapping(m: Option<(PathBuf, String)>) -> Result<(), WriteFailure> {
    let Some((path, line)) = m else { return Ok(()) };
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|error| WriteFailure { path, error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_hashed_and_mapped() {
        let (n, long) = short_name("Add.a.0.0.0000000000000001", "");
        assert_eq!((n.as_str(), long), ("Add.a.0.0.0000000000000001", None));
        let name = format!("Add.{}.0.0.0000000000000001", "x".repeat(300));
        let (n, long) = short_name(&name, ".csv");
        assert!(n.ends_with(".csv") && n.len() < 30, "{n}");
        assert!(
            n.trim_end_matches(".csv")
                .bytes()
                .all(|b| b.is_ascii_digit())
        );
        assert_eq!(long.as_deref(), Some(format!("{name}.csv").as_str()));
    }

    #[test]
    fn format_names() {
        assert_eq!(cann_format("DefaultFormat"), Some(CannFormat::ND));
        assert_eq!(cann_format("NC1HWC0"), Some(CannFormat::NC1HWC0));
        assert_eq!(cann_format("FRACTAL_NZ"), Some(CannFormat::FRACTAL_NZ));
        assert_eq!(cann_format("Blocked42"), None);
    }
}
