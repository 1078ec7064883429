//! Where the MindSpore 2.10 reference output lives: a trimmed copy in the repository.

use std::path::{Path, PathBuf};

use crate::{Prereq, check};

/// The copy in the repository: `tests/fixtures/reference/` of the workspace.
pub fn reference_fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/reference")
}

fn chosen() -> PathBuf {
    std::env::var_os("OPDUMP_REFERENCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(reference_fixture_dir)
}

pub(crate) fn probe() -> Result<(), String> {
    let dir = chosen();
    if dir.join("README.md").is_file() {
        Ok(())
    } else {
        Err(format!(
            "{} has no README.md (set OPDUMP_REFERENCE_DIR to MindSpore's reference output, or \
             restore tests/fixtures/reference)",
            dir.display()
        ))
    }
}

/// The reference directory: `$OPDUMP_REFERENCE_DIR` when set, else
/// [`reference_fixture_dir`]. `None` when it is missing (outside CI; in CI the test fails),
/// see [`crate::check`].
pub fn reference_dir() -> Option<PathBuf> {
    check(Prereq::ReferenceData, probe()).then(chosen)
}
