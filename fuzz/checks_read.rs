//! The fuzzed entry points of `dump-read`'s tensor containers and their invariants, shared
//! by the cargo-fuzz target `fuzz_targets/pt.rs` and the replay test
//! `dump-read/tests/pt_files.rs`, which runs every file of `fuzz/corpus/pt/` and
//! `fuzz/seeds/pt/` through it in a normal `cargo test`. (Kept apart from `checks.rs` so that
//! the replay builds with `-p dump-read` alone.) Also the `.pt` archive builder the tests use.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};

use dump_read::TensorFile;

/// One fuzzed entry point: takes arbitrary bytes, panics when an invariant breaks.
pub type Check = fn(&[u8]);

/// Every target of this file by name, for the replay test.
pub const TARGETS: [(&str, Check); 1] = [("pt", pt)];

/// A zip archive of stored entries `(name, bytes)`, as torch.save and numpy.savez write them.
pub fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in entries {
        w.start_file(*name, opts).unwrap();
        w.write_all(bytes).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// The pickle torch.save writes for a tensor: `_rebuild_tensor_v2` of storage `key` of class
/// `torch.{storage}` holding `numel` elements, at `offset`, with `shape` and `stride`.
pub fn tensor_pickle(
    storage: &str,
    key: &str,
    numel: u32,
    offset: u32,
    shape: &[u32],
    stride: &[u32],
) -> Vec<u8> {
    let mut p = vec![0x80, 2];
    p.extend_from_slice(
        b"ctorch._utils\n_rebuild_tensor_v2\nq\x00((X\x07\x00\x00\x00storageq\x01ctorch\n",
    );
    p.extend_from_slice(storage.as_bytes());
    p.push(b'\n');
    p.push(b'X');
    p.extend_from_slice(&(key.len() as u32).to_le_bytes());
    p.extend_from_slice(key.as_bytes());
    p.extend_from_slice(b"X\x03\x00\x00\x00cpuJ");
    p.extend_from_slice(&numel.to_le_bytes());
    p.extend_from_slice(b"tQJ");
    p.extend_from_slice(&offset.to_le_bytes());
    for dims in [shape, stride] {
        p.push(b'(');
        for d in dims {
            p.push(b'J');
            p.extend_from_slice(&d.to_le_bytes());
        }
        p.push(b't');
    }
    p.extend_from_slice(b"\x89ccollections\nOrderedDict\n)RtR.");
    p
}

/// A whole `.pt` file: `archive/data.pkl`, `archive/byteorder` and `archive/data/{key}`.
pub fn pt_file(pickle: &[u8], key: &str, storage: &[u8]) -> Vec<u8> {
    let data = format!("archive/data/{key}");
    zip_of(&[
        ("archive/data.pkl", pickle),
        ("archive/byteorder", b"little"),
        (&data, storage),
        ("archive/version", b"3\n"),
    ])
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opdump-fuzz-pt-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(format!("{tag}.pt"))
}

/// Opens `path` as a tensor file; when accepted, the data length is the elements times the
/// dtype's size and every byte streams; when refused, the error names the file.
fn open_and_stream(path: &Path) {
    match TensorFile::open(path) {
        Ok(mut f) => {
            let es = f.dtype.size().unwrap() as u64;
            assert_eq!(f.data_len, f.elems() as u64 * es, "length of {:?}", f.shape);
            let mut seen = 0u64;
            f.for_each_chunk(|c| {
                seen += c.len() as u64;
                Ok(())
            })
            .unwrap();
            assert_eq!(seen, f.data_len);
        }
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains(&path.display().to_string()), "{text}");
        }
    }
}

/// A `.pt` file: the bytes as a whole file, and (so that mutations reach the pickle) as the
/// `data.pkl` of a well-formed archive whose storage `0` holds 64 bytes.
pub fn pt(data: &[u8]) {
    let whole = scratch("whole");
    std::fs::write(&whole, data).unwrap();
    open_and_stream(&whole);
    let inner = scratch("pickle");
    std::fs::write(&inner, pt_file(data, "0", &[7u8; 64])).unwrap();
    open_and_stream(&inner);
}
