//! A small CNN built with candle-nn, trained 3 steps, dumped through `Dumped<M>` and `tap`
//! with `saved_data: full`: counts, execution order, each output file against the tensor the
//! model computed, training visible in the dump, numpy loading every file.

#[path = "../../testsupport/onnx_fixtures.rs"]
mod support;

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{
    Activation, Conv2d, Linear, Optimizer, SGD, VarBuilder, VarMap, conv2d, linear, loss,
};
use dump_candle::{Dumped, Tracer, tap};
use support::{Tmp, dumper, kernel_file, npy_in, python_numpy_loads, values};

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
        let p = a.max_pool2d(2)?;
        tap("features.pool1", "MaxPool", &p);
        self.fc.forward(&p.flatten_from(1)?)
    }
}

/// Deterministic pseudo-random inputs (a fixed LCG), 8 images of 1x8x8, labels 0..5.
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
    let dev = Device::Cpu;
    (
        Tensor::from_vec(x, (8, 1, 8, 8), &dev).unwrap(),
        Tensor::from_vec(y, 8, &dev).unwrap(),
    )
}

const ORDER: [&str; 4] = [
    "Default/features/conv1-Conv2d/Conv2d-op0",
    "Default/features/act1-Activation/Activation-op1",
    "Default/features/pool1/MaxPool-op2",
    "Default/fc-Linear/Linear-op3",
];

#[test]
fn cnn_trained_three_steps_is_dumped_module_by_module() {
    let tmp = Tmp::new("train");
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let model = Cnn::new(vb).unwrap();
    // A small step on a fixed batch: the loss goes down whatever the random init.
    let mut sgd = SGD::new(varmap.all_vars(), 0.02).unwrap();
    let (x, y) = batch();

    let mut d = dumper(&tmp.0, r#", "saved_data": "full""#);
    let mut tracer = Tracer::new(0);
    let mut losses = Vec::new();
    let mut conv_out = Vec::new();
    for _ in 0..3 {
        let (l, c) = tracer
            .step(&mut d, || -> Result<(f32, Tensor)> {
                let c = model.conv.inner().forward(&x)?; // what the dumped conv computes
                let logits = model.forward(&x)?;
                let l = loss::cross_entropy(&logits, &y)?;
                sgd.backward_step(&l)?;
                Ok((l.to_scalar::<f32>()?, c))
            })
            .unwrap()
            .unwrap();
        losses.push(l);
        conv_out.push(c);
    }
    // The graph: conv -> act wired by tensor identity; the pool tap has no input and fc's input
    // (the flattened pool output) is no dumped kernel's output, so it is a parameter, like x.
    let g = d.graph(0).expect("described").clone();
    assert_eq!(g.execution_order(), ORDER);
    let edges: Vec<_> = g.edges().collect();
    assert_eq!(edges, [((0, 0), 1, 0)], "{g:?}");
    assert_eq!(
        g.parameters.len(),
        2,
        "x, and the flattened pool output fed to fc: {g:?}"
    );
    let report = d.close().unwrap();
    for ext in ["ir", "pb"] {
        let p = tmp
            .rank()
            .join(format!("graphs/ms_output_trace_code_graph_0.{ext}"));
        assert!(p.is_file(), "{}", p.display());
    }
    let diags: Vec<&str> = tracer.diagnostics().collect();
    assert!(diags.is_empty(), "{diags:?}");
    assert!(
        losses[2] < losses[0],
        "training lowers the loss: {losses:?}"
    );

    // Execution order: the modules and the tap in call order.
    assert_eq!(tracer.execution_order(), ORDER);
    let rank = tmp.rank();
    let csv = std::fs::read_to_string(rank.join("execution_order/ms_execution_order_graph_0.csv"))
        .unwrap();
    assert_eq!(
        csv,
        format!(
            "NodeExecutionOrder-FullNameWithScope\n{}\n",
            ORDER.join("\n")
        )
    );

    // Counts: 3 modules x (input + output) + the tap's output, per step.
    assert_eq!((report.files, report.rows), (3 * 7, 3 * 7));
    let mut all = Vec::new();
    for (step, conv) in conv_out.iter().enumerate() {
        let dir = rank.join("Net/0").join(step.to_string());
        let files = npy_in(&dir);
        assert_eq!(files.len(), 7, "step {step}: {files:?}");
        let rows = std::fs::read_to_string(dir.join("statistic.csv")).unwrap();
        assert_eq!(rows.lines().count(), 8, "{rows}");
        // The conv output file holds the tensor the model computed in this step.
        let (shape, got) = values(&kernel_file(&dir, ORDER[0], "output", 0));
        let want: Vec<f32> = conv.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(shape, conv.dims());
        for (a, b) in got.iter().zip(&want) {
            assert!((a - f64::from(*b)).abs() <= 1e-6, "{a} vs {b}");
        }
        // The activation's input is the conv's output (same bytes), the pool tap's shape.
        let act_in = values(&kernel_file(&dir, ORDER[1], "input", 0)).1;
        assert_eq!(act_in, got);
        let (pool_shape, _) = values(&kernel_file(&dir, ORDER[2], "output", 0));
        assert_eq!(pool_shape, [8, 4, 3, 3]);
        all.extend(files);
    }
    // Training changes the weights, so the dumped conv outputs differ from step to step.
    let first = values(&kernel_file(&rank.join("Net/0/0"), ORDER[0], "output", 0)).1;
    let second = values(&kernel_file(&rank.join("Net/0/1"), ORDER[0], "output", 0)).1;
    assert_ne!(first, second);
    python_numpy_loads(&all);
}

#[test]
fn outside_a_step_dumped_modules_are_the_bare_modules() {
    let tmp = Tmp::new("bare");
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let model = Cnn::new(vb).unwrap();
    let (x, _) = batch();
    let d = dumper(&tmp.0, r#", "saved_data": "full""#);
    let a = model.forward(&x).unwrap();
    let b = model
        .fc
        .inner()
        .forward(
            &model
                .act
                .inner()
                .forward(&model.conv.inner().forward(&x).unwrap())
                .unwrap()
                .max_pool2d(2)
                .unwrap()
                .flatten_from(1)
                .unwrap(),
        )
        .unwrap();
    let (a, b): (Vec<f32>, Vec<f32>) = (
        a.flatten_all().unwrap().to_vec1().unwrap(),
        b.flatten_all().unwrap().to_vec1().unwrap(),
    );
    assert_eq!(a, b);
    drop(d);
    assert!(npy_in(&tmp.rank().join("Net/0/0")).is_empty());
}

#[test]
fn a_panicking_forward_leaves_no_step_installed() {
    let tmp = Tmp::new("panic");
    let mut d = dumper(&tmp.0, r#", "saved_data": "statistic""#);
    let mut tracer = Tracer::new(0);
    let t = Tensor::zeros(4, DType::F32, &Device::Cpu).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = tracer.step(&mut d, || -> () { panic!("model bug") });
    }));
    assert!(r.is_err());
    // A tap after the unwound step must find no step (and not touch freed memory).
    tap("after", "Add", &t);
    d.close().unwrap();
    assert!(npy_in(&tmp.rank().join("Net/0/0")).is_empty());
    assert!(
        !tmp.rank().join("Net/0/0/statistic.csv").exists(),
        "nothing was dumped after the panic"
    );
}

#[test]
fn two_tracers_on_one_dumper_keep_their_graphs_apart() {
    // Fails on the tracer that only set its graph at its first step: A's second step then
    // landed in B's graph directory.
    let tmp = Tmp::new("two-graphs");
    let mut d = dumper(&tmp.0, r#", "saved_data": "tensor""#);
    let (mut a, mut b) = (Tracer::new(0), Tracer::new(1));
    let t = Tensor::ones(4, DType::F32, &Device::Cpu).unwrap();
    for _ in 0..2 {
        a.step(&mut d, || tap("a.x", "Add", &t)).unwrap();
        b.step(&mut d, || tap("b.y", "Mul", &t)).unwrap();
    }
    d.close().unwrap();
    let net = tmp.rank().join("Net");
    for (graph, steps, kernel) in [
        ("0", ["0", "2"], "Default_a_x_Add-op0"),
        ("1", ["1", "3"], "Default_b_y_Mul-op0"),
    ] {
        for s in steps {
            let files = npy_in(&net.join(graph).join(s));
            assert_eq!(files.len(), 1, "graph {graph} step {s}: {files:?}");
            assert!(files[0].to_string_lossy().contains(kernel), "{files:?}");
        }
    }
    assert!(!net.join("1/2").exists() && !net.join("0/1").exists());
}

/// `ln(x)`: NaN for a negative x.
struct Ln;
impl Module for Ln {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.log()
    }
}

/// `2x`.
struct Twice;
impl Module for Twice {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.affine(2.0, 0.0)
    }
}

#[test]
fn dumped_forward_stops_at_the_first_nan_with_a_candle_error() {
    let tmp = Tmp::new("stop");
    let mut d = support::stopping_dumper(&tmp.0, 1);
    let pre = Dumped::new(Twice, "pre");
    let ln = Dumped::new(Ln, "ln");
    let post = Dumped::new(Twice, "post");
    let dev = Device::Cpu;
    let mut tracer = Tracer::new(0);
    let mut run = |x: &[f32]| {
        let x = Tensor::from_slice(x, 3, &dev).unwrap();
        let mut forward = None;
        let r = tracer.step(&mut d, || {
            forward = Some(
                pre.forward(&x)
                    .and_then(|a| ln.forward(&a))
                    .and_then(|b| post.forward(&b)),
            );
        });
        (r, forward.unwrap())
    };
    let (r, f) = run(&[1.0, 2.0, 3.0]);
    assert!(r.is_ok() && f.is_ok());
    let (r, f) = run(&[1.0, -2.0, 3.0]);
    let e = f.unwrap_err().to_string();
    assert!(
        e.contains("Default/ln-Ln/Ln-op1") && e.contains("step 1"),
        "{e}"
    );
    let Err(dump_candle::Error::Dump(dump_host::Error::NonFinite(at))) = r else {
        panic!("Tracer::step returns the stop: {r:?}")
    };
    assert_eq!(
        (at.kernel.as_str(), at.step, at.nan),
        ("Default/ln-Ln/Ln-op1", 1, 1)
    );
    d.close().unwrap();
    // Steps 0 and 1 written; the stopped step has no file of `post`, which never ran.
    let files: Vec<String> = npy_in(&tmp.0.join("rank_0/Net/0/1"))
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(files.iter().any(|f| f.contains("Ln-op1")), "{files:?}");
    assert!(!files.iter().any(|f| f.contains("post")), "{files:?}");
    assert!(tmp.0.join("rank_0/Net/0/0").is_dir());
    assert!(tmp.0.join("rank_0/trigger.json").is_file());
}

/// A module whose forward always fails.
struct Broken;
impl Module for Broken {
    fn forward(&self, _: &Tensor) -> Result<Tensor> {
        Err(candle_core::Error::Msg("shape mismatch in Broken".into()))
    }
}

#[test]
fn a_failing_forward_is_an_exception_dump_of_its_input() {
    let tmp = Tmp::new("exception");
    let mut d = dumper(&tmp.0, r#", "saved_data": "tensor", "op_debug_mode": 4"#);
    let pre = Dumped::new(Twice, "pre");
    let bad = Dumped::new(Broken, "bad");
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], 3, &Device::Cpu).unwrap();
    let mut tracer = Tracer::new(0);
    let mut forward = None;
    tracer
        .step(&mut d, || {
            forward = Some(pre.forward(&x).and_then(|a| bad.forward(&a)));
        })
        .unwrap();
    assert!(forward.unwrap().unwrap_err().to_string().contains("Broken"));
    d.close().unwrap();
    let files: Vec<String> = npy_in(&tmp.0.join("rank_0/Net/0/0"))
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    // Only the failing kernel's input (pre's output, 2x), never an output.
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        files[0].starts_with("Broken.Default_bad-Broken_Broken-op1.")
            && files[0].contains(".input.0."),
        "{files:?}"
    );
    let (_, v) = values(&tmp.0.join("rank_0/Net/0/0").join(&files[0]));
    assert_eq!(v, [2.0, 4.0, 6.0]);
}
