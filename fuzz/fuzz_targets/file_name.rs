//! cargo-fuzz target: see `checks::file_name` for the invariants.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::file_name(data));
