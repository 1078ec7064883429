//! The CANN dialect on the generated fixtures (`dump-device-ascend/tests/gen_cann.py`): records,
//! statistics streamed from inside the containers (device formats converted), GE positions,
//! and hostile files turned into problems.

use std::path::{Path, PathBuf};

use dump_core::DType;
use dump_device_ascend::{DeviceTensor, Format, to_host};
use dump_npy::NpyReader;
use dump_read::{Dump, TensorSource, summarize_npy};
use dump_stats::Hashes;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dump-device-ascend/tests/fixtures/cann")
}

fn npy_bytes(p: &Path) -> (Vec<usize>, Vec<u8>) {
    let mut r = NpyReader::open(p).unwrap();
    let mut b = vec![0u8; r.data_len as usize];
    r.read_chunk(&mut b).unwrap();
    (r.shape.clone(), b)
}

#[test]
fn every_readable_tensor_has_numpys_statistics() {
    let d = Dump::open(&fixtures()).unwrap();
    assert_eq!(d.dialect, "cann");
    let conv = "Default_network_conv1-Conv2d_Conv2D-op12";
    let find = |op: &str, io: &str| {
        d.tensors
            .iter()
            .find(|t| t.id.op_name == op && t.io_slot() == io)
            .unwrap_or_else(|| panic!("{op} {io}: {:?}", d.problems))
    };
    let (mut host_checked, mut fp8_checked) = (0, 0);
    for t in &d.tensors {
        let Some(TensorSource::Cann(c)) = &t.source else {
            panic!("{t:?}")
        };
        if c.to_host.is_some() {
            continue;
        }
        let file = c.path.file_name().unwrap().to_str().unwrap();
        let expect = fixtures().join(format!("npy/{file}.{}.npy", t.io_slot()));
        let Ok(want) = summarize_npy(&expect, Some(t.dtype), Hashes::NONE) else {
            // complex: no statistics either way.
            assert!(t.stats(Hashes::NONE).is_err(), "{file}");
            continue;
        };
        let got = t
            .stats(Hashes {
                md5: true,
                sha1: false,
            })
            .unwrap();
        let w = want.stats.summary.unwrap_or_default();
        assert_eq!(got.count.unwrap_or(0), w.count, "{file} {}", t.io_slot());
        if w.count > 0 {
            let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
            assert!(same(got.max.unwrap(), w.max_value()), "{file}");
            assert!(same(got.min.unwrap(), w.min_value()), "{file}");
        }
        host_checked += 1;
        fp8_checked += usize::from(matches!(t.dtype, DType::Float8E4M3FN | DType::Float8E5M2));
    }
    assert!(host_checked >= 40, "{host_checked}");
    assert_eq!(
        fp8_checked, 6,
        "both float8 casts (in and out) and MatMul's outputs"
    );

    // NC1HWC0 (1,1,2,2,16) of original (1,3,2,2): the 13 padding channels are not values.
    let x = find(conv, "input.0");
    assert_eq!(
        (x.dtype, x.shape.as_slice()),
        (DType::Float16, &[1, 3, 2, 2][..])
    );
    // FRACTAL_Z weights (4,1,16,16) of (8,3,2,2).
    let w = find(conv, "input.1");
    assert_eq!(w.shape, [8, 3, 2, 2]);
    for (t, format, dev) in [
        (x, Format::Nc1hwc0, "input.0"),
        (w, Format::FractalZ, "input.1"),
    ] {
        let file = format!("npy/Conv2D.{conv}.12.3.1700000000000044.{dev}.npy");
        let (dshape, raw) = npy_bytes(&fixtures().join(file));
        let dt = DeviceTensor {
            format,
            dtype: DType::Float16,
            device_shape: &dshape,
            host_shape: &t.shape,
            data: &raw,
        };
        let mut host = vec![0u8; dt.host_bytes().unwrap()];
        let host = to_host(&dt, &mut host).unwrap().data;
        let got = t
            .stats(Hashes {
                md5: true,
                sha1: false,
            })
            .unwrap();
        let want = dump_core::stats::summarize(DType::Float16, host, t.elems().unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(got.count, Some(t.elems().unwrap() as u64));
        let bits = |v: Option<f64>| v.map(f64::to_bits);
        assert_eq!(bits(got.max), bits(Some(want.max_value())), "{format}");
        assert_eq!(bits(got.min), bits(Some(want.min_value())), "{format}");
        assert_eq!(got.nan, Some(want.nan), "{format}");
        let hex: String = dump_core::hash::md5(host)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            got.md5.as_deref(),
            Some(hex.as_str()),
            "{format}: host order"
        );
    }

    // Read as stored, with a problem: NDC1HWC0 and C1HWNCoC0 without the original shape
    // their converters need, an unknown format.
    let why = |needle: &str| d.problems.iter().any(|p| p.message.contains(needle));
    assert!(
        why("output.3: format NDC1HWC0 without an original_shape: read as stored"),
        "{:?}",
        d.problems
    );
    assert!(
        why("output.6: format C1HWNCoC0 without an original_shape: read as stored"),
        "{:?}",
        d.problems
    );
    assert!(
        why("output.4: format OutputFormat(50) has no converter"),
        "{:?}",
        d.problems
    );
    assert!(find(conv, "output.4").source.is_some());
    // Types with no numpy equivalent are named, not guessed; inline (v1) files are read.
    assert!(why("HIFLOAT8") && why("FLOAT8_E8M0"), "{:?}", d.problems);
    // FLOAT8_E5M2 / FLOAT8_E4M3FN are read (their statistics checked against ml_dtypes'
    // float32 above), never a problem.
    assert!(
        !why("data type FLOAT8_E4M3FN") && !why("data type FLOAT8_E5M2"),
        "{:?}",
        d.problems
    );
    let f8 = find("Default_MatMul-op7", "output.1");
    assert_eq!(
        (f8.dtype, f8.shape.as_slice()),
        (DType::Float8E4M3FN, &[5][..])
    );
    let e5 = find("Default_network_cast34", "output.0");
    assert_eq!(e5.dtype, DType::Float8E5M2);
    let mm = find("Default_MatMul-op7", "output.0");
    assert_eq!(
        (mm.dtype, mm.id.task_id, mm.id.stream_id),
        (DType::Int16, 7, 1)
    );
    assert!(mm.stats(Hashes::NONE).unwrap().count == Some(8));
    // Overflow files are pointed to `opdump convert`.
    assert!(why("overflow (Opdebug) report"), "{:?}", d.problems);
    // Buffers and workspaces are not records.
    assert_eq!(
        d.tensors.iter().filter(|t| t.id.op_name == conv).count(),
        10
    );
}

#[test]
fn ge_layout_gives_device_model_and_step_and_hostile_files_are_problems() {
    let root = std::env::temp_dir().join(format!("opdump-cann-ge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let step = root.join("20260101120000/3/resnet50/1/7");
    std::fs::create_dir_all(&step).unwrap();
    let relu = "Relu.Relu-op9.9.0.1700000000000048";
    std::fs::copy(fixtures().join(relu), step.join(relu)).unwrap();
    let hostile = [
        "truncated_data",
        "size_past_end",
        "huge_length",
        "huge_count",
        "too_short",
        "varint_overflow",
        "group",
        "nano",
    ];
    for (i, h) in hostile.iter().enumerate() {
        std::fs::copy(
            fixtures().join("hostile").join(h),
            step.join(format!("Add.bad{i}.{i}.0.17000000000000{i:02}")),
        )
        .unwrap();
    }
    let d = Dump::open(&root).unwrap();
    assert_eq!(d.dialect, "cann");
    assert_eq!(d.tensors.len(), 1, "{:?}", d.tensors);
    let t = &d.tensors[0];
    assert_eq!(
        (t.rank, t.net.as_str(), t.graph, t.iteration),
        (3, "resnet50", 1, 7)
    );
    assert_eq!(d.problems.len(), hostile.len(), "{:?}", d.problems);
    let p = d
        .problems
        .iter()
        .find(|p| p.path.ends_with("Add.bad0.0.0.1700000000000000"))
        .unwrap();
    assert!(
        p.message
            .contains("from byte 47 but the file ends at byte 52"),
        "{}",
        p.message
    );
    // A file truncated after it was read: statistics name the byte offset.
    let f = step.join(relu);
    let len = std::fs::metadata(&f).unwrap().len();
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&f, &bytes[..len as usize - 3]).unwrap();
    let e = t.stats(Hashes::NONE).unwrap_err().to_string();
    assert!(e.contains("file ends at byte"), "{e}");
    let _ = std::fs::remove_dir_all(&root);
}

/// A CANN bf16 or float8 payload compares element by element with the `.npy` holding its
/// float32 widening (ml_dtypes' values for float8), in either order: exact, NaNs paired.
#[test]
fn float8_and_bf16_payloads_compare_with_their_float32_npy() {
    let d = Dump::open(&fixtures()).unwrap();
    let mut seen = 0;
    for t in &d.tensors {
        if !matches!(
            t.dtype,
            DType::Float8E4M3FN | DType::Float8E5M2 | DType::BFloat16
        ) {
            continue;
        }
        let Some(src @ TensorSource::Cann(c)) = &t.source else {
            panic!("{t:?}")
        };
        let file = c.path.file_name().unwrap().to_str().unwrap();
        let npy = TensorSource::File(fixtures().join(format!("npy/{file}.{}.npy", t.io_slot())));
        let tol = dump_core::compare::Tolerance {
            rtol: 0.0,
            atol: 0.0,
        };
        for (a, b) in [(src, &npy), (&npy, src)] {
            let (m, sa, sb) = dump_read::compare::compare_sources(a, b, tol, true)
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(m.count, t.elems().unwrap() as u64, "{file}");
            assert_eq!((m.not_close, m.nonfinite_mismatch), (0, 0), "{file}");
            let (sa, sb) = (sa.unwrap(), sb.unwrap());
            assert_eq!((sa.nan, sa.count), (sb.nan, sb.count), "{file}");
        }
        seen += usize::from(t.dtype != DType::BFloat16);
    }
    assert_eq!(
        seen, 6,
        "float8 payloads: both casts (in and out) and MatMul's two outputs"
    );
}
