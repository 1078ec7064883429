//! A candle model dumped in msprobe's layout at level mix, with the session API used from
//! inside the forward (where the Tracer borrows the Dumper): `Dumped` modules are module
//! calls, `tap`s API calls, a stopped region is skipped, a saved tensor joins the step.

#[path = "../../testsupport/onnx_fixtures.rs"]
mod support;

use std::collections::HashMap;

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{Activation, Conv2d, Linear, VarBuilder, VarMap, conv2d, linear};
use dump_candle::{Dumped, Tracer, convert::with_tensor_ref, tap};
use dump_host::{DumpOptions, Dumper, Session};
use serde_json::{Value, json};
use support::Tmp;

struct Cnn {
    conv: Dumped<Conv2d>,
    act: Dumped<Activation>,
    fc: Dumped<Linear>,
}

impl Cnn {
    fn forward(&self, x: &Tensor, session: &Session) -> Result<Tensor> {
        let c = self.conv.forward(x)?;
        session.stop(); // the activation is not of interest
        let a = self.act.forward(&c)?;
        session.start();
        let p = a.max_pool2d(2)?;
        tap("features.pool1", "MaxPool", &p);
        let y = self.fc.forward(&p.flatten_from(1)?)?;
        with_tensor_ref(&y, |t| session.save("logits", t))
            .unwrap()
            .unwrap();
        Ok(y)
    }
}

#[test]
fn dumped_modules_are_module_calls_taps_api_calls_and_the_session_works_inside_the_forward() {
    let tmp = Tmp::new("msprobe-session");
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let conv = conv2d(1, 4, 3, Default::default(), vb.pp("features.conv1")).unwrap();
    let fc = linear(4 * 3 * 3, 5, vb.pp("fc")).unwrap();
    // The conv's parameters go with its calls (msprobe's `parameters`); the Linear's do not.
    let conv_params = [
        ("weight", conv.weight().clone()),
        ("bias", conv.bias().unwrap().clone()),
    ];
    let model = Cnn {
        conv: Dumped::new(conv, "features.conv1").with_parameters(conv_params.clone()),
        act: Dumped::new(Activation::Relu, "features.act1"),
        fc: Dumped::new(fc, "fc"),
    };
    let config = format!(
        r#"{{"task": "tensor", "dump_path": "{}", "level": "mix",
            "tensor": {{"scope": [], "list": [], "data_mode": ["all"]}}}}"#,
        tmp.0.display()
    );
    let mut dumper = Dumper::builder()
        .env(&HashMap::<String, String>::new())
        .options(DumpOptions::default())
        .on_event(|_| {})
        .open_json(config)
        .unwrap();
    let session = dumper.session();
    let x = Tensor::ones((2, 1, 8, 8), DType::F32, &Device::Cpu).unwrap();
    let mut tracer = Tracer::new(0);
    for _ in 0..2 {
        tracer
            .step(&mut dumper, || model.forward(&x, &session))
            .unwrap()
            .unwrap();
        dumper.step().unwrap();
    }
    dumper.close().unwrap();
    for step in 0..2 {
        let dir = tmp.0.join(format!("step{step}/rank0"));
        let doc: Value =
            serde_json::from_slice(&std::fs::read(dir.join("dump.json")).unwrap()).unwrap();
        assert_eq!(doc["level"], "mix");
        let calls: Vec<&str> = doc["data"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            calls,
            [
                "Module.features.conv1.Conv2d.forward.0",
                "Functional.MaxPool.0.forward",
                "Module.fc.Linear.forward.0",
                "Functional.logits.0.forward",
            ],
            "step {step}"
        );
        // The saved logits are the Linear module's output, byte for byte.
        let fc = dump_npy::read_file(
            dir.join("dump_tensor_data/Module.fc.Linear.forward.0.output.0.npy"),
        )
        .unwrap();
        let saved = dump_npy::read_file(
            dir.join("dump_tensor_data/Functional.logits.0.forward.output.0.npy"),
        )
        .unwrap();
        assert_eq!(fc.data, saved.data);
        assert_eq!(saved.shape, [2, 5]);
        let construct: Value =
            serde_json::from_slice(&std::fs::read(dir.join("construct.json")).unwrap()).unwrap();
        assert_eq!(construct["Module.fc.Linear.forward.0"], json!(null));
        assert_eq!(construct.as_object().unwrap().len(), 4);
        // Module calls end with their parameters, as msprobe writes a torch module's.
        let conv = &doc["data"]["Module.features.conv1.Conv2d.forward.0"];
        let keys: Vec<&str> = conv
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["input_args", "input_kwargs", "output", "parameters"]);
        let params = conv["parameters"].as_object().unwrap();
        assert_eq!(params.keys().collect::<Vec<_>>(), ["weight", "bias"]);
        for (name, t) in &conv_params {
            let p = &params[*name];
            assert_eq!(p["shape"], json!(t.dims()), "{name}");
            let max = t
                .flatten_all()
                .unwrap()
                .max(0)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert_eq!(p["Max"].as_f64().unwrap(), f64::from(max), "{name}");
            let file = format!("Module.features.conv1.Conv2d.forward.0.parameters.{name}.npy");
            assert_eq!(p["data_name"], file.as_str());
            let npy = dump_npy::read_file(dir.join("dump_tensor_data").join(&file)).unwrap();
            assert_eq!(npy.shape, t.dims(), "{name}");
        }
        assert_eq!(
            doc["data"]["Module.fc.Linear.forward.0"]["parameters"],
            json!({})
        );
    }
}
