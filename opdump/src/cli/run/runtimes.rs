//! The runtimes `opdump run --runtime` can name: one row each (its name, the cargo feature
//! that builds it in, its constructor). A runtime is any `dump_onnx::OnnxRuntime`; adding one
//! is a crate implementing it, a `Runtime` variant and a row here.

use std::path::Path;

use dump_onnx::{LoadOptions, OnnxRuntime};

use super::{Failure, Runtime};

/// A runtime's constructor: loads a model, boxed.
type Load = fn(&Path, &LoadOptions) -> Result<Box<dyn OnnxRuntime>, dump_onnx::Error>;

/// One registered runtime.
struct Registered {
    /// What `--runtime` says.
    runtime: Runtime,
    /// The runtime in words, for "built without".
    what: &'static str,
    /// The opdump cargo feature that builds it in.
    feature: &'static str,
    /// Its constructor, `None` when built without it.
    load: Option<Load>,
}

#[cfg(feature = "tract")]
const TRACT: Option<Load> = Some(dump_onnx::load_boxed::<dump_tract::TractRunner>);
#[cfg(not(feature = "tract"))]
const TRACT: Option<Load> = None;
#[cfg(feature = "candle")]
const CANDLE: Option<Load> = Some(dump_onnx::load_boxed::<dump_candle::CandleRunner>);
#[cfg(not(feature = "candle"))]
const CANDLE: Option<Load> = None;
#[cfg(feature = "ort")]
const ORT: Option<Load> = Some(dump_onnx::load_boxed::<dump_ort::OrtRunner>);
#[cfg(not(feature = "ort"))]
const ORT: Option<Load> = None;

/// Every runtime `--runtime` names.
const RUNTIMES: [Registered; 3] = [
    Registered {
        runtime: Runtime::Tract,
        what: "the tract runtime",
        feature: "tract",
        load: TRACT,
    },
    Registered {
        runtime: Runtime::Candle,
        what: "the candle runtime",
        feature: "candle",
        load: CANDLE,
    },
    Registered {
        runtime: Runtime::Ort,
        what: "the ONNX Runtime runner",
        feature: "ort",
        load: ORT,
    },
];

/// The constructor of `runtime`, or why this opdump cannot run it.
pub(super) fn constructor(runtime: Runtime) -> Result<Load, Failure> {
    let r = RUNTIMES
        .iter()
        .find(|r| r.runtime == runtime)
        .ok_or_else(|| Failure::Invalid(format!("runtime {runtime:?} is not registered")))?;
    r.load.ok_or_else(|| {
        Failure::Invalid(format!(
            "this opdump was built without {} (cargo feature `{}`)",
            r.what, r.feature
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_runtime_is_registered_once_and_built_in_by_its_feature() {
        use clap::ValueEnum;
        for v in Runtime::value_variants() {
            let rows: Vec<&Registered> = RUNTIMES.iter().filter(|r| r.runtime == *v).collect();
            assert_eq!(rows.len(), 1, "{v:?}");
            let built = match rows[0].feature {
                "tract" => cfg!(feature = "tract"),
                "candle" => cfg!(feature = "candle"),
                "ort" => cfg!(feature = "ort"),
                other => panic!("unknown feature {other}"),
            };
            assert_eq!(rows[0].load.is_some(), built, "{v:?}");
            match constructor(*v) {
                Ok(_) => assert!(built),
                Err(Failure::Invalid(m)) => {
                    assert!(!built);
                    assert!(
                        m.contains(&format!("cargo feature `{}`", rows[0].feature)),
                        "{m}"
                    );
                }
                Err(other) => panic!("{other:?}"),
            }
        }
    }
}
