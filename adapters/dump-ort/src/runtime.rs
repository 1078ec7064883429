//! [`OrtRunner`] as dump-onnx's [`OnnxRuntime`]: what `opdump run --runtime ort` drives.

use std::path::Path;

use dump_host::Dumper;
use dump_onnx::{DeclaredInput, HostTensor, LoadOptions, OnnxRuntime};

use crate::{Error, OrtOutputs, OrtRunner, host_tensor, values::to_host};

/// This crate's error as dump-onnx's, its fault named: the library missing is the
/// environment's, a model ONNX Runtime cannot read or an input it has no tensors of the
/// caller's, a session or run that fails ONNX Runtime's.
pub(crate) fn classify(e: Error) -> dump_onnx::Error {
    match e {
        Error::Dump(d) => dump_onnx::Error::Dump(d),
        e @ Error::Library(_) => dump_onnx::Error::Setup(Box::new(e)),
        e @ (Error::Model(_) | Error::Onnx(_)) => dump_onnx::Error::Refused(Box::new(e)),
        e => dump_onnx::Error::Failed(Box::new(e)),
    }
}

impl OnnxRuntime for OrtRunner {
    fn load(path: &Path, options: &LoadOptions) -> Result<Self, dump_onnx::Error> {
        OrtRunner::from_file(path, options.graph_id).map_err(classify)
    }

    fn name(&self) -> &'static str {
        "ort"
    }

    fn inputs(&self) -> Vec<DeclaredInput> {
        DeclaredInput::of(self.dump().model())
    }

    fn set_inputs(&mut self, inputs: Vec<HostTensor>) -> Result<(), dump_onnx::Error> {
        self.fed = inputs
            .into_iter()
            .map(|t| match host_tensor(t.dtype, &t.shape, &t.data) {
                Ok(v) => Ok((t.name, v)),
                Err(e) => Err(dump_onnx::Error::Input {
                    name: t.name,
                    cause: Box::new(e),
                }),
            })
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    fn step(&mut self, dumper: &mut Dumper) -> Result<usize, dump_onnx::Error> {
        let fed = std::mem::take(&mut self.fed);
        let ran = self.run(dumper, &fed).map(OrtOutputs::into_map);
        self.fed = fed;
        match ran {
            Ok(out) => self.last = out,
            Err(Error::Dump(d)) => return Err(dump_onnx::Error::Dump(d)),
            Err(e) => return Err(dump_onnx::Error::Failed(Box::new(e))),
        }
        Ok(self.dump().graph().nodes.len())
    }

    fn outputs(&self) -> Result<Vec<HostTensor>, dump_onnx::Error> {
        self.dump().declared_outputs(&self.last, to_host)
    }

    fn diagnostics(&self) -> Vec<String> {
        self.dump()
            .diagnostics()
            .map(str::to_owned)
            .chain(self.diagnostics.iter().cloned())
            .collect()
    }
}
