//! `opdump run --input x=FILE.npy` with inputs of every dtype numpy and ml_dtypes hold
//! (tests/fixtures/onnx/dtypes, made by gen_dtypes.py: `y = Cast(x, to=FLOAT)` per type, the
//! `.npy` written by numpy / ml_dtypes, the expected `y` from onnx.reference). A runtime that
//! takes the type dumps the value onnx.reference computes; one that does not is a clean error
//! naming the input and the type. ORT tests need `ORT_DYLIB_PATH` (skip without, fail in CI).

// Every test here runs a runtime: without one (`--no-default-features`) there is nothing to run.
#![cfg(any(feature = "tract", feature = "ort", feature = "candle"))]

#[path = "../../adapters/testsupport/onnx_fixtures.rs"]
mod support;

use std::{
    path::{Path, PathBuf},
    process::Output,
};

use support::{Tmp, assert_close, fixtures, npy_in};

fn dtypes() -> PathBuf {
    fixtures().join("dtypes")
}

/// `opdump run cast_T.onnx --runtime RT --input x=X --out OUT`.
fn run(ty: &str, rt: &str, x: &Path, out: &Path) -> Output {
    run_model(&format!("cast_{ty}"), rt, x, out)
}

/// `opdump run MODEL.onnx --runtime RT --input x=X --out OUT`.
fn run_model(model: &str, rt: &str, x: &Path, out: &Path) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_opdump"))
        .arg("run")
        .arg(dtypes().join(format!("{model}.onnx")))
        .args(["--runtime", rt, "--input"])
        .arg(format!("x={}", x.display()))
        .arg("--out")
        .arg(out)
        .env_remove("MINDSPORE_DUMP_CONFIG")
        .output()
        .expect("run opdump")
}

/// Runs type `ty` through `rt` and checks the Cast's output against onnx.reference.
fn runs(ty: &str, rt: &str, tmp: &Tmp) {
    let out = tmp.0.join(format!("{ty}-{rt}"));
    let o = run(ty, rt, &dtypes().join(format!("{ty}.npy")), &out);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{ty} {rt}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dir = out.join(format!("rank_0/cast_{ty}/0/0"));
    let y = npy_in(&dir)
        .into_iter()
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("Cast.") && n.contains(".output.0.")
        })
        .unwrap_or_else(|| panic!("{ty} {rt}: no Cast output in {}", dir.display()));
    assert_close(
        &format!("{ty} {rt}"),
        &y,
        &dtypes().join(format!("{ty}.expected.npy")),
        0.0,
    );
}

/// Runs type `ty` through `rt` and expects exit `code` with every `needle` in one line.
fn refused(ty: &str, rt: &str, code: i32, needles: &[&str], tmp: &Tmp) {
    let o = run(
        ty,
        rt,
        &dtypes().join(format!("{ty}.npy")),
        &tmp.0.join(format!("{ty}-{rt}-no")),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{ty} {rt}: {err}");
    let line = err.lines().find(|l| l.starts_with("error: ")).unwrap_or("");
    for n in needles {
        assert!(line.contains(n), "{ty} {rt}: {n:?} not in {err}");
    }
    assert!(!err.contains("thread '"), "{err}");
}

#[cfg(feature = "tract")]
#[test]
fn tract_takes_bool_int16_uint16_and_names_the_types_it_lacks() {
    let tmp = Tmp::new("dtypes-tract");
    for ty in ["bool", "int16", "uint16"] {
        runs(ty, "tract", &tmp);
    }
    for (ty, onnx) in [
        ("bfloat16", "BFLOAT16"),
        ("int4", "INT4"),
        ("uint4", "UINT4"),
        ("float8_e4m3fn", "FLOAT8E4M3FN"),
        ("float8_e5m2", "FLOAT8E5M2"),
        ("float8_e4m3fnuz", "FLOAT8E4M3FNUZ"),
        ("float8_e5m2fnuz", "FLOAT8E5M2FNUZ"),
    ] {
        refused(
            ty,
            "tract",
            1,
            &[
                &format!("input \"x\" is {onnx}, a type tract has no tensors of"),
                "--runtime ort",
            ],
            &tmp,
        );
    }
}

/// ONNX Runtime takes numpy's bool/int16/uint16 and ml_dtypes' bfloat16 (`<V2`), int4 and
/// uint4 (`<V1`, one per byte, repacked two per byte), float8_e4m3fn, float8_e4m3fnuz and
/// float8_e5m2fnuz (`<V1`) and float8_e5m2 (`<f1`) as the model declares them; the dumped input holds the widened values (int8/uint8,
/// float32), and so do outputs of these types (`cast_to_T.onnx`). A file whose descr cannot
/// hold the declared type, or whose bytes are no int4 / uint4, is refused (exit 2) saying why.
#[cfg(feature = "ort")]
#[test]
fn ort_takes_every_numpy_and_ml_dtypes_input_opdump_has_a_dtype_for() {
    if !support::onnx_runtime_available() {
        return;
    }
    let tmp = Tmp::new("dtypes-ort");
    for ty in [
        "bool",
        "int16",
        "uint16",
        "bfloat16",
        "int4",
        "uint4",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
    ] {
        runs(ty, "ort", &tmp);
    }
    // Inputs are dumped as MindSpore's converters store them: int4 widened to int8, uint4 to
    // uint8, float8 to float32 (exact): the values as given.
    let input = |ty: &str| {
        let dir = tmp.0.join(format!("{ty}-ort/rank_0/cast_{ty}/0/0"));
        let x = npy_in(&dir)
            .into_iter()
            .find(|p| p.to_string_lossy().contains(".input.0."))
            .unwrap_or_else(|| panic!("{ty}: no input file in {}", dir.display()));
        dump_npy::read_file(&x).unwrap()
    };
    let f = input("int4");
    assert_eq!(f.dtype, dump_core::DType::Int8);
    assert_eq!(f.data, [0u8, 1, 0xfe, 3, 0, 7]);
    let f = input("uint4");
    assert_eq!(f.dtype, dump_core::DType::UInt8);
    assert_eq!(f.data, [0u8, 1, 2, 3, 0, 7]);
    for ty in [
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
    ] {
        let f = input(ty);
        assert_eq!(f.dtype, dump_core::DType::Float32, "{ty}");
        let got: Vec<f32> = f
            .data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [0.0, 1.5, -2.0, 3.0, -0.25, 7.0], "{ty}");
    }
    // Outputs of these types (Cast from float32, saturating and rounding to nearest even)
    // are dumped widened: float32 / uint8 files with onnx.reference's values, rows named by
    // the output's own dtype with its storage as Data Size.
    for (ty, wide, size) in [
        ("float8_e4m3fn", dump_core::DType::Float32, 6),
        ("float8_e5m2", dump_core::DType::Float32, 6),
        ("uint4", dump_core::DType::UInt8, 3),
        ("float8_e4m3fnuz", dump_core::DType::Float32, 6),
        ("float8_e5m2fnuz", dump_core::DType::Float32, 6),
    ] {
        let out = tmp.0.join(format!("to-{ty}"));
        let o = run_model(
            &format!("cast_to_{ty}"),
            "ort",
            &dtypes().join(format!("to_{ty}.npy")),
            &out,
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{ty}: {err}");
        let dir = out.join(format!("rank_0/cast_to_{ty}/0/0"));
        let y = npy_in(&dir)
            .into_iter()
            .find(|p| p.to_string_lossy().contains(".output.0."))
            .unwrap_or_else(|| panic!("{ty}: no Cast output in {}", dir.display()));
        assert_eq!(dump_npy::read_file(&y).unwrap().dtype, wide, "{ty}");
        assert_close(
            &format!("to {ty}"),
            &y,
            &dtypes().join(format!("to_{ty}.expected.npy")),
            0.0,
        );
        let csv = std::fs::read_to_string(dir.join("statistic.csv")).unwrap();
        assert!(
            csv.lines()
                .any(|l| l.contains(&format!(",output,0,{size},{ty},\"(2,3)\","))),
            "{ty}: {csv}"
        );
    }
    // Without --input: seeded random values of the declared type, which the Cast returns as
    // float32 exactly (the dumped input and output files hold the same values).
    for ty in [
        "int4",
        "uint4",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
    ] {
        let out = tmp.0.join(format!("random-{ty}"));
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_opdump"))
            .arg("run")
            .arg(dtypes().join(format!("cast_{ty}.onnx")))
            .args(["--runtime", "ort", "--seed", "11", "--out"])
            .arg(&out)
            .env_remove("MINDSPORE_DUMP_CONFIG")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{ty}: {err}");
        let files = npy_in(&out.join(format!("rank_0/cast_{ty}/0/0")));
        let find = |io: &str| {
            files
                .iter()
                .find(|p| {
                    let n = p.to_string_lossy();
                    n.contains("/Cast.") && n.contains(io)
                })
                .unwrap_or_else(|| panic!("{ty}: no Cast {io} in {files:?}"))
        };
        assert_close(
            &format!("random {ty}"),
            find(".output.0."),
            find(".input.0."),
            0.0,
        );
    }
    // The descr decides what a file can hold: `<f1` is float8_e5m2 only, `<V1` never is.
    refused_file(
        "float8_e4m3fn",
        "float8_e5m2",
        "e5m2-as-e4m3",
        &["\"<f1\" is ml_dtypes' float8_e5m2; the model declares float8_e4m3fn [2, 3]"],
        &tmp,
    );
    refused_file(
        "float8_e5m2",
        "float8_e4m3fn",
        "e4m3-as-e5m2",
        &[
            "\"<V1\" is ml_dtypes' int4, uint4, float8_e4m3fn, float8_e4m3fnuz",
            "'<f1' as float8_e5m2",
        ],
        &tmp,
    );
    // `<f1` is never an FNUZ type.
    refused_file(
        "float8_e5m2fnuz",
        "float8_e5m2",
        "e5m2-as-e5m2fnuz",
        &["\"<f1\" is ml_dtypes' float8_e5m2; the model declares float8_e5m2fnuz"],
        &tmp,
    );
    // A `<V1` file whose bytes are no int4 / uint4 (a float8 file fed to an int4 or a uint4
    // input).
    for (ty, what) in [
        ("int4", "not an int4 as ml_dtypes stores one"),
        ("uint4", "not a uint4 (0..=15)"),
    ] {
        refused_file(
            ty,
            "float8_e4m3fn",
            &format!("bad-{ty}"),
            &[&format!("element 1 is byte 0x3c, {what}")],
            &tmp,
        );
    }
}

/// Runs model `cast_{ty}` through ONNX Runtime with the fixture `{file}.npy` (another type's
/// file) into `out` and expects exit 2 with every `needle` in its stderr.
#[cfg(feature = "ort")]
fn refused_file(ty: &str, file: &str, out: &str, needles: &[&str], tmp: &Tmp) {
    let o = run(
        ty,
        "ort",
        &dtypes().join(format!("{file}.npy")),
        &tmp.0.join(out),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{ty} from {file}: {err}");
    for n in needles {
        assert!(err.contains(n), "{ty} from {file}: {n:?} not in {err}");
    }
}

/// candle has no bool, uint16, int4, uint4, float8_e5m2 or FNUZ float8 tensors, and candle-onnx takes no
/// int16, bfloat16 or float8_e4m3fn (candle's F8E4M3) inputs: each is one clean error line.
#[cfg(feature = "candle")]
#[test]
fn candle_refuses_the_types_it_lacks_cleanly() {
    let tmp = Tmp::new("dtypes-candle");
    for ty in [
        "bool",
        "uint16",
        "int4",
        "uint4",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
    ] {
        refused(
            ty,
            "candle",
            2,
            &["input \"x\"", "tensors are not supported by candle"],
            &tmp,
        );
    }
    for ty in ["int16", "bfloat16", "float8_e4m3fn"] {
        refused(ty, "candle", 1, &["candle-onnx failed", "data-type"], &tmp);
    }
}
