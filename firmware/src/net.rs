//! The small f32 network the firmware agent runs: Conv2D 3x3 (1 -> 4 channels) on an 8x8 image,
//! ReLU, Dense 144 -> 16 (MatMul + BiasAdd), ReLU, Dense 16 -> 4, Softmax; weights from a
//! seeded xorshift generator, so that the host can recompute every tensor bit for bit (this
//! file is also compiled into `cargo xtask agent-qemu`, which checks the stream against it).
//!
//! Plain Rust, no `std`, no allocation, no FMA (the loops are the same on both machines, and
//! Rust never contracts `a * b + c`), `libm::expf` for the softmax on both sides.

/// The kernels in execution order: (op type, op name).
pub const KERNELS: [(&str, &str); 8] = [
    ("Conv2D", "Default/network-Net/conv1-Conv2d/Conv2D-op0"),
    ("ReLU", "Default/network-Net/relu1-ReLU/ReLU-op1"),
    ("MatMul", "Default/network-Net/fc1-Dense/MatMul-op2"),
    ("BiasAdd", "Default/network-Net/fc1-Dense/BiasAdd-op3"),
    ("ReLU", "Default/network-Net/relu2-ReLU/ReLU-op4"),
    ("MatMul", "Default/network-Net/fc2-Dense/MatMul-op5"),
    ("BiasAdd", "Default/network-Net/fc2-Dense/BiasAdd-op6"),
    ("Softmax", "Default/network-Net/Softmax-op7"),
];

/// Input image side.
pub const SIDE: usize = 8;
/// Convolution output channels.
pub const CH: usize = 4;
/// Convolution kernel side.
pub const KS: usize = 3;
/// Convolution output side (valid padding).
pub const OUT: usize = SIDE - KS + 1;
/// Flattened convolution output.
pub const FLAT: usize = CH * OUT * OUT;
/// Hidden units.
pub const HID: usize = 16;
/// Classes.
pub const CLASSES: usize = 4;

/// xorshift32 giving values in [-1, 1) on a 2^-23 grid (exact in f32).
pub struct Rng(pub u32);

impl Rng {
    /// The next value.
    pub fn next_f32(&mut self) -> f32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        (x >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    }

    fn fill(&mut self, out: &mut [f32], scale: f32) {
        for v in out {
            *v = self.next_f32() * scale;
        }
    }
}

/// The network's parameters.
pub struct Weights {
    /// Conv2D weight, `[CH, 1, KS, KS]`.
    pub conv_w: [f32; CH * KS * KS],
    /// Conv2D bias, `[CH]`.
    pub conv_b: [f32; CH],
    /// First dense weight, `[HID, FLAT]`.
    pub fc1_w: [f32; HID * FLAT],
    /// First dense bias, `[HID]`.
    pub fc1_b: [f32; HID],
    /// Second dense weight, `[CLASSES, HID]`.
    pub fc2_w: [f32; CLASSES * HID],
    /// Second dense bias, `[CLASSES]`.
    pub fc2_b: [f32; CLASSES],
}

impl Weights {
    /// Weights from `seed` (non-zero).
    pub fn seeded(seed: u32) -> Weights {
        let mut r = Rng(seed);
        let mut w = Weights {
            conv_w: [0.0; CH * KS * KS],
            conv_b: [0.0; CH],
            fc1_w: [0.0; HID * FLAT],
            fc1_b: [0.0; HID],
            fc2_w: [0.0; CLASSES * HID],
            fc2_b: [0.0; CLASSES],
        };
        r.fill(&mut w.conv_w, 0.5);
        r.fill(&mut w.conv_b, 0.1);
        r.fill(&mut w.fc1_w, 0.125);
        r.fill(&mut w.fc1_b, 0.1);
        r.fill(&mut w.fc2_w, 0.25);
        r.fill(&mut w.fc2_b, 0.1);
        w
    }
}

/// The input image of step `step`; every eighth step holds one NaN pixel (a fault to find).
pub fn input(step: u32) -> [f32; SIDE * SIDE] {
    let mut x = [0.0; SIDE * SIDE];
    Rng((0x1234_5678 ^ step.wrapping_mul(0x9E37_79B9)) | 1).fill(&mut x, 2.0);
    if step % 8 == 7 {
        x[SIDE * 3 + 4] = f32::NAN;
    }
    x
}

/// Every intermediate tensor of one forward pass.
pub struct Activations {
    /// Conv2D output, `[1, CH, OUT, OUT]`.
    pub conv: [f32; FLAT],
    /// First ReLU output.
    pub relu1: [f32; FLAT],
    /// First MatMul output, `[1, HID]`.
    pub fc1: [f32; HID],
    /// First BiasAdd output.
    pub bias1: [f32; HID],
    /// Second ReLU output.
    pub relu2: [f32; HID],
    /// Second MatMul output, `[1, CLASSES]`.
    pub fc2: [f32; CLASSES],
    /// Second BiasAdd output (logits).
    pub bias2: [f32; CLASSES],
    /// Softmax output.
    pub prob: [f32; CLASSES],
}

impl Activations {
    /// All zeros.
    pub const ZERO: Activations = Activations {
        conv: [0.0; FLAT],
        relu1: [0.0; FLAT],
        fc1: [0.0; HID],
        bias1: [0.0; HID],
        relu2: [0.0; HID],
        fc2: [0.0; CLASSES],
        bias2: [0.0; CLASSES],
        prob: [0.0; CLASSES],
    };
}

/// One tensor a kernel read or wrote.
#[derive(Clone, Copy, Debug)]
pub struct Tensor<'a> {
    /// `true` for an output.
    pub output: bool,
    /// Input or output index.
    pub slot: u32,
    /// Shape.
    pub shape: &'static [u32],
    /// Elements, C order.
    pub data: &'a [f32],
}

const fn input_t<'a>(slot: u32, shape: &'static [u32], data: &'a [f32]) -> Tensor<'a> {
    Tensor {
        output: false,
        slot,
        shape,
        data,
    }
}

const fn output_t<'a>(shape: &'static [u32], data: &'a [f32]) -> Tensor<'a> {
    Tensor {
        output: true,
        slot: 0,
        shape,
        data,
    }
}

fn relu(x: &[f32], y: &mut [f32]) {
    for (o, &v) in y.iter_mut().zip(x) {
        // NaN stays NaN (max would drop it).
        *o = if v < 0.0 { 0.0 } else { v };
    }
}

/// `y[r] = sum_c w[r, c] * x[c]`.
fn matvec(w: &[f32], x: &[f32], y: &mut [f32]) {
    for (r, o) in y.iter_mut().enumerate() {
        let mut acc = 0.0f32;
        for (c, &v) in x.iter().enumerate() {
            acc += w[r * x.len() + c] * v;
        }
        *o = acc;
    }
}

/// Runs the network on `x`, kernel by kernel; after each kernel `each(kernel index, its
/// inputs and output)` is called (the agent's hook).
pub fn run(
    w: &Weights,
    x: &[f32; SIDE * SIDE],
    a: &mut Activations,
    mut each: impl FnMut(usize, &[Tensor<'_>]),
) {
    for c in 0..CH {
        for i in 0..OUT {
            for j in 0..OUT {
                let mut acc = w.conv_b[c];
                for di in 0..KS {
                    for dj in 0..KS {
                        acc += w.conv_w[(c * KS + di) * KS + dj] * x[(i + di) * SIDE + j + dj];
                    }
                }
                a.conv[(c * OUT + i) * OUT + j] = acc;
            }
        }
    }
    each(
        0,
        &[
            input_t(0, &[1, 1, SIDE as u32, SIDE as u32], x),
            input_t(1, &[CH as u32, 1, KS as u32, KS as u32], &w.conv_w),
            input_t(2, &[CH as u32], &w.conv_b),
            output_t(&[1, CH as u32, OUT as u32, OUT as u32], &a.conv),
        ],
    );
    relu(&a.conv, &mut a.relu1);
    const CONV_SHAPE: &[u32] = &[1, CH as u32, OUT as u32, OUT as u32];
    each(
        1,
        &[
            input_t(0, CONV_SHAPE, &a.conv),
            output_t(CONV_SHAPE, &a.relu1),
        ],
    );
    matvec(&w.fc1_w, &a.relu1, &mut a.fc1);
    each(
        2,
        &[
            input_t(0, &[1, FLAT as u32], &a.relu1),
            input_t(1, &[HID as u32, FLAT as u32], &w.fc1_w),
            output_t(&[1, HID as u32], &a.fc1),
        ],
    );
    for ((o, &v), &b) in a.bias1.iter_mut().zip(&a.fc1).zip(&w.fc1_b) {
        *o = v + b;
    }
    each(
        3,
        &[
            input_t(0, &[1, HID as u32], &a.fc1),
            input_t(1, &[HID as u32], &w.fc1_b),
            output_t(&[1, HID as u32], &a.bias1),
        ],
    );
    relu(&a.bias1, &mut a.relu2);
    each(
        4,
        &[
            input_t(0, &[1, HID as u32], &a.bias1),
            output_t(&[1, HID as u32], &a.relu2),
        ],
    );
    matvec(&w.fc2_w, &a.relu2, &mut a.fc2);
    each(
        5,
        &[
            input_t(0, &[1, HID as u32], &a.relu2),
            input_t(1, &[CLASSES as u32, HID as u32], &w.fc2_w),
            output_t(&[1, CLASSES as u32], &a.fc2),
        ],
    );
    for ((o, &v), &b) in a.bias2.iter_mut().zip(&a.fc2).zip(&w.fc2_b) {
        *o = v + b;
    }
    each(
        6,
        &[
            input_t(0, &[1, CLASSES as u32], &a.fc2),
            input_t(1, &[CLASSES as u32], &w.fc2_b),
            output_t(&[1, CLASSES as u32], &a.bias2),
        ],
    );
    let max = a
        .bias2
        .iter()
        .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    let mut total = 0.0f32;
    for (o, &v) in a.prob.iter_mut().zip(&a.bias2) {
        *o = libm::expf(v - max);
        total += *o;
    }
    for o in &mut a.prob {
        *o /= total;
    }
    each(
        7,
        &[
            input_t(0, &[1, CLASSES as u32], &a.bias2),
            output_t(&[1, CLASSES as u32], &a.prob),
        ],
    );
}
