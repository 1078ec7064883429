//! The fuzzed entry point of `opdump compare --mapping` files (`dump_read::compare::Mapping`:
//! JSON, and the YAML subset parsed by hand) and its invariants, shared by the cargo-fuzz
//! target `fuzz_targets/mapping_file.rs` and the replay test
//! `dump-read/tests/mapping_file_corpus.rs`, which runs every file of `fuzz/corpus/mapping_file/`
//! and `fuzz/seeds/mapping_file/` through it in a normal `cargo test`.
#![allow(dead_code)]

use std::path::Path;

use dump_read::compare::Mapping;

/// One fuzzed entry point: takes arbitrary bytes, panics when an invariant breaks.
pub type Check = fn(&[u8]);

/// Every target of this file by name, for the replay test.
pub const TARGETS: [(&str, Check); 1] = [("mapping_file", mapping_file)];

/// Arbitrary text as a YAML and as a JSON mapping file: never a panic; an error names the
/// file; an accepted file answers lookups of every word in the text without panicking, and
/// the same way twice.
pub fn mapping_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for (name, parsed) in [
        (
            "fuzz.yaml",
            Mapping::parse_yaml(text, Path::new("fuzz.yaml")),
        ),
        (
            "fuzz.json",
            Mapping::parse_json(text, Path::new("fuzz.json")),
        ),
    ] {
        match parsed {
            Err(e) => assert!(e.to_string().contains(name), "{e}"),
            Ok(m) => {
                for word in text.split([' ', '\n', ':', '"', '\'']).take(64) {
                    assert_eq!(m.target(word), m.target(word));
                }
            }
        }
    }
}
