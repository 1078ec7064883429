//! Rewrites a model so that chosen values become graph outputs: each is appended to
//! `GraphProto.output` as a `ValueInfoProto` holding only its name (the runtime infers the
//! type). Every other byte of the model is copied through unchanged.

use crate::{
    Error,
    wire::{Fields, Value, put_bytes},
};

/// `model` (an `.onnx` file's bytes) with `names` appended to the main graph's outputs.
pub fn with_outputs(model: &[u8], names: &[&str]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(model.len() + names.len() * 32);
    let mut seen_graph = false;
    let mut f = Fields::new(model, "ModelProto");
    while let Some((n, v, raw)) = f.next_field()? {
        match (n, v) {
            (7, Value::Bytes(graph)) if !seen_graph => {
                seen_graph = true;
                let mut g = Vec::with_capacity(graph.len() + names.len() * 32);
                g.extend_from_slice(graph);
                let mut vi = Vec::new();
                for name in names {
                    vi.clear();
                    put_bytes(&mut vi, 1, name.as_bytes());
                    put_bytes(&mut g, 12, &vi);
                }
                put_bytes(&mut out, 7, &g);
            }
            _ => out.extend_from_slice(raw),
        }
    }
    if !seen_graph {
        return Err(Error::Model("the model has no graph".into()));
    }
    Ok(out)
}
