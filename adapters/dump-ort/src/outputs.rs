//! [`OrtOutputs`]: the model's declared outputs of one [`OrtRunner::run`](crate::OrtRunner::run),
//! as ONNX Runtime returned them.

use std::collections::HashMap;

use dump_onnx::ValueInfo;
use ort::{session::SessionOutputs, value::DynValue};

/// The model's declared outputs of one [`OrtRunner::run`](crate::OrtRunner::run), looked up
/// by name as in ONNX Runtime's own `SessionOutputs`: nothing is copied and no map is built
/// (what a program that runs its session without opdump reads). The node outputs exposed for
/// the dump are not among them; they are released with this value.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let mut runner = dump_ort::OrtRunner::from_file("model.onnx".as_ref(), 0)?;
/// # let mut dumper = dump_host::Dumper::disabled();
/// # let inputs = Vec::new();
/// let outputs = runner.run(&mut dumper, &inputs)?;
/// let y = &outputs["y"]; // or outputs.get("y"), outputs.iter() in the model's order
/// # drop(y);
/// let owned = outputs.into_map(); // by name, owned: the runner is free again
/// # drop(owned);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct OrtOutputs<'r> {
    values: SessionOutputs<'r>,
    /// The model's declared outputs, in its order.
    declared: &'r [ValueInfo],
    /// How many values ONNX Runtime returned (the exposed node outputs included).
    returned: usize,
}

impl<'r> OrtOutputs<'r> {
    pub(crate) fn new(values: SessionOutputs<'r>, declared: &'r [ValueInfo]) -> Self {
        OrtOutputs {
            returned: values.len(),
            values,
            declared,
        }
    }

    /// How many values ONNX Runtime returned for this run: the declared outputs and the node
    /// outputs exposed for the dump (none on a step that dumps nothing once the runner knows
    /// it beforehand; see [`OrtRunner::run`](crate::OrtRunner::run)).
    pub fn returned(&self) -> usize {
        self.returned
    }

    /// Whether `name` is a declared output. When ONNX Runtime returned no more values than the
    /// model declares, nothing exposed is among them: every name it has is declared (and an
    /// empty name, an omitted output, is never returned).
    fn declares(&self, name: &str) -> bool {
        self.returned <= self.declared.len()
            || !name.is_empty() && self.declared.iter().any(|o| o.name == name)
    }

    /// Declared output `name` (`None`: not a declared output, already
    /// [removed](OrtOutputs::remove), or not returned).
    pub fn get(&self, name: &str) -> Option<&DynValue> {
        if self.declares(name) {
            self.values.get(name)
        } else {
            None
        }
    }

    /// Takes declared output `name` out (the value itself, not a copy of its data).
    pub fn remove(&mut self, name: &str) -> Option<DynValue> {
        if self.declares(name) {
            self.values.remove(name)
        } else {
            None
        }
    }

    /// The declared outputs present, by name, in the model's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &DynValue)> {
        self.declared
            .iter()
            .filter(|o| !o.name.is_empty())
            .filter_map(|o| self.values.get(&o.name).map(|v| (o.name.as_str(), v)))
    }

    /// How many declared outputs are present.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether no declared output is present.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The declared outputs present, owned, by name.
    pub fn into_map(mut self) -> HashMap<String, DynValue> {
        let mut out = HashMap::with_capacity(self.declared.len());
        for o in self.declared.iter().filter(|o| !o.name.is_empty()) {
            if let Some(v) = self.values.remove(&o.name) {
                out.insert(o.name.clone(), v);
            }
        }
        out
    }
}

impl std::ops::Index<&str> for OrtOutputs<'_> {
    type Output = DynValue;

    /// Declared output `name`; panics when there is none (see [`get`](OrtOutputs::get)).
    fn index(&self, name: &str) -> &DynValue {
        match self.get(name) {
            Some(v) => v,
            None => panic!("{name:?} is not a declared output of this run"),
        }
    }
}
