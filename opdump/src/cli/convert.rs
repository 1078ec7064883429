//! `opdump convert PATH... --out DIR [--format NCHW|NHWC|ND] [--layout msaccucmp|mindspore]
//! [--stats] [--threads N]`: CANN dump files (MindSpore 1.x asynchronous dump, Ascend O2,
//! acl.json, torchair) to `.npy` files, msaccucmp's `convert` without the CANN toolkit.
//!
//! - PATHs are files or directories; directories are walked (symlinks not followed) for files
//!   named `{op_type}.{op_name}.{task}.{stream}.{timestamp}` (and the variants the CANN
//!   dialect of dump-read accepts). Files are converted in parallel, with a progress bar on a
//!   terminal.
//! - Every file is streamed: the header is parsed, then each payload is read with positioned
//!   reads of up to 2 MiB, the kernel asked for the next 8 MiB ahead of them (a dump on disk
//!   is read while the previous blocks convert) (device formats block by block: one `(n, c1)` of NC1HWC0, one matrix
//!   of FRACTAL_NZ, a band of output channels of FRACTAL_Z gathered from every block row, the
//!   whole tensor only for FRACTAL_Z_3D and C1HWNCoC0 with N > 1, at most 64 MiB), converted
//!   and written as it is read (one `write_all` per piece), so memory is bounded whatever the
//!   file's size. Payloads written as stored (no `--format`, buffers, workspaces) are copied
//!   file to file by the kernel (`copy_file_range`). With fewer files than threads, a tensor
//!   of 16 MiB or more is converted by several threads, each a range of its blocks written at
//!   its offset.
//! - Without `--format` the payloads are written as stored (device layout and shape), as
//!   msaccucmp's parse mode does. `--format NCHW` / `ND` converts NC1HWC0 (and `_C04`),
//!   NDC1HWC0, FRACTAL_Z, FRACTAL_Z_3D, C1HWNCoC0 and FRACTAL_NZ to the host layout of
//!   `original_shape` (and NHWC to NCHW for NCHW);
//!   `--format NHWC` converts to NCHW and then to channels-last. Formats without a converter
//!   are written in their device format, with a warning.
//! - `--layout msaccucmp` (default; spec §6): `B.{input|output}.{i}.npy`, with `--format`
//!   `B.{input|output}.{i}.{d0}x{d1}x….npy`; buffers `B.l1buffer.{i}.bin`, workspaces
//!   `B.space.{i}.bin`; overflow (Opdebug) files `B.output.{i}.json` (4-space indent). Names of
//!   255 characters or more become `uuid3(NAMESPACE_DNS, name)` (32 hex digits) plus the
//!   extension, with a line `new,old` in `DIR/mapping.csv`.
//! - `--layout mindspore`: MindSpore's tree `rank_{device}/{model or Net}/{model_id}/{step}/`
//!   (from the GE path), file names `{op_type}.{op_name}.{task}.{stream}.{ts}.{io}.{slot}.
//!   {format}.{dtype}.npy` (`DefaultFormat` when in the host layout) and a `statistic.csv` per
//!   directory, so `opdump inspect` / `compare` read the output.
//! - `--stats`: the `statistic.csv` rows only (no tensor files): `DIR/statistic.csv` for the
//!   msaccucmp layout, one per directory for the mindspore layout.
//!
//! Every output file (`.npy`, `.bin`, `.json`, `statistic.csv`, `mapping.csv`) is written
//! through dump-host's [`WholeFile`]: unnamed until whole, then linked into place, so a full
//! disk, a read-only directory or a SIGKILL leaves no partial or temporary file, an earlier
//! file of the same name stays until its replacement is whole, and a write error names the
//! output file. Files get `0o644` less the umask.
//!
//! A file that cannot be read (corrupt, truncated, a hostile length) is an error for that file
//! only, naming it and the byte offset; the others are converted. Exit code 2 if any file
//! failed, 0 otherwise. FLOAT8_E5M2 and FLOAT8_E4M3FN tensors are written widened to float32
//! (`<f4`, exact; msaccucmp and MindSpore's converters do the same). Tensors whose data type
//! has no workspace dtype (HIFLOAT8, FLOAT8_E8M0, QINT*, STRING, ...) are reported by name and
//! skipped.

use std::{
    collections::BTreeMap,
    fs::{self, File},
    io::{BufWriter, Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    sync::Mutex,
};

use dump_core::DType;
use dump_device_ascend::{
    Format,
    blocked::HostBlocks,
    convert::nhwc::nchw_to_nhwc,
    dumpfile::{DumpReader, OverflowReport, TensorKind, TensorMeta, is_opdebug_file},
};
use dump_host::writer::WholeFile;
use dump_npy::{CHUNK, IoSink, NpyLayout, NpyStream, WriteOptions, write_header};
use dump_read::{
    CannStream, CannTensor,
    dialect::{CannName, ge_position},
    par_map,
};
use dump_stats::{
    Hashes, StreamStats, TensorId,
    csv::{Io, RowMeta, data_size, header_string, row_string},
    names::{DTypeSpelling, TensorFileName, short_name},
};

use super::{
    outcome::{Failure, Outcome, Verdict},
    report::{
        output::{out_mode, write_whole},
        progress::Progress,
    },
    stats::default_categories,
};

/// Arguments of `opdump convert`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  opdump convert /dump/20260101120000/0 --out npy/                 # as stored, msaccucmp names
  opdump convert DIR --out npy/ --format NCHW                      # device formats to NCHW
  opdump convert DIR --out ms/ --format NCHW --layout mindspore    # then: opdump inspect ms/
  opdump convert DIR --out rows/ --stats                           # statistic.csv rows only

A corrupt or truncated file is an error for that file only (its byte offset is named); the \
exit code is then 2. Overflow (Opdebug) files become their JSON report.")]
pub struct Args {
    /// CANN dump files, or directories to walk for them.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The output directory (created).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Convert device formats (NC1HWC0, NC1HWC0_C04, NDC1HWC0, FRACTAL_Z, FRACTAL_Z_3D,
    /// C1HWNCoC0, FRACTAL_NZ; NHWC for NCHW) to this host layout, the shape of each tensor's
    /// original_shape; without it tensors are written as stored. Formats with no converter,
    /// or without an original_shape, are written as stored, with a warning.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<Target>,
    /// Output names and directories: msaccucmp's flat names, or MindSpore's tree with
    /// statistic.csv (readable by `opdump inspect` and `opdump compare`).
    #[arg(long, value_enum, default_value = "msaccucmp")]
    pub layout: Layout,
    /// Write only statistic.csv rows, no tensor files.
    #[arg(long)]
    pub stats: bool,
    /// Worker threads (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

/// The host layout `--format` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// NCHW for 4-D tensors, row-major otherwise.
    #[value(name = "NCHW")]
    Nchw,
    /// Channels last for 4-D tensors.
    #[value(name = "NHWC")]
    Nhwc,
    /// Row-major N-dimensional.
    #[value(name = "ND")]
    Nd,
}

/// The output layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    /// msaccucmp's names, all files in DIR.
    Msaccucmp,
    /// MindSpore's rank_N/{net}/{graph}/{iteration}/ tree with statistic.csv.
    Mindspore,
}

/// Names of this many characters or more are shortened (msaccucmp, spec §6).
const LONG_NAME: usize = 255;
/// The largest overflow block read into memory.
const MAX_OPDEBUG: u64 = 1 << 20;
/// The largest image (`C·H·W`) transposed to NHWC at once.
const MAX_IMAGE: usize = 64 << 20;

/// What one file gave.
#[derive(Default)]
struct Done {
    files: usize,
    bytes: u64,
    warnings: Vec<String>,
    /// statistic.csv rows per output directory.
    rows: Vec<(PathBuf, String)>,
}

/// Runs `convert`: each file's error on `err` as it is found, the summary on `out`; a
/// [`Failure::Invalid`] counting the files that failed, if any did.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Outcome {
    if let Err(e) = fs::create_dir_all(&args.out) {
        return Err(Failure::Invalid(format!(
            "{}: cannot create the output directory: {e}",
            args.out.display()
        )));
    }
    let mut files = Vec::new();
    let mut failed = 0usize;
    for p in &args.paths {
        match fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => walk(p, &mut files),
            Ok(m) if m.is_file() => files.push(p.clone()),
            Ok(_) => {
                let _ = writeln!(err, "error: {}: not a file or directory", p.display());
                failed += 1;
            }
            Err(e) => {
                let _ = writeln!(err, "error: {}: {e}", p.display());
                failed += 1;
            }
        }
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    // Fewer files than threads: the threads left over go into each file's large tensors.
    let inner = (threads / files.len().max(1)).max(1);
    let bar = Progress::new("convert", files.len(), true);
    let mapping = Mutex::new(Vec::<String>::new());
    let results = par_map(
        files.len(),
        threads,
        |i| convert_file(&files[i], args, &mapping, inner),
        &|done, _| bar.set(done),
    );
    bar.finish();
    let mut total = Done::default();
    for (f, r) in files.iter().zip(results) {
        match r {
            Some(Ok(d)) => {
                total.files += d.files;
                total.bytes += d.bytes;
                total.warnings.extend(d.warnings);
                total.rows.extend(d.rows);
            }
            Some(Err(m)) => {
                let _ = writeln!(err, "error: {}: {m}", f.display());
                failed += 1;
            }
            None => {
                let _ = writeln!(
                    err,
                    "error: {}: the worker converting it stopped",
                    f.display()
                );
                failed += 1;
            }
        }
    }
    for w in &total.warnings {
        let _ = writeln!(err, "warning: {w}");
    }
    if let Err(e) = write_tables(args, &total.rows, &mapping.into_inner().unwrap_or_default()) {
        let _ = writeln!(err, "error: {e}");
        failed += 1;
    }
    let _ = writeln!(
        out,
        "converted {} of {} files ({:.1} MiB written) into {}{}",
        total.files,
        files.len(),
        total.bytes as f64 / (1 << 20) as f64,
        args.out.display(),
        if failed > 0 {
            format!("; {failed} failed")
        } else {
            String::new()
        }
    );
    if failed > 0 {
        Err(Failure::Invalid(format!(
            "{failed} input{} could not be converted (each is named above)",
            if failed == 1 { "" } else { "s" }
        )))
    } else {
        Ok(Verdict::Clean)
    }
}

/// Regular files under `dir` named like CANN dump files (no symlinks followed), sorted.
fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut stack = vec![dir.to_path_buf()];
    let mut found = Vec::new();
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file()
                && e.file_name()
                    .to_str()
                    .is_some_and(|n| CannName::parse(n).is_some())
            {
                found.push(e.path());
            }
        }
    }
    found.sort();
    files.extend(found);
}

/// `uuid3(NAMESPACE_DNS, name)` as 32 lowercase hex digits (RFC 4122 §4.3, MD5).
pub fn uuid3_hex(name: &str) -> String {
    const DNS: [u8; 16] = [
        0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30,
        0xc8,
    ];
    let mut data = DNS.to_vec();
    data.extend_from_slice(name.as_bytes());
    let mut h = dump_core::hash::md5(&data);
    h[6] = (h[6] & 0x0f) | 0x30;
    h[8] = (h[8] & 0x3f) | 0x80;
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// The output name for `name` under msaccucmp's long-name rule.
fn msaccucmp_name(name: String, ext: &str, mapping: &Mutex<Vec<String>>) -> String {
    if name.chars().count() < LONG_NAME {
        return name;
    }
    let short = format!("{}{ext}", uuid3_hex(&name));
    if let Ok(mut m) = mapping.lock() {
        m.push(format!("{short},{name}"));
    }
    short
}

/// Where one file's outputs go, and under which names.
struct Place {
    dir: PathBuf,
    base: String,
    name: CannName,
    /// Threads for one large tensor of this file (more than 1 when there are fewer files
    /// than threads).
    threads: usize,
}

/// A tensor of at least this many bytes is converted by several threads at once (each a
/// range of its blocks, written at its offset) when threads are left over.
const PARALLEL_TENSOR: u64 = 16 << 20;

fn convert_file(
    path: &Path,
    args: &Args,
    mapping: &Mutex<Vec<String>>,
    threads: usize,
) -> Result<Done, String> {
    let base = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("the file name is not UTF-8")?
        .to_owned();
    let f = File::open(path).map_err(|e| e.to_string())?;
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    let header = DumpReader::open(std::io::BufReader::new(f), len)
        .map_err(|e| e.to_string())?
        .into_header();
    let name = CannName::parse(&base).unwrap_or(CannName {
        op_type: String::new(),
        op_name: base.clone(),
        task_id: 0,
        stream_id: 0,
        timestamp: 0,
    });
    let dir = match args.layout {
        Layout::Msaccucmp => args.out.clone(),
        Layout::Mindspore => {
            let parent = path.parent().unwrap_or(Path::new("."));
            let abs = fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
            let (dev, model, model_id, step) = ge_position(&abs);
            let net = if model.is_empty() {
                "Net".to_owned()
            } else {
                model
            };
            args.out
                .join(format!("rank_{dev}"))
                .join(net)
                .join(model_id.to_string())
                .join(step.to_string())
        }
    };
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let place = Place {
        dir,
        base,
        name,
        threads,
    };
    let mut done = Done {
        files: 1,
        ..Done::default()
    };
    if is_opdebug_file(&place.base) {
        return opdebug(path, &header.tensors, &place, args, mapping, done);
    }
    for t in &header.tensors {
        let (kind, io) = match t.kind {
            TensorKind::Input => ("input", Io::Input),
            TensorKind::Output => ("output", Io::Output),
            TensorKind::Buffer | TensorKind::Workspace => {
                if args.stats || args.layout == Layout::Mindspore {
                    continue;
                }
                let word = if t.kind == TensorKind::Buffer {
                    "l1buffer"
                } else {
                    "space"
                };
                let n = msaccucmp_name(
                    format!("{}.{word}.{}.bin", place.base, t.index),
                    ".bin",
                    mapping,
                );
                done.bytes += copy_raw(path, t, &place.dir.join(n))?;
                continue;
            }
        };
        let which = format!("{}: {kind}.{}", path.display(), t.index);
        let (tensor, warning) = match tensor_for(path, t, args.format) {
            Ok(x) => x,
            Err(m) => {
                done.warnings.push(format!("{which}: {m}"));
                continue;
            }
        };
        if let Some(w) = warning {
            done.warnings.push(format!("{which}: {w}"));
        }
        done.bytes += write_tensor(
            path,
            t.index,
            kind,
            io,
            &tensor,
            &place,
            args,
            mapping,
            &mut done.rows,
        )
        .map_err(|e| format!("{kind}.{}: {e}", t.index))?;
    }
    Ok(done)
}

/// The tensor to read and whether it ends transposed to NHWC: `(tensor, nhwc, warning)`.
fn tensor_for(
    path: &Path,
    t: &TensorMeta,
    target: Option<Target>,
) -> Result<((CannTensor, bool), Option<String>), String> {
    let Some(target) = target else {
        return CannTensor::from_meta(path, t, false).map(|(c, w)| ((c, false), w));
    };
    let (mut c, mut warning) = CannTensor::from_meta(path, t, true)?;
    let stored = t.format.format();
    // NHWC stored, NCHW asked: the one host-layout pair that moves elements.
    if target == Target::Nchw
        && stored == Some(Format::Nhwc)
        && let [n, h, w, ch] = c.device_shape[..]
    {
        c.to_host = Some(
            HostBlocks::new(
                Format::Nhwc,
                c.dtype,
                &c.device_shape,
                &[n, ch, h, w],
                MAX_IMAGE,
            )
            .map_err(|e| e.to_string())?,
        );
    }
    let host_nchw =
        c.to_host.is_some_and(|p| p.format() != Format::FractalNz) || stored == Some(Format::Nchw);
    let nhwc = target == Target::Nhwc && host_nchw && c.shape().len() == 4;
    if warning.is_none() && target != Target::Nd && stored.is_none() {
        warning = Some(format!("format {} kept", t.format));
    }
    Ok(((c, nhwc), warning))
}

/// Streams one tensor to its `.npy` (unless `--stats`) and its statistics row (for the
/// mindspore layout or `--stats`); returns the bytes written.
#[allow(clippy::too_many_arguments)]
fn write_tensor(
    path: &Path,
    slot: usize,
    kind: &str,
    io: Io,
    (c, nhwc): &(CannTensor, bool),
    place: &Place,
    args: &Args,
    mapping: &Mutex<Vec<String>>,
    rows: &mut Vec<(PathBuf, String)>,
) -> Result<u64, String> {
    let mut stream = CannStream::open(c).map_err(|e| e.reason())?;
    let dtype = c.dtype;
    let mut shape = stream.shape().to_vec();
    if *nhwc {
        shape = vec![shape[0], shape[2], shape[3], shape[1]];
    }
    let data_len = stream.data_len();
    let elems: usize = shape.iter().product();
    let converted = c.to_host.is_some();
    let id = TensorId {
        op_type: place.name.op_type.as_str(),
        op_name: place.name.op_name.as_str(),
        task_id: place.name.task_id,
        stream_id: place.name.stream_id,
        timestamp: place.name.timestamp,
        io,
        slot: slot as u32,
    };
    let want_rows = args.stats || args.layout == Layout::Mindspore;
    // Complex tensors get no statistics (and no row), as in MindSpore.
    let mut acc = if want_rows {
        StreamStats::new(dtype, elems, Hashes::NONE).ok()
    } else {
        None
    };
    let mut sink = if args.stats {
        None
    } else {
        let name = match args.layout {
            Layout::Msaccucmp => {
                let n = if args.format.is_some() {
                    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
                    format!("{}.{kind}.{slot}.{}.npy", place.base, dims.join("x"))
                } else {
                    format!("{}.{kind}.{slot}.npy", place.base)
                };
                msaccucmp_name(n, ".npy", mapping)
            }
            Layout::Mindspore => {
                let format = match (converted || *nhwc, c.format.name()) {
                    (true, _) => "DefaultFormat".to_owned(),
                    (false, Some("ND" | "NCHW")) => "DefaultFormat".to_owned(),
                    (false, Some(n)) => n.to_owned(),
                    (false, None) => format!("Format{}", c.format.0),
                };
                let long = TensorFileName {
                    id,
                    format: &format,
                    dtype,
                    spelling: DTypeSpelling::Cpu,
                }
                .render();
                if long.len() >= LONG_NAME {
                    let short = short_name(&long);
                    rows.push((place.dir.join("mapping.csv"), format!("{short},{long}")));
                    short
                } else {
                    long
                }
            }
        };
        Some(WholeFile::create(&place.dir.join(&name), out_mode()).map_err(|e| e.to_string())?)
    };
    // Each output error names the file being written; the input's errors name the input.
    let writing =
        |w: &WholeFile, e: &dyn std::fmt::Display| format!("writing {}: {e}", w.path().display());
    // Stored bytes written as they are, no statistics: the header, then the kernel copies
    // the payload file to file (copy_file_range), never through this process.
    if !*nhwc
        && acc.is_none()
        && stream.is_copy()
        && let Some(w) = sink.as_ref()
    {
        let layout = NpyLayout::new(dtype, &shape, data_len as usize, WriteOptions::default())
            .map_err(|e| e.to_string())?;
        if !layout.widens() {
            write_npy_header(w, &layout, &shape).map_err(|e| writing(w, &e))?;
            let mut from = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            from.seek(SeekFrom::Start(stream.offset()))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let copied = std::io::copy(&mut from.take(data_len), &mut w.file())
                .map_err(|e| writing(w, &e))?;
            if copied != data_len {
                return Err(format!(
                    "{}: the payload at byte {} ended after {copied} of {data_len} bytes",
                    path.display(),
                    stream.offset()
                ));
            }
            if let Some(w) = sink.take() {
                w.commit().map_err(|e| e.to_string())?;
            }
            return Ok(layout.file_len() as u64);
        }
    }
    // A large tensor and threads to spare: ranges of its blocks converted side by side, each
    // written at its offset (no statistics, no widening: the bytes are written as converted).
    if cfg!(unix)
        && place.threads > 1
        && !*nhwc
        && acc.is_none()
        && data_len >= PARALLEL_TENSOR
        && stream.blocks() > 1
        && let Some(w) = sink.as_ref()
    {
        let layout = NpyLayout::new(dtype, &shape, data_len as usize, WriteOptions::default())
            .map_err(|e| e.to_string())?;
        if !layout.widens() {
            write_npy_header(w, &layout, &shape).map_err(|e| writing(w, &e))?;
            let head = layout.header_len() as u64;
            convert_parallel(c, &stream, place.threads, w, head)?;
            if let Some(w) = sink.take() {
                w.commit().map_err(|e| e.to_string())?;
            }
            return Ok(layout.file_len() as u64);
        }
    }
    let mut scratch = vec![0u8; if sink.is_some() { CHUNK } else { 0 }];
    let mut buffered = sink
        .as_ref()
        .map(|w| BufWriter::with_capacity(CHUNK, w.file()));
    let mut npy = match buffered.as_mut() {
        Some(w) => Some(
            NpyStream::new(
                IoSink(w),
                dtype,
                &shape,
                data_len as usize,
                WriteOptions::default(),
                &mut scratch,
            )
            .map_err(|e| e.to_string())?,
        ),
        None => None,
    };
    let mut feed = |data: &[u8]| -> Result<(), String> {
        if let Some(a) = acc.as_mut() {
            a.update(data).map_err(|e| e.to_string())?;
        }
        if let (Some(w), Some(f)) = (npy.as_mut(), sink.as_ref()) {
            w.write(data).map_err(|e| writing(f, &e))?;
        }
        Ok(())
    };
    if *nhwc {
        let img = (data_len as usize) / shape[0].max(1);
        if img > MAX_IMAGE {
            return Err(format!(
                "one image is {img} bytes, over the {MAX_IMAGE}-byte limit for NHWC"
            ));
        }
        let [_, h, w, ch] = shape[..] else {
            unreachable!("rank 4 checked")
        };
        let elem = dtype.size().unwrap_or(1);
        let mut buf = vec![0u8; (img as u64).min(data_len) as usize];
        let mut moved = vec![0u8; buf.len()];
        let mut left = data_len;
        while left > 0 {
            let n = (left as usize).min(buf.len());
            stream.read_chunk(&mut buf[..n]).map_err(|e| e.reason())?;
            nchw_to_nhwc(&buf[..n], elem, [1, ch, h, w], &mut moved).map_err(|e| e.to_string())?;
            feed(&moved[..n])?;
            left -= n as u64;
        }
    } else {
        // Converted pieces as the stream hands them out (a few MiB), written with one
        // write_all each: no copy between the conversion and the file.
        while let Some(data) = stream.next_piece().map_err(|e| e.reason())? {
            feed(data)?;
        }
    }
    let mut written = 0u64;
    if let (Some(w), Some(f)) = (npy, sink.as_ref()) {
        written = w.finish().map_err(|e| writing(f, &e))? as u64;
    }
    if let (Some(mut b), Some(f)) = (buffered, sink.as_ref()) {
        b.flush().map_err(|e| writing(f, &e))?;
    }
    if let Some(w) = sink {
        w.commit().map_err(|e| e.to_string())?;
    }
    if let Some(a) = acc {
        let stats = a.finish().map_err(|e| e.to_string())?;
        let meta = RowMeta {
            id,
            data_size: data_size(dtype, elems).unwrap_or(0),
            dtype,
            shape: &shape,
        };
        if let Some(row) =
            row_string(&meta, &default_categories(), &stats).map_err(|e| e.to_string())?
        {
            let table = match args.layout {
                Layout::Msaccucmp => args.out.join("statistic.csv"),
                Layout::Mindspore => place.dir.join("statistic.csv"),
            };
            rows.push((table, row));
        }
    }
    let _ = path;
    Ok(written)
}

/// `threads` readers, each a contiguous range of `stream`'s blocks, convert the tensor `c`
/// and write their pieces into `out` at `head` plus the range's data offset.
fn convert_parallel(
    c: &CannTensor,
    stream: &CannStream,
    threads: usize,
    out: &WholeFile,
    head: u64,
) -> Result<(), String> {
    let blocks = stream.blocks();
    let per = blocks.div_ceil(threads.max(1));
    let ranges: Vec<(std::ops::Range<usize>, u64)> = (0..blocks)
        .step_by(per.max(1))
        .map(|a| (a..(a + per).min(blocks), head + stream.data_offset(a)))
        .collect();
    let one = |(r, at): (std::ops::Range<usize>, u64)| -> Result<(), String> {
        let mut s = CannStream::open_range(c, r).map_err(|e| e.reason())?;
        let mut at = at;
        while let Some(p) = s.next_piece().map_err(|e| e.reason())? {
            write_at(out.file(), p, at)
                .map_err(|e| format!("writing {}: {e}", out.path().display()))?;
            at += p.len() as u64;
        }
        Ok(())
    };
    std::thread::scope(|s| {
        let mut inline = Vec::new();
        let mut spawned = Vec::new();
        for (k, r) in ranges.into_iter().enumerate() {
            // The first range on this thread; the others on their own (inline if a thread
            // cannot be started).
            if k == 0 {
                inline.push(r);
                continue;
            }
            let one = &one;
            let rc = r.clone();
            match std::thread::Builder::new().spawn_scoped(s, move || one(rc)) {
                Ok(h) => spawned.push(h),
                Err(_) => inline.push(r),
            }
        }
        let mut result = inline.into_iter().try_for_each(&one);
        for h in spawned {
            let r = h
                .join()
                .unwrap_or_else(|_| Err("a conversion thread stopped".to_owned()));
            result = result.and(r);
        }
        result
    })
}

/// `buf` written at byte `at` of `f` (positioned: threads share the file).
fn write_at(f: &File, buf: &[u8], at: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(f, buf, at)
    }
    #[cfg(not(unix))]
    {
        let _ = (f, buf, at);
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "positioned writes are Unix-only here",
        ))
    }
}

/// A buffer or workspace payload copied as it is (by the kernel: copy_file_range).
fn copy_raw(path: &Path, t: &TensorMeta, to: &Path) -> Result<u64, String> {
    let in_err = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut from = File::open(path).map_err(in_err)?;
    let file_len = from.metadata().map_err(in_err)?.len();
    if t.offset.saturating_add(t.size) > file_len {
        return Err(format!(
            "payload at byte {} needs {} bytes but the file ends at byte {file_len} (truncated?)",
            t.offset, t.size
        ));
    }
    from.seek(SeekFrom::Start(t.offset)).map_err(in_err)?;
    let w = WholeFile::create(to, out_mode()).map_err(|e| e.to_string())?;
    let copied = std::io::copy(&mut from.take(t.size), &mut w.file())
        .map_err(|e| format!("writing {}: {e}", to.display()))?;
    if copied != t.size {
        return Err(format!(
            "payload at byte {} ended after {copied} of {} bytes",
            t.offset, t.size
        ));
    }
    w.commit().map_err(|e| e.to_string())?;
    Ok(t.size)
}

/// An overflow file: each output block decoded to msaccucmp's JSON.
fn opdebug(
    path: &Path,
    tensors: &[TensorMeta],
    place: &Place,
    args: &Args,
    mapping: &Mutex<Vec<String>>,
    mut done: Done,
) -> Result<Done, String> {
    for t in tensors.iter().filter(|t| t.kind == TensorKind::Output) {
        if t.size > MAX_OPDEBUG {
            return Err(format!(
                "output.{}: an overflow block of {} bytes at byte {} (at most {MAX_OPDEBUG})",
                t.index, t.size, t.offset
            ));
        }
        let c = CannTensor {
            path: path.to_path_buf(),
            offset: t.offset,
            size: t.size,
            dtype: DType::UInt8,
            format: t.format,
            device_shape: vec![t.size as usize],
            to_host: None,
        };
        let mut s = CannStream::open(&c).map_err(|e| e.reason())?;
        let mut block = vec![0u8; t.size as usize];
        s.read_chunk(&mut block).map_err(|e| e.reason())?;
        let report =
            OverflowReport::decode(&block).map_err(|e| format!("output.{}: {e}", t.index))?;
        if args.stats {
            continue;
        }
        let name = msaccucmp_name(
            format!("{}.output.{}.json", place.base, t.index),
            ".json",
            mapping,
        );
        let json = report.to_json(Some(4));
        write_whole(&place.dir.join(&name), json.as_bytes())?;
        done.bytes += json.len() as u64;
    }
    Ok(done)
}

/// statistic.csv tables (header first, rows in input order) and mapping.csv lines.
fn write_tables(args: &Args, rows: &[(PathBuf, String)], long: &[String]) -> Result<(), String> {
    let mut tables: BTreeMap<&Path, Vec<&str>> = BTreeMap::new();
    for (p, r) in rows {
        tables.entry(p).or_default().push(r);
    }
    let header = header_string(&default_categories());
    for (p, lines) in tables {
        let is_mapping = p.file_name().is_some_and(|n| n == "mapping.csv");
        let mut text = if is_mapping {
            String::new()
        } else {
            format!("{header}\n")
        };
        for l in lines {
            text.push_str(l);
            if !l.ends_with('\n') {
                text.push('\n');
            }
        }
        write_whole(p, text.as_bytes())?;
    }
    if !long.is_empty() {
        // Appended to an earlier run's lines, and replaced whole: a failure keeps the old file.
        let p = args.out.join("mapping.csv");
        let mut text = match fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(format!("{}: {e}", p.display())),
        };
        if text.last().is_some_and(|&b| b != b'\n') {
            text.push(b'\n');
        }
        for l in long {
            text.extend_from_slice(l.as_bytes());
            text.push(b'\n');
        }
        write_whole(&p, &text)?;
    }
    Ok(())
}

/// The `.npy` header of `layout` written at the start of `w` (one write).
fn write_npy_header(w: &WholeFile, layout: &NpyLayout, shape: &[usize]) -> std::io::Result<()> {
    let mut b = BufWriter::new(w.file());
    write_header(&mut IoSink(&mut b), layout.descr(), shape)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    b.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid3_matches_pythons() {
        // python3 -c "import uuid; print(uuid.uuid3(uuid.NAMESPACE_DNS, 'python.org').hex)"
        assert_eq!(uuid3_hex("python.org"), "6fa459eaee8a3ca4894edb77e160355e");
        let long = format!("{}.input.0.npy", "A".repeat(300));
        assert_eq!(uuid3_hex(&long), "b40965ba07963711b0496a0b83a0fae4");
    }
}
