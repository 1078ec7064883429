//! `opdump run --runtime tract`: the model through tract, dumped by dump-tract.

use std::path::{Path, PathBuf};

use dump_host::Dumper;
use dump_tract::{
    OnnxNodes, TractDump, dtype_of, host_tensor,
    tract_onnx::{
        self,
        prelude::{
            Framework, InferenceFact, InferenceModel, InferenceModelExt, IntoRunnable as _,
            IntoTValue, TValue, TVec, TypedSimpleState,
        },
        tract_hir::infer::Factoid,
    },
};

use super::{Declared, Failure, Feed, Runner};

/// An ONNX model loaded by tract; after [`Runner::prepare`], its plan and dump state.
pub(crate) struct TractRunner {
    path: PathBuf,
    model: Option<InferenceModel>,
    running: Option<(TypedSimpleState, TractDump)>,
    inputs: TVec<TValue>,
}

impl TractRunner {
    /// Loads `path` (an error names the file and what tract said; the caller checked that
    /// the file opens).
    pub(crate) fn load(path: &Path) -> Result<Self, Failure> {
        let model = tract_onnx::onnx()
            .model_for_path(path)
            .or_else(|e| inlined(path).ok_or(e))
            .map_err(|e| {
                // Not ONNX at all is bad input (exit 2); ONNX that tract cannot load is exit 1.
                let parsed = std::fs::read(path)
                    .map_err(|r| r.to_string())
                    .and_then(|b| dump_onnx::Model::parse(b).map_err(|p| p.to_string()));
                let lacking = parsed.as_ref().ok().and_then(lacking_input_type);
                match parsed {
                    Err(m) => Failure::Invalid(format!("{}: {m}", path.display())),
                    Ok(_) if lacking.is_some() => Failure::Failed(format!(
                        "{}: tract cannot load this model: {} (run it with --runtime ort)",
                        path.display(),
                        lacking.unwrap_or_default()
                    )),
                    Ok(_) => Failure::Failed(format!(
                        "{}: tract cannot load this model: {e:#}",
                        path.display()
                    )),
                }
            })?;
        Ok(TractRunner {
            path: path.to_owned(),
            model: Some(model),
            running: None,
            inputs: TVec::new(),
        })
    }

    fn cannot(&self, e: impl std::fmt::Display) -> Failure {
        Failure::Failed(format!(
            "{}: tract cannot run this model: {e:#}",
            self.path.display()
        ))
    }
}

/// The first graph input whose ONNX type tract 0.23 has no datum type for (bfloat16, the
/// float8s, int4, uint4, float4), said for a command-line user.
fn lacking_input_type(m: &dump_onnx::Model) -> Option<String> {
    m.graph.inputs.iter().find_map(|i| {
        let code = i.elem_type?;
        (code == 16 || (17..=25).contains(&code)).then(|| {
            format!(
                "input {:?} is {}, a type tract has no tensors of",
                i.name,
                dump_onnx::type_name(code)
            )
        })
    })
}

/// `path` with its external data inlined (up to 2 GiB) and loaded from memory, for what
/// tract refuses to read from the file (an absolute external-data location); `None` when
/// the model cannot be inlined or still does not load.
fn inlined(path: &Path) -> Option<InferenceModel> {
    let bytes = std::fs::read(path).ok()?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let inlined = dump_onnx::inline_data(&bytes, dir, dump_onnx::MAX_INLINE_MODEL).ok()?;
    tract_onnx::onnx()
        .model_for_read(&mut inlined.as_slice())
        .ok()
}

impl Runner for TractRunner {
    fn name(&self) -> &'static str {
        "tract"
    }

    fn declared(&self) -> Vec<Declared> {
        let Some(m) = &self.model else {
            return Vec::new();
        };
        let outlets = m.input_outlets().map(<[_]>::to_vec).unwrap_or_default();
        outlets
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let fact = m.input_fact(i).ok();
                Declared {
                    name: m.node(o.node).name.clone(),
                    dtype: fact
                        .and_then(|f| f.datum_type.concretize())
                        .and_then(dtype_of),
                    shape: fact
                        .and_then(|f| f.shape.as_concrete_finite().ok().flatten())
                        .map(|s| s.to_vec()),
                    onnx_type: None,
                }
            })
            .collect()
    }

    fn prepare(&mut self, feeds: Vec<Feed>) -> Result<(), Failure> {
        let Some(mut model) = self.model.take() else {
            return Err(Failure::Failed("the model was already prepared".into()));
        };
        for (i, f) in feeds.iter().enumerate() {
            let t = host_tensor(f.dtype, &f.shape, &f.data)
                .map_err(|e| Failure::Invalid(format!("input {:?}: {e}", f.name)))?;
            model
                .set_input_fact(i, InferenceFact::dt_shape_from_tensor(&t))
                .map_err(|e| self.cannot(e))?;
            self.inputs.push(t.into_tvalue());
        }
        // The ONNX op types and torch scopes tract does not keep, for the source rows.
        let rows = std::fs::read(&self.path)
            .ok()
            .and_then(|b| dump_onnx::node_rows(&b).ok());
        let onnx = OnnxNodes::of(&model).with_rows(rows.unwrap_or_default());
        let plan = model
            .into_typed()
            .and_then(|m| m.into_runnable())
            .map_err(|e| self.cannot(e))?;
        let state = plan.spawn().map_err(|e| self.cannot(e))?;
        let dump = TractDump::with_onnx_nodes(&plan, 0, &onnx);
        self.running = Some((state, dump));
        Ok(())
    }

    fn step(&mut self, dumper: &mut Dumper) -> Result<usize, Failure> {
        let Some((state, dump)) = self.running.as_mut() else {
            return Err(Failure::Failed("the model was not prepared".into()));
        };
        dump.run(dumper, state, self.inputs.clone())
            .map_err(|e| match e {
                dump_tract::Error::Dump(dump_host::Error::NonFinite(at)) => super::stopped(at),
                e => Failure::Failed(e.to_string()),
            })?;
        Ok(dump.graph().nodes.len())
    }

    fn diagnostics(&self) -> Vec<String> {
        self.running
            .as_ref()
            .map(|(_, d)| d.diagnostics().to_vec())
            .unwrap_or_default()
    }
}
