//! [`TensorStats`]: everything a `statistic.csv` row needs about one tensor's values.

use dump_core::Summary;

/// The statistics of one tensor plus the digests a row may ask for.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TensorStats {
    /// The one-pass statistics; `None` for an empty tensor (which gets no row).
    pub summary: Option<Summary>,
    /// MD5 of the tensor bytes, when requested.
    pub md5: Option<[u8; 16]>,
    /// MindSpore's SHA-1 of the tensor, when requested.
    pub sha1: Option<[u8; 20]>,
}

/// Which digests to compute alongside the statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Hashes {
    /// Compute MD5.
    pub md5: bool,
    /// Compute MindSpore's SHA-1.
    pub sha1: bool,
}

impl Hashes {
    /// No digest.
    pub const NONE: Hashes = Hashes {
        md5: false,
        sha1: false,
    };

    /// The digests a set of columns needs.
    pub fn for_categories(c: &crate::CategorySet) -> Hashes {
        Hashes {
            md5: c.needs_md5(),
            sha1: c.needs_sha1(),
        }
    }

    /// `true` when at least one digest is requested.
    pub const fn any(self) -> bool {
        self.md5 || self.sha1
    }

    /// Number of digests requested.
    pub const fn count(self) -> usize {
        self.md5 as usize + self.sha1 as usize
    }
}
