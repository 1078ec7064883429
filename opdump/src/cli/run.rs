//! `opdump run MODEL.onnx`: runs an ONNX model with a Rust runtime (tract by default), every
//! operator dumped, and prints what it dumped like the demo.
//!
//! Inputs come from `--input NAME=FILE.npy` (repeatable) or, with none, are deterministic
//! pseudo-random values of the model's declared types and shapes (the seed is printed and can
//! be set with `--seed`). The config is `--config` or the demo's embedded one.
//! A runtime plugs in as a `dump_onnx::OnnxRuntime` (dump-tract's `TractRunner`, dump-candle's
//! `CandleRunner`, dump-ort's `OrtRunner`), registered in `runtimes.rs` with its name, cargo
//! feature and constructor; this command sees only the trait.

mod contain;
mod runtimes;

use std::{
    io::Write,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
    time::Instant,
};

use dump_core::DType;
use dump_host::{
    DumpOptions,
    config::{Env, FlightRecorder, NonFinitePolicy, SavedData},
    diag::{Event, EventSink},
};
use dump_onnx::{DeclaredInput, HostTensor, LoadOptions};

use super::{
    demo::{categories_json, default_config},
    open_dump::{self, STAND_IN, Target},
    outcome::{Failure, Outcome, Verdict},
};

/// The runtimes `--runtime` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Runtime {
    /// tract (cargo feature `tract` of the opdump crate, on by default).
    Tract,
    /// candle with candle-onnx (cargo feature `candle` of the opdump crate).
    Candle,
    /// ONNX Runtime, loaded at run time from ORT_DYLIB_PATH (cargo feature `ort`).
    Ort,
}

/// Arguments of `opdump run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The ONNX model to run.
    pub model: PathBuf,
    /// The runtime that runs it.
    #[arg(long, value_enum, default_value_t = Runtime::Tract)]
    pub runtime: Runtime,
    /// An input as NAME=FILE.npy (repeat for each input). Without any, every input gets
    /// deterministic random values of its declared type and shape.
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    pub inputs: Vec<String>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// A MindSpore data_dump.json, an msprobe config.json (the run is then written in
    /// msprobe's layout: step{N}/rank{R}/dump.json), or CANN's acl.json or torchair's
    /// dump_config options as JSON (CANN's GE layout: one CANN dump file or statistics csv per
    /// kernel; docs/cann.md), instead of the embedded one (the demo's: every kernel,
    /// saved_data "full", every statistic category, iteration "all").
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where to write the dump (replaces the config's `path`). Default `./opdump-run` with the
    /// embedded config.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Steps to run (each one a dump iteration).
    #[arg(long, default_value_t = 1)]
    pub steps: u32,
    /// Run a flight recorder holding the last N steps in memory: nothing is written unless
    /// an output goes NaN or ±Inf, then those N steps, the step that went wrong and
    /// rank_0/trigger.json (naming the kernel) are. Overrides the config's
    /// opdump.flight_recorder.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub flight_recorder: Option<u32>,
    /// The flight recorder's memory budget for tensor copies, in MiB (default 1024).
    #[arg(long, value_name = "MIB", requires = "flight_recorder")]
    pub flight_budget_mb: Option<u64>,
    /// Stop at the first kernel whose output holds NaN or ±Inf: print it, write what the
    /// flight recorder holds, and exit 1.
    #[arg(long)]
    pub stop_at_nonfinite: bool,
    /// Mark a kernel for `dump_mode` 2 (Ascend's set_dump): a full kernel name, or a scope
    /// that marks every kernel inside it (`Default/conv1`). Repeatable. Only a config with
    /// "dump_mode": 2 reads the marks; with none marked it dumps nothing (and says so).
    #[arg(long = "set-dump", value_name = "NODE|SCOPE")]
    pub set_dump: Vec<String>,
}

fn describe(dtype: Option<DType>, shape: Option<&[usize]>) -> String {
    describe_as(dtype.map(|d| d.to_string()), shape)
}

/// [`describe`] for a declared input, naming an ONNX type without a dump dtype.
fn declared_type(d: &DeclaredInput) -> String {
    describe_as(
        d.dtype
            .map(|t| t.to_string())
            .or_else(|| d.onnx_type.map(str::to_owned)),
        d.shape.as_deref(),
    )
}

fn describe_as(dtype: Option<String>, shape: Option<&[usize]>) -> String {
    let dt = dtype.unwrap_or_else(|| "?".to_owned());
    match shape {
        Some(s) => format!("{dt} {s:?}"),
        None => format!("{dt} [dynamic]"),
    }
}

/// Gives an ml_dtypes array (numpy saves it with an opaque descr, see
/// [`dump_npy::opaque_carrier`]) the element type the model declares for the input: `<V2` as
/// bfloat16; `<V1` as int4 or uint4 (ml_dtypes' one value per byte, its low nibble, packed two
/// per byte, low nibble first), float8_e4m3fn, float8_e4m3fnuz or float8_e5m2fnuz; `<f1` as
/// float8_e5m2. Anything else (a
/// declared type the descr cannot hold, a model that declares no type) is an error saying what
/// the file may hold and what opdump reads.
fn resolve_opaque(npy: &mut dump_npy::NpyFile, d: &DeclaredInput) -> Result<(), String> {
    let e5m2 = npy.descr.ends_with("f1");
    let holds = match npy.descr.as_str() {
        _ if e5m2 => "ml_dtypes' float8_e5m2",
        d if d.ends_with('2') => "ml_dtypes' bfloat16",
        _ => {
            "ml_dtypes' int4, uint4, float8_e4m3fn, float8_e4m3fnuz or float8_e5m2fnuz (one \
             byte per element)"
        }
    };
    let declared = declared_type(d);
    let unsupported = || {
        format!(
            "descr {:?} is {holds}; the model declares {declared}. opdump reads '<V2' as \
             bfloat16, '<V1' as int4, uint4, float8_e4m3fn, float8_e4m3fnuz or \
             float8_e5m2fnuz and '<f1' as float8_e5m2, whichever the model declares for the \
             input",
            npy.descr
        )
    };
    match (npy.dtype, d.dtype) {
        (DType::UInt16, Some(DType::BFloat16)) => npy.dtype = DType::BFloat16,
        (DType::UInt8, Some(DType::Float8E5M2)) if e5m2 => npy.dtype = DType::Float8E5M2,
        (
            DType::UInt8,
            Some(to @ (DType::Float8E4M3FN | DType::Float8E4M3FNUZ | DType::Float8E5M2FNUZ)),
        ) if !e5m2 => npy.dtype = to,
        (DType::UInt8, Some(to @ (DType::Int4 | DType::UInt4))) if !e5m2 => {
            npy.data = pack_nibbles(&npy.data, to)?;
            npy.dtype = to;
        }
        _ => return Err(unsupported()),
    }
    Ok(())
}

/// ml_dtypes' int4/uint4 (one value per byte) packed two per byte, low nibble first. Each byte
/// must be what ml_dtypes stores: the value in the low nibble, the high nibble 0 (or, for
/// int4, all ones when the value is negative).
fn pack_nibbles(bytes: &[u8], to: DType) -> Result<Vec<u8>, String> {
    let mut packed = vec![0u8; bytes.len().div_ceil(2)];
    for (k, &b) in bytes.iter().enumerate() {
        let fits = match to {
            DType::Int4 => b >> 4 == 0 || b >> 4 == 0xf,
            _ => b <= 15,
        };
        if !fits {
            let what = if to == DType::Int4 {
                "an int4 as ml_dtypes stores one (the value in the low nibble)"
            } else {
                "a uint4 (0..=15)"
            };
            return Err(format!("element {k} is byte {b:#04x}, not {what}"));
        }
        packed[k / 2] |= (b & 0x0f) << (4 * (k % 2));
    }
    Ok(packed)
}

/// Reads `--input NAME=FILE.npy` values and checks them against the declared inputs.
fn read_feeds(specs: &[String], declared: &[DeclaredInput]) -> Result<Vec<HostTensor>, Failure> {
    let names: Vec<&str> = declared.iter().map(|d| d.name.as_str()).collect();
    let mut feeds: Vec<Option<HostTensor>> = vec![None; declared.len()];
    for spec in specs {
        let Some((name, file)) = spec.split_once('=') else {
            return Err(Failure::Invalid(format!(
                "--input {spec:?}: expected NAME=FILE.npy (model inputs: {names:?})"
            )));
        };
        let Some(i) = names.iter().position(|n| *n == name) else {
            return Err(Failure::Invalid(format!(
                "--input {name}: the model has no input {name:?} (its inputs: {names:?})"
            )));
        };
        let mut npy = dump_npy::read_file_opaque(file)
            .map_err(|e| Failure::Invalid(format!("--input {name}: {file}: {e}")))?;
        if npy.is_opaque() {
            resolve_opaque(&mut npy, &declared[i])
                .map_err(|why| Failure::Invalid(format!("--input {name}: {file}: {why}")))?;
        }
        if npy.fortran_order {
            return Err(Failure::Invalid(format!(
                "--input {name}: {file}: Fortran-order arrays are not supported (save it with \
                 numpy.ascontiguousarray)"
            )));
        }
        let d = &declared[i];
        if d.dtype.is_some_and(|t| t != npy.dtype) {
            return Err(Failure::Invalid(format!(
                "--input {name}: {file} holds {} but the model declares {}",
                npy.dtype,
                describe(d.dtype, d.shape.as_deref())
            )));
        }
        if d.shape.as_ref().is_some_and(|s| *s != npy.shape) {
            return Err(Failure::Invalid(format!(
                "--input {name}: {file} has shape {:?} but the model declares {}",
                npy.shape,
                describe(d.dtype, d.shape.as_deref())
            )));
        }
        feeds[i] = Some(HostTensor {
            name: name.to_owned(),
            dtype: npy.dtype,
            shape: npy.shape,
            data: npy.data,
        });
    }
    feeds
        .into_iter()
        .zip(declared)
        .map(|(f, d)| {
            f.ok_or_else(|| {
                Failure::Invalid(format!(
                    "missing input {:?} ({}): pass --input {}=FILE.npy",
                    d.name,
                    describe(d.dtype, d.shape.as_deref()),
                    d.name
                ))
            })
        })
        .collect()
}

/// SplitMix64: a tiny deterministic generator for the random inputs.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// A float8 byte of `dtype` for `v` in (-2, 2): `v` truncated toward zero to the format (its
/// exponent kept, its mantissa cut to 3 bits for e4m3fn/e4m3fnuz or 2 for e5m2/e5m2fnuz;
/// values below the smallest normal become zero of their sign, always +0 in the FNUZ types,
/// whose `0x80` is NaN), so the result's magnitude never exceeds `|v|`.
fn fp8_toward_zero(dtype: DType, v: f64) -> u8 {
    let (m_bits, bias, fnuz) = match dtype {
        DType::Float8E5M2 => (2, 15, false),
        DType::Float8E4M3FNUZ => (3, 8, true),
        DType::Float8E5M2FNUZ => (2, 16, true),
        _ => (3, 7, false),
    };
    let bits = v.to_bits();
    let sign = ((bits >> 63) as u8) << 7;
    let exp = ((bits >> 52) & 0x7ff) as i32 - 1023 + bias;
    if exp < 1 {
        return if fnuz { 0 } else { sign };
    }
    let man = ((bits >> (52 - m_bits)) & ((1 << m_bits) - 1)) as u8;
    sign | ((exp as u8) << m_bits) | man
}

/// Random values for every declared input: floats in [-1, 1) (float8 truncated toward zero to
/// the format), integers in 0..10 (int4 in 0..8), booleans.
fn random_feeds(declared: &[DeclaredInput], seed: u64) -> Result<Vec<HostTensor>, Failure> {
    let mut rng = SplitMix(seed);
    declared
        .iter()
        .map(|d| {
            let (Some(dtype), Some(shape)) = (d.dtype, d.shape.clone()) else {
                return Err(Failure::Invalid(format!(
                    "input {:?} has no fixed type and shape ({}): pass --input {}=FILE.npy",
                    d.name,
                    describe(d.dtype, d.shape.as_deref()),
                    d.name
                )));
            };
            let mut data = random_buffer(d, dtype, &shape)?;
            // Cannot overflow: `random_buffer` counted the elements with a checked product.
            let n = shape.iter().product::<usize>();
            for _ in 0..n {
                let u = rng.unit();
                let int = ((u + 1.0) * 5.0) as i64;
                match dtype {
                    DType::Float32 => data.extend((u as f32).to_le_bytes()),
                    DType::Float64 => data.extend(u.to_le_bytes()),
                    DType::Float16 => data.extend(half::f16::from_f64(u).to_le_bytes()),
                    DType::Bool => data.push(u8::from(u >= 0.0)),
                    DType::Int8 | DType::UInt8 => data.push(int as u8),
                    DType::Int16 | DType::UInt16 => data.extend((int as u16).to_le_bytes()),
                    DType::Int32 | DType::UInt32 => data.extend((int as u32).to_le_bytes()),
                    DType::Int64 | DType::UInt64 => data.extend(int.to_le_bytes()),
                    d if d.is_float8() => data.push(fp8_toward_zero(dtype, u)),
                    // One value per byte here; packed two per byte below.
                    DType::Int4 => data.push((int.min(7)) as u8),
                    DType::UInt4 => data.push(int as u8),
                    other => {
                        return Err(Failure::Invalid(format!(
                            "input {:?}: no random {other} values; pass --input {}=FILE.npy",
                            d.name, d.name
                        )));
                    }
                }
            }
            if matches!(dtype, DType::Int4 | DType::UInt4) {
                data = pack_nibbles(&data, dtype).map_err(Failure::Invalid)?;
            }
            Ok(HostTensor {
                name: d.name.clone(),
                dtype,
                shape,
                data,
            })
        })
        .collect()
}

/// An empty buffer with room for `shape`'s random values of `dtype` (int4/uint4: one byte per
/// element before packing), or an error naming the input when the count passes `usize` or
/// the bytes cannot be had: more than the memory available (Linux `MemAvailable`), or an
/// allocation the system refuses. A model may declare any shape; allocating it blindly
/// panicked (the product overflowing) or aborted the process (a failed allocation).
fn random_buffer(d: &DeclaredInput, dtype: DType, shape: &[usize]) -> Result<Vec<u8>, Failure> {
    let what = || format!("input {:?} ({})", d.name, declared_type(d));
    let too_big = |why: String| {
        Failure::Invalid(format!(
            "{}: {why}; pass --input {}=FILE.npy",
            what(),
            d.name
        ))
    };
    let bytes = shape
        .iter()
        .try_fold(1usize, |a, &x| a.checked_mul(x))
        .and_then(|n| match dtype {
            DType::Int4 | DType::UInt4 => Some(n),
            _ => dtype.storage_bytes(n),
        })
        .ok_or_else(|| too_big("its element count or byte size passes the address space".into()))?;
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    if let Some(avail) = mem_available()
        && bytes as u64 > avail
    {
        return Err(too_big(format!(
            "its random values need {bytes} bytes ({:.1} GiB), more than the memory available \
             ({:.1} GiB)",
            gib(bytes as u64),
            gib(avail)
        )));
    }
    let mut data = Vec::new();
    data.try_reserve_exact(bytes).map_err(|e| {
        too_big(format!(
            "its random values need {bytes} bytes ({:.1} GiB): {e}",
            gib(bytes as u64)
        ))
    })?;
    Ok(data)
}

/// The memory the kernel says can be had without swapping (`MemAvailable` in
/// `/proc/meminfo`), in bytes; `None` where there is no such file or line.
fn mem_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    kib.checked_mul(1024)
}

/// The config text (the user's, or the embedded one with the model's name as `net_name`) and
/// the dump root replacing its `path` (`--out`; `./opdump-run` with the embedded config).
fn config_text(args: &Args) -> Result<(String, Option<&Path>), String> {
    match &args.config {
        None => {
            let net: String = args
                .model
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let text = default_config(STAND_IN, SavedData::Full, &categories_json("all"));
            let net = if net.is_empty() {
                "Net".to_owned()
            } else {
                net
            };
            let text = text.replace(
                "\"net_name\": \"LeNet5\"",
                &format!("\"net_name\": \"{net}\""),
            );
            Ok((
                text,
                Some(args.out.as_deref().unwrap_or(Path::new("opdump-run"))),
            ))
        }
        Some(p) => {
            let t = dump_host::config::read_config_file(p)
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    String::from_utf8(b)
                        .map_err(|_| format!("{}: the dump config is not UTF-8 text", p.display()))
                })?;
            Ok((t, args.out.as_deref()))
        }
    }
}

/// Runs `run`: what was dumped on `out`; a [`Failure::Invalid`] for bad input (the model
/// file, an input, the config, an argument), a [`Failure::Failed`] when the runtime could not
/// load or evaluate the model (an unsupported op, a caught panic) or the dump failed, a
/// [`Failure::Stopped`] when `--stop-at-nonfinite` stopped it.
pub fn run(args: &Args, env: &dyn Env, out: &mut dyn Write, err: &mut dyn Write) -> Outcome {
    run_inner(args, env, out, err).map(|()| Verdict::Clean)
}

/// What a runtime's error means for the command: `--stop-at-nonfinite`'s stop, bad input
/// (the model file, an input, the environment: exit 2) or a runtime or dump failure (exit 1).
/// Errors loading or preparing `model` name it, except an input's (which names the input)
/// and a runtime that could not start (which names its library).
fn failure(e: dump_onnx::Error, model: Option<&Path>) -> Failure {
    if let Some(at) = e.non_finite() {
        return Failure::Stopped(format!("stopped at the first non-finite output: {at}"));
    }
    let text = match model {
        Some(p)
            if !matches!(
                e,
                dump_onnx::Error::Input { .. } | dump_onnx::Error::Setup(_)
            ) =>
        {
            format!("{}: {e}", p.display())
        }
        _ => e.to_string(),
    };
    if e.blames_caller() {
        Failure::Invalid(text)
    } else {
        Failure::Failed(text)
    }
}

/// A runtime call with its panic contained: a panic becomes [`Failure::Failed`] naming the
/// runtime and what it was doing.
fn guarded<T>(
    runtime: &str,
    doing: &str,
    f: impl FnOnce() -> Result<T, Failure>,
) -> Result<T, Failure> {
    contain::contained(f).unwrap_or_else(|m| {
        Err(Failure::Failed(format!(
            "{runtime} panicked while {doing} (the panic was caught): {m}"
        )))
    })
}

fn run_inner(
    args: &Args,
    env: &dyn Env,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Failure> {
    if args.steps == 0 {
        return Err(Failure::Invalid("--steps must be at least 1".into()));
    }
    let (text, root) = config_text(args).map_err(Failure::Invalid)?;
    std::fs::File::open(&args.model)
        .map_err(|e| Failure::Invalid(format!("{}: {e}", args.model.display())))?;
    let runtime = format!("{:?}", args.runtime).to_lowercase();
    let load = runtimes::constructor(args.runtime)?;
    let mut runner = guarded(&runtime, "loading the model", || {
        load(&args.model, &LoadOptions::graph(0)).map_err(|e| failure(e, Some(&args.model)))
    })?;
    let declared = runner.inputs();
    let feeds = if args.inputs.is_empty() {
        random_feeds(&declared, args.seed)?
    } else {
        read_feeds(&args.inputs, &declared)?
    };
    let source = if args.inputs.is_empty() {
        format!("random, seed {}", args.seed)
    } else {
        "from --input".to_owned()
    };
    let list: Vec<String> = feeds
        .iter()
        .map(|f| format!("{} {} {:?}", f.name, f.dtype, f.shape))
        .collect();
    guarded(runner.name(), "preparing the model", || {
        runner
            .set_inputs(feeds)
            .map_err(|e| failure(e, Some(&args.model)))
    })?;
    let mut opts = DumpOptions::from_env(env).map_err(|e| Failure::Invalid(e.to_string()))?;
    if let Some(steps) = args.flight_recorder {
        let mut f = FlightRecorder {
            steps,
            ..FlightRecorder::default()
        };
        if let Some(mb) = args.flight_budget_mb {
            f.budget_bytes = mb.saturating_mul(1 << 20);
        }
        opts.flight_recorder = Some(f);
    }
    if args.stop_at_nonfinite {
        opts.on_nonfinite = Some(NonFinitePolicy::Stop);
    }
    opts.set_dump.extend(args.set_dump.iter().cloned());
    let events = Events::default();
    let target = Target {
        text: &text,
        root,
        embedded: args.config.is_none(),
    };
    let opened = open_dump::open(&target, env, &opts, events.sink());
    events.print_to(err, false);
    let mut dumper = opened.map_err(|e| match &args.config {
        Some(p) => Failure::Invalid(format!("{}: {e}", p.display())),
        None => Failure::Invalid(e),
    })?;
    let root = dumper
        .plan()
        .map(|p| p.root.display().to_string())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "opdump run: {} with {}, {} step(s), dumping to {root}",
        args.model.display(),
        runner.name(),
        args.steps
    );
    let _ = writeln!(out, "inputs ({source}): {}", list.join(", "));
    let wall = Instant::now();
    let mut failed = None;
    for _ in 0..args.steps {
        let n = dumper.next_step();
        let t = Instant::now();
        let name = runner.name();
        match guarded(name, &format!("running step {n}"), || {
            runner.step(&mut dumper).map_err(|e| failure(e, None))
        }) {
            Ok(kernels) => {
                let ms = t.elapsed().as_secs_f64() * 1e3;
                let p = dumper.progress();
                let _ = writeln!(
                    out,
                    "  step {n}: {kernels} kernels, {ms:.2} ms, {} files, {} rows so far",
                    p.files, p.rows
                );
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
        events.print_to(err, false);
    }
    if let (_, Some(w)) = dumper.useless_outputs() {
        let _ = writeln!(err, "warning: {w}");
    }
    for d in runner.diagnostics() {
        let _ = writeln!(err, "warning: {d}");
    }
    // CANN's GE layout writes dump files (or statistics csvs) only.
    let ge = dumper.plan().and_then(|p| p.ge.as_ref()).map(|g| {
        if g.npy {
            ".npy files"
        } else if g.stats.is_some() {
            "CANN statistics csvs"
        } else {
            "CANN dump files"
        }
    });
    let graphs = if dumper.plan().is_some_and(|p| p.msprobe.is_some()) {
        format!("{root}/.opdump/graphs")
    } else {
        format!("{root}/rank_*/graphs")
    };
    let report = dumper.close();
    // After a failed step "nothing was dumped" says nothing the error does not.
    events.print_to(err, failed.is_some());
    if let Some(e) = failed {
        return Err(e);
    }
    let report = report.map_err(|e| Failure::Failed(e.to_string()))?;
    let secs = wall.elapsed().as_secs_f64();
    if args.flight_recorder.is_some() {
        // MindSpore's layout puts it in the rank directory, msprobe's beside the steps.
        let trigger = [Path::new(&root).join("rank_0"), Path::new(&root).to_owned()]
            .map(|d| d.join("trigger.json"))
            .into_iter()
            .find(|p| p.exists());
        let _ = match trigger {
            Some(trigger) => writeln!(out, "flight recorder: {}", trigger.display()),
            None => writeln!(out, "flight recorder: no trigger fired, nothing written"),
        };
    }
    let _ = match ge {
        Some(what) => writeln!(
            out,
            "wrote {} {what} ({:.1} MB) in {secs:.3} s in CANN's GE layout under {root}",
            report.files,
            report.bytes as f64 / 1e6,
        ),
        None => writeln!(
            out,
            "wrote {} .npy files ({:.1} MB) and {} statistic rows in {secs:.3} s; graphs in \
             {graphs}",
            report.files,
            report.bytes as f64 / 1e6,
            report.rows
        ),
    };
    for k in &report.unused_kernels {
        let _ = writeln!(err, "warning: kernels entry never matched: {k}");
    }
    Ok(())
}

/// The Dumper's events, queued and printed by the command between library calls.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<(bool, String)>>>);

impl Events {
    /// A sink that queues each event's text, marking "nothing was dumped".
    fn sink(&self) -> EventSink {
        let q = Arc::clone(&self.0);
        EventSink::new(move |e| {
            let nothing = matches!(e, Event::NothingDumped(_));
            q.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((nothing, e.to_string()));
        })
    }

    /// Prints the queued lines (without "nothing was dumped" when `failed`) and empties the
    /// queue.
    fn print_to(&self, err: &mut dyn Write, failed: bool) {
        let lines = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        for (nothing, l) in lines {
            if !(failed && nothing) {
                let _ = writeln!(err, "{l}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every float8 value of magnitude below 2 maps to itself (subnormals to zero of their
    /// sign); anything else truncates toward zero.
    #[test]
    fn fp8_toward_zero_keeps_exact_values_and_never_grows() {
        for dtype in [
            DType::Float8E4M3FN,
            DType::Float8E5M2,
            DType::Float8E4M3FNUZ,
            DType::Float8E5M2FNUZ,
        ] {
            let fnuz = matches!(dtype, DType::Float8E4M3FNUZ | DType::Float8E5M2FNUZ);
            for b in 0..=255u8 {
                let v = f64::from(dump_core::widen::fp8_to_f32(dtype, b).unwrap());
                if !v.is_finite() || v.abs() >= 2.0 {
                    continue;
                }
                let got = fp8_toward_zero(dtype, v);
                let exp_mask = if matches!(dtype, DType::Float8E5M2 | DType::Float8E5M2FNUZ) {
                    0x7c
                } else {
                    0x78
                };
                let subnormal = b & exp_mask == 0;
                let want = match (subnormal, fnuz) {
                    (true, true) => 0,
                    (true, false) => b & 0x80,
                    (false, _) => b,
                };
                assert_eq!(got, want, "{dtype} {b:#04x} ({v})");
            }
            for v in [0.3, -0.77, 0.999_999, -1.0, 1e-9, -1e-9, -0.0] {
                let b = fp8_toward_zero(dtype, v);
                let w = f64::from(dump_core::widen::fp8_to_f32(dtype, b).unwrap());
                assert!(w.abs() <= v.abs() && w * v >= 0.0, "{dtype} {v} -> {w}");
                assert!(!w.is_nan(), "{dtype} {v} -> {b:#04x}, a NaN");
                assert!(
                    v.abs() - w.abs() < v.abs() / 4.0 + 1e-2,
                    "{dtype} {v} -> {w}"
                );
            }
        }
    }

    #[test]
    fn random_inputs_of_float8_and_4_bit_types() {
        let declared = |dtype| DeclaredInput {
            name: "x".into(),
            dtype: Some(dtype),
            shape: Some(vec![5]),
            onnx_type: None,
        };
        let feeds = random_feeds(
            &[
                declared(DType::Int4),
                declared(DType::UInt4),
                declared(DType::Float8E4M3FN),
                declared(DType::Float8E5M2),
                declared(DType::Float8E4M3FNUZ),
                declared(DType::Float8E5M2FNUZ),
            ],
            7,
        )
        .unwrap();
        assert_eq!(feeds[0].data.len(), 3, "int4 packed two per byte");
        assert_eq!(feeds[1].data.len(), 3, "uint4 packed two per byte");
        let mut nib = [0u8; 5];
        dump_core::widen::int4_to_int8(&feeds[0].data, 5, &mut nib).unwrap();
        assert!(nib.iter().all(|&b| (0..8).contains(&(b as i8))), "{nib:?}");
        dump_core::widen::uint4_to_uint8(&feeds[1].data, 5, &mut nib).unwrap();
        assert!(nib.iter().all(|&b| b < 10), "{nib:?}");
        for f in &feeds[2..] {
            assert_eq!(f.data.len(), 5);
            for &b in &f.data {
                let v = dump_core::widen::fp8_to_f32(f.dtype, b).unwrap();
                assert!((-1.0..1.0).contains(&v), "{} {b:#04x}: {v}", f.dtype);
            }
        }
    }
}
