//! The Dumper with GPU tensors (`stat_calc_mode: device` on GPU, opdump's extension), end to
//! end against the mock driver of `dump-device-cuda/tests/mock_driver`: statistics come from
//! the device kernel without copying the tensor, equal the host statistics of the same bytes,
//! and tensor dumps copy the tensor to an `.npy` file byte for byte. Without g++ or NVRTC it
//! prints SKIP (fails with `CI=true`).

#[path = "../../dump-device-cuda/tests/host_cxx/mod.rs"]
mod host_cxx;
#[path = "../../dump-device-cuda/tests/mock_driver/mod.rs"]
mod mock_driver;
#[path = "../../dump-device-cuda/tests/nvrtc_probe/mod.rs"]
mod nvrtc_probe;

use dump_core::DType;
use dump_device_cuda::{CudaStats, CudaTensor, DeviceTensor};
use dump_host::{TensorRef, writer::WriterConfig};
use opdump_tests::{
    config::f32_bytes,
    fsutil::{TempDir, npy_files},
    one_tensor::dump_gpu,
};

/// Dumps one f32 output tensor `[100, 100]` with `saved_data`, either as a GPU tensor or as the
/// same bytes on the host; returns the statistic row's values from `Max Value` on.
fn dump(tmp: &TempDir, saved_data: &str, tensor: TensorRef<'_>) -> Vec<String> {
    dump_with(tmp, saved_data, tensor, WriterConfig::default())
}

/// [`dump`] with explicit writer settings.
fn dump_with(
    tmp: &TempDir,
    saved_data: &str,
    tensor: TensorRef<'_>,
    writer: WriterConfig,
) -> Vec<String> {
    dump_gpu(tmp.path(), saved_data, writer, tensor)
}

#[test]
fn gpu_tensors_dump_like_host_tensors() {
    let Some(mock) = mock_driver::load() else {
        return;
    };
    if !nvrtc_probe::require_nvrtc() {
        return;
    }
    let gpu = CudaStats::new(0).unwrap();
    let stream = gpu.context().default_stream();
    // Exact in f32 and in every partial sum, so device and host agree to the last digit.
    let values: Vec<f32> = (0..10_000)
        .map(|i| (i % 200) as f32 * 0.25 - 20.0)
        .collect();
    let bytes = f32_bytes(&values);
    let shape = [100usize, 100];
    let dev = stream.clone_htod(&bytes).unwrap();
    let t = DeviceTensor::from_slice(&dev, DType::Float32, values.len()).unwrap();
    let ct = CudaTensor::new(&gpu, t, &shape, &stream).unwrap();

    // Statistics only: computed on the device; only the block partials cross the bus.
    mock.log(true);
    let on_gpu = TempDir::new("cuda-mock-stats");
    let device_row = dump(&on_gpu, "statistic", TensorRef::device(&ct));
    let log = mock.log(true);
    assert!(
        log.contains("cuLaunchKernel opdump_stats_f32_high"),
        "{log}"
    );
    assert!(
        !log.contains("cuMemcpyDtoHAsync 40000"),
        "tensor copied:\n{log}"
    );
    // Deferred: the 10 block partials (144 bytes each) go into pinned memory behind the
    // kernel, and the row waits for them at the end of the step, not at the tensor.
    assert!(
        log.contains("cuMemcpyDtoHAsync 1440 pinned"),
        "partials not copied into pinned memory:\n{log}"
    );
    assert!(
        !log.contains("cuMemcpyDtoHAsync 1440 pageable"),
        "partials waited for at once:\n{log}"
    );
    let on_host = TempDir::new("cuda-mock-host");
    let host_row = dump(
        &on_host,
        "statistic",
        TensorRef::host(DType::Float32, &shape, &bytes),
    );
    assert_eq!(device_row, host_row);
    assert_eq!(device_row[0], "29.75", "max of the data");

    // A device that fails the launch: the Dumper falls back to copying the tensor and
    // computing on the host; the row is the same, and nothing fails.
    mock.fail("cuLaunchKernel", 719, 0);
    let fallback = TempDir::new("cuda-mock-fallback");
    assert_eq!(
        dump(&fallback, "statistic", TensorRef::device(&ct)),
        host_row
    );
    let log = mock.log(true);
    assert!(log.contains("injected failure 719"), "{log}");
    assert!(
        log.contains("cuMemcpyDtoHAsync 40000"),
        "no fallback copy:\n{log}"
    );

    // Full dump: the tensor is copied to the host and written as .npy, byte for byte; the
    // row has MindSpore's host columns (device statistics apply to statistic-only dumps).
    let full = TempDir::new("cuda-mock-full");
    let full_row = dump(&full, "full", TensorRef::device(&ct));
    assert_eq!(full_row[..4], host_row[..]);
    assert_eq!(full_row[4..], ["0", "50", "0"], "nan, zero, -inf counts");
    let log = mock.log(true);
    assert!(log.contains("cuMemcpyDtoHAsync 40000"), "{log}");
    let files = npy_files(full.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let npy = dump_npy::read_file(&files[0]).unwrap();
    assert_eq!(npy.shape, shape);
    assert!(npy.data == bytes, "npy data differs from the device bytes");

    // Written on the calling thread (a synchronous writer here; with writer threads, a tensor
    // the memory budget cannot hold): streamed through the pooled pinned pipeline, chunk by
    // chunk into the file and the row, never copied whole.
    let streamed = TempDir::new("cuda-mock-streamed");
    let row = dump_with(
        &streamed,
        "full",
        TensorRef::device(&ct),
        WriterConfig::sync(),
    );
    assert_eq!(row, full_row);
    let log = mock.log(true);
    assert!(log.contains("cuMemcpyDtoHAsync 40000 pinned"), "{log}");
    assert!(!log.contains("pageable"), "a whole-tensor copy:\n{log}");
    let files = npy_files(streamed.path());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(dump_npy::read_file(&files[0]).unwrap().data == bytes);
    assert_eq!(
        mock.device_bytes(),
        bytes.len(),
        "only the tensor stays allocated"
    );

    // Packed and float8 dtypes have no statistics kernel, but their byte-addressed views
    // stream like any tensor: int4, uint4, uint1 and float8 GPU tensors of odd lengths,
    // written by a synchronous writer, go through the pinned pipeline into the file (widened)
    // and the row, which equal the host dump's.
    for (dtype, n) in [
        (DType::Int4, 10_001usize),
        (DType::UInt4, 10_001),
        (DType::UInt1, 10_003),
        (DType::Float8E4M3FN, 10_001),
        (DType::Float8E5M2, 10_001),
        (DType::Float8E4M3FNUZ, 10_001),
        (DType::Float8E5M2FNUZ, 10_001),
    ] {
        let packed: Vec<u8> = (0..dtype.storage_bytes(n).unwrap())
            .map(|i| (i * 37 % 251) as u8)
            .collect();
        let dev = stream.clone_htod(&packed).unwrap();
        let t = DeviceTensor::from_slice(&dev, dtype, n).unwrap();
        let shape = [n];
        let ct = CudaTensor::new(&gpu, t, &shape, &stream).unwrap();
        mock.log(true);
        let on_gpu = TempDir::new("cuda-mock-packed");
        let gpu_row = dump_with(
            &on_gpu,
            "full",
            TensorRef::device(&ct),
            WriterConfig::sync(),
        );
        let log = mock.log(true);
        let copy = format!("cuMemcpyDtoHAsync {} pinned", packed.len());
        assert!(log.contains(&copy), "{dtype}: not streamed:\n{log}");
        let on_host = TempDir::new("cuda-mock-packed-host");
        let host = TensorRef::host(dtype, &shape, &packed);
        let host_row = dump_with(&on_host, "full", host, WriterConfig::sync());
        assert_eq!(gpu_row, host_row, "{dtype}");
        let read = |d: &TempDir| {
            let f = npy_files(d.path());
            assert_eq!(f.len(), 1, "{f:?}");
            dump_npy::read_file(&f[0]).unwrap()
        };
        let (g, h) = (read(&on_gpu), read(&on_host));
        let width = dtype.widened().size().unwrap();
        assert_eq!(
            (g.shape, g.data.len()),
            (vec![n], n * width),
            "{dtype}: one widened element per element"
        );
        assert!(g.data == h.data, "{dtype}: streamed file = host file");
        // Statistics only: no kernel takes these dtypes, so the Dumper copies the tensor and
        // computes the row on the host (the documented fallback): the host's row exactly.
        mock.log(true);
        let stats_gpu = TempDir::new("cuda-mock-packed-stats");
        let gpu_row = dump(&stats_gpu, "statistic", TensorRef::device(&ct));
        let log = mock.log(true);
        let whole = format!("cuMemcpyDtoHAsync {} ", packed.len());
        assert!(
            log.contains(&whole),
            "{dtype}: the fallback copies the tensor:\n{log}"
        );
        let stats_host = TempDir::new("cuda-mock-packed-stats-host");
        let host_row = dump(&stats_host, "statistic", host);
        assert_eq!(gpu_row, host_row, "{dtype}: fallback row = host row");
    }
}
