//! A dump read back: one [`TensorRecord`] per dumped tensor, whichever dialect wrote it, the
//! kernels in run order ([`Dump::kernels`]), execution orders and graph edges when the dialect
//! has them, and the files that could not be used ([`Dump::problems`]).

use std::path::{Path, PathBuf};

use dump_core::DType;
use dump_stats::{Io, TensorId};

use crate::{Error, GraphNode, Stats, TensorSource, source::summarize_cann, summarize_npy};

/// One dumped tensor, from whichever sources the layout has: its `.npy` file, its
/// `statistic.csv` row, or both.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorRecord {
    /// Rank (`rank_{n}`).
    pub rank: u32,
    /// Network name (the `net_name` directory).
    pub net: String,
    /// Graph id.
    pub graph: u32,
    /// Iteration.
    pub iteration: u64,
    /// Op type, op name (sanitised, as in the file name), task and stream ids, timestamp (µs:
    /// MindSpore and opdump both stamp tensors in the order they ran), input or output, slot.
    pub id: TensorId<String>,
    /// The dtype the name or row gives.
    pub dtype: DType,
    /// Dimensions (from the `.npy` header, else the row).
    pub shape: Vec<usize>,
    /// Where the data is (an `.npy` file, or a payload inside a CANN dump file), when there
    /// is data that could be opened.
    pub source: Option<TensorSource>,
    /// The dtype stored in the file (differs from `dtype` for widened bf16/int4/uint1).
    pub stored: Option<DType>,
    /// Statistics from the `statistic.csv` row (empty when there is no row).
    pub row_stats: Option<Stats>,
    /// The tensor's own name within its kernel, where the dialect gives one: the parameter an
    /// msprobe `parameters_grad` entry holds the gradient of (`weight`), else `None`.
    pub arg_name: Option<String>,
    /// Why the tensor's data could not be opened, when it could not: its file and the reason
    /// (also among the dump's [`problems`](Dump::problems)). Without a statistic row nothing
    /// but its name is then known, so `compare` reports the pair as unreadable.
    pub unreadable: Option<String>,
}

impl TensorRecord {
    /// `input.0`, `output.1`.
    pub fn io_slot(&self) -> String {
        self.id.io_slot().to_string()
    }

    /// The file holding the data (an `.npy` file or a CANN dump file), when there is one.
    pub fn file(&self) -> Option<&Path> {
        self.source.as_ref().map(TensorSource::path)
    }

    /// Elements; `None` when the shape's product passes `usize` (a hostile `statistic.csv`
    /// row or header declares any dims).
    pub fn elems(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
    }

    /// The statistics: the row's, completed from the file (streamed) when the row lacks
    /// columns or there is no row. `hashes` asks for digests the row lacks.
    pub fn stats(&self, hashes: dump_stats::Hashes) -> Result<Stats, Error> {
        let mut s = self.row_stats.clone().unwrap_or_default();
        let need_hash = (hashes.md5 && s.md5.is_none()) || (hashes.sha1 && s.sha1.is_none());
        if s.is_complete() && !need_hash {
            return Ok(s);
        }
        match &self.source {
            Some(TensorSource::File(f)) => {
                let sum = summarize_npy(f, Some(self.dtype), hashes)?;
                s.fill_from(Stats::from_tensor_stats(&sum.stats));
                Ok(s)
            }
            Some(TensorSource::Cann(c)) => {
                s.fill_from(Stats::from_tensor_stats(&summarize_cann(c, hashes)?));
                Ok(s)
            }
            None if self.row_stats.is_some() => Ok(s),
            None => Err(Error::format(
                &PathBuf::from(format!("{}.{}", self.id.op_type, self.id.op_name)),
                format!(
                    "{}: its data file could not be read (see the dump's problems) and it has no statistic.csv row",
                    self.io_slot()
                ),
            )),
        }
    }
}

/// A problem with one file or row of a dump; reading goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file (or directory) concerned.
    pub path: PathBuf,
    /// What is wrong, and what was expected.
    pub message: String,
}

/// One kernel launch: the tensors of one op in one iteration.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelRef {
    /// Rank.
    pub rank: u32,
    /// Network name.
    pub net: String,
    /// Graph id.
    pub graph: u32,
    /// Iteration.
    pub iteration: u64,
    /// Primitive name.
    pub op_type: String,
    /// Sanitised op name.
    pub op_name: String,
    /// Indices into [`Dump::tensors`]: inputs by slot, then outputs by slot.
    pub tensors: Vec<usize>,
    /// The earliest timestamp of its tensors (run order).
    pub first_timestamp: u64,
    /// Position in `ms_execution_order_graph_{graph}.csv`, when the name is listed there.
    pub exec_index: Option<usize>,
    /// The value names its graph node defines (`graphs/*.ir`), by output slot; empty when the
    /// graph does not list it.
    pub values: Vec<String>,
    /// Its full name with scope as the graph file writes it (`Default/conv1-Conv2d/Conv2D-op5`),
    /// when the graph lists it and names it so.
    pub full_name: Option<String>,
    /// Op names of the graph nodes whose outputs it reads (empty without a graph).
    pub producers: Vec<String>,
    /// The ONNX node it came from, when its graph node's source row names one.
    pub onnx: Option<crate::graph::OnnxOrigin>,
}

/// A dump read back.
#[derive(Clone, Debug, Default)]
pub struct Dump {
    /// The directory given.
    pub root: PathBuf,
    /// The dialect found ([`Dialect::name`](crate::dialect::Dialect::name)).
    pub dialect: &'static str,
    /// Every tensor, in walk order.
    pub tensors: Vec<TensorRecord>,
    /// Execution order per (rank, graph): sanitised op names in order.
    pub execution_orders: Vec<((u32, u32), Vec<String>)>,
    /// Graph nodes per (rank, graph) from `graphs/*.ir`, when present.
    pub graphs: Vec<((u32, u32), Vec<GraphNode>)>,
    /// Files and rows that could not be used, and why.
    pub problems: Vec<Problem>,
    /// The module hierarchy (msprobe's `construct.json`): each call and the module call it ran
    /// in; empty for dialects without one.
    pub modules: Vec<crate::dialect::ModuleEdge>,
    /// Call stacks (msprobe's `stack.json`): `(rank, step, call name)` → frames, outermost
    /// last as msprobe writes them.
    pub stacks: Vec<((u32, u64, String), Vec<String>)>,
}

impl Dump {
    /// Reads the dump under `root` with the first dialect that recognises it
    /// ([`dialect::DIALECTS`](crate::dialect::DIALECTS)). A `root` that is not a directory, or
    /// holds no known dialect, is an error naming it and what was looked for (and a directory
    /// up to two levels below that holds a dump, when there is one).
    pub fn open(root: &Path) -> Result<Dump, Error> {
        crate::dialect::open(root)
    }

    /// The kernels in run order: by rank, iteration, then the earliest timestamp of their
    /// tensors (MindSpore and opdump both stamp tensors as kernels run), ties broken by the
    /// execution-order position.
    pub fn kernels(&self) -> Vec<KernelRef> {
        use std::collections::HashMap;
        let mut pos: HashMap<(u32, u32), HashMap<&str, usize>> = HashMap::new();
        for ((rank, graph), names) in &self.execution_orders {
            let m = pos.entry((*rank, *graph)).or_default();
            for (i, n) in names.iter().enumerate() {
                m.entry(n.as_str()).or_insert(i);
            }
        }
        let mut nodes: HashMap<(u32, u32), HashMap<&str, &GraphNode>> = HashMap::new();
        let mut lists: HashMap<(u32, u32), &[GraphNode]> = HashMap::new();
        for (key, list) in &self.graphs {
            lists.insert(*key, list);
            let m = nodes.entry(*key).or_default();
            for n in list {
                m.entry(n.op_name.as_str()).or_insert(n);
            }
        }
        let mut index: HashMap<(u32, &str, u32, u64, &str, &str), usize> = HashMap::new();
        let mut out: Vec<KernelRef> = Vec::new();
        for (i, t) in self.tensors.iter().enumerate() {
            let key = (
                t.rank,
                t.net.as_str(),
                t.graph,
                t.iteration,
                t.id.op_type.as_str(),
                t.id.op_name.as_str(),
            );
            let k = *index.entry(key).or_insert_with(|| {
                out.push(KernelRef {
                    rank: t.rank,
                    net: t.net.clone(),
                    graph: t.graph,
                    iteration: t.iteration,
                    op_type: t.id.op_type.clone(),
                    op_name: t.id.op_name.clone(),
                    tensors: Vec::new(),
                    first_timestamp: u64::MAX,
                    exec_index: pos
                        .get(&(t.rank, t.graph))
                        .and_then(|m| m.get(t.id.op_name.as_str()).copied()),
                    values: Vec::new(),
                    full_name: None,
                    producers: Vec::new(),
                    onnx: None,
                });
                let node = nodes
                    .get(&(t.rank, t.graph))
                    .and_then(|m| m.get(t.id.op_name.as_str()).copied());
                if let (Some(n), Some(list)) = (node, lists.get(&(t.rank, t.graph))) {
                    let k = out.last_mut().expect("just pushed");
                    k.values.clone_from(&n.values);
                    k.full_name = Some(n.full_name.clone()).filter(|f| !f.is_empty());
                    k.onnx = n.onnx.clone();
                    k.producers = n
                        .inputs
                        .iter()
                        .filter_map(|&j| list.get(j))
                        .map(|p| p.op_name.clone())
                        .collect();
                }
                out.len() - 1
            });
            out[k].tensors.push(i);
            out[k].first_timestamp = out[k].first_timestamp.min(t.id.timestamp);
        }
        for k in &mut out {
            k.tensors.sort_by_key(|&i| {
                let t = &self.tensors[i];
                (t.id.io == Io::Output, t.id.slot, t.id.timestamp)
            });
        }
        out.sort_by(|a, b| {
            (
                a.rank,
                a.iteration,
                a.first_timestamp,
                a.exec_index,
                &a.op_name,
            )
                .cmp(&(
                    b.rank,
                    b.iteration,
                    b.first_timestamp,
                    b.exec_index,
                    &b.op_name,
                ))
        });
        out
    }

    /// Total bytes of the `.npy` data (elements times dtype size, as stored).
    pub fn data_bytes(&self, t: &TensorRecord) -> u64 {
        t.elems()
            .and_then(|e| t.stored.unwrap_or(t.dtype).storage_bytes(e))
            .unwrap_or(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dump_stats::names::short_name;

    #[test]
    fn a_parent_of_the_dump_root_is_refused_naming_the_dump_below() {
        let top = std::env::temp_dir().join(format!("opdump-read-parent-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&top);
        std::fs::create_dir_all(top.join("files/dump/rank_0/Net/0/0")).unwrap();
        let e = Dump::open(&top.join("files")).unwrap_err().to_string();
        assert!(e.contains("no dump found"), "{e}");
        assert!(
            e.contains(&format!("{} holds one", top.join("files/dump").display())),
            "{e}"
        );
        let e = Dump::open(&top).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{} holds one", top.join("files/dump").display())),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&top);
    }

    fn npy(dtype: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 256];
        let n = dump_npy::encode_header(dtype, shape, &mut b).unwrap();
        b.truncate(n);
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn long_names_through_mapping_csv_int4_and_rows_pair_with_files() {
        let root = std::env::temp_dir().join(format!("opdump-read-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let it = root.join("rank_3/Net/1/7");
        std::fs::create_dir_all(&it).unwrap();
        let long_op = format!("Default_{}_Add-op0", "x".repeat(300));
        let long = format!("Add.{long_op}.0.0.5.output.0.DefaultFormat.Float32.npy");
        let short = short_name(&long);
        let vals: Vec<u8> = [1.0f32, f32::INFINITY]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        std::fs::write(it.join(&short), npy("<f4", &[2], &vals)).unwrap();
        std::fs::write(it.join("mapping.csv"), format!("{short},{long}\n")).unwrap();
        // int4 widened to one byte per element (opdump's file for numpy), 0-d.
        std::fs::write(
            it.join("Cast.Default_Cast-op1.0.0.6.output.0.DefaultFormat.Int4.npy"),
            npy("|i1", &[], &[0xf9]),
        )
        .unwrap();
        std::fs::write(
            it.join("statistic.csv"),
            "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,NaN Count\n\
             Cast,Default_Cast-op1,0,0,6,output,0,1,int4,\"()\",-7,0,\n",
        )
        .unwrap();
        // float8 widened to f32 and uint4 widened to one byte per element (opdump's files).
        let f8: Vec<u8> = [57344.0f32, f32::NEG_INFINITY, 0.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let f8_name = "Cast.Default_Cast-op2.0.0.7.output.0.DefaultFormat.Float8E5M2.npy";
        std::fs::write(it.join(f8_name), npy("<f4", &[3], &f8)).unwrap();
        let u4_name = "Cast.Default_Cast-op3.0.0.8.output.0.DefaultFormat.uint4.npy";
        std::fs::write(it.join(u4_name), npy("|u1", &[2], &[15, 3])).unwrap();
        // float8_e4m3fnuz widened to f32: its max (240), its one NaN (0x80) and -0.5.
        let fnuz: Vec<u8> = [240.0f32, f32::from_bits(0xffc0_0000), -0.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let fnuz_name = "Cast.Default_Cast-op4.0.0.9.output.0.DefaultFormat.Float8E4M3FNUZ.npy";
        std::fs::write(it.join(fnuz_name), npy("<f4", &[3], &fnuz)).unwrap();
        let d = Dump::open(&root).unwrap();
        assert!(d.problems.is_empty(), "{:?}", d.problems);
        assert_eq!(d.tensors.len(), 5);
        let t = d
            .tensors
            .iter()
            .find(|t| t.id.op_name.ends_with("op4"))
            .unwrap();
        assert_eq!(
            (t.dtype, t.stored),
            (DType::Float8E4M3FNUZ, Some(DType::Float32))
        );
        let s = t.stats(dump_stats::Hashes::NONE).unwrap();
        // A NaN makes max and min NaN (MindSpore's rule); the NaN is counted, not a -0.
        assert!(s.max.is_some_and(f64::is_nan) && s.min.is_some_and(f64::is_nan));
        assert_eq!(
            (s.nan, s.zero, s.pos_inf, s.count),
            (Some(1), Some(0), Some(0), Some(3))
        );
        let f8 = d
            .tensors
            .iter()
            .find(|t| t.id.op_name.ends_with("op2"))
            .unwrap();
        assert_eq!(
            (f8.dtype, f8.stored),
            (DType::Float8E5M2, Some(DType::Float32))
        );
        let s = f8.stats(dump_stats::Hashes::NONE).unwrap();
        assert_eq!(
            (s.max, s.min, s.neg_inf, s.count),
            (Some(57344.0), Some(f64::NEG_INFINITY), Some(1), Some(3))
        );
        let u4 = d
            .tensors
            .iter()
            .find(|t| t.id.op_name.ends_with("op3"))
            .unwrap();
        assert_eq!((u4.dtype, u4.stored), (DType::UInt4, Some(DType::UInt8)));
        let s = u4.stats(dump_stats::Hashes::NONE).unwrap();
        assert_eq!((s.max, s.min), (Some(15.0), Some(3.0)));
        let d = {
            std::fs::remove_file(it.join(f8_name)).unwrap();
            std::fs::remove_file(it.join(u4_name)).unwrap();
            std::fs::remove_file(it.join(fnuz_name)).unwrap();
            Dump::open(&root).unwrap()
        };
        assert_eq!(d.tensors.len(), 2);
        let add = d.tensors.iter().find(|t| t.id.op_type == "Add").unwrap();
        assert_eq!((add.rank, add.graph, add.iteration), (3, 1, 7));
        assert_eq!(add.id.op_name, long_op);
        let s = add.stats(dump_stats::Hashes::NONE).unwrap();
        assert_eq!((s.pos_inf, s.nonfinite()), (Some(1), Some(true)));
        let cast = d.tensors.iter().find(|t| t.id.op_type == "Cast").unwrap();
        assert_eq!((cast.dtype, cast.stored), (DType::Int4, Some(DType::Int8)));
        assert_eq!(cast.row_stats.as_ref().unwrap().max, Some(-7.0));
        // The row lacks min/l2norm: completed from the file, the row's max kept.
        let s = cast.stats(dump_stats::Hashes::NONE).unwrap();
        assert_eq!((s.max, s.min, s.count), (Some(-7.0), Some(-7.0), Some(1)));
        let k = d.kernels();
        assert_eq!(k.len(), 2);
        assert_eq!(k[0].op_type, "Add", "run order follows the timestamps");
        let _ = std::fs::remove_dir_all(&root);
    }
}
