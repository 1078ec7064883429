//! Ascend device-statistic semantics (spec §7) on the host: the "simulated backend".
//!
//! With `stat_calc_mode: "device"` MindSpore computes statistics with reduction kernels on the
//! NPU. This module reproduces what it writes, so users without an NPU can predict the
//! `statistic.csv` of a device run and the `acl` backend can be tested against it:
//!
//! - only `max`, `min`, `avg` and `l2norm` are computed; any other configured category is
//!   dropped, with **one** warning for the whole config ([`DevicePlan::warning`], returned as
//!   data: the Dumper logs it once);
//! - the dtype support table: max/min for bf16, f16, f32, f64, int8, uint8, int16, int32,
//!   int64, plus bool in `high` mode; avg for the same without bool; l2norm for bf16, f16 and
//!   f32. Unsupported cells are written `null` ([`DevicePlan::null_cells`] lists them so the
//!   Dumper can warn once per dtype);
//! - precision: `high` computes avg/l2norm in f32, `low` in the source dtype (which may
//!   overflow: fp16 `[40000; 3]` gives avg `inf`);
//! - value text: `%g` for floats, integers for integer results, `True`/`False` for bool.
//!
//! The numbers and texts come from `dump-stats` ([`dump_stats::device_statistics`] and
//! [`dump_stats::DeviceValue`]'s `Display`); this module adds the category plan and the backend
//! shape that the `acl` backend shares.

use crate::Error;
use dump_core::DType;
use dump_stats::{Category, CategorySet, DeviceStats, Precision, precision};

/// The device-statistics columns of a configured category list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevicePlan {
    /// max, min, avg and l2norm as configured, in config order: the CSV value columns.
    pub columns: CategorySet,
    /// The other configured categories, which device statistics drop.
    pub dropped: CategorySet,
}

impl DevicePlan {
    /// Splits a configured category list into kept columns and dropped categories.
    pub fn new(categories: &CategorySet) -> DevicePlan {
        let (columns, dropped) = categories.split_device();
        DevicePlan { columns, dropped }
    }

    /// The one warning for the dropped categories, `None` when nothing was dropped.
    pub fn warning(&self) -> Option<DroppedWarning<'_>> {
        (!self.dropped.is_empty()).then_some(DroppedWarning(&self.dropped))
    }

    /// The configured columns that will be `null` for `dtype` under `precision` (the device
    /// kernels do not support that pair).
    pub fn null_cells(&self, dtype: DType, precision: Precision) -> CategorySet {
        let mut out = CategorySet::new();
        for c in self.columns.iter() {
            if !supports(c, dtype, precision) {
                out.push(c);
            }
        }
        out
    }
}

/// `true` when the device kernel of `category` supports `dtype` under `precision` (spec §7).
/// Host-only categories give `false`.
pub const fn supports(category: Category, dtype: DType, precision: Precision) -> bool {
    match category {
        Category::Max | Category::Min => precision::device_supports_minmax(dtype, precision),
        Category::Avg => precision::device_supports_avg(dtype),
        Category::L2Norm => precision::device_supports_l2norm(dtype),
        _ => false,
    }
}

/// The warning for categories that device statistics drop; `Display` gives the log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DroppedWarning<'a>(pub &'a CategorySet);

impl core::fmt::Display for DroppedWarning<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(
            "device statistics (stat_calc_mode \"device\") support only max, min, avg and \
             l2norm; ignoring statistic_category",
        )?;
        for (i, c) in self.0.iter().enumerate() {
            write!(f, "{} \"{}\"", if i == 0 { "" } else { "," }, c.name())?;
        }
        Ok(())
    }
}

/// The simulated backend: device statistics computed on host bytes with the device's
/// semantics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Simulated {
    /// `device_stat_precision_mode`.
    pub precision: Precision,
}

impl Simulated {
    /// A simulated backend in `precision` mode.
    pub const fn new(precision: Precision) -> Simulated {
        Simulated { precision }
    }

    /// The four device statistics of `elems` elements of `dtype` in `data` (little-endian,
    /// row-major). `Ok(None)` for an empty tensor (MindSpore writes no row); unsupported cells
    /// are [`DeviceValue::Null`](dump_stats::DeviceValue::Null); every cell is `null` for a
    /// dtype no kernel supports (complex, unsigned 16–64-bit, packed types).
    pub fn statistics(
        &self,
        dtype: DType,
        data: &[u8],
        elems: usize,
    ) -> Result<Option<DeviceStats>, Error> {
        Ok(dump_stats::device_statistics(
            dtype,
            data,
            elems,
            self.precision,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dump_stats::csv::{Io, RowMeta, write_device_row};

    fn f16(v: &[f32]) -> Vec<u8> {
        v.iter()
            .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
            .collect()
    }

    /// The value part of a device statistic.csv row for fp16 data.
    fn row(p: Precision, cats: &[&str], v: &[f32]) -> String {
        let plan = DevicePlan::new(&CategorySet::parse(cats.iter().copied()).unwrap());
        let data = f16(v);
        let stats = Simulated::new(p)
            .statistics(DType::Float16, &data, v.len())
            .unwrap()
            .unwrap();
        let shape = [v.len()];
        let meta = RowMeta {
            id: dump_stats::TensorId {
                op_type: "Add",
                op_name: "Default_Add-op0",
                task_id: 0,
                stream_id: 0,
                timestamp: 1,
                io: Io::Input,
                slot: 0,
            },
            data_size: data.len() as u64,
            dtype: DType::Float16,
            shape: &shape,
        };
        let mut s = String::new();
        write_device_row(&mut s, &meta, &plan.columns, &stats).unwrap();
        s.split_once("\"(")
            .unwrap()
            .1
            .split_once("\",")
            .unwrap()
            .1
            .to_string()
    }

    const ALL4: [&str; 4] = ["max", "min", "avg", "l2norm"];

    /// spec §10 test_e2e_statistic: fp16 [40000 x3], [1,2,inf], all +inf, all -inf.
    #[test]
    fn spec_cases() {
        let inf = f32::INFINITY;
        assert_eq!(
            row(Precision::High, &ALL4, &[40000.0; 3]),
            "40000,40000,40000,69282,\n"
        );
        assert_eq!(
            row(Precision::Low, &ALL4, &[40000.0; 3]),
            "40000,40000,inf,inf,\n"
        );
        for p in [Precision::High, Precision::Low] {
            assert_eq!(row(p, &ALL4, &[1.0, 2.0, inf]), "inf,1,inf,inf,\n");
            assert_eq!(row(p, &ALL4, &[inf; 3]), "inf,inf,inf,inf,\n");
            assert_eq!(row(p, &ALL4, &[-inf; 3]), "-inf,-inf,-inf,inf,\n");
        }
        // Column order follows the config.
        assert_eq!(
            row(Precision::High, &["l2norm", "max"], &[1.0, 2.0, 3.0]),
            "3.74166,3,\n"
        );
    }

    #[test]
    fn one_warning_for_dropped_categories() {
        let cats = CategorySet::parse(["max", "count", "md5", "l2norm", "nan count"]).unwrap();
        let plan = DevicePlan::new(&cats);
        assert_eq!(plan.columns.as_slice(), &[Category::Max, Category::L2Norm]);
        assert_eq!(
            plan.warning().unwrap().to_string(),
            "device statistics (stat_calc_mode \"device\") support only max, min, avg and \
             l2norm; ignoring statistic_category \"count\", \"md5\", \"nan count\""
        );
        let plan = DevicePlan::new(&CategorySet::parse(ALL4).unwrap());
        assert!(plan.warning().is_none());
    }

    #[test]
    fn support_table_and_nulls() {
        let plan = DevicePlan::new(&CategorySet::parse(ALL4).unwrap());
        let nulls = |d, p| plan.null_cells(d, p).as_slice().to_vec();
        use Category::*;
        assert_eq!(nulls(DType::Float32, Precision::High), []);
        assert_eq!(nulls(DType::Float64, Precision::High), [L2Norm]);
        assert_eq!(nulls(DType::Int8, Precision::Low), [L2Norm]);
        assert_eq!(nulls(DType::Bool, Precision::High), [Avg, L2Norm]);
        assert_eq!(nulls(DType::Bool, Precision::Low), [Max, Min, Avg, L2Norm]);
        assert_eq!(
            nulls(DType::UInt16, Precision::High),
            [Max, Min, Avg, L2Norm]
        );
        assert!(!supports(Category::Count, DType::Float32, Precision::High));

        let sim = Simulated::new(Precision::High);
        let text = |d, data: &[u8], n| {
            let s = sim.statistics(d, data, n).unwrap().unwrap();
            [s.max, s.min, s.avg, s.l2norm].map(|v| v.to_string())
        };
        assert_eq!(
            text(DType::Bool, &[1, 0], 2),
            ["True", "False", "null", "null"]
        );
        assert_eq!(
            text(DType::UInt8, &[200, 7], 2),
            ["200", "7", "103.5", "null"]
        );
        assert_eq!(text(DType::Complex64, &[0; 8], 1), ["null"; 4]);
        assert_eq!(text(DType::Int4, &[0x21], 2), ["null"; 4]);
        // No device kernel takes float8 or uint4: every cell null, never a wrong value.
        for p in [Precision::High, Precision::Low] {
            let sim = Simulated::new(p);
            for (d, bytes) in [
                (DType::Float8E4M3FN, &[0x38u8, 0x7f][..]),
                (DType::Float8E5M2, &[0x3c, 0x7c][..]),
                (DType::UInt4, &[0x21][..]),
                (DType::Float8E4M3FNUZ, &[0x40, 0x80][..]),
                (DType::Float8E5M2FNUZ, &[0x40, 0x7f][..]),
            ] {
                let s = sim.statistics(d, bytes, 2).unwrap().unwrap();
                assert_eq!(
                    [s.max, s.min, s.avg, s.l2norm].map(|v| v.to_string()),
                    ["null"; 4],
                    "{d} {p:?}"
                );
            }
        }
        assert_eq!(sim.statistics(DType::Float32, &[], 0), Ok(None));
        assert!(matches!(
            sim.statistics(DType::Float32, &[0; 3], 1),
            Err(Error::Stats(_))
        ));
    }
}
