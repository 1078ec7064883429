//! A pair whose file cannot be read is unreadable, never divergent: when the file was already
//! broken as the dump was listed (its record says why) and when it broke between listing and
//! comparing (the read fails). A statistic row still lets such a tensor be compared by its
//! statistics.

use std::path::{Path, PathBuf};

use dump_read::{
    Dump,
    compare::{Divergence, Tolerances, compare},
};

const NAME: &str = "Add.Add-op1.0.0.1.output.0.DefaultFormat.float32.npy";

fn npy_f32(v: &[f32]) -> Vec<u8> {
    let mut b = vec![0u8; 128];
    let n = dump_npy::encode_header("<f4", &[v.len()], &mut b).unwrap();
    b.truncate(n);
    b.extend(v.iter().flat_map(|x| x.to_le_bytes()));
    b
}

/// A one-tensor MindSpore tree under `root` (with a statistic row when `row`); the tensor's
/// file.
fn tree(root: &Path, row: bool) -> PathBuf {
    let it = root.join("rank_0/Net/0/0");
    std::fs::create_dir_all(&it).unwrap();
    std::fs::write(it.join(NAME), npy_f32(&[1.0, 2.0, 3.0, 4.0])).unwrap();
    if row {
        std::fs::write(
            it.join("statistic.csv"),
            "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,Avg Value,Count,Negative Zero Count,Positive Zero Count,NaN Count,Negative Inf Count,Positive Inf Count,Zero Count\n\
             Add,Add-op1,0,0,1,output,0,16,float32,\"(4)\",4,1,2.5,4,0,0,0,0,0,0\n",
        )
        .unwrap();
    }
    it.join(NAME)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "dump-read-unreadable-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn cut(file: &Path) {
    let len = std::fs::metadata(file).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .unwrap()
        .set_len(len - 4)
        .unwrap();
}

fn only_pair(a: &Dump, b: &Dump) -> dump_read::compare::PairResult {
    let c = compare(a, b, &Tolerances::default(), 1, &|_, _| {});
    assert_eq!(c.pairs.len(), 1, "{:?}", c.pairs);
    assert_eq!(
        c.first_divergent, None,
        "an unreadable pair is no divergence"
    );
    c.pairs.into_iter().next().unwrap()
}

fn reason(p: &dump_read::compare::PairResult) -> &str {
    match p.reasons.as_slice() {
        [Divergence::Unreadable(e)] => e,
        other => panic!("expected one Unreadable reason, got {other:?}"),
    }
}

#[test]
fn broken_before_listing_and_broken_after_listing_are_both_unreadable() {
    let root = tmp("files");
    let (a, b) = (root.join("a"), root.join("b"));
    tree(&a, false);
    let fb = tree(&b, false);
    let da = Dump::open(&a).unwrap();
    let db = Dump::open(&b).unwrap();
    assert!(!only_pair(&da, &db).unreadable(), "intact files compare");
    // Broken after listing: the read fails.
    cut(&fb);
    let p = only_pair(&da, &db);
    assert!(p.unreadable() && !p.diverged(), "{p:?}");
    assert!(
        reason(&p).contains("truncated") || reason(&p).contains("36"),
        "{}",
        reason(&p)
    );
    // Broken before listing: the record says why, with the file.
    let db = Dump::open(&b).unwrap();
    let t = &db.tensors[0];
    let why = t
        .unreadable
        .as_deref()
        .expect("the record keeps the reason");
    assert!(why.starts_with(&fb.display().to_string()), "{why}");
    let p = only_pair(&da, &db);
    assert!(p.unreadable() && !p.diverged(), "{p:?}");
    assert!(
        reason(&p).starts_with("B: ") && reason(&p).contains(NAME),
        "{}",
        reason(&p)
    );
    // The same the other way round: A's side is named.
    let p = only_pair(&db, &da);
    assert!(reason(&p).starts_with("A: "), "{}", reason(&p));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_statistic_row_still_compares_a_tensor_whose_file_is_broken() {
    let root = tmp("row");
    let (a, b) = (root.join("a"), root.join("b"));
    tree(&a, true);
    let fb = tree(&b, true);
    cut(&fb);
    let da = Dump::open(&a).unwrap();
    let db = Dump::open(&b).unwrap();
    assert!(db.tensors[0].unreadable.is_some());
    let c = compare(&da, &db, &Tolerances::default(), 1, &|_, _| {});
    assert_eq!(c.pairs.len(), 1);
    let p = &c.pairs[0];
    assert!(!p.unreadable(), "the row's statistics are compared: {p:?}");
    assert!(!p.diverged(), "the same statistics: {p:?}");
    let _ = std::fs::remove_dir_all(&root);
}
