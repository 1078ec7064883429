//! `opdump convert` as a subprocess when writing fails or the process dies: a full file system
//! (ENOSPC), a read-only output directory (EROFS), SIGKILL in the middle of a run, and the
//! umask. Every output file appears under its final name whole or not at all: no partial
//! `.npy`, no hidden temporary file left behind, an earlier run's files kept, and each error
//! names the output file and the OS error.
//!
//! The file-system cases need `mount` (root, as on the CI and dev machines); without it they
//! print why they skip, and fail when `CI=true`.

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use dump_device_ascend::dumpfile::{
    CannDType, CannFormat, Container, DumpHeader, TensorKind, TensorMeta, encode,
};
use dump_npy::NpyReader;
use opdump_test_support::{KillOnDrop, Tmpfs};

/// NC1HWC0 device shape of every generated tensor: 512 KiB of FLOAT16, NCHW (1, 60, 64, 64).
const DEV: [u64; 5] = [1, 4, 64, 64, 16];
const HOST: [u64; 4] = [1, 60, 64, 64];

/// Bytes of one converted `.npy` (the host data; the header is checked by the reader).
const HOST_BYTES: u64 = 60 * 64 * 64 * 2;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-cvfault-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// `count` CANN dump files, one FLOAT16 NC1HWC0 input each, in a fresh directory.
fn inputs(name: &str, count: usize) -> PathBuf {
    let dir = tmpdir(name);
    let n: u64 = DEV.iter().product();
    for k in 0..count {
        let meta = TensorMeta {
            kind: TensorKind::Input,
            index: 0,
            ordinal: 0,
            data_type: CannDType::FLOAT16,
            format: CannFormat(3),
            sub_format: 0,
            shape: DEV.to_vec(),
            original_shape: Some(HOST.to_vec()),
            size: n * 2,
            offset: 0,
            address: 0,
            address_offset: 0,
            arg_index: Some(0),
            input_type: 0,
            buffer_type: 0,
            original_op: None,
            dim_range: Vec::new(),
        };
        let header = DumpHeader {
            container: Container::Binary { message_len: 0 },
            version: "2.0".into(),
            dump_time: 1_700_000_000_000_000 + k as u64,
            op_name: format!("Default/conv{k}"),
            attrs: Vec::new(),
            dfx_message: String::new(),
            tensors: vec![meta],
            file_len: 0,
            payload_end: 0,
        };
        let data: Vec<u8> = (0..n)
            .flat_map(|i| ((i as u16).wrapping_mul(31) ^ k as u16).to_le_bytes())
            .collect();
        let file = dir.join(format!("Conv2D.conv{k}.{k}.0.17000000000{k:05}"));
        fs::write(&file, encode(&header, &[&data]).unwrap()).unwrap();
    }
    dir
}

fn convert(args: &[&Path], extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_opdump"));
    c.arg("convert").args(args).args(extra);
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(Stdio::null()).output().expect("run opdump")
}

/// Every name in `dir` (sorted).
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every file in `dir` is a whole converted `.npy` (no temporary or partial file); returns
/// how many there are.
fn all_whole(dir: &Path) -> usize {
    let listed = names(dir);
    for n in &listed {
        assert!(
            !n.starts_with('.') && n.ends_with(".1x60x64x64.npy"),
            "only final .npy names in {}: {listed:?}",
            dir.display()
        );
        let p = dir.join(n);
        let r = NpyReader::open(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(r.data_len, HOST_BYTES, "{}", p.display());
        let file_len = fs::metadata(&p).unwrap().len();
        assert!(
            file_len > HOST_BYTES && file_len < HOST_BYTES + 1024,
            "{} is {file_len} bytes",
            p.display()
        );
    }
    listed.len()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A 2 MiB tmpfs holds three of the twelve outputs: the others fail with ENOSPC, each error
/// naming the file being written, and what is left is only whole files (an earlier run's
/// output among them, kept), with no temporary file: on the default path (unnamed files) and
/// on the named-temporary fallback (`OPDUMP_NAMED_TEMPORARIES`), whose temporaries the failed
/// writes must remove. Before, each failed write left a hidden `.NAME.tmp-PID` file holding
/// the bytes written so far.
#[test]
fn a_full_file_system_leaves_only_whole_files_and_keeps_the_earlier_ones() {
    let src = inputs("enospc-src", 12);
    let first = src.join("Conv2D.conv0.0.0.1700000000000000");
    for named in ["0", "1"] {
        let mount = std::env::temp_dir().join(format!(
            "opdump-cvfault-{}-enospc-{named}",
            std::process::id()
        ));
        let Some(fs_) = Tmpfs::mount(&mount, "2m") else {
            return;
        };
        let out = fs_.path().join("out");
        let env = [("OPDUMP_NAMED_TEMPORARIES", named)];
        let o = convert(
            &[&first],
            &["--out", out.to_str().unwrap(), "--format", "NCHW"],
            &env,
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let kept = out.join(&names(&out)[0]);
        let before = fs::read(&kept).unwrap();
        let o = convert(
            &[&src],
            &[
                "--out",
                out.to_str().unwrap(),
                "--format",
                "NCHW",
                "--threads",
                "2",
            ],
            &env,
        );
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        let enospc: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("No space left on device (os error 28)"))
            .collect();
        assert!(!enospc.is_empty(), "{err}");
        for l in &enospc {
            assert!(
                l.contains(&format!("writing {}/Conv2D.conv", out.display())),
                "the error names the output file: {l}"
            );
        }
        let whole = all_whole(&out);
        assert!((1..12).contains(&whole), "{whole} whole files:\n{err}");
        assert_eq!(fs::read(&kept).unwrap(), before, "the earlier file is kept");
        drop(fs_);
        let _ = fs::remove_dir(&mount);
    }
    let _ = fs::remove_dir_all(&src);
}

/// A read-only output directory: exit 2, every file's error names the file it could not
/// create and EROFS, and nothing is written.
#[test]
fn a_read_only_output_directory_is_an_error_naming_each_file() {
    let src = inputs("erofs-src", 2);
    let mount = std::env::temp_dir().join(format!("opdump-cvfault-{}-erofs", std::process::id()));
    let Some(fs_) = Tmpfs::mount(&mount, "1m") else {
        return;
    };
    let out = fs_.path().join("out");
    fs::create_dir(&out).unwrap();
    fs_.remount_read_only().expect("remount read-only");
    let o = convert(
        &[&src],
        &["--out", out.to_str().unwrap(), "--format", "NCHW"],
        &[],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for k in 0..2 {
        assert!(
            err.contains(&format!("creating {}/Conv2D.conv{k}.", out.display()))
                && err.contains("Read-only file system (os error 30)"),
            "{err}"
        );
    }
    assert!(err.contains("2 inputs could not be converted"), "{err}");
    assert_eq!(names(&out), Vec::<String>::new());
    drop(fs_);
    let _ = fs::remove_dir(&mount);
    let _ = fs::remove_dir_all(&src);
}

/// SIGKILL while converting: every file under a final name is whole and no temporary file is
/// left (outputs are unnamed until they are complete). The input grows until the kill lands
/// mid-run.
#[test]
fn sigkill_mid_convert_leaves_only_whole_files() {
    let mut count = 200;
    loop {
        let src = inputs("kill-src", count);
        let out = tmpdir("kill-out");
        let mut child = KillOnDrop(
            Command::new(env!("CARGO_BIN_EXE_opdump"))
                .arg("convert")
                .arg(&src)
                .args(["--out", out.to_str().unwrap(), "--format", "NCHW"])
                .args(["--threads", "1"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start opdump convert"),
        );
        let start = Instant::now();
        let mut finished = false;
        while names(&out).len() < 2 {
            if child.0.try_wait().unwrap().is_some() {
                finished = true;
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "no output after 120 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        if !finished {
            child.0.kill().expect("SIGKILL");
            let status = child.0.wait().unwrap();
            finished = status.success();
        }
        let whole = all_whole(&out);
        let _ = fs::remove_dir_all(&src);
        let _ = fs::remove_dir_all(&out);
        if !finished {
            assert!((2..count).contains(&whole), "{whole} of {count}");
            return;
        }
        assert!(
            count < 3200,
            "convert of {count} files ended before it could be killed"
        );
        count *= 2;
    }
}

/// Output files get `0o644` less the umask, as files `convert` created before (their mode is
/// set when they are linked into place).
#[test]
fn output_files_follow_the_umask() {
    let src = inputs("umask-src", 1);
    for (umask, want) in [("022", 0o644), ("077", 0o600)] {
        let out = tmpdir(&format!("umask-{umask}"));
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "umask {umask} && exec \"$0\" convert \"$1\" --out \"$2\" --format NCHW"
            ))
            .arg(env!("CARGO_BIN_EXE_opdump"))
            .arg(&src)
            .arg(&out)
            .output()
            .expect("run sh");
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(all_whole(&out), 1);
        let p = out.join(&names(&out)[0]);
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, want, "umask {umask}: {}", p.display());
        let _ = fs::remove_dir_all(&out);
    }
    let _ = fs::remove_dir_all(&src);
}
