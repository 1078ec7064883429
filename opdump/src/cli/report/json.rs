//! JSON pieces shared by `inspect --json` and `compare --json`. Non-finite numbers are strings
//! (`"nan"`, `"inf"`, `"-inf"`), since JSON has no such numbers.

use dump_core::compare::PairMetrics;
use dump_read::{
    Dump, Stats,
    compare::{PairOutcome, PairResult},
};
use serde_json::{Map, Value, json};

/// A float as JSON: a number when finite, else `"nan"`, `"inf"` or `"-inf"`.
pub fn num(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else if v.is_nan() {
        json!("nan")
    } else if v > 0.0 {
        json!("inf")
    } else {
        json!("-inf")
    }
}

fn opt(v: Option<f64>) -> Value {
    v.map(num).unwrap_or(Value::Null)
}

/// `rank`, `iteration`, `graph`, `op_type`, `op_name` (as in the file name), `io`, `slot` of
/// tensor `i` of `dump`, into `m`.
pub fn tensor_id_into(m: &mut Map<String, Value>, dump: &Dump, i: usize) {
    let t = &dump.tensors[i];
    m.insert("rank".into(), json!(t.rank));
    m.insert("iteration".into(), json!(t.iteration));
    m.insert("graph".into(), json!(t.graph));
    m.insert("op_type".into(), json!(t.id.op_type));
    m.insert("op_name".into(), json!(t.id.op_name));
    m.insert("io".into(), json!(t.id.io.as_str()));
    m.insert("slot".into(), json!(t.id.slot));
}

/// The identity object of tensor `i`, plus `dtype`, `shape` and `file`.
pub fn tensor(dump: &Dump, i: usize) -> Value {
    let mut m = Map::new();
    tensor_id_into(&mut m, dump, i);
    let t = &dump.tensors[i];
    m.insert("dtype".into(), json!(t.dtype.name()));
    m.insert("shape".into(), json!(t.shape));
    m.insert(
        "file".into(),
        t.file()
            .map(|p| json!(p.display().to_string()))
            .unwrap_or(Value::Null),
    );
    Value::Object(m)
}

/// Statistics as an object (absent columns are `null`).
pub fn stats(s: &Stats) -> Value {
    json!({
        "count": s.count,
        "max": opt(s.max),
        "min": opt(s.min),
        "avg": opt(s.avg),
        "l2norm": opt(s.l2norm),
        "nan_count": s.nan,
        "pos_inf_count": s.pos_inf,
        "neg_inf_count": s.neg_inf,
        "zero_count": s.zero,
        "md5": s.md5,
        "crc32": s.crc32,
        "xor64": s.xor64,
    })
}

/// Element-wise metrics.
pub fn metrics(m: &PairMetrics) -> Value {
    json!({
        "elements": m.count,
        "cosine": num(m.cosine()),
        "max_abs_error": num(m.max_abs),
        "max_rel_error": num(m.max_rel),
        "ratio_rel_error_over_0.001": num(m.ratio_over_1e3()),
        "ratio_rel_error_over_0.005": num(m.ratio_over_5e3()),
        "not_close": m.not_close,
        "max_ulp": m.max_ulp,
        "nonfinite_mismatch": m.nonfinite_mismatch,
    })
}

/// One pair: `a`, `b` (tensor objects), `rule`, `diverged`, `reasons`, `notes`, `tolerance`, the
/// outcome's metrics, and both sides' statistics.
pub fn pair(a: &Dump, b: &Dump, p: &PairResult) -> Value {
    let outcome = match &p.outcome {
        PairOutcome::Elements(m) => json!({"kind": "elements", "metrics": metrics(m)}),
        PairOutcome::Statistics { rel } => json!({"kind": "statistics", "rel_diff": {
            "max": rel[0].map(num), "min": rel[1].map(num), "avg": rel[2].map(num), "l2norm": rel[3].map(num)}}),
        PairOutcome::Digest { equal } => json!({"kind": "digest", "equal": equal}),
        PairOutcome::Mismatch(m) => json!({"kind": "mismatch", "message": super::reason(m)}),
    };
    json!({
        "a": tensor(a, p.a),
        "b": tensor(b, p.b),
        "rule": p.rule.as_str(),
        "diverged": p.diverged(),
        "reasons": p.reasons.iter().map(super::reason).collect::<Vec<_>>(),
        "notes": p.notes.iter().map(super::note).collect::<Vec<_>>(),
        "tolerance": {"rtol": num(p.tolerance.rtol), "atol": num(p.tolerance.atol)},
        "outcome": outcome,
        "stats_a": stats(&p.stats_a),
        "stats_b": stats(&p.stats_b),
    })
}
