//! The numpy oracle: >= 10^4 random tensors (f32, f16, f64, int32, int8, bool; NaN of both
//! signs, ±inf and −0 mixed in; sizes log-uniform from 1 to 10^6) go through the host engine and
//! the `statistic.csv` row formatter with every category; one python3 process computes every
//! expected cell with numpy in float64 (`'%g' % value`, counts, `hashlib.md5`, MindSpore's SHA-1
//! scheme) and the cells are compared. Only last-digit differences of avg/l2norm that come from
//! summation order are tolerated, and they must stay below 0.1% of those cells.
//!
//! Most tensors are small (every 50th size is log-uniform up to 10^6, the others up to 4096), so
//! the whole test moves about 100 MB.

use dump_core::DType;
use dump_stats::{
    CategorySet, Hashes,
    csv::{Io, RowMeta, row_string},
    engine::{Engine, TensorRef},
};
use opdump_test_support::{Prereq, require};
use std::{io::Write as _, path::PathBuf, process::Command};

/// splitmix64: a tiny deterministic generator, so that failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u = self.unit().max(1e-300);
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

const DTYPES: [DType; 6] = [
    DType::Float32,
    DType::Float16,
    DType::Float64,
    DType::Int32,
    DType::Int8,
    DType::Bool,
];

/// One random tensor's bytes.
fn tensor(rng: &mut Rng, dtype: DType, n: usize) -> Vec<u8> {
    // Float content: scale over many decades, zero-mean or offset, sometimes specials.
    let scale = 10f64.powf(rng.unit() * 12.0 - 6.0);
    let offset = if rng.below(2) == 0 {
        0.0
    } else {
        rng.normal() * scale * 3.0
    };
    let specials = rng.below(4) == 0;
    let mut vals: Vec<f64> = (0..n).map(|_| offset + rng.normal() * scale).collect();
    if specials && dtype.is_float() {
        let k = 1 + rng.below(4) as usize;
        for _ in 0..k {
            let i = rng.below(n as u64) as usize;
            vals[i] = match rng.below(6) {
                0 => f64::NAN,
                1 => -f64::NAN,
                2 => f64::INFINITY,
                3 => f64::NEG_INFINITY,
                4 => -0.0,
                _ => 0.0,
            };
        }
    }
    let mut out = Vec::with_capacity(n * 8);
    for v in vals {
        match dtype {
            DType::Float32 => out.extend((v as f32).to_le_bytes()),
            DType::Float64 => out.extend(v.to_le_bytes()),
            DType::Float16 => out.extend(half::f16::from_f64(v).to_le_bytes()),
            DType::Int32 => out.extend((rng.next() as i32).to_le_bytes()),
            DType::Int8 => out.push(rng.next() as u8),
            DType::Bool => out.push((rng.next() & 1) as u8),
            _ => unreachable!("only the dtypes above are generated"),
        }
    }
    out
}

/// Log-uniform size in [1, 10^decades].
fn size(rng: &mut Rng, decades: f64) -> usize {
    (10f64.powf(rng.unit() * decades) as usize).clamp(1, 1_000_000)
}

const PY: &str = r#"
import sys, hashlib, numpy as np
raw = open(sys.argv[1], 'rb').read()
dt = {'float32': np.float32, 'float16': np.float16, 'float64': np.float64,
      'int32': np.int32, 'int8': np.int8, 'bool': np.bool_}
def g(v):
    v = float(v)
    if v != v:
        return '-nan' if np.signbit(v) else 'nan'
    return '%g' % v
out = []
for line in open(sys.argv[2]):
    name, off, nbytes, n = line.split()
    off, nbytes, n = int(off), int(nbytes), int(n)
    b = raw[off:off + nbytes]
    a = np.frombuffer(b, dtype=dt[name]).astype(np.float64)
    isnan = np.isnan(a)
    nans = np.flatnonzero(isnan)
    with np.errstate(all='ignore'):
        if len(nans):
            mx = mn = a[nans[-1]]
            avg = l2 = a[nans[0]]
        else:
            mx, mn = a.max(), a.min()
            # MindSpore keeps the first of equal extrema (std::max(max, v)): with zeros of
            # both signs, the sign of the first zero in memory order.
            if mx == 0:
                mx = a[np.flatnonzero(a == 0)[0]]
            if mn == 0:
                mn = a[np.flatnonzero(a == 0)[0]]
            avg = np.sum(a) / n
            l2 = np.sqrt(np.sum(a * a))
    if n <= 20480:
        sha = hashlib.sha1(b).hexdigest()
    else:
        step = 20480 * np.dtype(dt[name]).itemsize
        sha = hashlib.sha1(''.join(hashlib.sha1(b[i:i + step]).hexdigest()
                                   for i in range(0, nbytes, step)).encode()).hexdigest()
    cells = [g(mx), g(mn), g(avg), str(n), str(int((a < 0).sum())), str(int((a > 0).sum())),
             str(int(isnan.sum())), str(int((a == -np.inf).sum())), str(int((a == np.inf).sum())),
             str(int((a == 0).sum())), hashlib.md5(b).hexdigest(), g(l2), sha]
    out.append(','.join(cells))
sys.stdout.write('\n'.join(out) + '\n')
"#;

fn scratch_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-h4-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Two `%g` texts that differ only by one unit in the last printed digit.
fn last_digit_neighbours(a: &str, b: &str) -> bool {
    let (Ok(x), Ok(y)) = (a.parse::<f64>(), b.parse::<f64>()) else {
        return false;
    };
    if !(x.is_finite() && y.is_finite()) || x.signum() != y.signum() {
        return false;
    }
    let mag = x.abs().max(y.abs());
    let unit = 10f64.powf(mag.log10().floor() - 5.0);
    (x - y).abs() <= unit * 1.000_001
}

#[test]
fn csv_cells_match_numpy_float64() {
    if !require(Prereq::Numpy) {
        return;
    }
    const TENSORS: usize = 10_000;
    let mut rng = Rng(0x0bd0_2026_1122_0004);
    let mut blob = Vec::new();
    let mut index = String::new();
    let mut spans = Vec::with_capacity(TENSORS);
    for k in 0..TENSORS {
        let dtype = DTYPES[k % DTYPES.len()];
        // Sizes are log-uniform over [1, 10^6] for every 50th tensor and over [1, 4096] for
        // the others (which keeps the test at about 25 M elements); every 2000th tensor is
        // exactly 10^6 elements, the top of the range.
        let n = match k {
            _ if k % 2000 == 7 => 1_000_000,
            _ if k % 50 == 3 => size(&mut rng, 6.0),
            _ => size(&mut rng, 4096f64.log10()),
        };
        let t = tensor(&mut rng, dtype, n);
        index.push_str(&format!(
            "{} {} {} {}\n",
            dtype.name(),
            blob.len(),
            t.len(),
            n
        ));
        spans.push((dtype, blob.len(), t.len(), n));
        blob.extend_from_slice(&t);
    }
    let dir = scratch_dir("oracle");
    let (bin, idx) = (dir.join("tensors.bin"), dir.join("index.txt"));
    std::fs::write(&bin, &blob).unwrap();
    std::fs::write(&idx, &index).unwrap();
    let py = Command::new("python3")
        .arg("-c")
        .arg(PY)
        .arg(&bin)
        .arg(&idx)
        .output()
        .expect("running python3");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        py.status.success(),
        "python oracle failed: {}",
        String::from_utf8_lossy(&py.stderr)
    );
    let expected = String::from_utf8(py.stdout).unwrap();
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(expected.len(), TENSORS);

    let cats = CategorySet::all();
    // Two threads and a low split threshold, so that big tensors take the parallel path.
    let engine = Engine::new(2).with_split_threshold(1 << 20);
    let jobs: Vec<_> = spans
        .iter()
        .map(|&(dtype, off, len, n)| {
            (
                TensorRef::new(dtype, &blob[off..off + len], n),
                Hashes {
                    md5: true,
                    sha1: true,
                },
            )
        })
        .collect();
    let results = engine.summarize_many(&jobs);
    let (mut float_cells, mut last_digit, mut hard) = (0usize, 0usize, Vec::new());
    for (k, ((&(dtype, _, len, n), r), exp)) in
        spans.iter().zip(&results).zip(&expected).enumerate()
    {
        let stats = r.as_ref().expect("engine result");
        let shape = [n];
        let meta = RowMeta {
            id: dump_stats::TensorId {
                op_type: "Op",
                op_name: "Default_Op-op0",
                task_id: 0,
                stream_id: 0,
                timestamp: 1,
                io: Io::Output,
                slot: 0,
            },
            data_size: len as u64,
            dtype,
            shape: &shape,
        };
        let row = row_string(&meta, &cats, stats).unwrap().expect("non-empty");
        let prefix = format!(
            "Op,Default_Op-op0,0,0,1,output,0,{len},{},\"({n})\",",
            dtype.name()
        );
        let cells = row
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix(",\n"))
            .unwrap_or_else(|| panic!("row layout: {row}"));
        for (c, (got, want)) in cells.split(',').zip(exp.split(',')).enumerate() {
            let is_sum = c == 2 || c == 11;
            float_cells += usize::from(is_sum);
            if got == want {
                continue;
            }
            if is_sum && last_digit_neighbours(got, want) {
                last_digit += 1;
            } else {
                let (off, len) = (spans[k].1, spans[k].2);
                let r = dump_core::stats::summarize_reference(dtype, &blob[off..off + len], n);
                hard.push(format!(
                    "tensor {k} ({dtype}, n={n}) column {c}: got {got}, numpy {want} \
                     (dump-core reference: {r:?})"
                ));
            }
        }
        assert_eq!(cells.split(',').count(), 13, "tensor {k}");
    }
    println!(
        "{TENSORS} tensors, {float_cells} avg/l2norm cells, {last_digit} last-digit differences"
    );
    assert!(
        hard.is_empty(),
        "{} cells differ:\n{}",
        hard.len(),
        hard[..hard.len().min(20)].join("\n")
    );
    assert!(
        last_digit * 1000 < float_cells,
        "{last_digit} of {float_cells} avg/l2norm cells differ in the last digit (limit 0.1%)"
    );
}

#[test]
fn md5_matches_python_hashlib() {
    if !require(Prereq::Python3) {
        return;
    }
    let mut rng = Rng(77);
    for n in [0usize, 1, 55, 64, 1000, 262_144, 262_145, 3_000_001] {
        let data: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        let mut child = Command::new("python3")
            .args([
                "-c",
                "import sys,hashlib;print(hashlib.md5(sys.stdin.buffer.read()).hexdigest())",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&data).unwrap();
        let out = child.wait_with_output().unwrap();
        let want = String::from_utf8(out.stdout).unwrap();
        for threads in [1, 2] {
            let st = Engine::new(threads)
                .with_split_threshold(0)
                .summarize(
                    TensorRef::new(DType::UInt8, &data, n),
                    Hashes {
                        md5: true,
                        sha1: false,
                    },
                )
                .unwrap();
            let got: String = st.md5.unwrap().iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(got, want.trim(), "n={n} threads={threads}");
        }
    }
}
