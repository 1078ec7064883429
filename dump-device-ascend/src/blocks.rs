//! [`Blocks`]: the block ("fractal") sizes of the private Ascend formats, with CANN's defaults
//! per dtype.
//!
//! Facts and sources:
//! - `NC1HWC0`: "C0 is closely related to the micro-architecture, and the value is equal to the
//!   Cube Unit size, for example, 16. C1 = C/C0; when the division is not exact, the last data
//!   segment is padded to C0" (CANN `aclFormat`, Runtime API reference `aclcppdevg_03_1348`).
//! - `FRACTAL_NZ`: `(…, M, N)` → pad → `(…, M1·M0, N1·N0)` → reshape `(…, M1, M0, N1, N0)` →
//!   transpose `(…, N1, M1, M0, N0)`; fractals column-major ("N"), elements inside a fractal
//!   row-major ("Z") (CANN "Data Layout Formats", Ascend C guide `atlas_ascendc_10_0099`).
//!   "m0/n0 are the alignment: for float16 n0 and m0 are both 16; for int8 n0 is 32 and m0 is
//!   16"; e.g. ND `{8, 100, 30}` ↔ NZ `{8, 2, 112, 16}` (CANN ATB `TransdataOperation`,
//!   `ascendtb_01_0083`).
//! - `FRACTAL_Z` (convolution weights): `(C1·H·W, N1, N0, C0)` with N0 = 16; e.g. an fp16
//!   NCHW weight `[2, 4, 8, 8]` becomes `[64, 1, 16, 16]` (CANN
//!   `aclnnCalculateConvolutionWeightSize`).
//! - CANN 8.x adds `FRACTAL_NZ_C0_{2,4,8,16,32}` (`aclFormat` values 50–54) for other C0
//!   values, i.e. C0 = 32 bytes / element size for the newer matmul layouts (fp32 → 8).
//!
//! The defaults below are the classic ones: C0 = 32 for 1-byte types, 16 otherwise; N0 = M0 =
//! 16. When the device shape is known (the Dumper case) the conversion takes C0 from the
//! device shape's last axis instead, so a tensor laid out with C0 = 8 converts correctly; the
//! defaults matter only when a device shape has to be computed from a host shape.

use crate::Error;
use dump_core::DType;

/// The cube unit's edge: N0 of `FRACTAL_Z` and M0 of `FRACTAL_NZ`.
pub const CUBE: usize = 16;

/// Block sizes of a private layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Blocks {
    /// C0: the innermost block (channels of `NC1HWC0` / `FRACTAL_Z`, columns N0 of
    /// `FRACTAL_NZ`).
    pub c0: usize,
    /// The cube block: N0 of `FRACTAL_Z` (output channels), M0 of `FRACTAL_NZ` (rows).
    pub cube: usize,
}

impl Blocks {
    /// CANN's classic defaults for `dtype`: C0 = 32 for 1-byte types (int8, uint8, bool), 16
    /// for 2-, 4- and 8-byte types; cube = 16. Packed dtypes give [`Error::PackedDType`].
    pub const fn default_for(dtype: DType) -> Result<Blocks, Error> {
        match dtype.size() {
            Some(1) => Ok(Blocks { c0: 32, cube: CUBE }),
            Some(_) => Ok(Blocks { c0: 16, cube: CUBE }),
            None => Err(Error::PackedDType(dtype)),
        }
    }

    /// C0 = 32 bytes / element size (the newer matmul `FRACTAL_NZ_C0_*` layouts: fp32 → 8,
    /// fp16 → 16, int8 → 32), cube = 16.
    pub const fn bytes32_for(dtype: DType) -> Result<Blocks, Error> {
        match dtype.size() {
            Some(s) if s <= 32 => Ok(Blocks {
                c0: 32 / s,
                cube: CUBE,
            }),
            _ => Err(Error::PackedDType(dtype)),
        }
    }

    /// Checks that both blocks are non-zero.
    pub const fn check(self) -> Result<Blocks, Error> {
        if self.c0 == 0 {
            Err(Error::ZeroBlock { block: "C0" })
        } else if self.cube == 0 {
            Err(Error::ZeroBlock { block: "N0/M0" })
        } else {
            Ok(self)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        assert_eq!(Blocks::default_for(DType::Float16).unwrap().c0, 16);
        assert_eq!(Blocks::default_for(DType::Float32).unwrap().c0, 16);
        assert_eq!(Blocks::default_for(DType::Int8).unwrap().c0, 32);
        assert_eq!(Blocks::default_for(DType::UInt8).unwrap().cube, 16);
        assert_eq!(Blocks::bytes32_for(DType::Float32).unwrap().c0, 8);
        assert_eq!(Blocks::bytes32_for(DType::BFloat16).unwrap().c0, 16);
        assert_eq!(
            Blocks::default_for(DType::Int4),
            Err(Error::PackedDType(DType::Int4))
        );
        assert_eq!(
            Blocks { c0: 0, cube: 16 }.check(),
            Err(Error::ZeroBlock { block: "C0" })
        );
    }
}
