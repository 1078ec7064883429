//! cargo-fuzz target: see `checks_onnx::onnx_cut` for the invariants.
#![no_main]

#[path = "../checks_onnx.rs"]
mod checks_onnx;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks_onnx::onnx_cut(data));
