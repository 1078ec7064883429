//! The NaN hunt in training: a small burn MLP-on-conv model trained with a learning rate far
//! too large, its layers, gradients and parameters dumped as statistics every step; dump-read's
//! inspect (what `opdump inspect` prints) names as the first non-finite kernel the first
//! tensor burn itself computed as non-finite, with its role (activation or gradient); under
//! the flight recorder the same run writes only the held steps and the trigger step.

#[path = "../../testsupport/onnx_fixtures.rs"]
mod support;

use burn::{
    module::{Module, Param},
    nn::{
        Linear, LinearConfig, Relu,
        conv::{Conv2d, Conv2dConfig},
        loss::CrossEntropyLossConfig,
    },
    optim::{GradientsParams, SgdConfig},
    tensor::{Device, Int, Tensor, TensorData},
};
use dump_burn::{Tracer, layer, tap, training_step};
use dump_host::layout::sanitize;
use support::{Tmp, dumper};

#[derive(Module, Debug)]
struct Net {
    conv: Conv2d,
    fc: Linear,
}

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

/// A parameter of `shape` with fixed values in [-0.5, 0.5).
fn param<const D: usize>(shape: [usize; D], seed: u64, device: &Device) -> Param<Tensor<D>> {
    let n = shape.iter().product();
    Param::from_data(TensorData::new(lcg(n, seed, 0.5), shape), device)
}

fn net(device: &Device) -> Net {
    let mut m = Net {
        conv: Conv2dConfig::new([1, 4], [3, 3]).init(device),
        fc: LinearConfig::new(4 * 6 * 6, 5).init(device),
    };
    m.conv.weight = param([4, 1, 3, 3], 11, device);
    m.conv.bias = Some(param([4], 12, device));
    m.fc.weight = param([144, 5], 13, device);
    m.fc.bias = Some(param([5], 14, device));
    m
}

/// Whether any element of `t` is NaN or infinite.
fn nonfinite<const D: usize>(t: &Tensor<D>) -> bool {
    t.to_data()
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .any(|v| !v.is_finite())
}

#[test]
fn a_diverging_run_is_traced_to_its_first_non_finite_tensor() {
    // At lr 1e3 the loss is the first non-finite tensor (step 6), at 1e4 the linear layer's
    // output (step 5): two different first kernels, each found from the dump alone.
    for (lr, tag) in [(1.0e3, "diverge-1e3"), (1.0e4, "diverge-1e4")] {
        diverge(lr, tag);
    }
}

/// The fixed input batch of the runs: 8 single-channel 8x8 images and their classes.
fn batch(device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
    let x = Tensor::<4>::from_data(
        TensorData::new(lcg(8 * 64, 0x2545_f491_4f6c_dd1d, 2.0), [8, 1, 8, 8]),
        device,
    );
    let y = Tensor::<1, Int>::from_data(
        TensorData::new((0..8).map(|i| (i % 5) as i64).collect::<Vec<_>>(), [8]),
        device,
    );
    (x, y)
}

/// What one forward and backward of the test's step computed: the layers' outputs, the loss
/// and the gradients.
struct Computed {
    conv: Tensor<4>,
    act: Tensor<4>,
    fc: Tensor<2>,
    loss: Tensor<1>,
    grads: GradientsParams,
}

/// One step's forward (3 layers and the loss, dumped), backward and training dump, inside a
/// [`Tracer::step`]: the kernels of [`tracer_order_hint`].
fn forward_backward(model: &Net, x: &Tensor<4>, y: &Tensor<1, Int>, device: &Device) -> Computed {
    let conv = layer("conv", &model.conv, x.clone(), |m, x| m.forward(x));
    let act = layer("act", &Relu::new(), conv.clone(), |m, x| m.forward(x));
    let fc = layer("fc", &model.fc, act.clone().flatten(1, 3), |m, x| {
        m.forward(x)
    });
    let loss = CrossEntropyLossConfig::new()
        .init(device)
        .forward(fc.clone(), y.clone());
    tap("loss", "SoftmaxCrossEntropy", &loss);
    let grads = GradientsParams::from_grads(loss.backward(), model);
    training_step(model, &grads);
    Computed {
        conv,
        act,
        fc,
        loss,
        grads,
    }
}

/// Trains the fixed-weight model 40 steps at learning rate `lr` into `d` (then closed).
fn train_into(lr: f64, mut d: dump_host::Dumper) {
    let device = Device::default().autodiff();
    let mut model = net(&device);
    let (x, y) = batch(&device);
    let mut opt = SgdConfig::new().init();
    let mut tracer = Tracer::new(0);
    for _ in 0..40 {
        model = tracer
            .step(&mut d, || {
                let c = forward_backward(&model, &x, &y, &device);
                opt.step(lr, model.clone(), c.grads)
            })
            .unwrap();
    }
    d.close().unwrap();
}

/// Trains the fixed-weight model 40 steps at learning rate `lr`, then checks what inspect
/// names against burn's own tensors.
fn diverge(lr: f64, tag: &str) {
    let tmp = Tmp::new(tag);
    let device = Device::default().autodiff();
    let mut model = net(&device);
    let (x, y) = batch(&device);
    let mut opt = SgdConfig::new().init();
    let mut d = dumper(&tmp.0, r#", "saved_data": "statistic""#);
    let mut tracer = Tracer::new(0);
    // Ground truth from burn's own tensors: the first (step, kernel) that is non-finite, in
    // the order the step computes them (forward layers, loss, then gradients).
    let mut first: Option<(usize, String, &str)> = None;
    for step in 0..40 {
        let (m, bad) = tracer
            .step(&mut d, || {
                let Computed {
                    conv: c,
                    act: a,
                    fc: l,
                    loss,
                    grads,
                } = forward_backward(&model, &x, &y, &device);
                let order = tracer_order_hint();
                let mut bad = None;
                let fwd = [
                    nonfinite(&c),
                    nonfinite(&a),
                    nonfinite(&l),
                    nonfinite(&loss),
                ];
                if let Some(i) = fwd.iter().position(|&b| b) {
                    bad = Some((order[i].to_owned(), "activation"));
                } else {
                    let g = [
                        grads
                            .get::<4>(model.conv.weight.id)
                            .is_some_and(|g| nonfinite(&g)),
                        grads
                            .get::<1>(model.conv.bias.as_ref().unwrap().id)
                            .is_some_and(|g| nonfinite(&g)),
                        grads
                            .get::<2>(model.fc.weight.id)
                            .is_some_and(|g| nonfinite(&g)),
                        grads
                            .get::<1>(model.fc.bias.as_ref().unwrap().id)
                            .is_some_and(|g| nonfinite(&g)),
                    ];
                    if let Some(i) = g.iter().position(|&b| b) {
                        bad = Some((order[4 + i].to_owned(), "gradient"));
                    }
                }
                (opt.step(lr, model.clone(), grads), bad)
            })
            .unwrap();
        model = m;
        if first.is_none()
            && let Some((k, role)) = bad
        {
            first = Some((step, k, role));
        }
    }
    d.close().unwrap();
    assert_eq!(tracer.execution_order(), tracer_order_hint());
    let (step, kernel, role) = first.unwrap_or_else(|| panic!("lr {lr} diverges within 40 steps"));
    let dump = dump_read::Dump::open(&tmp.0).unwrap();
    let ins = dump_read::inspect::inspect(&dump, 1, &|_, _| {});
    let f = ins.first_nonfinite.expect("a non-finite tensor");
    let k = &ins.kernels[f.kernel];
    assert_eq!(k.iteration, step as u64, "lr {lr}: {k:?}");
    assert_eq!(k.op_name, sanitize(&kernel), "lr {lr}: {k:?}");
    assert_eq!(dump_read::train::Role::of_kernel(k).as_str(), role, "{k:?}");
}

/// What `inspect` of the dump under `root` names first: `(iteration, op type, op name,
/// role)`, and the iterations written.
fn first_named(root: &std::path::Path) -> ((u64, String, String, &'static str), Vec<u64>) {
    let dump = dump_read::Dump::open(root).unwrap();
    let ins = dump_read::inspect::inspect(&dump, 1, &|_, _| {});
    let f = ins.first_nonfinite.expect("the run diverges");
    let k = &ins.kernels[f.kernel];
    let steps: std::collections::BTreeSet<u64> = ins.kernels.iter().map(|k| k.iteration).collect();
    let role = dump_read::train::Role::of_kernel(k).as_str();
    (
        (k.iteration, k.op_type.clone(), k.op_name.clone(), role),
        steps.into_iter().collect(),
    )
}

/// The diverging runs under the flight recorder (2 steps held, statistics of every kernel,
/// nothing written until a tensor goes non-finite): each writes only the two steps before the
/// first non-finite tensor and that step; `trigger.json` names the kernel and step that the
/// full statistic dump of the same run names first, and `inspect` of what the recorder wrote
/// finds the same kernel with the same role. Issue 26 item 3 on burn.
#[test]
fn the_flight_recorder_catches_a_burn_divergence_without_dumping_every_step() {
    // lr 1e3: the loss (an activation) at step 6; lr 1e4: the linear layer's output at step 5.
    for (lr, tag) in [(1.0e3, "fr-1e3"), (1.0e4, "fr-1e4")] {
        let all = Tmp::new(&format!("{tag}-all"));
        let rec = Tmp::new(tag);
        train_into(lr, dumper(&all.0, r#", "saved_data": "statistic""#));
        let (want, all_steps) = first_named(&all.0);
        assert_eq!(all_steps.len(), 40, "the full dump has every step");
        assert_eq!(want.3, "activation", "lr {lr}: {want:?}");
        let text = format!(
            r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
            "iteration": "all", "input_output": 0, "kernels": [], "support_device": [0],
            "saved_data": "statistic"}}, "e2e_dump_settings": {{"enable": true}},
            "opdump": {{"flight_recorder": {{"steps": 2}}}}}}"#,
            rec.0.display()
        );
        train_into(
            lr,
            dump_host::Dumper::builder()
                .open_json(text.into_bytes())
                .unwrap(),
        );
        let (got, steps) = first_named(&rec.0);
        assert_eq!(
            got, want,
            "lr {lr}: the recorder's dump names the same first kernel"
        );
        let s = want.0;
        assert_eq!(
            steps,
            (s.saturating_sub(2)..=s).collect::<Vec<_>>(),
            "lr {lr}: only the held steps and the trigger step are written"
        );
        let t: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(rec.0.join("rank_0/trigger.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(t["trigger"]["kind"], "nonfinite", "{t}");
        assert_eq!(t["trigger"]["step"], s, "{t}");
        assert_eq!(
            sanitize(t["trigger"]["kernel"].as_str().unwrap()),
            want.2,
            "lr {lr}: {t}"
        );
    }
}

/// The kernel names of a step of this test, in order: 3 layers, the loss, 4 gradients.
fn tracer_order_hint() -> [&'static str; 8] {
    [
        "Default/conv/Conv2d-op0",
        "Default/act/Relu-op1",
        "Default/fc/Linear-op2",
        "Default/loss/SoftmaxCrossEntropy-op3",
        "Gradients/Default/conv/weight/Gradient-op4",
        "Gradients/Default/conv/bias/Gradient-op5",
        "Gradients/Default/fc/weight/Gradient-op6",
        "Gradients/Default/fc/bias/Gradient-op7",
    ]
}
