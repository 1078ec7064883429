//! Byte equality with real MindSpore 2.10 output (the trimmed copy in `tests/fixtures/reference`,
//! see its README.md; `OPDUMP_REFERENCE_DIR` points elsewhere):
//! every header of every `manifest.tsv` row (plain and gzipped) is reproduced from its descr and
//! shape, and every kept `.npy` file is re-read and re-written byte for byte.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use opdump_test_support::{Prereq, reference_dir, require};

use dump_core::DType;
use dump_npy::{WriteOptions, encode_header, header_len, read_file, write_npy};

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// Python tuple text `(2, 5)`, `(5,)`, `()` to dims.
fn python_shape(s: &str) -> Vec<usize> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or_else(|| panic!("shape column {s:?}"));
    inner
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().expect("dimension"))
        .collect()
}

fn manifest_text(path: &Path) -> Option<String> {
    if path.extension().is_some_and(|e| e == "gz") {
        if !require(Prereq::Gzip) {
            return None;
        }
        let out = Command::new("gzip").arg("-dc").arg(path).output().unwrap();
        assert!(out.status.success(), "gzip -dc {}: {out:?}", path.display());
        Some(String::from_utf8(out.stdout).unwrap())
    } else {
        Some(fs::read_to_string(path).unwrap())
    }
}

#[test]
fn every_reference_header_is_reproduced() {
    let Some(root) = reference_dir() else { return };
    let mut cases: Vec<_> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    let (mut rows, mut manifests) = (0usize, 0usize);
    for case in cases {
        for name in ["manifest.tsv", "manifest.tsv.gz"] {
            let path = case.join(name);
            if !path.exists() {
                continue;
            }
            let Some(text) = manifest_text(&path) else {
                continue;
            };
            manifests += 1;
            let mut lines = text.lines();
            let head: Vec<&str> = lines
                .next()
                .expect("manifest header line")
                .split('\t')
                .collect();
            let col = |n: &str| {
                head.iter()
                    .position(|h| *h == n)
                    .unwrap_or_else(|| panic!("{n}"))
            };
            let (c_descr, c_shape, c_hex, c_len) = (
                col("descr"),
                col("shape"),
                col("header_hex"),
                col("header_total_len"),
            );
            for line in lines.filter(|l| !l.is_empty()) {
                let f: Vec<&str> = line.split('\t').collect();
                let want = hex(f[c_hex]);
                let shape = python_shape(f[c_shape]);
                let descr = f[c_descr];
                assert_eq!(want.len(), f[c_len].parse::<usize>().unwrap());
                let dtype = DType::from_npy_descr(descr).expect("known descr");
                // Through the pure header encoder ...
                assert_eq!(header_len(descr, &shape), Ok(want.len()), "{line}");
                let mut got = vec![0u8; want.len()];
                assert_eq!(encode_header(descr, &shape, &mut got), Ok(want.len()));
                assert_eq!(got, want, "{}: {descr} {shape:?}", path.display());
                // ... and through the writer with MindSpore-CPU options (bf16 stays <E2).
                let elems: usize = shape.iter().product();
                let data = vec![0u8; dtype.storage_bytes(elems).unwrap()];
                let mut file = Vec::new();
                write_npy(&mut file, dtype, &shape, &data, WriteOptions::MINDSPORE_CPU).unwrap();
                assert_eq!(&file[..want.len()], &want[..]);
                rows += 1;
            }
        }
    }
    println!("{rows} reference headers from {manifests} manifests reproduced byte for byte");
    assert!(
        rows >= 2500,
        "expected the full reference set, saw {rows} rows"
    );
}

fn npy_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            npy_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "npy") {
            out.push(p);
        }
    }
}

#[test]
fn every_reference_file_is_read_and_rewritten_identically() {
    let Some(root) = reference_dir() else { return };
    let mut files = Vec::new();
    npy_files(&root, &mut files);
    let mut bf16 = 0;
    for path in &files {
        let original = fs::read(path).unwrap();
        let f = read_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!((f.version, f.fortran_order, f.data_offset), (1, false, 128));
        let mut again = Vec::new();
        write_npy(
            &mut again,
            f.dtype,
            &f.shape,
            &f.data,
            WriteOptions::MINDSPORE_CPU,
        )
        .unwrap();
        assert!(
            again == original,
            "{} differs after a rewrite",
            path.display()
        );
        if f.dtype == DType::BFloat16 {
            bf16 += 1;
            // Default options widen exactly: high half of each f32 is the bf16 value.
            let mut wide = Vec::new();
            write_npy(
                &mut wide,
                f.dtype,
                &f.shape,
                &f.data,
                WriteOptions::default(),
            )
            .unwrap();
            let body = &wide[wide.len() - 2 * f.data.len()..];
            for (pair, quad) in f.data.chunks_exact(2).zip(body.chunks_exact(4)) {
                assert_eq!(quad, [0, 0, pair[0], pair[1]]);
            }
        }
    }
    println!(
        "{} reference .npy files ({bf16} bf16) rewritten byte for byte",
        files.len()
    );
    assert!(
        files.len() >= 600,
        "expected the kept reference files, saw {}",
        files.len()
    );
    assert!(bf16 > 0);
}
