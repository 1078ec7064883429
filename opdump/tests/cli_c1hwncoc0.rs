//! A CANN dump file holding C1HWNCoC0 tensors, through `opdump convert`, `inspect` and
//! `compare` as subprocesses. The device bytes and the host arrays are numpy's
//! (`dump-device-ascend/tests/gen_formats.py`: fp16 with N = 3, fp32 with N = 2, fp16 with
//! N = 1; C not a multiple of C0 in each); the file around them is written with
//! dump-device-ascend's CANN encoder. Each converted `.npy` must be numpy's NCHW array byte for
//! byte, with no "kept as stored" warning, whatever the padding off the diagonal holds.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use dump_device_ascend::dumpfile::{
    CannDType, CannFormat, Container, DumpHeader, TensorKind, TensorMeta, encode,
};
use dump_npy::NpyReader;
use serde_json::Value;

const FILE: &str =
    "DepthwiseConv2dNative.Default_net_dw-DepthwiseConv2dNative-op5.5.0.1700000000000100";

/// `(fixture stem, kind, index, CANN data type, numpy descr)`, in payload order.
const TENSORS: [(&str, TensorKind, usize, CannDType, &str); 3] = [
    (
        "c1hwncoc0_f16",
        TensorKind::Input,
        0,
        CannDType::FLOAT16,
        "<f2",
    ),
    (
        "c1hwncoc0_f32",
        TensorKind::Input,
        1,
        CannDType::FLOAT,
        "<f4",
    ),
    (
        "c1hwncoc0_n1",
        TensorKind::Output,
        0,
        CannDType::FLOAT16,
        "<f2",
    ),
];

fn formats() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dump-device-ascend/tests/fixtures/formats")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-c1hwncoc0-{}-{name}", std::process::id()));
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

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn npy(p: &Path) -> (String, Vec<usize>, Vec<u8>) {
    let mut r = NpyReader::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut b = vec![0u8; r.data_len as usize];
    r.read_chunk(&mut b).unwrap();
    (r.descr.clone(), r.shape.clone(), b)
}

fn manifest_case(name: &str) -> Value {
    let m: Value =
        serde_json::from_slice(&std::fs::read(formats().join("manifest.json")).unwrap()).unwrap();
    m["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in the manifest"))
        .clone()
}

fn dims(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap())
        .collect()
}

/// Writes the CANN file into `dir` (f16 N = 3 with NaN bits in every off-diagonal element)
/// and returns, per tensor, numpy's host shape and bytes.
fn write_cann(dir: &Path) -> Vec<(Vec<usize>, Vec<u8>)> {
    let mut metas = Vec::new();
    let mut payloads = Vec::new();
    let mut hosts = Vec::new();
    for (ordinal, (stem, kind, index, data_type, descr)) in TENSORS.iter().enumerate() {
        let case = manifest_case(stem);
        assert_eq!(case["format"], "C1HWNCoC0");
        let (dev, host) = (dims(&case["device_shape"]), dims(&case["host_shape"]));
        let mut bytes = std::fs::read(formats().join(format!("{stem}.device.bin"))).unwrap();
        if *stem == "c1hwncoc0_f16" {
            let c0 = dev[5] as usize;
            for (j, e) in bytes.chunks_exact_mut(2).enumerate() {
                if (j / c0) % c0 != j % c0 {
                    e.copy_from_slice(&[0x01, 0x7E]);
                }
            }
        }
        let (d, shape, want) = npy(&formats().join(format!("{stem}.host.npy")));
        assert_eq!(d, *descr);
        hosts.push((shape, want));
        metas.push(TensorMeta {
            kind: *kind,
            index: *index,
            ordinal,
            data_type: *data_type,
            format: CannFormat(25),
            sub_format: 0,
            shape: dev,
            original_shape: Some(host),
            size: bytes.len() as u64,
            offset: 0,
            address: 0,
            address_offset: 0,
            arg_index: Some(ordinal as u32),
            input_type: 0,
            buffer_type: 0,
            original_op: None,
            dim_range: Vec::new(),
        });
        payloads.push(bytes);
    }
    let header = DumpHeader {
        container: Container::Binary { message_len: 0 },
        version: "2.0".into(),
        dump_time: 1_700_000_000_000_100,
        op_name: "Default/net/dw-DepthwiseConv2dNative-op5".into(),
        attrs: Vec::new(),
        dfx_message: String::new(),
        tensors: metas,
        file_len: 0,
        payload_end: 0,
    };
    let refs: Vec<&[u8]> = payloads.iter().map(|p| &p[..]).collect();
    std::fs::write(dir.join(FILE), encode(&header, &refs).unwrap()).unwrap();
    hosts
}

fn slot(kind: TensorKind, index: usize) -> String {
    let k = if kind == TensorKind::Input {
        "input"
    } else {
        "output"
    };
    format!("{k}.{index}")
}

#[test]
fn convert_writes_numpys_nchw_arrays_without_a_warning() {
    let src = tmpdir("src");
    let hosts = write_cann(&src);
    let out = tmpdir("nchw");
    let o = opdump(&[
        "convert",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--format",
        "NCHW",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(!err.contains("C1HWNCoC0"), "{err}");
    assert!(!err.contains("warning"), "{err}");
    for ((_, kind, index, _, descr), (shape, want)) in TENSORS.iter().zip(&hosts) {
        let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
        let name = format!("{FILE}.{}.{}.npy", slot(*kind, *index), dims.join("x"));
        let (d, s, b) = npy(&out.join(&name));
        assert_eq!((d.as_str(), &s), (*descr, shape), "{name}");
        assert!(b == *want, "{name}: not numpy's array");
    }

    // NHWC: element (n, h, w, c) is NCHW element (n, c, h, w).
    let nhwc = tmpdir("nhwc");
    let o = opdump(&[
        "convert",
        src.to_str().unwrap(),
        "--out",
        nhwc.to_str().unwrap(),
        "--format",
        "NHWC",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (shape, want) = &hosts[1];
    let [n, c, h, w] = shape[..] else {
        panic!("{shape:?}")
    };
    let (_, s, b) = npy(&nhwc.join(format!("{FILE}.input.1.{n}x{h}x{w}x{c}.npy")));
    assert_eq!(s, [n, h, w, c]);
    for (i, got) in b.chunks_exact(4).enumerate() {
        let (ni, hi, wi, ci) = (i / (h * w * c), i / (w * c) % h, i / c % w, i % c);
        let j = ((ni * c + ci) * h + hi) * w + wi;
        assert_eq!(got, &want[4 * j..4 * j + 4], "n{ni} h{hi} w{wi} c{ci}");
    }
    for d in [src, out, nhwc] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn inspect_and_compare_read_it_in_the_host_layout() {
    let top = tmpdir("tree");
    let cann = top.join("cann");
    std::fs::create_dir_all(&cann).unwrap();
    let hosts = write_cann(&cann);
    let o = opdump(&["inspect", cann.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    assert_eq!(v["layout"], "cann", "{v:#}");
    assert_eq!(v["tensors"], 3, "{v:#}");
    assert_eq!(v["problems"].as_array().unwrap().len(), 0, "{v:#}");
    // The NaN bits are padding: no tensor is non-finite.
    assert!(v["first_nonfinite"].is_null(), "{v:#}");

    // The mindspore layout, read back by compare against the CANN file itself.
    let ms = top.join("ms");
    let o = opdump(&[
        "convert",
        cann.to_str().unwrap(),
        "--out",
        ms.to_str().unwrap(),
        "--format",
        "NCHW",
        "--layout",
        "mindspore",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let it = ms.join("rank_0");
    let found: Vec<PathBuf> = walk(&it)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "npy"))
        .collect();
    assert_eq!(found.len(), 3, "{found:?}");
    for ((_, kind, index, _, _), (shape, want)) in TENSORS.iter().zip(&hosts) {
        let tag = format!(".{}.DefaultFormat.", slot(*kind, *index));
        let p = found
            .iter()
            .find(|p| p.to_string_lossy().contains(&tag))
            .unwrap_or_else(|| panic!("{tag}: {found:?}"));
        let (_, s, b) = npy(p);
        assert_eq!(&s, shape);
        assert!(b == *want, "{}", p.display());
    }
    let o = opdump(&[
        "compare",
        cann.to_str().unwrap(),
        ms.to_str().unwrap(),
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    assert_eq!(v["matched"], 3, "{v:#}");
    assert_eq!(v["diverged"], 0, "{v:#}");
    assert_eq!(o.status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&top);
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
