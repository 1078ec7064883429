//! One pair measured: both files streamed together, chunk by chunk, through the fused pair
//! kernel (and the statistics kernels for a side whose row lacks statistics), or the rows'
//! statistics or digests compared when there are no files.

use std::path::Path;

use dump_core::{
    DType, Summary,
    compare::{PairAccumulator, PairMetrics, Tolerance},
    stats::Accumulator,
};

use super::{
    Divergence, PairOutcome, PairResult, PairRule, Tolerances,
    kinds::{is_view, kind_of},
};
use dump_npy::CHUNK;

/// Bytes measured at once from mapped files: both sides' blocks stay in a core's L2 cache
/// between the pair kernel and the statistics (a whole number of elements of any dtype).
#[cfg(target_os = "linux")]
const MAPPED_BLOCK: usize = 128 << 10;

use crate::{Dump, Error, Stats, TensorRecord, TensorSource, source::TensorStream};

/// Element-wise metrics of two tensor files (`.npy`, `.pt`, `.npz` members) of the same stored
/// dtype and shape (up to dimensions of size 1: `[1, 1, 384]` pairs with `[384]` element by
/// element), read in
/// lockstep chunks of [`CHUNK`] bytes (two buffers: memory is bounded whatever the size). With
/// `with_stats`, each side's statistics come from the same pass.
pub fn compare_files(
    a: &Path,
    b: &Path,
    tol: Tolerance,
    with_stats: bool,
) -> Result<(PairMetrics, Option<Summary>, Option<Summary>), Error> {
    compare_sources(
        &TensorSource::File(a.to_path_buf()),
        &TensorSource::File(b.to_path_buf()),
        tol,
        with_stats,
    )
}

/// [`compare_files`] for any two [`TensorSource`]s: `.npy` files, CANN payloads (streamed in
/// the host layout, device formats converted block by block), or one of each.
pub fn compare_sources(
    sa: &TensorSource,
    sb: &TensorSource,
    tol: Tolerance,
    with_stats: bool,
) -> Result<(PairMetrics, Option<Summary>, Option<Summary>), Error> {
    compare_sources_as(sa, sb, tol, with_stats, false)
}

/// [`compare_sources`]; with `any_shape`, shapes that differ beyond dimensions of size 1 but
/// hold as many elements are compared element by element in C order (a view's output, dumped
/// with another shape).
fn compare_sources_as(
    sa: &TensorSource,
    sb: &TensorSource,
    tol: Tolerance,
    with_stats: bool,
    any_shape: bool,
) -> Result<(PairMetrics, Option<Summary>, Option<Summary>), Error> {
    let (a, b) = (sa.path(), sb.path());
    let mut fa = TensorStream::open(sa)?;
    let mut fb = TensorStream::open(sb)?;
    // A CANN bf16 or float8 payload against an .npy that holds it widened to f32.
    match (fa.dtype(), fb.dtype()) {
        (DType::BFloat16 | DType::Float8E4M3FN | DType::Float8E5M2, DType::Float32) => {
            fa.widen_to_f32();
        }
        (DType::Float32, DType::BFloat16 | DType::Float8E4M3FN | DType::Float8E5M2) => {
            fb.widen_to_f32();
        }
        _ => {}
    }
    if fa.dtype() != fb.dtype() {
        return Err(mismatch(
            a,
            format!("stored dtypes differ: {} vs {}", fa.dtype(), fb.dtype()),
        ));
    }
    if fa.fortran_order() != fb.fortran_order() {
        return Err(mismatch(
            a,
            "memory orders differ (one file is Fortran-ordered): elements cannot be paired".into(),
        ));
    }
    let count = |s: &[usize]| s.iter().product::<usize>();
    let comparable = super::same_but_unit_dims(fa.shape(), fb.shape())
        || (any_shape && count(fa.shape()) == count(fb.shape()));
    if !comparable {
        return Err(mismatch(
            a,
            format!("shapes differ: {:?} vs {:?}", fa.shape(), fb.shape()),
        ));
    }
    let dtype = fa.dtype();
    let elems = fa.shape().iter().product();
    let core = |p: &Path, e: dump_core::Error| {
        Error::format(p, format!("cannot compare {dtype} data: {e}"))
    };
    let mut pair = PairAccumulator::new(dtype, elems, tol).map_err(|e| core(a, e))?;
    let mut sa = with_stats
        .then(|| Accumulator::new(dtype, elems))
        .transpose()
        .map_err(|e| core(a, e))?;
    let mut sb = with_stats
        .then(|| Accumulator::new(dtype, elems))
        .transpose()
        .map_err(|e| core(b, e))?;
    let len = fa.data_len();
    let fin = |s: Option<Accumulator>, p: &Path| -> Result<Option<Summary>, Error> {
        Ok(match s {
            Some(s) => s.finish().map_err(|e| core(p, e))?,
            None => None,
        })
    };
    // Two `.npy` files: their data mapped, not copied, and measured a block at a time while
    // it is in the core's cache (the pair kernel, then each side's statistics).
    #[cfg(target_os = "linux")]
    if let (Some((ha, pa, oa)), Some((hb, pb, ob))) = (fa.mappable(), fb.mappable())
        && let (Some(mut wa), Some(mut wb)) = (
            crate::mapped::Mapped::new(ha, pa, 0, oa, len),
            crate::mapped::Mapped::new(hb, pb, 1, ob, len),
        )
    {
        let mut left = len;
        while left > 0 {
            let n = (left as usize).min(MAPPED_BLOCK);
            let (x, y) = (wa.next(n)?, wb.next(n)?);
            pair.update(x, y).map_err(|e| core(a, e))?;
            if let Some(s) = sa.as_mut() {
                s.update(x).map_err(|e| core(a, e))?;
            }
            if let Some(s) = sb.as_mut() {
                s.update(y).map_err(|e| core(b, e))?;
            }
            if let Some(e) = wa.lost().or_else(|| wb.lost()) {
                return Err(e);
            }
            left -= n as u64;
        }
        let m = pair.finish().map_err(|e| core(a, e))?;
        return Ok((m, fin(sa, a)?, fin(sb, b)?));
    }
    let cap = (CHUNK as u64).min(len) as usize;
    let (mut ba, mut bb) = (vec![0u8; cap], vec![0u8; cap]);
    let mut left = len;
    while left > 0 {
        let n = (left as usize).min(cap);
        fa.read_chunk(&mut ba[..n])?;
        fb.read_chunk(&mut bb[..n])?;
        pair.update(&ba[..n], &bb[..n]).map_err(|e| core(a, e))?;
        if let Some(s) = sa.as_mut() {
            s.update(&ba[..n]).map_err(|e| core(a, e))?;
        }
        if let Some(s) = sb.as_mut() {
            s.update(&bb[..n]).map_err(|e| core(b, e))?;
        }
        left -= n as u64;
    }
    let m = pair.finish().map_err(|e| core(a, e))?;
    Ok((m, fin(sa, a)?, fin(sb, b)?))
}

fn mismatch(p: &Path, m: String) -> Error {
    Error::format(p, m)
}

/// `|x - y| / |y|` (0 when equal, +inf when only `y` is 0).
fn rel(x: f64, y: f64) -> f64 {
    if x == y || (x.is_nan() && y.is_nan()) {
        0.0
    } else {
        (x - y).abs() / y.abs()
    }
}

fn dtype_of(t: &TensorRecord) -> DType {
    t.dtype
}

/// Measures pair `(ia, ib)`.
pub(super) fn measure(
    a: &Dump,
    b: &Dump,
    ia: usize,
    ib: usize,
    rule: PairRule,
    tols: &Tolerances,
) -> PairResult {
    let (ta, tb) = (&a.tensors[ia], &b.tensors[ib]);
    let dtype = dtype_of(tb);
    // The reference's magnitude, for a tolerance that scales with it: from B's statistic row
    // (max and min). Without a row the dtype's fixed atol applies: a second pass over B's
    // file only to learn its magnitude would cost as much as the comparison.
    let magnitude = if tols.scales(dtype) && dtype.is_float() {
        tb.row_stats
            .as_ref()
            .and_then(|s| Some(s.max?.abs().max(s.min?.abs())))
    } else {
        None
    };
    let tolerance = tols.for_tensor(dtype, magnitude);
    let mut r = PairResult {
        a: ia,
        b: ib,
        rule,
        tolerance,
        outcome: PairOutcome::Mismatch(Divergence::NothingToCompare),
        stats_a: ta.row_stats.clone().unwrap_or_default(),
        stats_b: tb.row_stats.clone().unwrap_or_default(),
        reasons: Vec::new(),
        notes: Vec::new(),
    };
    // A side whose file could not be opened and that has no statistic row to fall back on:
    // nothing but its name is known (its shape is not), so the pair cannot be compared.
    let unreadable: Vec<String> = [("A", ta), ("B", tb)]
        .into_iter()
        .filter(|(_, t)| t.row_stats.is_none())
        .filter_map(|(side, t)| Some(format!("{side}: {}", t.unreadable.as_deref()?)))
        .collect();
    if !unreadable.is_empty() {
        let m = Divergence::Unreadable(unreadable.join("; "));
        r.reasons.push(m.clone());
        r.outcome = PairOutcome::Mismatch(m);
        return r;
    }
    if ta.dtype != tb.dtype {
        let m = Divergence::DTypes {
            a: ta.dtype,
            b: tb.dtype,
        };
        r.reasons.push(m.clone());
        r.outcome = PairOutcome::Mismatch(m);
        return r;
    }
    // A flatten or reshape on either side: its output is its input's elements in order,
    // whatever shape the dump recorded (MindSpore dumps Flatten's output with its input's).
    let view = ta.shape != tb.shape
        && !super::same_but_unit_dims(&ta.shape, &tb.shape)
        && (is_view(kind_of(&ta.id.op_type)) || is_view(kind_of(&tb.id.op_type)))
        && ta.elems().is_some()
        && ta.elems() == tb.elems();
    if ta.shape != tb.shape && super::same_but_unit_dims(&ta.shape, &tb.shape) {
        r.notes.push(super::Note::Reshaped {
            a: ta.shape.clone(),
            b: tb.shape.clone(),
        });
    } else if view {
        r.notes.push(super::Note::Viewed {
            a: ta.shape.clone(),
            b: tb.shape.clone(),
        });
    } else if ta.shape != tb.shape {
        // Also for pairs compared by their statistics alone: equal statistics do not make a
        // [6, 4] output the same as a [4, 6] one.
        let m = Divergence::Shapes {
            a: ta.shape.clone(),
            b: tb.shape.clone(),
        };
        r.reasons.push(m.clone());
        r.outcome = PairOutcome::Mismatch(m);
        return r;
    }
    if let (Some(fa), Some(fb)) = (&ta.source, &tb.source) {
        let with_stats = !(r.stats_a.is_complete() && r.stats_b.is_complete());
        match compare_sources_as(fa, fb, tolerance, with_stats, view) {
            Ok((m, sa, sb)) => {
                if let Some(s) = sa {
                    r.stats_a.fill_from(Stats::from_summary(&s));
                }
                if let Some(s) = sb {
                    r.stats_b.fill_from(Stats::from_summary(&s));
                }
                if m.nonfinite_mismatch > 0 {
                    r.reasons
                        .push(Divergence::NonfinitePositions(m.nonfinite_mismatch));
                }
                if m.not_close > 0 {
                    r.reasons.push(Divergence::NotClose {
                        not_close: m.not_close,
                        count: m.count,
                        tolerance,
                        max_abs: m.max_abs,
                        max_rel: m.max_rel,
                    });
                }
                r.outcome = PairOutcome::Elements(m);
            }
            Err(e) => {
                let m = Divergence::Unreadable(e.to_string());
                r.reasons.push(m.clone());
                r.outcome = PairOutcome::Mismatch(m);
            }
        }
        return r;
    }
    // Statistics (or digests) only: a side that has its file but no complete row gets its
    // statistics from the file.
    for (t, s) in [(ta, &mut r.stats_a), (tb, &mut r.stats_b)] {
        if t.source.is_some()
            && !s.is_complete()
            && let Ok(full) = t.stats(dump_stats::Hashes::NONE)
        {
            s.fill_from(full);
        }
    }
    let (sa, sb) = (&r.stats_a, &r.stats_b);
    let vals = |s: &Stats| [s.max, s.min, s.avg, s.l2norm];
    let mut rels = [None; 4];
    let names = ["max", "min", "avg", "l2norm"];
    let mut any = false;
    for (k, (x, y)) in vals(sa).into_iter().zip(vals(sb)).enumerate() {
        if let (Some(x), Some(y)) = (x, y) {
            any = true;
            rels[k] = Some(rel(x, y));
            let same = x == y || (x.is_nan() && y.is_nan());
            let bad_nonfinite = (x.is_finite() != y.is_finite()) || !(x.is_finite() || same);
            if bad_nonfinite
                || (x.is_finite() && (x - y).abs() > tolerance.atol + tolerance.rtol * y.abs())
            {
                r.reasons.push(Divergence::Statistic {
                    name: names[k],
                    a: x,
                    b: y,
                });
            }
        }
    }
    // Digests of the same kind on both sides: MD5, then SHA-1, then CRC-32 (msprobe's md5),
    // then msprobe's xor checksum.
    let digest = [
        (sa.md5.clone(), sb.md5.clone()),
        (sa.sha1.clone(), sb.sha1.clone()),
        (sa.crc32.clone(), sb.crc32.clone()),
        (sa.xor64.clone(), sb.xor64.clone()),
    ]
    .into_iter()
    .find_map(|p| match p {
        (Some(x), Some(y)) => Some((x, y)),
        _ => None,
    });
    if any {
        // Statistics decide; a digest that differs too is a divergence (a change the
        // statistics did not show).
        if let Some((x, y)) = digest
            && x != y
        {
            r.reasons.push(Divergence::Digests { a: x, b: y });
        }
        r.outcome = PairOutcome::Statistics { rel: rels };
        return r;
    }
    match digest {
        Some((x, y)) => {
            let equal = x == y;
            if !equal {
                r.reasons.push(Divergence::Digests { a: x, b: y });
            }
            r.outcome = PairOutcome::Digest { equal };
        }
        None => {
            let m = Divergence::NothingToCompare;
            r.reasons.push(m.clone());
            r.outcome = PairOutcome::Mismatch(m);
        }
    }
    r
}
