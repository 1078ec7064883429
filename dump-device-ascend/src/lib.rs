//! `dump-device-ascend`: Ascend NPU support for opdump.
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(missing_docs)]
