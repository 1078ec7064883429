//! CANN's GE dump layout, the one an `acl.json` or torchair's `dump_config` asks for
//! (shared spec `peers.md` §5, `cann-dump.md` §3):
//!
//! - directories `{dump_path}/{YYYYMMDDHHMMSS}/{device_id}/{model_name}/{model_id}/{data_index}/`
//!   (single-operator dumps, `dump_op_switch: on` without a `dump_list`: `{dump_path}/{time}/
//!   {device_id}/`), torchair inserting `worldsize{W}_global_rank{R}/` after `dump_path`;
//! - one CANN binary dump file per kernel, `{op_type}.{op_name}.{task_id}.{stream_id}.
//!   {timestamp}` (` `, `.`, `/`, `\` become `_`; the timestamp is 16 digits of µs), holding
//!   every input and output of the kernel (the Dumper gathers them, `dumper/ge.rs`);
//! - with `dump_data: stats`, `{same name}.csv` instead: CANN's statistics table
//!   ([`GeStats::header`], [`GeStats::row`]);
//! - torchair's eager npy dump: `{dump_path}/worldsize…/graph_{graph}/{step}/
//!   {node}-{target}.{INPUT|OUTPUT}.{i}.{UTC %Y%m%d%H%M%S%f}.npy`, written through the
//!   Dumper's usual `.npy` path ([`OutputLayout::tensor_file`]).
//!
//! What a Rust runtime has that GE's names want: `model_name` is the acl.json's `dump_list`
//! model name (or [`DEFAULT_MODEL_NAME`]), `model_id` the graph id given to
//! [`crate::Dumper::begin_graph`], `data_index` the step number, `task_id` the kernel's
//! sequence number in the dump (stream 0), `device_id` the Dumper's device id. The time
//! directory is UTC (GE uses local time). docs/compat.md lists these choices.

use std::path::{Path, PathBuf};

use dump_core::{DType, Summary};
use dump_stats::{CategorySet, TensorId};

use super::{Io, OutputLayout, RowTensor, RowValues};

/// The model name of a GE dump when the config names none (torchair; an acl.json whose
/// `dump_list` has layers but no `model_name`).
pub const DEFAULT_MODEL_NAME: &str = "Net";

/// What a GE-layout dump writes, resolved from an acl.json or torchair config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeSettings {
    /// `dump_path`, with torchair's `worldsize{W}_global_rank{R}` appended when it applies:
    /// the directory `{time}/` is made in.
    pub base: PathBuf,
    /// torchair's directory below `dump_path` (`worldsize1_global_rank0`), if any.
    pub prefix: Option<String>,
    /// `{YYYYMMDDHHMMSS}`, UTC, of the Dumper's start (filled in when the plan is made).
    pub time: String,
    /// The model directory's name (sanitised), or `None` for the single-operator layout.
    pub model_name: Option<String>,
    /// Exact op names to dump (`dump_list[].layer`, torchair's `dump_layer`); `None`: every
    /// kernel.
    pub layers: Option<Vec<String>>,
    /// `dump_data: stats`: the statistics columns (no tensor file).
    pub stats: Option<GeStats>,
    /// torchair's eager npy dump instead of CANN files.
    pub npy: bool,
}

/// One `dump_stats` item, in CANN's fixed column order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GeStat {
    /// `Max` → `Max Value`.
    Max,
    /// `Min` → `Min Value`.
    Min,
    /// `Avg` → `Avg Value`.
    Avg,
    /// `Nan` → `Nan Count`.
    Nan,
    /// `Negative Inf` → `Negative Inf Count`.
    NegativeInf,
    /// `Positive Inf` → `Positive Inf Count`.
    PositiveInf,
    /// `L2norm` → `l2norm`.
    L2norm,
}

impl GeStat {
    /// The item of `dump_stats` spelled `name` (`Max`, `Negative Inf`, `L2norm`, ...).
    pub fn from_item(name: &str) -> Option<GeStat> {
        Some(match name {
            "Max" => GeStat::Max,
            "Min" => GeStat::Min,
            "Avg" => GeStat::Avg,
            "Nan" => GeStat::Nan,
            "Negative Inf" => GeStat::NegativeInf,
            "Positive Inf" => GeStat::PositiveInf,
            "L2norm" => GeStat::L2norm,
            _ => return None,
        })
    }

    /// Its column header.
    pub fn column(self) -> &'static str {
        match self {
            GeStat::Max => "Max Value",
            GeStat::Min => "Min Value",
            GeStat::Avg => "Avg Value",
            GeStat::Nan => "Nan Count",
            GeStat::NegativeInf => "Negative Inf Count",
            GeStat::PositiveInf => "Positive Inf Count",
            GeStat::L2norm => "l2norm",
        }
    }
}

/// The columns of CANN's statistics csv: the default set (`dump_stats` absent) or the chosen
/// items.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeStats {
    /// `None`: `dump_stats` absent (Max, Min, Avg, Count, Nan, Negative Inf, Positive Inf);
    /// `Some`: `Count`, then these, in [`GeStat`]'s order, each once.
    pub chosen: Option<Vec<GeStat>>,
}

/// The columns every row starts with.
const LEADING: &str = "Input/Output,Index,Data Size,Data Type,Format,Shape";

/// One cell of a statistics row.
enum Cell {
    Count,
    Stat(GeStat),
}

impl GeStats {
    /// The set `dump_stats` lists (`None`: absent), sorted into CANN's order, duplicates
    /// dropped; an item CANN does not know is `Err` naming it.
    pub fn from_items<'a>(
        items: Option<impl IntoIterator<Item = &'a str>>,
    ) -> Result<Self, String> {
        let Some(items) = items else {
            return Ok(GeStats { chosen: None });
        };
        let mut v = Vec::new();
        for it in items {
            v.push(
                GeStat::from_item(it).ok_or_else(|| format!("{it:?} is not a dump_stats item"))?,
            );
        }
        v.sort();
        v.dedup();
        Ok(GeStats { chosen: Some(v) })
    }

    fn cells(&self) -> Vec<Cell> {
        match &self.chosen {
            None => vec![
                Cell::Stat(GeStat::Max),
                Cell::Stat(GeStat::Min),
                Cell::Stat(GeStat::Avg),
                Cell::Count,
                Cell::Stat(GeStat::Nan),
                Cell::Stat(GeStat::NegativeInf),
                Cell::Stat(GeStat::PositiveInf),
            ],
            Some(c) => std::iter::once(Cell::Count)
                .chain(c.iter().map(|s| Cell::Stat(*s)))
                .collect(),
        }
    }

    /// The header line, with its `\n`.
    pub fn header(&self) -> String {
        let mut h = String::from(LEADING);
        for c in self.cells() {
            h.push(',');
            h.push_str(match c {
                Cell::Count => "Count",
                Cell::Stat(s) => s.column(),
            });
        }
        h.push('\n');
        h
    }

    /// One row, with its `\n`: `Input`/`Output`, the index, the bytes, `DT_{type}`, the
    /// format name, the shape as `AxBxC`, then the statistics of `summary` (`None`: the
    /// dtype has none, every statistic cell is `NA`; Count is the element count).
    pub fn row(
        &self,
        (io, index): (Io, u32),
        (data_size, data_type, format): (u64, &str, &str),
        shape: &[usize],
        elements: u64,
        summary: Option<&Summary>,
        dtype: DType,
    ) -> String {
        let io = match io {
            Io::Input => "Input",
            Io::Output => "Output",
        };
        let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
        let mut r = format!(
            "{io},{index},{data_size},{data_type},{format},{}",
            dims.join("x")
        );
        for c in self.cells() {
            r.push(',');
            match (c, summary) {
                (Cell::Count, _) => r.push_str(&elements.to_string()),
                (Cell::Stat(s), Some(sm)) if sm.count > 0 => r.push_str(&stat_cell(s, sm, dtype)),
                (Cell::Stat(_), _) => r.push_str("NA"),
            }
        }
        r.push('\n');
        r
    }
}

/// A statistic of `s` as CANN's csv shows it [I]: values in the shortest form that reads back
/// exactly (`f32` for tensors of 32 bits or less, so `0.1f32` is `0.1`), counts as integers,
/// `nan`, `inf`, `-inf`.
fn stat_cell(stat: GeStat, s: &Summary, dtype: DType) -> String {
    let narrow = dtype.is_float() && dtype.size().is_some_and(|b| b <= 4);
    let value = |v: f64| {
        if v.is_nan() {
            "nan".to_owned()
        } else if narrow && stat != GeStat::Avg && stat != GeStat::L2norm {
            format!("{}", v as f32)
        } else {
            format!("{v}")
        }
    };
    match stat {
        GeStat::Max => value(s.max_value()),
        GeStat::Min => value(s.min_value()),
        GeStat::Avg => value(s.avg()),
        GeStat::L2norm => value(s.l2norm()),
        GeStat::Nan => s.nan.to_string(),
        GeStat::NegativeInf => s.neg_inf.to_string(),
        GeStat::PositiveInf => s.pos_inf.to_string(),
    }
}

/// `name` with ` `, `.`, `/` and `\` made `_`, as GE writes op types, op names and model
/// names in paths.
pub fn ge_sanitize(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ' ' | '.' | '/' | '\\' => '_',
            c if c.is_control() => '_',
            c => c,
        })
        .collect()
}

/// A kernel's CANN file name: `{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}`, the
/// timestamp as 16 digits of µs.
pub fn ge_file_name(op_type: &str, op_name: &str, task_id: u32, stream_id: u32, us: u64) -> String {
    format!(
        "{}.{}.{task_id}.{stream_id}.{us:016}",
        ge_sanitize(op_type),
        ge_sanitize(op_name)
    )
}

/// `(year, month, day, hour, minute, second, micros)` of `us` µs since the Unix epoch, UTC.
pub fn utc_fields(us: u64) -> (i64, u32, u32, u32, u32, u32, u32) {
    let secs = (us / 1_000_000) as i64;
    let micros = (us % 1_000_000) as u32;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400) as u32;
    // Days to civil date (proleptic Gregorian), after Howard Hinnant's published algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60, micros)
}

/// `YYYYMMDDHHMMSS` of `us` µs since the epoch, UTC (GE's time directory).
pub fn time_dir(us: u64) -> String {
    let (y, mo, d, h, mi, s, _) = utc_fields(us);
    format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}")
}

/// µs since the Unix epoch now.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// GE's layout ([`GeSettings`]) as an [`OutputLayout`]: the directories, and torchair's npy
/// names. CANN files and statistics csvs are written per kernel by the Dumper, not through
/// `statistic.csv` rows.
#[derive(Clone, Debug)]
pub struct GeLayout {
    settings: GeSettings,
    device_id: u32,
}

impl GeLayout {
    /// The layout of `settings` for device `device_id`.
    pub fn new(settings: GeSettings, device_id: u32) -> Self {
        GeLayout {
            settings,
            device_id,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &GeSettings {
        &self.settings
    }

    fn device_dir(&self) -> PathBuf {
        self.settings
            .base
            .join(&self.settings.time)
            .join(self.device_id.to_string())
    }

    /// A directory opdump's own files (none today) would go to: never one GE readers look in.
    fn own_dir(&self) -> PathBuf {
        self.settings.base.join(".opdump")
    }
}

impl OutputLayout for GeLayout {
    fn name(&self) -> &'static str {
        if self.settings.npy {
            "torchair-npy"
        } else {
            "ge"
        }
    }

    fn root(&self) -> &Path {
        &self.settings.base
    }

    fn iteration_dir(&self, graph: u32, iteration: u64) -> PathBuf {
        if self.settings.npy {
            return self
                .settings
                .base
                .join(format!("graph_{graph}"))
                .join(iteration.to_string());
        }
        match &self.settings.model_name {
            None => self.device_dir(),
            Some(m) => self
                .device_dir()
                .join(m)
                .join(graph.to_string())
                .join(iteration.to_string()),
        }
    }

    fn constants_dir(&self, graph: u32) -> PathBuf {
        self.own_dir().join("constants").join(graph.to_string())
    }

    fn metadata_dir(&self) -> PathBuf {
        self.own_dir()
    }

    fn graphs_dir(&self) -> PathBuf {
        self.own_dir().join("graphs")
    }

    fn execution_order_dir(&self) -> PathBuf {
        self.own_dir().join("execution_order")
    }

    fn trigger_file(&self, n: u32) -> PathBuf {
        self.own_dir().join(format!("trigger_{n}.json"))
    }

    /// torchair's npy name `{node}-{target}.{INPUT|OUTPUT}.{i}.{UTC %Y%m%d%H%M%S%f}.npy`
    /// (node: the op name, target: the op type, both sanitised; the time from the tensor's µs
    /// timestamp); in CANN mode the kernel's file name (the Dumper names CANN files itself).
    fn tensor_file(&self, id: TensorId<&str>, _format: &str, _dtype: DType) -> String {
        if !self.settings.npy {
            return ge_file_name(
                id.op_type,
                id.op_name,
                id.task_id,
                id.stream_id,
                id.timestamp,
            );
        }
        let (y, mo, d, h, mi, s, us) = utc_fields(id.timestamp);
        let io = match id.io {
            Io::Input => "INPUT",
            Io::Output => "OUTPUT",
        };
        format!(
            "{}-{}.{io}.{}.{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}{us:06}.npy",
            ge_sanitize(id.op_name),
            ge_sanitize(id.op_type),
            id.slot
        )
    }

    fn statistic_csv(&self, dir: &Path) -> PathBuf {
        dir.join("statistic.csv")
    }

    fn stat_header(&self, _categories: &CategorySet) -> String {
        String::new()
    }

    /// No `statistic.csv` rows: CANN's statistics are one csv per kernel.
    fn stat_row(
        &self,
        _t: RowTensor<'_>,
        _categories: &CategorySet,
        _values: RowValues<'_>,
    ) -> Result<Option<String>, dump_stats::Error> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(model: Option<&str>) -> GeSettings {
        GeSettings {
            base: PathBuf::from("/d/worldsize1_global_rank0"),
            prefix: Some("worldsize1_global_rank0".into()),
            time: "20260102030405".into(),
            model_name: model.map(str::to_owned),
            layers: None,
            stats: None,
            npy: false,
        }
    }

    #[test]
    fn directories_model_and_single_op() {
        let l = GeLayout::new(settings(Some("resnet_v1")), 3);
        assert_eq!(
            l.iteration_dir(7, 12),
            Path::new("/d/worldsize1_global_rank0/20260102030405/3/resnet_v1/7/12")
        );
        let l = GeLayout::new(settings(None), 0);
        assert_eq!(
            l.iteration_dir(7, 12),
            Path::new("/d/worldsize1_global_rank0/20260102030405/0")
        );
        let npy = GeLayout::new(
            GeSettings {
                npy: true,
                ..settings(None)
            },
            0,
        );
        assert_eq!(
            npy.iteration_dir(1, 4),
            Path::new("/d/worldsize1_global_rank0/graph_1/4")
        );
    }

    #[test]
    fn file_names() {
        assert_eq!(
            ge_file_name(
                "Conv2D",
                "Default/net.conv 1\\x",
                5,
                0,
                1_700_000_000_123_456
            ),
            "Conv2D.Default_net_conv_1_x.5.0.1700000000123456"
        );
        assert_eq!(
            ge_file_name("Add", "a", 0, 0, 42),
            "Add.a.0.0.0000000000000042"
        );
        let npy = GeLayout::new(
            GeSettings {
                npy: true,
                ..settings(None)
            },
            0,
        );
        let id = TensorId {
            op_type: "aten.add.Tensor",
            op_name: "add_1",
            task_id: 0,
            stream_id: 0,
            // 2023-11-14 22:13:20.123456 UTC
            timestamp: 1_700_000_000_123_456,
            io: Io::Output,
            slot: 0,
        };
        assert_eq!(
            npy.tensor_file(id, "DefaultFormat", DType::Float32),
            "add_1-aten_add_Tensor.OUTPUT.0.20231114221320123456.npy"
        );
    }

    #[test]
    fn utc_dates() {
        assert_eq!(time_dir(0), "19700101000000");
        assert_eq!(time_dir(951_782_400_000_000), "20000229000000");
        assert_eq!(time_dir(1_700_000_000_123_456), "20231114221320");
        assert_eq!(utc_fields(4_102_444_799_999_999).0, 2099);
    }

    #[test]
    fn stats_header_default_and_chosen() {
        let d = GeStats::from_items(None::<Vec<&str>>).unwrap();
        assert_eq!(
            d.header(),
            "Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,\
             Count,Nan Count,Negative Inf Count,Positive Inf Count\n"
        );
        let c = GeStats::from_items(Some(["L2norm", "Nan", "Max", "Nan"])).unwrap();
        assert_eq!(
            c.header(),
            "Input/Output,Index,Data Size,Data Type,Format,Shape,Count,Max Value,Nan Count,l2norm\n"
        );
        assert!(GeStats::from_items(Some(["Median"])).is_err());
    }

    #[test]
    fn stats_rows() {
        let mut s = Summary::EMPTY;
        for v in [1.5f64, -2.0, f64::INFINITY, 0.1f32 as f64] {
            s.push(v);
        }
        let d = GeStats::from_items(None::<Vec<&str>>).unwrap();
        let row = d.row(
            (Io::Output, 1),
            (16, "DT_FLOAT", "ND"),
            &[2, 2],
            4,
            Some(&s),
            DType::Float32,
        );
        assert!(
            row.starts_with("Output,1,16,DT_FLOAT,ND,2x2,inf,-2,inf,4,0,0,1\n"),
            "{row}"
        );
        let na = d.row(
            (Io::Input, 0),
            (16, "DT_COMPLEX64", "ND"),
            &[2],
            2,
            None,
            DType::Complex64,
        );
        assert_eq!(na, "Input,0,16,DT_COMPLEX64,ND,2,NA,NA,NA,2,NA,NA,NA\n");
    }
}
