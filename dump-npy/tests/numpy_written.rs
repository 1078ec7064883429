//! Files written by numpy (`np.save` and `numpy.lib.format.write_array` with versions 1.0,
//! 2.0 and 3.0, C and Fortran order) are read back by [`dump_npy::read_file`] with the right
//! descr, dtype, shape, order, data offset and bytes. One python3 process writes them all.
//! Without python3 + numpy the test prints SKIP and passes (CI installs numpy).

use opdump_test_support::{Prereq, require};
use std::{path::PathBuf, process::Command};

use dump_core::DType;
use dump_npy::{Error, read_file};

const WRITE_PY: &str = r#"
import sys
import numpy as np
from numpy.lib import format as npf

out = sys.argv[1]
rows = []
rng = np.random.default_rng(7)
n = 0

def save(a, version=None, expect=""):
    global n
    path = f"{out}/{n}.npy"
    n += 1
    if version is None:
        np.save(path, a)
    else:
        with open(path, "wb") as f:
            npf.write_array(f, a, version=version)
    fortran = a.flags.f_contiguous and not a.flags.c_contiguous
    data = a.tobytes(order="F" if fortran else "C")
    with open(path, "rb") as f:
        whole = f.read()
    offset = len(whole) - len(data)
    assert whole[offset:] == data
    open(path + ".raw", "wb").write(data)
    shape = ",".join(str(d) for d in a.shape)
    rows.append("\t".join([path, a.dtype.str, str(int(fortran)), shape, str(offset), str(whole[6]), expect]))

dtypes = ["?", "<i1", "<i2", "<i4", "<i8", "<u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"]
shapes = [(), (5,), (2, 3), (0, 3), (2, 1, 3, 1, 2, 1, 2, 1), (4, 0)]
for dt in dtypes:
    for sh in shapes:
        raw = rng.integers(0, 256, size=int(np.prod(sh)) * np.dtype(dt).itemsize, dtype=np.uint8)
        a = np.frombuffer(raw.tobytes(), dtype=dt).reshape(sh) if dt != "?" else (raw % 2).astype("?").reshape(sh)
        save(a)
# Fortran order.
save(np.asfortranarray(np.arange(12, dtype="<f4").reshape(3, 4)))
save(np.asfortranarray(np.arange(24, dtype="<i8").reshape(2, 3, 4)))
# Explicit versions, including the UTF-8 version 3.0.
for v in [(1, 0), (2, 0), (3, 0)]:
    save(np.arange(10, dtype="<f8").reshape(2, 5), version=v)
    save(np.asfortranarray(np.arange(6, dtype="<u2").reshape(2, 3)), version=v)
# Big-endian data: readable by numpy, refused by opdump with a clear error.
save(np.arange(3, dtype=">f4"), expect="UnsupportedDescr")
save(np.zeros(2, dtype="<U3"), expect="UnsupportedDescr")
open(f"{out}/manifest.tsv", "w").write("\n".join(rows) + "\n")
print(f"wrote {len(rows)}")
"#;

#[test]
fn reader_reads_numpy_files() {
    if !require(Prereq::Numpy) {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("npy-numpy-written-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new("python3")
        .args(["-c", WRITE_PY])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = std::fs::read_to_string(dir.join("manifest.tsv")).unwrap();
    let (mut read, mut refused, mut fortran, mut versions) = (0, 0, 0, [0usize; 4]);
    for line in manifest.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [path, descr, is_f, shape, offset, version, expect] = f[..] else {
            panic!("manifest line {line:?}");
        };
        let res = read_file(path);
        if expect == "UnsupportedDescr" {
            let e = res.expect_err(path);
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
            let inner = e.get_ref().and_then(|i| i.downcast_ref::<Error>());
            assert_eq!(inner, Some(&Error::UnsupportedDescr), "{path}");
            refused += 1;
            continue;
        }
        let got = res.unwrap_or_else(|e| panic!("{path}: {e}"));
        let want_shape: Vec<usize> = shape
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect();
        let want_dtype = DType::from_npy_descr(descr).unwrap();
        assert_eq!(got.dtype, want_dtype, "{path}");
        // The descr string as stored names the same dtype as numpy's `dtype.str`.
        assert_eq!(
            DType::from_npy_descr(&got.descr),
            Some(want_dtype),
            "{path}"
        );
        assert_eq!(got.shape, want_shape, "{path}");
        assert_eq!(got.fortran_order, is_f == "1", "{path}");
        assert_eq!(got.data_offset, offset.parse::<usize>().unwrap(), "{path}");
        assert_eq!(got.version, version.parse::<u8>().unwrap(), "{path}");
        let raw = std::fs::read(format!("{path}.raw")).unwrap();
        assert!(got.data == raw, "{path}: data bytes differ");
        read += 1;
        fortran += usize::from(got.fortran_order);
        versions[usize::from(got.version)] += 1;
    }
    println!(
        "read {read} numpy files ({fortran} Fortran order, versions {versions:?}), refused {refused}"
    );
    assert_eq!(refused, 2);
    assert!(read >= 90 && fortran >= 5 && versions[2] == 2 && versions[3] == 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The `.npy` files `tests/fixtures/onnx/dtypes/gen_dtypes.py` saved with numpy and ml_dtypes:
/// bool, int16 and uint16 read as themselves; ml_dtypes' bfloat16 (`<V2`), int4 (`<V1`, one
/// value per byte, low nibble) and float8 (`<V1`, `<f1`; `<V1` for both FNUZ types) only through `read_file_opaque`, with
/// their bytes as stored.
#[test]
fn ml_dtypes_files_read_opaque() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/onnx/dtypes");
    for (name, dtype) in [
        ("bool", DType::Bool),
        ("int16", DType::Int16),
        ("uint16", DType::UInt16),
    ] {
        let f = dump_npy::read_file(dir.join(format!("{name}.npy"))).unwrap();
        assert_eq!(
            (f.dtype, f.shape.as_slice()),
            (dtype, &[2usize, 3][..]),
            "{name}"
        );
        assert!(!f.is_opaque());
    }
    for (name, descr, data) in [
        ("int4", "<V1", &[0x00u8, 0x01, 0x0e, 0x03, 0x00, 0x07][..]),
        (
            "float8_e4m3fn",
            "<V1",
            &[0x00, 0x3c, 0xc0, 0x44, 0xa8, 0x4e][..],
        ),
        (
            "float8_e5m2",
            "<f1",
            &[0x00, 0x3e, 0xc0, 0x42, 0xb4, 0x47][..],
        ),
        // FNUZ: one more bias than e4m3fn / e5m2, so each value's byte is one exponent step
        // above theirs (1.5 is 0x44 in e4m3fnuz, 0x3c in e4m3fn).
        (
            "float8_e4m3fnuz",
            "<V1",
            &[0x00, 0x44, 0xc8, 0x4c, 0xb0, 0x56][..],
        ),
        (
            "float8_e5m2fnuz",
            "<V1",
            &[0x00, 0x42, 0xc4, 0x46, 0xb8, 0x4b][..],
        ),
        (
            "bfloat16",
            "<V2",
            &[
                0x00, 0x00, 0xc0, 0x3f, 0x00, 0xc0, 0x40, 0x40, 0x80, 0xbe, 0xe0, 0x40,
            ][..],
        ),
    ] {
        let path = dir.join(format!("{name}.npy"));
        let err = dump_npy::read_file(&path).unwrap_err();
        assert!(
            err.to_string().contains("unsupported .npy descr"),
            "{name}: {err}"
        );
        let f = dump_npy::read_file_opaque(&path).unwrap();
        assert!(f.is_opaque(), "{name}");
        assert_eq!(
            (f.descr.as_str(), f.shape.as_slice()),
            (descr, &[2usize, 3][..])
        );
        assert_eq!(f.data, data, "{name}");
    }
}
