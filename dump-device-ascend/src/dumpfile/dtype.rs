//! [`CannDType`]: the `OutputDataType` enum of CANN's `DumpData` message (spec §2.1), every
//! value by number, with its name and the workspace [`DType`] where one holds the same bytes.

use dump_core::DType;

/// A CANN `OutputDataType` value, kept by number so that values a newer CANN adds survive
/// decoding; [`name`](CannDType::name) and [`dtype`](CannDType::dtype) say what it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CannDType(pub i32);

/// `(value, name, workspace dtype, bits per element)`; the bits are given only where the spec's
/// name fixes them and are inferred from the name, not from a writer.
const TABLE: [(i32, &str, Option<DType>, Option<u32>); 43] = [
    (0, "UNDEFINED", None, None),
    (1, "FLOAT", Some(DType::Float32), Some(32)),
    (2, "FLOAT16", Some(DType::Float16), Some(16)),
    (3, "INT8", Some(DType::Int8), Some(8)),
    (4, "UINT8", Some(DType::UInt8), Some(8)),
    (5, "INT16", Some(DType::Int16), Some(16)),
    (6, "UINT16", Some(DType::UInt16), Some(16)),
    (7, "INT32", Some(DType::Int32), Some(32)),
    (8, "INT64", Some(DType::Int64), Some(64)),
    (9, "UINT32", Some(DType::UInt32), Some(32)),
    (10, "UINT64", Some(DType::UInt64), Some(64)),
    (11, "BOOL", Some(DType::Bool), Some(8)),
    (12, "DOUBLE", Some(DType::Float64), Some(64)),
    (13, "STRING", None, None),
    (14, "DUAL_SUB_INT8", None, None),
    (15, "DUAL_SUB_UINT8", None, None),
    (16, "COMPLEX64", Some(DType::Complex64), Some(64)),
    (17, "COMPLEX128", Some(DType::Complex128), Some(128)),
    (18, "QINT8", None, Some(8)),
    (19, "QINT16", None, Some(16)),
    (20, "QINT32", None, Some(32)),
    (21, "QUINT8", None, Some(8)),
    (22, "QUINT16", None, Some(16)),
    (23, "RESOURCE", None, None),
    (24, "STRING_REF", None, None),
    (25, "DUAL", None, None),
    (26, "VARIANT", None, None),
    (27, "BF16", Some(DType::BFloat16), Some(16)),
    (28, "INT4", Some(DType::Int4), Some(4)),
    (29, "UINT1", Some(DType::UInt1), Some(1)),
    (30, "INT2", None, Some(2)),
    (31, "UINT2", None, Some(2)),
    (32, "COMPLEX32", None, Some(32)),
    (33, "HIFLOAT8", None, Some(8)),
    (34, "FLOAT8_E5M2", Some(DType::Float8E5M2), Some(8)),
    (35, "FLOAT8_E4M3FN", Some(DType::Float8E4M3FN), Some(8)),
    (36, "FLOAT8_E8M0", None, Some(8)),
    (37, "FLOAT6_E3M2", None, Some(6)),
    (38, "FLOAT6_E2M3", None, Some(6)),
    (39, "FLOAT4_E2M1", None, Some(4)),
    (40, "FLOAT4_E1M2", None, Some(4)),
    (41, "HIFLOAT4", None, Some(4)),
    (42, "HIFLOAT4_SCALE", None, None),
];

impl CannDType {
    /// `UNDEFINED` (0): the protobuf default, and what buffers and workspaces have.
    pub const UNDEFINED: CannDType = CannDType(0);
    /// `FLOAT` (1): IEEE binary32.
    pub const FLOAT: CannDType = CannDType(1);
    /// `FLOAT16` (2).
    pub const FLOAT16: CannDType = CannDType(2);
    /// `UINT8` (4): also the dtype of the overflow (`Opdebug`) block.
    pub const UINT8: CannDType = CannDType(4);
    /// `BF16` (27).
    pub const BF16: CannDType = CannDType(27);
    /// `INT4` (28): two per byte, low nibble first (as `dump_core::DType::Int4`).
    pub const INT4: CannDType = CannDType(28);
    /// `UINT1` (29): eight per byte, most significant bit first (msaccucmp's `unpackbits`).
    pub const UINT1: CannDType = CannDType(29);

    /// Every value the spec names, in order (0 to 42).
    pub fn all() -> impl Iterator<Item = CannDType> {
        TABLE.iter().map(|t| CannDType(t.0))
    }

    fn entry(self) -> Option<&'static (i32, &'static str, Option<DType>, Option<u32>)> {
        usize::try_from(self.0).ok().and_then(|i| TABLE.get(i))
    }

    /// The spec's name (`FLOAT16`, `FLOAT8_E4M3FN`, ...), `None` for values it does not list.
    pub fn name(self) -> Option<&'static str> {
        self.entry().map(|e| e.1)
    }

    /// The workspace dtype with the same bytes, `None` where there is none (HIFLOAT8,
    /// FLOAT8_E8M0, the 6- and 4-bit floats, quantised and 2-bit integers, strings, ...): such
    /// tensors are reported by name, never reinterpreted. FLOAT8_E5M2 (34) and FLOAT8_E4M3FN
    /// (35) are `DType::Float8E5M2` / `DType::Float8E4M3FN`.
    pub fn dtype(self) -> Option<DType> {
        self.entry().and_then(|e| e.2)
    }

    /// Bits per element where the name fixes it (inferred from the name), else `None`.
    pub fn bits(self) -> Option<u32> {
        self.entry().and_then(|e| e.3)
    }

    /// The value `dtype` maps from (the inverse of [`dtype`](CannDType::dtype)).
    pub fn from_dtype(dtype: DType) -> CannDType {
        TABLE
            .iter()
            .find(|t| t.2 == Some(dtype))
            .map_or(CannDType::UNDEFINED, |t| CannDType(t.0))
    }
}

impl core::fmt::Display for CannDType {
    /// The name, or `OutputDataType(N)` for values the spec does not list.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "OutputDataType({})", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_dense_and_round_trips() {
        for (i, t) in TABLE.iter().enumerate() {
            assert_eq!(t.0 as usize, i);
        }
        for d in DType::ALL {
            if matches!(
                d,
                DType::UInt4 | DType::Float8E4M3FNUZ | DType::Float8E5M2FNUZ
            ) {
                // CANN's OutputDataType has no uint4 and no FNUZ float8.
                assert_eq!(CannDType::from_dtype(d), CannDType::UNDEFINED);
                continue;
            }
            assert_eq!(CannDType::from_dtype(d).dtype(), Some(d), "{d}");
            assert_eq!(CannDType::from_dtype(d).bits(), Some(d.bits()));
        }
        assert_eq!(CannDType(34).dtype(), Some(DType::Float8E5M2));
        assert_eq!(CannDType(35).dtype(), Some(DType::Float8E4M3FN));
        for refused in [33, 36] {
            assert_eq!(CannDType(refused).dtype(), None, "{}", CannDType(refused));
        }
        assert_eq!(CannDType(35).to_string(), "FLOAT8_E4M3FN");
        assert_eq!(CannDType(43).to_string(), "OutputDataType(43)");
        assert_eq!(CannDType(-1).name(), None);
        assert_eq!(CannDType::all().count(), 43);
    }
}
