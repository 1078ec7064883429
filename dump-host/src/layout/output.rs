//! The write side's seam: every directory, file name, statistics row and metadata file the
//! Dumper writes is asked of an [`OutputLayout`]. MindSpore's layout ([`MindSporeLayout`]) is
//! the first implementation.
//!
//! # Adding an output layout
//!
//! Say msprobe's `dump.json` tree. Write `layout/msprobe.rs` with a type implementing
//! [`OutputLayout`]:
//!
//! - the directories: where a step's tensors go ([`iteration_dir`]), a graph's constants,
//!   the metadata and graph files, the execution order. The Dumper creates each directory
//!   (never through a symlink) the first time it is used and writes every file through a
//!   temporary name and a rename, so the layout only names paths; it touches no file;
//! - [`tensor_file`]: a tensor's file name from its [`TensorId`], format and dtype (the
//!   Dumper maps names longer than the file system allows to short ones itself);
//! - the statistics table: its path in a tensor directory, its header, and one row per
//!   tensor ([`stat_row`]: return `None` for a tensor the layout writes no row for).
//!
//! Then add one arm to [`open`], keyed by the plan's [`LayoutKind`]. Everything above
//! (routing, the writer, budgets, crash safety) is shared.
//!
//! [`iteration_dir`]: OutputLayout::iteration_dir
//! [`tensor_file`]: OutputLayout::tensor_file
//! [`stat_row`]: OutputLayout::stat_row

use std::{
    fmt,
    path::{Path, PathBuf},
};

use dump_core::DType;
use dump_stats::{
    CategorySet, DeviceStats, TensorId, TensorStats,
    csv::{
        ROW_BUF, RowMeta, header_string, row_in, write_device_row, write_row, write_row_plain_names,
    },
    names::{DTypeSpelling, TensorFileName, sanitize},
};

use super::DumpTree;

/// Which output layout a plan writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutKind {
    /// MindSpore 2.10's layout (`rank_{n}/{net}/{graph}/{iteration}/`, `statistic.csv`).
    #[default]
    MindSpore,
    /// msprobe's layout (`step{N}/rank{R}/dump.json`, `stack.json`, `construct.json`,
    /// `dump_tensor_data/`).
    Msprobe,
    /// CANN's GE layout (`{time}/{device}/{model}/{model_id}/{data_index}/`, one CANN dump
    /// file or statistics csv per kernel; torchair's npy names), from an acl.json or a
    /// torchair config.
    Ge,
}

/// The statistics of one row: host semantics, or a device's (spec §7).
#[derive(Clone, Copy, Debug)]
pub enum RowValues<'a> {
    /// Host statistics (and digests).
    Host(&'a TensorStats),
    /// Device statistics (`null` cells, device precision).
    Device(&'a DeviceStats),
}

/// What a statistics row describes.
#[derive(Clone, Copy, Debug)]
pub struct RowTensor<'a> {
    /// Who the tensor belongs to (the op name as the runtime gave it: full scope name).
    pub id: TensorId<&'a str>,
    /// Element type.
    pub dtype: DType,
    /// Dimensions.
    pub shape: &'a [usize],
    /// Bytes of the tensor as loaded (the `Data Size` column).
    pub data_size: u64,
    /// CRC-32 of the tensor's bytes, when the layout asked for it ([`OutputLayout::wants_crc32`]).
    pub crc32: Option<u32>,
    /// msprobe's XOR checksum of the tensor's bytes ([`dump_core::hash::xor64`]), when the
    /// layout asked for it ([`OutputLayout::wants_xor64`]).
    pub xor64: Option<u64>,
}

/// An on-disk layout the Dumper writes (see the module docs).
pub trait OutputLayout: Send + Sync + fmt::Debug {
    /// Short name (`mindspore`).
    fn name(&self) -> &'static str;
    /// The dump root every directory is created below.
    fn root(&self) -> &Path;
    /// Where the tensors of `graph` at `iteration` go.
    fn iteration_dir(&self, graph: u32, iteration: u64) -> PathBuf;
    /// Where the constants of `graph` go.
    fn constants_dir(&self, graph: u32) -> PathBuf;
    /// The directory of the metadata files (a copy of the config, versions).
    fn metadata_dir(&self) -> PathBuf;
    /// The directory of the graph description files.
    fn graphs_dir(&self) -> PathBuf;
    /// The directory of the execution-order files.
    fn execution_order_dir(&self) -> PathBuf;
    /// The execution order of `graph` (rewritten when the graph is described).
    fn execution_order_csv(&self, graph: u32) -> PathBuf {
        self.execution_order_dir()
            .join(format!("ms_execution_order_graph_{graph}.csv"))
    }
    /// The list of dumped steps of `graph` (appended once per step).
    fn global_execution_order_csv(&self, graph: u32) -> PathBuf {
        self.execution_order_dir()
            .join(format!("ms_global_execution_order_graph_{graph}.csv"))
    }
    /// The flight recorder's `trigger.json` of its `n`-th write (1 for the first), written
    /// last, after every file of that write.
    fn trigger_file(&self, n: u32) -> PathBuf;
    /// A tensor's file name, before the long-name mapping.
    fn tensor_file(&self, id: TensorId<&str>, format: &str, dtype: DType) -> String;
    /// The statistics table of the tensor directory `dir`.
    fn statistic_csv(&self, dir: &Path) -> PathBuf;
    /// The statistics table's header line (with its `\n`) for `categories`.
    fn stat_header(&self, categories: &CategorySet) -> String;
    /// One statistics row (with its `\n`), or `None` when this tensor gets no row.
    fn stat_row(
        &self,
        t: RowTensor<'_>,
        categories: &CategorySet,
        values: RowValues<'_>,
    ) -> Result<Option<String>, dump_stats::Error>;
    /// Appends the row [`stat_row`](OutputLayout::stat_row) makes to `out` and returns
    /// `Ok(true)`; `Ok(false)` when this tensor gets no row. On `Ok(false)` or an error `out`
    /// may hold part of a row: the caller drops what was appended. The Dumper formats its
    /// rows through this, into the step's pending text; a layout that can format without an
    /// intermediate `String` overrides the default (which calls `stat_row`).
    fn append_stat_row(
        &self,
        out: &mut String,
        t: RowTensor<'_>,
        categories: &CategorySet,
        values: RowValues<'_>,
    ) -> Result<bool, dump_stats::Error> {
        let row = self.stat_row(t, categories, values)?;
        if let Some(r) = &row {
            out.push_str(r);
        }
        Ok(row.is_some())
    }
    /// Whether rows carry the CRC-32 of the tensor's bytes (msprobe's summary_mode md5).
    fn wants_crc32(&self) -> bool {
        false
    }
    /// Whether rows carry the XOR checksum of the tensor's bytes (msprobe's summary_mode xor).
    fn wants_xor64(&self) -> bool {
        false
    }
    /// Whether rows are gathered per kernel into one document entry (msprobe's `dump.json`)
    /// instead of appended to a statistics table.
    fn per_kernel_entries(&self) -> bool {
        false
    }
}

/// The layout a plan asks for.
pub fn open(plan: &crate::DumpPlan) -> Box<dyn OutputLayout> {
    match plan.layout {
        LayoutKind::MindSpore => Box::new(MindSporeLayout {
            tree: DumpTree::new(&plan.root, plan.rank, &plan.net),
            spelling: plan.spelling(),
        }),
        LayoutKind::Msprobe => Box::new(super::MsprobeLayout::from_plan(plan)),
        LayoutKind::Ge => match &plan.ge {
            Some(g) => Box::new(super::GeLayout::new(g.clone(), plan.device_id)),
            // A plan says Ge only with its settings (DumpPlan::from_json); MindSpore's
            // layout keeps a hand-made plan without them working.
            None => Box::new(MindSporeLayout {
                tree: DumpTree::new(&plan.root, plan.rank, &plan.net),
                spelling: plan.spelling(),
            }),
        },
    }
}

/// MindSpore 2.10's layout: [`DumpTree`]'s directories, [`TensorFileName`]s and
/// `statistic.csv` rows byte-identical to MindSpore's.
#[derive(Clone, Debug)]
pub struct MindSporeLayout {
    tree: DumpTree,
    spelling: DTypeSpelling,
}

impl OutputLayout for MindSporeLayout {
    fn name(&self) -> &'static str {
        "mindspore"
    }

    fn root(&self) -> &Path {
        self.tree.root()
    }

    fn iteration_dir(&self, graph: u32, iteration: u64) -> PathBuf {
        self.tree.iteration_dir(graph, iteration)
    }

    fn constants_dir(&self, graph: u32) -> PathBuf {
        self.tree.constants_dir(graph)
    }

    fn metadata_dir(&self) -> PathBuf {
        self.tree.metadata_dir()
    }

    fn graphs_dir(&self) -> PathBuf {
        self.tree.rank_dir().join("graphs")
    }

    fn execution_order_dir(&self) -> PathBuf {
        self.tree.execution_order_dir()
    }

    fn execution_order_csv(&self, graph: u32) -> PathBuf {
        self.tree.execution_order_csv(graph)
    }

    fn global_execution_order_csv(&self, graph: u32) -> PathBuf {
        self.tree.global_execution_order_csv(graph)
    }

    fn trigger_file(&self, n: u32) -> PathBuf {
        let rank = self.tree.rank_dir();
        match n {
            0 | 1 => rank.join("trigger.json"),
            n => rank.join(format!("trigger_{n}.json")),
        }
    }

    fn tensor_file(&self, id: TensorId<&str>, format: &str, dtype: DType) -> String {
        TensorFileName {
            id,
            format,
            dtype,
            spelling: self.spelling,
        }
        .render()
    }

    fn statistic_csv(&self, dir: &Path) -> PathBuf {
        dir.join("statistic.csv")
    }

    fn stat_header(&self, categories: &CategorySet) -> String {
        header_string(categories)
    }

    fn stat_row(
        &self,
        t: RowTensor<'_>,
        categories: &CategorySet,
        values: RowValues<'_>,
    ) -> Result<Option<String>, dump_stats::Error> {
        let mut row = String::with_capacity(160 + t.id.op_name.len());
        Ok(self
            .append_stat_row(&mut row, t, categories, values)?
            .then_some(row))
    }

    fn append_stat_row(
        &self,
        out: &mut String,
        t: RowTensor<'_>,
        categories: &CategorySet,
        values: RowValues<'_>,
    ) -> Result<bool, dump_stats::Error> {
        // A comma would split the row (sanitize already removed newlines): both fields get
        // `_` for it, and the op type is sanitised as in the file name.
        let (mut type_buf, mut name_buf) = ([0u8; ROW_NAME_BUF], [0u8; ROW_NAME_BUF]);
        let (mut type_spill, mut name_spill) = (String::new(), String::new());
        let (op_type, type_quote) = row_name(t.id.op_type, &mut type_buf, &mut type_spill);
        let (op_name, name_quote) = row_name(t.id.op_name, &mut name_buf, &mut name_spill);
        let meta = RowMeta {
            id: TensorId {
                op_type,
                op_name,
                ..t.id
            },
            data_size: t.data_size,
            dtype: t.dtype,
            shape: t.shape,
        };
        match values {
            RowValues::Host(s) if !(type_quote || name_quote) => {
                // `row_name` left no byte that needs quoting: the row is made in one stack
                // buffer and copied once (a row too long for it the general way).
                let mut buf = [0u8; ROW_BUF];
                match row_in(&mut buf, &meta, categories, s) {
                    Ok(Some(row)) => {
                        out.push_str(row);
                        Ok(true)
                    }
                    Ok(None) => Ok(false),
                    Err(dump_stats::Error::BufferTooSmall { .. }) => {
                        write_row_plain_names(out, &meta, categories, s)
                    }
                    Err(e) => Err(e),
                }
            }
            RowValues::Host(s) => write_row(out, &meta, categories, s),
            RowValues::Device(d) => write_device_row(out, &meta, categories, d).map(|()| true),
        }
    }
}

/// Names up to this many bytes are made row fields on the stack ([`row_name`]).
const ROW_NAME_BUF: usize = 256;

/// `name` as a `statistic.csv` field: [`sanitize`]d as in file names, then every `,` made
/// `_` (`sanitize(name).replace(',', "_")`), and whether it holds a `"` (the one byte left
/// that makes a csv field need quotes: `,`, CR and LF are gone). Built in `buf` when it fits
/// (no allocation), else in `spill`. Every byte replaced is ASCII and becomes `_`, so the
/// bytes of a multi-byte character are kept whole and the result is UTF-8. Eight bytes per
/// step: each byte is compared exactly (no carry crosses a byte) with the five replaced
/// characters, below 0x20 and 0x7f (the ASCII controls), and with `"`.
fn row_name<'b>(
    name: &str,
    buf: &'b mut [u8; ROW_NAME_BUF],
    spill: &'b mut String,
) -> (&'b str, bool) {
    const LO: u64 = u64::from_le_bytes([0x01; 8]);
    const HI: u64 = u64::from_le_bytes([0x80; 8]);
    const LOW7: u64 = u64::from_le_bytes([0x7f; 8]);
    /// High bit of each byte of `w` that is zero, exactly.
    const fn zero_bytes(w: u64) -> u64 {
        !(((w & LOW7) + LOW7) | w) & HI
    }
    const fn eq(w: u64, b: u8) -> u64 {
        zero_bytes(w ^ (LO * b as u64))
    }
    let field = |b: u8| match b {
        b'/' | b'\\' | b'.' | b' ' | b',' => b'_',
        b if b.is_ascii_control() => b'_',
        b => b,
    };
    let Some(dst) = buf.get_mut(..name.len()) else {
        *spill = sanitize(name).replace(',', "_");
        let quoted = spill.contains('"');
        return (spill, quoted);
    };
    let mut quote = 0u64;
    let mut words = dst.chunks_exact_mut(8);
    let mut src = name.as_bytes().chunks_exact(8);
    for (d, s) in (&mut words).zip(&mut src) {
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        let w = u64::from_le_bytes(a);
        // Bytes below 0x20: adding 0x60 to the low seven bits stays below 0x80 (and the
        // byte's own high bit is clear).
        let below_space = !(((w & LOW7) + LO * 0x60) | w) & HI;
        let hit = eq(w, b'/')
            | eq(w, b'\\')
            | eq(w, b'.')
            | eq(w, b' ')
            | eq(w, b',')
            | eq(w, 0x7f)
            | below_space;
        quote |= eq(w, b'"');
        let bytes = (hit >> 7) * 0xff;
        d.copy_from_slice(&((w & !bytes) | ((LO * u64::from(b'_')) & bytes)).to_le_bytes());
    }
    for (d, &b) in words.into_remainder().iter_mut().zip(src.remainder()) {
        *d = field(b);
        quote |= u64::from(b == b'"');
    }
    debug_assert!(std::str::from_utf8(dst).is_ok());
    // SAFETY: `dst` is `name` (a `str`, so UTF-8) with some ASCII bytes replaced by the
    // ASCII `_`. An ASCII byte is a whole character in UTF-8 (never part of a multi-byte
    // sequence, whose bytes are all >= 0x80), so the bytes stay valid UTF-8.
    (unsafe { std::str::from_utf8_unchecked(dst) }, quote != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_names_are_sanitize_then_commas_on_the_stack_or_spilled() {
        let long = format!("Default/{}/Add-op0", "x.y,z".repeat(80));
        let names = [
            "Default/network-Net/layer3-Dense/MatMul-op3",
            "a.b c\\d,e\u{0}f\u{7f}g\r\nh\t",
            "Sch\u{f6}n/\u{4e2d}\u{6587}.\u{1f600},x",
            "quote\"in,name",
            "",
            long.as_str(),
        ];
        let mut all: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        // Every ASCII byte, and a few multi-byte characters, at every place of short and
        // word-long names.
        for len in [1usize, 7, 8, 9, 16, 23] {
            for at in 0..len {
                for b in (0u8..128).map(char::from).chain(['\u{e9}', '\u{4e2d}']) {
                    let mut n: Vec<char> = "abcdefghijklmnopqrstuvw"[..len].chars().collect();
                    n[at] = b;
                    all.push(n.into_iter().collect());
                }
            }
        }
        for name in all.iter().map(String::as_str) {
            let (mut buf, mut spill) = ([0u8; ROW_NAME_BUF], String::new());
            let (got, quote) = row_name(name, &mut buf, &mut spill);
            let got = got.to_owned();
            assert_eq!(got, sanitize(name).replace(',', "_"), "{name:?}");
            assert_eq!(quote, name.contains('"'), "{name:?}");
            // Short names never touch the spill string; long ones do.
            assert_eq!(spill.is_empty(), name.len() <= ROW_NAME_BUF, "{name:?}");
        }
    }

    #[test]
    fn a_row_appended_in_place_equals_the_owned_row_and_a_failed_one_says_so() {
        let layout = MindSporeLayout {
            tree: DumpTree::new(Path::new("/tmp/x"), 0, "Net"),
            spelling: DTypeSpelling::Cpu,
        };
        let mut s = dump_core::Summary::EMPTY;
        for v in [1.5, -2.0, 3.25] {
            s.push(v);
        }
        let stats = TensorStats {
            summary: Some(s),
            md5: None,
            sha1: None,
        };
        let t = RowTensor {
            id: TensorId {
                op_type: "Mat,Mul",
                op_name: "Default/net/MatMul-op0",
                task_id: 0,
                stream_id: 0,
                timestamp: 17,
                io: dump_stats::Io::Output,
                slot: 1,
            },
            dtype: DType::Float32,
            shape: &[3],
            data_size: 12,
            crc32: None,
            xor64: None,
        };
        let cats = CategorySet::parse(["max", "min", "avg"]).unwrap();
        let owned = layout
            .stat_row(t, &cats, RowValues::Host(&stats))
            .unwrap()
            .unwrap();
        assert!(
            owned.starts_with("Mat_Mul,Default_net_MatMul-op0,0,0,17,output,1,12,float32,"),
            "{owned}"
        );
        let mut out = String::from("before\n");
        assert!(
            layout
                .append_stat_row(&mut out, t, &cats, RowValues::Host(&stats))
                .unwrap()
        );
        assert_eq!(out, format!("before\n{owned}"));
        // An MD5 column without an MD5 is an error.
        let md5 = CategorySet::parse(["max", "md5"]).unwrap();
        assert!(
            layout
                .append_stat_row(&mut String::new(), t, &md5, RowValues::Host(&stats))
                .is_err()
        );
        // An empty tensor has no row.
        let empty = TensorStats {
            summary: None,
            ..stats
        };
        assert!(
            !layout
                .append_stat_row(&mut String::new(), t, &cats, RowValues::Host(&empty))
                .unwrap()
        );
    }
}
