//! `opdump stats`: rows for existing npy files, byte-identical to the Dumper's statistic.csv.

use std::{fs, path::PathBuf};

use dump_core::DType;
use dump_host::{DumpOptions, Dumper, TensorRef};
use opdump::cli;
use opdump_tests::{
    config::{ALL_CATEGORIES, config, f32_bytes, no_env},
    fsutil::{TempDir, file_name, npy_files},
    tinynet,
};
use serde_json::json;

/// Runs `opdump ARGS...` in-process: (exit code, stdout, stderr).
fn opdump(args: &[&str]) -> (i32, String, String) {
    let mut argv = vec!["opdump"];
    argv.extend_from_slice(args);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli::run(argv, &no_env(), &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn stats_reproduces_the_dumpers_statistic_csv_byte_for_byte() {
    let tmp = TempDir::new("stats");
    let cfg = config(
        tmp.path(),
        json!({"net_name": "TinyNet", "saved_data": "full", "statistic_category": ALL_CATEGORIES}),
        json!({}),
    );
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)
        .unwrap();
    d.begin_graph(0, &tinynet::execution_order()).unwrap();
    let step = d.begin_step();
    tinynet::run_step(&step).unwrap();
    // A name longer than 255 bytes: stored under a short name, found through mapping.csv.
    let long = format!("Default/{}/Add-op9", "deep-scope/".repeat(25));
    let k = step.kernel("Add", &long).unwrap();
    k.output(
        0,
        TensorRef::host(DType::Float32, &[3], &f32_bytes(&[1.0, -0.0, 2.5])),
    )
    .unwrap();
    drop(k);
    // A comma in a name: the file keeps it, rows (Dumper's and stats') get `_`.
    let k = step.kernel("Add", "Default/x,y/Add-op7").unwrap();
    k.output(0, TensorRef::host(DType::Float32, &[1], &f32_bytes(&[4.0])))
        .unwrap();
    drop(k);
    step.finish().unwrap();
    d.close().unwrap();
    let dir = tmp.path().join("rank_0/TinyNet/0/0");
    let csv = fs::read_to_string(dir.join("statistic.csv")).unwrap();
    let mapping = fs::read_to_string(dir.join("mapping.csv")).unwrap();
    let files = npy_files(&dir);
    // The files in row order: each row's timestamp names its file.
    let ordered: Vec<PathBuf> = csv
        .lines()
        .skip(1)
        .map(|row| {
            let ts = row.split(',').nth(4).unwrap();
            let needle = format!(".{ts}.");
            if let Some(p) = files.iter().find(|p| file_name(p).contains(&needle)) {
                return p.clone();
            }
            let short = mapping
                .lines()
                .find(|l| l.contains(&needle))
                .and_then(|l| l.split_once(','))
                .map(|(s, _)| s)
                .unwrap_or_else(|| panic!("no file for {ts}"));
            dir.join(short)
        })
        .collect();
    assert_eq!(ordered.len(), files.len());
    assert!(
        files
            .iter()
            .any(|p| file_name(p).ends_with(".BFloat16.npy"))
    );
    // The Dumper wrote all 13 columns: `--all` asks for the same.
    let mut args = vec!["stats".to_owned(), "--all".to_owned()];
    args.extend(ordered.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = opdump(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, csv, "same bytes as the Dumper's statistic.csv");
}

#[test]
fn categories_header_flag_neutral_names_and_errors() {
    let tmp = TempDir::new("stats2");
    let plain = tmp.path().join("weights,v2.npy");
    dump_npy::write_file(
        &plain,
        DType::Float32,
        &[2, 2],
        &f32_bytes(&[1.0, 2.0, 3.0, -4.0]),
        Default::default(),
    )
    .unwrap();
    let garbage = tmp
        .path()
        .join("Add.Default_Add-op0.0.0.1.output.0.DefaultFormat.Float32.npy");
    fs::write(&garbage, b"\x93NUMPY\x01\x00garbage").unwrap();
    let missing = tmp.path().join("missing.npy");
    let (p, g, m) = (
        plain.display().to_string(),
        garbage.display().to_string(),
        missing.display().to_string(),
    );

    let (code, out, err) = opdump(&["stats", "--category", "max", "--category", "md5", &p]);
    assert_eq!(code, 0, "{err}");
    let md5 = dump_core::hash::hex(&dump_core::hash::md5(&f32_bytes(&[1.0, 2.0, 3.0, -4.0])));
    assert_eq!(
        out,
        format!(
            "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,MD5\n\
             ,weights_v2,0,0,0,output,0,16,float32,\"(2,2)\",3,{},\n",
            md5.as_str()
        ),
        "neutral fields for a name not in MindSpore's form"
    );

    let (code, out, err) = opdump(&["stats", "--no-header", &m, &g, &p]);
    assert_eq!(code, 2, "failures give exit code 2");
    assert_eq!(
        out.lines().count(),
        1,
        "the good file still gets its row: {out}"
    );
    assert!(out.starts_with(",weights_v2,"), "{out}");
    assert!(
        err.contains(&m) && err.contains(&g),
        "errors name the files: {err}"
    );
    assert!(err.contains("2 of 3"), "{err}");

    // Default columns: the 11 value columns, no digest.
    let (code, out, err) = opdump(&["stats", &p]);
    assert_eq!(code, 0, "{err}");
    let header = out.lines().next().unwrap();
    assert!(
        header.ends_with(",Shape,Max Value,Min Value,Avg Value,Count,Negative Zero Count,Positive Zero Count,NaN Count,Negative Inf Count,Positive Inf Count,Zero Count,L2Norm Value"),
        "{header}"
    );
    assert_eq!(
        out.lines().nth(1),
        Some(",weights_v2,0,0,0,output,0,16,float32,\"(2,2)\",3,-4,0.5,4,1,3,0,0,0,0,5.47723,")
    );
    // `--all` adds md5 and MindSpore's sha1; it cannot be mixed with --category.
    let (code, out, err) = opdump(&["stats", "--all", &p]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().next().unwrap().contains(",MD5,"), "{out}");
    assert!(out.contains(md5.as_str()), "{out}");
    let (code, _, err) = opdump(&["stats", "--all", "--category", "max", &p]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--all"), "{err}");

    let (code, _, err) = opdump(&["stats", "--category", "mean", &p]);
    assert_eq!(code, 2);
    assert!(err.contains("mean"), "{err}");

    let (code, out, _) = opdump(&["stats", "--help"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("--category") && out.contains("--no-header"),
        "{out}"
    );
    assert!(out.contains("statistic.csv"), "{out}");
}

#[test]
fn stats_matches_the_dumper_for_every_widened_or_plain_dtype() {
    // Int4/UInt4/UInt1 are stored unpacked (|i1, |u1) and bf16 and float8 as <f4: without
    // digests (which hash the stored bytes for them) stats must still give the Dumper's rows.
    let cats = [
        "max",
        "min",
        "avg",
        "count",
        "zero count",
        "negative zero count",
        "l2norm",
    ];
    let tmp = TempDir::new("stats-dtypes");
    let cfg = config(
        tmp.path(),
        json!({"saved_data": "full", "statistic_category": cats}),
        json!({}),
    );
    let mut d = Dumper::builder()
        .env(&no_env())
        .options(DumpOptions::default())
        .open_json(cfg)
        .unwrap();
    d.begin_graph(0, &[]).unwrap();
    let tensors: Vec<(DType, Vec<usize>, Vec<u8>)> = vec![
        (DType::Int4, vec![2, 3], vec![0x7f, 0x08, 0x31]),
        (DType::UInt1, vec![10], vec![0b1010_0110, 0b11]),
        // uint4 [1, 15, 7] (|u1); float8 widened to <f4: e5m2 +inf, 1, -2, NaN, 2^-16 and
        // e4m3fn 448, -448, 1, -0.
        (DType::UInt4, vec![3], vec![0xf1, 0x07]),
        (
            DType::Float8E5M2,
            vec![5],
            vec![0x7c, 0x3c, 0xc0, 0x7d, 0x01],
        ),
        (
            DType::Float8E4M3FN,
            vec![2, 2],
            vec![0x7e, 0xfe, 0x38, 0x80],
        ),
        // FNUZ: e4m3fnuz 240, NaN (0x80, not -0), 1, 0; e5m2fnuz -57344, 2^-17, 2.0.
        (DType::Float8E4M3FNUZ, vec![4], vec![0x7f, 0x80, 0x40, 0x00]),
        (DType::Float8E5M2FNUZ, vec![3], vec![0xff, 0x01, 0x44]),
        (
            DType::BFloat16,
            vec![3],
            [0x3fc0u16, 0x8000, 0xc020]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        (
            DType::Float16,
            vec![2],
            [0x3c00u16, 0xfc00]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        (DType::Bool, vec![3], vec![1, 0, 1]),
        (
            DType::Int64,
            vec![2],
            [-5i64, 9].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        (DType::UInt8, vec![], vec![200]),
    ];
    let step = d.begin_step();
    for (i, (dt, shape, bytes)) in tensors.iter().enumerate() {
        let name = format!("Default/Op-op{i}");
        let k = step.kernel("Op", &name).unwrap();
        k.output(0, TensorRef::host(*dt, shape, bytes)).unwrap();
    }
    step.finish().unwrap();
    d.close().unwrap();
    let dir = tmp.path().join("rank_0/Net/0/0");
    let csv = fs::read_to_string(dir.join("statistic.csv")).unwrap();
    let files = npy_files(&dir);
    assert_eq!(files.len(), tensors.len());
    let mut args: Vec<String> = vec!["stats".into()];
    for c in cats {
        args.push("--category".into());
        args.push(c.into());
    }
    for row in csv.lines().skip(1) {
        let ts = row.split(',').nth(4).unwrap();
        let f = files
            .iter()
            .find(|p| file_name(p).contains(&format!(".{ts}.")))
            .unwrap();
        args.push(f.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = opdump(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, csv);
    for dt in [
        "int4",
        "uint1",
        "uint4",
        "float8_e5m2",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "bfloat16",
        "float16",
        "bool",
        "int64",
        "uint8",
    ] {
        assert!(out.contains(&format!(",{dt},")), "{dt} reported: {out}");
    }
}

#[test]
fn hostile_file_names_give_one_whole_row() {
    let tmp = TempDir::new("stats-hostile");
    let p = tmp
        .path()
        .join("Add.a\nb,c d.0.0.5.output.0.DefaultFormat.Float32.npy");
    dump_npy::write_file(
        &p,
        DType::Float32,
        &[1],
        &f32_bytes(&[2.0]),
        Default::default(),
    )
    .unwrap();
    let path = p.display().to_string();
    let (code, out, err) = opdump(&["stats", "--no-header", "--category", "max", &path]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Add,a_b_c_d,0,0,5,output,0,4,float32,\"(1)\",2,\n");
}
