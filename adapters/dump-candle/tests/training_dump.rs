//! The training-step dump (`DumpedOptimizer`) on a small CNN trained 3 steps with
//! `saved_data: full`: every gradient file equals candle's GradStore tensor bit for bit, in
//! backward's order; every Parameter file equals the weight after the step; Δw and
//! ‖Δw‖/‖w‖ match the weights of consecutive steps; the forward activations equal a plain
//! (undumped) run of the same model; an optimizer's own state is dumped through
//! `OptimizerState`; steps the config does not select dump nothing; a
//! diverging run (fixed weights, lr 50) is traced by dump-read's inspect to the first
//! non-finite tensor candle computed, with its role, and overflow mode (op_debug_mode 3)
//! keeps only the kernels that overflowed yet finds the same first one.

#[path = "../../testsupport/onnx_fixtures.rs"]
mod support;

use std::collections::HashMap;

use candle_core::{DType, Device, Module, Result, Tensor, Var, backprop::GradStore};
use candle_nn::{
    Activation, Conv2d, Linear, Optimizer, SGD, VarBuilder, VarMap, conv2d, linear, loss,
};
use dump_candle::{Dumped, DumpedOptimizer, OptimizerState, Tracer};
use support::{Tmp, dumper, kernel_file, npy_in};

struct Cnn {
    conv: Dumped<Conv2d>,
    act: Dumped<Activation>,
    fc: Dumped<Linear>,
}

impl Cnn {
    fn new(vb: VarBuilder<'_>) -> Result<Self> {
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
        self.fc.forward(&a.max_pool2d(2)?.flatten_from(1)?)
    }
}

fn batch() -> (Tensor, Tensor) {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let x: Vec<f32> = (0..8 * 64)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect();
    let y: Vec<u32> = (0..8).map(|i| i % 5).collect();
    (
        Tensor::from_vec(x, (8, 1, 8, 8), &Device::Cpu).unwrap(),
        Tensor::from_vec(y, 8, &Device::Cpu).unwrap(),
    )
}

const PARAMS: [&str; 4] = [
    "fc.bias",
    "fc.weight",
    "features.conv1.bias",
    "features.conv1.weight",
];

/// The f32 bytes of a tensor, C order.
fn bytes(t: &Tensor) -> Vec<u8> {
    let v: Vec<f32> = t.flatten_all().unwrap().to_vec1().unwrap();
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The data bytes of the one file of `kernel` (`io`, `slot`) in `dir`.
fn file_bytes(dir: &std::path::Path, kernel: &str, io: &str, slot: usize) -> (Vec<usize>, Vec<u8>) {
    let f = dump_npy::read_file(kernel_file(dir, kernel, io, slot)).unwrap();
    (f.shape, f.data)
}

/// A model whose weights are a copy of `from`'s (so two runs start from the same point).
fn twin(from: &VarMap) -> (VarMap, Cnn) {
    let mut varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let model = Cnn::new(vb).unwrap();
    let src = from.data().lock().unwrap();
    for (k, v) in src.iter() {
        varmap.set_one(k, v.as_tensor().copy().unwrap()).unwrap();
    }
    drop(src);
    (varmap, model)
}

#[test]
fn gradients_parameters_and_updates_are_candles_own_tensors() {
    let tmp = Tmp::new("train-step");
    let varmap = VarMap::new();
    let model = Cnn::new(VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu)).unwrap();
    init(&varmap);
    // The plain run: the same weights, trained by the bare optimizer with no Tracer.
    let (plain_map, plain) = twin(&varmap);
    let mut plain_sgd = SGD::new(plain_map.all_vars(), 0.05).unwrap();
    let mut opt = DumpedOptimizer::new(SGD::new(varmap.all_vars(), 0.05).unwrap(), &varmap);
    assert_eq!(opt.training().parameter_names().collect::<Vec<_>>(), PARAMS);
    let vars: HashMap<String, Var> = varmap.data().lock().unwrap().clone();
    let (x, y) = batch();
    let mut d = dumper(&tmp.0, r#", "saved_data": "full""#);
    let mut tracer = Tracer::new(0);
    // Per step: each parameter's gradient and weight after the step (candle's tensors), and
    // the plain run's conv output.
    let mut grads_seen: Vec<HashMap<&str, Vec<u8>>> = Vec::new();
    let mut weights: Vec<HashMap<&str, Tensor>> = vec![
        PARAMS
            .iter()
            .map(|&p| (p, vars[p].as_tensor().copy().unwrap()))
            .collect(),
    ];
    let mut plain_conv = Vec::new();
    for _ in 0..3 {
        let grads: GradStore = tracer
            .step(&mut d, || -> Result<GradStore> {
                let l = loss::cross_entropy(&model.forward(&x)?, &y)?;
                let grads = l.backward()?;
                opt.step(&grads)?;
                Ok(grads)
            })
            .unwrap()
            .unwrap();
        grads_seen.push(
            PARAMS
                .iter()
                .map(|&p| (p, bytes(grads.get(vars[p].as_tensor()).unwrap())))
                .collect(),
        );
        weights.push(
            PARAMS
                .iter()
                .map(|&p| (p, vars[p].as_tensor().copy().unwrap()))
                .collect(),
        );
        plain_conv.push(bytes(&plain.conv.inner().forward(&x).unwrap()));
        let l = loss::cross_entropy(&plain.forward(&x).unwrap(), &y).unwrap();
        plain_sgd.backward_step(&l).unwrap();
    }
    let report = d.close().unwrap();
    assert!(tracer.diagnostics().next().is_none());

    // Backward's order: fc's gradients are made before the conv's (fc runs last forward).
    let order = tracer.execution_order();
    let grads_order: Vec<&str> = order
        .iter()
        .filter(|n| n.starts_with("Gradients/"))
        .map(String::as_str)
        .collect();
    assert_eq!(grads_order.len(), 4, "{order:?}");
    let pos = |p: &str| {
        let path = p.replace('.', "/");
        grads_order
            .iter()
            .position(|n| n.contains(&format!("/{path}/Gradient-op")))
            .unwrap()
    };
    assert!(
        pos("fc.weight") < pos("features.conv1.weight"),
        "{grads_order:?}"
    );
    assert!(
        pos("fc.bias") < pos("features.conv1.bias"),
        "{grads_order:?}"
    );
    assert!(order[..3].iter().all(|n| !n.starts_with("Gradients/")));

    // Files per step: conv, act, fc (input + output each) = 6; 4 gradients; 4 Parameters;
    // 4 updates x (Δw, ratio); the learning rate.
    let per_step = 6 + 4 + 4 + 8 + 1;
    assert_eq!((report.files, report.rows), (3 * per_step, 3 * per_step));
    let rank = tmp.rank();
    for step in 0..3 {
        let dir = rank.join("Net/0").join(step.to_string());
        assert_eq!(npy_in(&dir).len() as u64, per_step);
        for &p in &PARAMS {
            let path = p.replace('.', "/");
            let g = order
                .iter()
                .find(|n| n.starts_with(&format!("Gradients/Default/{path}/Gradient-op")))
                .unwrap();
            // The gradient: candle's GradStore tensor, bit for bit.
            let (shape, data) = file_bytes(&dir, g, "output", 0);
            assert_eq!(shape, vars[p].dims(), "{p}");
            assert_eq!(data, grads_seen[step][p], "gradient of {p}, step {step}");
            // The Parameter: the weight after this step, bit for bit.
            let (shape, data) = file_bytes(&dir, p, "output", 0);
            assert_eq!(shape, vars[p].dims());
            assert_eq!(data, bytes(&weights[step + 1][p]), "{p} after step {step}");
            // The update: after - before, and its norm over the weight's before.
            let u = order
                .iter()
                .find(|n| n.starts_with(&format!("Optimizer/Default/{path}/Update-op")))
                .unwrap();
            let before = &weights[step][p];
            let dw = (&weights[step + 1][p] - before).unwrap();
            assert_eq!(file_bytes(&dir, u, "output", 0).1, bytes(&dw), "Δ{p}");
            let (shape, r) = file_bytes(&dir, u, "output", 1);
            assert_eq!(shape, Vec::<usize>::new(), "the ratio is 0-d");
            let r = f32::from_le_bytes(r.try_into().unwrap());
            let norm = |t: &Tensor| -> f64 {
                let v: Vec<f32> = t.flatten_all().unwrap().to_vec1().unwrap();
                v.iter()
                    .map(|&x| f64::from(x) * f64::from(x))
                    .sum::<f64>()
                    .sqrt()
            };
            let want = (norm(&dw) / norm(before)) as f32;
            assert!(
                r > 0.0 && (r - want).abs() <= 1e-6 * want,
                "{p}: {r} vs {want}"
            );
        }
        // The learning rate, as the optimizer holds it.
        let lr = order
            .iter()
            .find(|n| n.starts_with("Optimizer/Default/learning_rate/LearningRate-op"))
            .unwrap();
        let (shape, v) = file_bytes(&dir, lr, "output", 0);
        assert_eq!(
            (shape.len(), f64::from_le_bytes(v.try_into().unwrap())),
            (0, 0.05)
        );
        // The forward activation equals the plain run's, bit for bit.
        let conv = &order[0];
        assert_eq!(
            file_bytes(&dir, conv, "output", 0).1,
            plain_conv[step],
            "step {step}"
        );
    }
    // The plain run and the dumped one end on the same weights.
    for (k, v) in plain_map.data().lock().unwrap().iter() {
        assert_eq!(bytes(v.as_tensor()), bytes(vars[k].as_tensor()), "{k}");
    }
}

/// Momentum SGD keeping one buffer per parameter, exposed through `OptimizerState`.
struct Momentum {
    vars: Vec<(Var, Var)>,
    lr: f64,
}

impl Optimizer for Momentum {
    type Config = f64;
    fn new(vars: Vec<Var>, lr: f64) -> Result<Self> {
        let vars = vars
            .into_iter()
            .map(|v| {
                let m = Var::zeros(v.shape(), v.dtype(), v.device())?;
                Ok((v, m))
            })
            .collect::<Result<_>>()?;
        Ok(Momentum { vars, lr })
    }
    fn step(&mut self, grads: &GradStore) -> Result<()> {
        for (v, m) in &self.vars {
            if let Some(g) = grads.get(v) {
                m.set(&((m.as_tensor() * 0.9)? + g)?)?;
                v.set(&v.sub(&(m.as_tensor() * self.lr)?)?)?;
            }
        }
        Ok(())
    }
    fn learning_rate(&self) -> f64 {
        self.lr
    }
    fn set_learning_rate(&mut self, lr: f64) {
        self.lr = lr;
    }
}

impl OptimizerState for Momentum {
    fn state(&self, var: &Var) -> Vec<(String, Tensor)> {
        self.vars
            .iter()
            .filter(|(v, _)| v.as_tensor().id() == var.as_tensor().id())
            .map(|(_, m)| ("momentum".to_owned(), m.as_tensor().clone()))
            .collect()
    }
}

#[test]
fn an_optimizers_state_is_dumped_and_unselected_steps_dump_nothing() {
    let tmp = Tmp::new("train-state");
    let varmap = VarMap::new();
    let model = Cnn::new(VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu)).unwrap();
    init(&varmap);
    let mut opt = DumpedOptimizer::new(Momentum::new(varmap.all_vars(), 0.05).unwrap(), &varmap);
    let (x, y) = batch();
    // Only step 1 is dumped.
    let config = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "1", "input_output": 0, "kernels": [], "support_device": [0],
        "saved_data": "full"}}}}"#,
        tmp.0.display()
    );
    let mut d = dump_host::Dumper::builder()
        .env(&HashMap::new())
        .open_json(config.into_bytes())
        .unwrap();
    let mut tracer = Tracer::new(0);
    for _ in 0..3 {
        tracer
            .step(&mut d, || -> Result<()> {
                opt.backward_step(&loss::cross_entropy(&model.forward(&x)?, &y)?)
            })
            .unwrap()
            .unwrap();
    }
    d.close().unwrap();
    let rank = tmp.rank();
    assert!(!rank.join("Net/0/0").exists() && !rank.join("Net/0/2").exists());
    let dir = rank.join("Net/0/1");
    // The execution order on disk is step 1's (the undumped step 2 reports no gradients and
    // does not rewrite it).
    let csv = std::fs::read_to_string(rank.join("execution_order/ms_execution_order_graph_0.csv"))
        .unwrap();
    let order: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(order.len(), 3 + 4 + 4 + 4 + 1, "{order:?}");
    let m = order
        .iter()
        .find(|n| n.starts_with("Optimizer/Default/fc/weight/momentum/OptimizerState-op"))
        .unwrap_or_else(|| panic!("{order:?}"));
    let (shape, data) = file_bytes(&dir, m, "output", 0);
    assert_eq!(shape, [5, 36]);
    let want = opt
        .inner()
        .state(&varmap.data().lock().unwrap()["fc.weight"]);
    // The buffer moved on one step since; step 1's value is not the final one.
    assert_ne!(data, bytes(&want[0].1));
    assert!(
        data.iter().any(|&b| b != 0),
        "a momentum after two steps is not zero"
    );
}

/// Whether any element of `t` is NaN or infinite.
fn nonfinite(t: &Tensor) -> bool {
    let v: Vec<f32> = t.flatten_all().unwrap().to_vec1().unwrap();
    v.iter().any(|x| !x.is_finite())
}

/// Sets every weight from a fixed LCG, uniform in ±1/√fan_in (candle's CPU generator cannot
/// be seeded): a run that diverges does so the same way every time.
fn init(varmap: &VarMap) {
    let data = varmap.data().lock().unwrap();
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for name in PARAMS {
        let var = &data[name];
        let dims = var.dims().to_vec();
        let fan_in: usize = if dims.len() > 1 {
            dims[1..].iter().product()
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
        var.set(&Tensor::from_vec(v, dims, &Device::Cpu).unwrap())
            .unwrap();
    }
}

#[test]
fn a_diverging_run_is_traced_to_its_first_non_finite_tensor() {
    let tmp = Tmp::new("train-nan");
    let varmap = VarMap::new();
    let model = Cnn::new(VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu)).unwrap();
    init(&varmap);
    // Far too large a step for a regression on 5 outputs: the weights blow up in a few steps.
    let mut opt = DumpedOptimizer::new(SGD::new(varmap.all_vars(), 50.0).unwrap(), &varmap);
    let vars: HashMap<String, Var> = varmap.data().lock().unwrap().clone();
    let (x, _) = batch();
    let target = Tensor::ones((8, 5), DType::F32, &Device::Cpu).unwrap();
    let mut d = dumper(&tmp.0, r#", "saved_data": "statistic""#);
    let mut tracer = Tracer::new(0);
    // Ground truth from candle's own tensors: per parameter the first step its gradient
    // held a NaN or Inf, and the first step with a non-finite activation or gradient.
    let mut bad_grad: HashMap<&str, usize> = HashMap::new();
    let mut first: Option<(usize, &str)> = None;
    for step in 0..30 {
        let (fwd_bad, bad) = tracer
            .step(&mut d, || -> Result<(bool, Vec<&str>)> {
                let out = model.forward(&x)?;
                let l = (&out - &target)?.sqr()?.mean_all()?;
                let grads = l.backward()?;
                let bad = PARAMS
                    .iter()
                    .copied()
                    .filter(|p| grads.get(vars[*p].as_tensor()).is_some_and(nonfinite))
                    .collect();
                opt.step(&grads)?;
                Ok((nonfinite(&out), bad))
            })
            .unwrap()
            .unwrap();
        for p in &bad {
            bad_grad.entry(p).or_insert(step);
        }
        if first.is_none() && (fwd_bad || !bad.is_empty()) {
            first = Some((step, if fwd_bad { "activation" } else { "gradient" }));
        }
    }
    d.close().unwrap();
    // With these weights the ReLUs die after two steps and a bias gradient overflows later.
    let (step, role) = first.expect("lr 50 diverges within 30 steps");
    let dump = dump_read::Dump::open(&tmp.0).unwrap();
    let ins = dump_read::inspect::inspect(&dump, 1, &|_, _| {});
    let f = ins.first_nonfinite.expect("a non-finite tensor");
    let k = &ins.kernels[f.kernel];
    assert_eq!(k.iteration, step as u64, "{k:?}");
    assert_eq!(dump_read::train::Role::of_kernel(k).as_str(), role, "{k:?}");
    if role == "gradient" {
        // The named parameter's gradient was non-finite in that step.
        let p = dump_read::train::parameter_of(&k.op_type, &k.op_name).unwrap();
        assert!(
            PARAMS
                .iter()
                .any(|q| q.replace('.', "_") == p && bad_grad.get(q) == Some(&step)),
            "{p}: {bad_grad:?}"
        );
    }
    // Each parameter's gradient-norm series turns non-finite where candle's gradient did.
    assert_eq!(ins.parameters.len(), 4);
    for q in PARAMS {
        let t = ins
            .parameters
            .iter()
            .find(|t| t.name == q.replace('.', "_"))
            .unwrap();
        let dumped = t
            .steps
            .iter()
            .zip(&t.grad_norm)
            .find(|(_, g)| g.is_some_and(|g| !g.is_finite()))
            .map(|(&s, _)| s as usize);
        assert_eq!(dumped, bad_grad.get(q).copied(), "{q}: {t:?}");
        if dumped.is_some() {
            assert_eq!(t.verdict, dump_read::train::Verdict::Exploding, "{t:?}");
        }
    }
}

/// Trains the fixed-weight CNN 30 steps at lr 50 with `config`'s dump (extra
/// `common_dump_settings` entries) under `root`.
fn diverge(root: &std::path::Path, common: &str) {
    diverge_into(dumper(root, common));
}

/// [`diverge`] into the Dumper `d`.
fn diverge_into(mut d: dump_host::Dumper) {
    let varmap = VarMap::new();
    let model = Cnn::new(VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu)).unwrap();
    init(&varmap);
    let mut opt = DumpedOptimizer::new(SGD::new(varmap.all_vars(), 50.0).unwrap(), &varmap);
    let (x, _) = batch();
    let target = Tensor::ones((8, 5), DType::F32, &Device::Cpu).unwrap();
    let mut tracer = Tracer::new(0);
    for _ in 0..30 {
        tracer
            .step(&mut d, || -> Result<()> {
                opt.backward_step(&(model.forward(&x)? - &target)?.sqr()?.mean_all()?)
            })
            .unwrap()
            .unwrap();
    }
    d.close().unwrap();
}

#[test]
fn overflow_mode_keeps_only_the_kernels_that_went_non_finite() {
    // The same run twice: every step's statistics, and MindSpore's overflow mode
    // (op_debug_mode 3), which writes a kernel only when an output holds a NaN or Inf.
    let all = Tmp::new("train-all");
    let over = Tmp::new("train-overflow");
    diverge(&all.0, r#", "saved_data": "statistic""#);
    diverge(&over.0, r#", "saved_data": "full", "op_debug_mode": 3"#);
    let first = |root: &std::path::Path| {
        let dump = dump_read::Dump::open(root).unwrap();
        let ins = dump_read::inspect::inspect(&dump, 1, &|_, _| {});
        let f = ins.first_nonfinite.expect("the run diverges");
        let k = &ins.kernels[f.kernel];
        // In overflow mode, every kernel written has a non-finite output.
        let every_kernel_overflowed = ins.kernels.iter().all(|k| {
            k.tensors.iter().any(|&i| {
                dump.tensors[i].id.io == dump_host::layout::Io::Output
                    && ins.stats[i].as_ref().and_then(|s| s.nonfinite()) == Some(true)
            })
        });
        (
            (k.iteration, k.op_type.clone(), k.op_name.clone()),
            every_kernel_overflowed,
            ins.kernels.len(),
        )
    };
    let (want, all_overflowed, n_all) = first(&all.0);
    let (got, only_overflowed, n_over) = first(&over.0);
    assert_eq!(got, want, "overflow mode finds the same first kernel");
    assert_eq!(want.1, "Gradient", "{want:?}");
    assert!(only_overflowed && !all_overflowed);
    assert!(n_over < n_all / 2, "{n_over} of {n_all} kernels kept");
}

/// The same diverging run under the flight recorder (2 steps held, statistics of every
/// kernel, nothing written until a tensor goes non-finite): it writes only the two steps
/// before the first non-finite tensor and that step, `trigger.json` names the kernel and
/// step the full statistic dump's `inspect` names (a gradient), and `inspect` of what it
/// wrote finds the same first kernel. Issue 26 item 3: caught without dumping every step.
#[test]
fn the_flight_recorder_catches_the_divergence_without_dumping_every_step() {
    let all = Tmp::new("train-fr-all");
    let rec = Tmp::new("train-fr");
    diverge(&all.0, r#", "saved_data": "statistic""#);
    let first = |root: &std::path::Path| {
        let dump = dump_read::Dump::open(root).unwrap();
        let ins = dump_read::inspect::inspect(&dump, 1, &|_, _| {});
        let f = ins.first_nonfinite.expect("the run diverges");
        let k = &ins.kernels[f.kernel];
        let steps: std::collections::BTreeSet<u64> =
            ins.kernels.iter().map(|k| k.iteration).collect();
        ((k.iteration, k.op_type.clone(), k.op_name.clone()), steps)
    };
    let (want, all_steps) = first(&all.0);
    assert_eq!(all_steps.len(), 30);
    assert_eq!(want.1, "Gradient", "{want:?}");
    let text = format!(
        r#"{{"common_dump_settings": {{"dump_mode": 0, "path": "{}", "net_name": "Net",
        "iteration": "all", "input_output": 0, "kernels": [], "support_device": [0],
        "saved_data": "statistic"}}, "e2e_dump_settings": {{"enable": true}},
        "opdump": {{"flight_recorder": {{"steps": 2}}}}}}"#,
        rec.0.display()
    );
    diverge_into(
        dump_host::Dumper::builder()
            .open_json(text.into_bytes())
            .unwrap(),
    );
    let (got, steps) = first(&rec.0);
    assert_eq!(got, want, "the recorder's dump names the same first kernel");
    let s = want.0;
    assert_eq!(
        steps.into_iter().collect::<Vec<_>>(),
        (s.saturating_sub(2)..=s).collect::<Vec<_>>(),
        "only the held steps and the trigger step are written"
    );
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(rec.0.join("rank_0/trigger.json")).unwrap())
            .unwrap();
    assert_eq!(t["trigger"]["kind"], "nonfinite", "{t}");
    assert_eq!(t["trigger"]["step"], s, "{t}");
    assert_eq!(
        dump_host::layout::sanitize(t["trigger"]["kernel"].as_str().unwrap()),
        want.2,
        "{t}"
    );
}
