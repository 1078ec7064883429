//! The `anchor` group: `opdump run --runtime ort` against Polygraphy, the Python tool an ONNX
//! user would pick to save every node's output (`polygraphy run MODEL --onnxrt --onnx-outputs
//! mark all --save-outputs FILE`), whole processes as a user runs them, on a real architecture:
//! torchvision's ResNet-18 with random weights, exported by `tools/export_models.py` (torch's
//! default exporter, weights as external data).
//!
//! Same dump content on both sides: every node's outputs as whole tensors, with ONNX Runtime
//! 1.31.1 underneath (the pinned wheel's library for opdump, the same wheel's Python package
//! for Polygraphy). opdump's config is `saved_data` "tensor", `input_output` 2 (outputs),
//! every kernel; both run one inference on seeded random inputs of the declared shape. The
//! third line is Polygraphy running the model without saving anything (its start-up and ORT's
//! session), which is what a dump costs on top of in Python.
//!
//! Needs `python3 -m pip install polygraphy onnxruntime==1.31.1` and torch/torchvision (see
//! `tools/export_models.requirements.txt`), so it runs only when named: `--only anchor`.
//! Rounds interleave (opdump, Polygraphy, Polygraphy without saving, ...); medians reported.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use super::{Opts, Row, dump::median, target_dir};

/// The pinned ONNX Runtime (adapters/dump-ort/ci/fetch-ort.sh) and what Polygraphy must import.
const ORT_VERSION: &str = "1.31.1";

fn root() -> PathBuf {
    crate::toolchain::workspace_root()
}

/// Fails with the install line unless python3 imports polygraphy, onnxruntime (the pinned one),
/// torch and torchvision.
fn check_python() -> Result<(), String> {
    let o = Command::new("python3")
        .args([
            "-c",
            "import polygraphy, onnxruntime, torch, torchvision; print(onnxruntime.__version__)",
        ])
        .output()
        .map_err(|e| format!("anchor: cannot run python3: {e}"))?;
    let version = String::from_utf8_lossy(&o.stdout).trim().to_owned();
    if !o.status.success() || version != ORT_VERSION {
        return Err(format!(
            "anchor: needs Polygraphy with onnxruntime {ORT_VERSION} and torch ({}); install: \
             python3 -m pip install polygraphy onnxruntime=={ORT_VERSION} && bash \
             tools/install-torch.sh",
            if o.status.success() {
                format!("onnxruntime {version} found")
            } else {
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
                    .to_owned()
            }
        ));
    }
    Ok(())
}

/// ResNet-18's ONNX file, exported once into target/torch-models.
fn resnet18() -> Result<PathBuf, String> {
    let dir = target_dir().join("torch-models");
    let model = dir.join("resnet18.onnx");
    if model.is_file() {
        return Ok(model);
    }
    let st = Command::new("python3")
        .arg(root().join("tools/export_models.py"))
        .arg(&dir)
        .args(["--models", "resnet18"])
        .status()
        .map_err(|e| format!("anchor: tools/export_models.py: {e}"))?;
    if !st.success() || !model.is_file() {
        return Err(format!(
            "anchor: tools/export_models.py did not write {}",
            model.display()
        ));
    }
    Ok(model)
}

/// `ORT_DYLIB_PATH`, or the pinned library fetched by the adapter's script.
fn ort_library() -> Result<String, String> {
    if let Ok(p) = std::env::var("ORT_DYLIB_PATH")
        && Path::new(&p).is_file()
    {
        return Ok(p);
    }
    let o = Command::new("bash")
        .arg(root().join("adapters/dump-ort/ci/fetch-ort.sh"))
        .output()
        .map_err(|e| format!("anchor: fetch-ort.sh: {e}"))?;
    let p = String::from_utf8_lossy(&o.stdout).trim().to_owned();
    if !o.status.success() || !Path::new(&p).is_file() {
        return Err(format!(
            "anchor: adapters/dump-ort/ci/fetch-ort.sh failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(p)
}

/// Wall seconds of one command, which must succeed.
fn time(cmd: &mut Command) -> Result<f64, String> {
    let t = Instant::now();
    let o = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    let s = t.elapsed().as_secs_f64();
    if !o.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(s)
}

/// Bytes of every file under `p`.
fn bytes_under(p: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if meta.is_file() {
        return meta.len();
    }
    std::fs::read_dir(p)
        .map(|rd| rd.flatten().map(|e| bytes_under(&e.path())).sum())
        .unwrap_or(0)
}

/// Runs the group (only when named in `--only`).
pub fn run(opts: &Opts, rows: &mut Vec<Row>) -> Result<(), String> {
    check_python()?;
    let model = resnet18()?;
    let ort = ort_library()?;
    let bin = super::compare::opdump_release_with(&["--features", "ort"])?;
    let dir = target_dir().join("bench-anchor");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let (ours, theirs) = (dir.join("opdump"), dir.join("polygraphy.json"));
    let cfg = dir.join("data_dump.json");
    std::fs::write(
        &cfg,
        format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "all", "saved_data": "tensor", "input_output": 2, "kernels": [],
            "support_device": [0]}}, "e2e_dump_settings": {{"enable": true}}}}"#,
            ours.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let opdump = || {
        let _ = std::fs::remove_dir_all(&ours);
        let mut c = Command::new(&bin);
        c.arg("run")
            .arg(&model)
            .args(["--runtime", "ort", "--config"])
            .arg(&cfg)
            .env("ORT_DYLIB_PATH", &ort)
            .current_dir(&dir);
        c
    };
    let polygraphy = |save: bool| {
        let _ = std::fs::remove_file(&theirs);
        let mut c = Command::new("polygraphy");
        c.arg("run").arg(&model).arg("--onnxrt").current_dir(&dir);
        if save {
            c.args(["--onnx-outputs", "mark", "all", "--save-outputs"])
                .arg(&theirs);
        }
        c
    };
    // Warm the page cache and both interpreters' imports.
    time(&mut opdump())?;
    time(&mut polygraphy(true))?;
    let (mut o, mut p, mut plain) = (Vec::new(), Vec::new(), Vec::new());
    let (mut o_bytes, mut p_bytes) = (0, 0);
    for _ in 0..opts.runs.clamp(3, 7) {
        o.push(time(&mut opdump())?);
        o_bytes = bytes_under(&ours);
        p.push(time(&mut polygraphy(true))?);
        p_bytes = bytes_under(&theirs);
        plain.push(time(&mut polygraphy(false))?);
    }
    let (o, p, plain) = (median(o), median(p), median(plain));
    println!(
        "anchor (ResNet-18, every node's outputs, ONNX Runtime {ORT_VERSION}): opdump run {o:.3} s \
         ({:.1} MB written), polygraphy run --save-outputs {p:.3} s ({:.1} MB), polygraphy run \
         without saving {plain:.3} s; Polygraphy / opdump = {:.2}x",
        o_bytes as f64 / 1e6,
        p_bytes as f64 / 1e6,
        p / o
    );
    for (kernel, s, b) in [
        ("anchor-opdump-run", o, o_bytes),
        ("anchor-polygraphy", p, p_bytes),
        ("anchor-polygraphy-nosave", plain, 0),
    ] {
        rows.push(Row {
            kernel: kernel.into(),
            dtype: "resnet18".into(),
            bytes: b as usize,
            threads: 1,
            gbps: b as f64 / s / 1e9,
            // Against the Python anchor: how many times faster than Polygraphy's dump.
            vs_read: Some(p / s),
            vs_numpy: None,
        });
    }
    Ok(())
}
