//! The prerequisites, their probes and the skip-or-fail decision.

use crate::process::run_ok;
use std::{fmt, process::Command, sync::OnceLock};

/// Something a test needs that the repository cannot provide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Prereq {
    /// A runnable `python3`.
    Python3,
    /// `python3` that can `import numpy`.
    Numpy,
    /// `gzip` (reads the gzipped reference manifests).
    Gzip,
    /// A C compiler: `$CC`, else `cc`.
    CCompiler,
    /// `g++` (builds the host C++ kernels and the mock CUDA driver).
    Cxx,
    /// Permission to mount a tmpfs (`mount -t tmpfs`; root in a container that allows it).
    Tmpfs,
    /// Running as root (chown to another user, files root may write whatever their mode).
    Root,
    /// NVRTC, the CUDA runtime compiler. Probed by the test itself ([`check`]): loading it
    /// needs dump-device-cuda.
    Nvrtc,
    /// A usable NVIDIA GPU. Probed by the test itself ([`check`]); required only with
    /// `OPDUMP_REQUIRE_GPU=1`, never by `CI=true` alone.
    Gpu,
    /// The MindSpore 2.10 reference output (`tests/fixtures/reference/` or
    /// `$OPDUMP_REFERENCE_DIR`).
    ReferenceData,
    /// Headless `chromium` (loads the `--html` pages of `inspect` and `compare`).
    Chromium,
    /// The ONNX Runtime shared library named by `ORT_DYLIB_PATH`
    /// (`adapters/dump-ort/ci/fetch-ort.sh` prints one).
    OnnxRuntime,
    /// `python3` that can import torch, torchvision, onnx and onnxscript (exports torch models
    /// with `tools/export_models.py`).
    Torch,
    /// [`Prereq::Torch`] and msprobe (`mindstudio-probe`: dumps torch models with
    /// `tools/msprobe_e2e.py`).
    Msprobe,
    /// A file system beside the build whose cached pages can be dropped (`posix_fadvise`
    /// `DONTNEED`: a disk, not a tmpfs), for tests of reading from disk. Probed by the test
    /// itself ([`check`]).
    DiskPages,
}

impl fmt::Display for Prereq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Prereq::Python3 => "python3",
            Prereq::Numpy => "python3 with numpy",
            Prereq::Gzip => "gzip",
            Prereq::CCompiler => "a C compiler ($CC or cc)",
            Prereq::Cxx => "g++",
            Prereq::Tmpfs => "permission to mount a tmpfs",
            Prereq::Root => "root (effective uid 0)",
            Prereq::Nvrtc => "NVRTC (libnvrtc.so.12)",
            Prereq::Gpu => "a usable NVIDIA GPU",
            Prereq::ReferenceData => "the MindSpore reference data",
            Prereq::Chromium => "chromium (apt-get install chromium)",
            Prereq::OnnxRuntime => "libonnxruntime (ORT_DYLIB_PATH)",
            Prereq::Torch => "python3 with torch, torchvision, onnx and onnxscript",
            Prereq::Msprobe => {
                "python3 with torch, onnx, onnxscript and msprobe (mindstudio-probe)"
            }
            Prereq::DiskPages => "a target directory on a disk (page cache that can be dropped)",
        })
    }
}

const ALL: [Prereq; 15] = [
    Prereq::Python3,
    Prereq::Numpy,
    Prereq::Gzip,
    Prereq::CCompiler,
    Prereq::Cxx,
    Prereq::Tmpfs,
    Prereq::Root,
    Prereq::Nvrtc,
    Prereq::Gpu,
    Prereq::ReferenceData,
    Prereq::Chromium,
    Prereq::OnnxRuntime,
    Prereq::Torch,
    Prereq::Msprobe,
    Prereq::DiskPages,
];

impl Prereq {
    /// How to get it: the command that installs it on a Debian-like machine, or what to do.
    pub fn install_hint(self) -> &'static str {
        match self {
            Prereq::Python3 => "apt-get install python3",
            Prereq::Numpy => "python3 -m pip install numpy (or apt-get install python3-numpy)",
            Prereq::Gzip => "apt-get install gzip",
            Prereq::CCompiler => "apt-get install gcc",
            Prereq::Cxx => "apt-get install g++",
            Prereq::Tmpfs => "run as root where mount is allowed (a privileged container or a VM)",
            Prereq::Root => "run the tests as root",
            Prereq::Nvrtc => {
                "export OPDUMP_NVRTC_LIB_DIR=$(bash dump-device-cuda/ci/fetch-nvrtc.sh)"
            }
            Prereq::Gpu => "a machine with an NVIDIA GPU and OPDUMP_REQUIRE_GPU=1",
            Prereq::ReferenceData => "restore tests/fixtures/reference/ (part of the repository)",
            Prereq::Chromium => "apt-get install chromium",
            Prereq::OnnxRuntime => {
                "export ORT_DYLIB_PATH=$(bash adapters/dump-ort/ci/fetch-ort.sh)"
            }
            Prereq::Torch => {
                "bash tools/install-torch.sh (the pinned torch, torchvision, onnx and onnxscript; CPU \
                 wheels from download.pytorch.org, else PyPI)"
            }
            Prereq::Msprobe => {
                "bash tools/install-msprobe.sh (torch as for Prereq::Torch, then mindstudio-probe==26.2.0)"
            }
            Prereq::DiskPages => {
                "build in a target directory on a disk (CARGO_TARGET_DIR not on a tmpfs)"
            }
        }
    }

    fn index(self) -> usize {
        ALL.iter().position(|p| *p == self).unwrap_or(0)
    }

    /// Probes whether it is there (uncached; [`require`] caches). `Err` says what is missing
    /// or what failed. [`Prereq::Nvrtc`] and [`Prereq::Gpu`] have no probe here: the test
    /// probes them with the device crate and passes the result to [`check`].
    pub fn probe(self) -> Result<(), String> {
        match self {
            Prereq::Python3 => run_ok(Command::new("python3").arg("-V")),
            Prereq::Numpy => run_ok(Command::new("python3").args(["-c", "import numpy"])),
            Prereq::Gzip => run_ok(Command::new("gzip").arg("--version")),
            Prereq::CCompiler => {
                let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
                run_ok(Command::new(cc).arg("--version"))
            }
            Prereq::Cxx => run_ok(Command::new("g++").arg("--version")),
            Prereq::Tmpfs => probe_tmpfs(),
            Prereq::Root => probe_root(),
            Prereq::Nvrtc | Prereq::Gpu | Prereq::DiskPages => Err(format!(
                "{self} has no probe in opdump-test-support; the test must probe it and call check"
            )),
            Prereq::ReferenceData => crate::reference::probe(),
            Prereq::Chromium => run_ok(Command::new("chromium").arg("--version")),
            Prereq::Torch => run_ok(
                Command::new("python3").args(["-c", "import torch, torchvision, onnx, onnxscript"]),
            ),
            Prereq::Msprobe => run_ok(Command::new("python3").args([
                "-c",
                "import torch, onnx, onnxscript; from msprobe.pytorch import PrecisionDebugger",
            ])),
            Prereq::OnnxRuntime => match std::env::var_os("ORT_DYLIB_PATH") {
                Some(p) if std::path::Path::new(&p).is_file() => Ok(()),
                Some(p) if !p.is_empty() => Err(format!("ORT_DYLIB_PATH={p:?} is not a file")),
                _ => Err(
                    "ORT_DYLIB_PATH is not set (adapters/dump-ort/ci/fetch-ort.sh prints \
                          the library of the onnxruntime wheel)"
                        .into(),
                ),
            },
        }
    }
}

/// `true` when a missing `p` must fail the test instead of skipping it: `CI` is `true`, `1`
/// or `yes` (any case), except for [`Prereq::Gpu`]; or `p`'s own variable is `1`
/// (`OPDUMP_REQUIRE_NVRTC`, `OPDUMP_REQUIRE_GPU`).
pub fn required(p: Prereq) -> bool {
    let own = match p {
        Prereq::Nvrtc => Some("OPDUMP_REQUIRE_NVRTC"),
        Prereq::Gpu => Some("OPDUMP_REQUIRE_GPU"),
        _ => None,
    };
    if own.is_some_and(|v| std::env::var(v).as_deref() == Ok("1")) {
        return true;
    }
    p != Prereq::Gpu && in_ci()
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| {
        let v = v.trim().to_ascii_lowercase();
        v == "true" || v == "1" || v == "yes"
    })
}

/// Probes `p` (once per process) and decides: `true` when it is there; otherwise see
/// [`check`].
pub fn require(p: Prereq) -> bool {
    static CACHE: [OnceLock<Result<(), String>>; ALL.len()] =
        [const { OnceLock::new() }; ALL.len()];
    let probe = CACHE[p.index()].get_or_init(|| p.probe()).clone();
    check(p, probe)
}

/// Decides on a probe the test made itself: `true` for `Ok`. For `Err(why)`: panics naming
/// the test, `p` and `why` when [`required`]`(p)`; otherwise prints
/// `SKIP <test>: needs <p>: <why>` to stderr and returns `false`.
pub fn check(p: Prereq, probe: Result<(), String>) -> bool {
    decide(p, probe, true)
}

/// [`check`], with the skip appended to the skip log or not (this crate's own test of the
/// decision fakes a missing prerequisite and must not list it as a skip).
fn decide(p: Prereq, probe: Result<(), String>, log: bool) -> bool {
    let Err(why) = probe else { return true };
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("test");
    if required(p) {
        panic!(
            "{test} needs {p}, which is missing here: {why}. A test that only skipped must not \
             pass in CI (CI=true); install it, or run outside CI to skip"
        );
    }
    eprintln!("SKIP {test}: needs {p}: {why}");
    if log {
        log_skip(test, p, &why);
    }
    false
}

/// The variable naming the file every skip is appended to (`cargo xtask test` sets it and
/// lists the skips at the end of the run, where cargo's output capture cannot hide them).
pub const SKIP_LOG_VAR: &str = "OPDUMP_SKIP_LOG";

/// Appends `test<TAB>prerequisite<TAB>why<TAB>install hint` to the file named by
/// [`SKIP_LOG_VAR`], when it is set. One `write` per line (`O_APPEND`), so the lines of tests
/// running in parallel processes never interleave.
fn log_skip(test: &str, p: Prereq, why: &str) {
    use std::io::Write as _;
    let Some(path) = std::env::var_os(SKIP_LOG_VAR) else {
        return;
    };
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    let line = format!(
        "{}\t{p}\t{}\t{}\n",
        clean(test),
        clean(why),
        p.install_hint()
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// The effective uid from `/proc/self/status` (`Uid: real effective saved fs`) is 0.
fn probe_root() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("reading /proc/self/status: {e}"))?;
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1))
        .ok_or("no Uid line in /proc/self/status")?;
    if euid == "0" {
        Ok(())
    } else {
        Err(format!("running as uid {euid}"))
    }
}

/// Mounts a 64 KiB tmpfs on a fresh directory and unmounts it again.
fn probe_tmpfs() -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!(
        "opdump-tmpfs-probe-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let mounted = crate::process::mount_tmpfs(&dir, "64k");
    if mounted.is_ok() {
        let _ = run_ok(Command::new("umount").arg(&dir));
    }
    let _ = std::fs::remove_dir(&dir);
    mounted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn present_prerequisite_is_true_and_missing_one_skips_or_fails() {
        // `check` with Ok never looks at the environment. The missing case goes through
        // `decide` without the skip log: it is not a real skip.
        assert!(check(Prereq::Numpy, Ok(())));
        let missing = || decide(Prereq::Python3, Err("not installed".into()), false);
        if required(Prereq::Python3) {
            let r = std::panic::catch_unwind(missing);
            let msg = *r
                .expect_err("must fail in CI")
                .downcast::<String>()
                .unwrap();
            assert!(
                msg.contains("python3") && msg.contains("not installed"),
                "{msg}"
            );
        } else {
            assert!(!missing());
        }
    }

    #[test]
    fn every_prerequisite_says_how_to_get_it() {
        for p in ALL {
            assert!(p.install_hint().len() > 8, "{p}");
        }
        assert!(
            Prereq::Chromium
                .install_hint()
                .contains("apt-get install chromium")
        );
    }

    #[test]
    fn gpu_is_never_required_by_ci_alone() {
        if std::env::var("OPDUMP_REQUIRE_GPU").as_deref() != Ok("1") {
            assert!(!required(Prereq::Gpu));
        }
    }

    #[test]
    fn every_prerequisite_has_a_distinct_slot_and_name() {
        for (i, p) in ALL.iter().enumerate() {
            assert_eq!(p.index(), i);
            assert!(!p.to_string().is_empty());
        }
        let names: std::collections::HashSet<String> = ALL.iter().map(|p| p.to_string()).collect();
        assert_eq!(names.len(), ALL.len());
    }

    #[test]
    fn a_program_that_does_not_exist_is_an_error_naming_it() {
        let e = run_ok(&mut Command::new("opdump-no-such-program-xyz")).unwrap_err();
        assert!(e.contains("opdump-no-such-program-xyz"), "{e}");
        assert!(run_ok(Command::new("sh").args(["-c", "exit 0"])).is_ok());
        let e = run_ok(Command::new("sh").args(["-c", "echo boom >&2; exit 3"])).unwrap_err();
        assert!(e.contains("boom"), "{e}");
    }
}
