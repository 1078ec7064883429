//! `opdump stats FILE.npy... [--category NAME]... | [--all] [--no-header]`: `statistic.csv` rows for
//! `.npy` files that already exist, e.g. a tensor dump MindSpore made on CPU, where it refuses
//! to compute statistics. PyTorch `.pt` files (torch.save's zip, msprobe's tensor task) and
//! `.npz` members (`ARCHIVE.npz/NAME.npy`) are read the same way, streamed in place.
//!
//! For each file: the npy is read with `dump-npy`'s hardened reader, the statistics come from
//! `dump-stats`' engine and the row from its csv writer, so the output is byte-for-byte what the
//! Dumper writes into `statistic.csv` for the same tensor.
//!
//! Columns from the file name: a MindSpore-style name
//! `{op_type}.{op_name}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy`
//! (dtype spelled `Float32` or `float32`) fills Op Type, Op Name, Task ID, Stream ID, Timestamp,
//! IO and Slot (a `,` in a name becomes `_`, as in the Dumper's rows). A short name `opdump-{hex}.npy` is looked up in `mapping.csv` beside it. Any other
//! name gives neutral fields: Op Type empty, Op Name the file stem (with `/`, `\`, `.`, space
//! and `,` made `_`), Task/Stream/Timestamp/Slot `0` and IO `output`.
//!
//! Data Type: the file name's dtype when it is the stored one or one opdump widens for numpy
//! (`BFloat16` stored as `<f4`, `Int4` as `|i1`, `UInt1` as `|u1`); otherwise the npy descr's.
//! A bf16 tensor widened to `<f4` is narrowed back (exact: widening only appends zero bits), so
//! every column, md5 and sha1 included, is what the bf16 tensor itself gives; when a value is
//! not an exact bf16 the statistics are of the stored f32 values (a warning says so). Int4 and
//! UInt1 statistics are of the stored one-byte values (the same numbers); their md5/sha1 hash
//! the stored bytes, not the packed ones. Fortran-order data is hashed as stored.
//!
//! Columns: by default the 11 value columns (every distinct one but the digests), in
//! MindSpore's list order; `--all` adds md5 and MindSpore's hash:sha1 (serial digests: on a
//! single large file they cost about ten times the value columns, so they are asked for, as in
//! MindSpore's own `statistic_category`); `--category` picks any list.
//!
//! Files are streamed in bounded chunks (any size; memory stays a few MiB per core) and spread
//! over the cores, rows printed in command-line order. With md5 asked for and at least 4 files
//! per core, each core hashes up to 16 files at once in the lanes of a multi-buffer MD5 engine
//! ([`dump_read::summarize_npy_many`]; about 10x one MD5 stream per core with AVX-512), with
//! digests identical to one stream per file. An unreadable or invalid file is
//! reported on stderr with its path and skipped; the exit code is then 2. An empty tensor gets
//! no row (as in MindSpore) and a note on stderr.

use std::{
    io::Write,
    path::{Path, PathBuf},
};

use dump_core::DType;
use dump_read::{FileSummary, summarize_npy_many};
use dump_stats::{
    CategorySet, Hashes, TensorId,
    csv::{Io, RowMeta, data_size, header_string, row_string},
};

use dump_stats::names::{TensorFileName, sanitize};

use super::{
    outcome::{Failure, Outcome, Verdict},
    report::{
        csv,
        stats_report::{FileRow, StatsReport},
        text,
    },
};

/// Arguments of `opdump stats`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Columns Op Type .. Slot come from MindSpore-style file names \
({op_type}.{op_name}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy); \
other names give an empty Op Type, the file stem as Op Name and zeros. Data Type is the \
file name's dtype (bf16 widened to <f4 is reported and hashed as bfloat16), else the npy \
descr's. Files that cannot be read are reported on stderr and skipped (exit code 2)."
)]
pub struct Args {
    /// The .npy files (also PyTorch .pt files as torch.save and msprobe write them, and
    /// .npz members named ARCHIVE.npz/NAME.npy).
    #[arg(required = true, value_name = "FILE.npy")]
    pub files: Vec<PathBuf>,
    /// A statistic column, repeatable, in output order (default: the 11 value columns, every
    /// one but the digests md5 and hash:sha1): max, min, avg, count, "negative zero count",
    /// "positive zero count", "nan count", "negative inf count", "positive inf count",
    /// "zero count", md5, l2norm, hash:sha1 (also hash, hash:md5).
    #[arg(long = "category", value_name = "NAME", conflicts_with = "all")]
    pub categories: Vec<String>,
    /// All 13 distinct columns, the digests md5 and MindSpore's hash:sha1 included (MD5 and
    /// SHA-1 are serial within a file: on one large file they set the pace, about 10x slower
    /// than the value columns alone; many files are hashed together, up to 16 per core).
    #[arg(long)]
    pub all: bool,
    /// Print the statistic.csv header line first (default).
    #[arg(long, overrides_with = "no_header")]
    pub header: bool,
    /// Do not print the header line (to append rows to an existing statistic.csv).
    #[arg(long, overrides_with = "header")]
    pub no_header: bool,
}

/// Every distinct statistic column, in MindSpore's list order (`--all`).
pub fn all_categories() -> CategorySet {
    CategorySet::all()
}

/// The default columns: every distinct column but the digests (md5, hash:sha1), in MindSpore's
/// list order.
pub fn default_categories() -> CategorySet {
    let values = dump_stats::Category::ALL
        .iter()
        .filter(|c| !matches!(c, dump_stats::Category::Md5 | dump_stats::Category::Sha1))
        .map(|c| c.name());
    CategorySet::parse(values).unwrap_or_else(|_| CategorySet::all())
}

/// The long name recorded for short name `file` in `mapping.csv` of `dir` (lines
/// `{short},{long}`).
fn mapped_name(dir: &Path, file: &str) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("mapping.csv")).ok()?;
    text.lines()
        .filter_map(|l| l.split_once(','))
        .find(|(short, _)| *short == file)
        .map(|(_, long)| long.to_owned())
}

/// What a file's name says: the parsed MindSpore-style name (looked up in `mapping.csv` for a
/// short `opdump-{hex}.npy` name), or `None` for any other name.
struct Named {
    file: String,
    mapped: Option<String>,
}

impl Named {
    fn of(path: &Path) -> Named {
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mapped = if file.starts_with("opdump-") {
            mapped_name(path.parent().unwrap_or(Path::new(".")), &file)
        } else {
            None
        };
        Named { file, mapped }
    }

    fn parsed(&self) -> Option<TensorFileName<'_>> {
        TensorFileName::parse(self.mapped.as_deref().unwrap_or(&self.file))
    }
}

/// One file's row (`Ok(None)` for an empty tensor) and the reader's warning, from its
/// summary; or an error message.
fn file_row(
    named: &Named,
    sum: Result<FileSummary, dump_read::Error>,
    cats: &CategorySet,
) -> (Option<String>, Result<Option<String>, String>) {
    let sum = match sum {
        Ok(s) => s,
        Err(e) => return (None, Err(e.reason())),
    };
    let row = row_of(named, &sum, cats);
    (sum.warning, row)
}

/// The statistic.csv row of one summarised file (`None` for an empty tensor).
fn row_of(named: &Named, sum: &FileSummary, cats: &CategorySet) -> Result<Option<String>, String> {
    let parsed = named.parsed();
    let elems = sum.shape.iter().product::<usize>();
    let report_dtype = sum.dtype;
    let stats = &sum.stats;
    let size = data_size(report_dtype, elems).unwrap_or(0);
    let (op_type, op_name);
    let meta = match &parsed {
        Some(p) => {
            // As the Dumper's rows: a comma or a newline (legal in a file name) would split
            // the row. Identity for every name the Dumper or MindSpore writes.
            op_type = sanitize(p.id.op_type).replace(',', "_");
            op_name = sanitize(p.id.op_name).replace(',', "_");
            RowMeta {
                id: TensorId {
                    op_type: &op_type,
                    op_name: &op_name,
                    ..p.id
                },
                data_size: size,
                dtype: report_dtype,
                shape: &sum.shape,
            }
        }
        None => {
            let file = &named.file;
            let stem = file.strip_suffix(".npy").unwrap_or(file);
            op_name = sanitize(stem).replace(',', "_");
            RowMeta {
                id: TensorId {
                    op_type: "",
                    op_name: &op_name,
                    io: Io::Output,
                    ..TensorId::default()
                },
                data_size: size,
                dtype: report_dtype,
                shape: &sum.shape,
            }
        }
    };
    row_string(&meta, cats, stats).map_err(|e| e.to_string())
}

/// [`file_row`] of every file, in input order. The files are streamed in bounded chunks on
/// all cores by [`dump_read::summarize_npy_many`]: with md5 asked for, each thread hashes up
/// to 16 files at once in the lanes of a multi-buffer MD5 engine.
fn summarise_all(files: &[PathBuf], cats: &CategorySet) -> Vec<FileRow> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let names: Vec<Named> = files.iter().map(|p| Named::of(p)).collect();
    let jobs: Vec<(PathBuf, Option<DType>)> = files
        .iter()
        .zip(&names)
        .map(|(p, n)| (p.clone(), n.parsed().map(|t| t.dtype)))
        .collect();
    let sums = summarize_npy_many(&jobs, Hashes::for_categories(cats), threads);
    files
        .iter()
        .zip(&names)
        .zip(sums)
        .map(|((path, named), sum)| {
            let (warning, row) = file_row(named, sum, cats);
            FileRow {
                path: path.clone(),
                warning,
                row,
            }
        })
        .collect()
}

/// Runs `stats`: builds its [`StatsReport`] and renders it, the header and rows on `out`, each
/// file's warning, note or error on `err` in command-line order; a [`Failure::Invalid`]
/// counting the files that could not be summarised, if any.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Outcome {
    let cats = if args.all {
        all_categories()
    } else if args.categories.is_empty() {
        default_categories()
    } else {
        match CategorySet::parse(args.categories.iter().map(String::as_str)) {
            Ok(c) => c,
            Err(e) => {
                return Err(Failure::Invalid(format!("--category: {e}")));
            }
        }
    };
    // Files are summarised on all cores (each streamed in bounded chunks); rows and messages
    // come out in command-line order.
    let r = StatsReport {
        header: (!args.no_header).then(|| header_string(&cats)),
        files: summarise_all(&args.files, &cats),
    };
    // Terminal output is best effort: a closed pipe does not change the outcome.
    let _ = csv::stats(&r, out);
    let _ = text::stats_messages(&r, err);
    match r.failed() {
        0 => Ok(Verdict::Clean),
        failed => Err(Failure::Invalid(format!(
            "{failed} of {} file(s) could not be summarised",
            r.files.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_categories_are_the_13_distinct_columns() {
        let c = all_categories();
        assert_eq!(c.len(), 13);
        assert_eq!(c.as_slice(), &dump_stats::Category::ALL);
    }

    #[test]
    fn default_categories_are_the_11_value_columns_in_order() {
        use dump_stats::Category;
        let c = default_categories();
        let want: Vec<Category> = Category::ALL
            .into_iter()
            .filter(|c| !matches!(c, Category::Md5 | Category::Sha1))
            .collect();
        assert_eq!(c.len(), 11);
        assert_eq!(c.as_slice(), &want[..]);
    }
}
