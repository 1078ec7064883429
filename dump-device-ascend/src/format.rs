//! [`Format`]: the device data layouts an Ascend tensor can have, with the names MindSpore
//! writes into dump file names (spec §4.2) and the `aclFormat` values of CANN.

use crate::Error;

/// A device data layout ("format") of an Ascend tensor.
///
/// Sources: CANN "aclFormat" (Runtime API reference, `aclcppdevg_03_1348`, CANN 8.0–9.0) for the
/// numeric values; CANN "Data Layout Formats" (Ascend C guide, `atlas_ascendc_10_0099`) for the
/// layouts, described at each conversion in [`crate::convert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Format {
    /// MindSpore's `DefaultFormat`: the host (row-major, C order) layout of the host shape.
    Default,
    /// `ND`: row-major N-dimensional (the same bytes as `DefaultFormat`).
    Nd,
    /// `NCHW`: row-major 4-D (the same bytes as `DefaultFormat` for an NCHW host shape).
    Nchw,
    /// `NHWC`: channels last.
    Nhwc,
    /// `NC1HWC0` ("5HD"): `(N, C1, H, W, C0)`, channels split into blocks of C0, the last
    /// block zero-padded.
    Nc1hwc0,
    /// `FRACTAL_Z`: convolution weights, `(C1·H·W, N1, N0, C0)`.
    FractalZ,
    /// `FRACTAL_NZ`: matrices, `(…, N1, M1, M0, N0)` for an `(…, M, N)` host shape.
    FractalNz,
    /// `NC1HWC0_C04`: `NC1HWC0` with C0 fixed at 4.
    Nc1hwc0C04,
    /// `NDC1HWC0`: `(N, D, C1, H, W, C0)` for an NCDHW host shape.
    Ndc1hwc0,
    /// `FRACTAL_Z_3D`: 3-D convolution weights, `(D·C1·H·W, N1, N0, C0)` for NCDHW.
    FractalZ3d,
    /// `C1HWNCoC0`: `(C1, H, W, N, Co, C0)` for an NCHW host shape, Co = C0, each channel on
    /// the diagonal of a `Co × C0` block.
    C1hwncoc0,
}

impl Format {
    /// Every format, in declaration order.
    pub const ALL: [Format; 11] = [
        Format::Default,
        Format::Nd,
        Format::Nchw,
        Format::Nhwc,
        Format::Nc1hwc0,
        Format::FractalZ,
        Format::FractalNz,
        Format::Nc1hwc0C04,
        Format::Ndc1hwc0,
        Format::FractalZ3d,
        Format::C1hwncoc0,
    ];

    /// The name MindSpore uses in kernel info and dump file names (`NC1HWC0`, `FRACTAL_Z`, …).
    pub const fn name(self) -> &'static str {
        match self {
            Format::Default => "DefaultFormat",
            Format::Nd => "ND",
            Format::Nchw => "NCHW",
            Format::Nhwc => "NHWC",
            Format::Nc1hwc0 => "NC1HWC0",
            Format::FractalZ => "FRACTAL_Z",
            Format::FractalNz => "FRACTAL_NZ",
            Format::Nc1hwc0C04 => "NC1HWC0_C04",
            Format::Ndc1hwc0 => "NDC1HWC0",
            Format::FractalZ3d => "FRACTAL_Z_3D",
            Format::C1hwncoc0 => "C1HWNCoC0",
        }
    }

    /// Parses a [`name`](Format::name) exactly; also accepts `FracZ`, MindSpore's op-info alias
    /// of `FRACTAL_Z`.
    pub fn parse(name: &str) -> Result<Format, Error> {
        if name == "FracZ" {
            return Ok(Format::FractalZ);
        }
        Format::ALL
            .iter()
            .copied()
            .find(|f| f.name() == name)
            .ok_or(Error::UnknownFormat)
    }

    /// The `aclFormat` value (`ACL_FORMAT_NCHW = 0`, `NHWC = 1`, `ND = 2`, `NC1HWC0 = 3`,
    /// `FRACTAL_Z = 4`, `NC1HWC0_C04 = 12`, `FRACTAL_NZ = 29`, `NDC1HWC0 = 32`,
    /// `FRACTAL_Z_3D = 33`); `DefaultFormat` is `ND`. `C1HWNCoC0` is not in the public
    /// `aclFormat` list: it gets 25, its number in GE's `ge::Format` and in the `OutputFormat`
    /// of CANN dump files.
    pub const fn acl_format(self) -> i32 {
        match self {
            Format::Default | Format::Nd => 2,
            Format::Nchw => 0,
            Format::Nhwc => 1,
            Format::Nc1hwc0 => 3,
            Format::FractalZ => 4,
            Format::FractalNz => 29,
            Format::Nc1hwc0C04 => 12,
            Format::Ndc1hwc0 => 32,
            Format::FractalZ3d => 33,
            Format::C1hwncoc0 => 25,
        }
    }

    /// `true` when the device bytes already are the host (row-major) bytes of the host shape:
    /// `DefaultFormat`, `ND` and `NCHW`.
    pub const fn is_host_layout(self) -> bool {
        matches!(self, Format::Default | Format::Nd | Format::Nchw)
    }
}

impl core::fmt::Display for Format {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Format::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Format::ALL {
            assert_eq!(Format::parse(f.name()), Ok(f));
            assert_eq!(f.to_string(), f.name());
        }
        assert_eq!(Format::parse("FracZ"), Ok(Format::FractalZ));
        assert_eq!(Format::parse("nc1hwc0"), Err(Error::UnknownFormat));
        assert_eq!(Format::parse(""), Err(Error::UnknownFormat));
    }

    #[test]
    fn acl_values() {
        assert_eq!(Format::Nc1hwc0.acl_format(), 3);
        assert_eq!(Format::FractalNz.acl_format(), 29);
        assert_eq!(Format::C1hwncoc0.acl_format(), 25);
        assert_eq!(Format::parse("C1HWNCoC0"), Ok(Format::C1hwncoc0));
        assert_eq!(Format::parse("C1HWNCOC0"), Err(Error::UnknownFormat));
        assert_eq!(Format::Default.acl_format(), Format::Nd.acl_format());
        assert!(Format::Nchw.is_host_layout());
        assert!(!Format::Nhwc.is_host_layout());
    }
}
