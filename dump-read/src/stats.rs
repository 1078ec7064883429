//! Statistics of a dumped tensor: from its `statistic.csv` row when the row has them, else
//! computed on the fly by streaming its `.npy` file through the statistics kernels.

use std::path::Path;

use dump_core::{DType, Summary};
use dump_stats::{Hashes, StreamStats, TensorStats};

use crate::{Error, TensorFile, digests::DigestThreads};

/// The statistics of one tensor as far as they are known: a `statistic.csv` row may hold only
/// some columns; computed statistics hold all but the digests not asked for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Elements.
    pub count: Option<u64>,
    /// Max value (NaN when the tensor holds a NaN, as in MindSpore's rows).
    pub max: Option<f64>,
    /// Min value.
    pub min: Option<f64>,
    /// Mean.
    pub avg: Option<f64>,
    /// L2 norm.
    pub l2norm: Option<f64>,
    /// NaN elements.
    pub nan: Option<u64>,
    /// `-inf` elements.
    pub neg_inf: Option<u64>,
    /// `+inf` elements.
    pub pos_inf: Option<u64>,
    /// `±0` elements.
    pub zero: Option<u64>,
    /// MD5 (lowercase hex).
    pub md5: Option<String>,
    /// MindSpore's SHA-1 (lowercase hex).
    pub sha1: Option<String>,
    /// CRC-32 of the raw bytes (8 lowercase hex digits): what msprobe's `summary_mode: md5`
    /// writes under its `md5` key.
    pub crc32: Option<String>,
    /// msprobe's `summary_mode: xor` checksum (`0x` and 16 lowercase hex digits: the XOR of
    /// the raw bytes' little-endian 64-bit words), written under its `md5` key.
    pub xor64: Option<String>,
}

impl Stats {
    /// Everything a [`Summary`] gives (and the digests of `t`).
    pub fn from_tensor_stats(t: &TensorStats) -> Stats {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let mut s = t
            .summary
            .as_ref()
            .map(Stats::from_summary)
            .unwrap_or_default();
        s.md5 = t.md5.map(|d| hex(&d));
        s.sha1 = t.sha1.map(|d| hex(&d));
        s
    }

    /// The statistics of a summary.
    pub fn from_summary(s: &Summary) -> Stats {
        Stats {
            count: Some(s.count),
            max: Some(s.max_value()),
            min: Some(s.min_value()),
            avg: Some(s.avg()),
            l2norm: Some(s.l2norm()),
            nan: Some(s.nan),
            neg_inf: Some(s.neg_inf),
            pos_inf: Some(s.pos_inf),
            zero: Some(s.zero),
            md5: None,
            sha1: None,
            crc32: None,
            xor64: None,
        }
    }

    /// Whether the tensor holds a NaN or an infinity: from the counts when known, else from
    /// max/min/avg/l2norm (a NaN or infinity shows in them: finite max and min mean a finite
    /// tensor); `None` when nothing tells.
    pub fn nonfinite(&self) -> Option<bool> {
        if let (Some(n), Some(p), Some(m)) = (self.nan, self.pos_inf, self.neg_inf) {
            return Some(n + p + m > 0);
        }
        let vals = [self.max, self.min, self.avg, self.l2norm];
        if vals.iter().any(|v| v.is_some_and(|v| !v.is_finite())) {
            return Some(true);
        }
        // A NaN makes max and min NaN (MindSpore's rows, opdump's Summary) and an infinity is
        // the max or the min: finite max and min mean every element is finite.
        match (self.max, self.min) {
            (Some(mx), Some(mn)) if mx.is_finite() && mn.is_finite() => Some(false),
            _ => None,
        }
    }

    /// `max(|max|, |min|)` when both are known.
    pub fn max_abs(&self) -> Option<f64> {
        Some(self.max?.abs().max(self.min?.abs()))
    }

    /// Whether the columns [`nonfinite`](Stats::nonfinite), growth and oddities need are all
    /// known (else the tensor's file is read).
    pub fn is_complete(&self) -> bool {
        self.count.is_some()
            && self.max.is_some()
            && self.min.is_some()
            && self.l2norm.is_some()
            && self.nan.is_some()
            && self.pos_inf.is_some()
            && self.neg_inf.is_some()
            && self.zero.is_some()
    }

    /// Fills every field `self` lacks from `other`.
    pub fn fill_from(&mut self, other: Stats) {
        macro_rules! fill {
            ($($f:ident),*) => {$( if self.$f.is_none() { self.$f = other.$f; } )*};
        }
        fill!(
            count, max, min, avg, l2norm, nan, neg_inf, pos_inf, zero, md5, sha1, crc32, xor64
        );
    }
}

/// Data bytes from which a file's digests are computed on threads of their own.
const THREADED_DIGESTS_MIN: u64 = 8 << 20;

/// A tensor file (`.npy`, `.pt`, `.npz` member) summarised by streaming.
#[derive(Clone, Debug)]
pub struct FileSummary {
    /// The dtype the statistics describe and a row reports (the name's dtype when the file
    /// holds it or opdump's widening of it, else the stored one).
    pub dtype: DType,
    /// The dtype stored in the file.
    pub stored: DType,
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Statistics and requested digests.
    pub stats: TensorStats,
    /// A warning about the file (name and contents disagree), if any.
    pub warning: Option<String>,
}

/// Whether the stored dtype is the one the name gives, or the one opdump widens it to.
pub fn name_dtype_fits(named: DType, stored: DType) -> bool {
    named == stored
        || matches!(
            (named, stored),
            (DType::BFloat16, DType::Float32)
                | (
                    DType::Float8E4M3FN
                        | DType::Float8E5M2
                        | DType::Float8E4M3FNUZ
                        | DType::Float8E5M2FNUZ,
                    DType::Float32
                )
                | (DType::Int4, DType::Int8)
                | (DType::UInt4 | DType::UInt1, DType::UInt8)
        )
}

/// Streams `path` through the statistics kernels (and the digests `hashes` asks for), in
/// chunks: memory stays bounded whatever the file size.
///
/// `named` is the dtype the file name gives. A bf16 tensor widened to `<f4` is narrowed back
/// chunk by chunk (exact: widening only appends zero bits), so statistics and digests are the
/// bf16 tensor's own; if a value is not an exact bf16 the file is summarised as the stored
/// f32 values, with a warning. Int4/UInt4/UInt1 widened to one byte per element and float8
/// widened to f32 are summarised as the stored values (the same values; their digests are of
/// the stored bytes).
pub fn summarize_npy(
    path: &Path,
    named: Option<DType>,
    hashes: Hashes,
) -> Result<FileSummary, Error> {
    let mut npy = TensorFile::open(path)?;
    let plan = Plan::of(&npy, named);
    if plan.narrow {
        if let Some(stats) = stream(&mut npy, DType::BFloat16, hashes, true)? {
            return Ok(done(npy, DType::BFloat16, stats, None));
        }
        let mut again = TensorFile::open(path)?;
        let stored = again.dtype;
        let stats = stream(&mut again, stored, hashes, false)?.unwrap_or_default();
        let w = format!(
            "{}: named bfloat16 but holds values that are not bfloat16; statistics are of the stored float32 values",
            path.display()
        );
        return Ok(done(again, stored, stats, Some(w)));
    }
    let stats = stream(&mut npy, plan.stream, hashes, false)?.unwrap_or_default();
    Ok(done(npy, plan.report, stats, plan.warning))
}

/// How a file's data is summarised, decided from its header and the name's dtype.
pub(crate) struct Plan {
    /// The dtype the data is summarised as (bf16 when `narrow`, else the stored one).
    pub(crate) stream: DType,
    /// The file holds f32 named bf16: each value is narrowed back (exactly, or the file is
    /// summarised again as f32).
    pub(crate) narrow: bool,
    /// The dtype the row reports.
    pub(crate) report: DType,
    /// Name and contents disagree.
    pub(crate) warning: Option<String>,
}

impl Plan {
    pub(crate) fn of(npy: &TensorFile, named: Option<DType>) -> Plan {
        let stored = npy.dtype;
        if named == Some(DType::BFloat16) && stored == DType::Float32 {
            return Plan {
                stream: DType::BFloat16,
                narrow: true,
                report: DType::BFloat16,
                warning: None,
            };
        }
        let (report, warning) = match named {
            Some(n) if name_dtype_fits(n, stored) => (n, None),
            Some(n) => (
                stored,
                Some(format!(
                    "{}: the name says {n} but the file holds {stored}; reporting {stored}",
                    npy.path().display(),
                )),
            ),
            None => (stored, None),
        };
        Plan {
            stream: stored,
            narrow: false,
            report,
            warning,
        }
    }
}

/// The bf16 values of f32 `chunk` (little-endian) appended to `out`; `false` (and `out`
/// partly filled) when a value is not an exact bf16 (low 16 bits not zero).
pub(crate) fn narrow_bf16(chunk: &[u8], out: &mut Vec<u8>) -> bool {
    for c in chunk.chunks_exact(4) {
        if c[0] != 0 || c[1] != 0 {
            return false;
        }
        out.extend_from_slice(&c[2..4]);
    }
    true
}

pub(crate) fn done(
    npy: TensorFile,
    dtype: DType,
    stats: TensorStats,
    warning: Option<String>,
) -> FileSummary {
    FileSummary {
        dtype,
        stored: npy.dtype,
        shape: npy.shape,
        stats,
        warning,
    }
}

/// One pass over the file's data as `dtype` through dump-stats' [`StreamStats`] (statistics
/// and digests over chunks, bit-identical to the Dumper's rows). `narrow`: the file holds f32
/// that are narrowed to bf16 per chunk; `Ok(None)` when a value is not an exact bf16.
fn stream(
    npy: &mut TensorFile,
    dtype: DType,
    hashes: Hashes,
    narrow: bool,
) -> Result<Option<TensorStats>, Error> {
    let elems = npy.elems();
    let path = npy.path().to_path_buf();
    let stats_err = |e: dump_stats::Error| {
        Error::format(
            &path,
            format!("cannot compute statistics of {dtype} data: {e}"),
        )
    };
    // Large files hash on their own threads (MD5 and SHA-1 are serial; side by side with the
    // statistics the slowest sets the pace); small ones inline, where a thread costs more.
    let mut digests = if npy.data_len >= THREADED_DIGESTS_MIN {
        DigestThreads::spawn(dtype, elems, hashes)
    } else {
        None
    };
    let inline = if digests.is_some() {
        Hashes::NONE
    } else {
        hashes
    };
    let mut acc = StreamStats::new(dtype, elems, inline).map_err(stats_err)?;
    let mut narrowed = Vec::new();
    let mut exact = true;
    npy.for_each_chunk(|chunk| {
        let bytes = if narrow {
            narrowed.clear();
            if !narrow_bf16(chunk, &mut narrowed) {
                exact = false;
                return Err(Error::format(&path, "not bf16"));
            }
            &narrowed[..]
        } else {
            chunk
        };
        if let Some(d) = digests.as_mut()
            && !d.feed(bytes)
        {
            return Err(Error::format(&path, "a digest thread stopped"));
        }
        acc.update(bytes).map_err(stats_err)
    })
    .or_else(|e| if exact { Err(e) } else { Ok(()) })?;
    if !exact {
        return Ok(None);
    }
    let mut stats = acc.finish().map_err(stats_err)?;
    if let Some(d) = digests {
        (stats.md5, stats.sha1) = d
            .finish()
            .ok_or_else(|| Error::format(&path, "a digest thread failed"))?;
    }
    Ok(Some(stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Above [`THREADED_DIGESTS_MIN`] the digests come from their threads: the same bits as the
    /// one-shot functions, for a plain f32 file and for bf16 widened to `<f4` (narrowed first).
    #[test]
    fn threaded_digests_equal_the_one_shot_ones() {
        let dir = std::env::temp_dir().join(format!("opdump-digests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let elems = (THREADED_DIGESTS_MIN as usize) / 4 + 12_345;
        let both = Hashes {
            md5: true,
            sha1: true,
        };
        // f32 values that are exact bf16 (low 16 bits zero), so one file serves both cases.
        let bf16: Vec<u8> = (0..elems as u32)
            .flat_map(|i| ((i.wrapping_mul(40_503) >> 3) as u16).to_le_bytes())
            .collect();
        let f32s: Vec<u8> = bf16
            .chunks_exact(2)
            .flat_map(|b| [0, 0, b[0], b[1]])
            .collect();
        let path = dir.join("t.npy");
        dump_npy::write_file(&path, DType::Float32, &[elems], &f32s, Default::default()).unwrap();
        for (named, data, dtype) in [
            (None, &f32s, DType::Float32),
            (Some(DType::BFloat16), &bf16, DType::BFloat16),
        ] {
            let got = summarize_npy(&path, named, both).unwrap();
            assert_eq!(got.dtype, dtype);
            assert_eq!(got.stats.md5, Some(dump_core::hash::md5(data)));
            assert_eq!(
                got.stats.sha1,
                Some(dump_core::hash::ms_sha1(dtype, data, elems))
            );
            let want = dump_core::stats::summarize(dtype, data, elems)
                .unwrap()
                .unwrap();
            assert_eq!(got.stats.summary.unwrap().max.to_bits(), want.max.to_bits());
            assert_eq!(got.stats.summary.unwrap().sum.to_bits(), want.sum.to_bits());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
