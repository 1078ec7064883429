//! [`DType`]: every tensor element type MindSpore can dump, with its sizes, its `.npy` descr and
//! both of MindSpore's spellings (CPU `Float32`, GPU/Ascend `float32`).

use crate::Error;

/// A tensor element type, as MindSpore names them.
///
/// Sub-byte types are packed: `Int4` and `UInt4` hold two elements per byte (low nibble first)
/// and `UInt1` eight (most significant bit first).
///
/// The declaration order is the wire format's dtype code (postcard's variant index and the bit
/// of a `DTypeSet`): new dtypes are appended at the end, never inserted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum DType {
    /// `bool`, one byte per element (0 or 1).
    Bool,
    /// 4-bit signed integer, two per byte, low nibble first.
    Int4,
    /// 8-bit signed integer.
    Int8,
    /// 16-bit signed integer.
    Int16,
    /// 32-bit signed integer.
    Int32,
    /// 64-bit signed integer.
    Int64,
    /// 1-bit unsigned integer, eight per byte, most significant bit first.
    UInt1,
    /// 8-bit unsigned integer.
    UInt8,
    /// 16-bit unsigned integer.
    UInt16,
    /// 32-bit unsigned integer.
    UInt32,
    /// 64-bit unsigned integer.
    UInt64,
    /// IEEE 754 binary16.
    Float16,
    /// bfloat16: the upper half of an IEEE 754 binary32.
    BFloat16,
    /// IEEE 754 binary32.
    Float32,
    /// IEEE 754 binary64.
    Float64,
    /// Two binary32 values (re, im).
    Complex64,
    /// Two binary64 values (re, im).
    Complex128,
    /// 8-bit float E4M3FN (sign, 4 exponent bits with bias 7, 3 mantissa bits): finite only,
    /// `S.1111.111` is NaN. Stored widened to float32.
    Float8E4M3FN,
    /// 8-bit float E5M2 (sign, 5 exponent bits with bias 15, 2 mantissa bits): the high byte
    /// of an IEEE binary16, with infinities and NaN. Stored widened to float32.
    Float8E5M2,
    /// 4-bit unsigned integer, two per byte, low nibble first. Stored widened to uint8.
    UInt4,
    /// 8-bit float E4M3FNUZ (sign, 4 exponent bits with bias 8, 3 mantissa bits): finite
    /// only, no negative zero, `0x80` is the single NaN. Stored widened to float32.
    Float8E4M3FNUZ,
    /// 8-bit float E5M2FNUZ (sign, 5 exponent bits with bias 16, 2 mantissa bits): finite
    /// only, no negative zero, `0x80` is the single NaN. Stored widened to float32.
    Float8E5M2FNUZ,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 22] = [
        DType::Bool,
        DType::Int4,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt1,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
        DType::Complex64,
        DType::Complex128,
        DType::Float8E4M3FN,
        DType::Float8E5M2,
        DType::UInt4,
        DType::Float8E4M3FNUZ,
        DType::Float8E5M2FNUZ,
    ];

    /// Bits per element.
    pub const fn bits(self) -> u32 {
        match self {
            DType::UInt1 => 1,
            DType::Int4 | DType::UInt4 => 4,
            DType::Bool
            | DType::Int8
            | DType::UInt8
            | DType::Float8E4M3FN
            | DType::Float8E5M2
            | DType::Float8E4M3FNUZ
            | DType::Float8E5M2FNUZ => 8,
            DType::Int16 | DType::UInt16 | DType::Float16 | DType::BFloat16 => 16,
            DType::Int32 | DType::UInt32 | DType::Float32 => 32,
            DType::Int64 | DType::UInt64 | DType::Float64 | DType::Complex64 => 64,
            DType::Complex128 => 128,
        }
    }

    /// Bytes per element for byte-addressable dtypes, `None` for the packed `Int4`, `UInt4`
    /// and `UInt1`.
    pub const fn size(self) -> Option<usize> {
        match self {
            DType::Int4 | DType::UInt4 | DType::UInt1 => None,
            _ => Some(self.bits() as usize / 8),
        }
    }

    /// Bytes that `elems` elements occupy in memory (packed types round up to whole bytes).
    /// `None` on arithmetic overflow.
    pub const fn storage_bytes(self, elems: usize) -> Option<usize> {
        match self {
            DType::UInt1 => Some(elems.div_ceil(8)),
            DType::Int4 | DType::UInt4 => Some(elems.div_ceil(2)),
            _ => elems.checked_mul(self.bits() as usize / 8),
        }
    }

    /// Checks that `bytes` is exactly the storage of `elems` elements.
    pub const fn check_len(self, bytes: usize, elems: usize) -> Result<(), Error> {
        match self.storage_bytes(elems) {
            Some(expected) if expected == bytes => Ok(()),
            Some(expected) => Err(Error::LengthMismatch {
                expected,
                actual: bytes,
            }),
            None => Err(Error::Overflow),
        }
    }

    /// The `.npy` descr MindSpore writes for raw data of this dtype (`<f4`, `|b1`, `<E2`, ...).
    ///
    /// `None` for `Int4`, `UInt4`, `UInt1` and the four float8 dtypes, which have no
    /// numpy type (MindSpore writes no file for them); opdump stores them widened to `|i1`,
    /// `|u1`, `|u1` and `<f4` (see [`DType::widened`] and [`crate::widen`]). `BFloat16` gives `<E2` (ml_dtypes' char), which is
    /// what MindSpore 2.10 writes on CPU and what stock numpy cannot load.
    pub const fn npy_descr(self) -> Option<&'static str> {
        Some(match self {
            DType::Bool => "|b1",
            DType::Int8 => "|i1",
            DType::UInt8 => "|u1",
            DType::Int16 => "<i2",
            DType::Int32 => "<i4",
            DType::Int64 => "<i8",
            DType::UInt16 => "<u2",
            DType::UInt32 => "<u4",
            DType::UInt64 => "<u8",
            DType::Float16 => "<f2",
            DType::BFloat16 => "<E2",
            DType::Float32 => "<f4",
            DType::Float64 => "<f8",
            DType::Complex64 => "<c8",
            DType::Complex128 => "<c16",
            DType::Int4 | DType::UInt4 | DType::UInt1 => return None,
            DType::Float8E4M3FN
            | DType::Float8E5M2
            | DType::Float8E4M3FNUZ
            | DType::Float8E5M2FNUZ => return None,
        })
    }

    /// The dtype a tensor of this dtype is stored as (in `.npy` files, and what statistics
    /// see): `Int8` for `Int4`, `UInt8` for `UInt4` and `UInt1`, `Float32` for the float8
    /// types, itself for every other dtype. The widening is exact ([`crate::widen`]).
    pub const fn widened(self) -> DType {
        match self {
            DType::Int4 => DType::Int8,
            DType::UInt4 | DType::UInt1 => DType::UInt8,
            DType::Float8E4M3FN
            | DType::Float8E5M2
            | DType::Float8E4M3FNUZ
            | DType::Float8E5M2FNUZ => DType::Float32,
            d => d,
        }
    }

    /// The dtype of an `.npy` descr (`<f4`, `|b1`, `<E2`, also `=f4`/`f4` native-order forms
    /// on little-endian and `|u1`/`<u1` for single bytes). `None` for anything else, including
    /// big-endian data.
    pub fn from_npy_descr(descr: &str) -> Option<DType> {
        let b = descr.as_bytes();
        let (order, rest) = match b.first()? {
            b'<' | b'|' | b'=' => (b[0], &descr[1..]),
            b'>' => return None,
            _ => (b'=', descr),
        };
        let dt = match rest {
            "b1" | "?" => DType::Bool,
            "i1" => DType::Int8,
            "u1" => DType::UInt8,
            "i2" => DType::Int16,
            "i4" => DType::Int32,
            "i8" => DType::Int64,
            "u2" => DType::UInt16,
            "u4" => DType::UInt32,
            "u8" => DType::UInt64,
            "f2" => DType::Float16,
            "E2" => DType::BFloat16,
            "f4" => DType::Float32,
            "f8" => DType::Float64,
            "c8" => DType::Complex64,
            "c16" => DType::Complex128,
            _ => return None,
        };
        // '|' (not applicable) is only meaningful for single-byte types, but numpy accepts the
        // byte-order chars interchangeably there; multi-byte types must not say '|'.
        if order == b'|' && dt.bits() > 8 {
            return None;
        }
        Some(dt)
    }

    /// MindSpore's GPU/Ascend (and `statistic.csv` Data Type) spelling: `float32`, `bfloat16`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int4 => "int4",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt1 => "uint1",
            DType::UInt8 => "uint8",
            DType::UInt16 => "uint16",
            DType::UInt32 => "uint32",
            DType::UInt64 => "uint64",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
            DType::Complex64 => "complex64",
            DType::Complex128 => "complex128",
            DType::Float8E4M3FN => "float8_e4m3fn",
            DType::Float8E5M2 => "float8_e5m2",
            DType::UInt4 => "uint4",
            DType::Float8E4M3FNUZ => "float8_e4m3fnuz",
            DType::Float8E5M2FNUZ => "float8_e5m2fnuz",
        }
    }

    /// MindSpore's CPU file-name spelling (`TypeIdToString`): `Float32`, `BFloat16`, `UInt8`.
    pub const fn cpu_name(self) -> &'static str {
        match self {
            DType::Bool => "Bool",
            DType::Int4 => "Int4",
            DType::Int8 => "Int8",
            DType::Int16 => "Int16",
            DType::Int32 => "Int32",
            DType::Int64 => "Int64",
            DType::UInt1 => "UInt1",
            DType::UInt8 => "UInt8",
            DType::UInt16 => "UInt16",
            DType::UInt32 => "UInt32",
            DType::UInt64 => "UInt64",
            DType::Float16 => "Float16",
            DType::BFloat16 => "BFloat16",
            DType::Float32 => "Float32",
            DType::Float64 => "Float64",
            DType::Complex64 => "Complex64",
            DType::Complex128 => "Complex128",
            DType::Float8E4M3FN => "Float8E4M3FN",
            DType::Float8E5M2 => "Float8E5M2",
            DType::UInt4 => "UInt4",
            DType::Float8E4M3FNUZ => "Float8E4M3FNUZ",
            DType::Float8E5M2FNUZ => "Float8E5M2FNUZ",
        }
    }

    /// Parses either MindSpore spelling (`float32` or `Float32`), exactly.
    pub fn from_name(name: &str) -> Result<DType, Error> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.name() == name || d.cpu_name() == name)
            .ok_or(Error::UnknownDType)
    }

    /// `true` for the four float8 dtypes, Float16, BFloat16, Float32 and Float64.
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float8E4M3FN
                | DType::Float8E5M2
                | DType::Float8E4M3FNUZ
                | DType::Float8E5M2FNUZ
                | DType::Float16
                | DType::BFloat16
                | DType::Float32
                | DType::Float64
        )
    }

    /// `true` for the four float8 dtypes (one byte per element, stored widened to float32):
    /// Float8E4M3FN, Float8E5M2, Float8E4M3FNUZ and Float8E5M2FNUZ.
    pub const fn is_float8(self) -> bool {
        matches!(
            self,
            DType::Float8E4M3FN | DType::Float8E5M2 | DType::Float8E4M3FNUZ | DType::Float8E5M2FNUZ
        )
    }

    /// `true` for Complex64 and Complex128.
    pub const fn is_complex(self) -> bool {
        matches!(self, DType::Complex64 | DType::Complex128)
    }

    /// `true` for the signed and unsigned integer types (not `Bool`).
    pub const fn is_int(self) -> bool {
        !self.is_float() && !self.is_complex() && !matches!(self, DType::Bool)
    }
}

impl core::fmt::Display for DType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for DType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        DType::from_name(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Ok(d));
            assert_eq!(DType::from_name(d.cpu_name()), Ok(d));
            // The float8 names follow MindSpore's two spellings (`float8_e4m3fn` in Python,
            // `Float8E4M3FN` for its TypeId): the same letters, without the underscore.
            assert_eq!(d.cpu_name().to_ascii_lowercase(), d.name().replace('_', ""));
        }
        // Declaration order is the wire code: the first 17 never move.
        assert_eq!(DType::Complex128 as u32, 16);
        assert_eq!(DType::Float8E4M3FN as u32, 17);
        assert_eq!(DType::Float8E5M2 as u32, 18);
        assert_eq!(DType::UInt4 as u32, 19);
        assert_eq!(DType::Float8E4M3FNUZ as u32, 20);
        assert_eq!(DType::Float8E5M2FNUZ as u32, 21);
        for (i, d) in DType::ALL.iter().enumerate() {
            assert_eq!(*d as usize, i);
        }
        assert_eq!(DType::from_name("FLOAT32"), Err(Error::UnknownDType));
        assert_eq!(DType::from_name(""), Err(Error::UnknownDType));
    }

    #[test]
    fn descr_round_trip() {
        for d in DType::ALL {
            match d.npy_descr() {
                Some(s) => assert_eq!(DType::from_npy_descr(s), Some(d), "{s}"),
                None => {
                    assert_ne!(d.widened(), d);
                    assert!(d.widened().npy_descr().is_some(), "{d}");
                }
            }
        }
        assert_eq!(DType::from_npy_descr(">f4"), None);
        assert_eq!(DType::from_npy_descr("|f4"), None);
        assert_eq!(DType::from_npy_descr("<f4"), Some(DType::Float32));
        assert_eq!(DType::from_npy_descr("f8"), Some(DType::Float64));
        assert_eq!(DType::from_npy_descr(""), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(DType::Complex128.bits(), 128);
        assert_eq!(DType::Int4.storage_bytes(5), Some(3));
        assert_eq!(DType::UInt1.storage_bytes(9), Some(2));
        assert_eq!(DType::UInt1.storage_bytes(8), Some(1));
        assert_eq!(DType::Float32.storage_bytes(usize::MAX), None);
        assert_eq!(DType::Float32.check_len(8, 2), Ok(()));
        assert_eq!(
            DType::Float32.check_len(7, 2),
            Err(Error::LengthMismatch {
                expected: 8,
                actual: 7
            })
        );
        assert_eq!(DType::Int4.size(), None);
        assert_eq!(DType::UInt4.size(), None);
        assert_eq!(DType::UInt4.storage_bytes(5), Some(3));
        assert_eq!(DType::Float8E5M2.storage_bytes(5), Some(5));
        assert_eq!(DType::Float8E4M3FN.size(), Some(1));
        assert_eq!(DType::Float8E4M3FN.widened(), DType::Float32);
        assert_eq!(DType::UInt4.widened(), DType::UInt8);
        assert!(DType::Float8E5M2.is_float() && DType::UInt4.is_int());
        for d in [DType::Float8E4M3FNUZ, DType::Float8E5M2FNUZ] {
            assert_eq!((d.size(), d.storage_bytes(3)), (Some(1), Some(3)));
            assert_eq!((d.widened(), d.npy_descr()), (DType::Float32, None));
            assert!(d.is_float() && d.is_float8());
        }
        assert!(DType::Float8E4M3FN.is_float8() && !DType::Float16.is_float8());
        assert_eq!(DType::BFloat16.size(), Some(2));
    }
}
