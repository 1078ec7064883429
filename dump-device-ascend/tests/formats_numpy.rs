//! NC1HWC0_C04, NDC1HWC0 and FRACTAL_Z_3D against numpy: `gen_formats.py` makes each device
//! tensor with numpy's own pad/reshape/transpose (and checks msaccucmp's backward transposes
//! on it); here dump-device-ascend converts the same bytes, in one go ([`to_host`]) and block
//! by block ([`HostBlocks`], as `opdump convert` and the CANN dialect stream them), and both
//! must equal numpy's host tensor byte for byte.

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
    assert_eq!(cases.len(), 3);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let format = Format::parse(c["format"].as_str().unwrap()).unwrap();
        let (host_shape, dev_shape) = (dims(&c["host_shape"]), dims(&c["device_shape"]));
        let device = read(c["device"].as_str().unwrap());
        let host_npy = read(c["host"].as_str().unwrap());
        let (h, want) = dump_npy::read_npy(&host_npy).unwrap();
        assert_eq!(h.descr(), "<f2", "{name}");
        assert_eq!(h.dims().collect::<Vec<_>>(), host_shape, "{name}");

        let t = DeviceTensor {
            format,
            dtype: DType::Float16,
            device_shape: &dev_shape,
            host_shape: &host_shape,
            data: &device,
        };
        let mut out = vec![0u8; t.host_bytes().unwrap()];
        let view = to_host(&t, &mut out).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(view.data, want, "{name}: to_host");
        assert_eq!(view.format_name, "DefaultFormat");

        // Block by block with a block limit that still holds the largest block.
        let plan = HostBlocks::new(format, DType::Float16, &dev_shape, &host_shape, 1 << 20)
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
}
