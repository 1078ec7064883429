//! A small CNN trained with burn on synthetic data with every step dumped: each layer's input
//! and output (`layer`), the loss (`tap`), and through `DumpedOptimizer` every parameter's
//! gradient, every parameter, its update (Δw and ‖Δw‖/‖w‖) and the optimizer's state.
//!
//! ```text
//! cargo run -p dump-burn --example train_cnn -- OUT_DIR [--lr 0.01] [--steps 20] [--saved-data statistic|tensor|full] [--momentum 0.9]
//! opdump inspect OUT_DIR
//! ```
//!
//! With the default learning rate the loss goes down and `opdump inspect` reports every tensor
//! finite, with each parameter's gradient-norm trend; with a large `--lr` the run diverges
//! and `inspect` names the first non-finite kernel and whether it is a gradient, a parameter
//! or an activation. The dump uses MindSpore's layout under `OUT_DIR` (a config file is
//! written to `OUT_DIR/data_dump.json` and read back, as a user's would be).

use burn::{
    module::{Module, Param},
    nn::{
        Linear, LinearConfig, Relu,
        conv::{Conv2d, Conv2dConfig},
        pool::{MaxPool2d, MaxPool2dConfig},
    },
    optim::{GradientsParams, SgdConfig, momentum::MomentumConfig},
    tensor::{Device, Tensor, TensorData},
};
use dump_burn::{DumpedOptimizer, Tracer, layer, tap};
use dump_host::Dumper;

/// conv(1→8, 3x3) → relu → maxpool 2 → conv(8→16, 3x3) → relu → linear(16·2·2 → 1).
#[derive(Module, Debug)]
struct Cnn {
    conv1: Conv2d,
    pool1: MaxPool2d,
    conv2: Conv2d,
    head: Linear,
}

impl Cnn {
    /// Weights from a fixed LCG, uniform in ±1/√fan_in, so that a run is the same each time.
    fn new(device: &Device) -> Self {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut m = Cnn {
            conv1: Conv2dConfig::new([1, 8], [3, 3]).init(device),
            pool1: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            conv2: Conv2dConfig::new([8, 16], [3, 3]).init(device),
            head: LinearConfig::new(16 * 2 * 2, 1).init(device),
        };
        m.conv1.weight = param([8, 1, 3, 3], 9, &mut s, device);
        m.conv1.bias = Some(param([8], 9, &mut s, device));
        m.conv2.weight = param([16, 8, 3, 3], 72, &mut s, device);
        m.conv2.bias = Some(param([16], 72, &mut s, device));
        m.head.weight = param([64, 1], 64, &mut s, device);
        m.head.bias = Some(param([1], 64, &mut s, device));
        m
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let h = layer("conv1", &self.conv1, x, |m, x| m.forward(x));
        let h = layer("act1", &Relu::new(), h, |m, x| m.forward(x));
        let h = layer("pool1", &self.pool1, h, |m, x| m.forward(x));
        let h = layer("conv2", &self.conv2, h, |m, x| m.forward(x));
        let h = layer("act2", &Relu::new(), h, |m, x| m.forward(x));
        layer("head", &self.head, h.flatten(1, 3), |m, x| m.forward(x))
    }
}

fn param<const D: usize>(
    shape: [usize; D],
    fan_in: usize,
    s: &mut u64,
    device: &Device,
) -> Param<Tensor<D>> {
    let bound = 1.0 / (fan_in as f32).sqrt();
    let v: Vec<f32> = (0..shape.iter().product())
        .map(|_| {
            *s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((*s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * bound
        })
        .collect();
    Param::from_data(TensorData::new(v, shape), device)
}

/// 32 images 1x10x10 from a fixed LCG, and as target the mean of each image's centre.
fn data(device: &Device) -> (Tensor<4>, Tensor<2>) {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let x: Vec<f32> = (0..32 * 100)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    let y: Vec<f32> = x
        .chunks(100)
        .map(|img| {
            let c: f32 = (3..7)
                .flat_map(|r| (3..7).map(move |col| r * 10 + col))
                .map(|i| img[i])
                .sum();
            c / 16.0
        })
        .collect();
    (
        Tensor::from_data(TensorData::new(x, [32, 1, 10, 10]), device),
        Tensor::from_data(TensorData::new(y, [32, 1]), device),
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const USAGE: &str = "usage: train_cnn OUT_DIR [--lr X] [--steps N] [--saved-data statistic|tensor|full] \
         [--momentum M]";
    let mut args = std::env::args().skip(1);
    let mut out = None;
    let (mut lr, mut steps, mut saved) = (0.01f64, 20usize, "statistic".to_owned());
    let mut momentum = None;
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--lr" => lr = value("--lr")?.parse()?,
            "--steps" => steps = value("--steps")?.parse()?,
            "--saved-data" => saved = value("--saved-data")?,
            "--momentum" => momentum = Some(value("--momentum")?.parse::<f64>()?),
            _ if out.is_none() && !a.starts_with("--") => out = Some(std::path::PathBuf::from(a)),
            _ => return Err(format!("unexpected argument {a:?}; {USAGE}").into()),
        }
    }
    let out = out.ok_or(USAGE)?;
    std::fs::create_dir_all(&out)?;
    let config = out.join("data_dump.json");
    let path = json_string(&out.display().to_string());
    std::fs::write(
        &config,
        format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": {path}, "net_name": "Cnn",
  "iteration": "all", "saved_data": {}, "input_output": 0, "kernels": [],
  "support_device": [0], "statistic_category": ["max", "min", "avg", "l2norm"]}},
 "e2e_dump_settings": {{"enable": true, "trans_flag": true}}}}
"#,
            json_string(&saved)
        ),
    )?;
    let mut dumper = Dumper::builder().open_file(&config)?;

    let device = Device::default().autodiff();
    let mut model = Cnn::new(&device);
    // The one changed line of a plain loop: burn's optimizer wrapped, so that its step dumps
    // gradients, parameters, updates and state by module path.
    let mut opt = DumpedOptimizer::new(
        SgdConfig::new()
            .with_momentum(momentum.map(|m| MomentumConfig::new().with_momentum(m)))
            .init(),
    );
    let (x, y) = data(&device);
    let mut tracer = Tracer::new(0);
    for step in 0..steps {
        let (next, loss) = tracer.step(&mut dumper, || {
            let loss = (model.forward(x.clone()) - y.clone()).powi_scalar(2).mean();
            tap("loss", "MSELoss", &loss);
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            let value = loss.into_data().as_slice::<f32>().map(|v| v[0]);
            (opt.step(lr, model.clone(), grads), value)
        })?;
        model = next;
        match loss {
            Ok(v) => println!("step {step:>3}  loss {v}"),
            Err(e) => println!("step {step:>3}  loss unreadable: {e:?}"),
        }
    }
    let report = dumper.close()?;
    println!(
        "dumped {} files, {} statistic rows under {}",
        report.files,
        report.rows,
        out.display()
    );
    Ok(())
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut o = String::from('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}
