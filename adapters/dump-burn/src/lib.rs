//! `dump-burn`: dump a burn model's layers, parameters and gradients in MindSpore 2.10's
//! layout.
//!
//! * [`layer`] runs one layer of a model as a kernel (input 0 and output 0 dumped, named by
//!   the module path you give, `"features.conv1"`, its op type the module's type name);
//! * [`tap`] dumps a tensor inside a forward that no layer boundary exposes;
//! * [`DumpedOptimizer`] wraps burn's [`ModuleOptimizer`] (what `AdamWConfig::init` and the
//!   other optimizer configs return): its step dumps every parameter's gradient as a backward
//!   `Gradient` kernel, every parameter after the update as a Parameter, its update (Δw and
//!   ‖Δw‖/‖w‖), the optimizer's state (AdamW's moments, momentum SGD's velocity) and the
//!   learning rate, by module path (burn's [`ModuleVisitor`](burn::module::ModuleVisitor)):
//!   the one changed line of a training loop, with the kernels dump-candle writes for candle;
//! * [`training_step`], called after `backward()`, dumps every parameter's gradient and every
//!   parameter only, for loops that keep their bare optimizer, from [`GradientsParams`] or
//!   [`Gradients`](burn::tensor::Gradients).
//!
//! A [`Tracer`] runs each step: it begins the Dumper's step, installs it for the calling
//! thread while your closure runs, and keeps the graph's execution order. Tensors are read to
//! the host once per dumped tensor ([`HostData`]: for float tensors a product by 1, whose fresh
//! buffer burn moves out, instead of `to_data`'s element-by-element walk of a shared tensor); a kernel
//! the Dumper does not want (its `kernels` filter, an unselected iteration) costs the name's
//! formatting and the filter, and no tensor is touched.
//!
//! ## Why module level, not a backend decorator
//!
//! burn 0.22's tensors carry no backend type: `burn::tensor::Tensor<D, K>` holds a
//! `BridgeTensor` dispatched over a closed enum of backends (`burn-dispatch`:
//! `DispatchTensorKind` with one variant per built-in backend, Cube, Flex, NdArray,
//! LibTorch, Remote, Capture, and Autodiff around one of them; generated from
//! `burn-backend-extension`'s catalog). A `Dumping<B>` that implements
//! burn-backend's public traits by delegating to `B` can be written, but no burn model, module of
//! `burn::nn` or optimizer can run on it: they are written against `Tensor<D>` and reach
//! only the built-in backends. The dump points are therefore explicit, as in dump-candle.
//!
//! ## GPU backends: host reads, not the `DeviceTensor` contract
//!
//! A tensor on one of burn's GPU backends (CUDA, wgpu, ... through cubecl) is dumped like a
//! CPU one: [`HostData`] multiplies it by 1 on its device (one kernel and one device buffer the
//! size of the tensor) and reads the product to the host (`try_into_data`: one
//! device-to-host copy that waits for the tensor to be computed); statistics are then computed
//! on the host. Nothing of that is backend-specific, but it has only been run on the ndarray
//! backend here (no GPU backend is compiled in this workspace).
//!
//! dump-host's [`DeviceTensor`](dump_host::DeviceTensor) contract (statistics on the device,
//! ordered on the runtime's stream) is not used, for these reasons (burn 0.22.1, cubecl
//! 0.11.3):
//!
//! * the way down exists in public API, but only with a GPU backend compiled into burn:
//!   `Tensor::try_into_primitive::<B>()` (burn-tensor `src/tensor/api/extension.rs:95`) needs
//!   `DispatchTensor: DispatchKindConversion<B>`, implemented per backend under that backend's
//!   cfg only (burn-dispatch `src/tensor.rs:480-482`; the `Cube` variant of
//!   `DispatchTensorKind` exists only with `cube_backend`, `src/tensor.rs:265-266`, set by
//!   burn-dispatch's `cuda`/`wgpu`/... features, `Cargo.toml:57-64`). Depending on burn's `cuda`
//!   or `wgpu` feature, even behind an off-by-default feature of this crate, would add cubecl's
//!   runtimes and cudarc/wgpu to the workspace's builds and lock file, which this project does
//!   not take on (CI time);
//! * with burn's default `fusion` (burn-cuda `Cargo.toml:46-56`) the primitive is a fusion
//!   handle, not a cubecl tensor (extension.rs:93-94); it has to be resolved (its fused graph
//!   executed) before it has a buffer;
//! * a resolved `CubeTensor` has public `client` and `handle` fields (burn-cubecl
//!   `src/tensor/base.rs:20-33`), and cubecl's `ComputeClient::get_resource` (cubecl-runtime
//!   `src/client.rs:467`) gives CUDA's `GpuResource { ptr, size, .. }` (cubecl-cuda
//!   `src/compute/storage/gpu.rs:36-43`), but no stream: the resource is claimed on the calling
//!   thread's cubecl stream (`client.rs:243-248`, `compute/server.rs:1357-1368`), whose
//!   `CUstream` no public API returns. Statistics launched on another stream would have to wait
//!   for a full device sync (`ComputeClient::sync`, `client.rs:1407`) per dumped step, which
//!   the host read already does per tensor.
//!
//! [`GradientsParams`]: burn::optim::GradientsParams
//! [`ModuleOptimizer`]: burn::optim::ModuleOptimizer
//!
//! ```
//! use burn::nn::{Relu, Linear, LinearConfig};
//! use burn::tensor::{Device, Tensor};
//! use dump_burn::{Tracer, layer};
//! use dump_host::Dumper;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::env::temp_dir().join(format!("dump-burn-doc-{}", std::process::id()));
//! let config = format!(
//!     r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
//!        "iteration": "all", "saved_data": "statistic", "input_output": 0, "kernels": [],
//!        "support_device": [0]}}}}"#,
//!     dir.display()
//! );
//! let mut dumper = Dumper::builder().open_json(config.into_bytes())?;
//! let device = Device::default();
//! let fc: Linear = LinearConfig::new(3, 2).init(&device);
//! let x = Tensor::<2>::from_floats([[1.0, -2.0, 3.0]], &device);
//! let mut tracer = Tracer::new(0);
//! let y = tracer.step(&mut dumper, || {
//!     let h = layer("block.fc", &fc, x.clone(), |m, x| m.forward(x));
//!     layer("block.act", &Relu::new(), h, |m, x| m.forward(x))
//! })?;
//! assert_eq!(y.dims(), [1, 2]);
//! assert_eq!(
//!     tracer.execution_order(),
//!     ["Default/block/fc/Linear-op0", "Default/block/act/Relu-op1"]
//! );
//! let report = dumper.close()?;
//! assert_eq!(report.rows, 4); // input 0 and output 0 of both kernels
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs, unreachable_pub)]

pub mod convert;
mod error;
mod trace;
mod train;

/// The burn version this adapter is built against (re-exported so users need no second pin).
pub use burn;
pub use convert::{HostData, dtype_of, with_tensor_ref};
pub use error::Error;
pub use trace::{Tracer, layer, op_type_of, tap};
pub use train::{DumpedOptimizer, ParamGradients, training_step};
