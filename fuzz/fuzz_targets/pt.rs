//! cargo-fuzz target: see `checks_read::pt` for the invariants.
#![no_main]

#[path = "../checks_read.rs"]
mod checks_read;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks_read::pt(data));
