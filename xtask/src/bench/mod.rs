//! `cargo xtask bench-stats` (being written).

pub fn run(_args: &[String]) -> Result<(), String> {
    Err("bench-stats is not written yet".into())
}
