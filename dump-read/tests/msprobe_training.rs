//! A real msprobe 26.2.0 training dump (`tools/msprobe_train.py`: an MLP trained by SGD with a
//! learning rate that diverges, level L0, forward and backward): every step's
//! `Module.{path}.{Class}.parameters_grad.0` entries are read as gradients, and `inspect`'s
//! training view gives each parameter (`fc1.weight`, ...) its gradient norm per step equal to
//! the norm torch computed from `p.grad` in the same run, and calls the run exploding from the
//! step the norms first grow 100-fold.

use std::path::{Path, PathBuf};

use dump_read::{
    Dump,
    train::{EXPLODING_GROWTH, Role, Verdict},
};
use serde_json::Value;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/msprobe/train_L0")
}

/// torch's norm: a number, or "nan"/"inf" (JSON has neither).
fn norm(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap(),
        Value::String(s) => s.parse().unwrap_or_else(|_| panic!("{s}")),
        _ => panic!("{v}"),
    }
}

#[test]
fn msprobe_parameter_gradients_make_the_training_view() {
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("expected.json")).unwrap())
            .unwrap();
    let steps = expected["steps"].as_u64().unwrap();
    let want = expected["grad_norm"].as_object().unwrap();
    let want64 = expected["grad_norm_f64"].as_object().unwrap();
    assert_eq!(want.len(), 4, "fc1/fc2 weight and bias");

    let dump = Dump::open(&fixture().join("dump")).unwrap();
    assert_eq!(dump.dialect, "msprobe");
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    let kernels = dump.kernels();
    let grads: Vec<_> = kernels
        .iter()
        .filter(|k| k.op_name.contains(".parameters_grad."))
        .collect();
    assert_eq!(grads.len() as u64, 2 * steps, "fc1 and fc2 per step");
    for k in &grads {
        assert_eq!(Role::of_kernel(k), Role::Gradient, "{}", k.op_name);
        assert_eq!(k.op_type, "Linear", "{}", k.op_name);
        let mut names: Vec<&str> = k
            .tensors
            .iter()
            .map(|&i| dump.tensors[i].arg_name.as_deref().unwrap())
            .collect();
        names.sort_unstable();
        assert_eq!(names, ["bias", "weight"], "{}", k.op_name);
    }

    let ins = dump_read::inspect::inspect(&dump, 1, &|_, _| {});
    let got: Vec<&str> = ins.parameters.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(got, ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]);
    for p in &ins.parameters {
        let torch: Vec<f64> = want[&p.name].as_array().unwrap().iter().map(norm).collect();
        assert_eq!(p.steps, (0..steps).collect::<Vec<_>>(), "{}", p.name);
        for (s, (g, t)) in p.grad_norm.iter().zip(&torch).enumerate() {
            let g = g.unwrap_or_else(|| panic!("{} step {s}: no norm", p.name));
            if t.is_finite() {
                // torch's float32 norm, as msprobe computes `Norm`, written as a double.
                assert!(
                    (g - t).abs() <= 1e-6 * t.abs(),
                    "{} step {s}: msprobe {g} vs torch {t}",
                    p.name
                );
            } else {
                assert!(!g.is_finite(), "{} step {s}: {g} vs torch {t}", p.name);
            }
        }
        // The verdict and the step it starts at follow from torch's own norms (float64, so
        // the growth is the run's, not float32's overflow).
        let torch64: Vec<f64> = want64[&p.name]
            .as_array()
            .unwrap()
            .iter()
            .map(norm)
            .collect();
        let from = torch64
            .iter()
            .position(|&t| !t.is_finite() || t >= EXPLODING_GROWTH * torch64[0])
            .map(|s| s as u64);
        assert_eq!(p.verdict, Verdict::Exploding, "{}", p.name);
        assert_eq!(p.exploding_from, from, "{}", p.name);
        assert!(from.is_some_and(|s| s < steps - 1), "{}: {from:?}", p.name);
        let nonfinite = torch.iter().position(|t| !t.is_finite()).map(|s| s as u64);
        assert_eq!(p.first_nonfinite_step, nonfinite, "{}", p.name);
        assert!(
            p.update_ratio.iter().all(Option::is_none),
            "msprobe dumps no update"
        );
    }
}
