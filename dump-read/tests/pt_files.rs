//! PyTorch `.pt` files read by [`TensorFile`]: msprobe's real tensor-task files against the
//! statistics msprobe wrote for them, hand-built archives (offsets, dtypes), hostile archives
//! and pickles refused with a message naming the file and what is allowed, and the `pt` fuzz
//! target's committed inputs replayed.

#[path = "../../fuzz/checks_read.rs"]
mod checks_read;

use std::path::{Path, PathBuf};

use checks_read::{pt_file, tensor_pickle, zip_of};
use dump_core::DType;
use dump_read::{Dump, TensorFile};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/msprobe")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-pt-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn read_all(path: &Path) -> (TensorFile, Vec<u8>) {
    let mut f = TensorFile::open(path).unwrap_or_else(|e| panic!("{e}"));
    let mut bytes = Vec::new();
    f.for_each_chunk(|c| {
        bytes.extend_from_slice(c);
        Ok(())
    })
    .unwrap();
    (f, bytes)
}

/// Every `.pt` file of msprobe's tensor task is read, and the statistics computed from its
/// bytes are msprobe's own (max and min exactly; mean and norm, which msprobe reduces in the
/// tensor's own dtype, to two of that dtype's epsilons, relative).
#[test]
fn msprobes_pt_files_give_the_statistics_dump_json_lists() {
    let d = Dump::open(&fixtures().join("torch_tensor")).unwrap();
    assert_eq!(d.dialect, "msprobe");
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let with_files: Vec<_> = d.tensors.iter().filter(|t| t.file().is_some()).collect();
    assert_eq!(
        with_files.len(),
        59,
        "every tensor of the tensor task has its .pt"
    );
    let mut dtypes = std::collections::BTreeSet::new();
    for t in with_files {
        let row = t.row_stats.clone().unwrap();
        let sum =
            dump_read::summarize_npy(t.file().unwrap(), Some(t.dtype), Default::default()).unwrap();
        assert_eq!(sum.shape, t.shape, "{}", t.id.op_name);
        assert_eq!(sum.stored, t.dtype, "{} {}", t.id.op_name, t.io_slot());
        dtypes.insert(format!("{}", t.dtype));
        let got = dump_read::Stats::from_tensor_stats(&sum.stats);
        assert_eq!(got.max, row.max, "{} {}", t.id.op_name, t.io_slot());
        assert_eq!(got.min, row.min, "{} {}", t.id.op_name, t.io_slot());
        let eps = match t.dtype {
            DType::BFloat16 => 2.0 * 2f64.powi(-8),
            DType::Float16 => 2.0 * 2f64.powi(-11),
            _ => 1e-5,
        };
        for (name, a, b) in [("mean", got.avg, row.avg), ("norm", got.l2norm, row.l2norm)] {
            if let (Some(a), Some(b)) = (a, b) {
                assert!(
                    (a - b).abs() <= eps * b.abs().max(1e-6),
                    "{} {} {name}: {a} vs {b}",
                    t.id.op_name,
                    t.io_slot()
                );
            }
        }
    }
    for want in ["float32", "float16", "bfloat16", "int64"] {
        assert!(
            dtypes.iter().any(|d| d.eq_ignore_ascii_case(want)),
            "{want} not among {dtypes:?}"
        );
    }
}

#[test]
fn a_tensor_at_an_offset_of_its_storage_streams_only_its_own_bytes() {
    let dir = tmp("offset");
    let storage: Vec<u8> = (0..10u16).flat_map(|v| v.to_le_bytes()).collect();
    let p = dir.join("t.pt");
    std::fs::write(
        &p,
        pt_file(
            &tensor_pickle("ShortStorage", "0", 10, 3, &[2, 3], &[3, 1]),
            "0",
            &storage,
        ),
    )
    .unwrap();
    let (f, bytes) = read_all(&p);
    assert_eq!((f.dtype, f.shape.clone()), (DType::Int16, vec![2, 3]));
    assert_eq!(bytes, storage[6..18].to_vec());
    // A size-1 dimension may carry any stride (torch keeps the original one).
    std::fs::write(
        &p,
        pt_file(
            &tensor_pickle("HalfStorage", "k_1", 5, 0, &[1, 5], &[99, 1]),
            "k_1",
            &storage,
        ),
    )
    .unwrap();
    let (f, bytes) = read_all(&p);
    assert_eq!((f.dtype, f.data_len), (DType::Float16, 10));
    assert_eq!(bytes, storage[..10].to_vec());
}

/// `(what, file bytes, words the error must hold)`: every one refused with the file's path.
#[test]
fn hostile_pt_files_are_refused_with_a_clear_message() {
    let dir = tmp("hostile");
    let ok = tensor_pickle("FloatStorage", "0", 4, 0, &[4], &[1]);
    let store = [0u8; 16];
    let mut nested = vec![0x80, 2, b'N'];
    nested.extend(std::iter::repeat_n(0x85u8, 100));
    nested.push(b'.');
    let mut memo_bomb = vec![0x80, 2, b'N'];
    for k in 0..20_000u32 {
        memo_bomb.push(b'r');
        memo_bomb.extend_from_slice(&k.to_le_bytes());
    }
    let mut endless = vec![0x80, 2];
    endless.extend(std::iter::repeat_n(b'N', 200_000));
    let with = |from: &str, to: &str| {
        let s = ok.clone();
        let i = s
            .windows(from.len())
            .position(|w| w == from.as_bytes())
            .unwrap();
        let mut v = s[..i].to_vec();
        v.extend_from_slice(to.as_bytes());
        v.extend_from_slice(&s[i + from.len()..]);
        v
    };
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        (
            "not a zip",
            b"hello, not a zip at all".to_vec(),
            &["not a PyTorch .pt file"],
        ),
        ("empty", Vec::new(), &["not a PyTorch .pt file"]),
        (
            "no data.pkl",
            zip_of(&[("archive/data/0", &store)]),
            &["0 entries named {prefix}/data.pkl"],
        ),
        (
            "a global that runs code",
            pt_file(
                b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00ls\x85R.",
                "0",
                &store,
            ),
            &["os.system", "plain tensors only"],
        ),
        (
            "an opcode outside the subset",
            pt_file(b"\x80\x02I1\n.", "0", &store),
            &["opcode 0x49", "not in the subset"],
        ),
        (
            "no STOP",
            pt_file(b"\x80\x02N", "0", &store),
            &["without STOP"],
        ),
        (
            "not a tensor",
            pt_file(b"\x80\x02K\x05.", "0", &store),
            &["an int, not a tensor"],
        ),
        (
            "nested 100 deep",
            pt_file(&nested, "0", &store),
            &["nest more than 32"],
        ),
        (
            "memo bomb",
            pt_file(&memo_bomb, "0", &store),
            &["more than 10000 memo"],
        ),
        (
            "endless",
            pt_file(&endless, "0", &store),
            &["more than 10000 values on the stack"],
        ),
        (
            "a storage type that is not read",
            pt_file(&with("FloatStorage", "ComplexFloatStorage"), "0", &store),
            &["torch.ComplexFloatStorage"],
        ),
        (
            "a storage key with a slash",
            pt_file(
                &with("X\x01\x00\x00\x000", "X\x04\x00\x00\x00../x"),
                "0",
                &store,
            ),
            &["storage key \"../x\""],
        ),
        (
            "the storage missing",
            pt_file(&ok, "1", &store),
            &["has no archive/data/0"],
        ),
        (
            "a storage shorter than announced",
            pt_file(&ok, "0", &store[..12]),
            &["holds 12 bytes, less than 4 elements"],
        ),
        (
            "a tensor past its storage",
            pt_file(
                &tensor_pickle("FloatStorage", "0", 4, 2, &[4], &[1]),
                "0",
                &store,
            ),
            &["does not fit its storage of 4 elements"],
        ),
        (
            "a transposed tensor",
            pt_file(
                &tensor_pickle("FloatStorage", "0", 4, 0, &[2, 2], &[1, 2]),
                "0",
                &store,
            ),
            &["not contiguous"],
        ),
        (
            "big-endian",
            zip_of(&[
                ("a/data.pkl", &ok),
                ("a/byteorder", b"big"),
                ("a/data/0", &store),
            ]),
            &["byteorder is \"big\"", "little-endian"],
        ),
        (
            "a truncated archive",
            pt_file(&ok, "0", &store)[..60].to_vec(),
            &["not a PyTorch .pt file"],
        ),
    ];
    for (what, bytes, words) in cases {
        let p = dir.join(format!("{}.pt", what.replace(' ', "_")));
        std::fs::write(&p, &bytes).unwrap();
        let e = TensorFile::open(&p).expect_err(what).to_string();
        assert!(e.contains(&p.display().to_string()), "{what}: {e}");
        for w in words {
            assert!(e.contains(w), "{what}: {e:?} lacks {w:?}");
        }
    }
    // Not a regular file: a symlink is not followed, a directory is refused.
    let link = dir.join("link.pt");
    std::os::unix::fs::symlink(dir.join("not_a_zip.pt"), &link).unwrap();
    let e = TensorFile::open(&link).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn every_pt_corpus_file_passes_its_target() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    for (target, check) in checks_read::TARGETS {
        let mut replayed = 0;
        for kind in ["corpus", "seeds"] {
            let Ok(entries) = std::fs::read_dir(fuzz.join(kind).join(target)) else {
                continue;
            };
            for e in entries {
                let p = e.unwrap().path();
                if p.is_file() {
                    let data = std::fs::read(&p).unwrap();
                    let r = std::panic::catch_unwind(|| check(&data));
                    assert!(r.is_ok(), "{target}: {} fails its invariants", p.display());
                    replayed += 1;
                }
            }
        }
        assert!(replayed > 0, "no corpus for fuzz target {target}");
    }
}
