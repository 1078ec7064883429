//! candle-onnx's evaluation, contained (feature `onnx`): a panic inside `simple_eval` (candle-onnx
//! panics on some models, for example a Gemm without its bias input) becomes an [`Error`], and a
//! failed or panicking evaluation is traced to the first node that fails by evaluating
//! prefixes of the graph (a bisection: about log2(nodes) extra evaluations, on the error path
//! only).

use std::{
    collections::{BTreeSet, HashMap},
    panic::{AssertUnwindSafe, catch_unwind},
};

use candle_core::Tensor;
use candle_onnx::onnx::ModelProto;

use crate::error::{Error, EvalCause, NodeAt};

/// What one evaluation did.
enum Outcome {
    Ok(HashMap<String, Tensor>),
    Failed(candle_core::Error),
    Panicked(String),
}

/// Runs `simple_eval`, catching a panic.
fn eval(model: &ModelProto, inputs: &HashMap<String, Tensor>) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| {
        candle_onnx::simple_eval(model, inputs.clone())
    })) {
        Ok(Ok(v)) => Outcome::Ok(v),
        Ok(Err(e)) => Outcome::Failed(e),
        Err(payload) => Outcome::Panicked(panic_text(payload.as_ref())),
    }
}

/// The text of a panic payload (`panic!` with a message gives a `&str` or a `String`).
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// `model` cut to its first `k` nodes; its outputs are the graph outputs those nodes produce.
fn prefix(model: &ModelProto, k: usize) -> ModelProto {
    let mut m = model.clone();
    if let Some(g) = m.graph.as_mut() {
        g.node.truncate(k);
        let made: BTreeSet<&str> = g
            .node
            .iter()
            .flat_map(|n| n.output.iter().map(String::as_str))
            .collect();
        let keep: Vec<_> = g
            .output
            .iter()
            .filter(|o| made.contains(o.name.as_str()))
            .cloned()
            .collect();
        g.output = keep;
    }
    m
}

/// The values of `model`'s graph outputs that its first `k` nodes compute (with the exposed
/// model: every value they compute), or why they could not be computed.
pub(crate) fn values_before(
    model: &ModelProto,
    inputs: &HashMap<String, Tensor>,
    k: usize,
) -> Result<HashMap<String, Tensor>, String> {
    match eval(&prefix(model, k), inputs) {
        Outcome::Ok(v) => Ok(v),
        Outcome::Failed(e) => Err(crate::error::Plain(&e).to_string()),
        Outcome::Panicked(m) => Err(format!("candle-onnx panicked (caught): {m}")),
    }
}

/// Evaluates `model` on `inputs`; a failure or panic names the first node that fails.
pub(crate) fn evaluate(
    model: &ModelProto,
    inputs: &HashMap<String, Tensor>,
) -> Result<HashMap<String, Tensor>, Error> {
    let cause = match eval(model, inputs) {
        Outcome::Ok(v) => return Ok(v),
        Outcome::Failed(e) => EvalCause::Candle(e),
        Outcome::Panicked(m) => EvalCause::Panic(m),
    };
    let nodes = model.graph.as_ref().map_or(0, |g| g.node.len());
    let panicked = matches!(cause, EvalCause::Panic(_));
    let fails = |k: usize| match eval(&prefix(model, k), inputs) {
        Outcome::Ok(_) => false,
        Outcome::Failed(_) => !panicked,
        Outcome::Panicked(_) => panicked,
    };
    // Invariant: the first `lo` nodes evaluate, the first `hi` nodes fail the same way.
    let (mut lo, mut hi) = (0usize, nodes);
    let node = if nodes > 0 && !fails(0) {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fails(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        model
            .graph
            .as_ref()
            .and_then(|g| g.node.get(hi - 1))
            .map(|n| NodeAt {
                index: hi - 1,
                name: n.name.clone(),
                op_type: n.op_type.clone(),
            })
            .map(Box::new)
    } else {
        None
    };
    Err(Error::Eval {
        node,
        cause: Box::new(cause),
    })
}
