//! Replays the `mapping_file` fuzz target's corpus and seeds (`fuzz/checks_mapping.rs`): every
//! file passes its invariants in a normal `cargo test`.

#[path = "../../fuzz/checks_mapping.rs"]
mod checks_mapping;

use std::path::Path;

#[test]
fn every_mapping_file_corpus_file_passes_its_target() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    for (target, check) in checks_mapping::TARGETS {
        let mut replayed = 0;
        for kind in ["corpus", "seeds"] {
            let Ok(entries) = std::fs::read_dir(fuzz.join(kind).join(target)) else {
                continue;
            };
            for e in entries {
                let p = e.unwrap().path();
                if p.is_file() {
                    let data = std::fs::read(&p).unwrap();
                    let r = std::panic::catch_unwind(|| check(&data));
                    assert!(r.is_ok(), "{target}: {} fails its invariants", p.display());
                    replayed += 1;
                }
            }
        }
        assert!(replayed > 0, "no corpus for fuzz target {target}");
    }
}

#[test]
fn hostile_texts_never_panic() {
    for text in [
        "",
        "exact:\n",
        "  :",
        ":",
        "exact:\n  :\n",
        "exact:\n  \"\": x\n",
        "exact:\n  'a: b\n",
        "exact:\n  a: \"\\",
        "exact:\n  a: \"\\q\"\n",
        "\u{feff}exact:\n",
        "exact:\n\t\ta: b\n",
        "regex:\n  \"(?P<n>x)\": \"${n}\"\n",
        "regex:\n  \"a{99999999}\": x\n",
        "# only\n---\n",
        "exact: {}\nexact:\n  a: b\n",
        "prefix:\n  '': x\n",
    ] {
        checks_mapping::mapping_file(text.as_bytes());
    }
}
