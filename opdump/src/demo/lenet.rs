//! A LeNet-5 trained for real (forward, backward, momentum SGD) in f32, with an f16 branch and
//! a bf16 branch like MindSpore's own test network, reporting every kernel to a [`Tracer`].

use dump_core::DType;
use half::{bf16, f16};

use super::ops::*;

/// A tensor handed to the tracer: dtype, shape and raw little-endian bytes.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    /// Element type.
    pub dtype: DType,
    /// Dimensions.
    pub shape: &'a [usize],
    /// Raw bytes (C order).
    pub data: &'a [u8],
}

fn f32v<'a>(v: &'a [f32], shape: &'a [usize]) -> View<'a> {
    View {
        dtype: DType::Float32,
        shape,
        data: bytemuck::cast_slice(v),
    }
}

fn bits<'a>(dtype: DType, v: &'a [u16], shape: &'a [usize]) -> View<'a> {
    View {
        dtype,
        shape,
        data: bytemuck::cast_slice(v),
    }
}

/// Receives the network's kernels. `wants` is asked first and must be cheap; views are built and
/// [`kernel`](Tracer::kernel) called only when it says yes.
pub trait Tracer {
    /// Whether kernel `full_name` of type `op_type` should be reported.
    fn wants(&mut self, op_type: &str, full_name: &str) -> bool;
    /// A kernel ran with these inputs and outputs.
    fn kernel(&mut self, op_type: &str, full_name: &str, inputs: &[View<'_>], outputs: &[View<'_>]);
    /// A parameter or graph input's value at the end of the step.
    fn parameter(&mut self, name: &str, value: View<'_>);
}

/// A tracer that wants nothing: the undumped baseline.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTrace;

impl Tracer for NoTrace {
    fn wants(&mut self, _: &str, _: &str) -> bool {
        false
    }
    fn kernel(&mut self, _: &str, _: &str, _: &[View<'_>], _: &[View<'_>]) {}
    fn parameter(&mut self, _: &str, _: View<'_>) {}
}

const FWD: &str = "Default/network-WithLossCell/_backbone-LeNet5";
const BWD: &str = "Gradients/Default/network-WithLossCell/_backbone-LeNet5";
const LOSS: &str = "Default/network-WithLossCell/_loss_fn-SoftmaxCrossEntropyWithLogits/SparseSoftmaxCrossEntropyWithLogits-op0";
const OPT: &str = "Default/optimizer-Momentum";

struct Param {
    name: &'static str,
    shape: Vec<usize>,
    w: Vec<f32>,
    v: Vec<f32>,
}

/// Deterministic pseudo-random numbers (xorshift64*), uniform in [-1, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        ((r >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// LeNet-5 on 32×32 single-channel images, 10 classes, trained with momentum SGD.
pub struct LeNet {
    params: Vec<Param>,
    batch: usize,
    x: Vec<f32>,
    labels: Vec<i32>,
}

/// Names of the learnable parameters, in `params` order.
const PARAMS: [(&str, &[usize]); 10] = [
    ("conv1.weight", &[6, 1, 5, 5]),
    ("conv2.weight", &[16, 6, 5, 5]),
    ("fc1.weight", &[120, 400]),
    ("fc1.bias", &[120]),
    ("fc2.weight", &[84, 120]),
    ("fc2.bias", &[84]),
    ("fc3.weight", &[10, 84]),
    ("fc3.bias", &[10]),
    ("scale", &[1]),
    ("shift", &[10]),
];

impl LeNet {
    /// A network with deterministic weights and a deterministic synthetic batch.
    pub fn new(batch: usize) -> Self {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let params = PARAMS
            .iter()
            .map(|&(name, shape)| {
                let n: usize = shape.iter().product();
                let fan_in: usize = shape[1..].iter().product::<usize>().max(1);
                let scale = (1.0 / fan_in as f32).sqrt();
                let w = match name {
                    "scale" => vec![0.5],
                    "shift" => (0..n).map(|i| i as f32 / 10.0).collect(),
                    _ if name.ends_with("bias") => vec![0.0; n],
                    _ => (0..n).map(|_| rng.next() * scale).collect(),
                };
                Param {
                    name,
                    shape: shape.to_vec(),
                    v: vec![0.0; n],
                    w,
                }
            })
            .collect();
        // Images: smooth patterns whose class decides the frequency, plus a little noise.
        let mut x = Vec::with_capacity(batch * 1024);
        let mut labels = Vec::with_capacity(batch);
        for b in 0..batch {
            let class = (b * 7 + 3) % 10;
            labels.push(class as i32);
            for i in 0..32 {
                for j in 0..32 {
                    let f = 0.1 + class as f32 * 0.05;
                    x.push(((i as f32 * f).sin() * (j as f32 * f).cos()) + 0.05 * rng.next());
                }
            }
        }
        LeNet {
            params,
            batch,
            x,
            labels,
        }
    }

    /// Batch size.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// The full scope names of the kernels of one step, in execution order (found by running a
    /// batch-1 step of a fresh network, so `self` is not changed).
    pub fn execution_order(&self) -> Vec<String> {
        struct Names(Vec<String>);
        impl Tracer for Names {
            fn wants(&mut self, _: &str, full_name: &str) -> bool {
                self.0.push(full_name.to_owned());
                false
            }
            fn kernel(&mut self, _: &str, _: &str, _: &[View<'_>], _: &[View<'_>]) {}
            fn parameter(&mut self, _: &str, _: View<'_>) {}
        }
        let mut names = Names(Vec::new());
        LeNet::new(1).step(&mut names);
        names.0
    }

    /// Runs one training step (forward, backward, update), reporting kernels to `t`; returns
    /// the loss.
    pub fn step(&mut self, t: &mut dyn Tracer) -> f32 {
        let n = self.batch;
        let p = |i: usize| -> (&[f32], &[usize]) { (&self.params[i].w, &self.params[i].shape) };
        let xs = [n, 1, 32, 32];
        let x_shape = xs.to_vec();

        // ---- forward: two conv -> relu -> max-pool blocks
        let conv_block = |t: &mut dyn Tracer, x: &[f32], xs: [usize; 4], wi: usize, op: usize| {
            let (w, wshape) = p(wi);
            let ws: [usize; 4] = [wshape[0], wshape[1], wshape[2], wshape[3]];
            let (c, cs) = conv2d(x, xs, w, ws);
            let layer = format!("{FWD}/conv{}-Conv2d/Conv2D-op{op}", op + 1);
            kernel(
                t,
                "Conv2D",
                &layer,
                &[f32v(x, &xs), f32v(w, wshape)],
                &[f32v(&c, &cs)],
            );
            let r = relu(&c);
            let name = format!("{FWD}/relu-ReLU/ReLU-op{op}");
            kernel(t, "ReLU", &name, &[f32v(&c, &cs)], &[f32v(&r, &cs)]);
            let (pooled, arg, ps) = max_pool2(&r, cs);
            let name = format!("{FWD}/max_pool2d-MaxPool2d/MaxPool-op{op}");
            kernel(t, "MaxPool", &name, &[f32v(&r, &cs)], &[f32v(&pooled, &ps)]);
            (ws, r, cs, pooled, arg, ps)
        };
        let (ws1, r1, c1s, p1, a1, p1s) = conv_block(t, &self.x, xs, 0, 0);
        let (w1s, c1sv, p1sv) = (p(0).1, c1s.to_vec(), p1s.to_vec());
        let (ws2, r2, c2s, p2, a2, p2s) = conv_block(t, &p1, p1s, 1, 1);
        let (w2, w2s) = p(1);
        let (c2sv, p2sv) = (c2s.to_vec(), p2s.to_vec());
        let flat_s = vec![n, 400];
        kernel(
            t,
            "Flatten",
            &format!("{FWD}/flatten-Flatten/Flatten-op0"),
            &[f32v(&p2, &p2sv)],
            &[f32v(&p2, &flat_s)],
        );

        let dense = |t: &mut dyn Tracer,
                     x: &[f32],
                     xs: &[usize],
                     wi: usize,
                     layer: &str,
                     k: usize,
                     m: usize,
                     op: usize| {
            let (w, ws) = p(wi);
            let (b, bs) = p(wi + 1);
            let y = matmul_nt(x, w, n, k, m);
            let ys = vec![n, m];
            kernel(
                t,
                "MatMul",
                &format!("{FWD}/{layer}-Dense/MatMul-op{op}"),
                &[f32v(x, xs), f32v(w, ws)],
                &[f32v(&y, &ys)],
            );
            let z = bias_add(&y, b);
            kernel(
                t,
                "BiasAdd",
                &format!("{FWD}/{layer}-Dense/BiasAdd-op{op}"),
                &[f32v(&y, &ys), f32v(b, bs)],
                &[f32v(&z, &ys)],
            );
            z
        };
        let f1 = dense(t, &p2, &flat_s, 2, "fc1", 400, 120, 0);
        let f1s = vec![n, 120];
        let h1 = relu(&f1);
        kernel(
            t,
            "ReLU",
            &format!("{FWD}/relu-ReLU/ReLU-op2"),
            &[f32v(&f1, &f1s)],
            &[f32v(&h1, &f1s)],
        );
        let f2 = dense(t, &h1, &f1s, 4, "fc2", 120, 84, 1);
        let f2s = vec![n, 84];
        let h2 = relu(&f2);
        kernel(
            t,
            "ReLU",
            &format!("{FWD}/relu-ReLU/ReLU-op3"),
            &[f32v(&f2, &f2s)],
            &[f32v(&h2, &f2s)],
        );
        let f3 = dense(t, &h2, &f2s, 6, "fc3", 84, 10, 2);
        let ls = vec![n, 10];

        // Mul by a scalar Parameter, Sub a constant tensor.
        let (scale, scale_s) = p(8);
        let m0: Vec<f32> = f3.iter().map(|v| v * scale[0]).collect();
        kernel(
            t,
            "Mul",
            &format!("{FWD}/Mul-op0"),
            &[f32v(&f3, &ls), f32v(scale, scale_s)],
            &[f32v(&m0, &ls)],
        );
        let (shift, shift_s) = p(9);
        let s0: Vec<f32> = m0
            .chunks(10)
            .flat_map(|r| r.iter().zip(shift).map(|(a, b)| a - b))
            .collect();
        kernel(
            t,
            "Sub",
            &format!("{FWD}/Sub-op0"),
            &[f32v(&m0, &ls), f32v(shift, shift_s)],
            &[f32v(&s0, &ls)],
        );

        // f16 branch: cast, add in f16, cast back.
        let back = f16_doubling(
            t,
            &s0,
            &ls,
            [
                &format!("{FWD}/Cast-op0"),
                &format!("{FWD}/Add-op0"),
                &format!("{FWD}/Cast-op1"),
            ],
            "Add",
        );

        // bf16 branch (no gradient): cast, square in bf16, cast back, multiply by 0, add.
        let b: Vec<u16> = back.iter().map(|&v| bf16::from_f32(v).to_bits()).collect();
        kernel(
            t,
            "Cast",
            &format!("{FWD}/Cast-op2"),
            &[f32v(&back, &ls)],
            &[bits(DType::BFloat16, &b, &ls)],
        );
        let bb: Vec<u16> = b
            .iter()
            .map(|&v| {
                let a = bf16::from_bits(v);
                (a * a).to_bits()
            })
            .collect();
        kernel(
            t,
            "Mul",
            &format!("{FWD}/Mul-op1"),
            &[
                bits(DType::BFloat16, &b, &ls),
                bits(DType::BFloat16, &b, &ls),
            ],
            &[bits(DType::BFloat16, &bb, &ls)],
        );
        let bf: Vec<f32> = bb.iter().map(|&v| bf16::from_bits(v).to_f32()).collect();
        kernel(
            t,
            "Cast",
            &format!("{FWD}/Cast-op3"),
            &[bits(DType::BFloat16, &bb, &ls)],
            &[f32v(&bf, &ls)],
        );
        let zero = [0.0f32];
        let bz: Vec<f32> = bf.iter().map(|v| v * 0.0).collect();
        kernel(
            t,
            "Mul",
            &format!("{FWD}/Mul-op2"),
            &[f32v(&bf, &ls), f32v(&zero, &[])],
            &[f32v(&bz, &ls)],
        );
        let logits: Vec<f32> = back.iter().zip(&bz).map(|(a, b)| a + b).collect();
        kernel(
            t,
            "Add",
            &format!("{FWD}/Add-op1"),
            &[f32v(&back, &ls), f32v(&bz, &ls)],
            &[f32v(&logits, &ls)],
        );

        // ---- loss
        let (loss, dlogits) = softmax_cross_entropy(&logits, &self.labels, 10);
        let labels_s = vec![n];
        let loss_v = [loss];
        kernel(
            t,
            "SparseSoftmaxCrossEntropyWithLogits",
            LOSS,
            &[
                f32v(&logits, &ls),
                View {
                    dtype: DType::Int32,
                    shape: &labels_s,
                    data: bytemuck::cast_slice(&self.labels),
                },
            ],
            &[f32v(&loss_v, &[])],
        );

        // ---- backward: through the f16 branch (d(h+h) = 2 dh, computed in f16)
        let ds0 = f16_doubling(
            t,
            &dlogits,
            &ls,
            [
                &format!("{BWD}/Grad_Cast/Cast-op0"),
                &format!("{BWD}/AddN-op0"),
                &format!("{BWD}/Grad_Cast/Cast-op1"),
            ],
            "AddN",
        );
        // Sub has no gradient for the constant; Mul by scale.
        let df3: Vec<f32> = ds0.iter().map(|v| v * scale[0]).collect();
        kernel(
            t,
            "Mul",
            &format!("{BWD}/gradMul/Mul-op0"),
            &[f32v(&ds0, &ls), f32v(scale, scale_s)],
            &[f32v(&df3, &ls)],
        );
        let dscale = [ds0.iter().zip(&f3).map(|(a, b)| a * b).sum::<f32>()];

        let dense_bwd = |t: &mut dyn Tracer,
                         dy: &[f32],
                         x: &[f32],
                         xs: &[usize],
                         wi: usize,
                         layer: &str,
                         k: usize,
                         m: usize,
                         op: usize| {
            let (w, ws) = p(wi);
            let dys = vec![n, m];
            let db = bias_add_grad(dy, m);
            kernel(
                t,
                "BiasAddGrad",
                &format!("{BWD}/{layer}-Dense/gradBiasAdd/BiasAddGrad-op{op}"),
                &[f32v(dy, &dys)],
                &[f32v(&db, &ws[..1])],
            );
            let dx = matmul_nn(dy, w, n, m, k);
            kernel(
                t,
                "MatMul",
                &format!("{BWD}/{layer}-Dense/gradMatMul/MatMul-op{}", 2 * op),
                &[f32v(dy, &dys), f32v(w, ws)],
                &[f32v(&dx, xs)],
            );
            let dw = matmul_tn(dy, x, n, m, k);
            kernel(
                t,
                "MatMul",
                &format!("{BWD}/{layer}-Dense/gradMatMul/MatMul-op{}", 2 * op + 1),
                &[f32v(dy, &dys), f32v(x, xs)],
                &[f32v(&dw, ws)],
            );
            (dx, dw, db)
        };
        let (dh2, dw3, db3) = dense_bwd(t, &df3, &h2, &f2s, 6, "fc3", 84, 10, 0);
        let df2 = relu_grad(&dh2, &h2);
        kernel(
            t,
            "ReluGrad",
            &format!("{BWD}/relu-ReLU/gradReLU/ReluGrad-op0"),
            &[f32v(&dh2, &f2s), f32v(&h2, &f2s)],
            &[f32v(&df2, &f2s)],
        );
        let (dh1, dw2f, db2) = dense_bwd(t, &df2, &h1, &f1s, 4, "fc2", 120, 84, 1);
        let df1 = relu_grad(&dh1, &h1);
        kernel(
            t,
            "ReluGrad",
            &format!("{BWD}/relu-ReLU/gradReLU/ReluGrad-op1"),
            &[f32v(&dh1, &f1s), f32v(&h1, &f1s)],
            &[f32v(&df1, &f1s)],
        );
        let (dp2, dw1f, db1) = dense_bwd(t, &df1, &p2, &flat_s, 2, "fc1", 400, 120, 2);
        let dr2 = max_pool2_grad(&dp2, &a2, r2.len());
        kernel(
            t,
            "MaxPoolGrad",
            &format!("{BWD}/max_pool2d-MaxPool2d/gradMaxPool/MaxPoolGrad-op0"),
            &[f32v(&r2, &c2sv), f32v(&p2, &p2sv), f32v(&dp2, &p2sv)],
            &[f32v(&dr2, &c2sv)],
        );
        let dc2 = relu_grad(&dr2, &r2);
        kernel(
            t,
            "ReluGrad",
            &format!("{BWD}/relu-ReLU/gradReLU/ReluGrad-op2"),
            &[f32v(&dr2, &c2sv), f32v(&r2, &c2sv)],
            &[f32v(&dc2, &c2sv)],
        );
        let dwc2 = conv2d_backprop_filter(&dc2, &p1, p1s, ws2);
        kernel(
            t,
            "Conv2DBackpropFilter",
            &format!("{BWD}/conv2-Conv2d/gradConv2D/Conv2DBackpropFilter-op0"),
            &[f32v(&dc2, &c2sv), f32v(&p1, &p1sv)],
            &[f32v(&dwc2, w2s)],
        );
        let dp1 = conv2d_backprop_input(&dc2, w2, p1s, ws2);
        kernel(
            t,
            "Conv2DBackpropInput",
            &format!("{BWD}/conv2-Conv2d/gradConv2D/Conv2DBackpropInput-op0"),
            &[f32v(&dc2, &c2sv), f32v(w2, w2s)],
            &[f32v(&dp1, &p1sv)],
        );
        let dr1 = max_pool2_grad(&dp1, &a1, r1.len());
        kernel(
            t,
            "MaxPoolGrad",
            &format!("{BWD}/max_pool2d-MaxPool2d/gradMaxPool/MaxPoolGrad-op1"),
            &[f32v(&r1, &c1sv), f32v(&p1, &p1sv), f32v(&dp1, &p1sv)],
            &[f32v(&dr1, &c1sv)],
        );
        let dc1 = relu_grad(&dr1, &r1);
        kernel(
            t,
            "ReluGrad",
            &format!("{BWD}/relu-ReLU/gradReLU/ReluGrad-op3"),
            &[f32v(&dr1, &c1sv), f32v(&r1, &c1sv)],
            &[f32v(&dc1, &c1sv)],
        );
        let dwc1 = conv2d_backprop_filter(&dc1, &self.x, xs, ws1);
        kernel(
            t,
            "Conv2DBackpropFilter",
            &format!("{BWD}/conv1-Conv2d/gradConv2D/Conv2DBackpropFilter-op1"),
            &[f32v(&dc1, &c1sv), f32v(&self.x, &x_shape)],
            &[f32v(&dwc1, w1s)],
        );

        // ---- optimizer: one ApplyMomentum per parameter (the constant shift is not trained).
        let grads: [Vec<f32>; 9] = [dwc1, dwc2, dw1f, db1, dw2f, db2, dw3, db3, dscale.to_vec()];
        let (lr, momentum) = ([0.01f32], [0.9f32]);
        for (i, g) in grads.iter().enumerate() {
            let name = format!("{OPT}/ApplyMomentum-op{i}");
            let prm = &mut self.params[i];
            apply_momentum(&mut prm.w, &mut prm.v, g, lr[0], momentum[0]);
            kernel(
                t,
                "ApplyMomentum",
                &name,
                &[
                    f32v(&prm.w, &prm.shape),
                    f32v(&prm.v, &prm.shape),
                    f32v(&lr, &[]),
                    f32v(g, &prm.shape),
                    f32v(&momentum, &[]),
                ],
                &[f32v(&prm.w, &prm.shape)],
            );
        }

        // ---- step end: parameters (post-step values) and graph inputs.
        for prm in &self.params {
            t.parameter(prm.name, f32v(&prm.w, &prm.shape));
        }
        for prm in &self.params[..9] {
            t.parameter(&format!("moments.{}", prm.name), f32v(&prm.v, &prm.shape));
        }
        t.parameter("inputs0", f32v(&self.x, &x_shape));
        t.parameter(
            "inputs1",
            View {
                dtype: DType::Int32,
                shape: &labels_s,
                data: bytemuck::cast_slice(&self.labels),
            },
        );
        loss
    }
}

/// `x` cast to f16, added to itself in f16 (`add_op`), cast back to f32 — three kernels named
/// `names`. The forward f16 branch and its gradient both have this shape.
fn f16_doubling(
    t: &mut dyn Tracer,
    x: &[f32],
    shape: &[usize],
    names: [&str; 3],
    add_op: &str,
) -> Vec<f32> {
    let h: Vec<u16> = x.iter().map(|&v| f16::from_f32(v).to_bits()).collect();
    kernel(
        t,
        "Cast",
        names[0],
        &[f32v(x, shape)],
        &[bits(DType::Float16, &h, shape)],
    );
    let hh: Vec<u16> = h
        .iter()
        .map(|&v| {
            let a = f16::from_bits(v);
            (a + a).to_bits()
        })
        .collect();
    let hv = bits(DType::Float16, &h, shape);
    kernel(
        t,
        add_op,
        names[1],
        &[hv, hv],
        &[bits(DType::Float16, &hh, shape)],
    );
    let back: Vec<f32> = hh.iter().map(|&v| f16::from_bits(v).to_f32()).collect();
    kernel(
        t,
        "Cast",
        names[2],
        &[bits(DType::Float16, &hh, shape)],
        &[f32v(&back, shape)],
    );
    back
}

fn kernel(t: &mut dyn Tracer, op: &str, name: &str, ins: &[View<'_>], outs: &[View<'_>]) {
    if t.wants(op, name) {
        t.kernel(op, name, ins, outs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Count {
        kernels: Vec<String>,
        params: usize,
    }
    impl Tracer for Count {
        fn wants(&mut self, _: &str, _: &str) -> bool {
            true
        }
        fn kernel(&mut self, _: &str, name: &str, ins: &[View<'_>], outs: &[View<'_>]) {
            for v in ins.iter().chain(outs) {
                let n: usize = v.shape.iter().product();
                assert_eq!(v.dtype.storage_bytes(n), Some(v.data.len()), "{name}");
            }
            self.kernels.push(name.to_owned());
        }
        fn parameter(&mut self, _: &str, _: View<'_>) {
            self.params += 1;
        }
    }

    #[test]
    fn trains_and_reports_consistent_tensors() {
        let mut net = LeNet::new(4);
        let mut c = Count::default();
        let first = net.step(&mut c);
        let mut last = first;
        for _ in 0..30 {
            last = net.step(&mut NoTrace);
        }
        assert!(last < first, "loss must fall: {first} -> {last}");
        let unique: std::collections::HashSet<_> = c.kernels.iter().collect();
        assert_eq!(unique.len(), c.kernels.len(), "kernel names are unique");
        assert!(c.kernels.len() > 50);
        assert_eq!(c.params, 10 + 9 + 2);
    }

    #[test]
    fn deterministic() {
        let (mut a, mut b) = (LeNet::new(2), LeNet::new(2));
        assert_eq!(
            a.step(&mut NoTrace).to_bits(),
            b.step(&mut NoTrace).to_bits()
        );
    }
}
