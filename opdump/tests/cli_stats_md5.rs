//! `opdump stats --all` over many files, run as a user runs it (the binary as a subprocess):
//! the files are hashed together in the lanes of multi-buffer MD5 and SHA-1 engines, and every
//! row must stay byte-identical to the row of the file summarised alone (one MD5 and one SHA-1
//! stream), with the md5 column equal to the one-stream MD5 of the file's data; the same rows
//! come out under a `ulimit -n` that leaves room for only one or two open files.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use dump_core::{DType, hash::md5};

fn opdump(args: &[String]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_opdump"))
        .args(args)
        .output()
        .expect("run opdump");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

fn npy_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            npy_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "npy") {
            out.push(p);
        }
    }
}

/// The files' rows from one `--all` run over all of them, against one run per file.
fn together_equals_alone(files: &[PathBuf]) -> String {
    let mut args = vec!["stats".to_owned(), "--all".to_owned()];
    args.extend(files.iter().map(|p| p.display().to_string()));
    let (code, together, err) = opdump(&args);
    assert_eq!(code, 0, "{err}");
    let mut alone = String::new();
    for (i, f) in files.iter().enumerate() {
        let mut args = vec!["stats".to_owned(), "--all".to_owned()];
        if i > 0 {
            args.push("--no-header".into());
        }
        args.push(f.display().to_string());
        let (code, out, err) = opdump(&args);
        assert_eq!(code, 0, "{}: {err}", f.display());
        alone.push_str(&out);
    }
    assert_eq!(together, alone, "rows of files hashed together differ");
    together
}

/// The md5 column of each row (the header names the column; Shape is the only quoted one).
fn md5_column(csv: &str) -> Vec<String> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header
        .iter()
        .position(|h| h.eq_ignore_ascii_case("md5"))
        .expect("md5 column");
    // Counted from the end (rows end with a comma): the quoted Shape column holds commas.
    let from_end = header.len() - col;
    lines
        .map(|l| {
            let f: Vec<&str> = l.trim_end_matches(',').split(',').collect();
            f[f.len() - from_end].to_owned()
        })
        .collect()
}

fn hex(d: [u8; 16]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Real MindSpore 2.10 output: every tensor file of the reference dumps (hundreds of files,
/// float16 and float32), hashed together and alone.
#[test]
fn reference_dump_rows_are_the_one_stream_rows() {
    let Some(root) = opdump_test_support::reference_dir() else {
        return;
    };
    let mut files = Vec::new();
    npy_files(&root.join("a_tensor_all_io0"), &mut files);
    assert!(files.len() >= 32, "{} files", files.len());
    let csv = together_equals_alone(&files);
    for (f, got) in files.iter().zip(md5_column(&csv)) {
        let npy = dump_npy::NpyReader::open(f).unwrap();
        let bytes = std::fs::read(f).unwrap();
        let data = &bytes[bytes.len() - npy.data_len as usize..];
        assert_eq!(got, hex(md5(data)), "{}", f.display());
    }
}

/// Generated files of mixed sizes (empty to several 256 KiB chunks per lane, more files than
/// lanes), a bf16 tensor widened to `<f4`, and a bad file among them: the bad file is
/// reported and skipped, every other row is the one-stream row.
#[test]
fn mixed_sizes_and_a_bad_file() {
    let dir = std::env::temp_dir().join(format!("opdump-stats-md5-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    let mut x = 0x9e37_79b9_u32;
    for i in 0..41usize {
        let elems = [0usize, 1, 15, 16, 1000, 65_536, 65_537, 300_001][i % 8] + i;
        let data: Vec<u8> = (0..elems)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (((x % 20_011) as f32 - 10_005.0) * 1e-3).to_le_bytes()
            })
            .collect();
        let p = dir.join(format!(
            "MatMul.Default_MatMul-op{i}.0.0.{}.output.0.DefaultFormat.Float32.npy",
            100 + i
        ));
        dump_npy::write_file(&p, DType::Float32, &[elems], &data, Default::default()).unwrap();
        files.push(p);
    }
    let bf: Vec<u8> = (0..70_000u32)
        .flat_map(|i| [0, 0, (i % 251) as u8, 0x3f])
        .collect();
    let p = dir.join("Cast.Default_Cast-op99.0.0.7.output.0.DefaultFormat.BFloat16.npy");
    dump_npy::write_file(&p, DType::Float32, &[70_000], &bf, Default::default()).unwrap();
    files.push(p);
    let csv = together_equals_alone(&files);
    let bf16_md5 = md5(&bf
        .chunks_exact(4)
        .flat_map(|c| [c[2], c[3]])
        .collect::<Vec<u8>>());
    assert_eq!(
        md5_column(&csv).last().unwrap(),
        &hex(bf16_md5),
        "bf16 hashed as bf16"
    );
    // A truncated file among them: an error naming it, exit code 2, the other rows intact.
    let bad = dir.join("bad.npy");
    let good = std::fs::read(&files[7]).unwrap();
    std::fs::write(&bad, &good[..good.len() - 3]).unwrap();
    let mut args = vec!["stats".to_owned(), "--all".to_owned()];
    args.extend(files.iter().map(|p| p.display().to_string()));
    args.insert(10, bad.display().to_string());
    let (code, out, err) = opdump(&args);
    assert_eq!(code, 2);
    assert!(err.contains("bad.npy"), "{err}");
    assert_eq!(out, csv, "the bad file is skipped, the rest unchanged");
    let _ = std::fs::remove_dir_all(&dir);
}

/// 40 files under `ulimit -n 4` and `5` (one or two descriptors beyond stdin, stdout and
/// stderr, where each thread would keep 16 files open): every file is summarised, the rows are
/// those of a run without the limit, exit 0. Before, files that met `EMFILE` failed.
#[test]
fn few_file_descriptors_summarise_every_file() {
    let dir = std::env::temp_dir().join(format!("opdump-stats-nofile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for i in 0..40usize {
        let elems = 30_000 + 1_000 * i;
        let data: Vec<u8> = (0..elems)
            .flat_map(|k| ((k * (i + 1)) as f32 * 0.25 - 7.0).to_le_bytes())
            .collect();
        let p = dir.join(format!(
            "Add.op{i}.0.0.{}.output.0.DefaultFormat.npy",
            100 + i
        ));
        dump_npy::write_file(&p, DType::Float32, &[elems], &data, Default::default()).unwrap();
        files.push(p.display().to_string());
    }
    let mut args = vec!["stats".to_owned(), "--all".to_owned()];
    args.extend(files.iter().cloned());
    let (code, want, err) = opdump(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(want.lines().count(), 41);
    for limit in [4, 5] {
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n {limit} && exec {} stats --all {}",
                env!("CARGO_BIN_EXE_opdump"),
                files.join(" ")
            ))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "ulimit -n {limit}: {err}");
        assert_eq!(
            String::from_utf8(o.stdout).unwrap(),
            want,
            "ulimit -n {limit}: the rows of the unlimited run"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
