//! Small dumps on disk for the report values' tests: statistic-only trees, `.npy` files and
//! `graphs/*.ir` source rows, in MindSpore's layout.

use std::path::{Path, PathBuf};

/// The statistic.csv header the tests' rows follow.
pub const HEADER: &str = "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,L2Norm Value,NaN Count";

/// A fresh, empty folder for test `tag`.
pub fn fresh(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-report-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The iteration folder of `root` (rank 0, net `Net`, graph 0, iteration 0), created.
fn iteration(root: &Path) -> PathBuf {
    let it = root.join("rank_0/Net/0/0");
    std::fs::create_dir_all(&it).unwrap();
    it
}

/// A statistic-only dump at `root` whose rows (after [`HEADER`]) are `rows`.
pub fn stat_dump(root: &Path, rows: &[String]) -> PathBuf {
    let mut text = format!("{HEADER}\n");
    for r in rows {
        text += r;
        text.push('\n');
    }
    std::fs::write(iteration(root).join("statistic.csv"), text).unwrap();
    root.to_path_buf()
}

/// One output row of kernel `Add` number `i` with max = min = `v` (l2norm `v`, no NaN).
pub fn add_row(i: usize, v: f64) -> String {
    format!(
        "Add,Default_Add-op{i},0,0,{},output,0,4,float32,\"(1)\",{v},{v},{v},0",
        10 + i
    )
}

/// `OP.Default_NAME.0.0.TS.output.0.DefaultFormat.float32.npy` holding `v` (1-D float32).
pub fn npy(root: &Path, op: &str, name: &str, ts: u64, v: &[f32]) {
    let mut b = vec![0u8; 128];
    let n = dump_npy::encode_header("<f4", &[v.len()], &mut b).unwrap();
    b.truncate(n);
    b.extend(v.iter().flat_map(|x| x.to_le_bytes()));
    let file = format!("{op}.Default_{name}.0.0.{ts}.output.0.DefaultFormat.float32.npy");
    std::fs::write(iteration(root).join(file), b).unwrap();
}

/// `graphs/ms_output_trace_code_graph_0.ir` of rank 0 with `ir` as its text.
pub fn graph(root: &Path, ir: &str) {
    let g = root.join("rank_0/graphs");
    std::fs::create_dir_all(&g).unwrap();
    std::fs::write(g.join("ms_output_trace_code_graph_0.ir"), ir).unwrap();
}
