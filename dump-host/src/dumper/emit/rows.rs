//! `statistic.csv` rows: statistics of host bytes (host semantics through the engine, or
//! Ascend device semantics when the plan asks for them), or a device's own statistics, appended
//! in one write each.

use dump_core::DType;
use dump_stats::{
    Hashes, TensorStats,
    device::{DeviceStatistics, StatsKind},
    engine::TensorRef as StatsTensor,
};

use super::{Emit, Owner, To};

/// The statistics of one csv row: host semantics, or Ascend device semantics (spec §7).
pub(super) use crate::layout::RowValues as RowStats;

/// Where a row's tensor is and what it looks like.
#[derive(Clone, Copy)]
pub(super) struct RowTensor<'a> {
    pub(super) ts: u64,
    pub(super) dtype: DType,
    pub(super) shape: &'a [usize],
    /// Bytes of the tensor (the `Data Size` column).
    pub(super) data_size: usize,
    /// CRC-32 of the bytes (layouts that ask for it).
    pub(super) crc32: Option<u32>,
    /// XOR checksum of the bytes (layouts that ask for it).
    pub(super) xor64: Option<u64>,
}

impl Emit<'_> {
    /// The row of host bytes `bytes` (`elems` elements), in the semantics the plan asks for.
    pub(super) fn stat_row(
        &self,
        to: &To<'_>,
        who: Owner<'_>,
        t: RowTensor<'_>,
        bytes: &[u8],
        elems: usize,
    ) -> Result<(), String> {
        let layout = self.out.tree.layout();
        let t = RowTensor {
            crc32: layout
                .wants_crc32()
                .then(|| dump_core::hash::crc32::crc32(bytes)),
            xor64: layout
                .wants_xor64()
                .then(|| dump_core::hash::xor64::xor64(bytes)),
            ..t
        };
        if self.plan.stats_kind() == StatsKind::Device {
            // Device semantics (spec §7) computed on the host bytes: max/min/avg/l2norm only,
            // `null` for unsupported cells, avg/l2norm in f32 (high) or the source dtype (low).
            let Some(stats) =
                dump_stats::device_statistics(t.dtype, bytes, elems, self.plan.device_precision)
                    .map_err(|e| e.to_string())?
            else {
                return Ok(());
            };
            return self.append_row(to, who, t, RowStats::Device(&stats));
        }
        if t.dtype.is_complex() {
            return Ok(());
        }
        let stats = self
            .engine
            .summarize(
                StatsTensor::new(t.dtype, bytes, elems),
                Hashes::for_categories(&self.plan.categories),
            )
            .map_err(|e| e.to_string())?;
        if let Some(sm) = &stats.summary {
            self.saw(to, who, t.dtype, sm);
        }
        self.append_row(to, who, t, RowStats::Host(&stats))
    }

    /// The row of statistics a device computed.
    pub(super) fn device_row(
        &self,
        to: &To<'_>,
        who: Owner<'_>,
        t: RowTensor<'_>,
        stats: DeviceStatistics,
    ) -> Result<(), String> {
        match stats {
            DeviceStatistics::Host(summary) => {
                self.saw(to, who, t.dtype, &summary);
                let stats = TensorStats {
                    summary: Some(summary),
                    md5: None,
                    sha1: None,
                };
                self.append_row(to, who, t, RowStats::Host(&stats))
            }
            DeviceStatistics::Device(d) => {
                self.saw_device(to, who, t.dtype, &d);
                self.append_row(to, who, t, RowStats::Device(&d))
            }
        }
    }

    /// Formats the row and queues it for the directory's `statistic.csv` (written at the end
    /// of the step, see [`crate::writer::RowBatch`]).
    pub(super) fn append_row(
        &self,
        to: &To<'_>,
        who: Owner<'_>,
        t: RowTensor<'_>,
        stats: RowStats<'_>,
    ) -> Result<(), String> {
        let layout = self.out.tree.layout();
        let meta = crate::layout::RowTensor {
            id: who.id(t.ts),
            dtype: t.dtype,
            shape: t.shape,
            data_size: t.data_size as u64,
            crc32: t.crc32,
            xor64: t.xor64,
        };
        let categories = &self.plan.categories;
        let held = to.held.zip(self.recorder);
        if !layout.per_kernel_entries() && held.is_none() {
            // The common path: formatted straight into the step's pending rows for the
            // table (written at the end of the step), no `String` or path per row.
            let owned;
            let path = match to.step {
                Some((csv, _)) => csv,
                None => {
                    owned = layout.statistic_csv(to.dir);
                    owned.as_path()
                }
            };
            return self
                .out
                .tables
                .push_with(&self.out.tree, path, |text| {
                    layout.append_stat_row(text, meta, categories, stats)
                })
                .map_err(|e| e.to_string());
        }
        let Some(row) = layout
            .stat_row(meta, categories, stats)
            .map_err(|e| e.to_string())?
        else {
            return Ok(());
        };
        if layout.per_kernel_entries() {
            // Gathered into the call's entry, counted when the entry is in dump.json. A
            // tensor of no call (a constant, a parameter) has no place in dump.json.
            if let Some(e) = who.entry {
                e.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(who.io, who.slot, row);
            }
            return Ok(());
        }
        if let Some((rec, r)) = held {
            r.hold_row(rec, layout.statistic_csv(to.dir), row);
        }
        Ok(())
    }

    /// Device statistics (Ascend semantics) carry no NaN counts: a watched output whose max,
    /// min, avg or l2norm is NaN or infinite is noted with the counts those cells show (at
    /// least one of each kind seen).
    fn saw_device(&self, to: &To<'_>, who: Owner<'_>, dtype: DType, d: &dump_stats::DeviceStats) {
        use dump_stats::DeviceValue;
        let mut s = dump_core::Summary::EMPTY;
        for v in [d.max, d.min, d.avg, d.l2norm] {
            if let DeviceValue::Float(x) = v {
                if x.is_nan() {
                    s.nan = 1;
                } else if x == f64::INFINITY {
                    s.pos_inf = 1;
                } else if x == f64::NEG_INFINITY {
                    s.neg_inf = 1;
                }
            }
        }
        self.saw(to, who, dtype, &s);
    }
}
