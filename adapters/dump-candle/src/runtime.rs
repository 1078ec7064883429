//! [`CandleRunner`] as dump-onnx's [`OnnxRuntime`] (feature `onnx`): what `opdump run
//! --runtime candle` drives.

use std::path::Path;

use candle_core::{Device, Tensor};
use dump_host::Dumper;
use dump_onnx::{DeclaredInput, HostTensor, LoadOptions, OnnxRuntime};

use crate::{CandleRunner, Error, convert};

impl OnnxRuntime for CandleRunner {
    fn load(path: &Path, options: &LoadOptions) -> Result<Self, dump_onnx::Error> {
        CandleRunner::from_file(path, options.graph_id).map_err(|e| match e {
            // The model cannot be read (or its external data): the caller's to fix.
            e @ Error::Model(_) => dump_onnx::Error::Refused(Box::new(e)),
            e => dump_onnx::Error::Failed(Box::new(e)),
        })
    }

    fn name(&self) -> &'static str {
        "candle"
    }

    fn inputs(&self) -> Vec<DeclaredInput> {
        DeclaredInput::of(self.dump().model())
    }

    fn set_inputs(&mut self, inputs: Vec<HostTensor>) -> Result<(), dump_onnx::Error> {
        self.fed.clear();
        for t in inputs {
            match convert::host_tensor(t.dtype, &t.shape, &t.data) {
                Ok(v) => self.fed.insert(t.name, v),
                Err(e) => {
                    return Err(dump_onnx::Error::Input {
                        name: t.name,
                        cause: Box::new(e),
                    });
                }
            };
        }
        Ok(())
    }

    fn step(&mut self, dumper: &mut Dumper) -> Result<usize, dump_onnx::Error> {
        match self.run(dumper, self.fed.clone()) {
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

/// `t` copied to the host in C order.
pub(crate) fn to_host(name: &str, t: &Tensor) -> Result<HostTensor, Error> {
    let t = t.to_device(&Device::Cpu)?.contiguous()?;
    convert::with_tensor_ref(&t, |r| HostTensor {
        name: name.to_owned(),
        dtype: r.dtype(),
        shape: r.shape().to_vec(),
        data: r.host_bytes().unwrap_or_default().to_vec(),
    })
}
