//! `opdump run --runtime candle`: the model through candle-onnx, dumped by dump-candle's
//! ONNX evaluator.

use std::{collections::HashMap, path::Path};

use dump_candle::{candle_core::Tensor, convert::host_tensor, onnx::OnnxRunner};
use dump_host::Dumper;

use super::{Declared, Failure, Feed, Runner};

/// An ONNX model prepared for candle-onnx, and its inputs once fixed.
pub(crate) struct CandleRunner {
    runner: OnnxRunner,
    inputs: HashMap<String, Tensor>,
}

impl CandleRunner {
    /// Loads `path`, its external data from beside it (an error names the file and what is
    /// wrong with it).
    pub(crate) fn load(path: &Path) -> Result<Self, Failure> {
        let runner = OnnxRunner::from_file(path, 0).map_err(|e| match e {
            dump_candle::Error::Model(_) => Failure::Invalid(format!("{}: {e}", path.display())),
            e => Failure::Failed(format!("{}: {e}", path.display())),
        })?;
        Ok(CandleRunner {
            runner,
            inputs: HashMap::new(),
        })
    }
}

impl Runner for CandleRunner {
    fn name(&self) -> &'static str {
        "candle"
    }

    fn declared(&self) -> Vec<Declared> {
        super::onnx_declared(self.runner.dump().model())
    }

    fn prepare(&mut self, feeds: Vec<Feed>) -> Result<(), Failure> {
        for f in feeds {
            let t = host_tensor(f.dtype, &f.shape, &f.data)
                .map_err(|e| Failure::Invalid(format!("input {:?}: {e}", f.name)))?;
            self.inputs.insert(f.name, t);
        }
        Ok(())
    }

    fn step(&mut self, dumper: &mut Dumper) -> Result<usize, Failure> {
        self.runner
            .run(dumper, self.inputs.clone())
            .map_err(|e| match e {
                dump_candle::Error::Dump(dump_host::Error::NonFinite(at)) => super::stopped(at),
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
