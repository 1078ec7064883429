//! cargo-fuzz target: see `checks_cann::cann_dump` for the invariants.
#![no_main]

#[path = "../checks_cann.rs"]
mod checks_cann;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks_cann::cann_dump(data));
