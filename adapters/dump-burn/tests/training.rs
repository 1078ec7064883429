//! A small CNN (conv + relu + max-pool + linear, softmax cross-entropy) built with burn-nn on
//! the CPU backend, trained a few steps with its layers dumped through `layer`/`tap` and its
//! gradients and parameters through `training_step`, `saved_data: full`: every layer output
//! equals a plain (undumped) run of the same weights bit for bit, every gradient file equals
//! burn's own `GradientsParams` tensor, every Parameter file the weight; the op types are
//! counted; a filter that rejects everything writes nothing; a diverging run (huge learning
//! rate) is traced by dump-read's inspect to the first non-finite tensor burn computed.

#[path = "../../testsupport/onnx_fixtures.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};

use burn::{
    module::{Module, Param},
    nn::{
        Linear, LinearConfig, Relu,
        conv::{Conv2d, Conv2dConfig},
        loss::CrossEntropyLossConfig,
        pool::{MaxPool2d, MaxPool2dConfig},
    },
    optim::{GradientsParams, SgdConfig},
    tensor::{Device, Int, Tensor, TensorData},
};
use dump_burn::{Tracer, layer, tap, training_step};
use support::{Tmp, dumper, kernel_file, npy_in};

#[derive(Module, Debug)]
struct Cnn {
    conv: Conv2d,
    pool: MaxPool2d,
    fc: Linear,
}

/// The parameters, by module path, as `training_step` names them.
const PARAMS: [&str; 4] = ["conv.weight", "conv.bias", "fc.weight", "fc.bias"];

/// Every intermediate of one forward: conv, relu, pool, logits, loss.
struct Forward {
    conv: Tensor<4>,
    act: Tensor<4>,
    pool: Tensor<4>,
    logits: Tensor<2>,
    loss: Tensor<1>,
}

impl Cnn {
    fn new(device: &Device) -> Self {
        Cnn {
            conv: Conv2dConfig::new([1, 4], [3, 3]).init(device),
            pool: MaxPool2dConfig::new([2, 2]).with_strides([2, 2]).init(),
            fc: LinearConfig::new(4 * 3 * 3, 5).init(device),
        }
    }

    /// The forward with every layer dumped.
    fn forward(&self, x: Tensor<4>, y: Tensor<1, Int>) -> Forward {
        let conv = layer("features.conv1", &self.conv, x, |m, x| m.forward(x));
        let act = layer("features.act1", &Relu::new(), conv.clone(), |m, x| {
            m.forward(x)
        });
        let pool = layer("features.pool1", &self.pool, act.clone(), |m, x| {
            m.forward(x)
        });
        let logits = layer("fc", &self.fc, pool.clone().flatten(1, 3), |m, x| {
            m.forward(x)
        });
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), y);
        tap("loss", "SoftmaxCrossEntropy", &loss);
        Forward {
            conv,
            act,
            pool,
            logits,
            loss,
        }
    }

    /// The same forward with burn's modules called directly: nothing of dump-burn involved.
    fn plain(&self, x: Tensor<4>, y: Tensor<1, Int>) -> Forward {
        let conv = self.conv.forward(x);
        let act = Relu::new().forward(conv.clone());
        let pool = self.pool.forward(act.clone());
        let logits = self.fc.forward(pool.clone().flatten(1, 3));
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), y);
        Forward {
            conv,
            act,
            pool,
            logits,
            loss,
        }
    }

    /// The float parameter tensors by path.
    fn params(&self) -> Vec<(&'static str, TensorData)> {
        vec![
            (PARAMS[0], self.conv.weight.val().to_data()),
            (PARAMS[1], self.conv.bias.as_ref().unwrap().val().to_data()),
            (PARAMS[2], self.fc.weight.val().to_data()),
            (PARAMS[3], self.fc.bias.as_ref().unwrap().val().to_data()),
        ]
    }

    /// burn's own gradient of every parameter, by path.
    fn grads(&self, g: &GradientsParams) -> BTreeMap<&'static str, Option<TensorData>> {
        BTreeMap::from([
            (
                PARAMS[0],
                g.get::<4>(self.conv.weight.id).map(|t| t.to_data()),
            ),
            (
                PARAMS[1],
                g.get::<1>(self.conv.bias.as_ref().unwrap().id)
                    .map(|t| t.to_data()),
            ),
            (
                PARAMS[2],
                g.get::<2>(self.fc.weight.id).map(|t| t.to_data()),
            ),
            (
                PARAMS[3],
                g.get::<1>(self.fc.bias.as_ref().unwrap().id)
                    .map(|t| t.to_data()),
            ),
        ])
    }
}

/// Deterministic pseudo-random values in [-scale, scale) (a fixed LCG).
fn lcg(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// 8 images of 1x8x8 and labels 0..5.
fn batch(device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
    let x = TensorData::new(lcg(8 * 64, 0x2545_f491_4f6c_dd1d, 0.5), [8, 1, 8, 8]);
    let y = TensorData::new((0..8).map(|i| (i % 5) as i64).collect::<Vec<_>>(), [8]);
    (Tensor::from_data(x, device), Tensor::from_data(y, device))
}

/// A parameter of `shape` with fixed values in [-0.3, 0.3).
fn param<const D: usize>(shape: [usize; D], seed: u64, device: &Device) -> Param<Tensor<D>> {
    let n = shape.iter().product();
    Param::from_data(TensorData::new(lcg(n, seed, 0.3), shape), device)
}

/// A model on `device` with fixed weights (burn's initializers draw from its RNG).
fn model(device: &Device) -> Cnn {
    let mut m = Cnn::new(device);
    m.conv.weight = param([4, 1, 3, 3], 1, device);
    m.conv.bias = Some(param([4], 2, device));
    m.fc.weight = param([36, 5], 3, device);
    m.fc.bias = Some(param([5], 4, device));
    m
}

fn file_bytes(dir: &std::path::Path, kernel: &str, io: &str, slot: usize) -> (Vec<usize>, Vec<u8>) {
    let f = dump_npy::read_file(kernel_file(dir, kernel, io, slot)).unwrap();
    (f.shape, f.data)
}

/// A Dumper under `root` whose `common_dump_settings` are the defaults of every test plus
/// `settings` (which must include `dump_mode` and `kernels`).
fn config_dumper(root: &std::path::Path, settings: &str) -> dump_host::Dumper {
    let text = format!(
        r#"{{"common_dump_settings": {{"path": "{}", "net_name": "Net", "iteration": "all",
        "input_output": 0, "support_device": [0], {settings}}},
        "e2e_dump_settings": {{"enable": true}}}}"#,
        root.display()
    );
    dump_host::Dumper::builder()
        .open_json(text.into_bytes())
        .unwrap()
}

fn same(t: &TensorData, file: (Vec<usize>, Vec<u8>), what: &str) {
    assert_eq!(file.0, t.shape().as_slice(), "{what}: shape");
    assert!(file.1 == t.as_bytes(), "{what}: bytes differ");
}

#[test]
fn training_steps_dump_layers_gradients_and_parameters_bit_for_bit() {
    let tmp = Tmp::new("train");
    let device = Device::default().autodiff();
    let mut model = model(&device);
    let (x, y) = batch(&device);
    let mut opt = SgdConfig::new().init();
    let mut d = dumper(&tmp.0, r#", "saved_data": "full""#);
    let mut tracer = Tracer::new(0);
    let mut seen = Vec::new();
    for _ in 0..3 {
        // The plain run first: same weights, no dump-burn call at all.
        let plain = model.plain(x.clone(), y.clone());
        let weights = model.params();
        let (m, grads, paths) = tracer
            .step(&mut d, || {
                let f = model.forward(x.clone(), y.clone());
                let grads = GradientsParams::from_grads(f.loss.backward(), &model);
                let paths = training_step(&model, &grads);
                let mine = model.grads(&grads);
                (opt.step(0.05, model.clone(), grads), mine, paths)
            })
            .unwrap();
        assert_eq!(paths, PARAMS, "visitor order and paths");
        seen.push((plain, weights, grads, tracer.execution_order().to_vec()));
        model = m;
    }
    let report = d.close().unwrap();
    // Per step: 4 layers (input + output), the loss, 4 gradients, 4 Parameters.
    let per_step = 4 * 2 + 1 + 4 + 4;
    assert_eq!((report.files, report.rows), (3 * per_step, 3 * per_step));
    let rank = tmp.rank();
    let mut op_types = BTreeSet::new();
    for (step, (plain, weights, grads, order)) in seen.iter().enumerate() {
        assert_eq!(
            order[..5],
            [
                "Default/features/conv1/Conv2d-op0",
                "Default/features/act1/Relu-op1",
                "Default/features/pool1/MaxPool2d-op2",
                "Default/fc/Linear-op3",
                "Default/loss/SoftmaxCrossEntropy-op4",
            ]
        );
        let dir = rank.join("Net/0").join(step.to_string());
        assert_eq!(npy_in(&dir).len() as u64, per_step);
        for p in npy_in(&dir) {
            let name = support::file_name(&p);
            let f = dump_host::layout::TensorFileName::parse(&name).unwrap();
            op_types.insert(f.id.op_type.to_string());
        }
        // Every layer output equals the plain run's tensor, bit for bit.
        let outs = [
            plain.conv.to_data(),
            plain.act.to_data(),
            plain.pool.to_data(),
            plain.logits.to_data(),
            plain.loss.to_data(),
        ];
        for (k, want) in order.iter().zip(&outs) {
            same(want, file_bytes(&dir, k, "output", 0), k);
        }
        // Each layer's input is the previous output.
        same(
            &outs[0],
            file_bytes(&dir, &order[1], "input", 0),
            "relu input",
        );
        // Gradients: burn's GradientsParams tensors, bit for bit; Parameters: the weights.
        for (i, p) in PARAMS.iter().enumerate() {
            let k = format!(
                "Gradients/Default/{}/Gradient-op{}",
                p.replace('.', "/"),
                5 + i
            );
            assert_eq!(order[5 + i], k);
            let g = grads[p].as_ref().expect("every parameter has a gradient");
            same(g, file_bytes(&dir, &k, "output", 0), &k);
            same(&weights[i].1, file_bytes(&dir, p, "output", 0), p);
        }
    }
    // The kinds reported: 4 layer types, the tap, gradients and parameters.
    assert_eq!(
        op_types,
        BTreeSet::from(
            [
                "Conv2d",
                "Gradient",
                "Linear",
                "MaxPool2d",
                "Parameter",
                "Relu",
                "SoftmaxCrossEntropy"
            ]
            .map(String::from)
        ),
    );
    // Training moved the weights: the dumped Parameters of steps 0 and 2 differ.
    let (a, b) = (
        file_bytes(&rank.join("Net/0/0"), "fc.weight", "output", 0),
        file_bytes(&rank.join("Net/0/2"), "fc.weight", "output", 0),
    );
    assert_ne!(a.1, b.1);
}

#[test]
fn a_filter_that_rejects_everything_writes_nothing() {
    let tmp = Tmp::new("reject");
    let device = Device::default().autodiff();
    let model = model(&device);
    let (x, y) = batch(&device);
    let mut d = config_dumper(
        &tmp.0,
        r#""dump_mode": 1, "kernels": ["Default/no/such/Kernel-op0"], "saved_data": "full""#,
    );
    let mut tracer = Tracer::new(0);
    let loss = tracer
        .step(&mut d, || {
            let f = model.forward(x.clone(), y.clone());
            let grads = GradientsParams::from_grads(f.loss.backward(), &model);
            training_step(&model, &grads);
            f.loss
        })
        .unwrap();
    // The model still ran, and its result is the plain run's.
    assert_eq!(
        loss.to_data(),
        model.plain(x, y).loss.to_data(),
        "the dumped step computes what the plain one does"
    );
    let report = d.close().unwrap();
    assert_eq!((report.files, report.rows), (0, 0));
    assert!(npy_in(&tmp.rank().join("Net/0/0")).is_empty());
}

/// The elements of an f32 tensor's data.
fn f32s(t: &TensorData) -> Vec<f32> {
    t.as_slice::<f32>().unwrap().to_vec()
}

/// f32 values as their little-endian bytes (an .npy file's data).
fn le(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// ‖v‖₂ summed in f64 in index order: the test's own norm.
fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt()
}

/// `DumpedOptimizer` on AdamW and on momentum SGD, 3 steps, `saved_data: full`: per parameter,
/// the Parameter file is the weight after the update, the Update kernel's Δw is the
/// difference of burn's weights after and before, its ratio ‖Δw‖/‖w‖ the test's own f64 norm
/// ratio, and the OptimizerState files equal, bit for bit, both the state burn's optimizer
/// saves (`ModuleOptimizer::save`, read back with burnpack's reader) and the moments /
/// velocity the test computes from the dumped gradients with burn's update rules; the learning
/// rate is the one passed; `inspect` reads the update ratios back per parameter.
#[test]
fn the_optimizer_state_and_update_ratio_are_burns_own() {
    use burn::optim::{AdamWConfig, momentum::MomentumConfig};
    use dump_burn::DumpedOptimizer;

    // AdamW's defaults (0.22.1): beta_1 0.9, beta_2 0.999. Momentum: 0.9, dampening 0.1.
    let (b1, b2) = (0.9f32, 0.999f32);
    let (mom, damp) = (0.9f64 as f32, (1.0f64 - 0.1) as f32);
    let optimizers: [(&str, burn::optim::ModuleOptimizer, &[&str]); 2] = [
        (
            "adamw",
            AdamWConfig::new().init(),
            &["momentum/moment_1", "momentum/moment_2"],
        ),
        (
            "sgd-momentum",
            SgdConfig::new()
                .with_momentum(Some(MomentumConfig::new()))
                .init(),
            &["momentum/velocity"],
        ),
    ];
    for (tag, inner, fields) in optimizers {
        let tmp = Tmp::new(&format!("opt-{tag}"));
        let device = Device::default().autodiff();
        let mut model = model(&device);
        let (x, y) = batch(&device);
        let mut opt = DumpedOptimizer::new(inner);
        let mut d = dumper(&tmp.0, r#", "saved_data": "full""#);
        let mut tracer = Tracer::new(0);
        let lr = 0.01;
        // The test's own state, per parameter and field, from the dumped gradients.
        let mut state: BTreeMap<(&str, &str), Vec<f32>> = BTreeMap::new();
        for step in 0..3 {
            let before = model.params();
            let (m, grads) = tracer
                .step(&mut d, || {
                    let f = model.forward(x.clone(), y.clone());
                    let grads = GradientsParams::from_grads(f.loss.backward(), &model);
                    let mine = model.grads(&grads);
                    (opt.step(lr, model.clone(), grads), mine)
                })
                .unwrap();
            model = m;
            // The files are written in the background: wait for this step's before reading.
            d.flush().unwrap();
            let after = model.params();
            let saved = tmp.0.join(format!("state-{step}.bpk"));
            opt.inner().save(&saved).unwrap();
            let reader = burn_pack::Reader::from_file(&saved).unwrap();
            let order = tracer.execution_order().to_vec();
            let dir = tmp.rank().join("Net/0").join(step.to_string());
            // Forward 5, gradients 4, then per parameter Update and its state, and the rate.
            assert_eq!(order.len(), 5 + 4 + 4 * (1 + fields.len()) + 1, "{order:?}");
            let mut n = 9;
            for (i, p) in PARAMS.iter().enumerate() {
                let scope = p.replace('.', "/");
                let (w0, w1) = (f32s(&before[i].1), f32s(&after[i].1));
                same(&after[i].1, file_bytes(&dir, p, "output", 0), p);
                let k = format!("Optimizer/Default/{scope}/Update-op{n}");
                assert_eq!(order[n], k);
                n += 1;
                let dw: Vec<f32> = w1.iter().zip(&w0).map(|(a, b)| a - b).collect();
                let (shape, bytes) = file_bytes(&dir, &k, "output", 0);
                assert_eq!(shape, after[i].1.shape().as_slice(), "{k}");
                assert!(bytes == le(&dw), "{tag} {k}: Δw is after − before");
                let (shape, bytes) = file_bytes(&dir, &k, "output", 1);
                assert!(shape.is_empty(), "{k}: the ratio is 0-d");
                let ratio = f32::from_le_bytes(bytes.try_into().unwrap());
                let want = (norm(&dw) / norm(&w0)) as f32;
                assert!(
                    (ratio - want).abs() <= want * 1e-6 && ratio > 0.0,
                    "{tag} {k}: {ratio} vs {want}"
                );
                let g = f32s(grads[p].as_ref().unwrap());
                let g_file = file_bytes(
                    &dir,
                    &format!("Gradients/Default/{scope}/Gradient-op{}", 5 + i),
                    "output",
                    0,
                );
                assert!(g_file.1 == le(&g));
                for field in fields.iter().copied() {
                    let k = format!("Optimizer/Default/{scope}/{field}/OptimizerState-op{n}");
                    assert_eq!(order[n], k);
                    n += 1;
                    // burn's rules (burn-optim 0.22.1 adamw.rs, momentum.rs), on the host.
                    let prev = state.remove(&(p, field));
                    let next: Vec<f32> = match (field, prev) {
                        ("momentum/moment_1", None) => g.iter().map(|g| g * (1.0 - b1)).collect(),
                        ("momentum/moment_1", Some(m)) => m
                            .iter()
                            .zip(&g)
                            .map(|(m, g)| m * b1 + g * (1.0 - b1))
                            .collect(),
                        ("momentum/moment_2", None) => {
                            g.iter().map(|g| (g * g) * (1.0 - b2)).collect()
                        }
                        ("momentum/moment_2", Some(m)) => m
                            .iter()
                            .zip(&g)
                            .map(|(m, g)| m * b2 + (g * g) * (1.0 - b2))
                            .collect(),
                        ("momentum/velocity", None) => g.clone(),
                        ("momentum/velocity", Some(v)) => {
                            v.iter().zip(&g).map(|(v, g)| g * damp + v * mom).collect()
                        }
                        (f, _) => unreachable!("{f}"),
                    };
                    let (shape, bytes) = file_bytes(&dir, &k, "output", 0);
                    assert_eq!(shape, after[i].1.shape().as_slice(), "{k}");
                    assert!(
                        bytes == le(&next),
                        "{tag} step {step} {k}: burn's update rule"
                    );
                    let id = match i {
                        0 => model.conv.weight.id,
                        1 => model.conv.bias.as_ref().unwrap().id,
                        2 => model.fc.weight.id,
                        _ => model.fc.bias.as_ref().unwrap().id,
                    };
                    let name = format!("{}.{}", id.val(), field.replace('/', "."));
                    assert!(
                        bytes == reader.tensor_data(&name).unwrap(),
                        "{tag} step {step} {k}: burn's saved state {name}"
                    );
                    state.insert((p, field), next);
                }
            }
            let k = format!("Optimizer/Default/learning_rate/LearningRate-op{n}");
            assert_eq!(order[n], k);
            let (shape, bytes) = file_bytes(&dir, &k, "output", 0);
            assert!(shape.is_empty());
            assert_eq!(bytes, lr.to_le_bytes());
        }
        d.close().unwrap();
        // inspect reads the update ratios back, one per step and parameter.
        let dump = dump_read::Dump::open(&tmp.0).unwrap();
        let ins = dump_read::inspect::inspect(&dump, 1, &|_, _| {});
        assert_eq!(ins.parameters.len(), 4, "{tag}");
        for t in &ins.parameters {
            assert_eq!(t.steps, [0, 1, 2], "{tag} {}", t.name);
            assert!(
                t.update_ratio.iter().all(|r| r.is_some_and(|r| r > 0.0)),
                "{tag}: {t:?}"
            );
            assert!(t.grad_norm.iter().all(Option::is_some), "{tag}: {t:?}");
        }
    }
}

/// `DumpedOptimizer` trains exactly as the optimizer it wraps (the weights after 3 AdamW steps
/// equal a bare AdamW run's bit for bit), and with `iteration` "1" only step 1 is written.
#[test]
fn the_wrapped_optimizer_trains_as_the_bare_one_and_unselected_steps_write_nothing() {
    use burn::optim::AdamWConfig;
    use dump_burn::DumpedOptimizer;

    let tmp = Tmp::new("opt-select");
    let device = Device::default().autodiff();
    let (x, y) = batch(&device);
    let mut bare_model = model(&device);
    let mut bare = AdamWConfig::new().init();
    let mut dumped_model = model(&device);
    let mut dumped = DumpedOptimizer::new(AdamWConfig::new().init());
    let text = format!(
        r#"{{"common_dump_settings": {{"path": "{}", "net_name": "Net", "iteration": "1",
        "input_output": 0, "support_device": [0], "dump_mode": 0, "kernels": [],
        "saved_data": "statistic"}}, "e2e_dump_settings": {{"enable": true}}}}"#,
        tmp.0.display()
    );
    let mut d = dump_host::Dumper::builder()
        .open_json(text.into_bytes())
        .unwrap();
    let mut tracer = Tracer::new(0);
    for _ in 0..3 {
        let f = bare_model.plain(x.clone(), y.clone());
        let grads = GradientsParams::from_grads(f.loss.backward(), &bare_model);
        bare_model = bare.step(0.01, bare_model, grads);
        dumped_model = tracer
            .step(&mut d, || {
                let f = dumped_model.forward(x.clone(), y.clone());
                let grads = GradientsParams::from_grads(f.loss.backward(), &dumped_model);
                dumped.step(0.01, dumped_model.clone(), grads)
            })
            .unwrap();
    }
    for ((p, want), (_, got)) in bare_model.params().iter().zip(dumped_model.params()) {
        assert!(
            want.as_bytes() == got.as_bytes(),
            "{p}: the wrapper changed training"
        );
    }
    let report = d.close().unwrap();
    // Step 1 only: 4 layers (input + output), the loss, 4 gradients, 4 Parameters, 4 updates
    // (2 outputs), 8 moments, the learning rate.
    assert_eq!(report.rows, 4 * 2 + 1 + 4 + 4 + 4 * 2 + 8 + 1);
    let net = tmp.rank().join("Net/0");
    let steps: Vec<String> = std::fs::read_dir(&net)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.parse::<u32>().is_ok())
        .collect();
    assert_eq!(steps, ["1"], "only the selected iteration has a directory");
}

/// The same training step in msprobe's layout (tensor task, level mix): burn's layers are API
/// calls (their kernels are not in module form), and `training_step`'s gradients are
/// msprobe's `parameters_grad` entries, one per module path (`Module.conv.Module.parameters_grad.0`:
/// the class is not known without a module call of that path), `{weight, bias}` in the
/// visitor's order, each file burn's own gradient bit for bit.
#[test]
fn in_msprobes_layout_the_gradients_are_parameters_grad_entries() {
    let tmp = Tmp::new("msprobe");
    let device = Device::default().autodiff();
    let model = model(&device);
    let (x, y) = batch(&device);
    let text = format!(
        r#"{{"task": "tensor", "dump_path": "{}", "level": "mix",
            "tensor": {{"scope": [], "list": [], "data_mode": ["all"]}}}}"#,
        tmp.0.display()
    );
    let mut d = dump_host::Dumper::builder()
        .open_json(text.into_bytes())
        .unwrap();
    let mut tracer = Tracer::new(0);
    let grads = tracer
        .step(&mut d, || {
            let f = model.forward(x.clone(), y.clone());
            let grads = GradientsParams::from_grads(f.loss.backward(), &model);
            training_step(&model, &grads);
            model.grads(&grads)
        })
        .unwrap();
    d.close().unwrap();
    let dir = tmp.0.join("step0/rank0");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("dump.json")).unwrap()).unwrap();
    let data = doc["data"].as_object().unwrap();
    let names: Vec<&str> = data.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "Functional.Conv2d.0.forward",
            "Functional.Relu.0.forward",
            "Functional.MaxPool2d.0.forward",
            "Functional.Linear.0.forward",
            "Functional.SoftmaxCrossEntropy.0.forward",
            "Module.conv.Module.parameters_grad.0",
            "Module.fc.Module.parameters_grad.0",
        ]
    );
    for module in ["conv", "fc"] {
        let entry = &data[&format!("Module.{module}.Module.parameters_grad.0")];
        let params: Vec<&str> = entry
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(params, ["weight", "bias"], "{module}");
        for p in ["weight", "bias"] {
            let t = &entry[p][0];
            let file = format!("Module.{module}.Module.parameters_grad.0.{p}.npy");
            assert_eq!(t["data_name"], file.as_str());
            let f = dump_npy::read_file(dir.join("dump_tensor_data").join(&file)).unwrap();
            let g = grads[format!("{module}.{p}").as_str()].as_ref().unwrap();
            same(g, (f.shape, f.data), &file);
        }
    }
}

/// Watcher mode through burn: a `layer` output is watched (a clone of the burn tensor, read
/// again after every later kernel of the step); burn's tensors are never written in place, so
/// a clean run reports nothing, and every check really ran.
#[test]
fn a_watched_layer_output_is_checked_after_every_later_kernel_without_false_reports() {
    let tmp = Tmp::new("watcher");
    let device = Device::default().autodiff();
    let model = model(&device);
    let (x, y) = batch(&device);
    let text = format!(
        r#"{{"common_dump_settings": {{"path": "{}", "net_name": "Net", "iteration": "all",
        "input_output": 0, "support_device": [0], "dump_mode": 0, "kernels": [],
        "saved_data": "statistic"}}, "e2e_dump_settings": {{"enable": true}},
        "opdump": {{"watcher": {{"nodes": ["Conv2d-op0", "Default/features/pool1/MaxPool2d-op2"]}}}}}}"#,
        tmp.0.display()
    );
    let mut d = dump_host::Dumper::builder()
        .open_json(text.into_bytes())
        .unwrap();
    let mut tracer = Tracer::new(0);
    const STEPS: u64 = 3;
    for _ in 0..STEPS {
        let f = tracer
            .step(&mut d, || model.forward(x.clone(), y.clone()))
            .unwrap();
        assert!(f.loss.into_scalar::<f32>().is_finite());
    }
    let (reads, corruptions) = d.watcher_counts();
    d.close().unwrap();
    assert_eq!(corruptions, 0);
    // Per step, five kernels (conv1, act1, pool1, fc, the loss tap): a watched output is read
    // after its own kernel and after every later one: conv1's five times, pool1's three.
    assert_eq!(reads, STEPS * (5 + 3), "{reads}");
    assert!(!tmp.0.join("rank_0/watcher.csv").exists());
}
