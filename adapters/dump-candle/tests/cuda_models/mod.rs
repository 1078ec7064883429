//! The models of the CUDA test and bench (`tests/cuda_model.rs`, `examples/cuda_overhead.rs`):
//! the CNN of `tests/cnn_training.rs` and a pre-norm transformer block, every sub-module a
//! [`Dumped`] and the attention probabilities and residual sums tapped. Weights and inputs
//! come from a fixed LCG on the host, so a model built on the CPU and one built on a GPU hold
//! the same values.
#![allow(dead_code)]

use candle_core::{DType, Device, Module, Result, Tensor, Var};
use candle_nn::{Activation, Conv2d, LayerNorm, Linear, VarBuilder, VarMap, conv2d, linear};
use dump_candle::{Dumped, tap};

/// `n` values uniform in `[-scale, scale)` from a fixed LCG seeded with `seed`.
pub fn lcg(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut s = seed ^ 0x2545_f491_4f6c_dd1d;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0) * scale
        })
        .collect()
}

/// A tensor of `shape` filled by [`lcg`], made on the host and moved to `dev`.
pub fn lcg_tensor(seed: u64, shape: &[usize], scale: f32, dev: &Device) -> Result<Tensor> {
    let n = shape.iter().product();
    Tensor::from_vec(lcg(seed, n, scale), shape, &Device::Cpu)?.to_device(dev)
}

/// Sets every variable of `varmap` from [`lcg`] (seeded by its position in name order,
/// scaled by `1/sqrt(fan_in)`), so models built on different devices start equal.
pub fn fill_varmap(varmap: &VarMap) -> Result<()> {
    let data = varmap.data().lock().unwrap_or_else(|e| e.into_inner());
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    for (i, name) in names.into_iter().enumerate() {
        let var: &Var = &data[name];
        let dims = var.dims();
        let fan_in: usize = dims.iter().skip(1).product::<usize>().max(1);
        let scale = 1.0 / (fan_in as f32).sqrt();
        let t = lcg_tensor(1000 + i as u64, dims, scale, var.device())?;
        var.set(&t)?;
    }
    Ok(())
}

/// The CNN of `tests/cnn_training.rs`: conv 1->4 (3x3), relu, 2x2 max-pool (tapped), linear.
pub struct Cnn {
    /// `features.conv1`.
    pub conv: Dumped<Conv2d>,
    act: Dumped<Activation>,
    fc: Dumped<Linear>,
}

impl Cnn {
    /// Its variables live in `vb`'s VarMap.
    pub fn new(vb: VarBuilder<'_>) -> Result<Self> {
        Ok(Cnn {
            conv: Dumped::new(
                conv2d(1, 4, 3, Default::default(), vb.pp("features.conv1"))?,
                "features.conv1",
            ),
            act: Dumped::new(Activation::Relu, "features.act1"),
            fc: Dumped::new(linear(4 * 3 * 3, 5, vb.pp("fc"))?, "fc"),
        })
    }
}

impl Module for Cnn {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let c = self.conv.forward(x)?;
        let a = self.act.forward(&c)?;
        let p = a.max_pool2d(2)?;
        tap("features.pool1", "MaxPool", &p);
        self.fc.forward(&p.flatten_from(1)?)
    }
}

/// The kernels of one CNN step, in execution order.
pub const CNN_ORDER: [&str; 4] = [
    "Default/features/conv1-Conv2d/Conv2d-op0",
    "Default/features/act1-Activation/Activation-op1",
    "Default/features/pool1/MaxPool-op2",
    "Default/fc-Linear/Linear-op3",
];

/// The CNN's batch: 8 images of 1x8x8 from the LCG, labels `i % 5`.
pub fn cnn_batch(dev: &Device) -> Result<(Tensor, Tensor)> {
    let x = lcg_tensor(7, &[8, 1, 8, 8], 0.5, dev)?;
    let y: Vec<u32> = (0..8).map(|i| i % 5).collect();
    Ok((x, Tensor::from_vec(y, 8, dev)?))
}

/// A CNN on `dev` with the LCG's weights, and its VarMap (for the optimizer).
pub fn cnn_on(dev: &Device) -> Result<(Cnn, VarMap)> {
    let varmap = VarMap::new();
    let model = Cnn::new(VarBuilder::from_varmap(&varmap, DType::F32, dev))?;
    fill_varmap(&varmap)?;
    Ok((model, varmap))
}

/// The size of a [`Block`].
#[derive(Clone, Copy, Debug)]
pub struct BlockSize {
    /// Sequences per batch.
    pub batch: usize,
    /// Tokens per sequence.
    pub seq: usize,
    /// Model width.
    pub d_model: usize,
    /// Attention heads (dividing `d_model`).
    pub heads: usize,
    /// MLP width as a multiple of `d_model`.
    pub mlp: usize,
}

impl BlockSize {
    /// The block of issue 27: d_model 1024, 16 heads, 512 tokens, batch 8, MLP 4x.
    pub const LARGE: BlockSize = BlockSize {
        batch: 8,
        seq: 512,
        d_model: 1024,
        heads: 16,
        mlp: 4,
    };
}

/// Multi-head self-attention core: packed `qkv` `(B, T, 3D)` to the context `(B, T, D)`.
/// The softmax probabilities are tapped (`block.attn.softmax`).
pub struct Attention {
    heads: usize,
}

impl Module for Attention {
    fn forward(&self, qkv: &Tensor) -> Result<Tensor> {
        let (b, t, d3) = qkv.dims3()?;
        let d = d3 / 3;
        let hd = d / self.heads;
        // (B, T, 3, H, hd) -> (3, B, H, T, hd)
        let qkv = qkv
            .reshape((b, t, 3, self.heads, hd))?
            .permute((2, 0, 3, 1, 4))?;
        let q = qkv.get(0)?.contiguous()?;
        let k = qkv.get(1)?.contiguous()?;
        let v = qkv.get(2)?.contiguous()?;
        let scores = (q.matmul(&k.t()?)? * (1.0 / (hd as f64).sqrt()))?;
        let p = candle_nn::ops::softmax_last_dim(&scores)?;
        tap("block.attn.softmax", "Softmax", &p);
        p.matmul(&v)?.transpose(1, 2)?.reshape((b, t, d))
    }
}

/// A pre-norm transformer block: `h = x + proj(attn(qkv(ln1(x))))`,
/// `y = h + fc2(gelu(fc1(ln2(h))))`; the two residual sums are tapped.
pub struct Block {
    ln1: Dumped<LayerNorm>,
    qkv: Dumped<Linear>,
    attn: Dumped<Attention>,
    proj: Dumped<Linear>,
    ln2: Dumped<LayerNorm>,
    fc1: Dumped<Linear>,
    act: Dumped<Activation>,
    fc2: Dumped<Linear>,
}

/// Tensors one block step hands to the Dumper: 8 modules x (input + output), 3 taps.
pub const BLOCK_TENSORS: u64 = 8 * 2 + 3;

fn lin(seed: u64, i: usize, o: usize, dev: &Device) -> Result<Linear> {
    let scale = 1.0 / (i as f32).sqrt();
    Ok(Linear::new(
        lcg_tensor(seed, &[o, i], scale, dev)?,
        Some(lcg_tensor(seed + 1, &[o], scale, dev)?),
    ))
}

fn norm(seed: u64, d: usize, dev: &Device) -> Result<LayerNorm> {
    let w = (lcg_tensor(seed, &[d], 0.1, dev)? + 1.0)?;
    Ok(LayerNorm::new(
        w,
        lcg_tensor(seed + 1, &[d], 0.1, dev)?,
        1e-5,
    ))
}

impl Block {
    /// A block of `size` on `dev`, weights from the LCG.
    pub fn new(size: BlockSize, dev: &Device) -> Result<Self> {
        let d = size.d_model;
        if size.heads == 0 || !d.is_multiple_of(size.heads) {
            return Err(candle_core::Error::Msg(format!(
                "{} heads do not divide d_model {d}",
                size.heads
            )));
        }
        Ok(Block {
            ln1: Dumped::new(norm(10, d, dev)?, "block.ln1"),
            qkv: Dumped::new(lin(20, d, 3 * d, dev)?, "block.attn.qkv"),
            attn: Dumped::new(Attention { heads: size.heads }, "block.attn.core"),
            proj: Dumped::new(lin(30, d, d, dev)?, "block.attn.proj"),
            ln2: Dumped::new(norm(40, d, dev)?, "block.ln2"),
            fc1: Dumped::new(lin(50, d, size.mlp * d, dev)?, "block.mlp.fc1"),
            act: Dumped::new(Activation::GeluPytorchTanh, "block.mlp.act"),
            fc2: Dumped::new(lin(60, size.mlp * d, d, dev)?, "block.mlp.fc2"),
        })
    }

    /// The block's input for `size` on `dev`.
    pub fn input(size: BlockSize, dev: &Device) -> Result<Tensor> {
        lcg_tensor(3, &[size.batch, size.seq, size.d_model], 1.0, dev)
    }
}

impl Module for Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let a = self.ln1.forward(x)?;
        let a = self.qkv.forward(&a)?;
        let a = self.attn.forward(&a)?;
        let a = self.proj.forward(&a)?;
        let h = (x + a)?;
        tap("block.residual1", "Add", &h);
        let m = self.ln2.forward(&h)?;
        let m = self.fc1.forward(&m)?;
        let m = self.act.forward(&m)?;
        let m = self.fc2.forward(&m)?;
        let y = (h + m)?;
        tap("block.residual2", "Add", &y);
        Ok(y)
    }
}
