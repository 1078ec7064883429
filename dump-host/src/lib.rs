//! `dump-host`: the opdump library a Rust ML runtime embeds. It reads a MindSpore 2.10
//! `data_dump.json` or an msprobe `config.json` ([`config`]), and its [`Dumper`] writes every
//! wanted kernel's inputs and outputs as `.npy` files and `statistic.csv` rows in MindSpore's
//! exact layout, or as msprobe's crash-safe `dump.json` tree ([`layout`]), through a bounded
//! background writer ([`writer`]). msprobe's session API is there too: [`Dumper::start`],
//! [`Dumper::stop`], [`Dumper::step`], [`Dumper::save`] and the [`Session`] handle. It never prints: warnings are typed
//! [`diag::Event`]s delivered to a sink you choose (one line to stderr by default).
//!
//! Reading dumps back (`inspect`, `compare`) is the `dump-read` crate's job.
//!
//! # Integrating it
//!
//! Open a [`Dumper`] once (here from config text; [`Dumper::from_env`] reads the file named by
//! `MINDSPORE_DUMP_CONFIG` and is disabled when it is unset), then for each step of each graph
//! ask the [`Step`] whether a kernel is wanted and hand over its tensors. A [`Step`] owns its
//! handle on the Dumper's state, so it can be kept in the runtime's own structs or a
//! thread-local and sent to other threads.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use dump_host::{DumpOptions, Dumper, TensorRef};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = std::env::temp_dir().join(format!("opdump-doc-{}", std::process::id()));
//! let config = format!(
//!     r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
//!           "iteration": "all", "saved_data": "tensor", "input_output": 0, "kernels": [],
//!           "support_device": [0]}},
//!         "e2e_dump_settings": {{"enable": true}}}}"#,
//!     root.display()
//! );
//! // The rank and MS_DIAGNOSTIC_DATA_PATH come from this map instead of the process environment.
//! let env = std::collections::HashMap::<String, String>::new();
//! let warnings = Arc::new(Mutex::new(Vec::new()));
//! let log = Arc::clone(&warnings);
//! let mut dumper = Dumper::builder()
//!
//!     .env(&env)
//!     .options(DumpOptions::default())
//!     .on_event(move |e| log.lock().unwrap().push(e.to_string())) // instead of stderr
//!     .open_json(config)?;
//!
//! let conv = "Default/network/conv1-Conv2d/Conv2D-op0";
//! dumper.begin_graph(0, &[conv])?; // ms_execution_order_graph_0.csv
//! let (x, w) = ([1.0f32, 2.0, 3.0, 4.0], [0.5f32; 4]);
//! let step = dumper.begin_step(); // iteration 0
//! // `kernel` is a cheap "no" (no tensor touched) when the iteration or `kernels` does not
//! // want this kernel.
//! if let Some(k) = step.kernel("Conv2D", conv) {
//!     k.input(0, TensorRef::from_slice(&[2, 2], &x))?;
//!     k.input(1, TensorRef::from_slice(&[2, 2], &w))?;
//!     k.output(0, TensorRef::from_slice(&[2, 2], &x))?;
//!     k.finish()?;
//! }
//! step.finish()?; // returns the write failures seen so far
//! let report = dumper.close()?; // waits for queued files
//!
//! assert_eq!(report.files, 3);
//! let dir = root.join("rank_0/Net/0/0");
//! let names: Vec<String> = std::fs::read_dir(&dir)?
//!     .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
//!     .collect::<Result<_, _>>()?;
//! assert!(names.iter().any(|n| n.starts_with(
//!     "Conv2D.Default_network_conv1-Conv2d_Conv2D-op0.") && n.ends_with(
//!     ".output.0.DefaultFormat.Float32.npy")), "{names:?}");
//! // Warnings (config, unused `kernels` entries, failed writes, ...) went to the closure.
//! assert!(warnings.lock().unwrap().iter().all(|w| !w.contains("write failed")));
//! std::fs::remove_dir_all(&root)?;
//! # Ok(())
//! # }
//! ```
//!
//! # Catching the step that goes wrong
//!
//! With a flight recorder (`opdump.flight_recorder` in the config, or
//! [`DumperBuilder::flight_recorder`]) the Dumper holds the last N steps in memory and writes
//! them, with `trigger.json`, only when a watched output goes NaN/±Inf or
//! [`Dumper::trigger`] / a [`TriggerHandle`] fires; with `on_nonfinite: "stop"`
//! ([`DumperBuilder::on_nonfinite`]) the kernel call that sees the NaN returns
//! [`Error::NonFinite`]. See `docs/flight-recorder.md`.
//!
//! An adapter that dumps from inside a model's code (a module wrapper, a `tap` call) reaches
//! its running step through [`scope`]: a thread-local step scope it enters around the step's
//! body (dump-candle's and dump-burn's `Tracer::step`).
//!
//! Tensors: [`TensorRef::from_slice`] for `&[f32]`, `&[half::bf16]`, `&[i64]`, `&[bool]`, ...;
//! [`TensorRef::host`] for raw little-endian bytes (int4/uint1 packed), [`TensorRef::strided`]
//! for non-contiguous host tensors and [`TensorRef::device`] for a [`DeviceTensor`].
#![deny(missing_docs)]
#![deny(unreachable_pub)]
// The library never prints: everything it has to say is a `diag::Event`.
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]

pub mod config;
pub mod diag;
mod dumper;
pub mod error;
pub mod graph;
pub mod layout;
pub mod scope;
pub mod writer;

pub use dumper::{
    DeviceTensor, DumpOptions, DumpPlan, DumpReport, Dumper, DumperBuilder, Element, GraphToken,
    Kernel, MS_VERSION, NonFiniteAt, Planned, Session, Step, TensorRef, TriggerHandle,
};
pub use error::Error;

/// Watcher mode (CANN's `dump_scene: watcher`): watched outputs summarised again after every
/// kernel, a change no kernel wrote reported as memory corruption. The handles a runtime
/// gives ([`WatchedTensor`](watcher::WatchedTensor), [`RawView`](watcher::RawView)) and what
/// is reported ([`Corruption`](watcher::Corruption), `watcher.csv`); the settings are
/// [`config::WatcherConfig`]; docs/watcher.md shows a whole run.
pub mod watcher {
    pub use crate::dumper::watcher::{
        Corruption, RawView, WATCHER_CSV_HEADER, WatchStats, WatchedTensor,
    };
}

/// Ascend tensors and device formats (feature `ascend`): `ascend::DeviceTensor` (device-format
/// bytes with both shapes) is a [`DeviceTensor`]; dump it with
/// `TensorRef::device(&t).with_format("NC1HWC0")`.
#[cfg(feature = "ascend")]
pub use dump_device_ascend as ascend;
/// NVIDIA GPU tensors (feature `cuda`): `cuda::CudaTensor` is a [`DeviceTensor`].
#[cfg(feature = "cuda")]
pub use dump_device_cuda as cuda;
/// The device-tensor contract (from `dump-stats`): implement [`DeviceTensor`] on a runtime's
/// device tensor type to dump it; its statistics requests and layouts.
pub use dump_stats::device;
