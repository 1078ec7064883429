//! Replays every committed fuzz input (`fuzz/corpus/<target>/` and `fuzz/seeds/<target>/`)
//! through the same entry points the cargo-fuzz targets call (`fuzz/checks.rs`), so a normal
//! `cargo test` keeps every input the fuzzers found interesting, and every crash they found,
//! passing.

#[path = "../../fuzz/checks.rs"]
mod checks;

use std::path::Path;

#[test]
fn every_corpus_file_passes_its_target() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    for (target, check) in checks::TARGETS {
        let mut replayed = 0;
        for kind in ["corpus", "seeds"] {
            let dir = fuzz.join(kind).join(target);
            let Ok(entries) = std::fs::read_dir(&dir) else {
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
        // The corpora are committed: an empty one means they were lost, not that all is well.
        assert!(
            replayed > 0,
            "no corpus for fuzz target {target} under {}",
            fuzz.display()
        );
    }
}
