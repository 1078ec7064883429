//! `opdump compare` and `opdump inspect` under a `ulimit -n` that leaves only a few file
//! descriptors (the binary as a subprocess, as a user runs it): the read side holds its
//! threads to the descriptors left, so every pair is read and the results are those of a run
//! without the limit. (`stats --all` under the same limits: `cli_stats_md5.rs`.)

use std::{path::Path, process::Command};

use dump_core::DType;

/// A MindSpore-layout dump of 60 float32 tensors (30 kernels, input and output each).
fn dump(root: &Path) {
    let dir = root.join("rank_0/Net/0/0");
    std::fs::create_dir_all(&dir).unwrap();
    for k in 0..30usize {
        for io in ["input", "output"] {
            let elems = 500 + 37 * k;
            let data: Vec<u8> = (0..elems)
                .flat_map(|i| ((i * (k + 1)) as f32 * 0.125 - 3.0).to_le_bytes())
                .collect();
            let p = dir.join(format!(
                "Add.Default_Add-op{k}.0.0.{}.{io}.0.DefaultFormat.Float32.npy",
                1000 + k
            ));
            dump_npy::write_file(&p, DType::Float32, &[elems], &data, Default::default()).unwrap();
        }
    }
}

/// `opdump ARGS` under `ulimit -n limit` (none: no limit): exit code, stdout, stderr.
fn run(limit: Option<u32>, args: &[&str]) -> (Option<i32>, String, String) {
    let cmd = format!(
        "{}exec {} {}",
        limit.map_or(String::new(), |n| format!("ulimit -n {n} && ")),
        env!("CARGO_BIN_EXE_opdump"),
        args.join(" ")
    );
    let o = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn compare_and_inspect_with_few_descriptors() {
    let root = std::env::temp_dir().join(format!("opdump-fds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (a, b) = (root.join("a"), root.join("b"));
    dump(&a);
    dump(&b);
    let (a, b) = (a.display().to_string(), b.display().to_string());
    let compare = ["compare", a.as_str(), b.as_str()];
    let inspect = ["inspect", a.as_str()];
    let (code, want_cmp, err) = run(None, &compare);
    assert_eq!(code, Some(0), "{err}");
    let (code, want_insp, err) = run(None, &inspect);
    assert_eq!(code, Some(0), "{err}");
    // 5: two descriptors beyond stdin, stdout and stderr, one pair's files.
    for limit in [5, 6, 9] {
        let (code, out, err) = run(Some(limit), &compare);
        assert_eq!(code, Some(0), "compare, ulimit -n {limit}: {err}");
        assert_eq!(out, want_cmp, "compare, ulimit -n {limit}");
        assert!(!err.contains("Too many open files"), "{err}");
        let (code, out, err) = run(Some(limit), &inspect);
        assert_eq!(code, Some(0), "inspect, ulimit -n {limit}: {err}");
        assert_eq!(out, want_insp, "inspect, ulimit -n {limit}");
    }
    let _ = std::fs::remove_dir_all(&root);
}
