//! cargo-fuzz target: see `checks::msprobe_config` for the invariants.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::msprobe_config(data));
