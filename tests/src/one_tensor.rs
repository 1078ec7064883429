//! One kernel, one output tensor, one statistic row: the smallest end-to-end Dumper run, used
//! to compare a device tensor's row with the same bytes' host row.

use std::path::Path;

use dump_host::{DumpOptions, Dumper, TensorRef, config::Device, writer::WriterConfig};
use serde_json::json;

use crate::{
    config::{config, no_env},
    csv::parse_statistic_csv,
};

/// The categories the device tests ask for: the four a device computes and three it drops
/// (with a warning), so that a test sees both kinds of column.
pub const DEVICE_TEST_CATEGORIES: [&str; 7] = [
    "max",
    "min",
    "avg",
    "l2norm",
    "nan count",
    "zero count",
    "negative inf count",
];

/// Dumps `tensor` as output 0 of one `MatMul` kernel into `root` on a GPU device
/// (`stat_calc_mode: device`, precision `high`, [`DEVICE_TEST_CATEGORIES`], `saved_data` as
/// given, the writer as given), and returns the statistic row's cells from `Max Value` on.
///
/// Panics (it is a test helper) when the Dumper fails or the csv does not hold one row.
pub fn dump_gpu(
    root: &Path,
    saved_data: &str,
    writer: WriterConfig,
    tensor: TensorRef<'_>,
) -> Vec<String> {
    let cfg = config(
        root,
        json!({"saved_data": saved_data, "statistic_category": DEVICE_TEST_CATEGORIES}),
        json!({"stat_calc_mode": "device", "device_stat_precision_mode": "high"}),
    );
    let opts = DumpOptions {
        device: Device::Gpu,
        writer,
        ..DumpOptions::default()
    };
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(opts)
        .open_json(cfg)
        .expect("open the Dumper");
    d.begin_graph(0, &[]).expect("begin_graph");
    let step = d.begin_step();
    let k = step.kernel("MatMul", "Default/MatMul-op0").expect("kernel");
    k.output(0, tensor).expect("output");
    drop(k);
    step.finish().expect("finish the step");
    d.close().expect("close the Dumper");
    let path = root.join("rank_0/Net/0/0/statistic.csv");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let csv = parse_statistic_csv(&text);
    assert_eq!(csv.rows.len(), 1, "{text}");
    let from = csv.col("Max Value");
    csv.rows[0][from..].to_vec()
}
