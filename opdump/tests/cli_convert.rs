//! `opdump convert` as a subprocess on the generated CANN fixtures
//! (`dump-device-ascend/tests/gen_cann.py`): every array against numpy's reading of the same
//! bytes, device formats against dump-device-ascend's whole-tensor conversion, msaccucmp's
//! names (long ones included), overflow JSON, hostile files failing alone, and the mindspore
//! layout read back by `opdump inspect` and `opdump compare`.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use dump_core::DType;
use dump_device_ascend::{
    DeviceTensor, Format,
    dumpfile::{CannDType, CannFormat, Container, DumpHeader, TensorKind, TensorMeta, encode},
    to_host,
};
use dump_npy::NpyReader;
use serde_json::Value;

const CONV: &str = "Conv2D.Default_network_conv1-Conv2d_Conv2D-op12.12.3.1700000000000044";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dump-device-ascend/tests/fixtures/cann")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-convert-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn opdump(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .output()
        .expect("run opdump")
}

fn npy(p: &Path) -> (String, Vec<usize>, Vec<u8>) {
    let mut r = NpyReader::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut b = vec![0u8; r.data_len as usize];
    r.read_chunk(&mut b).unwrap();
    (r.descr.clone(), r.shape.clone(), b)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn parse_mode_writes_what_numpy_reads_for_every_tensor_and_overflow_json() {
    let out = tmpdir("parse");
    let o = opdump(&[
        "convert",
        fixtures().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("HIFLOAT8") && err.contains("FLOAT8_E8M0"),
        "unsupported types are named: {err}"
    );
    assert!(
        !err.contains("data type FLOAT8_E4M3FN") && !err.contains("data type FLOAT8_E5M2"),
        "float8 tensors are converted, not refused: {err}"
    );
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("manifest.json")).unwrap()).unwrap();
    let (mut checked, mut fp8) = (0, 0);
    for f in manifest["files"].as_array().unwrap() {
        let file = f["file"].as_str().unwrap();
        for t in f["tensors"].as_array().unwrap() {
            let e = &t["expect"];
            match e["check"].as_str().unwrap() {
                "raw" | "bf16" | "int4" | "uint1" | "fp8" => {
                    // fp8: ml_dtypes' float32 of the payload (NaN bits included), `<f4`.
                    let name = e["npy"].as_str().unwrap();
                    let (wd, ws, wb) = npy(&fixtures().join("npy").join(name));
                    let (gd, gs, gb) = npy(&out.join(name));
                    assert_eq!((gd, gs), (wd, ws), "{name}");
                    assert!(gb == wb, "{name}: data differs");
                    checked += 1;
                    fp8 += usize::from(e["check"] == "fp8");
                }
                "bytes" => {
                    let word = if t["kind"] == "buffer" {
                        "l1buffer"
                    } else {
                        "space"
                    };
                    let p = out.join(format!("{file}.{word}.{}.bin", t["index"]));
                    let got = std::fs::read(&p).unwrap();
                    let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
                    assert_eq!(hex, e["hex"].as_str().unwrap(), "{}", p.display());
                }
                "opdebug" => {
                    let want: Value = serde_json::from_slice(
                        &std::fs::read(fixtures().join(e["json"].as_str().unwrap())).unwrap(),
                    )
                    .unwrap();
                    let p = out.join(format!("{file}.output.0.json"));
                    let text = std::fs::read_to_string(&p).unwrap();
                    assert!(text.starts_with("{\n    \""), "4-space indent: {text}");
                    let got: Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(got, want, "{}", p.display());
                    checked += 1;
                }
                _ => {}
            }
        }
    }
    assert!(checked >= 65, "{checked}");
    assert_eq!(
        fp8, 6,
        "both float8 casts (input and output) and MatMul's two outputs"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Conv2D's NC1HWC0 input.0 and FRACTAL_Z input.1 in NCHW, as dump-device-ascend's one-shot
/// `to_host` converts them.
fn conv_host(slot: &str, format: Format, host: &[usize]) -> Vec<u8> {
    let (_, dev, raw) = npy(&fixtures().join(format!("npy/{CONV}.{slot}.npy")));
    let t = DeviceTensor {
        format,
        dtype: DType::Float16,
        device_shape: &dev,
        host_shape: host,
        data: &raw,
    };
    let mut o = vec![0u8; t.host_bytes().unwrap()];
    to_host(&t, &mut o).unwrap().data.to_vec()
}

#[test]
fn formats_are_converted_to_nchw_and_nhwc_with_msaccucmp_names() {
    let out = tmpdir("formats");
    let conv = fixtures().join(CONV);
    let o = opdump(&[
        "convert",
        conv.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--format",
        "NCHW",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let x = conv_host("input.0", Format::Nc1hwc0, &[1, 3, 2, 2]);
    let (_, s, b) = npy(&out.join(format!("{CONV}.input.0.1x3x2x2.npy")));
    assert_eq!((s, b), (vec![1, 3, 2, 2], x.clone()));
    let w = conv_host("input.1", Format::FractalZ, &[8, 3, 2, 2]);
    let (_, s, b) = npy(&out.join(format!("{CONV}.input.1.8x3x2x2.npy")));
    assert_eq!((s, b), (vec![8, 3, 2, 2], w));
    // A format without a converter, and a convertible one (C1HWNCoC0) without the
    // original_shape it needs: written as stored, and said so.
    assert!(out.join(format!("{CONV}.output.4.4.npy")).exists());
    assert!(
        stderr(&o).contains("output.4: format OutputFormat(50) has no converter"),
        "{}",
        stderr(&o)
    );
    assert!(
        out.join(format!("{CONV}.output.6.1x1x1x1x16x16.npy"))
            .exists()
    );
    assert!(
        stderr(&o).contains("output.6: format C1HWNCoC0 without an original_shape"),
        "{}",
        stderr(&o)
    );

    let nhwc = tmpdir("nhwc");
    let o = opdump(&[
        "convert",
        conv.to_str().unwrap(),
        "--out",
        nhwc.to_str().unwrap(),
        "--format",
        "NHWC",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (_, s, b) = npy(&nhwc.join(format!("{CONV}.input.0.1x2x2x3.npy")));
    assert_eq!(s, [1, 2, 2, 3]);
    // NHWC element (h, w, c) is NCHW element (c, h, w).
    for h in 0..2 {
        for w in 0..2 {
            for c in 0..3 {
                let (i, j) = ((h * 2 + w) * 3 + c, (c * 2 + h) * 2 + w);
                assert_eq!(b[2 * i..2 * i + 2], x[2 * j..2 * j + 2], "h{h} w{w} c{c}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&nhwc);
}

#[test]
fn long_names_become_uuid3_with_mapping_csv() {
    let src = tmpdir("long-src");
    let out = tmpdir("long-out");
    let long = format!("Relu.{}.9.0.1700000000000048", "R".repeat(225));
    std::fs::copy(
        fixtures().join("Relu.Relu-op9.9.0.1700000000000048"),
        src.join(&long),
    )
    .unwrap();
    let o = opdump(&[
        "convert",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let full = format!("{long}.output.0.npy");
    // python3 -c "import uuid; print(uuid.uuid3(uuid.NAMESPACE_DNS, NAME).hex)"
    let short = format!("{}.npy", opdump_uuid3(&full));
    assert!(out.join(&short).exists());
    let mapping = std::fs::read_to_string(out.join("mapping.csv")).unwrap();
    assert_eq!(mapping, format!("{short},{full}\n"));
    let _ = std::fs::remove_dir_all(&src);
    let _ = std::fs::remove_dir_all(&out);
}

fn opdump_uuid3(name: &str) -> String {
    opdump::cli::convert::uuid3_hex(name)
}

#[test]
fn a_hostile_file_fails_alone_naming_the_byte_offset() {
    let src = tmpdir("hostile-src");
    let out = tmpdir("hostile-out");
    std::fs::copy(
        fixtures().join("Relu.Relu-op9.9.0.1700000000000048"),
        src.join("Relu.Relu-op9.9.0.1700000000000048"),
    )
    .unwrap();
    let names = [
        "truncated_data",
        "huge_length",
        "huge_count",
        "varint_overflow",
        "nano",
        "too_short",
        "opdebug_short_block",
    ];
    for (i, h) in names.iter().enumerate() {
        let op = if h.starts_with("opdebug") {
            "Opdebug.Node_OpDebug"
        } else {
            "Add.bad"
        };
        std::fs::copy(
            fixtures().join("hostile").join(h),
            src.join(format!("{op}.{i}.0.17000000000000{i:02}")),
        )
        .unwrap();
    }
    let o = opdump(&[
        "convert",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--format",
        "ND",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    // One error per bad file, then the summary that picks the exit code.
    assert_eq!(err.matches("error: ").count(), names.len() + 1, "{err}");
    assert!(
        err.contains(&format!(
            "error: {} inputs could not be converted",
            names.len()
        )),
        "{err}"
    );
    assert!(err.contains("Add.bad.0.0.1700000000000000: tensor 1 (output 1) declares 8 bytes from byte 47 but the file ends at byte 52"), "{err}");
    assert!(err.contains("must be exactly 2048 bytes"), "{err}");
    assert!(
        out.join("Relu.Relu-op9.9.0.1700000000000048.output.0.2x3.npy")
            .exists()
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("{} failed", names.len())));
    let _ = std::fs::remove_dir_all(&src);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn mindspore_layout_is_read_by_inspect_and_compare_and_stats_writes_rows_only() {
    let top = tmpdir("ms");
    let cann = top.join("cann/20260101120000/0/Net/0/0");
    std::fs::create_dir_all(&cann).unwrap();
    for f in [
        CONV,
        "Relu.Relu-op9.9.0.1700000000000048",
        "MatMul.Default_MatMul-op7.7.1.1700000000000046",
    ] {
        std::fs::copy(fixtures().join(f), cann.join(f)).unwrap();
    }
    let ms = top.join("ms");
    let o = opdump(&[
        "convert",
        top.join("cann").to_str().unwrap(),
        "--out",
        ms.to_str().unwrap(),
        "--format",
        "NCHW",
        "--layout",
        "mindspore",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let it = ms.join("rank_0/Net/0/0");
    assert!(
        it.join(format!("{CONV}.input.0.DefaultFormat.Float16.npy"))
            .exists()
    );
    assert!(
        it.join(format!("{CONV}.output.6.C1HWNCoC0.Float32.npy"))
            .exists()
    );
    let csv = std::fs::read_to_string(it.join("statistic.csv")).unwrap();
    assert!(
        csv.starts_with(
            "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,"
        ),
        "{csv}"
    );
    assert!(csv.contains("Conv2D,Default_network_conv1-Conv2d_Conv2D-op12,12,3,1700000000000044,input,0,24,float16,\"(1,3,2,2)\""), "{csv}");
    // MatMul's FLOAT8_E4M3FN output: a float32 file (ml_dtypes' values) and a float8 row
    // whose Data Size is the float8 storage.
    let mm = "MatMul.Default_MatMul-op7.7.1.1700000000000046";
    let (descr, shape, data) =
        npy(&it.join(format!("{mm}.output.1.DefaultFormat.Float8E4M3FN.npy")));
    let (_, _, want) = npy(&fixtures().join(format!("npy/{mm}.output.1.npy")));
    assert_eq!((descr.as_str(), shape, data), ("<f4", vec![5], want));
    assert!(
        csv.contains(
            "MatMul,Default_MatMul-op7,7,1,1700000000000046,output,1,5,float8_e4m3fn,\"(5)\""
        ),
        "{csv}"
    );
    let o = opdump(&["inspect", ms.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["layout"], "mindspore");
    assert_eq!(
        v["first_nonfinite"]["op_name"], "Default_network_conv1-Conv2d_Conv2D-op12",
        "{v:#}"
    );
    assert_eq!(v["problems"].as_array().unwrap().len(), 0, "{v:#}");
    // The CANN tree itself against its conversion: every pair equal.
    let o = opdump(&[
        "compare",
        top.join("cann").to_str().unwrap(),
        ms.to_str().unwrap(),
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["matched"].as_u64().unwrap() >= 10, "{v:#}");
    assert_eq!(v["diverged"], 0, "{v:#}");
    assert_eq!(o.status.code(), Some(0));

    let rows = top.join("rows");
    let o = opdump(&[
        "convert",
        top.join("cann").to_str().unwrap(),
        "--out",
        rows.to_str().unwrap(),
        "--stats",
        "--format",
        "NCHW",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let files: Vec<_> = std::fs::read_dir(&rows)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(files, ["statistic.csv"]);
    let only = std::fs::read_to_string(rows.join("statistic.csv")).unwrap();
    assert_eq!(only, csv, "the same rows as the mindspore layout's");
    let _ = std::fs::remove_dir_all(&top);
}

/// One f16 input tensor of a generated CANN file: its device format, device and host shapes.
fn big_meta(index: usize, format: i32, dev: &[u64], host: &[u64]) -> TensorMeta {
    TensorMeta {
        kind: TensorKind::Input,
        index,
        ordinal: index,
        data_type: CannDType::FLOAT16,
        format: CannFormat(format),
        sub_format: 0,
        shape: dev.to_vec(),
        original_shape: Some(host.to_vec()),
        size: dev.iter().product::<u64>() * 2,
        offset: 0,
        address: 0,
        address_offset: 0,
        arg_index: Some(index as u32),
        input_type: 0,
        buffer_type: 0,
        original_op: None,
        dim_range: Vec::new(),
    }
}

/// Tensors large enough for the fast paths: an NC1HWC0 activation of 16 MiB in NCHW
/// (converted by two threads, each a range of its blocks, when one file meets two threads)
/// and a FRACTAL_Z weight of 8 MiB (read in bands of output channels, two bands of unequal
/// size), C not a multiple of C0 and N not a multiple of 16. Every array is what
/// dump-device-ascend's whole-tensor `to_host` gives, with 1 and 2 threads, and without
/// `--format` the payloads are copied byte for byte (file to file).
#[test]
fn large_tensors_in_bands_and_in_parallel_match_the_whole_tensor_conversion() {
    let src = tmpdir("big-src");
    let name = "Conv2D.Default_big-op1.1.2.1700000000000001";
    let tensors = [
        (3, vec![15u64, 3, 128, 128, 16], vec![15u64, 35, 128, 128]),
        (4, vec![63u64, 251, 16, 16], vec![4001u64, 100, 3, 3]),
    ];
    let mut metas = Vec::new();
    let mut payloads = Vec::new();
    for (i, (format, dev, host)) in tensors.iter().enumerate() {
        metas.push(big_meta(i, *format, dev, host));
        let n: u64 = dev.iter().product();
        // Distinct neighbours, every bit pattern (NaNs included: bytes are compared).
        let bytes: Vec<u8> = (0..n)
            .flat_map(|k| ((k.wrapping_mul(40503) ^ (k >> 16) ^ i as u64) as u16).to_le_bytes())
            .collect();
        payloads.push(bytes);
    }
    let header = DumpHeader {
        container: Container::Binary { message_len: 0 },
        version: "2.0".into(),
        dump_time: 1_700_000_000_000_001,
        op_name: "Default/big-op1".into(),
        attrs: Vec::new(),
        dfx_message: String::new(),
        tensors: metas,
        file_len: 0,
        payload_end: 0,
    };
    let refs: Vec<&[u8]> = payloads.iter().map(|p| &p[..]).collect();
    let file = src.join(name);
    std::fs::write(&file, encode(&header, &refs).unwrap()).unwrap();
    let want: Vec<Vec<u8>> = tensors
        .iter()
        .zip(&payloads)
        .map(|((format, dev, host), raw)| {
            let dev: Vec<usize> = dev.iter().map(|&d| d as usize).collect();
            let host: Vec<usize> = host.iter().map(|&d| d as usize).collect();
            let t = DeviceTensor {
                format: if *format == 3 {
                    Format::Nc1hwc0
                } else {
                    Format::FractalZ
                },
                dtype: DType::Float16,
                device_shape: &dev,
                host_shape: &host,
                data: raw,
            };
            let mut o = vec![0u8; t.host_bytes().unwrap()];
            to_host(&t, &mut o).unwrap().data.to_vec()
        })
        .collect();
    for threads in ["1", "2"] {
        let out = tmpdir(&format!("big-out-{threads}"));
        let o = opdump(&[
            "convert",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--format",
            "NCHW",
            "--threads",
            threads,
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let (d, s, b) = npy(&out.join(format!("{name}.input.0.15x35x128x128.npy")));
        assert_eq!((d.as_str(), s), ("<f2", vec![15, 35, 128, 128]));
        assert!(b == want[0], "{threads} threads: NC1HWC0 differs");
        let (_, s, b) = npy(&out.join(format!("{name}.input.1.4001x100x3x3.npy")));
        assert_eq!(s, [4001, 100, 3, 3]);
        assert!(b == want[1], "{threads} threads: FRACTAL_Z differs");
        let _ = std::fs::remove_dir_all(&out);
    }
    // As stored: the device bytes, copied.
    let out = tmpdir("big-raw");
    let o = opdump(&[
        "convert",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for (i, p) in payloads.iter().enumerate() {
        let (_, s, b) = npy(&out.join(format!("{name}.input.{i}.npy")));
        let dev: Vec<usize> = tensors[i].1.iter().map(|&d| d as usize).collect();
        assert_eq!(s, dev);
        assert!(b == *p, "input.{i} as stored differs");
    }
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&src);
}

/// `opdump ARGS` that must finish within `secs` (killed and failed after): for inputs that
/// once made it spin.
fn opdump_within(args: &[&str], secs: u64) -> Output {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run opdump");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("opdump {args:?} still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Tensors with no element whose outer dimensions declare 2^40 images, channel blocks or
/// matrices (a 173-byte file: every payload is empty). Converting them block by block once
/// walked 2^40 empty blocks, and `convert --format NCHW`, `inspect` and `compare` never
/// returned (found by the `cann_dump` fuzz target). Now each is an empty array of the host
/// shape, at once.
#[test]
fn empty_tensors_with_huge_outer_dimensions_convert_at_once() {
    const B: u64 = 1 << 40;
    let src = tmpdir("zero-src");
    let name = "Conv2D.Default_zero-op1.1.2.1700000000000001";
    // NHWC, NC1HWC0, FRACTAL_NZ, NDC1HWC0: device shape, original shape.
    let shapes: [(i32, Vec<u64>, Vec<u64>); 4] = [
        (1, vec![B, 0, 1, 1], vec![B, 1, 0, 1]),
        (3, vec![B, 1, 0, 1, 16], vec![B, 3, 0, 1]),
        (29, vec![B, 0, 1, 16, 16], vec![B, 3, 0]),
        (32, vec![B, 1, 1, 0, 1, 16], vec![B, 3, 1, 0, 1]),
    ];
    let header = DumpHeader {
        container: Container::Binary { message_len: 0 },
        version: "2.0".into(),
        dump_time: 1_700_000_000_000_001,
        op_name: "Default/zero-op1".into(),
        attrs: Vec::new(),
        dfx_message: String::new(),
        tensors: shapes
            .iter()
            .enumerate()
            .map(|(i, (f, dev, host))| big_meta(i, *f, dev, host))
            .collect(),
        file_len: 0,
        payload_end: 0,
    };
    let file = src.join(name);
    std::fs::write(&file, encode(&header, &[&[], &[], &[], &[]]).unwrap()).unwrap();
    let out = tmpdir("zero-out");
    let (s, o) = (src.to_str().unwrap(), out.to_str().unwrap());
    let r = opdump_within(&["convert", s, "--out", o, "--format", "NCHW"], 60);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    for (i, (_, _, host)) in shapes.iter().enumerate() {
        let dims: Vec<String> = host.iter().map(u64::to_string).collect();
        let p = out.join(format!("{name}.input.{i}.{}.npy", dims.join("x")));
        let (d, shape, bytes) = npy(&p);
        let want: Vec<usize> = host.iter().map(|&x| x as usize).collect();
        assert_eq!(
            (d.as_str(), shape, bytes.len()),
            ("<f2", want, 0),
            "input.{i}"
        );
    }
    let r = opdump_within(&["inspect", s], 60);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert!(
        String::from_utf8_lossy(&r.stdout).contains("4 tensors, 1 kernels"),
        "{}",
        String::from_utf8_lossy(&r.stdout)
    );
    let r = opdump_within(&["compare", s, s], 60);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    let _ = std::fs::remove_dir_all(&src);
    let _ = std::fs::remove_dir_all(&out);
}
