//! Overflow ("op-debug") blocks (spec §4): the single output of an
//! `Opdebug.Node_OpDebug.{task}.{stream}.{ts}` dump, decoded to an [`OverflowReport`] that
//! writes itself as msaccucmp's JSON ([`OverflowReport::to_json`]; with the `serde` feature it
//! is also `Serialize`, to the same object).

use super::error::DumpFileError;

/// The prefix both msaccucmp and MindSpore recognise overflow dump files by.
pub const OPDEBUG_FILE_PREFIX: &str = "Opdebug.Node_OpDebug.";

/// `0x5A5A5A5A`: first `u32` of the new overflow layout.
pub const OPDEBUG_MAGIC: u32 = 0x5A5A_5A5A;

/// Size of the old overflow block.
pub const OLD_BLOCK_LEN: usize = 2048;

/// `true` when `file_name` (a base name) is an overflow dump.
pub fn is_opdebug_file(file_name: &str) -> bool {
    file_name.starts_with(OPDEBUG_FILE_PREFIX)
}

/// One value of a section; `hex` values (`pc_start`, `para_base`, `kernel_code`, addresses)
/// are written as `"0x…"` strings, the others as JSON numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverflowField {
    /// The key.
    pub name: &'static str,
    /// The value read (little-endian).
    pub value: u64,
    /// Written as a `"0x…"` string.
    pub hex: bool,
}

/// One JSON section (`"AI Core": {…}`), fields in the order they are written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverflowSection {
    /// The key.
    pub name: &'static str,
    /// Its fields.
    pub fields: Vec<OverflowField>,
}

impl OverflowSection {
    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.fields.iter().find(|f| f.name == name).map(|f| f.value)
    }
}

/// Which layout an overflow block had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverflowLayout {
    /// The fixed 2048-byte block: DHA Atomic Add, L2 Atomic Add and AI Core sections.
    Old,
    /// Magic `0x5A5A5A5A`, a version and one entry for the accelerator that overflowed.
    New {
        /// The header's version (1: AI Core/Vector `status` is four `u64`s).
        version: u32,
        /// The entry's `valid` word.
        valid: u32,
        /// `acc_type`: 0 AI Core, 1 AI Vector, 2 AI CPU, 3 SDMA.
        acc_type: u32,
    },
}

/// A decoded overflow block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverflowReport {
    /// Which layout it had.
    pub layout: OverflowLayout,
    /// The sections, in JSON order.
    pub sections: Vec<OverflowSection>,
}

struct Block<'a>(&'a [u8]);

impl Block<'_> {
    fn u64(&self, at: usize, what: &'static str) -> Result<u64, DumpFileError> {
        let b = self
            .0
            .get(at..at.saturating_add(8))
            .ok_or(DumpFileError::OpDebug {
                offset: at,
                problem: what,
                value: self.0.len() as u64,
            })?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn u32(&self, at: usize, what: &'static str) -> Result<u32, DumpFileError> {
        let b = self
            .0
            .get(at..at.saturating_add(4))
            .ok_or(DumpFileError::OpDebug {
                offset: at,
                problem: what,
                value: self.0.len() as u64,
            })?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

fn is_hex(name: &str) -> bool {
    matches!(
        name,
        "pc_start" | "para_base" | "kernel_code" | "src_addr" | "dst_addr"
    )
}

fn section(
    b: &Block<'_>,
    name: &'static str,
    at: usize,
    names: &[&'static str],
) -> Result<OverflowSection, DumpFileError> {
    let mut fields = Vec::with_capacity(names.len());
    for (i, &n) in names.iter().enumerate() {
        fields.push(OverflowField {
            name: n,
            value: b.u64(at + 8 * i, "block ends inside a field")?,
            hex: is_hex(n),
        });
    }
    Ok(OverflowSection { name, fields })
}

const SIX: [&str; 6] = [
    "model_id",
    "stream_id",
    "task_id",
    "task_type",
    "pc_start",
    "para_base",
];

impl OverflowReport {
    /// Decodes an overflow block (the payload of the `Opdebug` dump's output 0).
    pub fn decode(block: &[u8]) -> Result<OverflowReport, DumpFileError> {
        let b = Block(block);
        if block.len() >= 4 && b.u32(0, "magic")? == OPDEBUG_MAGIC {
            return Self::decode_new(&b);
        }
        if block.len() != OLD_BLOCK_LEN {
            return Err(DumpFileError::OpDebug {
                offset: 0,
                problem: "an overflow block without the 0x5A5A5A5A magic must be exactly \
                          2048 bytes",
                value: block.len() as u64,
            });
        }
        let mut sections = Vec::with_capacity(3);
        for (name, at, status) in [("DHA Atomic Add", 0, 512), ("L2 Atomic Add", 128, 768)] {
            let mut s = section(&b, name, at, &SIX)?;
            s.fields.push(OverflowField {
                name: "status",
                value: b.u64(status, "status")?,
                hex: false,
            });
            sections.push(s);
        }
        let mut core = section(&b, "AI Core", 256, &SIX)?;
        core.fields
            .extend(section(&b, "", 1024, &["kernel_code", "block_idx", "status"])?.fields);
        sections.push(core);
        Ok(OverflowReport {
            layout: OverflowLayout::Old,
            sections,
        })
    }

    fn decode_new(b: &Block<'_>) -> Result<OverflowReport, DumpFileError> {
        let version = b.u32(4, "block ends inside the header")?;
        let valid = b.u32(8, "block ends inside the entry header")?;
        let acc_type = b.u32(12, "block ends inside the entry header")?;
        let data_len = b.u32(20, "block ends inside the entry header")?;
        const HEAD: [&str; 4] = ["model_id", "stream_id", "task_id", "task_type"];
        let (name, tail): (&'static str, &[&'static str]) = match acc_type {
            0 | 1 => (
                if acc_type == 0 {
                    "AI Core"
                } else {
                    "AI Vector"
                },
                if version == 1 {
                    &[
                        "context_id",
                        "thread_id",
                        "pc_start",
                        "para_base",
                        "core_id",
                        "block_id",
                        "status0",
                        "status1",
                        "status2",
                        "status3",
                    ]
                } else {
                    &[
                        "context_id",
                        "thread_id",
                        "pc_start",
                        "para_base",
                        "core_id",
                        "block_id",
                        "status",
                    ]
                },
            ),
            2 => ("AI CPU", &["context_id", "cpu_id", "thread_id", "status"]),
            3 => (
                "SDMA",
                &[
                    "context_id",
                    "thread_id",
                    "src_addr",
                    "dst_addr",
                    "channel_id",
                    "status",
                ],
            ),
            other => {
                return Err(DumpFileError::OpDebug {
                    offset: 12,
                    problem: "acc_type is not 0 (AI Core), 1 (AI Vector), 2 (AI CPU) or 3 (SDMA)",
                    value: u64::from(other),
                });
            }
        };
        let names: Vec<&'static str> = HEAD.iter().chain(tail).copied().collect();
        let needed = 8 * names.len() as u64;
        if u64::from(data_len) < needed {
            return Err(DumpFileError::OpDebug {
                offset: 20,
                problem: "data_len is smaller than 8 bytes times the entry's field count",
                value: u64::from(data_len),
            });
        }
        let s = section(b, name, 24, &names)?;
        Ok(OverflowReport {
            layout: OverflowLayout::New {
                version,
                valid,
                acc_type,
            },
            sections: vec![s],
        })
    }

    /// The section named `name`.
    pub fn section(&self, name: &str) -> Option<&OverflowSection> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// msaccucmp's JSON: one object per section, fields in order, hex fields as `"0x…"`.
    /// `Some(4)` indents like msaccucmp (`json.dump(indent=4)`); `None` is compact
    /// (`{"a":1}`).
    pub fn to_json(&self, indent: Option<usize>) -> String {
        use core::fmt::Write as _;
        let mut out = String::new();
        let (nl, pad) = match indent {
            Some(n) => ("\n", " ".repeat(n)),
            None => ("", String::new()),
        };
        let colon = if indent.is_some() { ": " } else { ":" };
        out.push('{');
        for (i, s) in self.sections.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{nl}{pad}\"{}\"{colon}{{", s.name);
            for (j, f) in s.fields.iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{nl}{pad}{pad}\"{}\"{colon}", f.name);
                if f.hex {
                    let _ = write!(out, "\"{:#x}\"", f.value);
                } else {
                    let _ = write!(out, "{}", f.value);
                }
            }
            if !s.fields.is_empty() {
                let _ = write!(out, "{nl}{pad}");
            }
            out.push('}');
        }
        if !self.sections.is_empty() {
            out.push_str(nl);
        }
        out.push('}');
        out
    }
}

#[cfg(feature = "serde")]
mod ser {
    use super::{OverflowReport, OverflowSection};
    use serde::ser::{Serialize, SerializeMap, Serializer};

    struct Fields<'a>(&'a OverflowSection);

    impl Serialize for Fields<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut m = s.serialize_map(Some(self.0.fields.len()))?;
            for f in &self.0.fields {
                if f.hex {
                    m.serialize_entry(f.name, &format_args!("{:#x}", f.value))?;
                } else {
                    m.serialize_entry(f.name, &f.value)?;
                }
            }
            m.end()
        }
    }

    /// The same object as [`OverflowReport::to_json`].
    impl Serialize for OverflowReport {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut m = s.serialize_map(Some(self.sections.len()))?;
            for sec in &self.sections {
                m.serialize_entry(sec.name, &Fields(sec))?;
            }
            m.end()
        }
    }
}
