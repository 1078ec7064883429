//! cargo-fuzz target: see `checks_mapping::mapping_file` for the invariants.
#![no_main]

#[path = "../checks_mapping.rs"]
mod checks_mapping;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks_mapping::mapping_file(data));
