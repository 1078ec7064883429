//! A small CNN trained on synthetic data with every step dumped: forward activations
//! (`Dumped<M>`), gradients, parameters, updates and the learning rate (`DumpedOptimizer`).
//!
//! ```text
//! cargo run -p dump-candle --example train_cnn -- OUT_DIR [--lr 0.01] [--steps 20] [--saved-data statistic|tensor|full] [--flight-recorder N]
//! opdump inspect OUT_DIR
//! ```
//!
//! With the default learning rate the loss goes down and `opdump inspect` reports every tensor
//! finite, with each parameter's gradient-norm trend; with `--lr 3` the run diverges and
//! `inspect` names the first non-finite kernel and whether it is a gradient, a parameter or an
//! activation. With `--flight-recorder N` nothing is written until a tensor goes non-finite;
//! then only the N steps before it and that step are, with `OUT_DIR/rank_0/trigger.json`
//! naming the kernel. The dump uses MindSpore's layout under `OUT_DIR` (a config file is written to
//! `OUT_DIR/data_dump.json` and read back, as a user's would be).

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{Activation, Conv2d, Linear, Optimizer, SGD, VarBuilder, VarMap, conv2d, linear};
use dump_candle::{Dumped, DumpedOptimizer, Tracer, tap};
use dump_host::Dumper;

/// conv(1→8, 3x3) → relu → maxpool 2 → conv(8→16, 3x3) → relu → linear(16·2·2 → 1).
struct Cnn {
    conv1: Dumped<Conv2d>,
    act1: Dumped<Activation>,
    conv2: Dumped<Conv2d>,
    act2: Dumped<Activation>,
    head: Dumped<Linear>,
}

impl Cnn {
    fn new(vb: VarBuilder<'_>) -> Result<Self> {
        Ok(Cnn {
            conv1: Dumped::new(
                conv2d(1, 8, 3, Default::default(), vb.pp("conv1"))?,
                "conv1",
            ),
            act1: Dumped::new(Activation::Relu, "act1"),
            conv2: Dumped::new(
                conv2d(8, 16, 3, Default::default(), vb.pp("conv2"))?,
                "conv2",
            ),
            act2: Dumped::new(Activation::Relu, "act2"),
            head: Dumped::new(linear(16 * 2 * 2, 1, vb.pp("head"))?, "head"),
        })
    }
}

impl Module for Cnn {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.act1.forward(&self.conv1.forward(x)?)?.max_pool2d(2)?;
        tap("pool1", "MaxPool", &h);
        let h = self.act2.forward(&self.conv2.forward(&h)?)?;
        self.head.forward(&h.flatten_from(1)?)
    }
}

/// Sets every weight from a fixed LCG, uniform in ±1/√fan_in (candle's CPU generator cannot
/// be seeded), so that a run is the same each time.
fn init(varmap: &VarMap) -> Result<()> {
    let data = varmap.data().lock().unwrap_or_else(|e| e.into_inner());
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for name in names {
        let var = &data[name];
        let dims = var.dims().to_vec();
        let fan_in = if dims.len() > 1 {
            dims[1..].iter().product::<usize>()
        } else {
            dims[0]
        };
        let bound = 1.0 / (fan_in as f32).sqrt();
        let v: Vec<f32> = (0..var.elem_count())
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * bound
            })
            .collect();
        var.set(&Tensor::from_vec(v, dims, &Device::Cpu)?)?;
    }
    Ok(())
}

/// 32 images 1x10x10 from a fixed LCG, and as target the mean of each image's centre.
fn data() -> Result<(Tensor, Tensor)> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let x: Vec<f32> = (0..32 * 100)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    let x = Tensor::from_vec(x, (32, 1, 10, 10), &Device::Cpu)?;
    let y = x
        .narrow(2, 3, 4)?
        .narrow(3, 3, 4)?
        .mean_keepdim(3)?
        .mean_keepdim(2)?;
    Ok((x, y.flatten_from(1)?))
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut out = None;
    let (mut lr, mut steps, mut saved) = (0.01f64, 20usize, "statistic".to_owned());
    let mut recorder = String::new();
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--lr" => lr = value("--lr")?.parse()?,
            "--steps" => steps = value("--steps")?.parse()?,
            "--saved-data" => saved = value("--saved-data")?,
            "--flight-recorder" => {
                let n: u32 = value("--flight-recorder")?.parse()?;
                recorder = format!(r#",
 "opdump": {{"flight_recorder": {{"steps": {n}}}}}"#);
            }
            _ if out.is_none() && !a.starts_with("--") => out = Some(std::path::PathBuf::from(a)),
            _ => return Err(format!("unexpected argument {a:?}; usage: train_cnn OUT_DIR [--lr X] [--steps N] [--saved-data statistic|tensor|full] [--flight-recorder N]").into()),
        }
    }
    let out = out.ok_or(
        "usage: train_cnn OUT_DIR [--lr X] [--steps N] [--saved-data statistic|tensor|full] [--flight-recorder N]",
    )?;
    std::fs::create_dir_all(&out)?;
    let config = out.join("data_dump.json");
    let path = serde_json_string(&out.display().to_string());
    std::fs::write(
        &config,
        format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": {path}, "net_name": "Cnn",
  "iteration": "all", "saved_data": "{saved}", "input_output": 0, "kernels": [],
  "support_device": [0], "statistic_category": ["max", "min", "avg", "l2norm"]}},
 "e2e_dump_settings": {{"enable": true, "trans_flag": true}}{recorder}}}
"#
        ),
    )?;
    let mut dumper = Dumper::builder().open_file(&config)?;

    let varmap = VarMap::new();
    let model = Cnn::new(VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu))?;
    init(&varmap)?;
    // The one change to a plain loop: the optimizer is wrapped (and the step runs in a Tracer).
    let mut opt = DumpedOptimizer::new(SGD::new(varmap.all_vars(), lr)?, &varmap);
    let (x, y) = data()?;
    let mut tracer = Tracer::new(0);
    for step in 0..steps {
        let loss = tracer.step(&mut dumper, || -> Result<f32> {
            let loss = (model.forward(&x)? - &y)?.sqr()?.mean_all()?;
            opt.backward_step(&loss)?;
            loss.to_scalar::<f32>()
        })??;
        println!("step {step:>3}  loss {loss}");
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
fn serde_json_string(s: &str) -> String {
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
