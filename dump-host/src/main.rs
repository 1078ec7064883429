//! The `opdump` command-line tool.
fn main() {}
