//! [`CannFormat`]: the `OutputFormat` enum of CANN's `DumpData` message (spec §2.2), kept by
//! number, with the spec's name and this crate's [`Format`] where it has one.

use crate::Format;

/// A CANN `OutputFormat` value (the primary format, `fmt & 0xFF`), kept by number: values a
/// newer CANN adds survive decoding with `name() == None`.
///
/// Drift: the 2021 GraphEngine copy has 30 = `RESERVED`; values from 30 up were renumbered
/// later. 30 decodes as `NCDHW`, today's meaning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CannFormat(pub i32);

const NAMES: [&str; 50] = [
    "NCHW",
    "NHWC",
    "ND",
    "NC1HWC0",
    "FRACTAL_Z",
    "NC1C0HWPAD",
    "NHWC1C0",
    "FSR_NCHW",
    "FRACTAL_DECONV",
    "C1HWNC0",
    "FRACTAL_DECONV_TRANSPOSE",
    "FRACTAL_DECONV_SP_STRIDE_TRANS",
    "NC1HWC0_C04",
    "FRACTAL_Z_C04",
    "CHWN",
    "FRACTAL_DECONV_SP_STRIDE8_TRANS",
    "HWCN",
    "NC1KHKWHWC0",
    "BN_WEIGHT",
    "FILTER_HWCK",
    "HASHTABLE_LOOKUP_LOOKUPS",
    "HASHTABLE_LOOKUP_KEYS",
    "HASHTABLE_LOOKUP_VALUE",
    "HASHTABLE_LOOKUP_OUTPUT",
    "HASHTABLE_LOOKUP_HITS",
    "C1HWNCoC0",
    "MD",
    "NDHWC",
    "FRACTAL_ZZ",
    "FRACTAL_NZ",
    "NCDHW",
    "DHWCN",
    "NDC1HWC0",
    "FRACTAL_Z_3D",
    "CN",
    "NC",
    "DHWNC",
    "FRACTAL_Z_3D_TRANSPOSE",
    "FRACTAL_ZN_LSTM",
    "FRACTAL_Z_G",
    "RESERVED",
    "ALL",
    "NULL",
    "ND_RNN_BIAS",
    "FRACTAL_ZN_RNN",
    "YUV",
    "YUV_A",
    "NCL",
    "FRACTAL_Z_WINO",
    "C1HWC0",
];

impl CannFormat {
    /// `NCHW` (0), also the protobuf default.
    pub const NCHW: CannFormat = CannFormat(0);
    /// `NHWC` (1).
    pub const NHWC: CannFormat = CannFormat(1);
    /// `ND` (2).
    pub const ND: CannFormat = CannFormat(2);
    /// `NC1HWC0` (3).
    pub const NC1HWC0: CannFormat = CannFormat(3);
    /// `FRACTAL_Z` (4).
    pub const FRACTAL_Z: CannFormat = CannFormat(4);
    /// `FRACTAL_NZ` (29).
    pub const FRACTAL_NZ: CannFormat = CannFormat(29);
    /// `NCDHW` (30; `RESERVED` in the 2021 copy).
    pub const NCDHW: CannFormat = CannFormat(30);
    /// `MAX` (255).
    pub const MAX: CannFormat = CannFormat(255);

    /// Every value the spec names, in order (0 to 49, then 255).
    pub fn all() -> impl Iterator<Item = CannFormat> {
        (0..NAMES.len() as i32)
            .chain(core::iter::once(255))
            .map(CannFormat)
    }

    /// The spec's name (`FRACTAL_NZ`, `C1HWNCoC0`, ...), `None` for values it does not list.
    pub fn name(self) -> Option<&'static str> {
        if self.0 == 255 {
            return Some("MAX");
        }
        usize::try_from(self.0)
            .ok()
            .and_then(|i| NAMES.get(i).copied())
    }

    /// The format by its [`name`](CannFormat::name), exactly.
    pub fn from_name(name: &str) -> Option<CannFormat> {
        CannFormat::all().find(|f| f.name() == Some(name))
    }

    /// This crate's [`Format`] for the layouts it knows (`NCHW`, `NHWC`, `ND`, `NC1HWC0`,
    /// `FRACTAL_Z`, `NC1HWC0_C04`, `C1HWNCoC0`, `FRACTAL_NZ`, `NDC1HWC0`, `FRACTAL_Z_3D`: the
    /// numbers of [`Format::acl_format`]); `None` for the others, which [`crate::convert`]
    /// cannot convert.
    pub fn format(self) -> Option<Format> {
        Format::ALL
            .iter()
            .copied()
            .filter(|f| *f != Format::Default)
            .find(|f| f.acl_format() == self.0)
    }

    /// The value of a crate [`Format`] (`DefaultFormat` is `ND`).
    pub fn from_format(format: Format) -> CannFormat {
        CannFormat(format.acl_format())
    }
}

impl core::fmt::Display for CannFormat {
    /// The name, or `OutputFormat(N)` for values the spec does not list.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "OutputFormat({})", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_crate_formats() {
        assert_eq!(CannFormat(25).name(), Some("C1HWNCoC0"));
        assert_eq!(CannFormat(49).name(), Some("C1HWC0"));
        assert_eq!(CannFormat(255).to_string(), "MAX");
        assert_eq!(CannFormat(50).to_string(), "OutputFormat(50)");
        assert_eq!(CannFormat::all().count(), 51);
        for f in CannFormat::all() {
            assert_eq!(CannFormat::from_name(f.name().unwrap()), Some(f));
        }
        for f in Format::ALL {
            let c = CannFormat::from_format(f);
            let back = c.format().unwrap();
            assert!(back == f || f == Format::Default && back == Format::Nd);
            assert_eq!(c.name(), Some(back.name()));
        }
        assert_eq!(CannFormat::NCDHW.format(), None);
        assert_eq!(CannFormat(25).format(), Some(Format::C1hwncoc0));
    }
}
