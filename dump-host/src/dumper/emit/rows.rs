//! `statistic.csv` rows: statistics of host bytes (host semantics through the engine, or
//! Ascend device semantics when the plan asks for them), or a device's own statistics, appended
//! in one write each.

use std::{path::Path, sync::atomic::Ordering};

use dump_core::DType;
use dump_stats::{
    Hashes, TensorStats,
    device::{DeviceStatistics, StatsKind},
    engine::TensorRef as StatsTensor,
};

use super::{FILE_MODE, Owner};
use crate::dumper::Shared;

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
}

impl Shared {
    /// The row of host bytes `bytes` (`elems` elements), in the semantics the plan asks for.
    pub(super) fn stat_row(
        &self,
        dir: &Path,
        who: Owner<'_>,
        t: RowTensor<'_>,
        bytes: &[u8],
        elems: usize,
    ) -> Result<(), String> {
        let t = RowTensor {
            crc32: self
                .layout
                .wants_crc32()
                .then(|| dump_core::hash::crc32::crc32(bytes)),
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
            return self.append_row(dir, who, t, RowStats::Device(&stats));
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
        self.append_row(dir, who, t, RowStats::Host(&stats))
    }

    /// The row of statistics a device computed.
    pub(super) fn device_row(
        &self,
        dir: &Path,
        who: Owner<'_>,
        t: RowTensor<'_>,
        stats: DeviceStatistics,
    ) -> Result<(), String> {
        match stats {
            DeviceStatistics::Host(summary) => {
                let stats = TensorStats {
                    summary: Some(summary),
                    md5: None,
                    sha1: None,
                };
                self.append_row(dir, who, t, RowStats::Host(&stats))
            }
            DeviceStatistics::Device(d) => self.append_row(dir, who, t, RowStats::Device(&d)),
        }
    }

    /// Formats the row and appends it to the directory's `statistic.csv` (one write).
    pub(super) fn append_row(
        &self,
        dir: &Path,
        who: Owner<'_>,
        t: RowTensor<'_>,
        stats: RowStats<'_>,
    ) -> Result<(), String> {
        let row = self
            .layout
            .stat_row(
                crate::layout::RowTensor {
                    id: who.id(t.ts),
                    dtype: t.dtype,
                    shape: t.shape,
                    data_size: t.data_size as u64,
                    crc32: t.crc32,
                },
                &self.plan.categories,
                stats,
            )
            .map_err(|e| e.to_string())?;
        let Some(row) = row else {
            return Ok(());
        };
        if self.layout.per_kernel_entries() {
            // Gathered into the call's entry, counted when the entry is in dump.json. A
            // tensor of no call (a constant, a parameter) has no place in dump.json.
            if let Some(e) = who.entry {
                e.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(who.io, who.slot, row);
            }
            return Ok(());
        }
        let path = self.layout.statistic_csv(dir);
        match self.csv.append(&path, &self.csv_header, &row, FILE_MODE) {
            // Counted once it is in the file, never before.
            Ok(()) => {
                self.rows.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => self.writer.errors().record(path, e),
        }
        Ok(())
    }
}
