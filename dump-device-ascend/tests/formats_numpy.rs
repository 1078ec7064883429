//! NC1HWC0_C04, NDC1HWC0, FRACTAL_Z_3D and C1HWNCoC0 against numpy: `gen_formats.py` makes
//! each device tensor with numpy's own pad/reshape/transpose (C1HWNCoC0: placed on the
//! diagonal by indexing) and checks the way back on it; here dump-device-ascend converts the
//! same bytes, in one go ([`to_host`]) and block by block ([`HostBlocks`], as `opdump convert`
//! and the CANN dialect stream them), and both must equal numpy's host tensor byte for byte.

use std::path::{Path, PathBuf};

use dump_core::DType;
use dump_device_ascend::{DeviceTensor, Format, blocked::HostBlocks, to_host};
use serde_json::Value;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn dims(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

#[test]
fn every_new_format_converts_to_what_numpy_gives() {
    let manifest: Value = serde_json::from_slice(&read("manifest.json")).unwrap();
    let cases = manifest["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    let mut c1hwncoc0 = 0;
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let format = Format::parse(c["format"].as_str().unwrap()).unwrap();
        let (dtype, descr) = match c["dtype"].as_str().unwrap() {
            "float16" => (DType::Float16, "<f2"),
            "float32" => (DType::Float32, "<f4"),
            other => panic!("{name}: dtype {other}"),
        };
        let (host_shape, dev_shape) = (dims(&c["host_shape"]), dims(&c["device_shape"]));
        let mut device = read(c["device"].as_str().unwrap());
        let host_npy = read(c["host"].as_str().unwrap());
        let (h, want) = dump_npy::read_npy(&host_npy).unwrap();
        assert_eq!(h.descr(), descr, "{name}");
        assert_eq!(h.dims().collect::<Vec<_>>(), host_shape, "{name}");
        if format == Format::C1hwncoc0 {
            // numpy wrote zeros off the diagonal; anything there is padding, so NaN bits in
            // every off-diagonal element must change nothing below.
            c1hwncoc0 += 1;
            let c0 = dev_shape[5];
            let elem = dtype.size().unwrap();
            for (j, e) in device.chunks_exact_mut(elem).enumerate() {
                if (j / c0) % c0 != j % c0 {
                    e.fill(0xFF);
                }
            }
        }

        let t = DeviceTensor {
            format,
            dtype,
            device_shape: &dev_shape,
            host_shape: &host_shape,
            data: &device,
        };
        let mut out = vec![0u8; t.host_bytes().unwrap()];
        let view = to_host(&t, &mut out).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(view.data, want, "{name}: to_host");
        assert_eq!(view.format_name, "DefaultFormat");

        // Block by block with a block limit that still holds the largest block.
        let plan = HostBlocks::new(format, dtype, &dev_shape, &host_shape, 1 << 20)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (mut got, mut at) = (Vec::new(), 0);
        let mut buf = vec![0u8; plan.max_dst_bytes()];
        for i in 0..plan.count() {
            let len = plan.src_bytes(i);
            let k = plan.convert(i, &device[at..at + len], &mut buf).unwrap();
            got.extend_from_slice(&buf[..k]);
            at += len;
        }
        assert_eq!(
            at,
            device.len(),
            "{name}: the blocks cover the device bytes"
        );
        assert_eq!(got, want, "{name}: HostBlocks");
    }
    assert_eq!(c1hwncoc0, 3);
}
