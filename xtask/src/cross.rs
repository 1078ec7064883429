//! `cargo xtask test-cross` (being written).

pub fn run(_args: &[String]) -> Result<(), String> {
    Err("test-cross is not written yet".into())
}
