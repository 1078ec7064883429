//! cargo-fuzz target: see `checks::stream_dialect` for the invariants.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::stream_dialect(data));
