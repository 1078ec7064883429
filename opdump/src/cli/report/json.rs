//! `--json`: [`inspect`] and [`compare`] write their report value as one JSON object, from the
//! pieces below (a tensor's identity, statistics, metrics, a pair). Non-finite numbers are
//! strings (`"nan"`, `"inf"`, `"-inf"`), since JSON has no such numbers.

use std::io::{self, Write};

use dump_core::compare::PairMetrics;
use dump_read::{
    Dump, Stats,
    compare::{PairOutcome, PairResult},
    inspect::Origin,
    train::{
        EXPLODING_GROWTH, EXPLODING_UPDATE, FROZEN_UPDATE, ParameterTrend, VANISHING_DECAY,
        VANISHING_NORM,
    },
};
use dump_stats::Io;
use serde_json::{Map, Value, json};

use super::{
    compare_report::CompareReport,
    inspect_report::{InspectReport, KernelRole},
    words::{note, pairing_kind, reason, torch_module},
};

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

/// One pair: `a`, `b` (tensor objects), `pairing` (`exact`, `mapped` or `fused`:
/// [`pairing_kind`]), `rule`, `diverged`, `reasons`, `notes`, `tolerance`, the
/// outcome's metrics, and both sides' statistics.
pub fn pair(a: &Dump, b: &Dump, p: &PairResult) -> Value {
    let outcome = match &p.outcome {
        PairOutcome::Elements(m) => json!({"kind": "elements", "metrics": metrics(m)}),
        PairOutcome::Statistics { rel } => json!({"kind": "statistics", "rel_diff": {
            "max": rel[0].map(num), "min": rel[1].map(num), "avg": rel[2].map(num), "l2norm": rel[3].map(num)}}),
        PairOutcome::Digest { equal } => json!({"kind": "digest", "equal": equal}),
        PairOutcome::Mismatch(m) => json!({"kind": "mismatch", "message": reason(m)}),
    };
    json!({
        "a": tensor(a, p.a),
        "b": tensor(b, p.b),
        "pairing": pairing_kind(p.rule),
        "rule": p.rule.as_str(),
        "diverged": p.diverged(),
        "unreadable": p.unreadable(),
        "reasons": p.reasons.iter().map(reason).collect::<Vec<_>>(),
        "notes": p.notes.iter().map(note).collect::<Vec<_>>(),
        "tolerance": {"rtol": num(p.tolerance.rtol), "atol": num(p.tolerance.atol)},
        "outcome": outcome,
        "stats_a": stats(&p.stats_a),
        "stats_b": stats(&p.stats_b),
    })
}

/// `role`, and `parameter` when the kernel belongs to one, into a JSON object.
fn role_into(m: &mut Map<String, Value>, k: &KernelRole) {
    m.insert("role".into(), json!(k.role.as_str()));
    if let Some(p) = &k.parameter {
        m.insert("parameter".into(), json!(p));
    }
}

/// One parameter's series and verdict.
fn trend(p: &ParameterTrend) -> Value {
    let series = |v: &[Option<f64>]| -> Vec<Value> {
        v.iter().map(|x| x.map_or(Value::Null, num)).collect()
    };
    json!({
        "rank": p.rank,
        "parameter": p.name,
        "steps": p.steps,
        "grad_norm": series(&p.grad_norm),
        "update_ratio": series(&p.update_ratio),
        "weight_norm": series(&p.weight_norm),
        "growth_per_step": num(p.growth_per_step),
        "first_nonfinite_step": p.first_nonfinite_step,
        "exploding_from": p.exploding_from,
        "verdict": p.verdict.as_str(),
    })
}

/// `inspect --json`: the report as one object, pretty-printed, and a newline.
pub fn inspect(r: &InspectReport<'_>, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{:#}", inspect_value(r))
}

/// The object `inspect --json` prints (keys `first_nonfinite`, `first_nonfinite_tensor`,
/// `growth`, `kernel_shades` (per kernel: its outputs' shade and NaN/Inf count),
/// `parameters`, ...).
fn inspect_value(r: &InspectReport<'_>) -> Value {
    let (dump, ins) = (r.dump, &r.ins);
    let first = match &ins.first_nonfinite {
        None => Value::Null,
        Some(f) => {
            let mut m = Map::new();
            tensor_id_into(&mut m, dump, f.tensor);
            m.insert("basis".into(), json!(f.basis.as_str()));
            role_into(&mut m, &r.roles[f.kernel]);
            m.insert("inputs_dumped".into(), json!(f.inputs_dumped));
            m.insert("stats".into(), stats(&r.stats(f.tensor)));
            let inputs: Vec<Value> = ins.kernels[f.kernel]
                .tensors
                .iter()
                .filter(|&&i| dump.tensors[i].id.io == Io::Input)
                .map(|&i| json!({"slot": dump.tensors[i].id.slot, "stats": stats(&r.stats(i))}))
                .collect();
            m.insert("inputs".into(), json!(inputs));
            Value::Object(m)
        }
    };
    let first_tensor = ins
        .first_nonfinite_tensor
        .as_ref()
        .map_or(Value::Null, |t| {
            let mut m = Map::new();
            tensor_id_into(&mut m, dump, t.tensor);
            m.insert("origin".into(), json!(t.origin.as_str()));
            role_into(&mut m, &r.roles[t.kernel]);
            if let Origin::KernelInput { producer: Some(p) } = &t.origin {
                m.insert("producer".into(), json!(p));
            }
            m.insert("stats".into(), stats(&r.stats(t.tensor)));
            Value::Object(m)
        });
    json!({
        "root": dump.root.display().to_string(),
        "layout": dump.dialect,
        "tensors": dump.tensors.len(),
        "kernels": ins.kernels.len(),
        "iterations": ins.iterations.iter().map(|i| json!({
            "rank": i.rank, "iteration": i.iteration, "kernels": i.kernels,
            "tensors": i.tensors, "bytes": i.bytes})).collect::<Vec<_>>(),
        "first_nonfinite": first,
        "first_nonfinite_tensor": first_tensor,
        "growth": ins.growth.iter().take(r.top).map(|gr| {
            let k = &ins.kernels[gr.kernel];
            json!({"rank": k.rank, "iteration": k.iteration, "graph": k.graph,
                "op_type": k.op_type, "op_name": k.op_name,
                "max_abs_ratio": num(gr.max_abs_ratio), "l2norm_ratio": num(gr.l2norm_ratio)})
        }).collect::<Vec<_>>(),
        "kernel_shades": ins.kernels.iter().zip(&r.kernel_nonfinite).map(|(k, s)| json!({
            "rank": k.rank, "iteration": k.iteration, "op_name": k.op_name,
            "shade": s.shade.as_str(), "nonfinite": s.count})).collect::<Vec<_>>(),
        "parameters": ins.parameters.iter().map(trend).collect::<Vec<_>>(),
        "parameter_thresholds": {
            "exploding_growth": EXPLODING_GROWTH, "exploding_update": EXPLODING_UPDATE,
            "frozen_update": FROZEN_UPDATE, "vanishing_norm": VANISHING_NORM,
            "vanishing_decay": VANISHING_DECAY},
        "oddities": ins.oddities.iter().map(|o| {
            let mut m = Map::new();
            tensor_id_into(&mut m, dump, o.tensor);
            m.insert("what".into(), json!(o.what));
            Value::Object(m)
        }).collect::<Vec<_>>(),
        "problems": dump.problems.iter().map(|p| json!({
            "path": p.path.display().to_string(), "message": p.message})).collect::<Vec<_>>(),
        "errors": ins.errors.iter().map(|(i, m)| {
            let mut o = Map::new();
            tensor_id_into(&mut o, dump, *i);
            o.insert("message".into(), json!(m));
            Value::Object(o)
        }).collect::<Vec<_>>(),
    })
}

/// `compare --json`: the report as one object, pretty-printed, and a newline.
pub fn compare(r: &CompareReport<'_>, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{:#}", compare_value(r))
}

/// The object `compare --json` prints (keys `pairs`, `matched`, `only_in_a`, `only_in_b`,
/// `within_a`, `within_b`, `first_divergent`, `kernel_shades` (per kernel of A: its worst
/// pair's shade, pair and relative error), ...).
fn compare_value(r: &CompareReport<'_>) -> Value {
    let (a, b, cmp) = (r.a, r.b, &r.cmp);
    let first = match &r.first {
        None => Value::Null,
        Some(f) => {
            let p = &cmp.pairs[f.pair];
            let mut m = Map::new();
            tensor_id_into(&mut m, a, p.a);
            m.insert("b_op_name".into(), json!(b.tensors[p.b].id.op_name));
            m.insert("onnx_node".into(), json!(f.onnx_node));
            m.insert("pairing".into(), json!(pairing_kind(p.rule)));
            m.insert("rule".into(), json!(p.rule.as_str()));
            m.insert(
                "torch_module".into(),
                json!(torch_module(a, p.a).or_else(|| torch_module(b, p.b))),
            );
            m.insert(
                "reasons".into(),
                json!(p.reasons.iter().map(reason).collect::<Vec<_>>()),
            );
            if let PairOutcome::Elements(mm) = &p.outcome {
                m.insert("metrics".into(), metrics(mm));
            }
            m.insert("stats_a".into(), stats(&p.stats_a));
            m.insert("stats_b".into(), stats(&p.stats_b));
            Value::Object(m)
        }
    };
    json!({
        "a": a.root.display().to_string(),
        "b": b.root.display().to_string(),
        "matched": cmp.pairs.len(),
        "diverged": r.diverged,
        "first_divergent": first,
        "only_in_a": cmp.only_in_a.iter().map(|&i| tensor(a, i)).collect::<Vec<_>>(),
        "only_in_b": cmp.only_in_b.iter().map(|&i| tensor(b, i)).collect::<Vec<_>>(),
        "within_a": within(a, &cmp.within_a),
        "within_b": within(b, &cmp.within_b),
        "fused_a": within(a, &cmp.fused_a),
        "fused_b": within(b, &cmp.fused_b),
        "nearest_a": nearest(a, b, &cmp.nearest_a),
        "nearest_b": nearest(b, a, &cmp.nearest_b),
        "pairs": cmp.pairs.iter().map(|p| pair(a, b, p)).collect::<Vec<_>>(),
        "kernel_shades": r.kernels.iter().zip(&r.kernel_worst).map(|(k, w)| json!({
            "rank": k.rank, "iteration": k.iteration, "op_name": k.op_name,
            "shade": w.map_or("unknown", |w| w.shade.as_str()),
            "pair": w.map(|w| w.pair), "max_rel_error": w.map(|w| num(w.rel))})).collect::<Vec<_>>(),
    })
}

/// Unpaired tensors with their nearest candidates: `{"tensor": ..., "candidates": [...]}`.
fn nearest(d: &Dump, other: &Dump, list: &[(usize, Vec<usize>)]) -> Vec<Value> {
    list.iter()
        .map(|(i, c)| {
            json!({
                "tensor": tensor(d, *i),
                "candidates": c.iter().map(|&k| tensor(other, k)).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// Tensors inside decomposed ONNX nodes: each tensor's identity with `onnx_node`.
fn within(d: &Dump, list: &[(usize, String)]) -> Vec<Value> {
    list.iter()
        .map(|(i, node)| {
            let mut t = tensor(d, *i);
            if let Value::Object(m) = &mut t {
                m.insert("onnx_node".into(), json!(node));
            }
            t
        })
        .collect()
}
