//! Rows of statistics computed elsewhere — a device agent's [`Summary`] and MD5 — written with
//! the same row code as host bytes ([`Emit::append_row`]), so a row made from a tensor's
//! summary is byte-identical to the row the Dumper writes for the tensor itself (timestamps
//! aside: each row gets the Dumper's own).

use dump_core::{DType, Summary};
use dump_stats::{TensorStats, device::StatsKind};

use super::{Emit, Owner, RowStats, RowTensor, To};
use crate::Error;

impl Emit<'_> {
    /// The row of a tensor of `dtype` and `shape` whose statistics are `summary` (and `md5` of
    /// its bytes, when known). No row for an empty or complex tensor (as for host bytes); an
    /// error when the plan asks for something the summary cannot give.
    pub(crate) fn emit_summary(
        &self,
        to: &To<'_>,
        who: Owner<'_>,
        (dtype, shape): (DType, &[usize]),
        summary: Summary,
        md5: Option<[u8; 16]>,
    ) -> Result<(), Error> {
        let elems = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| who.error(format!("shape {shape:?} overflows")))?;
        if elems == 0 || dtype.is_complex() {
            return Ok(());
        }
        let p = &self.plan;
        if !p.saved_data.statistics() {
            return Err(who.error(
                "saved_data \"tensor\" asks for .npy files, which precomputed statistics cannot \
                 make; use saved_data \"statistic\" (or \"full\": rows only)"
                    .to_owned(),
            ));
        }
        if p.stats_kind() == StatsKind::Device {
            return Err(who.error(
                "stat_calc_mode \"device\" rows (Ascend device semantics) are computed from the \
                 tensor's bytes; precomputed statistics give host rows only (use stat_calc_mode \
                 \"host\")"
                    .to_owned(),
            ));
        }
        if p.categories.needs_sha1() {
            return Err(who.error(
                "statistic_category \"hash:sha1\" (\"sha1\") needs the tensor's bytes; a precomputed summary \
                 carries at most an MD5"
                    .to_owned(),
            ));
        }
        if p.categories.needs_md5() && md5.is_none() {
            return Err(who.error(
                "statistic_category \"md5\" is configured but this tensor's statistics came \
                 without an MD5"
                    .to_owned(),
            ));
        }
        if summary.count != elems as u64 {
            return Err(who.error(format!(
                "the summary counts {} elements but shape {shape:?} holds {elems}",
                summary.count
            )));
        }
        let data_size = dtype
            .storage_bytes(elems)
            .ok_or_else(|| who.error(format!("shape {shape:?} overflows")))?;
        self.saw(to, who, dtype, &summary);
        if self.ensure(to).is_err() {
            return Ok(()); // recorded; returned at step end / close
        }
        let t = RowTensor {
            ts: self.out.tree.timestamp(),
            dtype,
            shape,
            data_size,
            crc32: None,
            xor64: None,
        };
        let stats = TensorStats {
            summary: Some(summary),
            md5,
            sha1: None,
        };
        self.append_row(to, who, t, RowStats::Host(&stats))
            .map_err(|m| who.error(m))
    }
}
