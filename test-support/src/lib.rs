//! Test prerequisites for every opdump crate.
//!
//! A test that needs something outside the repository (python3 with numpy, a C or C++
//! compiler, permission to mount a tmpfs, NVRTC, a GPU, the MindSpore reference data) asks
//! [`require`] (or [`check`], when the test probes the thing itself). When it is there the
//! answer is `true`. When it is missing:
//!
//! - outside CI the answer is `false` and one line `SKIP <test>: needs <what>: <why>` goes to
//!   stderr, so the test returns early and says why; when `OPDUMP_SKIP_LOG` names a file
//!   ([`SKIP_LOG_VAR`]), the skip is also appended there with the install line, and
//!   `cargo xtask test` lists every skip at the end of the run;
//! - with `CI=true` (also `1` or `yes`) the test **panics** with the same reason: CI never
//!   passes a test that only skipped. [`Prereq::Gpu`] is the exception (CI machines have no
//!   GPU); it is required only with `OPDUMP_REQUIRE_GPU=1`. `OPDUMP_REQUIRE_NVRTC=1` requires
//!   NVRTC outside CI too.
//!
//! ```
//! use opdump_test_support::{Prereq, require};
//!
//! fn numpy_check() {
//!     if !require(Prereq::Numpy) {
//!         return; // skipped, and the reason was printed
//!     }
//!     // ... run python3 -c "import numpy; ..."
//! }
//! # let _ = numpy_check;
//! ```
//!
//! The MindSpore 2.10 reference output the tests compare with is a trimmed copy in the
//! repository (`tests/fixtures/reference/`); [`reference_dir`] finds it.
#![deny(missing_docs)]

mod files;
mod prereq;
mod process;
mod reference;
mod tmpfs;

pub use files::files_below;
pub use prereq::{Prereq, SKIP_LOG_VAR, check, require, required};
pub use process::KillOnDrop;
pub use reference::{reference_dir, reference_fixture_dir};
pub use tmpfs::Tmpfs;
