//! The aclnn statistics backend (feature `acl`): device statistics of tensors in Ascend NPU
//! memory, computed by the aclnn reduction operators, with the CANN libraries loaded at run
//! time.
//!
//! - [`AclApi`]: the function table (`libloading`; no toolkit needed to build). A missing
//!   library gives [`Error::LibraryNotFound`](crate::Error::LibraryNotFound) naming it and the
//!   paths tried; a missing symbol gives
//!   [`Error::SymbolMissing`](crate::Error::SymbolMissing) naming it. Nothing panics.
//! - [`AclBackend`]: the four statistics of one tensor, with the semantics of
//!   [`device_stats`](crate::device_stats); non-zero status codes become
//!   [`Error::AclStatus`](crate::Error::AclStatus) naming the call ([`AclStatusKind`] explains
//!   the code).
//!
//! CI checks marshalling, the call order, workspace allocation and error mapping against a
//! mock library (`tests/mock/acl_mock.c`) that exports the same symbols over host memory. The
//! real libraries have not been exercised by this crate's tests.
//!
//! ```
//! use dump_device_ascend::acl::{AclApi, AclBackend};
//! use dump_stats::Precision;
//!
//! match AclApi::load() {
//!     Ok(api) => {
//!         let _backend = AclBackend::new(api, Precision::High);
//!         println!("aclnn statistics available");
//!     }
//!     // Without CANN: "could not load libascendcl.so (set ASCEND_TOOLKIT_HOME ...); tried: ..."
//!     Err(e) => println!("device statistics fall back to the simulated backend: {e}"),
//! }
//! ```

mod api;
mod backend;
mod types;

pub use api::{ASCENDCL, AclApi, LibPaths, NNOPBASE, OPAPI, search_dirs};
pub use backend::AclBackend;
pub use types::{AclStatusKind, AclStream, acl_dtype};
