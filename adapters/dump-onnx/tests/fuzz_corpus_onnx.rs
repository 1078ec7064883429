//! Replays every committed input of the `onnx_inline` fuzz target (`fuzz/corpus/onnx_inline/` and
//! `fuzz/seeds/onnx_inline/`) through the entry point the target calls (`fuzz/checks_onnx.rs`),
//! so a normal `cargo test` keeps every input the fuzzer found interesting passing.

#[path = "../../../fuzz/checks_onnx.rs"]
mod checks_onnx;

use std::path::Path;

#[test]
fn every_onnx_corpus_file_passes_its_target() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    for (target, check) in checks_onnx::TARGETS {
        let mut replayed = 0;
        for kind in ["corpus", "seeds"] {
            let Ok(entries) = std::fs::read_dir(fuzz.join(kind).join(target)) else {
                continue;
            };
            for e in entries {
                let p = e.unwrap().path();
                if !p.is_file() {
                    continue;
                }
                let data = std::fs::read(&p).unwrap();
                let r = std::panic::catch_unwind(|| check(&data));
                assert!(r.is_ok(), "{target}: {} fails its invariants", p.display());
                replayed += 1;
            }
        }
        assert!(replayed > 0, "no corpus for fuzz target {target}");
    }
}
