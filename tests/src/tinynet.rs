//! A small kernel sequence shaped like the reference TinyNet of `tests/fixtures/reference/net.py`
//! (same full scope names, dtypes and shapes for the kernels it has), with deterministic
//! synthetic values, reported to a [`Step`] the way a runtime would.

use dump_core::DType;
use dump_host::{Error, Step, TensorRef};

/// An owned tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Element type.
    pub dtype: DType,
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Little-endian C-order bytes.
    pub bytes: Vec<u8>,
}

impl Tensor {
    /// Deterministic values for `(seed, step)`: floats in about [-2, 2) (a few exact zeros),
    /// small integers, alternating booleans.
    pub fn synth(dtype: DType, shape: &[usize], seed: u64, step: u64) -> Tensor {
        let n: usize = shape.iter().product();
        let mut x = seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(step.wrapping_mul(0xD1B5_4A32_D192_ED03))
            | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut bytes = Vec::new();
        for i in 0..n {
            let r = next();
            let f = if i % 7 == 3 {
                0.0
            } else {
                ((r >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
            };
            match dtype {
                DType::Float32 => bytes.extend_from_slice(&f.to_le_bytes()),
                DType::Float16 => bytes.extend_from_slice(&half::f16::from_f32(f).to_le_bytes()),
                DType::BFloat16 => bytes.extend_from_slice(&half::bf16::from_f32(f).to_le_bytes()),
                DType::Int32 => bytes.extend_from_slice(&((r % 100) as i32 - 50).to_le_bytes()),
                DType::Int64 => bytes.extend_from_slice(&((r % 100) as i64 - 50).to_le_bytes()),
                DType::Bool => bytes.push((i % 2) as u8),
                other => panic!("tinynet does not synthesise {other}"),
            }
        }
        Tensor {
            dtype,
            shape: shape.to_vec(),
            bytes,
        }
    }

    /// A borrowed view for the Dumper.
    pub fn as_ref(&self) -> TensorRef<'_> {
        TensorRef::host(self.dtype, &self.shape, &self.bytes)
    }
}

/// One kernel of the sequence.
#[derive(Clone, Debug)]
pub struct KernelSpec {
    /// Primitive name.
    pub op_type: &'static str,
    /// Full scope name (unsanitised).
    pub full_name: &'static str,
    /// `(dtype, shape)` of each input.
    pub inputs: &'static [(DType, &'static [usize])],
    /// `(dtype, shape)` of each output.
    pub outputs: &'static [(DType, &'static [usize])],
}

use DType::{BFloat16 as BF16, Bool, Float16 as F16, Float32 as F32, Int32 as I32, Int64 as I64};

const B: &str = "Default/network-WithLossCell/_backbone-TinyNet";

/// The kernels, in run order (a subset of the reference TinyNet's 38, with its names).
pub const KERNELS: &[KernelSpec] = &[
    KernelSpec {
        op_type: "AssignAdd",
        full_name: "Default/optimizer-Momentum/AssignAdd-op0",
        inputs: &[(I32, &[1]), (I32, &[1])],
        outputs: &[(I32, &[1])],
    },
    KernelSpec {
        op_type: "Conv2D",
        full_name: "Default/network-WithLossCell/_backbone-TinyNet/conv1-Conv2d/Conv2D-op0",
        inputs: &[(F32, &[2, 1, 8, 8]), (F32, &[4, 1, 3, 3])],
        outputs: &[(F32, &[2, 4, 6, 6])],
    },
    KernelSpec {
        op_type: "ReLU",
        full_name: "Default/network-WithLossCell/_backbone-TinyNet/relu-ReLU/ReLU-op0",
        inputs: &[(F32, &[2, 4, 6, 6])],
        outputs: &[(F32, &[2, 4, 6, 6])],
    },
    KernelSpec {
        op_type: "MatMul",
        full_name: "Default/network-WithLossCell/_backbone-TinyNet/fc1-Dense/MatMul-op0",
        inputs: &[
            (F32, &[2, 4, 3, 3]),
            (F32, &[5, 36]),
            (Bool, &[]),
            (Bool, &[]),
        ],
        outputs: &[(F32, &[2, 5])],
    },
    KernelSpec {
        op_type: "BiasAdd",
        full_name: "Default/network-WithLossCell/_backbone-TinyNet/fc1-Dense/BiasAdd-op0",
        inputs: &[(F32, &[2, 5]), (F32, &[5]), (I64, &[])],
        outputs: &[(F32, &[2, 5])],
    },
    KernelSpec {
        op_type: "Cast",
        full_name: "Default/network-WithLossCell/_backbone-TinyNet/Cast-op0",
        inputs: &[(F32, &[2, 5])],
        outputs: &[(F16, &[2, 5])],
    },
    KernelSpec {
        op_type: "Add",
        full_name: "Default/network-WithLossCell/_backbone-TinyNet/Add-op1",
        inputs: &[(F16, &[2, 5]), (F16, &[2, 5])],
        outputs: &[(F16, &[2, 5])],
    },
    KernelSpec {
        op_type: "Cast",
        full_name: "Default/network-WithLossCell/_backbone-TinyNet/Cast-op2",
        inputs: &[(F32, &[2, 5])],
        outputs: &[(BF16, &[2, 5])],
    },
    KernelSpec {
        op_type: "Mul",
        full_name: "Default/network-WithLossCell/_backbone-TinyNet/Mul-op1",
        inputs: &[(BF16, &[2, 5]), (BF16, &[2, 5])],
        outputs: &[(BF16, &[2, 5])],
    },
    KernelSpec {
        op_type: "Mul",
        full_name: "Expand/_Muls/Mul-op0",
        inputs: &[(F32, &[2, 5]), (F32, &[])],
        outputs: &[(F32, &[2, 5])],
    },
    KernelSpec {
        op_type: "SparseSoftmaxCrossEntropyWithLogits",
        full_name: "Default/network-WithLossCell/_loss_fn-SoftmaxCrossEntropyWithLogits/SparseSoftmaxCrossEntropyWithLogits-op0",
        inputs: &[(F32, &[2, 5]), (I32, &[2])],
        outputs: &[(F32, &[])],
    },
    KernelSpec {
        op_type: "ReluGrad",
        full_name: "Gradients/Default/network-WithLossCell/_backbone-TinyNet/relu-ReLU/Grad_ReLU/ReluGrad-op0",
        inputs: &[(F32, &[2, 4, 6, 6]), (F32, &[2, 4, 6, 6])],
        outputs: &[(F32, &[2, 4, 6, 6])],
    },
    KernelSpec {
        op_type: "Conv2DBackpropFilter",
        full_name: "Gradients/Default/network-WithLossCell/_backbone-TinyNet/conv1-Conv2d/Grad_Conv2D/Conv2DBackpropFilter-op0",
        inputs: &[(F32, &[2, 4, 6, 6]), (F32, &[2, 1, 8, 8])],
        outputs: &[(F32, &[4, 1, 3, 3])],
    },
    KernelSpec {
        op_type: "ApplyMomentum",
        full_name: "Default/optimizer-Momentum/ApplyMomentum-op2",
        inputs: &[
            (F32, &[4, 1, 3, 3]),
            (F32, &[4, 1, 3, 3]),
            (F32, &[]),
            (F32, &[4, 1, 3, 3]),
            (F32, &[]),
        ],
        outputs: &[(F32, &[4, 1, 3, 3])],
    },
];

/// Parameters dumped at step end: `(name, dtype, shape)`.
pub const PARAMETERS: &[(&str, DType, &[usize])] = &[
    ("conv1.weight", F32, &[4, 1, 3, 3]),
    ("moments.conv1.weight", F32, &[4, 1, 3, 3]),
    ("fc1.weight", F32, &[5, 36]),
    ("global_step", I32, &[1]),
    ("inputs0", F32, &[2, 1, 8, 8]),
    ("learning_rate", F32, &[]),
];

/// The scope prefix of the backbone's kernels.
pub const BACKBONE: &str = B;

/// The full names in execution order (for `begin_graph`).
pub fn execution_order() -> Vec<&'static str> {
    KERNELS.iter().map(|k| k.full_name).collect()
}

/// The tensors of kernel `k` (index into [`KERNELS`]) at `step`: `(inputs, outputs)`.
pub fn kernel_tensors(k: usize, step: u64) -> (Vec<Tensor>, Vec<Tensor>) {
    let spec = &KERNELS[k];
    let mk = |list: &[(DType, &[usize])], base: u64| {
        list.iter()
            .enumerate()
            .map(|(i, (d, s))| Tensor::synth(*d, s, base + i as u64, step))
            .collect::<Vec<_>>()
    };
    (
        mk(spec.inputs, 1000 * k as u64),
        mk(spec.outputs, 1000 * k as u64 + 500),
    )
}

/// The value of parameter `p` (index into [`PARAMETERS`]) after `step`.
pub fn parameter_tensor(p: usize, step: u64) -> Tensor {
    let (_, d, s) = PARAMETERS[p];
    Tensor::synth(d, s, 90_000 + p as u64, step)
}

/// Reports every kernel and then every parameter of one step, as a runtime would.
pub fn run_step(step: &Step) -> Result<(), Error> {
    let n = step.iteration();
    for (i, spec) in KERNELS.iter().enumerate() {
        let Some(k) = step.kernel(spec.op_type, spec.full_name) else {
            continue;
        };
        let (ins, outs) = kernel_tensors(i, n);
        for (slot, t) in ins.iter().enumerate() {
            k.input(slot as u32, t.as_ref())?;
        }
        for (slot, t) in outs.iter().enumerate() {
            k.output(slot as u32, t.as_ref())?;
        }
    }
    for (p, (name, _, _)) in PARAMETERS.iter().enumerate() {
        step.parameter(name, parameter_tensor(p, n).as_ref())?;
    }
    Ok(())
}
