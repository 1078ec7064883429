//! The Dumper with GPU tensors on a real NVIDIA GPU (`stat_calc_mode: device`, opdump's
//! extension): the rows of device tensors equal the rows of the same bytes on the host, for
//! every dtype the kernels support, and full dumps write the device bytes, whole or streamed
//! through the pinned pipeline. `cuda_mock_dumper.rs` checks the same paths (and launch
//! failures) against the mock driver; this file needs a GPU: without one it prints SKIP, and
//! `OPDUMP_REQUIRE_GPU=1` turns the skip into a failure. NVRTC is preloaded from
//! `OPDUMP_NVRTC_LIB_DIR` when set.

#[path = "../../dump-device-cuda/tests/real_gpu/mod.rs"]
mod real_gpu;
#[path = "../../dump-device-cuda/tests/samples/mod.rs"]
mod samples;

use dump_core::DType;
use dump_device_cuda::{CudaTensor, DeviceTensor};
use dump_host::{TensorRef, writer::WriterConfig};
use opdump_tests::{
    fsutil::{TempDir, npy_files},
    one_tensor::dump_gpu,
};

/// `n` elements of `dtype` whose every partial sum is exact in f64 (multiples of 1/4 in
/// [-20, 30) for floats, small integers otherwise), so device and host rows agree to the
/// last digit whatever the summation order.
fn exact(dtype: DType, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| {
            let v = (i % 200) as f64 * 0.25 - 20.0;
            let k = (i % 200) as i64 - 100;
            match dtype {
                DType::Float16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
                DType::BFloat16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
                DType::Float32 => (v as f32).to_le_bytes().to_vec(),
                DType::Float64 => v.to_le_bytes().to_vec(),
                DType::Int8 => (k as i8).to_le_bytes().to_vec(),
                DType::Int16 => (k as i16 * 300).to_le_bytes().to_vec(),
                DType::Int32 => (k as i32 * 70_000).to_le_bytes().to_vec(),
                DType::Int64 => (k * 5_000_000_000).to_le_bytes().to_vec(),
                DType::UInt8 => ((i % 200) as u8).to_le_bytes().to_vec(),
                DType::Bool => vec![(i % 3 == 0) as u8],
                other => panic!("no exact data for {other}"),
            }
        })
        .collect()
}

fn dump(tmp: &TempDir, saved_data: &str, writer: WriterConfig, t: TensorRef<'_>) -> Vec<String> {
    dump_gpu(tmp.path(), saved_data, writer, t)
}

#[test]
fn device_rows_equal_host_rows_for_every_dtype() {
    let Some(gpu) = real_gpu::gpu() else { return };
    let stream = gpu.context().default_stream();
    for dtype in samples::DTYPES {
        // Aligned [100, 100], and an odd [3, 333] viewed from one element past the start.
        for (shape, skip) in [([100usize, 100], 0usize), ([3, 333], 1)] {
            let n = shape[0] * shape[1];
            let size = dtype.size().unwrap();
            let bytes = exact(dtype, n + skip);
            let dev = stream.clone_htod(&bytes).unwrap();
            let whole = DeviceTensor::from_slice(&dev, dtype, n + skip).unwrap();
            // SAFETY: `dev` holds n + skip elements and outlives the view; all work runs on
            // `stream`, the slice's stream.
            let view =
                unsafe { DeviceTensor::from_raw(whole.ptr() + (skip * size) as u64, dtype, n) }
                    .unwrap();
            let ct = CudaTensor::new(&gpu, view, &shape, &stream).unwrap();
            let on_gpu = TempDir::new("cuda-gpu-stats");
            let got = dump(
                &on_gpu,
                "statistic",
                WriterConfig::default(),
                TensorRef::device(&ct),
            );
            let on_host = TempDir::new("cuda-gpu-host");
            let host = TensorRef::host(dtype, &shape, &bytes[skip * size..]);
            let want = dump(&on_host, "statistic", WriterConfig::default(), host);
            assert_eq!(got, want, "{dtype} {shape:?} skip {skip}");
            assert!(
                !got.is_empty() && !got[0].is_empty(),
                "{dtype}: an empty row"
            );
        }
    }
}

#[test]
fn full_dumps_write_the_device_bytes_whole_or_streamed() {
    let Some(gpu) = real_gpu::gpu() else { return };
    let stream = gpu.context().default_stream();
    // 10k elements, and 96 MiB + 1 element (streamed in several pinned chunks, odd tail).
    for n in [10_000usize, (96 << 20) / 4 + 1] {
        let bytes = exact(DType::Float32, n);
        let shape = [n];
        let dev = stream.clone_htod(&bytes).unwrap();
        let t = DeviceTensor::from_slice(&dev, DType::Float32, n).unwrap();
        let ct = CudaTensor::new(&gpu, t, &shape, &stream).unwrap();
        let on_host = TempDir::new("cuda-gpu-full-host");
        let host_row = dump(
            &on_host,
            "full",
            WriterConfig::default(),
            TensorRef::host(DType::Float32, &shape, &bytes),
        );
        for (label, writer) in [
            ("writer threads", WriterConfig::default()),
            ("calling thread (streamed)", WriterConfig::sync()),
        ] {
            let out = TempDir::new("cuda-gpu-full");
            let row = dump(&out, "full", writer, TensorRef::device(&ct));
            assert_eq!(row, host_row, "n={n} {label}: row");
            let files = npy_files(out.path());
            assert_eq!(files.len(), 1, "{files:?}");
            let npy = dump_npy::read_file(&files[0]).unwrap();
            assert_eq!(npy.shape, shape, "n={n} {label}");
            assert!(
                npy.data == bytes,
                "n={n} {label}: file differs from the device bytes"
            );
        }
    }
}
