//! The `acl` backend against a mock of the ACL / aclnn libraries (`tests/mock/acl_mock.c`,
//! compiled here with `cc -shared -fPIC`): marshalling, call order, workspace allocation,
//! error mapping, and equality with the simulated backend for every supported dtype.
#![cfg(feature = "acl")]

use dump_core::DType;
use dump_device_ascend::Error;
use dump_device_ascend::acl::{AclApi, AclBackend, AclStatusKind, LibPaths, NNOPBASE, OPAPI};
use dump_device_ascend::device_stats::Simulated;
use dump_stats::{CategorySet, DeviceStats, Precision};
use std::ffi::{c_char, c_int, c_long, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The mock's global state (call log, failure injection) is shared: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Compiles the mock with `extra` flags into the target's test tmp dir; `None` (with a SKIP
/// line; a failure with `CI=true`) when there is no C compiler.
fn build_mock(name: &str, extra: &[&str]) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mock/acl_mock.c");
    let out =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}.so", std::process::id()));
    if !opdump_test_support::require(opdump_test_support::Prereq::CCompiler) {
        return None;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .args(extra)
        .arg("-lm")
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("{cc} failed to compile the mock: {s}"),
        Err(e) => panic!("{cc}: {e}"),
    }
}

fn mock_path() -> Option<&'static Path> {
    static PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PATH.get_or_init(|| build_mock("libacl_mock", &[]))
        .as_deref()
}

fn paths(p: &Path) -> LibPaths {
    LibPaths {
        ascendcl: p.to_path_buf(),
        nnopbase: p.to_path_buf(),
        opapi: p.to_path_buf(),
    }
}

/// The mock's control functions (same loaded object as the backend's, so same state).
struct Mock {
    _lib: libloading::Library,
    reset: unsafe extern "C" fn(),
    log: unsafe extern "C" fn(*mut c_char, usize) -> usize,
    fail: unsafe extern "C" fn(*const c_char, c_int),
    set_wide: unsafe extern "C" fn(c_int),
    live: unsafe extern "C" fn() -> c_long,
}

impl Mock {
    fn open(p: &Path) -> Mock {
        // SAFETY: the mock is our own C file; the signatures below match its definitions.
        unsafe {
            let lib = libloading::Library::new(p).unwrap();
            Mock {
                reset: *lib.get(b"mock_reset").unwrap(),
                log: *lib.get(b"mock_log").unwrap(),
                fail: *lib.get(b"mock_fail").unwrap(),
                set_wide: *lib.get(b"mock_set_wide").unwrap(),
                live: *lib.get(b"mock_live").unwrap(),
                _lib: lib,
            }
        }
    }
    fn reset(&self) {
        // SAFETY: no arguments.
        unsafe { (self.reset)() }
    }
    fn log(&self) -> String {
        let mut buf = vec![0u8; 1 << 16];
        // SAFETY: `buf` has the capacity passed.
        let n = unsafe { (self.log)(buf.as_mut_ptr().cast(), buf.len()) };
        String::from_utf8(buf[..n.min(buf.len())].to_vec()).unwrap()
    }
    fn fail(&self, name: &str, status: i32) {
        let c = std::ffi::CString::new(name).unwrap();
        // SAFETY: a NUL-terminated string, copied by the mock.
        unsafe { (self.fail)(c.as_ptr(), status) }
    }
    fn set_wide(&self, wide: bool) {
        // SAFETY: plain int.
        unsafe { (self.set_wide)(c_int::from(wide)) }
    }
    fn live(&self) -> c_long {
        // SAFETY: no arguments.
        unsafe { (self.live)() }
    }
}

fn all4() -> CategorySet {
    CategorySet::parse(["max", "min", "avg", "l2norm"]).unwrap()
}

fn texts(s: &DeviceStats) -> [String; 4] {
    [s.max, s.min, s.avg, s.l2norm].map(|v| v.to_string())
}

/// "Device" statistics through the backend over host memory (the mock dereferences it).
fn on_mock(
    b: &AclBackend,
    dtype: DType,
    data: &mut [u8],
    shape: &[usize],
) -> Result<Option<DeviceStats>, Error> {
    // SAFETY: for the mock a device address is a host address; `data` holds the shape.
    unsafe { b.statistics(data.as_mut_ptr().cast::<c_void>(), dtype, shape, &all4()) }
}

/// xorshift64*: deterministic test data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// A value in [-scale, scale) that is never -0.0.
    fn float(&mut self, scale: f64) -> f64 {
        let v = ((self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale;
        if v == 0.0 { 0.0 } else { v }
    }
}

fn encode(dtype: DType, vals: &[f64], ints: &[i64]) -> Vec<u8> {
    match dtype {
        DType::Float16 => vals
            .iter()
            .flat_map(|&v| half::f16::from_f64(v).to_le_bytes())
            .collect(),
        DType::BFloat16 => vals
            .iter()
            .flat_map(|&v| half::bf16::from_f64(v).to_le_bytes())
            .collect(),
        DType::Float32 => vals
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect(),
        DType::Float64 => vals.iter().flat_map(|&v| v.to_le_bytes()).collect(),
        DType::Bool => ints.iter().map(|&v| u8::from(v & 1 == 1)).collect(),
        DType::Int8 => ints.iter().map(|&v| v as i8 as u8).collect(),
        DType::UInt8 => ints.iter().map(|&v| v as u8).collect(),
        DType::Int16 => ints
            .iter()
            .flat_map(|&v| (v as i16).to_le_bytes())
            .collect(),
        DType::Int32 => ints
            .iter()
            .flat_map(|&v| (v as i32).to_le_bytes())
            .collect(),
        DType::Int64 => ints.iter().flat_map(|&v| v.to_le_bytes()).collect(),
        other => panic!("no encoder for {other}"),
    }
}

const SUPPORTED: [DType; 10] = [
    DType::Bool,
    DType::Int8,
    DType::UInt8,
    DType::Int16,
    DType::Int32,
    DType::Int64,
    DType::Float16,
    DType::BFloat16,
    DType::Float32,
    DType::Float64,
];

#[test]
fn acl_equals_simulated_for_every_supported_dtype() {
    let _g = serial();
    let Some(p) = mock_path() else { return };
    let mock = Mock::open(p);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let inf = f64::INFINITY;
    for precision in [Precision::High, Precision::Low] {
        let backend = AclBackend::new(AclApi::load_from_paths(&paths(p)).unwrap(), precision);
        let sim = Simulated::new(precision);
        mock.set_wide(precision == Precision::High);
        for dtype in SUPPORTED {
            let shapes: [&[usize]; 5] = [&[1], &[3], &[2, 3, 4], &[5000], &[]];
            let mut cases: Vec<(Vec<usize>, Vec<f64>)> = shapes
                .iter()
                .enumerate()
                .map(|(k, s)| {
                    let n: usize = s.iter().product();
                    let scale = [1.0, 100.0, 3.0, 40000.0, 7.0][k];
                    (s.to_vec(), (0..n).map(|_| rng.float(scale)).collect())
                })
                .collect();
            if dtype.is_float() {
                // spec §10 cases and NaN.
                for v in [
                    vec![40000.0; 3],
                    vec![1.0, 2.0, inf],
                    vec![inf; 3],
                    vec![-inf; 3],
                    vec![1.0, f64::NAN, -3.0],
                ] {
                    cases.push((vec![v.len()], v));
                }
            }
            for (shape, vals) in cases {
                let ints: Vec<i64> = vals.iter().map(|&v| v as i64).collect();
                let mut data = encode(dtype, &vals, &ints);
                mock.reset();
                let n = shape.iter().product();
                let got = on_mock(&backend, dtype, &mut data, &shape)
                    .unwrap()
                    .unwrap();
                let want = sim.statistics(dtype, &data, n).unwrap().unwrap();
                assert_eq!(texts(&got), texts(&want), "{dtype} {precision} {shape:?}");
                assert_eq!(mock.live(), 0, "leak: {}", mock.log());
            }
        }
    }
}

#[test]
fn call_sequence_and_workspaces() {
    let _g = serial();
    let Some(p) = mock_path() else { return };
    let mock = Mock::open(p);
    mock.reset();
    mock.set_wide(true);
    let b = AclBackend::new(AclApi::load_from_paths(&paths(p)).unwrap(), Precision::High);
    let mut data = encode(DType::Float32, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[]);
    let s = on_mock(&b, DType::Float32, &mut data, &[2, 3])
        .unwrap()
        .unwrap();
    assert_eq!(texts(&s), ["6", "1", "3.5", "9.53939"]);
    let per_op = |ws: &str, run: &str, workspace: bool| {
        let mut s = format!("aclrtMalloc;aclCreateTensor;{ws};");
        if workspace {
            s.push_str("aclrtMalloc;");
        }
        s.push_str(&format!("{run};aclrtSynchronizeStream;aclrtMemcpy;"));
        if workspace {
            s.push_str("aclrtFree;");
        }
        s + "aclDestroyTensor;aclrtFree;"
    };
    let expected = [
        "aclCreateTensor;aclCreateIntArray;aclCreateScalar;".to_string(),
        per_op("aclnnAmaxGetWorkspaceSize", "aclnnAmax", false),
        per_op("aclnnAminGetWorkspaceSize", "aclnnAmin", false),
        per_op("aclnnMeanGetWorkspaceSize", "aclnnMean", true),
        per_op("aclnnNormGetWorkspaceSize", "aclnnNorm", true),
        "aclDestroyScalar;aclDestroyIntArray;aclDestroyTensor;".to_string(),
    ]
    .concat();
    assert_eq!(mock.log(), expected);
    assert_eq!(mock.live(), 0);

    // Only the configured columns run, and unsupported pairs never reach the device.
    mock.reset();
    let cols = CategorySet::parse(["max", "l2norm", "count"]).unwrap();
    let mut ints = encode(DType::Int32, &[], &[4, -2, 9]);
    // SAFETY: host memory stands in for device memory in the mock.
    let s = unsafe { b.statistics(ints.as_mut_ptr().cast(), DType::Int32, &[3], &cols) }
        .unwrap()
        .unwrap();
    assert_eq!(texts(&s), ["9", "null", "null", "null"]);
    assert!(
        !mock.log().contains("Norm") && !mock.log().contains("Amin"),
        "{}",
        mock.log()
    );

    // Empty tensors and dtypes without kernels make no calls.
    mock.reset();
    assert_eq!(on_mock(&b, DType::Float32, &mut [], &[0, 3]).unwrap(), None);
    let mut c = [0u8; 8];
    let s = on_mock(&b, DType::Complex64, &mut c, &[1])
        .unwrap()
        .unwrap();
    assert_eq!(texts(&s), ["null", "null", "null", "null"]);
    assert_eq!(mock.log(), "");
}

#[test]
fn failures_map_to_errors_and_release_everything() {
    let _g = serial();
    let Some(p) = mock_path() else { return };
    let mock = Mock::open(p);
    mock.set_wide(true);
    let b = AclBackend::new(AclApi::load_from_paths(&paths(p)).unwrap(), Precision::High);
    let mut data = encode(DType::Float16, &[1.0, 2.0], &[]);
    for (call, status, kind) in [
        (
            "aclnnMeanGetWorkspaceSize",
            161002,
            AclStatusKind::ParamInvalid,
        ),
        (
            "aclnnAmaxGetWorkspaceSize",
            161001,
            AclStatusKind::ParamNullptr,
        ),
        ("aclnnNorm", 561103, AclStatusKind::Inner),
        ("aclrtSynchronizeStream", 361001, AclStatusKind::Runtime),
        ("aclrtMalloc", 207001, AclStatusKind::Other),
        ("aclrtMemcpy", 107000, AclStatusKind::Other),
    ] {
        mock.reset();
        mock.fail(call, status);
        let e = on_mock(&b, DType::Float16, &mut data, &[2]).unwrap_err();
        assert_eq!(e, Error::AclStatus { call, status });
        assert_eq!(AclStatusKind::of(status), kind);
        assert!(
            e.to_string()
                .starts_with(&format!("{call} failed with status {status} (")),
            "{e}"
        );
        // The executor of a failed first phase is the mock's own; everything we made is freed.
        let leaked = mock.live();
        let first_phase_ok = !call.ends_with("GetWorkspaceSize");
        assert!(
            leaked == 0 || (first_phase_ok && leaked == 1),
            "{call}: {leaked} live; {}",
            mock.log()
        );
    }
    for call in ["aclCreateTensor", "aclCreateIntArray", "aclCreateScalar"] {
        mock.reset();
        mock.fail(call, 0);
        assert_eq!(
            on_mock(&b, DType::Float16, &mut data, &[2]),
            Err(Error::AclNull { call })
        );
        assert_eq!(mock.live(), 0, "{call}");
    }
    mock.reset();
}

#[test]
fn missing_symbol_names_it() {
    let _g = serial();
    let Some(p) = build_mock("libacl_mock_nonorm", &["-DMOCK_OMIT_NORM"]) else {
        return;
    };
    let e = AclApi::load_from_paths(&paths(&p)).unwrap_err();
    assert_eq!(
        e,
        Error::SymbolMissing {
            library: OPAPI,
            symbol: "aclnnNormGetWorkspaceSize"
        }
    );
    assert_eq!(
        e.to_string(),
        "libopapi.so does not export the symbol `aclnnNormGetWorkspaceSize`"
    );
    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such-libnnopbase.so");
    let e = AclApi::load_from_paths(&LibPaths {
        nnopbase: missing.clone(),
        ..paths(&p)
    })
    .unwrap_err();
    match e {
        Error::LibraryNotFound { library, tried } => {
            assert_eq!(library, NNOPBASE);
            assert!(tried.starts_with(&missing.display().to_string()), "{tried}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn toolkit_directory_search() {
    let _g = serial();
    let Some(p) = mock_path() else { return };
    let lib64 = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("toolkit-{}/lib64", std::process::id()));
    std::fs::create_dir_all(&lib64).unwrap();
    for name in ["libascendcl.so", "libnnopbase.so", "libopapi.so"] {
        let link = lib64.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(p, &link).unwrap();
    }
    let api = AclApi::load_from_dirs(&[PathBuf::from("/nonexistent-toolkit/lib64"), lib64.clone()])
        .unwrap();
    let mock = Mock::open(p);
    mock.reset();
    mock.set_wide(true);
    let b = AclBackend::new(api, Precision::Low);
    let mut data = encode(DType::Int8, &[], &[-3, 5, 1]);
    let s = on_mock(&b, DType::Int8, &mut data, &[3]).unwrap().unwrap();
    assert_eq!(texts(&s), ["5", "-3", "1", "null"]);
    std::fs::remove_dir_all(lib64.parent().unwrap()).unwrap();
}
