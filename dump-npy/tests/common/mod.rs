//! Helpers shared by the numpy integration tests.

use std::process::Command;

/// Whether `python3` can import numpy; prints why the caller skips when it cannot.
pub fn numpy_available() -> bool {
    match Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
    {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            println!(
                "SKIP: python3 cannot import numpy: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            false
        }
        Err(e) => {
            println!("SKIP: python3 not runnable: {e}");
            false
        }
    }
}
