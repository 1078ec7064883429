//! `opdump run --runtime ort`: the model through ONNX Runtime (loaded at run time from
//! `ORT_DYLIB_PATH`), dumped by dump-ort.

use std::path::Path;

use dump_host::Dumper;
use dump_ort::{OrtRunner, host_value};

use super::{Declared, Failure, Feed, Runner};

/// An ONNX model in an ONNX Runtime session, and its inputs once fixed.
pub(crate) struct OrtModel {
    runner: OrtRunner,
    inputs: Vec<(String, dump_ort::ort::value::DynValue)>,
}

impl OrtModel {
    /// Loads `path` into a session (errors name the file, or say how to get the library);
    /// external data is found beside the model.
    pub(crate) fn load(path: &Path) -> Result<Self, Failure> {
        let env = dump_ort::environment().map_err(|e| Failure::Invalid(e.to_string()))?;
        // ONNX Runtime resolves external data beside the model, whatever the current folder.
        let runner = OrtRunner::from_file(&env, path, 0).map_err(|e| match e {
            dump_ort::Error::Ort(_) => Failure::Failed(format!(
                "{}: ONNX Runtime cannot load this model: {e}",
                path.display()
            )),
            e => Failure::Invalid(format!("{}: {e}", path.display())),
        })?;
        Ok(OrtModel {
            runner,
            inputs: Vec::new(),
        })
    }
}

impl Runner for OrtModel {
    fn name(&self) -> &'static str {
        "ort"
    }

    fn declared(&self) -> Vec<Declared> {
        super::onnx_declared(self.runner.dump().model())
    }

    fn prepare(&mut self, feeds: Vec<Feed>) -> Result<(), Failure> {
        for f in feeds {
            let v = host_value(f.dtype, &f.shape, &f.data)
                .map_err(|e| Failure::Invalid(format!("input {:?}: {e}", f.name)))?;
            self.inputs.push((f.name, v));
        }
        Ok(())
    }

    fn step(&mut self, dumper: &mut Dumper) -> Result<usize, Failure> {
        self.runner.run(dumper, &self.inputs).map_err(|e| match e {
            dump_ort::Error::Dump(dump_host::Error::NonFinite(at)) => super::stopped(at),
            e => Failure::Failed(e.to_string()),
        })?;
        Ok(self.runner.dump().graph().nodes.len())
    }

    fn diagnostics(&self) -> Vec<String> {
        self.runner
            .dump()
            .diagnostics()
            .map(str::to_owned)
            .collect()
    }
}
