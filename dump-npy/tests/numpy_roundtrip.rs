//! Files written by opdump, loaded by numpy (one python3 process for all files).
//!
//! For every dtype numpy can load and a spread of shapes (0-d, 1-d, zero-sized, rank 8,
//! rank 64, and a version 2.0 header above 65535 bytes), the test writes a file with
//! [`dump_npy::write_file`] and a `.src` file with the raw input bytes. Python rebuilds the
//! expected array from the raw bytes with its own, independent conversion (bf16 `<< 16`,
//! int4/uint4 nibbles, `np.unpackbits`, float8 decoded field by field) and compares dtype, shape
//! and bytes exactly.
//! Without python3 + numpy the test prints SKIP and passes (CI installs numpy).

use opdump_test_support::{Prereq, require};
use std::{fmt::Write as _, path::PathBuf, process::Command};

use dump_core::DType;
use dump_npy::{WriteOptions, write_file};

const CHECK_PY: &str = r#"
import json, sys
import numpy as np
from numpy.lib import format as npf

cases = json.load(open(sys.argv[1]))
ok = bad = 0
for c in cases:
    raw = open(c["src"], "rb").read()
    shape = tuple(c["shape"])
    n = 1
    for d in shape:
        n *= d
    kind = c["kind"]
    if kind == "copy":
        exp = np.frombuffer(raw, dtype=c["npy"])
    elif kind == "bf16":
        exp = (np.frombuffer(raw, "<u2").astype("<u4") << np.uint32(16)).view("<f4")
    elif kind == "int4":
        b = np.frombuffer(raw, np.uint8)
        nib = np.empty(2 * len(b), np.int16)
        nib[0::2] = b & 15
        nib[1::2] = b >> 4
        exp = np.where(nib >= 8, nib - 16, nib)[:n].astype(np.int8)
    elif kind == "uint4":
        b = np.frombuffer(raw, np.uint8)
        nib = np.empty(2 * len(b), np.uint8)
        nib[0::2] = b & 15
        nib[1::2] = b >> 4
        exp = nib[:n]
    elif kind in ("e4m3fn", "e5m2"):
        # Decoded from the format's fields in float64 (exact), NaN as float32 0x7fc00000|sign.
        b = np.frombuffer(raw, np.uint8).astype(np.int64)
        ebits, bias = (4, 7) if kind == "e4m3fn" else (5, 15)
        mbits = 7 - ebits
        s, e, m = b >> 7, (b >> mbits) & ((1 << ebits) - 1), b & ((1 << mbits) - 1)
        top = (1 << ebits) - 1
        mag = np.where(e == 0, m * 2.0 ** (1 - bias - mbits),
                       (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias))
        if kind == "e5m2":
            mag = np.where((e == top) & (m == 0), np.inf, mag)
            nan = (e == top) & (m != 0)
        else:
            nan = (e == top) & (m == (1 << mbits) - 1)
        val = np.where(s == 1, -mag, mag).astype("<f4")
        bits = val.view("<u4").copy()
        bits[nan] = (0x7FC00000 | (s[nan] << 31)).astype("<u4")
        exp = bits.view("<f4")
    elif kind in ("e4m3fnuz", "e5m2fnuz"):
        # FNUZ: bias 8 / 16, no infinities, no negative zero, 0x80 the one NaN (0xffc00000).
        b = np.frombuffer(raw, np.uint8).astype(np.int64)
        ebits, bias = (4, 8) if kind == "e4m3fnuz" else (5, 16)
        mbits = 7 - ebits
        s, e, m = b >> 7, (b >> mbits) & ((1 << ebits) - 1), b & ((1 << mbits) - 1)
        mag = np.where(e == 0, m * 2.0 ** (1 - bias - mbits),
                       (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias))
        val = np.where(s == 1, -mag, mag).astype("<f4")
        bits = val.view("<u4").copy()
        bits[b == 0x80] = np.uint32(0xFFC00000)
        exp = bits.view("<f4")
    elif kind == "uint1":
        exp = np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="big")[:n]
    else:
        raise SystemExit("unknown kind " + kind)
    try:
        if c["v2"]:
            # numpy.load cannot build arrays above 64 dims; check numpy's own header parser
            # and the data bytes after it instead.
            with open(c["file"], "rb") as f:
                version = npf.read_magic(f)
                got_shape, fortran, dtype = npf.read_array_header_2_0(f, max_header_size=1 << 21)
                offset = f.tell()
                body = f.read()
            assert version == (2, 0), version
            assert not fortran
            assert offset % 64 == 0 and offset > 65535, offset
            got = np.frombuffer(body, dtype=dtype)
        else:
            a = np.load(c["file"])
            got_shape, dtype, got = a.shape, a.dtype, a
        assert dtype == np.dtype(c["npy"]), (dtype, c["npy"])
        assert tuple(got_shape) == shape, (got_shape, shape)
        assert got.tobytes() == exp.tobytes(), "values differ"
        ok += 1
    except Exception as e:
        bad += 1
        print("BAD", c["file"], repr(e))
print(f"numpy: {ok} ok, {bad} bad")
sys.exit(1 if bad else 0)
"#;

struct Rng(u64);

impl Rng {
    fn byte(&mut self) -> u8 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 24) as u8
    }
}

struct Case {
    dtype: DType,
    shape: Vec<usize>,
}

fn cases() -> Vec<Case> {
    let shapes: Vec<Vec<usize>> = vec![
        vec![],
        vec![1],
        vec![7],
        vec![0],
        vec![3, 0, 2],
        vec![2, 3, 5],
        vec![2, 1, 2, 1, 2, 1, 2, 3],
        vec![3, 3],
    ];
    let dtypes = [
        DType::Bool,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float16,
        DType::Float32,
        DType::Float64,
        DType::Complex64,
        DType::Complex128,
        DType::BFloat16,
        DType::Int4,
        DType::UInt1,
        DType::UInt4,
        DType::Float8E4M3FN,
        DType::Float8E5M2,
        DType::Float8E4M3FNUZ,
        DType::Float8E5M2FNUZ,
    ];
    let mut out = Vec::new();
    for d in dtypes {
        for s in &shapes {
            out.push(Case {
                dtype: d,
                shape: s.clone(),
            });
        }
    }
    // numpy's maximum rank, and a bf16 tensor long enough to take several scratch chunks.
    let mut rank64 = vec![1usize; 64];
    rank64[10] = 3;
    rank64[63] = 2;
    out.push(Case {
        dtype: DType::Float32,
        shape: rank64,
    });
    out.push(Case {
        dtype: DType::BFloat16,
        shape: vec![3, 40_001],
    });
    out.push(Case {
        dtype: DType::Int4,
        shape: vec![70_001],
    });
    out.push(Case {
        dtype: DType::UInt1,
        shape: vec![3, 100_003],
    });
    out.push(Case {
        dtype: DType::Float8E5M2,
        shape: vec![70_001],
    });
    out.push(Case {
        dtype: DType::UInt4,
        shape: vec![70_001],
    });
    // A header above 65535 bytes (version 2.0): 33000 dims, one of them 3.
    let mut huge = vec![1usize; 33_000];
    huge[0] = 3;
    out.push(Case {
        dtype: DType::Int16,
        shape: huge,
    });
    out
}

#[test]
fn numpy_loads_what_opdump_writes() {
    if !require(Prereq::Numpy) {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("npy-roundtrip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut json = String::from("[\n");
    let all = cases();
    for (i, c) in all.iter().enumerate() {
        let elems: usize = c.shape.iter().product();
        let len = c.dtype.storage_bytes(elems).unwrap();
        let src: Vec<u8> = (0..len)
            .map(|_| {
                let b = rng.byte();
                if c.dtype == DType::Bool { b & 1 } else { b }
            })
            .collect();
        let file = dir.join(format!("{i}.npy"));
        let src_path = dir.join(format!("{i}.src"));
        std::fs::write(&src_path, &src).unwrap();
        let written = write_file(&file, c.dtype, &c.shape, &src, WriteOptions::default()).unwrap();
        assert_eq!(written as u64, std::fs::metadata(&file).unwrap().len());
        let (kind, npy) = match c.dtype {
            DType::BFloat16 => ("bf16", "<f4"),
            DType::Int4 => ("int4", "|i1"),
            DType::UInt4 => ("uint4", "|u1"),
            DType::Float8E4M3FN => ("e4m3fn", "<f4"),
            DType::Float8E5M2 => ("e5m2", "<f4"),
            DType::Float8E4M3FNUZ => ("e4m3fnuz", "<f4"),
            DType::Float8E5M2FNUZ => ("e5m2fnuz", "<f4"),
            DType::UInt1 => ("uint1", "|u1"),
            d => ("copy", d.npy_descr().unwrap()),
        };
        let shape = c
            .shape
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let _ = writeln!(
            json,
            "{{\"file\": \"{}\", \"src\": \"{}\", \"kind\": \"{kind}\", \"npy\": \"{npy}\", \"shape\": [{shape}], \"v2\": {}}}{}",
            file.display(),
            src_path.display(),
            if c.shape.len() > 64 { "true" } else { "false" },
            if i + 1 == all.len() { "" } else { "," }
        );
    }
    json.push(']');
    let manifest = dir.join("cases.json");
    std::fs::write(&manifest, json).unwrap();
    let script = dir.join("check.py");
    std::fs::write(&script, CHECK_PY).unwrap();
    let out = Command::new("python3")
        .arg(&script)
        .arg(&manifest)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "numpy disagreed:\n{stdout}");
    assert!(
        stdout.contains(&format!("numpy: {} ok, 0 bad", all.len())),
        "{stdout}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
