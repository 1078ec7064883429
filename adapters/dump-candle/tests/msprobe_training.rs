//! A candle training step dumped with msprobe configs (statistics and tensor tasks, level
//! mix): the `DumpedOptimizer`'s gradients become msprobe's
//! `Module.{path}.{Class}.parameters_grad.0` entries, `{param: [tensor]}`, whose statistics and
//! `.npy` files equal candle's gradients, and dump-read's msprobe dialect reads them back.

#[path = "../../testsupport/onnx_fixtures.rs"]
mod support;

use std::collections::HashMap;

use candle_core::{DType, Device, Module, Tensor, backprop::GradStore};
use candle_nn::{Linear, Optimizer, SGD, VarBuilder, VarMap, linear};
use dump_candle::{Dumped, DumpedOptimizer, Tracer};
use dump_host::{DumpOptions, Dumper};
use serde_json::Value;
use support::Tmp;

/// Two Dumped linears and a bare top-level parameter `scale` (no module: class unknown).
struct Net {
    fc1: Dumped<Linear>,
    fc2: Dumped<Linear>,
    scale: Tensor,
}

impl Net {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let h = self.fc1.forward(x)?.relu()?;
        self.fc2.forward(&h)?.broadcast_mul(&self.scale)
    }
}

/// max, min, mean, L2 norm of `v` in f64.
fn stats(v: &[f32]) -> [f64; 4] {
    let d: Vec<f64> = v.iter().map(|&x| f64::from(x)).collect();
    let max = d.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = d.iter().copied().fold(f64::INFINITY, f64::min);
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let norm = d.iter().map(|x| x * x).sum::<f64>().sqrt();
    [max, min, mean, norm]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * (1.0 + b.abs())
}

#[test]
fn gradients_are_parameters_grad_entries_equal_to_candles() {
    for task in ["statistics", "tensor"] {
        let tmp = Tmp::new(&format!("msprobe-train-{task}"));
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let net = Net {
            fc1: Dumped::new(linear(3, 4, vb.pp("fc1")).unwrap(), "fc1"),
            fc2: Dumped::new(linear(4, 2, vb.pp("fc2")).unwrap(), "fc2"),
            scale: vb
                .get_with_hints(1, "scale", candle_nn::Init::Const(1.5))
                .unwrap(),
        };
        let config = format!(
            r#"{{"task": "{task}", "dump_path": "{}", "level": "mix",
                "{task}": {{"scope": [], "list": [], "data_mode": ["all"]}}}}"#,
            tmp.0.display()
        );
        let mut dumper = Dumper::builder()
            .env(&HashMap::<String, String>::new())
            .options(DumpOptions::default())
            .on_event(|_| {})
            .open_json(config.into_bytes())
            .unwrap();
        let mut opt = DumpedOptimizer::new(SGD::new(varmap.all_vars(), 0.1).unwrap(), &varmap);
        let x = Tensor::new(&[[1f32, -2.0, 0.5], [0.25, 3.0, -1.0]], &Device::Cpu).unwrap();
        let y = Tensor::new(&[[0.5f32, -1.0], [2.0, 0.0]], &Device::Cpu).unwrap();
        // Candle's gradients, by VarBuilder path, taken before the optimizer's step.
        let mut want: HashMap<String, Vec<f32>> = HashMap::new();
        let mut tracer = Tracer::new(0);
        tracer
            .step(&mut dumper, || -> candle_core::Result<()> {
                let loss = (net.forward(&x)? - &y)?.sqr()?.mean_all()?;
                let grads: GradStore = loss.backward()?;
                for (path, var) in varmap.data().lock().unwrap().iter() {
                    let g = grads
                        .get(var.as_tensor())
                        .expect("every parameter has a gradient");
                    want.insert(path.clone(), g.flatten_all()?.to_vec1::<f32>()?);
                }
                opt.step(&grads)
            })
            .unwrap()
            .unwrap();
        dumper.close().unwrap();
        assert_eq!(want.len(), 5, "fc1 and fc2 weight and bias, scale");

        let dir = tmp.0.join("step0/rank0");
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("dump.json")).unwrap()).unwrap();
        let data = doc["data"].as_object().unwrap();
        let entries = [
            (
                "Module.fc1.Linear.parameters_grad.0",
                "fc1",
                &["weight", "bias"][..],
            ),
            (
                "Module.fc2.Linear.parameters_grad.0",
                "fc2",
                &["weight", "bias"][..],
            ),
            ("Module.Module.parameters_grad.0", "", &["scale"][..]),
        ];
        for (entry, module, params) in entries {
            let e = data
                .get(entry)
                .unwrap_or_else(|| panic!("{task}: no {entry} in {:?}", data.keys()));
            let mut keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
            keys.sort_unstable();
            let mut sorted = params.to_vec();
            sorted.sort_unstable();
            assert_eq!(keys, sorted, "{task}: {entry}");
            for p in params {
                let path = if module.is_empty() {
                    p.to_string()
                } else {
                    format!("{module}.{p}")
                };
                let g = &want[&path];
                let t = &e[*p].as_array().unwrap()[0];
                let [max, min, mean, norm] = stats(g);
                for (k, v) in [("Max", max), ("Min", min), ("Mean", mean), ("Norm", norm)] {
                    let got = t[k]
                        .as_f64()
                        .unwrap_or_else(|| panic!("{entry}.{p}: {k} {t}"));
                    assert!(
                        close(got, v),
                        "{task}: {entry}.{p} {k}: {got} vs candle {v}"
                    );
                }
                if task == "tensor" {
                    let name = format!("{entry}.{p}.npy");
                    assert_eq!(t["data_name"], name.as_str());
                    let f = dump_npy::read_file(dir.join("dump_tensor_data").join(&name)).unwrap();
                    let bytes: Vec<u8> = g.iter().flat_map(|v| v.to_le_bytes()).collect();
                    assert!(f.data == bytes, "{name}: the file holds candle's gradient");
                } else {
                    assert!(t.get("data_name").is_none());
                }
            }
        }

        // dump-read's msprobe dialect: each parameter is an output slot of its entry, in the
        // entry's order, with the statistics dump.json holds (and the file, tensor task).
        let dump = dump_read::Dump::open(&tmp.0).unwrap();
        assert!(dump.problems.is_empty(), "{:?}", dump.problems);
        for (entry, module, _) in entries {
            let order: Vec<&str> = data[entry]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let recs: Vec<_> = dump
                .tensors
                .iter()
                .filter(|t| t.id.op_name == entry)
                .collect();
            assert_eq!(recs.len(), order.len(), "{task}: {entry}");
            for (slot, p) in order.iter().enumerate() {
                let r = recs.iter().find(|r| r.id.slot as usize == slot).unwrap();
                assert_eq!(r.id.io.as_str(), "output");
                let path = if module.is_empty() {
                    p.to_string()
                } else {
                    format!("{module}.{p}")
                };
                let [max, min, ..] = stats(&want[&path]);
                let s = r.row_stats.as_ref().unwrap();
                assert!(
                    close(s.max.unwrap(), max) && close(s.min.unwrap(), min),
                    "{entry}.{p}"
                );
                assert_eq!(r.file().is_some(), task == "tensor", "{entry}.{p}");
            }
        }
        // The forward calls are there too, and the optimizer's kernels (API calls at mix).
        assert!(data.contains_key("Module.fc1.Linear.forward.0"));
        assert_eq!(opt.learning_rate(), 0.1);
    }
}
