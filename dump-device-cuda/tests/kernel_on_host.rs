//! The kernels' own CUDA C++ (`HEAD` + `BODY`, everything but the two PTX f16 helpers),
//! compiled for the host with g++ and a few intrinsic shims, produces exactly the block
//! partials of [`model::partials`]. This checks, without a GPU, that the CUDA source's
//! per-thread state (types, roundings, 128-bit sums, NaN tracking, signed-zero extrema) is
//! what the model replays. The thread/warp/block replay (`host_cxx::RUN`) mirrors `stats_body`; on a
//! GPU, `tests/gpu.rs` checks the real launch against the model.
//!
//! Without g++ the test prints SKIP and passes.

mod host_cxx;
mod samples;

use dump_device_cuda::kernel_source::{KernelId, grid_for};
use dump_device_cuda::{Partial, model};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The harness: `harness TRAITS N GRID IN OUT` writes the partials of one launch.
const MAIN: &str = r#"
int main(int argc, char** argv) {
    if (argc != 6) return 2;
    const char* k = argv[1];
    u64 n = strtoull(argv[2], 0, 10);
    unsigned grid = (unsigned)strtoul(argv[3], 0, 10);
    FILE* f = fopen(argv[4], "rb");
    if (!f) return 3;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void* data = malloc(len + 16);
    if (fread(data, 1, len, f) != (size_t)len) return 4;
    fclose(f);
    Partial* out = (Partial*)calloc(grid, sizeof(Partial));
#define K(T) if (!strcmp(k, #T)) run<T>(data, n, grid, out); else
    K(F16High) K(F16Low) K(BF16High) K(BF16Low) K(F32High) K(F32Low) K(F64)
    K(I8) K(I16) K(I32) K(I64) K(U8) K(Bool) return 5;
    FILE* o = fopen(argv[5], "wb");
    if (!o || fwrite(out, sizeof(Partial), grid, o) != grid) return 6;
    fclose(o);
    return 0;
}
"#;

fn build_harness(dir: &Path) -> Option<PathBuf> {
    let exe = dir.join("harness");
    let source = host_cxx::kernel_cxx() + MAIN;
    host_cxx::gxx("kernel_on_host", &source, &exe, &[])?;
    Some(exe)
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn the_cuda_source_computes_what_the_model_replays() {
    let dir = std::env::temp_dir().join(format!("opdump-kernel-on-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let Some(exe) = build_harness(&dir) else {
        return;
    };
    for k in KernelId::ALL {
        let size = k.dtype.size().unwrap();
        let cases = [1usize, 5, 33, 1000, 4099, 70_001, 300_000]
            .into_iter()
            .map(|n| (n, false))
            .chain([(77, true), (5000, true)]);
        for (n, zeros) in cases {
            let mut data = samples::bytes_for(k.dtype, n, n as u64 ^ 0x5eed);
            if zeros {
                // Only +0 and -0 (floats) or 0 (integers): the extrema are signed zeros.
                for (i, b) in data.iter_mut().enumerate() {
                    let top = i % size == size - 1;
                    *b = if top && k.dtype.is_float() && (i / size) % 3 == 1 {
                        0x80
                    } else {
                        0
                    };
                }
            }
            let grid = grid_for(size, n as u64);
            let input = dir.join("in.bin");
            let output = dir.join("out.bin");
            std::fs::write(&input, &data).unwrap();
            let st = Command::new(&exe)
                .arg(k.traits())
                .arg(n.to_string())
                .arg(grid.to_string())
                .arg(&input)
                .arg(&output)
                .status()
                .unwrap();
            assert!(st.success(), "harness failed for {} n={n}: {st}", k.name());
            let raw = std::fs::read(&output).unwrap();
            assert_eq!(raw.len(), grid as usize * Partial::WORDS * 8);
            let cxx: Vec<Partial> = raw
                .chunks_exact(Partial::WORDS * 8)
                .map(|c| {
                    let mut w = [0u64; Partial::WORDS];
                    for (word, bytes) in w.iter_mut().zip(c.chunks_exact(8)) {
                        *word = u64::from_le_bytes(bytes.try_into().unwrap());
                    }
                    Partial::from_words(&w)
                })
                .collect();
            let rust = model::partials(k, &data, n).unwrap();
            assert_eq!(cxx.len(), rust.len());
            for (b, (c, r)) in cxx.iter().zip(&rust).enumerate() {
                let ctx = format!(
                    "{} n={n} zeros={zeros} block {b}:\n  c++  {c:?}\n  rust {r:?}",
                    k.name()
                );
                assert!(same(c.max, r.max) && same(c.min, r.min), "{ctx}\nextrema");
                assert!(
                    same(c.sum, r.sum) && same(c.sum_sq, r.sum_sq),
                    "{ctx}\nsums"
                );
                let ints = |p: &Partial| {
                    [
                        p.imax as u64,
                        p.imin as u64,
                        p.isum_lo,
                        p.isum_hi as u64,
                        p.nan,
                        p.pos_inf,
                        p.neg_inf,
                        p.zero,
                        p.pos,
                        p.neg,
                        p.first_nan_idx,
                        p.first_nan_raw,
                        p.last_nan_idx,
                        p.last_nan_raw,
                    ]
                };
                assert_eq!(ints(c), ints(r), "{ctx}\ncounts, integer sums, NaN");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
